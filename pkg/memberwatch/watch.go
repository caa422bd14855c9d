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

// Package memberwatch is how the fleet hub follows its members: the hub's caches of the
// objects that name members (ClusterProfiles, MultiKueueClusters), the rest.Config each one
// gives (pkg/member), and one reflector per member cluster on its one GpuInventory, whose
// every list, watch and event moves the member's state (Connecting, Reachable, Unreachable
// with a reason). Nothing here polls: a member is asked nothing but its reflector's list and
// watch (docs/design/hub.md#reading-a-member).
package memberwatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/member"
)

// State is what the hub knows of one member cluster from reading it.
type State struct {
	// State is Connecting, Reachable or Unreachable (homelabv1.Member*).
	State string
	// Reason and Message say why it is not Reachable (member.Explain).
	Reason, Message string
	// Since is when it entered the state.
	Since time.Time
	// Inventory is its GpuInventory as last read, without status.nodes; nil before the
	// first read. It is kept while the member is unreachable.
	Inventory *homelabv1.GpuInventory
}

// inventoryClient lists and watches a member's GpuInventories: kubeclient.GpuInventories
// on the member's config.
type inventoryClient = kubeclient.ListWatcher[*homelabv1.GpuInventoryList]

// watcher is one reflector on one GpuInventory of one member cluster, and the state its
// requests and events give.
type watcher struct {
	inventory string
	client    inventoryClient
	clock     clock.PassiveClock
	// lists limits the lists in flight across the hub; listTimeout bounds each.
	lists       chan struct{}
	listTimeout time.Duration
	backoff     *wait.Backoff
	// changed is told of every change of the state; failed of every failed request, with
	// its reason and whether the member was not failing so before.
	changed func()
	failed  func(reason string, entered bool)

	mu    sync.Mutex
	state State
}

// run runs the reflector until ctx ends.
func (w *watcher) run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: w.list, WatchFuncWithContext: w.watch}, listOnly{})
	r := cache.NewReflectorWithOptions(lw, &homelabv1.GpuInventory{}, &store{w: w},
		cache.ReflectorOptions{Name: "member GpuInventory " + w.inventory, Logger: &logger, Backoff: w.backoff})
	r.RunWithContext(ctx)
}

// listOnly tells the reflector to list, then watch: a watch-list would stream the one object
// as events, with nothing gained and no deadline to put on the initial state.
type listOnly struct{}

func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }

func (w *watcher) selector(opts *metav1.ListOptions) {
	opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", w.inventory).String()
}

// list is the reflector's list: at most w.lists at once, within w.listTimeout.
func (w *watcher) list(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	select {
	case w.lists <- struct{}{}:
		defer func() { <-w.lists }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	w.selector(&opts)
	ctx, cancel := context.WithTimeout(ctx, w.listTimeout)
	defer cancel()
	list, err := w.client.List(ctx, opts)
	if err != nil {
		w.fail(ctx, err)
		return nil, err
	}
	return list, nil
}

// watch is the reflector's watch, which must start within w.listTimeout: a member that
// takes longer is too slow, as for a list. Its events pass through a filter that sees the
// errors.
func (w *watcher) watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w.selector(&opts)
	ctx, cancel := context.WithCancelCause(ctx)
	slow := time.AfterFunc(w.listTimeout, func() { cancel(errSlowWatch) })
	wi, err := w.client.Watch(ctx, opts)
	slow.Stop()
	if err != nil {
		if errors.Is(context.Cause(ctx), errSlowWatch) {
			err = fmt.Errorf("%w: %w", errSlowWatch, context.DeadlineExceeded)
		}
		cancel(nil)
		w.fail(ctx, err)
		return nil, err
	}
	w.reached() // the member answers again: a watch resumed where it ended
	return &stoppingWatch{Interface: watch.Filter(wi, func(e watch.Event) (watch.Event, bool) {
		if e.Type == watch.Error {
			if err := apierrors.FromObject(e.Object); !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
				w.fail(ctx, err)
			}
		}
		return e, true
	}), cancel: cancel}, nil
}

// errSlowWatch is a watch the member did not start in time.
var errSlowWatch = errors.New("the member did not start a watch in time")

// stoppingWatch releases its request's context when stopped.
type stoppingWatch struct {
	watch.Interface
	cancel context.CancelCauseFunc
}

func (s *stoppingWatch) Stop() {
	s.Interface.Stop()
	s.cancel(nil)
}

// fail records a failed request, unless the hub itself stopped it.
func (w *watcher) fail(ctx context.Context, err error) {
	if errors.Is(err, context.Canceled) && ctx.Err() != nil && !errors.Is(context.Cause(ctx), errSlowWatch) {
		return // the hub stopped it
	}
	reason, message := member.Explain(err)
	w.mu.Lock()
	entered := w.state.State != homelabv1.MemberUnreachable || w.state.Reason != reason
	w.mu.Unlock()
	w.failed(reason, entered)
	w.set(func(s *State) {
		s.State, s.Reason, s.Message = homelabv1.MemberUnreachable, reason, message
	})
}

// reached records a request that succeeded: the member is Reachable again if its inventory
// is known, else it stays as it is until the list says.
func (w *watcher) reached() {
	w.set(func(s *State) {
		if s.Inventory != nil && s.Reason != homelabv1.ReasonInventoryNotFound {
			s.State, s.Reason, s.Message = homelabv1.MemberReachable, "", ""
		}
	})
}

// read records the member's inventory as read (nil: there is none of that name).
func (w *watcher) read(gi *homelabv1.GpuInventory) {
	w.set(func(s *State) {
		if gi == nil {
			s.State, s.Reason = homelabv1.MemberUnreachable, homelabv1.ReasonInventoryNotFound
			s.Message = fmt.Sprintf("the member has no GpuInventory %q (spec.inventoryName); the operator creates \"cluster\" unless told otherwise", w.inventory)
			return
		}
		s.State, s.Reason, s.Message, s.Inventory = homelabv1.MemberReachable, "", "", gi
	})
}

// set changes the state with f; a state that entered another state has a new Since; any
// change is told.
func (w *watcher) set(f func(*State)) {
	w.mu.Lock()
	old := w.state
	f(&w.state)
	s := &w.state
	if s.State != old.State {
		s.Since = w.clock.Now()
	}
	same := s.State == old.State && s.Reason == old.Reason && s.Message == old.Message && s.Inventory == old.Inventory
	w.mu.Unlock()
	if !same {
		w.changed()
	}
}

// get is the state now.
func (w *watcher) get() State {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state
}

// store is the reflector's store: the one object, handed to the watcher.
type store struct{ w *watcher }

func (s *store) Add(obj any) error    { return s.Update(obj) }
func (s *store) Delete(obj any) error { s.w.read(nil); return nil }
func (s *store) Resync() error        { return nil }

func (s *store) Update(obj any) error {
	gi, ok := obj.(*homelabv1.GpuInventory)
	if !ok {
		return fmt.Errorf("the member sent a %T, not a GpuInventory", obj)
	}
	if gi.Name == s.w.inventory {
		s.w.read(gi)
	}
	return nil
}

func (s *store) Replace(items []any, _ string) error {
	for _, obj := range items {
		if gi, ok := obj.(*homelabv1.GpuInventory); ok && gi.Name == s.w.inventory {
			s.w.read(gi)
			return nil
		}
	}
	s.w.read(nil)
	return nil
}
