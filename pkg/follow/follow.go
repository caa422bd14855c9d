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

// Package follow follows one GpuInventory: its state now, then every change, a deletion and a
// re-creation included. It is client-go's watchtools.UntilWithSync on a list and watch limited
// to the object's name, so an expired watch (HTTP 410) is resumed from a fresh list and a
// deletion missed meanwhile is still reported.
package follow

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// Func receives each state of the followed inventory: the object, or deleted (gi nil) when it
// does not exist. Returning done or an error ends Inventory.
type Func func(gi *homelabv1.GpuInventory, deleted bool) (done bool, err error)

// Error is a list or watch request that failed in a way retrying would not mend.
type Error struct {
	Verb string // "list" or "watch"
	Err  error
}

func (e *Error) Error() string { return fmt.Sprintf("%s GpuInventory: %v", e.Verb, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// Inventory calls onEvent with the state of the GpuInventory name that a first list finds,
// then with each change in order (a new resourceVersion, a deletion, a re-creation) until
// onEvent returns done (Inventory returns nil) or an error (returned as is), or ctx ends
// (ctx.Err() is returned). After a re-list onEvent sees the state it found, not the steps
// missed while the watch was down.
//
// A failed request comes back as an *Error, promptly: any error of a list before a request
// has succeeded, and Forbidden, Unauthorized or NotFound (the CRD is not installed) at any
// time. Other errors of later requests (a connection lost, a server restarting) are retried
// by client-go with backoff, which would otherwise retry every error of a list forever.
// Client-go logs its retries through klog.FromContext(ctx).
func Inventory(ctx context.Context, client Client, name string, onEvent Func) error {
	return InventoryWith(ctx, client, name, onEvent, Options{})
}

// Client lists and watches GpuInventories: a typed clientset's HomelabV1().GpuInventories(),
// or kubeclient.GpuInventories.
type Client interface {
	List(ctx context.Context, opts metav1.ListOptions) (*homelabv1.GpuInventoryList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Options tune InventoryWith.
type Options struct {
	// Connection, when set, is called with the error of each list or watch request that
	// client-go retries (a connection lost, a server restarting), and with nil when a request
	// succeeds again after such errors. It is called from client-go's goroutine: it must not
	// block for long.
	Connection func(err error)
}

// InventoryWith is Inventory with options.
func InventoryWith(ctx context.Context, inventories Client, name string, onEvent Func, opts Options) error {
	inner, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &requests{name: name, cancel: cancel, connection: opts.Connection}
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := listOnly{&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			list, err := inventories.List(ctx, opts)
			r.listed(list, err)
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			w, err := inventories.Watch(ctx, opts)
			r.watched(err)
			return w, err
		},
	}}

	// A list of its own first: a request that fails at once (the CRD not installed, no
	// permission) is returned without client-go's reflector logging it as an error.
	if _, err := inventories.List(inner, metav1.ListOptions{FieldSelector: selector}); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &Error{Verb: "list", Err: err}
	}

	s := &states{name: name, onEvent: onEvent}
	initial := func(cache.Store) (bool, error) {
		if r.foundFirst() {
			return false, nil // its Added event is on the way
		}
		return s.deliver(nil)
	}
	_, err := watchtools.UntilWithSync(inner, lw, &homelabv1.GpuInventory{}, initial, s.next)
	if failed := r.failure(); failed != nil {
		return failed
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// listOnly makes the reflector list, never stream the list through a watch, so that the
// first list tells whether the inventory exists.
type listOnly struct{ *cache.ListWatch }

func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }

// states turns the informer's events into the calls of onEvent: in order, none twice (a
// re-list repeats the objects it finds).
type states struct {
	name    string
	onEvent Func

	delivered   bool
	lastRV      string
	lastDeleted bool
}

func (s *states) next(ev watch.Event) (bool, error) {
	gi, ok := ev.Object.(*homelabv1.GpuInventory)
	if !ok || gi.Name != s.name {
		return false, nil
	}
	switch ev.Type {
	case watch.Added, watch.Modified:
		return s.deliver(gi)
	case watch.Deleted:
		return s.deliver(nil)
	}
	return false, nil
}

func (s *states) deliver(gi *homelabv1.GpuInventory) (bool, error) {
	deleted := gi == nil
	if s.delivered && deleted == s.lastDeleted && (deleted || gi.ResourceVersion == s.lastRV) {
		return false, nil
	}
	s.delivered, s.lastDeleted = true, deleted
	if !deleted {
		s.lastRV = gi.ResourceVersion
		gi = gi.DeepCopy() // the informer's store holds the same object
	}
	return s.onEvent(gi, deleted)
}

// requests watches the list and watch requests: what the first list found, and the first
// error that ends the follow (which it cancels).
type requests struct {
	name       string
	cancel     context.CancelFunc
	connection func(error) // Options.Connection

	mu          sync.Mutex
	succeeded   bool // a list or watch has succeeded
	found       bool // the first list had the inventory
	err         *Error
	interrupted bool // the last request failed, and is retried
}

func (r *requests) listed(list *homelabv1.GpuInventoryList, err error) {
	r.mu.Lock()
	if err != nil {
		retried := r.fail("list", err, !r.succeeded)
		r.mu.Unlock()
		r.tell(retried, err)
		return
	}
	if !r.succeeded {
		for i := range list.Items {
			r.found = r.found || list.Items[i].Name == r.name
		}
	}
	r.mu.Unlock()
	r.succeed()
}

func (r *requests) watched(err error) {
	r.mu.Lock()
	if err != nil {
		retried := r.fail("watch", err, false)
		r.mu.Unlock()
		r.tell(retried, err)
		return
	}
	r.mu.Unlock()
	r.succeed()
}

// succeed records a request that succeeded, and tells Options.Connection when it ends an
// interruption.
func (r *requests) succeed() {
	r.mu.Lock()
	back := r.interrupted
	r.succeeded, r.interrupted = true, false
	r.mu.Unlock()
	r.tell(back, nil)
}

// tell calls Options.Connection with err when should is set.
func (r *requests) tell(should bool, err error) {
	if should && r.connection != nil {
		r.connection(err)
	}
}

// fail records err if it is final: any error when always is set, else errors that no retry
// mends. It reports whether the request will be retried instead. r.mu is held.
func (r *requests) fail(verb string, err error, always bool) (retried bool) {
	final := always || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err)
	if final {
		if r.err == nil {
			r.err = &Error{Verb: verb, Err: err}
			r.cancel()
		}
		return false
	}
	r.interrupted = true
	return true
}

func (r *requests) foundFirst() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.found
}

func (r *requests) failure() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		return nil
	}
	return r.err
}
