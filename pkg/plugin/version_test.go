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

package plugin

import (
	"context"
	"strings"
	"testing"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/version"
)

// --version prints the build's version, commit, date and Go version without a cluster.
func TestVersionFlag(t *testing.T) {
	r := runPlugin(context.Background(), nil, false, nil, "--version")
	want := "kubectl gpuinv " + version.Get().String() + "\n"
	if r.code != factory.ExitOK || r.out != want || !strings.Contains(r.out, "(commit ") {
		t.Errorf("--version: exit %d, output %q, want %q", r.code, r.out, want)
	}
}
