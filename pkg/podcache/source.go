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

package podcache

import (
	"k8s.io/client-go/rest"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
)

// Source is the pod cache as a source of the operator: it feeds tracker, and its changes are
// the tracker's (a node whose holdings changed; "" when what waiting pods ask for changed).
type Source struct {
	*Cache
	tracker *allocation.Tracker
}

// NewSource is the pod cache of the cluster config reaches, feeding tracker.
func NewSource(config *rest.Config, tracker *allocation.Tracker, opts Options) (*Source, error) {
	c, err := New(config, tracker, opts)
	if err != nil {
		return nil, err
	}
	return &Source{Cache: c, tracker: tracker}, nil
}

// Name names the source.
func (*Source) Name() string { return "pods" }

// OnChange registers f with the tracker.
func (s *Source) OnChange(f func(key string)) { s.tracker.OnChange(f) }

// Tracker is the tracker the cache feeds.
func (s *Source) Tracker() *allocation.Tracker { return s.tracker }
