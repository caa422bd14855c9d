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
	"bufio"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// readVerbs are a source's verbs unless its access says otherwise.
var readVerbs = []string{"get", "list", "watch"}

// rbacFiles are where each component's grants live: the manifests' and the Helm chart's.
var rbacFiles = map[string][]string{
	"":                       {"../../../manifests/rbac/cluster_role.yaml", "../../../manifests/chart/templates/clusterrole.yaml"},
	"role":                   {"../../../manifests/rbac/role.yaml", "../../../manifests/chart/templates/role.yaml"},
	"list-pods-by-namespace": {"../../../manifests/list-pods-by-namespace/cluster_role.yaml", "../../../manifests/chart/templates/list-namespaces.yaml"},
}

// rules reads the first ClusterRole or Role of a manifest file.
func rules(t *testing.T, path string) []rbacv1.PolicyRule {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var plain []string // the chart's templates: the rules hold no template expressions
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.Contains(line, "{{") {
			plain = append(plain, line)
		}
	}
	for _, doc := range strings.Split(strings.Join(plain, "\n"), "\n---\n") {
		var role rbacv1.ClusterRole // a Role has the same shape
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if role.Kind == "ClusterRole" || role.Kind == "Role" {
			return role.Rules
		}
	}
	t.Fatalf("%s holds no ClusterRole or Role", path)
	return nil
}

// grants reports whether a rule grants verbs on group/resource (by name, when names).
func grants(r rbacv1.PolicyRule, group, resource string, names, verbs []string) bool {
	if !slices.Contains(r.APIGroups, group) || !slices.Contains(r.Resources, resource) {
		return false
	}
	if !slices.Equal(r.ResourceNames, names) && !(len(r.ResourceNames) == 0 && len(names) == 0) {
		return false
	}
	for _, v := range verbs {
		if !slices.Contains(r.Verbs, v) {
			return false
		}
	}
	return true
}

// Every source's reads are granted where its row says, and every read the operator's
// ClusterRole grants (get, list or watch) is a source's: a source added without its RBAC, or
// RBAC left behind by a source removed, fails here.
func TestSourcesReadWhatTheRBACGrants(t *testing.T) {
	for i := range 2 {
		byComponent := map[string][]rbacv1.PolicyRule{}
		files := map[string]string{}
		for component, paths := range rbacFiles {
			byComponent[component], files[component] = rules(t, paths[i]), paths[i]
		}
		checkGrants(t, byComponent, files)
	}
}

// checkGrants checks one set of RBAC files against the sources.
func checkGrants(t *testing.T, byComponent map[string][]rbacv1.PolicyRule, rbacFiles map[string]string) {
	t.Helper()
	for _, row := range sources {
		for _, a := range row.reads {
			verbs := a.verbs
			if verbs == nil {
				verbs = readVerbs
			}
			for _, resource := range a.resources {
				if !slices.ContainsFunc(byComponent[a.component], func(r rbacv1.PolicyRule) bool {
					return grants(r, a.group, resource, a.names, verbs)
				}) {
					t.Errorf("source %s reads %s/%s %v (%v) but %s grants no such rule", row.name, a.group, resource, a.names, verbs, rbacFiles[a.component])
				}
			}
		}
	}
	// The status subresource's get goes with its patch (the status write), not a source.
	written := map[string]bool{"homelab.youngju.dev/gpuinventories/status": true}
	for _, r := range byComponent[""] {
		if !slices.ContainsFunc(r.Verbs, func(v string) bool { return slices.Contains(readVerbs, v) }) {
			continue
		}
		for _, g := range r.APIGroups {
			for _, resource := range r.Resources {
				if written[g+"/"+resource] {
					continue
				}
				if !slices.ContainsFunc(sources, func(row sourceRow) bool {
					return slices.ContainsFunc(row.reads, func(a access) bool {
						return a.component == "" && a.group == g && slices.Contains(a.resources, resource)
					})
				}) {
					t.Errorf("the ClusterRole grants reads of %s/%s, which no source reads", g, resource)
				}
			}
		}
	}
}

// docRow is a row of docs/install.md's list of what the operator reads: | `name` | reads | when |
var docRow = regexp.MustCompile("^\\| `([a-z]+)` \\| (.+) \\| (.+) \\|$")

// The docs' list of what the operator reads has one row per source, in the table's order,
// and names every resource each reads.
func TestDocsListWhatEverySourceReads(t *testing.T) {
	f, err := os.Open("../../../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	reads := map[string]string{}
	in := false
	scan := bufio.NewScanner(f)
	for scan.Scan() {
		line := scan.Text()
		switch {
		case line == "### What the operator reads":
			in = true
		case in && strings.HasPrefix(line, "#"):
			in = false
		case in:
			if m := docRow.FindStringSubmatch(line); m != nil {
				names, reads[m[1]] = append(names, m[1]), m[2]
			}
		}
	}
	var want []string
	for _, row := range sources {
		want = append(want, row.name)
		for _, a := range row.reads {
			for _, resource := range a.resources {
				if !strings.Contains(reads[row.name], resource) {
					t.Errorf("docs/install.md's row of %s does not name %s", row.name, resource)
				}
			}
		}
	}
	if !slices.Equal(names, want) {
		t.Errorf("docs/install.md lists the sources %q, want %q (the table's, in its order)", names, want)
	}
}
