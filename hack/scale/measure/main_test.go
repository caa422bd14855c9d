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

import "testing"

func TestRunMeasuresACommandThatExitsNonZero(t *testing.T) {
	r, err := run("sh", "-c", "exit 4")
	if err != nil {
		t.Fatalf("a command that exits 4 is measured, got %v", err)
	}
	if r.ExitCode != 4 {
		t.Errorf("exit code %d, want 4", r.ExitCode)
	}
	if r.MaxRSSKiB <= 0 {
		t.Errorf("max RSS %d KiB, want the child's", r.MaxRSSKiB)
	}
}

func TestRunFailsForACommandThatDoesNotStart(t *testing.T) {
	if _, err := run("/nonexistent/command"); err == nil {
		t.Error("a command that cannot start is an error")
	}
}
