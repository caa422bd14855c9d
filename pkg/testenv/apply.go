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

package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// ApplyManifests server-side applies every object in the given YAML files, or in the *.yaml
// files under the given directories (kustomization.yaml files are skipped), in order, the way
// `kubectl apply --server-side` would. It returns the applied objects.
func ApplyManifests(ctx context.Context, cfg *rest.Config, fieldManager string, paths ...string) ([]*unstructured.Unstructured, error) {
	objs, err := ReadManifests(paths...)
	if err != nil {
		return nil, err
	}
	return ApplyObjects(ctx, cfg, fieldManager, objs)
}

// Kustomize renders a kustomization directory the way `kubectl apply -k DIR` does (same
// library, sigs.k8s.io/kustomize/api), without kubectl.
func Kustomize(dir string) ([]*unstructured.Unstructured, error) {
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	data, err := resources.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	return DecodeManifests(dir, data)
}

// ApplyObjects server-side applies objs in order; a CRD applied earlier in the batch is
// found by the objects of its kind that follow it.
func ApplyObjects(ctx context.Context, cfg *rest.Config, fieldManager string, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	var applied []*unstructured.Unstructured
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			mapper.Reset() // a CRD applied earlier in this batch
			mapping, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
		if err != nil {
			return applied, fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		var resource dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = "default"
			}
			resource = dyn.Resource(mapping.Resource).Namespace(ns)
		}
		data, err := obj.MarshalJSON()
		if err != nil {
			return applied, err
		}
		force := true
		out, err := resource.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: fieldManager, Force: &force})
		if err != nil {
			return applied, fmt.Errorf("apply %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		applied = append(applied, out)
	}
	return applied, nil
}

// ReadManifests decodes the objects in YAML files and directories (non-recursive for files
// named *.yaml; directories are walked; kustomization.yaml is skipped).
func ReadManifests(paths ...string) ([]*unstructured.Unstructured, error) {
	var files []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".yaml") && filepath.Base(path) != "kustomization.yaml" {
				files = append(files, path)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		decoded, err := DecodeManifests(f, data)
		if err != nil {
			return nil, err
		}
		objs = append(objs, decoded...)
	}
	return objs, nil
}

// DecodeManifests decodes a multi-document YAML (or JSON) stream read from source; every
// object must have apiVersion and kind.
func DecodeManifests(source string, data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("decode %s: %w", source, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if obj.GetKind() == "" || obj.GetAPIVersion() == "" {
			return nil, fmt.Errorf("%s: an object without apiVersion or kind", source)
		}
		objs = append(objs, obj)
	}
}
