#!/usr/bin/env bash
# Builds the real control-plane components (kube-apiserver, etcd, kwok, kube-scheduler, the
# ResourceClaim and Job controllers, Kueue and its CRDs, Prometheus) from the Go module proxy
# into a cache outside the source tree, and
# prints the directory that holds them. A rebuild happens only when the pinned versions
# (hack/testbin/**/go.{mod,sum}) or wrappers change. The directory's name hashes what the first
# three are built from; the later ones are checked against their own NAME.key files, so adding
# them did not rebuild kube-apiserver.
#
#   hack/testbin.sh            builds everything (make test needs all of it)
#   hack/testbin.sh NAME...    builds only those: etcd, kube-apiserver, kwok, kube-scheduler,
#                              resourceclaim-controller, job-controller, kueue, prometheus, or
#                              demo (what `make demo` runs: etcd, kube-apiserver, kwok,
#                              kube-scheduler, job-controller and kueue)
#   TESTBIN_DIR=/path  overrides the cache location
set -euo pipefail

all=(etcd kube-apiserver kwok kube-scheduler resourceclaim-controller job-controller kueue prometheus)
declare -A wanted=()
for arg in "${@:-${all[@]}}"; do
  case $arg in
    demo) for n in etcd kube-apiserver kwok kube-scheduler job-controller kueue; do wanted[$n]=1; done ;;
    etcd|kube-apiserver|kwok|kube-scheduler|resourceclaim-controller|job-controller|kueue|prometheus) wanted[$arg]=1 ;;
    *) echo "hack/testbin.sh: unknown component \"$arg\"; want any of: ${all[*]} demo" >&2; exit 2 ;;
  esac
done
want() { [[ -n ${wanted[$1]:-} ]]; }

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src="$root/hack/testbin"
key=$(cd "$src" && cat go.mod go.sum kube-apiserver/main.go etcd/main.go kwok/go.mod kwok/go.sum | sha256sum | cut -c1-16)
dir=${TESTBIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-inventory-operator/testbin/$key}
mkdir -p "$dir"

build() { # name, module dir, package[, ldflags]
  local name=$1 moddir=$2 pkg=$3 ldflags=${4:-'-s -w'}
  if [[ -x "$dir/$name" ]]; then return; fi
  echo ">> building $name into $dir (once; kube-apiserver takes about 5 minutes on 2 cores)" >&2
  local start=$SECONDS
  (cd "$moddir" && CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$dir/$name.tmp" "$pkg")
  mv "$dir/$name.tmp" "$dir/$name"
  echo ">> built $name in $((SECONDS - start))s" >&2
}

# build_keyed builds a wrapper of the main module ($src/NAME/main.go) when NAME.key, the hash
# of its main.go, go.mod and go.sum, differs from the one it was built from.
build_keyed() { # name[, ldflags]
  local name=$1 key
  key=$(cd "$src" && cat go.mod go.sum "$name/main.go" | sha256sum | cut -c1-16)
  if [[ "$(cat "$dir/$name.key" 2>/dev/null)" == "$key" && -x "$dir/$name" ]]; then return; fi
  rm -f "$dir/$name"
  build "$name" "$src" "./$name" "${2:-}"
  echo "$key" > "$dir/$name.key.tmp"
  mv "$dir/$name.key.tmp" "$dir/$name.key"
}

# stamp gives a server the release version: unstamped it reports v0.0.0-master+$Format:%H$.
stamp='-s -w -X k8s.io/component-base/version.gitVersion=v1.37.2 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37'

if want etcd; then build etcd "$src" ./etcd; fi
# kube-apiserver is stamped too: Kueue refuses a server whose /version it cannot parse.
if want kube-apiserver; then build_keyed kube-apiserver "$stamp"; fi
if want kwok; then build kwok "$src/kwok" sigs.k8s.io/kwok/cmd/kwok; fi
if want kube-scheduler; then build_keyed kube-scheduler "$stamp"; fi
# resourceclaim-controller imports client-go, klog and apiserver, which go.mod lists as
# indirect: `go mod tidy` would mark them direct and so rebuild everything; leave that to the
# next change of go.mod.
if want resourceclaim-controller; then build_keyed resourceclaim-controller; fi
# job-controller makes the pods of the Jobs that Kueue admits.
if want job-controller; then build_keyed job-controller; fi

# Kueue's controller and CRDs, from hack/testbin/kueue (its own module, keyed on its go.mod,
# go.sum and the two functions below). Tests read the CRDs from $dir/kueue-crds, never the
# module cache.
#
# kueue_main prints Kueue's cmd/kueue/main.go with one change: the metrics certificate
# directory, fixed at /etc/kueue/metrics/certs when internal cert management is off, is the
# flag --metrics-cert-dir (default unchanged), so that Kueue runs as any user with a
# self-signed pair from a temporary directory. Internal cert management is no way out: it
# waits to inject its CA into webhook configurations and conversion CRDs, which need Kueue's
# Service in a cluster.
kueue_main() { # kueue module dir
  local main=$1/cmd/kueue/main.go out
  out=$(sed 's|metricsCertPath := "/etc/kueue/metrics/certs"|metricsCertPath := *metricsCertDir|' "$main")
  if [[ $(grep -c 'metricsCertPath := \*metricsCertDir' <<<"$out") != 1 ]]; then
    echo "hack/testbin.sh: $main no longer sets metricsCertPath as kueue_main expects; update kueue_main" >&2
    return 1
  fi
  cat <<<"$out"
  cat <<'EOF'

var metricsCertDir = flag.String("metrics-cert-dir", "/etc/kueue/metrics/certs",
	"directory of the metrics server's tls.crt and tls.key when internal cert management is off")
EOF
}
build_kueue() {
  local key kueuedir kueueversion tmp start=$SECONDS
  key=$( (cd "$src/kueue" && cat go.mod go.sum; declare -f kueue_main build_kueue) | sha256sum | cut -c1-16)
  if [[ "$(cat "$dir/kueue.key" 2>/dev/null)" == "$key" && -x "$dir/kueue" && -d "$dir/kueue-crds" ]]; then return; fi
  echo ">> building kueue into $dir (once; about 3 to 8 minutes on 2 cores)" >&2
  rm -rf "$dir/kueue" "$dir/kueue-crds" "$dir/kueue-crds.tmp"
  (cd "$src/kueue" && go mod download sigs.k8s.io/kueue) # go list -m shows no Dir before
  kueuedir=$(cd "$src/kueue" && go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)
  kueueversion=$(cd "$src/kueue" && go list -m -f '{{.Version}}' sigs.k8s.io/kueue)
  tmp=$(mktemp -d)
  # The patched main.go goes in by -overlay, as the file of a directory that exists only in
  # the overlay: nothing is written to the source tree or the module cache.
  if ! kueue_main "$kueuedir" > "$tmp/main.go"; then rm -rf "$tmp"; return 1; fi
  printf '{"Replace":{"%s":"%s"}}\n' "$src/kueue/cmd/kueue/main.go" "$tmp/main.go" > "$tmp/overlay.json"
  if ! (cd "$src/kueue" && CGO_ENABLED=0 go build -overlay "$tmp/overlay.json" -trimpath \
      -ldflags="-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$kueueversion" -o "$dir/kueue.tmp" ./cmd/kueue); then
    rm -rf "$tmp"
    return 1
  fi
  rm -rf "$tmp"
  mkdir "$dir/kueue-crds.tmp"
  cp "$kueuedir"/config/components/crd/bases/*.yaml "$dir/kueue-crds.tmp/"
  chmod u+w "$dir"/kueue-crds.tmp/*.yaml # the module cache's files are read-only
  mv "$dir/kueue-crds.tmp" "$dir/kueue-crds"
  mv "$dir/kueue.tmp" "$dir/kueue"
  echo "$key" > "$dir/kueue.key.tmp"
  mv "$dir/kueue.key.tmp" "$dir/kueue.key"
  echo ">> built kueue in $((SECONDS - start))s" >&2
}
if want kueue; then build_kueue; fi

# kwok-stages.yaml runs nodes only (tests set pod phases themselves); kwok-pod-stages.yaml also
# runs the pods bound to kwok's nodes: Running at once, Succeeded for a Job's, deletions done.
kwokdir=
stages() { # file, stage files under the kwok module's kustomize/stage
  local file=$1; shift
  if [[ -f "$dir/$file" ]]; then return; fi
  kwokdir=${kwokdir:-$(cd "$src/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)}
  local first=1 f
  for f in "$@"; do
    if [[ $first == 0 ]]; then echo "---"; fi
    first=0
    cat "$kwokdir/kustomize/stage/$f"
  done > "$dir/$file.tmp"
  mv "$dir/$file.tmp" "$dir/$file"
}
nodestages=(node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml)
stages kwok-stages.yaml "${nodestages[@]}"
stages kwok-pod-stages.yaml "${nodestages[@]}" pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml
# kwok-job-stages.yaml runs pods as kwok-pod-stages.yaml, but a Job's pods run until deleted, as
# training jobs holding their GPUs do (Kueue tests count what they reserve).
stages kwok-job-stages.yaml "${nodestages[@]}" pod/fast/pod-ready.yaml pod/fast/pod-delete.yaml

# promtool (tests the shipped Prometheus rules) and prometheus (serves DCGM exporter's series to
# the integration tests), from hack/testbin/prometheus (its own module), rebuilt when its go.mod
# or go.sum differ from the ones prometheus.key was written for. Stamped with the release
# version, which `--version` and /api/v1/status/buildinfo report.
build_prometheus() {
  local key moddir=$src/prometheus version
  key=$(cd "$moddir" && cat go.mod go.sum | sha256sum | cut -c1-16)
  if [[ "$(cat "$dir/prometheus.key" 2>/dev/null)" == "$key" && -x "$dir/promtool" && -x "$dir/prometheus" ]]; then return; fi
  rm -f "$dir/promtool" "$dir/prometheus" "$dir/prometheus.key"
  # go list -m names no directory for a module not yet in the module cache: download it first.
  (cd "$moddir" && go mod download github.com/prometheus/prometheus)
  version=$(cat "$(cd "$moddir" && go list -m -f '{{.Dir}}' github.com/prometheus/prometheus)/VERSION")
  local ldflags="-s -w -X github.com/prometheus/common/version.Version=$version"
  build promtool "$moddir" github.com/prometheus/prometheus/cmd/promtool "$ldflags"
  build prometheus "$moddir" github.com/prometheus/prometheus/cmd/prometheus "$ldflags"
  echo "$key" > "$dir/prometheus.key.tmp"
  mv "$dir/prometheus.key.tmp" "$dir/prometheus.key"
}
if want prometheus; then build_prometheus; fi

echo "$dir"
