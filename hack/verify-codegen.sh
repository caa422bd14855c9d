#!/usr/bin/env bash
# Fails when the committed generated files differ from what hack/update-codegen.sh produces.
# Generation runs in a temporary copy, so the work tree is never touched.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The copy holds the tracked and untracked-but-not-ignored files, as the work tree has them.
(cd "$root" && git ls-files -z --cached --others --exclude-standard) |
  (cd "$root" && xargs -0 cp --parents -t "$tmp" 2>/dev/null || true)
"$tmp/hack/update-codegen.sh" >/dev/null

status=0
for dir in pkg/apis pkg/generated manifests/crd manifests/chart/crds hack/api-rule-violations.list; do
  if ! diff -Nru "$root/$dir" "$tmp/$dir"; then
    status=1
  fi
done
if [[ $status -ne 0 ]]; then
  echo "generated files are stale: run 'make generate' and commit the result" >&2
  exit 1
fi
echo "generated files are up to date"
