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
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/crd"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/member"
)

// ServingCA is what the API server's serving certificate verifies against: the PEM of the
// self-signed certificate it made in its --cert-dir, with the CA that signed it. A client
// given it as certificate-authority-data verifies TLS, as MultiKueue and the fleet hub insist.
func (e *Env) ServingCA() ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(e.Dir, "certs", "apiserver.crt"))
	if err != nil {
		return nil, fmt.Errorf("the API server's serving certificate: %w", err)
	}
	return data, nil
}

// ClusterProfileCRDs are the CRDs of sigs.k8s.io/cluster-inventory-api (the module's
// config/crd/bases, as go.mod pins it): ClusterProfile and PlacementDecision.
func ClusterProfileCRDs() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-inventory-api").Output()
	if err != nil {
		return "", fmt.Errorf("find the module sigs.k8s.io/cluster-inventory-api (go list -m): %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "bases"), nil
}

// InstallClusterProfileCRDs applies cluster-inventory-api's CRDs (multicluster.x-k8s.io
// v1alpha1: ClusterProfile, PlacementDecision) and waits until they are served.
func (e *Env) InstallClusterProfileCRDs(ctx context.Context) error {
	dir, err := ClusterProfileCRDs()
	if err != nil {
		return err
	}
	crds, err := ApplyManifests(ctx, e.Config, "testenv", dir)
	if err != nil {
		return fmt.Errorf("install the ClusterProfile CRDs: %w", err)
	}
	apiext, err := apiextensionsclient.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	for _, c := range crds {
		if err := crd.WaitEstablished(ctx, apiext.ApiextensionsV1().CustomResourceDefinitions(), c.GetName(), e.startTimeout); err != nil {
			return err
		}
	}
	return nil
}

// ClusterProfilesResource is cluster-inventory-api's ClusterProfile (namespaced).
var ClusterProfilesResource = v1alpha1.GroupVersion.WithResource("clusterprofiles")

// CreateClusterProfile creates the ClusterProfile namespace/name of the cluster at server,
// with labels, and sets its status as a cluster manager would: one access provider,
// secretreader, with the server, ca as certificate-authority-data, and the exec extension's
// clusterName name (the token Secret the plugin reads is named so). No server: no provider.
func CreateClusterProfile(ctx context.Context, cfg *rest.Config, namespace, name string, labels map[string]string, server string, ca []byte) error {
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	profiles := client.Resource(ClusterProfilesResource).Namespace(namespace)
	cp := &unstructured.Unstructured{Object: map[string]any{"apiVersion": v1alpha1.GroupVersion.String(), "kind": "ClusterProfile",
		"metadata": map[string]any{"namespace": namespace, "name": name},
		"spec":     map[string]any{"displayName": name, "clusterManager": map[string]any{"name": "testenv"}}}}
	cp.SetLabels(labels)
	created, err := profiles.Create(ctx, cp, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create ClusterProfile %s/%s: %w", namespace, name, err)
	}
	providers := []any{}
	if server != "" {
		providers = append(providers, map[string]any{"name": member.SecretReaderProvider, "cluster": map[string]any{
			"server": server, "certificate-authority-data": ca,
			"extensions": []any{map[string]any{"name": "client.authentication.k8s.io/exec", "extension": map[string]any{"clusterName": name}}}}})
	}
	created.Object["status"] = map[string]any{"accessProviders": providers}
	if _, err := profiles.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("set the access providers of ClusterProfile %s/%s: %w", namespace, name, err)
	}
	return nil
}
