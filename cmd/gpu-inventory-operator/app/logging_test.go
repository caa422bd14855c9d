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

package app

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// runMainEnv makes the test binary act as the operator: logging is process-global, so each
// format is checked in a process of its own.
const runMainEnv = "GPUINV_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(runMainEnv); ok {
		os.Exit(Main(strings.Fields(args)))
	}
	os.Exit(m.Run())
}

func runOperator(t *testing.T, args ...string) (stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), runMainEnv+"="+strings.Join(args, " "))
	var out strings.Builder
	cmd.Stderr = &out
	cmd.Stdout = &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatal(err)
	}
	return out.String(), code
}

// An operator that cannot start says why in the chosen log format, and exits 1.
func TestLoggingFormats(t *testing.T) {
	missing := "--kubeconfig=" + t.TempDir() + "/missing"

	out, code := runOperator(t, missing, "--logging-format=json")
	if code != 1 {
		t.Errorf("exit code %d, want 1; output:\n%s", code, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var entry struct {
		Msg string `json:"msg"`
		Err string `json:"err"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &entry); err != nil {
		t.Fatalf("--logging-format=json wrote a line that is not JSON: %v\n%s", err, out)
	}
	if entry.Msg != "Cannot start" || !strings.Contains(entry.Err, "load kubeconfig") {
		t.Errorf("JSON log entry = %+v, want msg \"Cannot start\" with the kubeconfig error", entry)
	}

	out, code = runOperator(t, missing)
	if code != 1 || !strings.Contains(out, `"Cannot start" err="load kubeconfig`) || strings.HasPrefix(out, "{") {
		t.Errorf("default text log: exit %d, output:\n%s", code, out)
	}

	out, code = runOperator(t, "--logging-format=xml")
	if code != 2 || !strings.Contains(out, `Unsupported log format`) {
		t.Errorf("--logging-format=xml: exit %d, output:\n%s", code, out)
	}
}
