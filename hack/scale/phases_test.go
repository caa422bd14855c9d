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
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// makeCommand returns the hack/scale flags of a Makefile target, its variables given their
// defaults from the Makefile (BIN and the test bed aside, which the flags do not read).
func makeCommand(t *testing.T, target string) []string {
	t.Helper()
	data, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	makefile := string(data)
	vars := map[string]string{"BIN": "bin"}
	for _, m := range regexp.MustCompile(`(?m)^(\w+)\s*\?=\s*(\S+)`).FindAllStringSubmatch(makefile, -1) {
		vars[m[1]] = m[2]
	}
	_, recipe, ok := strings.Cut(makefile, "\n"+target+":")
	if !ok {
		t.Fatalf("the Makefile has no target %s", target)
	}
	_, args, ok := strings.Cut(recipe, " run ./hack/scale ")
	if !ok {
		t.Fatalf("make %s does not run hack/scale", target)
	}
	args, _, _ = strings.Cut(args, "\n")
	args = regexp.MustCompile(`\$\((\w+)\)`).ReplaceAllStringFunc(args, func(v string) string { return vars[v[2:len(v)-1]] })
	return strings.Fields(args)
}

// parse reads args as main does.
func parse(t *testing.T, args ...string) *options {
	t.Helper()
	o := &options{}
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	if err := o.validate(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return o
}

// running names the phases that run with o, in order.
func running(o *options) []string {
	var out []string
	for _, p := range phases(o) {
		if p.on {
			out = append(out, p.name)
		}
	}
	return out
}

// The Makefile's targets pass flags hack/scale still has, and run the phases that
// docs/performance.md reports, in the order of its tables.
func TestMakeTargetsRunTheirPhasesInOrder(t *testing.T) {
	for _, tc := range []struct {
		target string
		want   []string
	}{
		{"bench", []string{"fleet", "hub", "cold start", "warm start", "quiet", "topology", "churn", "flips", "republish", "relabel", "status size", "plugin",
			"fleet reset", "hostile", "inventories", "outage", "quota", "allocation", "free and who", "why and fit", "floor", "usage"}},
		{"bench-large", []string{"cold start", "warm start", "quiet", "topology", "churn", "flips", "republish", "status size", "fleet reset", "quota"}},
	} {
		t.Run(tc.target, func(t *testing.T) {
			if got := running(parse(t, makeCommand(t, tc.target)...)); !slices.Equal(got, tc.want) {
				t.Errorf("make %s runs %q\nwant %q", tc.target, got, tc.want)
			}
		})
	}
}

func TestFleetOnlyRunsTheFleetPhaseAlone(t *testing.T) {
	if got := running(parse(t, "--plugin", "bin/kubectl-gpuinv", "--fleet-only")); !slices.Equal(got, []string{"fleet"}) {
		t.Errorf("--fleet-only runs %q, want the fleet phase alone", got)
	}
}

func TestHubOnlyRunsTheHubPhaseAlone(t *testing.T) {
	if got := running(parse(t, "--hub-only")); !slices.Equal(got, []string{"hub"}) {
		t.Errorf("--hub-only runs %q, want the hub phase alone", got)
	}
}

func TestValidateRefusesCombinationsThatCannotRun(t *testing.T) {
	for _, args := range [][]string{
		{"--fleet-only"},
		{"--quota-flavors", "4"},
		{"--usage-window", "30m"},
		{"--usage-window", "90m30s"},
		{"--usage-quiet", "30s"},
		{"--hub-only", "--hub-members", "0"},
		{"--hub-members", "101"},
		{"--hub-workers", "0"},
	} {
		o := &options{}
		fs := flag.NewFlagSet("scale", flag.ContinueOnError)
		o.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := o.validate(); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// fakeResult is a result whose report got something wrong.
type fakeResult struct{ wrong []error }

func (*fakeResult) printTo(*report)     {}
func (f *fakeResult) mistakes() []error { return f.wrong }

func TestRunPhasesSkipsWhatAFailureLeavesWithoutItsStart(t *testing.T) {
	var ran []string
	fake := func(name string, on, fatal bool, err error, needs ...string) phase {
		return phase{name: name, on: on, fatal: fatal, needs: needs, run: func(context.Context, *harness) (result, error) {
			ran = append(ran, name)
			if name == "wrong" {
				return &fakeResult{wrong: []error{errors.New("a report was wrong")}}, nil
			}
			return nil, err
		}}
	}
	failure := errors.New("boom")
	list := []phase{
		fake("setup", true, true, nil),
		fake("off", false, false, nil),
		fake("after off", true, false, nil, "off"),
		fake("wrong", true, false, nil),
		fake("after wrong", true, false, nil, "wrong"),
		fake("fails", true, false, failure),
		fake("needs fails", true, false, nil, "fails"),
		fake("needs skipped", true, false, nil, "needs fails"),
		fake("independent", true, false, nil),
		fake("fatal", true, true, failure),
		fake("after fatal", true, false, nil),
	}
	err := runPhases(context.Background(), &harness{}, list, &report{w: io.Discard, o: &options{}})
	want := []string{"setup", "after off", "wrong", "after wrong", "fails", "independent", "fatal"}
	if !slices.Equal(ran, want) {
		t.Errorf("ran %q\nwant %q", ran, want)
	}
	for _, part := range []string{"a report was wrong", "fails: boom", "fatal: boom"} {
		if err == nil || !strings.Contains(err.Error(), part) {
			t.Errorf("error %v lacks %q", err, part)
		}
	}
}
