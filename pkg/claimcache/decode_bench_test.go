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

package claimcache

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
)

// The hand decoder (decodeMinimal) against what client-go's protobuf serializer does (the
// generated Unmarshal), each followed by allocation.FromClaim: per-decode CPU and garbage,
// and what the tracker holds per claim afterwards.

// decodeBenchClaimCount is how many claims each input set has.
const decodeBenchClaimCount = 1000

// decodeBenchSet is one set of protobuf ResourceClaims (Marshal of the generated type, the
// message inside the API server's envelope) and the claims they encode.
type decodeBenchSet struct {
	name   string
	claims []*resourcev1.ResourceClaim
	data   [][]byte
}

// decodeBenchSets are claims made from the real claim of testdata (the NVIDIA DRA driver's
// EKS evidence: one gpu.nvidia.com device) for a thousand pods, as the API server holds them:
// allocated and reserved by the scheduler, and pending.
func decodeBenchSets(tb testing.TB) []decodeBenchSet {
	template := decodeBenchRealClaim(tb)
	allocated := decodeBenchSet{name: "allocated"}
	pending := decodeBenchSet{name: "pending"}
	for i := range decodeBenchClaimCount {
		allocated.claims = append(allocated.claims, decodeBenchClaim(template, i, true))
		pending.claims = append(pending.claims, decodeBenchClaim(template, i, false))
	}
	sets := []decodeBenchSet{allocated, pending}
	for s := range sets {
		for _, c := range sets[s].claims {
			data, err := c.Marshal()
			if err != nil {
				tb.Fatal(err)
			}
			sets[s].data = append(sets[s].data, data)
		}
	}
	return sets
}

// decodeBenchClaim is the real claim as the resource claim controller makes it for the i-th
// pod of a Job from its ResourceClaimTemplate; allocated: as the scheduler then writes its
// status (the device on the pod's node, reserved for the pod).
func decodeBenchClaim(template *resourcev1.ResourceClaim, i int, allocated bool) *resourcev1.ResourceClaim {
	c := template.DeepCopy()
	at := metav1.NewTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second))
	pod := fmt.Sprintf("trainer-%04d-x7k2p", i)
	podUID := types.UID(fmt.Sprintf("5c3e9a1b-7d2f-4e6a-b8c0-%012d", i))
	node := fmt.Sprintf("real-dra-gpu-node-%d", i/8)
	controller := true
	c.ObjectMeta = metav1.ObjectMeta{
		Name: pod + "-gpu-" + fmt.Sprintf("%05x", i), GenerateName: pod + "-gpu-", Namespace: template.Namespace,
		UID: types.UID(fmt.Sprintf("e4b7c2d9-1a3f-4c8e-9d6b-%012d", i)), ResourceVersion: fmt.Sprint(9000000 + i),
		CreationTimestamp: at, Annotations: map[string]string{"resource.kubernetes.io/pod-claim-name": "gpu"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod, UID: podUID,
			Controller: &controller, BlockOwnerDeletion: &controller}},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "resource.k8s.io/v1", Time: &at, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(
				`{"f:metadata":{"f:annotations":{".":{},"f:resource.kubernetes.io/pod-claim-name":{}},"f:generateName":{},` +
					`"f:ownerReferences":{".":{},"k:{\"uid\":\"` + string(podUID) + `\"}":{}}},"f:spec":{"f:devices":{"f:requests":{}}}}`)}},
	}
	if !allocated {
		c.Status = resourcev1.ResourceClaimStatus{}
		return c
	}
	c.Finalizers = []string{"resource.kubernetes.io/delete-protection"}
	result := &c.Status.Allocation.Devices.Results[0]
	result.Pool, result.Device = node, fmt.Sprintf("gpu-%d", i%8)
	c.Status.Allocation.NodeSelector.NodeSelectorTerms[0].MatchFields[0].Values = []string{node}
	c.Status.Allocation.AllocationTimestamp = &at
	c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: pod, UID: podUID}}
	c.ManagedFields = append(c.ManagedFields, metav1.ManagedFieldsEntry{Manager: "kube-scheduler", Operation: metav1.ManagedFieldsOperationUpdate,
		APIVersion: "resource.k8s.io/v1", Time: &at, FieldsType: "FieldsV1", Subresource: "status", FieldsV1: metav1.NewFieldsV1(
			`{"f:metadata":{"f:finalizers":{".":{},"v:\"resource.kubernetes.io/delete-protection\"":{}}},"f:status":{"f:allocation":` +
				`{".":{},"f:allocationTimestamp":{},"f:devices":{".":{},"f:results":{}},"f:nodeSelector":{}},"f:reservedFor":{".":{},"k:{\"uid\":\"` +
				string(podUID) + `\"}":{}}}}`)})
	return c
}

// decodeBenchRealClaim reads the ResourceClaim of testdata (copied from the NVIDIA DRA
// driver's published evidence).
func decodeBenchRealClaim(tb testing.TB) *resourcev1.ResourceClaim {
	data, err := os.ReadFile("testdata/06-dra-h100x8-eks-2nodes.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			tb.Fatal("testdata has no ResourceClaim")
		}
		if err != nil {
			tb.Fatal(err)
		}
		var kind metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &kind); err != nil || kind.Kind != "ResourceClaim" {
			continue
		}
		c := &resourcev1.ResourceClaim{}
		if err := yaml.UnmarshalStrict(doc, c); err != nil {
			tb.Fatal(err)
		}
		return c
	}
}

// decodeBenchDecoders are the two ways to what the tracker keeps of a claim.
var decodeBenchDecoders = []prototest.Decoder[*allocation.Claim]{
	{Name: "hand", Make: func() func([]byte) (*allocation.Claim, error) {
		return func(b []byte) (*allocation.Claim, error) {
			c, err := decodeMinimal(b)
			if err != nil {
				return nil, err
			}
			return allocation.FromClaim(c), nil
		}
	}},
	{Name: "generated+FromClaim", Make: func() func([]byte) (*allocation.Claim, error) {
		return func(b []byte) (*allocation.Claim, error) {
			c := &resourcev1.ResourceClaim{}
			if err := c.Unmarshal(b); err != nil {
				return nil, err
			}
			return allocation.FromClaim(c), nil
		}
	}},
}

// The two decoders of the benchmark give the same claim for every input, so that the
// benchmark compares equal work.
func TestDecodeBenchDecodersAgree(t *testing.T) {
	for _, set := range decodeBenchSets(t) {
		for i, data := range set.data {
			want, err := decodeBenchDecoders[1].Make()(data)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeBenchDecoders[0].Make()(data)
			if err != nil {
				t.Fatal(err)
			}
			if got == nil {
				t.Fatalf("%s %s: nothing kept", set.name, set.claims[i].Name)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("%s %s: the hand decoder differs from the generated one (-generated +hand):\n%s", set.name, set.claims[i].Name, diff)
			}
		}
	}
}

// BenchmarkDecodeBenchClaim decodes one claim per op, cycling through a set of a thousand;
// held-B/obj is the heap the kept claims hold per claim once the garbage is collected.
func BenchmarkDecodeBenchClaim(b *testing.B) {
	var sets []prototest.Inputs
	for _, set := range decodeBenchSets(b) {
		sets = append(sets, prototest.Inputs{Name: set.name, Data: set.data})
	}
	prototest.DecodeBench(b, sets, decodeBenchDecoders, false)
}
