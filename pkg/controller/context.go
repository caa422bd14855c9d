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

package controller

import (
	"context"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/nodecache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/quota"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/usage"
)

// Context is what every controller of one run of the caches is made with: the caches and
// sources they share, and the settings more than one of them reads. Each controller's
// constructor takes it and the options that are its own only, its API clients among them.
type Context struct {
	// Nodes is the node cache, from nodecache.NewNodeInformer. NodeEvents is where the node
	// event handlers go (one listener of Nodes for all controllers); nil: Nodes.
	Nodes      cache.SharedIndexInformer
	NodeEvents nodecache.EventSource
	// Entries caches parsed node entries for every controller; nil: each makes its own.
	Entries *inventory.EntryCache
	// Facts are the nodes' GPU facts the Node objects do not hold.
	Facts   Facts
	Metrics *metrics.Metrics
	// Recorder receives the controllers' events; nil discards them.
	Recorder record.EventRecorder
	// Clock is the time source; nil: the real clock.
	Clock clock.PassiveClock
	// MinSyncInterval spaces each object's writes under churn (see WriteLimiter); 0: no limit.
	MinSyncInterval time.Duration
	// MaxStatusNodes bounds the node lists written (0: inventory.DefaultMaxStatusNodes).
	MaxStatusNodes int
}

// Facts are the sources of what a node's GPUs are beyond its Node object. Each controller
// merges the ones it follows into the one NodeFacts it listens to. Each is nil when not read.
type Facts struct {
	// Devices tells of nodes whose DRA slices changed (Entries reads the slices themselves).
	Devices NodeFacts
	// Holdings tells of nodes where what pods hold changed, and "" when what waiting pods ask
	// for changed (Entries reads what they hold itself); Pending is what they ask for.
	Holdings NodeFacts
	Pending  func() []allocation.Demand
	// Records tells of nodes whose GpuNode record changed; Record returns a node's record.
	Records NodeFacts
	Record  inventory.Records
	// Quota tells of changes to what quota promises (as node ""); QuotaNow reads it: the
	// cluster's quota without its nodes, and why it could not be read ("" when it could).
	Quota    NodeFacts
	QuotaNow func() (quota.Cluster, string)
	// Usage tells of changes to what the pods holding GPUs use of them (as node "");
	// UsageNow reads it: never nil once set, and never modified.
	Usage    NodeFacts
	UsageNow func() *usage.Snapshot
}

// Defaulted returns a copy of c with the unset optional fields filled in.
func (c *Context) Defaulted() Context {
	d := *c
	if d.NodeEvents == nil {
		d.NodeEvents = d.Nodes
	}
	if d.Entries == nil {
		d.Entries = inventory.NewEntryCache()
	}
	if d.Recorder == nil {
		d.Recorder = &record.FakeRecorder{} // discards
	}
	if d.Clock == nil {
		d.Clock = clock.RealClock{}
	}
	if d.MaxStatusNodes == 0 {
		d.MaxStatusNodes = inventory.DefaultMaxStatusNodes
	}
	return d
}

// Runner is what a controller's constructor hands the start-up: what it runs, and the caches
// that waits for.
type Runner struct {
	// Run waits for WaitsFor, then runs the workers until ctx is cancelled.
	Run      func(ctx context.Context) error
	WaitsFor []cache.InformerSynced
	// Started reports whether the controller has made its first pass.
	Started cache.InformerSynced
}
