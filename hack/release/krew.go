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
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
)

// RenderKrew fills the krew manifest template: ${VERSION} with version and
// ${SHA256_<OS>_<ARCH>} with the sum of command's archive for that platform, from sums
// (archive name to hex SHA-256). The template's leading comment, which documents the
// placeholders, is replaced by a line saying where the manifest comes from. A placeholder
// it does not know, or a platform without an archive, is an error: the result is
// published as is.
func RenderKrew(template []byte, version, command string, sums map[string]string) ([]byte, error) {
	body := stripLeadingComment(template)
	var unknown, missing []string
	out := os.Expand(string(body), func(name string) string {
		if name == "VERSION" {
			return version
		}
		if platform, ok := strings.CutPrefix(name, "SHA256_"); ok {
			goos, goarch, ok := strings.Cut(strings.ToLower(platform), "_")
			if ok {
				archive := ArchiveName(command, version, Platform{goos, goarch})
				if sum, ok := sums[archive]; ok {
					return sum
				}
				missing = append(missing, archive)
				return ""
			}
		}
		unknown = append(unknown, "${"+name+"}")
		return ""
	})
	if len(unknown) > 0 {
		return nil, fmt.Errorf("unknown placeholders %s (known: ${VERSION}, ${SHA256_<OS>_<ARCH>})", strings.Join(slices.Compact(slices.Sorted(slices.Values(unknown))), ", "))
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no sums for %s: the template names platforms that were not built", strings.Join(missing, ", "))
	}
	header := fmt.Sprintf("# kubectl gpuinv %s for krew, rendered by make release (hack/release) from hack/krew/gpuinv.yaml.\n", version)
	return []byte(header + out), nil
}

// stripLeadingComment drops the comment and blank lines before the first YAML line.
func stripLeadingComment(b []byte) []byte {
	for len(b) > 0 {
		line, rest, _ := bytes.Cut(b, []byte("\n"))
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			break
		}
		b = rest
	}
	return b
}
