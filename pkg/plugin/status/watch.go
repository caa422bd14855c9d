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

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/klog/v2"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/follow"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

// follow prints the inventory, then follows it (pkg/follow), printing it again whenever its
// spec or status changes or it is deleted, until ctx ends.
func (o *showOptions) follow(ctx context.Context, env factory.Environment, c *factory.Factory, gi *homelabv1.GpuInventory) error {
	gpu, err := c.GPU()
	if err != nil {
		return err
	}
	d := o.newDrawer(env)
	if err := d.draw(gi); err != nil {
		return err
	}
	last := gi
	// client-go logs its reconnects; what a user needs to know is reported here.
	quiet := klog.NewContext(ctx, logr.Discard())
	err = follow.Inventory(quiet, gpu.GpuInventories(), gi.Name, func(cur *homelabv1.GpuInventory, deleted bool) (bool, error) {
		switch {
		case deleted && last != nil:
			last = nil
			return false, d.deleted(gi.Name)
		case !deleted && (last == nil || !equality.Semantic.DeepEqual(last.Spec, cur.Spec) || !equality.Semantic.DeepEqual(last.Status, cur.Status)):
			last = cur
			return false, d.draw(cur)
		}
		return false, nil
	})
	var requestErr *follow.Error
	switch {
	case ctx.Err() != nil:
		if o.failOnDegraded && last != nil && factory.Degraded(last) {
			return &factory.Exit{Code: factory.ExitDegraded}
		}
		return nil
	case errors.As(err, &requestErr) && requestErr.Verb == "list":
		return c.Explain(requestErr.Err, factory.ListInventory)
	case errors.As(err, &requestErr):
		return c.Explain(requestErr.Err, factory.WatchInventory)
	}
	return err
}

// drawer prints each state of a followed inventory.
type drawer struct {
	env      factory.Environment
	opts     *showOptions
	objects  *factory.ObjectPrinter // -o json/yaml: one object per change
	terminal bool                   // redraw the report
}

func (o *showOptions) newDrawer(env factory.Environment) *drawer {
	d := &drawer{env: env, opts: o}
	switch o.output {
	case factory.OutputJSON:
		d.objects = &factory.ObjectPrinter{OmitManagedFields: true}
	case factory.OutputYAML:
		d.objects = &factory.ObjectPrinter{YAML: true, OmitManagedFields: true} // "---" between objects
	default:
		d.terminal = env.Terminal
	}
	return d
}

func (d *drawer) draw(gi *homelabv1.GpuInventory) error {
	out := d.env.Out
	switch {
	case d.objects != nil:
		gi = gi.DeepCopy()
		factory.SetKinds(gi)
		return d.objects.Print(gi, out)
	case d.terminal:
		popts := factory.PrintOptions(d.env, d.opts.output)
		popts.Problems = d.opts.problems
		return printer.WatchScreen(out, gi, popts)
	default:
		_, err := fmt.Fprintln(out, printer.Line(gi))
		return err
	}
}

func (d *drawer) deleted(name string) error {
	if d.objects != nil {
		return nil
	}
	return printer.WatchDeleted(d.env.Out, name, d.terminal)
}
