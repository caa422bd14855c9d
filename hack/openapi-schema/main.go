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

// Command openapi-schema prints the OpenAPI v2 schema of this project's API types, built from
// the generated OpenAPI definitions. hack/update-codegen.sh hands it to the apply-configuration
// generator, which then knows each type's structure; the generated fake clientset needs that
// to accept server-side apply.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"

	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/openapi"
)

func main() {
	ref := func(name string) spec.Ref {
		return spec.MustCreateRef("#/definitions/" + util.ToRESTFriendlyName(name))
	}
	defs := openapi.GetOpenAPIDefinitions(ref)
	swagger := &spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:     "2.0",
		Info:        &spec.Info{InfoProps: spec.InfoProps{Title: "gpu-inventory-operator", Version: "v1"}},
		Paths:       &spec.Paths{Paths: map[string]spec.PathItem{}},
		Definitions: spec.Definitions{},
	}}
	for name, def := range defs {
		schema := def.Schema
		// The apply configurations locate root kinds by their group-version-kind extension.
		if gvk, ok := rootKind(name); ok {
			schema.AddExtension("x-kubernetes-group-version-kind", []map[string]string{gvk})
		}
		swagger.Definitions[util.ToRESTFriendlyName(name)] = schema
	}
	out, err := json.MarshalIndent(swagger, "", "  ")
	if err != nil {
		fmt.Fprintf(os.Stderr, "openapi-schema: encode: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(string(out))
}

// rootKind returns the group-version-kind of the project's top-level kinds.
func rootKind(name string) (map[string]string, bool) {
	for _, obj := range []any{homelabv1.GpuInventory{}, homelabv1.GpuInventoryList{}} {
		t := reflect.TypeOf(obj)
		if name == t.PkgPath()+"."+t.Name() {
			gv := homelabv1.SchemeGroupVersion
			return map[string]string{"group": gv.Group, "version": gv.Version, "kind": t.Name()}, true
		}
	}
	return nil, false
}
