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

// Package crd installs the CustomResourceDefinitions that the binaries embed (the operator's
// GpuInventory and GpuNode, the fleet hub's GpuFleet), and waits until the API server serves
// them.
package crd

import (
	"context"
	"fmt"
	"strconv"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/youngju-dev/gpu-inventory-operator/manifests"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// Result says what Ensure did.
type Result string

const (
	Created Result = "created"
	Updated Result = "updated"
	Current Result = "already current"
	// Newer: the installed CRD has a higher schema revision (a newer operator installed it,
	// and this one is a rollback); it is left as it is.
	Newer Result = "newer than this operator's, left as it is"
)

// SchemaRevisionAnnotation holds a CRD's schema revision, raised with every change of its
// schema. Ensure never replaces a CRD of a higher revision: the older schema's pruning would
// drop, from every stored object, the fields only the newer one knows, users' included.
const SchemaRevisionAnnotation = "homelab.youngju.dev/schema-revision"

// SchemaRevision is crd's schema revision; 0 when it has none (applied from a build before
// revisions) or the annotation is not a number.
func SchemaRevision(crd *apiextensionsv1.CustomResourceDefinition) int {
	n, err := strconv.Atoi(crd.Annotations[SchemaRevisionAnnotation])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// GpuInventory returns the embedded GpuInventory CRD, decoded and with the API server's
// defaults applied (so that it compares equal to what the server stores).
func GpuInventory() (*apiextensionsv1.CustomResourceDefinition, error) {
	return decode("GpuInventory", manifests.GpuInventoryCRD)
}

// GpuNode returns the embedded GpuNode CRD, as GpuInventory does.
func GpuNode() (*apiextensionsv1.CustomResourceDefinition, error) {
	return decode("GpuNode", manifests.GpuNodeCRD)
}

// GpuFleet returns the embedded GpuFleet CRD, as GpuInventory does.
func GpuFleet() (*apiextensionsv1.CustomResourceDefinition, error) {
	return decode("GpuFleet", manifests.GpuFleetCRD)
}

// EnsureFleet installs the fleet hub's CRD (GpuFleet) as Ensure installs the operator's.
func EnsureFleet(ctx context.Context, client Client) (Outcome, error) {
	want, err := GpuFleet()
	if err != nil {
		return Outcome{}, err
	}
	return ensure(ctx, client, want, homelabv1.FleetFieldManager)
}

// embeddedCRDs are the CRDs Ensure installs, in order.
var embeddedCRDs = []func() (*apiextensionsv1.CustomResourceDefinition, error){GpuInventory, GpuNode}

// Names are the names of the CRDs Ensure installs.
var Names = []string{homelabv1.CustomResourceDefinitionName, homelabv1.GpuNodeCRDName}

func decode(kind string, data []byte) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return nil, fmt.Errorf("decode embedded %s CRD: %w", kind, err)
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
	return crd, nil
}

// Getter reads CRDs: kubeclient.CRDs, or a clientset's ApiextensionsV1().CustomResourceDefinitions().
type Getter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*apiextensionsv1.CustomResourceDefinition, error)
}

// Client reads, creates and updates CRDs, as Getter.
type Client interface {
	Getter
	Create(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, opts metav1.CreateOptions) (*apiextensionsv1.CustomResourceDefinition, error)
	Update(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, opts metav1.UpdateOptions) (*apiextensionsv1.CustomResourceDefinition, error)
}

// Outcome is what Ensure did with one CRD.
type Outcome struct {
	Name   string
	Result Result
	// Installed is the schema revision of the CRD found in the cluster (0: none, or not found);
	// Embedded that of the operator's.
	Installed, Embedded int
}

// Ensure creates each CRD, or updates an existing one whose spec differs (an older version
// of the operator installed it, or it was edited), and leaves alone a current one and one of
// a higher schema revision.
func Ensure(ctx context.Context, client Client) ([]Outcome, error) {
	var outcomes []Outcome
	for _, get := range embeddedCRDs {
		want, err := get()
		if err != nil {
			return nil, err
		}
		outcome, err := ensure(ctx, client, want, fieldManager)
		if err != nil {
			return nil, err
		}
		outcomes = append(outcomes, outcome)
	}
	return outcomes, nil
}

func ensure(ctx context.Context, crds Client, want *apiextensionsv1.CustomResourceDefinition, manager string) (Outcome, error) {
	outcome := Outcome{Name: want.Name, Embedded: SchemaRevision(want)}
	// The API server updates a new CRD's status right after it is created, so an update can
	// meet a conflict: read again and retry.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		existing, err := crds.Get(ctx, want.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if _, err := crds.Create(ctx, want, metav1.CreateOptions{FieldManager: manager}); err != nil {
				return explain("create", want.Name, err)
			}
			outcome.Result = Created
			return nil
		case err != nil:
			return explain("get", want.Name, err)
		}
		outcome.Installed = SchemaRevision(existing)
		switch {
		case outcome.Installed > outcome.Embedded:
			outcome.Result = Newer
			return nil
		case equality.Semantic.DeepEqual(existing.Spec, want.Spec):
			outcome.Result = Current
			return nil
		}
		updated := existing.DeepCopy()
		updated.Spec = want.Spec
		for k, v := range want.Annotations {
			if updated.Annotations == nil {
				updated.Annotations = map[string]string{}
			}
			updated.Annotations[k] = v
		}
		if _, err := crds.Update(ctx, updated, metav1.UpdateOptions{FieldManager: manager}); err != nil {
			if apierrors.IsConflict(err) {
				return err // unwrapped, so that RetryOnConflict sees it
			}
			return explain("update", want.Name, err)
		}
		outcome.Result = Updated
		return nil
	})
	if err != nil {
		return Outcome{}, err
	}
	return outcome, nil
}

const fieldManager = "gpu-inventory-operator"

// explain turns a failed CRD call into a message that says what to do about it.
func explain(verb, name string, err error) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("install CRD %s: this identity may not %s customresourcedefinitions.apiextensions.k8s.io "+
			"(grant get, create and update on them, or install the CRD yourself with "+
			"`kubectl apply -f manifests/crd/` and run with --install-crd=false): %w", name, verb, err)
	}
	return fmt.Errorf("install CRD %s: %s: %w", name, verb, err)
}

// WaitAllEstablished waits until every CRD in Names is Established.
func WaitAllEstablished(ctx context.Context, client Getter, timeout time.Duration) error {
	for _, name := range Names {
		if err := WaitEstablished(ctx, client, name, timeout); err != nil {
			return err
		}
	}
	return nil
}

// WaitEstablished waits until the API server reports the CRD Established (its resource is
// served), or fails with the CRD's own explanation when it is not accepted in time.
func WaitEstablished(ctx context.Context, client Getter, name string, timeout time.Duration) error {
	var last *apiextensionsv1.CustomResourceDefinition
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		crd, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			klog.FromContext(ctx).V(4).Info("Waiting for CRD", "crd", name, "err", err)
			return false, nil
		}
		last = crd
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err == nil {
		return nil
	}
	detail := "it was not found"
	if last != nil {
		detail = "conditions: "
		for _, c := range last.Status.Conditions {
			detail += fmt.Sprintf("%s=%s (%s: %s) ", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	return fmt.Errorf("CRD %s is not Established after %s; %s: %w", name, timeout, detail, err)
}
