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

package nodecache

import (
	"context"
	"fmt"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
)

// Source is the node cache as the operator runs it: the informer of NewNodeInformer on a
// client that decodes through trimmer's codec, and the one listener (Events) through which
// every controller hears its events.
type Source struct {
	*source.InformerSource
	events  Events
	trimmer *NodeTrimmer
}

// NewSource is the node cache on nodes, a client that decodes through trimmer's Codec.
func NewSource(nodes NodesClient, trimmer *NodeTrimmer) *Source {
	return &Source{InformerSource: source.FromInformer("nodes", NewNodeInformer(nodes, 0)), trimmer: trimmer}
}

// Events is where the controllers add their node handlers, before Run.
func (s *Source) Events() EventSource { return &s.events }

// Keeps reports whether the cache keeps a label key where selectors see it.
func (s *Source) Keeps(key string) bool { return s.trimmer.Keeps(key) }

// KeepsLevel reports whether the cache keeps a label key of a GPU node, where selectors see
// it or with its levels.
func (s *Source) KeepsLevel(key string) bool { return s.trimmer.KeepsLevel(key) }

// Run registers the controllers' handlers with the informer, as one listener, and runs it
// until ctx is done.
func (s *Source) Run(ctx context.Context) {
	reg, err := s.InformerSource.Informer().AddEventHandler(&s.events)
	if err != nil {
		klog.FromContext(ctx).Error(fmt.Errorf("add Node event handler: %w", err), "Node events reach no controller")
	} else {
		s.events.registered(ctx, reg)
	}
	s.InformerSource.Run(ctx)
}

var _ cache.ResourceEventHandler = &Events{}
