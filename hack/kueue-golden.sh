#!/usr/bin/env bash
# Regenerates pkg/gang/testdata/kueue-golden.json.gz: random clusters and gangs, answered by
# Kueue's own Topology Aware Scheduling code (its pkg/cache/scheduler, at the version
# hack/testbin/kueue pins). pkg/gang's TestKueueGolden checks PlaceAsKueue against them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
n=${GOLDEN_N:-400}

dir=$(cd hack/testbin/kueue && go mod download -json sigs.k8s.io/kueue | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$dir/." "$work"
chmod -R u+w "$work"
cp hack/kueue-golden/golden_test.go.txt "$work/pkg/cache/scheduler/zz_golden_test.go"
(cd "$work" && GOLDEN_N=$n GOLDEN_OUT="$work/golden.json" GOFLAGS=-mod=mod go test -count=1 -run TestGenerateGolden ./pkg/cache/scheduler/)
gzip -9 -n -c "$work/golden.json" > "$root/pkg/gang/testdata/kueue-golden.json.gz"
echo "wrote pkg/gang/testdata/kueue-golden.json.gz ($n scenarios)"
