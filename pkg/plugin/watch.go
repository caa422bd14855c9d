package plugin

import (
	"context"
	"fmt"
	"io"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

// clearScreen moves the cursor home and clears the terminal.
const clearScreen = "\x1b[H\x1b[2J"

// follow prints the inventory, then follows it with a watch on that one object (a field
// selector on metadata.name), printing it again whenever its spec or status changes, until
// ctx ends. A watch that expired is resumed from a fresh list.
func (o *showOptions) follow(ctx context.Context, env Environment, c *clients, gi *homelabv1.GpuInventory) error {
	gpu, err := c.GPU()
	if err != nil {
		return err
	}
	name := gi.Name
	d := o.newDrawer(env)
	if err := d.draw(gi); err != nil {
		return err
	}
	last, rv := gi, gi.ResourceVersion
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		opts.FieldSelector = selector
		return gpu.HomelabV1().GpuInventories().Watch(ctx, opts)
	}}
	// The RetryWatcher logs its reconnects; what a user needs to know is reported here.
	quiet := klog.NewContext(ctx, logr.Discard())
	changed := func(cur *homelabv1.GpuInventory) bool {
		return last == nil || !equality.Semantic.DeepEqual(last.Spec, cur.Spec) || !equality.Semantic.DeepEqual(last.Status, cur.Status)
	}
	done := func() error {
		if o.failOnDegraded && last != nil && degraded(last) {
			return &exitError{code: ExitDegraded}
		}
		return nil
	}
	for {
		w, err := watchtools.NewRetryWatcherWithContext(quiet, rv, lw)
		if err != nil {
			return fmt.Errorf("watch GpuInventory %s: %w", name, err)
		}
		expired := false
	events:
		for {
			select {
			case <-ctx.Done():
				w.Stop()
				return done()
			case ev, ok := <-w.ResultChan():
				if !ok {
					break events
				}
				switch ev.Type {
				case watch.Added, watch.Modified:
					cur, ok := ev.Object.(*homelabv1.GpuInventory)
					if !ok {
						continue
					}
					rv = cur.ResourceVersion
					if !changed(cur) {
						continue
					}
					last = cur
					if err := d.draw(cur); err != nil {
						w.Stop()
						return err
					}
				case watch.Deleted:
					if cur, ok := ev.Object.(*homelabv1.GpuInventory); ok {
						rv = cur.ResourceVersion
					}
					last = nil
					if err := d.deleted(name); err != nil {
						w.Stop()
						return err
					}
				case watch.Error:
					err := apierrors.FromObject(ev.Object)
					w.Stop()
					if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
						expired = true
						break events
					}
					return c.explain(err, watchInventory)
				}
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return done()
		}
		if !expired {
			return fmt.Errorf("the watch of GpuInventory %s ended unexpectedly", name)
		}
		// Too old a resourceVersion: list the object again and resume from there.
		list, err := gpu.HomelabV1().GpuInventories().List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			if ctx.Err() != nil {
				return done()
			}
			return c.explain(err, listInventory)
		}
		rv = list.ResourceVersion
		switch {
		case len(list.Items) == 1 && changed(&list.Items[0]):
			last = &list.Items[0]
			if err := d.draw(last); err != nil {
				return err
			}
		case len(list.Items) == 0 && last != nil: // deleted while the watch was down
			last = nil
			if err := d.deleted(name); err != nil {
				return err
			}
		}
	}
}

// drawer prints each state of a followed inventory.
type drawer struct {
	env      Environment
	opts     *showOptions
	objects  printers.ResourcePrinter // -o json/yaml: one object per change
	terminal bool                     // redraw the report
}

func (o *showOptions) newDrawer(env Environment) *drawer {
	d := &drawer{env: env, opts: o}
	switch o.output {
	case outputJSON:
		d.objects = &printers.OmitManagedFieldsPrinter{Delegate: &printers.JSONPrinter{}}
	case outputYAML:
		d.objects = &printers.OmitManagedFieldsPrinter{Delegate: &printers.YAMLPrinter{}} // "---" between objects
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
		setKinds(gi)
		return d.objects.PrintObj(gi, out)
	case d.terminal:
		popts := printOptions(d.env, d.opts.output)
		popts.Problems = d.opts.problems
		if _, err := io.WriteString(out, clearScreen); err != nil {
			return err
		}
		if err := printer.Report(out, gi, popts); err != nil {
			return err
		}
		_, err := fmt.Fprintf(out, "\nWatching GpuInventory %s (Ctrl-C to stop).\n", gi.Name)
		return err
	default:
		_, err := fmt.Fprintln(out, printer.Line(gi))
		return err
	}
}

func (d *drawer) deleted(name string) error {
	switch {
	case d.objects != nil:
		return nil
	case d.terminal:
		_, err := fmt.Fprintf(d.env.Out, "%sGpuInventory %s was deleted; waiting for it to be created again (Ctrl-C to stop).\n", clearScreen, name)
		return err
	default:
		_, err := fmt.Fprintf(d.env.Out, "- %s: deleted\n", name)
		return err
	}
}
