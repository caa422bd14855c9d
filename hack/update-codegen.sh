#!/usr/bin/env bash
# Regenerates everything derived from the Go types in pkg/apis:
#   - deepcopy functions (zz_generated.deepcopy.go)
#   - OpenAPI definitions (pkg/generated/openapi), from which an OpenAPI schema is written so
#     that the apply configurations know the type's structure (the fake clientset needs it
#     to accept server-side apply)
#   - clientset, listers, informers and apply configurations (pkg/generated)
#   - the CRD manifests (manifests/crd, which the operator binary embeds, and the Helm chart's copy)
# Generators are pinned in go.mod's tool block; nothing is installed outside the Go caches.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
module=$(go list -m)
boilerplate="$root/hack/boilerplate.go.txt"

# .Dir is empty until the module is in the module cache (a fresh machine): download it first.
go mod download k8s.io/code-generator
codegen_dir=$(go list -m -f '{{.Dir}}' k8s.io/code-generator)
if [[ ! -f "$codegen_dir/kube_codegen.sh" ]]; then
  echo "k8s.io/code-generator's kube_codegen.sh not found (module dir: '$codegen_dir')" >&2
  exit 1
fi
# shellcheck source=/dev/null
source "$codegen_dir/kube_codegen.sh"

kube::codegen::gen_helpers --boilerplate "$boilerplate" "$root/pkg/apis"

kube::codegen::gen_openapi \
  --output-dir "$root/pkg/generated/openapi" \
  --output-pkg "$module/pkg/generated/openapi" \
  --report-filename "$root/hack/api-rule-violations.list" \
  --update-report \
  --boilerplate "$boilerplate" \
  "$root/pkg/apis"

schema=$(mktemp)
trap 'rm -f "$schema"' EXIT
go run ./hack/openapi-schema > "$schema"

kube::codegen::gen_client \
  --with-watch \
  --with-applyconfig \
  --applyconfig-openapi-schema "$schema" \
  --output-dir "$root/pkg/generated" \
  --output-pkg "$module/pkg/generated" \
  --boilerplate "$boilerplate" \
  "$root/pkg/apis"

rm -f "$root"/manifests/crd/*.yaml
go tool controller-gen crd paths=./pkg/apis/... output:crd:dir="$root/manifests/crd"
# The Helm chart ships the same CRDs (a chart cannot read files outside its directory).
rm -f "$root"/manifests/chart/crds/*.yaml
cp "$root"/manifests/crd/*.yaml "$root/manifests/chart/crds/"
