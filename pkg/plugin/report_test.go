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
)

// With status.allocation the report adds ALLOCATED, FREE and PENDING per model, ALLOC and
// FREE per node (wide: PODS), the totals in the header and the demand no model row shows.
func TestAllocationReportGolden(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		terminal bool
	}{
		{"alloc-table", nil, false},
		{"alloc-table-terminal", nil, true},
		{"alloc-wide", []string{"-o", "wide"}, false},
		{"alloc-problems", []string{"--problems"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runPlugin(context.Background(), freeClients(t), tc.terminal, nil, tc.args...)
			if r.code != factory.ExitOK || r.err != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.err)
			}
			golden(t, "mixed-"+tc.name+".golden", r.out)
			if tc.terminal {
				plain := runPlugin(context.Background(), freeClients(t), false, nil, tc.args...)
				if got := ansi.ReplaceAllString(r.out, ""); got != plain.out {
					t.Errorf("terminal output without its colour codes differs from the plain output:\n--- terminal\n%s--- plain\n%s", got, plain.out)
				}
			}
		})
	}
	// -o json and -o yaml print the object, allocation included.
	for _, output := range []string{"json", "yaml"} {
		r := runPlugin(context.Background(), freeClients(t), false, nil, "-o", output)
		if r.code != factory.ExitOK || !strings.Contains(r.out, "allocatedMilliGpus") || !strings.Contains(r.out, "nodesWith1Free") {
			t.Errorf("-o %s: exit %d, no allocation in:\n%.400s", output, r.code, r.out)
		}
	}
}
