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

package follow

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned/fake"
)

// The tests write through the tracker; the simple clientset's does no field management, for
// which the apply configurations carry no schema.
var resource = homelabv1.SchemeGroupVersion.WithResource("gpuinventories")

func inventory(name, rv string, readyGpus int32) *homelabv1.GpuInventory {
	return &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv},
		Status: homelabv1.GpuInventoryStatus{ReadyGpus: readyGpus}}
}

// state is one call of onEvent.
type state struct {
	rv      string
	ready   int32
	deleted bool
}

// follower runs Inventory on "cluster" in the background and hands over each state it sees.
type follower struct {
	states chan state
	done   chan error
}

func start(t *testing.T, ctx context.Context, client *fake.Clientset, until func(state) bool) *follower {
	t.Helper()
	f := &follower{states: make(chan state, 100), done: make(chan error, 1)}
	go func() {
		f.done <- Inventory(ctx, client.HomelabV1().GpuInventories(), "cluster", func(gi *homelabv1.GpuInventory, deleted bool) (bool, error) {
			s := state{deleted: deleted}
			if !deleted {
				if gi.Name != "cluster" {
					t.Errorf("onEvent got inventory %s, want cluster", gi.Name)
				}
				s.rv, s.ready = gi.ResourceVersion, gi.Status.ReadyGpus
			}
			f.states <- s
			return until != nil && until(s), nil
		})
	}()
	return f
}

// next returns the next state onEvent saw.
func (f *follower) next(t *testing.T) state {
	t.Helper()
	select {
	case s := <-f.states:
		return s
	case err := <-f.done:
		t.Fatalf("Inventory returned %v before the next state", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no state within 10s")
	}
	return state{}
}

func (f *follower) expect(t *testing.T, want state) {
	t.Helper()
	if got := f.next(t); got != want {
		t.Fatalf("state %+v, want %+v", got, want)
	}
}

// result returns what Inventory returned.
func (f *follower) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-f.done:
		return err
	case s := <-f.states:
		t.Fatalf("state %+v, want Inventory to return", s)
	case <-time.After(10 * time.Second):
		t.Fatal("Inventory did not return within 10s")
	}
	return nil
}

// watchStarted signals each watch request the client receives.
func watchStarted(client *fake.Clientset) <-chan struct{} {
	started := make(chan struct{}, 10)
	client.PrependWatchReactor("gpuinventories", func(clienttesting.Action) (bool, watch.Interface, error) {
		started <- struct{}{}
		return false, nil, nil
	})
	return started
}

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10s", what)
	}
}

func TestFollowsChangesDeletionAndRecreation(t *testing.T) {
	// Another inventory shares the fake's list and watch (it ignores field selectors).
	client := fake.NewClientset(inventory("cluster", "1", 0), inventory("other", "1", 5))
	watching := watchStarted(client)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f := start(t, ctx, client, nil)
	f.expect(t, state{rv: "1"})
	wait(t, watching, "watch")

	tracker := client.Tracker()
	if err := tracker.Update(resource, inventory("other", "2", 6), "", metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := tracker.Update(resource, inventory("cluster", "2", 1), "", metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.expect(t, state{rv: "2", ready: 1})
	if err := tracker.Delete(resource, "", "cluster", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.expect(t, state{deleted: true})
	if err := tracker.Create(resource, inventory("cluster", "3", 2), ""); err != nil {
		t.Fatal(err)
	}
	f.expect(t, state{rv: "3", ready: 2})

	cancel()
	if err := f.result(t); !errors.Is(err, context.Canceled) {
		t.Errorf("Inventory returned %v when ctx ended, want context.Canceled", err)
	}
}

func TestReportsAnInventoryThatDoesNotExistThenItsCreation(t *testing.T) {
	client := fake.NewClientset()
	watching := watchStarted(client)
	_, ctx := ktesting.NewTestContext(t)
	f := start(t, ctx, client, func(s state) bool { return !s.deleted })
	f.expect(t, state{deleted: true})
	wait(t, watching, "watch")
	if err := client.Tracker().Create(resource, inventory("cluster", "1", 4), ""); err != nil {
		t.Fatal(err)
	}
	f.expect(t, state{rv: "1", ready: 4})
	if err := f.result(t); err != nil {
		t.Errorf("Inventory returned %v after onEvent said done, want nil", err)
	}
}

// An expired watch (HTTP 410) is resumed from a fresh list, which reports what changed while
// the watch was down, a deletion included.
func TestResumesAfterExpiry(t *testing.T) {
	for name, meanwhile := range map[string]struct {
		change func(*fake.Clientset) error
		want   state
	}{
		"changed": {func(c *fake.Clientset) error {
			return c.Tracker().Update(resource, inventory("cluster", "2", 1), "", metav1.UpdateOptions{})
		}, state{rv: "2", ready: 1}},
		"deleted": {func(c *fake.Clientset) error {
			return c.Tracker().Delete(resource, "", "cluster", metav1.DeleteOptions{})
		}, state{deleted: true}},
	} {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset(inventory("cluster", "1", 0))
			expiring := watch.NewFake()
			watches := make(chan int, 10)
			count := 0
			client.PrependWatchReactor("gpuinventories", func(clienttesting.Action) (bool, watch.Interface, error) {
				count++
				watches <- count
				if count == 1 {
					return true, expiring, nil
				}
				return false, nil, nil // the tracker serves the watches after the first
			})
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			f := start(t, ctx, client, nil)
			f.expect(t, state{rv: "1"})
			if n := <-watches; n != 1 {
				t.Fatalf("watch %d, want 1", n)
			}
			if err := meanwhile.change(client); err != nil {
				t.Fatal(err)
			}
			expiring.Error(&metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired,
				Message: "too old resource version: 1 (5)"})
			f.expect(t, meanwhile.want)
			if n := <-watches; n != 2 {
				t.Fatalf("watch %d after the re-list, want 2", n)
			}
		})
	}
}

// Errors that no retry mends come back at once, as an *Error naming the request.
func TestReturnsRequestErrors(t *testing.T) {
	forbidden := apierrors.NewForbidden(homelabv1.Resource("gpuinventories"), "", errors.New("no RBAC"))
	notServed := apierrors.NewNotFound(homelabv1.Resource("gpuinventories"), "")
	unreachable := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	for _, tc := range []struct {
		name string
		verb string
		err  error
	}{
		{"forbidden list", "list", forbidden},
		{"CRD not installed", "list", notServed},
		{"unreachable", "list", unreachable},
		{"forbidden watch", "watch", forbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
			ctx := klog.NewContext(context.Background(), logger)
			client := fake.NewClientset(inventory("cluster", "1", 0))
			if tc.verb == "list" {
				client.PrependReactor("list", "gpuinventories", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, tc.err
				})
			} else {
				client.PrependWatchReactor("gpuinventories", func(clienttesting.Action) (bool, watch.Interface, error) {
					return true, nil, tc.err
				})
			}
			// Long before client-go's retries would give up, which they never do.
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			err := Inventory(ctx, client.HomelabV1().GpuInventories(), "cluster", func(*homelabv1.GpuInventory, bool) (bool, error) { return false, nil })
			var fe *Error
			if !errors.As(err, &fe) || fe.Verb != tc.verb || !errors.Is(err, tc.err) {
				t.Errorf("Inventory returned %v, want an *Error of %s wrapping %v", err, tc.verb, tc.err)
			}
			// The caller reports a failed first list; client-go does not log it too.
			if logged := logger.GetSink().(ktesting.Underlier).GetBuffer().String(); tc.verb == "list" && strings.Contains(logged, "Failed to watch") {
				t.Errorf("a failed first list was logged:\n%s", logged)
			}
		})
	}
}

func TestReturnsWhatOnEventReturns(t *testing.T) {
	client := fake.NewClientset(inventory("cluster", "1", 0))
	stop := errors.New("stop")
	_, ctx := ktesting.NewTestContext(t)
	err := Inventory(ctx, client.HomelabV1().GpuInventories(), "cluster", func(*homelabv1.GpuInventory, bool) (bool, error) {
		return false, stop
	})
	if err != stop {
		t.Errorf("Inventory returned %v, want onEvent's error", err)
	}
}

// A lost connection is retried by client-go; Options.Connection hears of each failed request
// and of the first that succeeds again, and the follow goes on.
func TestTellsOfALostConnectionAndItsReturn(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/apis/homelab.youngju.dev/v1/gpuinventories",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	client := fake.NewClientset(inventory("cluster", "1", 0))
	count := 0
	client.PrependWatchReactor("gpuinventories", func(clienttesting.Action) (bool, watch.Interface, error) {
		count++
		if count <= 2 {
			return true, nil, refused
		}
		return false, nil, nil // the tracker serves the watches after two failures
	})
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	told := make(chan error, 10)
	states := make(chan state, 10)
	done := make(chan error, 1)
	go func() {
		done <- InventoryWith(ctx, client.HomelabV1().GpuInventories(), "cluster", func(gi *homelabv1.GpuInventory, deleted bool) (bool, error) {
			states <- state{rv: gi.ResourceVersion, ready: gi.Status.ReadyGpus}
			return gi.Status.ReadyGpus == 3, nil
		}, Options{Connection: func(err error) { told <- err }})
	}()
	next := func() error {
		t.Helper()
		select {
		case err := <-told:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("Connection was not called within 10s")
		}
		return nil
	}
	if s := <-states; s.rv != "1" {
		t.Fatalf("first state %+v, want resourceVersion 1", s)
	}
	for i := 1; i <= 2; i++ {
		if err := next(); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("call %d of Connection: %v, want the refused connection", i, err)
		}
	}
	if err := next(); err != nil {
		t.Fatalf("Connection(%v) once the watch succeeded, want nil", err)
	}
	if err := client.Tracker().Update(resource, inventory("cluster", "2", 3), "", metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("InventoryWith returned %v, want nil after onEvent said done", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the change after the reconnection was not followed within 10s")
	}
	if len(told) > 0 {
		t.Errorf("Connection called again after the reconnection: %v", <-told)
	}
}
