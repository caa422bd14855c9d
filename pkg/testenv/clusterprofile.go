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

	"github.com/youngju-dev/gpu-inventory-operator/pkg/crd"
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
