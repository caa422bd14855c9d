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

package dispatch

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Workload is the part of a Kueue kueue.x-k8s.io/v1beta2 Workload the dispatcher reads, in
// Kueue's JSON names: the project reads Kueue through unstructured objects, not Kueue's Go
// module.
type Workload struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WorkloadSpec   `json:"spec"`
	Status            WorkloadStatus `json:"status,omitempty"`
}

// WorkloadSpec is the Workload's pod sets and LocalQueue.
type WorkloadSpec struct {
	PodSets   []PodSet `json:"podSets,omitempty"`
	QueueName string   `json:"queueName,omitempty"`
}

// PodSet is one group of identical pods.
type PodSet struct {
	Name            string                 `json:"name,omitempty"`
	Template        corev1.PodTemplateSpec `json:"template,omitempty"`
	Count           int32                  `json:"count"`
	MinCount        *int32                 `json:"minCount,omitempty"`
	TopologyRequest *TopologyRequest       `json:"topologyRequest,omitempty"`
}

// TopologyRequest is Kueue's PodSetTopologyRequest: the level (a node label key) the pod
// set must or should fit inside one domain of, or its slices.
type TopologyRequest struct {
	Required                    *string `json:"required,omitempty"`
	Preferred                   *string `json:"preferred,omitempty"`
	Unconstrained               *bool   `json:"unconstrained,omitempty"`
	PodSetSliceRequiredTopology *string `json:"podSetSliceRequiredTopology,omitempty"`
	PodSetSliceSize             *int32  `json:"podSetSliceSize,omitempty"`
}

// WorkloadStatus is what decides whether the dispatcher may nominate workers for it.
type WorkloadStatus struct {
	Conditions            []metav1.Condition    `json:"conditions,omitempty"`
	Admission             *Admission            `json:"admission,omitempty"`
	AdmissionChecks       []AdmissionCheckState `json:"admissionChecks,omitempty"`
	NominatedClusterNames []string              `json:"nominatedClusterNames,omitempty"`
	ClusterName           *string               `json:"clusterName,omitempty"`
}

// Admission is where the manager's Kueue reserved the Workload's quota.
type Admission struct {
	ClusterQueue string `json:"clusterQueue"`
}

// AdmissionCheckState is one admission check's state on the Workload.
type AdmissionCheckState struct {
	Name               string      `json:"name"`
	State              string      `json:"state"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	Message            string      `json:"message,omitempty"`
}

// Kueue's names the dispatcher reads.
const (
	// CheckStatePending is an admission check not yet decided.
	CheckStatePending = "Pending"
	// ConditionQuotaReserved is True once the manager's Kueue reserved quota.
	ConditionQuotaReserved = "QuotaReserved"
	// ConditionFinished is True once the Workload ended.
	ConditionFinished = "Finished"
)

// DecodeWorkload reads the dispatcher's part of a Workload object.
func DecodeWorkload(u *unstructured.Unstructured) (*Workload, error) {
	var w Workload
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &w); err != nil {
		return nil, fmt.Errorf("read Workload %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &w, nil
}

// ConditionTrue reports whether the Workload's condition of that type is True.
func (w *Workload) ConditionTrue(conditionType string) bool {
	for _, c := range w.Status.Conditions {
		if c.Type == conditionType {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}
