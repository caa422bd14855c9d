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
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

// ContextAnnotation is set, in a fleet's -o json/yaml, on each inventory to the kubeconfig
// context it was read in. An annotation, not a label: context names need not be label values.
const ContextAnnotation = "gpuinv.homelab.youngju.dev/context"

// runFleet shows the inventory name of several kubeconfig contexts (names, or every context
// with --all-contexts).
func (o *showOptions) runFleet(ctx context.Context, env factory.Environment, c *factory.Factory, name string, names []string) error {
	if err := factory.ValidateOutput(o.output, o.problems); err != nil {
		return err
	}
	if o.allContexts && len(names) > 0 {
		return factory.Usagef("--all-contexts reads every context of the kubeconfig: give it or --context, not both")
	}
	if o.clusterTimeout <= 0 {
		return factory.Usagef("--cluster-timeout must be more than 0")
	}
	errOut := &syncWriter{w: env.ErrOut}
	members, err := o.members(c, names, errOut)
	if err != nil {
		return err
	}
	fetchAll(ctx, members, name, o.timeout)
	if o.watch {
		return o.followFleet(ctx, env, errOut, name, members)
	}
	read := 0
	for _, m := range members {
		if m.gi == nil {
			fmt.Fprintf(errOut, "error: context %q: %s\n", m.context, m.problem)
		} else {
			read++
		}
	}
	if read == 0 {
		return &factory.Exit{Code: factory.ExitError}
	}
	popts := factory.PrintOptions(env, o.output)
	popts.Problems = o.problems
	if err := showFleet(env.Out, fleetOf(name, members), members, o.output, popts); err != nil {
		return err
	}
	return o.fleetExit(members)
}

// members are the contexts to read, with their clients: names in the order given, or every
// context sorted by name. A name that is not a context of the kubeconfig is an error.
func (o *showOptions) members(c *factory.Factory, names []string, warnings io.Writer) ([]*member, error) {
	all, _, err := c.KubeconfigContexts()
	if err != nil {
		return nil, err
	}
	if o.allContexts {
		names = all
	}
	if len(names) == 0 {
		return nil, factory.Usagef("the kubeconfig has no context; --all-contexts reads its contexts")
	}
	var members []*member
	for _, n := range names {
		if !slices.Contains(all, n) {
			return nil, fmt.Errorf("context %q is not in the kubeconfig; its contexts are: %s", n, strings.Join(all, ", "))
		}
		members = append(members, &member{context: n, clients: c.ForContext(n, warnings)})
	}
	return members, nil
}

// timeout is how long a cluster has to answer: --cluster-timeout, or --request-timeout when
// only that is given.
func (o *showOptions) timeout(c *factory.Factory) time.Duration {
	if !o.clusterTimeoutSet {
		if t := c.RequestTimeout(); t > 0 {
			return t
		}
	}
	return o.clusterTimeout
}

// fleetExit is the exit status of a fleet: ExitPartial when some inventory is missing, else
// ExitDegraded with --fail-on-degraded when some inventory is Degraded.
func (o *showOptions) fleetExit(members []*member) error {
	if slices.ContainsFunc(members, func(m *member) bool { return m.gi == nil }) {
		return &factory.Exit{Code: factory.ExitPartial}
	}
	if o.failOnDegraded && slices.ContainsFunc(members, func(m *member) bool { return factory.Degraded(m.gi) }) {
		return &factory.Exit{Code: factory.ExitDegraded}
	}
	return nil
}

// fleetOf is what the printer shows of the members.
func fleetOf(name string, members []*member) printer.Fleet {
	f := printer.Fleet{Name: name}
	for _, m := range members {
		f.Clusters = append(f.Clusters, printer.FleetCluster{Context: m.context, Inventory: m.gi, Problem: m.problem})
	}
	return f
}

// showFleet prints a fleet in the chosen format: -o json/yaml a v1 List of the inventories
// read, each annotated with its context.
func showFleet(w io.Writer, f printer.Fleet, members []*member, output string, opts printer.Options) error {
	switch output {
	case factory.OutputJSON, factory.OutputYAML:
		list := &metav1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
		for _, m := range members {
			if m.gi != nil {
				list.Items = append(list.Items, runtime.RawExtension{Object: annotated(m.context, m.gi)})
			}
		}
		return factory.PrintObject(w, list, output)
	}
	return printer.FleetReport(w, f, opts)
}

// annotated is a copy of gi, as -o json prints it, annotated with its context.
func annotated(context string, gi *homelabv1.GpuInventory) *homelabv1.GpuInventory {
	gi = gi.DeepCopy()
	factory.SetKinds(gi)
	gi.ManagedFields = nil
	if gi.Annotations == nil {
		gi.Annotations = map[string]string{}
	}
	gi.Annotations[ContextAnnotation] = context
	return gi
}
