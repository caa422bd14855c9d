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
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// --help prints the flags in Kubernetes' sections, so scripts that grep it find them.
func TestHelpListsSectionsAndFlags(t *testing.T) {
	out, code := runOperator(t, "--help")
	if code != 0 {
		t.Errorf("--help: exit %d, want 0", code)
	}
	for _, want := range []string{"Generic flags:", "Leader election flags:", "Metrics flags:", "Logging flags:",
		"--metrics-bind-address", "--leader-elect", "--kubeconfig", "--logging-format", "-v, --v", "-h, --help"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help does not show %q:\n%s", want, out)
		}
	}
	generic, metricsAt := strings.Index(out, "Generic flags:"), strings.Index(out, "Metrics flags:")
	if at := strings.Index(out, "--metrics-bind-address"); at < metricsAt || metricsAt < generic {
		t.Errorf("--metrics-bind-address is not in the metrics section:\n%s", out)
	}
}

// Every flag the operator had before pflag keeps its name and default, and parses.
func TestEveryFlagKeepsItsNameAndDefault(t *testing.T) {
	flags := []struct{ name, def, set string }{
		{"kubeconfig", "", "/tmp/kubeconfig"},
		{"namespace", "", "gpu-ops"},
		{"install-crd", "true", "false"},
		{"default-inventory", "cluster", "all"},
		{"resync-period", "30s", "1m0s"},
		{"workers", "2", "4"},
		{"max-status-nodes", "500", "100"},
		{"min-sync-interval", "1s", "2s"},
		{"metrics-bind-address", ":8080", "127.0.0.1:9090"},
		{"health-probe-bind-address", ":8081", "0"},
		{"metrics-per-node", "false", "true"},
		{"pprof-bind-address", "", "127.0.0.1:6060"},
		{"kube-api-qps", "20", "50"},
		{"kube-api-burst", "40", "100"},
		{"kube-api-compression", "false", "true"},
		{"steady-gomaxprocs", "1", "0"},
		{"gpunode-qps", "100", "500"},
		{"gpunode-burst", "200", "1000"},
		{"leader-elect", "false", "true"},
		{"leader-election-id", "gpu-inventory-operator", "other"},
		{"leader-election-lease-duration", "15s", "30s"},
		{"leader-election-renew-deadline", "10s", "20s"},
		{"leader-election-retry-period", "2s", "5s"},
		{"logging-format", "text", "json"},
		{"v", "0", "4"},
		{"vmodule", "", "sync=5"},
		{"log-flush-frequency", "5s", "10s"},
	}
	fs := allFlags(NewOptions())
	for _, f := range flags {
		flag := fs.Lookup(f.name)
		if flag == nil {
			t.Errorf("--%s is gone", f.name)
			continue
		}
		if flag.DefValue != f.def {
			t.Errorf("--%s defaults to %q, want %q", f.name, flag.DefValue, f.def)
		}
		if err := fs.Parse([]string{"--" + f.name + "=" + f.set}); err != nil {
			t.Errorf("--%s=%s: %v", f.name, f.set, err)
		} else if got := flag.Value.String(); got != f.set {
			t.Errorf("--%s=%s sets %q", f.name, f.set, got)
		}
	}
}

func TestVerbosityTakesOneOrTwoDashes(t *testing.T) {
	for _, arg := range []string{"-v=4", "--v=4", "-v4"} {
		opts := NewOptions()
		if err := allFlags(opts).Parse([]string{arg}); err != nil {
			t.Errorf("%s: %v", arg, err)
		} else if opts.Logging.Verbosity != 4 {
			t.Errorf("%s sets verbosity %d, want 4", arg, opts.Logging.Verbosity)
		}
	}
}

func TestBadCommandLinesExit2(t *testing.T) {
	cases := map[string][]string{
		"unknown flag: --no-such-flag":      {"--no-such-flag"},
		`unexpected arguments ["extra"]`:    {"extra"},
		"--workers must be at least 1":      {"--workers=0"},
		`invalid argument "x" for "--work`:  {"--workers=x"},
		"--leader-election-id must not be ": {"--leader-elect", "--leader-election-id="},
	}
	for want, args := range cases {
		out, code := runOperator(t, args...)
		if code != 2 || !strings.Contains(out, want) {
			t.Errorf("%v: exit %d, want 2 and a message containing %q; output:\n%s", args, code, want, out)
		}
	}
}

func allFlags(opts *Options) *pflag.FlagSet {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	for _, set := range opts.Flags().FlagSets {
		fs.AddFlagSet(set)
	}
	return fs
}

// --version prints the build's version, commit, date and Go version, and starts nothing.
func TestVersion(t *testing.T) {
	out, code := runOperator(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "gpu-inventory-operator ") || !strings.Contains(out, "(commit ") || !strings.Contains(out, " go1.") {
		t.Errorf("--version: exit %d, output %q", code, out)
	}
}
