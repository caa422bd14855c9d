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

// Package version says which build a binary is: the release version, the commit, the build
// date and the Go version, read from the build information that the go command embeds, with
// the release build's -ldflags taking precedence.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by the Makefile with -ldflags "-X <package>.version=v0.2.0 ..." (the go command does not
// stamp VCS information when -buildvcs=false). Left empty, they come from the build information.
var (
	version   string
	commit    string
	buildDate string
)

// Info describes one build.
type Info struct {
	// Version is the release tag (v0.2.0), the module version the go command derived from
	// the repository's tags (v0.2.1-0.20261201101500-0123456789ab+dirty), or "dev".
	Version string `json:"version"`
	// Commit is the VCS revision, with "-dirty" when the work tree had changes; "unknown"
	// when the binary was built outside the repository.
	Commit string `json:"commit"`
	// BuildDate is the release build's date, else the commit's time (RFC 3339, UTC);
	// "unknown" without either.
	BuildDate string `json:"buildDate"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns this binary's Info.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return from(bi, version, commit, buildDate)
}

func from(bi *debug.BuildInfo, ldVersion, ldCommit, ldDate string) Info {
	info := Info{
		Version:   "dev",
		Commit:    "unknown",
		BuildDate: "unknown",
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi != nil {
		info.GoVersion = bi.GoVersion
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			info.Version = v
		}
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Commit = s.Value
			case "vcs.time":
				info.BuildDate = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified && info.Commit != "unknown" {
			info.Commit += "-dirty"
		}
	}
	if ldVersion != "" {
		info.Version = ldVersion
	}
	if ldCommit != "" {
		info.Commit = ldCommit
	}
	if ldDate != "" {
		info.BuildDate = ldDate
	}
	return info
}

// String is the one-line form --version prints after the program's name.
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, built %s, %s, %s)", i.Version, i.Commit, i.BuildDate, i.GoVersion, i.Platform)
}
