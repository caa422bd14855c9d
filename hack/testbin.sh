#!/usr/bin/env bash
# Builds the real control-plane components (kube-apiserver, etcd, kwok, kube-scheduler and the
# ResourceClaim controller) from the Go module proxy into a cache outside the source tree, and
# prints the directory that holds them. A rebuild happens only when the pinned versions
# (hack/testbin/**/go.{mod,sum}) or wrappers change. The directory's name hashes what the first
# three are built from; the later ones are checked against their own NAME.key files, so adding
# them did not rebuild kube-apiserver.
#
#   TESTBIN_DIR=/path  overrides the cache location
set -euo pipefail

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

build etcd "$src" ./etcd
build kube-apiserver "$src" ./kube-apiserver
build kwok "$src/kwok" sigs.k8s.io/kwok/cmd/kwok
build_keyed kube-scheduler "$stamp"
# resourceclaim-controller imports client-go, klog and apiserver, which go.mod lists as
# indirect: `go mod tidy` would mark them direct and so rebuild everything; leave that to the
# next change of go.mod.
build_keyed resourceclaim-controller

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

# promtool (tests the shipped Prometheus rules) and prometheus (serves DCGM exporter's series to
# the integration tests), from hack/testbin/prometheus (its own module), rebuilt when its go.mod
# or go.sum differ from the ones prometheus.key was written for. Stamped with the release
# version, which `--version` and /api/v1/status/buildinfo report.
build_prometheus() {
  local key moddir=$src/prometheus version
  key=$(cd "$moddir" && cat go.mod go.sum | sha256sum | cut -c1-16)
  if [[ "$(cat "$dir/prometheus.key" 2>/dev/null)" == "$key" && -x "$dir/promtool" && -x "$dir/prometheus" ]]; then return; fi
  rm -f "$dir/promtool" "$dir/prometheus" "$dir/prometheus.key"
  version=$(cat "$(cd "$moddir" && go list -m -f '{{.Dir}}' github.com/prometheus/prometheus)/VERSION")
  local ldflags="-s -w -X github.com/prometheus/common/version.Version=$version"
  build promtool "$moddir" github.com/prometheus/prometheus/cmd/promtool "$ldflags"
  build prometheus "$moddir" github.com/prometheus/prometheus/cmd/prometheus "$ldflags"
  echo "$key" > "$dir/prometheus.key.tmp"
  mv "$dir/prometheus.key.tmp" "$dir/prometheus.key"
}
build_prometheus

echo "$dir"
