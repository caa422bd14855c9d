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

package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/youngju-dev/gpu-inventory-operator", Version: "v0.2.1-0.20261201101500-0123456789ab+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef"},
			{Key: "vcs.time", Value: "2026-12-01T10:15:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	got := from(bi, "", "", "")
	if got.Version != "v0.2.1-0.20261201101500-0123456789ab+dirty" || got.Commit != "0123456789abcdef-dirty" ||
		got.BuildDate != "2026-12-01T10:15:00Z" || got.GoVersion != "go1.26.8" {
		t.Errorf("from build info: %+v", got)
	}

	release := from(bi, "v0.2.0", "", "2026-12-02T00:00:00Z")
	if release.Version != "v0.2.0" || release.BuildDate != "2026-12-02T00:00:00Z" || release.Commit != "0123456789abcdef-dirty" {
		t.Errorf("release flags do not take precedence: %+v", release)
	}
	if c := from(bi, "", "fedcba", "").Commit; c != "fedcba" {
		t.Errorf("commit from -ldflags: %q, want fedcba", c)
	}
}

func TestOutsideTheRepository(t *testing.T) {
	got := from(&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "", "", "")
	if got.Version != "dev" || got.Commit != "unknown" || got.BuildDate != "unknown" {
		t.Errorf("got %+v, want dev, unknown, unknown", got)
	}
	if s := got.String(); !strings.HasPrefix(s, "dev (commit unknown, built unknown, go1.26.8, ") {
		t.Errorf("String() = %q", s)
	}
}
