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
	"fmt"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/nodecache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
)

// Context is what every controller of one run of the caches is made with: the caches and
// sources they share, and the settings more than one of them reads. Each controller's
// constructor takes it and the options that are its own only, its API clients among them.
type Context struct {
	// Nodes is the node cache, from nodecache.NewNodeInformer. NodeEvents is where the node
	// event handlers go (one listener of Nodes for all controllers); nil: Nodes.
	Nodes      cache.SharedIndexInformer
	NodeEvents nodecache.EventSource
	// KeepsLabel reports whether the node cache holds a label key where selectors see it;
	// KeepsLevel, whether it holds it at all (nodecache.Levels). nil: every one.
	KeepsLabel, KeepsLevel func(key string) bool
	// Entries caches parsed node entries for every controller; nil: each makes its own.
	Entries *inventory.EntryCache
	// Facts are the nodes' GPU facts the Node objects do not hold; nil: none.
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

// NodeSource is the role of the node cache: the informer every controller lists nodes
// from, the one listener through which they hear its events, and its keep-rules.
type NodeSource interface {
	source.Source
	Informer() cache.SharedIndexInformer
	Events() nodecache.EventSource
	Keeps(key string) bool
	KeepsLevel(key string) bool
}

// NewContext makes the Context of one run from its sources (exactly one NodeSource among
// them) and the settings in base: the node cache, the facts of the sources' roles and the
// entry cache on them, which hears of changed devices and holdings before any controller.
func NewContext(sources []source.Source, base Context) (*Context, error) {
	c := base
	var nodes NodeSource
	for _, s := range sources {
		if n, ok := s.(NodeSource); ok {
			if nodes != nil {
				return nil, fmt.Errorf("two node caches: %s and %s", nodes.Name(), n.Name())
			}
			nodes = n
		}
	}
	if nodes == nil {
		return nil, fmt.Errorf("no node cache among the sources")
	}
	c.Nodes, c.NodeEvents, c.KeepsLabel, c.KeepsLevel = nodes.Informer(), nodes.Events(), nodes.Keeps, nodes.KeepsLevel
	f := NewFacts(sources).(*facts)
	c.Facts, c.Entries = f, entriesOn(f)
	return &c, nil
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
	if d.Facts == nil {
		d.Facts = NewFacts(nil)
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
	// Unhandled tells of what the controller met and cannot handle in this run (nil: it
	// never meets any); the owner of the run decides what to do.
	Unhandled <-chan Unhandled
}

// Unhandled is something a controller met that this run of the caches cannot handle.
type Unhandled struct {
	// LabelKeys are node label keys the controller needs and the node cache drops: a node
	// selector's, or those a section selects nodes by. The nodes must be listed again with them.
	LabelKeys []string
	// Reason says who needs it, for the log.
	Reason string
}
