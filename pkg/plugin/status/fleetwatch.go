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

package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/klog/v2"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/follow"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

// Retries of a cluster whose follow ended (its inventory or CRD gone, permission lost, or not
// reachable at the start): the first after RetryFirst, doubling up to RetryMost. Variables, so
// that tests retry at once.
var (
	RetryFirst = time.Second
	RetryMost  = 30 * time.Second
)

// clusterEvent is what the follower of one cluster saw.
type clusterEvent struct {
	member  int
	gi      *homelabv1.GpuInventory // a state of the inventory
	deleted bool                    // the inventory was deleted
	problem string                  // the cluster cannot be read, and is retried
	back    bool                    // requests succeed again after a problem
}

// clusterState is what the fleet watch knows of one cluster.
type clusterState struct {
	last    *homelabv1.GpuInventory // the last state seen; nil before any, or once deleted
	problem string                  // why the cluster is not shown now ("" when it is)
	since   time.Time               // when the problem was first seen
}

// followFleet prints the fleet that fetchAll read, then follows every cluster's inventory
// (pkg/follow) and prints the fleet again on each change: a new state of an inventory, a
// cluster that cannot be read any more (retried until it can) and one that can again.
func (o *showOptions) followFleet(ctx context.Context, env factory.Environment, errOut io.Writer, name string, members []*member) error {
	states := make([]clusterState, len(members))
	read := 0
	for i, m := range members {
		states[i] = clusterState{last: m.gi, problem: m.problem}
		if m.gi == nil {
			states[i].since = env.Clock()
		} else {
			read++
		}
	}
	if read == 0 {
		for _, m := range members {
			fmt.Fprintf(errOut, "error: context %q: %s\n", m.context, m.problem)
		}
		return &factory.Exit{Code: factory.ExitError}
	}
	w := o.newFleetDrawer(env, errOut, name, members)
	if err := w.start(states); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	events := make(chan clusterEvent)
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() { followCluster(ctx, i, m, name, events) })
	}
	defer func() {
		cancel()
		wg.Wait()
	}()
	for {
		select {
		case <-ctx.Done():
			return o.fleetWatchExit(states)
		case ev := <-events:
			if err := w.apply(&states[ev.member], ev); err != nil {
				return err
			}
		}
	}
}

// fleetWatchExit is fleetExit for the last states seen when the watch was stopped.
func (o *showOptions) fleetWatchExit(states []clusterState) error {
	members := make([]*member, len(states))
	for i, s := range states {
		members[i] = &member{}
		if s.problem == "" {
			members[i].gi = s.last
		}
	}
	return o.fleetExit(members)
}

// followCluster follows the inventory name of one cluster until ctx ends, and sends what it
// sees to events. A follow that ends is started again after a pause that grows.
func followCluster(ctx context.Context, i int, m *member, name string, events chan<- clusterEvent) {
	send := func(ev clusterEvent) bool {
		ev.member = i
		select {
		case events <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	gpu, err := m.clients.GPU()
	if err != nil {
		return // fetch reported it; without a client there is nothing to retry
	}
	// client-go logs its reconnects; what a user needs to know is sent from here.
	quiet := klog.NewContext(ctx, logr.Discard())
	pause := RetryFirst
	for {
		err := follow.InventoryWith(quiet, gpu.GpuInventories(), name, func(gi *homelabv1.GpuInventory, deleted bool) (bool, error) {
			pause = RetryFirst
			send(clusterEvent{gi: gi, deleted: deleted})
			return false, nil
		}, follow.Options{Connection: func(err error) {
			if err != nil {
				send(clusterEvent{problem: m.clients.Problem(err, name, false, 0)})
			} else {
				send(clusterEvent{back: true})
			}
		}})
		if ctx.Err() != nil {
			return
		}
		var requestErr *follow.Error
		if errors.As(err, &requestErr) {
			err = requestErr.Err
		}
		if !send(clusterEvent{problem: m.clients.Problem(err, name, false, 0)}) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, RetryMost)
	}
}

// fleetDrawer prints each state of a followed fleet: on a terminal the fleet report, redrawn;
// with -o json/yaml each new state of an inventory, annotated with its context; otherwise a
// line per change.
type fleetDrawer struct {
	env      factory.Environment
	opts     *showOptions
	errOut   io.Writer
	name     string
	members  []*member
	states   []clusterState // the watch's states, for redrawing
	objects  *factory.ObjectPrinter
	terminal bool
}

func (o *showOptions) newFleetDrawer(env factory.Environment, errOut io.Writer, name string, members []*member) *fleetDrawer {
	d := &fleetDrawer{env: env, opts: o, errOut: errOut, name: name, members: members}
	switch o.output {
	case factory.OutputJSON:
		d.objects = &factory.ObjectPrinter{}
	case factory.OutputYAML:
		d.objects = &factory.ObjectPrinter{YAML: true}
	default:
		d.terminal = env.Terminal
	}
	return d
}

// start prints the fleet as first read.
func (d *fleetDrawer) start(states []clusterState) error {
	d.states = states
	if d.terminal {
		return d.redraw()
	}
	for i, s := range states {
		var err error
		switch {
		case s.problem != "" && !d.members[i].clients.MadeGPU():
			// No client could be made (the kubeconfig's entry): there is nothing to retry.
			err = d.printLines([]string{printer.FleetUnreadLine(d.members[i].context, s.problem, s.since)})
		case s.problem != "":
			err = d.printLines([]string{printer.FleetProblemLine(d.members[i].context, s.problem, s.since)})
		default:
			err = d.printState(i, s.last)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// printLines prints lines about the clusters (not states of an inventory): on stdout, or
// beside -o json/yaml on stderr.
func (d *fleetDrawer) printLines(lines []string) error {
	out := d.env.Out
	if d.objects != nil {
		out = d.errOut
	}
	for _, l := range lines {
		if _, err := fmt.Fprintln(out, l); err != nil {
			return err
		}
	}
	return nil
}

// apply updates a cluster's state with what its follower saw, and prints the change.
func (d *fleetDrawer) apply(s *clusterState, ev clusterEvent) error {
	ctxName := d.members[ev.member].context
	now := d.env.Clock()
	var lines []string
	changed := false
	switch {
	case ev.problem != "":
		if s.problem == ev.problem {
			return nil
		}
		if s.problem == "" {
			s.since = now
		}
		s.problem = ev.problem
		lines = append(lines, printer.FleetProblemLine(ctxName, ev.problem, now))
	case ev.deleted:
		if s.last == nil && s.problem != "" {
			return nil
		}
		s.last, s.problem, s.since = nil, fmt.Sprintf("GpuInventory %q was deleted; waiting for it to be created again", d.name), now
		lines = append(lines, printer.FleetDeletedLine(ctxName, d.name))
	case ev.back:
		if s.problem == "" || s.last == nil {
			return nil // nothing to show until a state comes
		}
		s.problem = ""
		lines = append(lines, printer.FleetReconnectedLine(ctxName, now))
	default:
		if s.problem != "" && s.last != nil {
			lines = append(lines, printer.FleetReconnectedLine(ctxName, now))
		}
		wasShown := s.problem == ""
		s.problem = ""
		if s.last != nil && equality.Semantic.DeepEqual(s.last.Spec, ev.gi.Spec) && equality.Semantic.DeepEqual(s.last.Status, ev.gi.Status) {
			if wasShown {
				return nil
			}
		} else {
			s.last = ev.gi
			changed = true
		}
	}
	if d.terminal {
		return d.redraw()
	}
	if err := d.printLines(lines); err != nil {
		return err
	}
	if changed {
		return d.printState(ev.member, s.last)
	}
	return nil
}

// printState prints one new state of a cluster's inventory: the object or a line.
func (d *fleetDrawer) printState(i int, gi *homelabv1.GpuInventory) error {
	if d.objects != nil {
		return d.objects.Print(annotated(d.members[i].context, gi), d.env.Out)
	}
	_, err := fmt.Fprintln(d.env.Out, printer.FleetLine(d.members[i].context, gi))
	return err
}

// redraw clears the terminal and prints the fleet report with the clusters not shown now.
func (d *fleetDrawer) redraw() error {
	f := printer.Fleet{Name: d.name, ShowUnread: true}
	for i, s := range d.states {
		c := printer.FleetCluster{Context: d.members[i].context, Problem: s.problem, Since: s.since}
		if s.problem == "" {
			c.Inventory = s.last
		}
		f.Clusters = append(f.Clusters, c)
	}
	popts := factory.PrintOptions(d.env, d.opts.output)
	popts.Problems = d.opts.problems
	return printer.FleetWatchScreen(d.env.Out, f, popts)
}
