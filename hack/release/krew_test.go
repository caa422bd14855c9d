/*
Copyright The gpu-inventory-operator Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package main

import (
	"strings"
	"testing"
)

func TestRenderKrew(t *testing.T) {
	template := "# How to fill this in: ${VERSION}, ${SHA256_LINUX_AMD64}.\n#\n\napiVersion: v1\nspec:\n  version: ${VERSION}\n  uri: https://example.com/${VERSION}/kubectl-gpuinv_${VERSION}_linux_amd64.tar.gz\n  sha256: \"${SHA256_LINUX_AMD64}\"\n"
	sums := map[string]string{"kubectl-gpuinv_v1.2.3_linux_amd64.tar.gz": strings.Repeat("ab", 32)}
	got, err := RenderKrew([]byte(template), "v1.2.3", "kubectl-gpuinv", sums)
	if err != nil {
		t.Fatal(err)
	}
	want := "# kubectl gpuinv v1.2.3 for krew, rendered by make release (hack/release) from hack/krew/gpuinv.yaml.\n" +
		"apiVersion: v1\nspec:\n  version: v1.2.3\n  uri: https://example.com/v1.2.3/kubectl-gpuinv_v1.2.3_linux_amd64.tar.gz\n  sha256: \"" + strings.Repeat("ab", 32) + "\"\n"
	if string(got) != want {
		t.Errorf("rendered\n%s\nwant\n%s", got, want)
	}

	for _, tc := range []struct{ template, want string }{
		{"spec:\n  version: ${VERSION}\n  x: ${COMMIT}\n  y: $HOME\n", "unknown placeholders ${COMMIT}, ${HOME}"},
		{"sha256: ${SHA256_LINUX_S390X}\n", "no sums for kubectl-gpuinv_v1.2.3_linux_s390x.tar.gz"},
		{"sha256: ${SHA256_LINUX}\n", "unknown placeholders ${SHA256_LINUX}"},
	} {
		if _, err := RenderKrew([]byte(tc.template), "v1.2.3", "kubectl-gpuinv", sums); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("template %q: %v, want an error containing %q", tc.template, err, tc.want)
		}
	}
}
