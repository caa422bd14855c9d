#!/usr/bin/env bash
# Builds the real control-plane components (kube-apiserver, etcd, kwok) from the Go module
# proxy into a cache outside the source tree, and prints the directory that holds them.
# A rebuild happens only when the pinned versions (hack/testbin/**/go.{mod,sum}) or wrappers change.
#
#   TESTBIN_DIR=/path  overrides the cache location
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src="$root/hack/testbin"
key=$(cd "$src" && cat go.mod go.sum kube-apiserver/main.go etcd/main.go kwok/go.mod kwok/go.sum | sha256sum | cut -c1-16)
dir=${TESTBIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-inventory-operator/testbin/$key}
mkdir -p "$dir"

build() { # name, module dir, package
  local name=$1 moddir=$2 pkg=$3
  if [[ -x "$dir/$name" ]]; then return; fi
  echo ">> building $name into $dir (once; kube-apiserver takes about 5 minutes on 2 cores)" >&2
  local start=$SECONDS
  (cd "$moddir" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$dir/$name.tmp" "$pkg")
  mv "$dir/$name.tmp" "$dir/$name"
  echo ">> built $name in $((SECONDS - start))s" >&2
}

build etcd "$src" ./etcd
build kube-apiserver "$src" ./kube-apiserver
build kwok "$src/kwok" sigs.k8s.io/kwok/cmd/kwok

if [[ ! -f "$dir/kwok-stages.yaml" ]]; then
  kwokdir=$(cd "$src/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
  { cat "$kwokdir/kustomize/stage/node/fast/node-initialize.yaml"; echo "---"
    cat "$kwokdir/kustomize/stage/node/heartbeat/node-heartbeat.yaml"; } > "$dir/kwok-stages.yaml.tmp"
  mv "$dir/kwok-stages.yaml.tmp" "$dir/kwok-stages.yaml"
fi

echo "$dir"
