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

// Package section is the shape of a feature's part of a GpuInventory's status (quota against
// hardware, usage, topology, ...): one value that computes its part of the status, its hash
// and its conditions. The inventory controller holds a list of them and treats each alike:
// it puts the part in the status, joins its hash to the inventory's, sets its conditions and
// removes the ones it owns when the part no longer has them. See docs/design/sources.md.
package section

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
)

// Section is one feature's part of an inventory's status.
type Section interface {
	// Name names the part in the inventory's hash ("quota", "usage"): a stored status keeps
	// its hash across releases only while the name stays.
	Name() string
	// Conditions are the condition types the section owns: those its part does not set are
	// removed from the status.
	Conditions() []string
	// Changes tells of changes that can change the part other than the nodes' (nil: none).
	Changes() source.Changes
	// Compute is the part of one inventory's status, or nil when the inventory has none.
	// It is called from several workers at once, never for one inventory at a time twice.
	Compute(in Input) *Part
	// Forget drops what the section keeps of an inventory that is gone.
	Forget(inventory string)
}

// Input is what an inventory's sections are computed from. Never modify it.
type Input struct {
	Inventory *homelabv1.GpuInventory
	// Nodes are the Nodes the inventory's selector covers, as the node cache keeps them.
	Nodes []*corev1.Node
	// Content is the inventory computed from them.
	Content *inventory.Inventory
	Logger  klog.Logger
	// KeepsLabel reports whether the node cache holds a label key where selectors see it;
	// KeepsLevel, whether it holds it at all, in a GPU node's Labels or with its topology
	// levels (nodecache.Levels). nil: every one.
	KeepsLabel, KeepsLevel func(key string) bool
}

// Part is a section's part of one inventory's status.
type Part struct {
	// Hash identifies the part's content: the status is written again when it changes.
	Hash string
	// Conditions are the part's conditions, without transition times.
	Conditions []metav1.Condition
	// Set puts the part into a status.
	Set func(status *homelabv1.GpuInventoryStatus)
	// Observe puts the part into the inventory's metrics (nil: none).
	Observe func(content *metrics.Content)
	// MissingLabels are node label keys the part selects nodes by that the node cache drops:
	// the operator lists the nodes again, keeping them.
	MissingLabels []string
}

// Provider is a source that feeds sections.
type Provider interface {
	Sections() []Section
}

// Of lists the sections of the sources that provide any, in the sources' order.
func Of(sources []source.Source) []Section {
	var out []Section
	for _, s := range sources {
		if p, ok := s.(Provider); ok {
			out = append(out, p.Sections()...)
		}
	}
	return out
}
