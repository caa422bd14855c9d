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

package live

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/nodecache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

// ScanName is the name of the GpuInventory that a scan prints with -o json or -o yaml.
const ScanName = "scan"

type scanOptions struct {
	selector       string
	output         string
	problems       bool
	failOnDegraded bool
	chunkSize      int64
	maxNodes       int
}

func NewScanCommand(env factory.Environment, c *factory.Factory) *cobra.Command {
	o := &scanOptions{chunkSize: 500, maxNodes: inventory.DefaultMaxStatusNodes}
	cmd := &cobra.Command{
		Use:   "scan [flags]",
		Short: "Compute the inventory straight from the Nodes, without the operator or its CRD",
		Long: `Compute the inventory straight from the Nodes, with the operator's own code, so that the
result equals what the operator would write into a GpuInventory with the same node selector.
It needs "list" on nodes (and on resourceslices, for the GPUs NVIDIA's DRA driver publishes),
and works on a cluster where the operator is not installed.

A scan has no memory: a node whose GPU Feature Discovery labels are gone is shown as
<unlabeled>, where the operator keeps its last-known product, count and memory.`,
		Example: `  kubectl gpuinv scan
  kubectl gpuinv scan -l pool=a100 --problems
  kubectl gpuinv scan -o json | jq .status.totalGpus`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := factory.ValidateOutput(o.output, o.problems); err != nil {
				return err
			}
			if o.chunkSize < 0 || o.maxNodes < 0 {
				return factory.Usagef("--chunk-size and --max-nodes must not be negative")
			}
			core, err := c.Core()
			if err != nil {
				return err
			}
			slices, err := sliceLister(c)
			if err != nil {
				return err
			}
			devices := func(ctx context.Context) (inventory.Devices, error) {
				devices, note, err := deviceFacts(ctx, slices, o.chunkSize)
				if note != "" {
					fmt.Fprintf(env.ErrOut, "Note: %s\n", note)
				}
				return devices, err
			}
			gi, read, err := scan(cmd.Context(), core, devices, o.selector, o.chunkSize, o.maxNodes, env.Clock())
			if err != nil {
				return c.ExplainNodes(err)
			}
			popts := factory.PrintOptions(env, o.output)
			popts.Problems = o.problems
			popts.Scan = &printer.ScanSource{Nodes: read, Selector: o.selector}
			if err := factory.PrintInventory(env.Out, gi, o.output, popts); err != nil {
				return err
			}
			if o.failOnDegraded && factory.Degraded(gi) {
				return &factory.Exit{Code: factory.ExitDegraded}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&o.selector, "selector", "l", "", "Label selector of the nodes to inventory (as a GpuInventory's spec.nodeSelector), e.g. pool=a100 or 'pool in (a100,h100)'.")
	factory.AddOutputFlags(cmd, &o.output, &o.problems, &o.failOnDegraded)
	cmd.Flags().Int64Var(&o.chunkSize, "chunk-size", o.chunkSize, "Nodes per page of the node list: each page is reduced to what the inventory reads before the next is fetched. 0 lists all nodes in one response.")
	cmd.Flags().IntVar(&o.maxNodes, "max-nodes", o.maxNodes, "Most GPU nodes listed (problem nodes first), as the operator's --max-status-nodes; totals and models always count all. 0 lists every node.")
	return cmd
}

// scan computes a GpuInventory for the nodes matching selector exactly as the operator's
// inventory controller does (inventory.Selector, NodeTrimmer, Compute, Listed, Conditions),
// without memory of earlier scans. It reads the node list page by page and keeps only the
// trimmed GPU nodes of each page, so the whole list is never held decoded. It returns the
// inventory and how many nodes it read.
// devices reads what each node's DRA slices say, once the nodes are read (nil: no slices).
func scan(ctx context.Context, core rest.Interface, devices func(context.Context) (inventory.Devices, error), selector string, chunkSize int64, maxNodes int, now time.Time) (*homelabv1.GpuInventory, int, error) {
	gi := &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: ScanName}}
	gi.SetGroupVersionKind(homelabv1.SchemeGroupVersion.WithKind("GpuInventory"))
	if selector != "" {
		ls, err := metav1.ParseToLabelSelector(selector)
		if err != nil {
			return nil, 0, factory.Usagef("--selector %q: %v", selector, err)
		}
		gi.Spec.NodeSelector = ls
	}
	sel, err := inventory.Selector(gi.Spec.NodeSelector)
	if err != nil {
		return nil, 0, factory.Usagef("--selector %q: %v", selector, err)
	}
	kept, read, err := gpuNodes(ctx, core, sel, chunkSize)
	if err != nil {
		return nil, 0, err
	}
	var facts inventory.Devices
	if devices != nil {
		if facts, err = devices(ctx); err != nil {
			return nil, 0, err
		}
	}
	gi.Status = InventoryStatus(kept, facts, nil, maxNodes, gi.Generation, now)
	return gi, read, nil
}

// InventoryStatus is the status the operator's inventory controller writes for nodes
// (trimmed or not) on its first sync, given the entries of a previous status (for last-known
// labels): the same functions, the same size bound (maxNodes, 0 for no bound), conditions
// whose transition time is now.
// devices are what the nodes' DRA slices say (nil: none).
func InventoryStatus(nodes []*corev1.Node, devices inventory.Devices, previous []homelabv1.GpuNodeEntry, maxNodes int, generation int64, now time.Time) homelabv1.GpuInventoryStatus {
	content, _ := inventory.NewEntryCacheWithDevices(devices).Compute(nodes, previous, now) // warnings are in the entries too
	listed, omitted := content.Nodes, 0
	if maxNodes > 0 {
		listed, omitted = content.Listed(maxNodes, inventory.MaxNodeListBytes)
	}
	conditions := inventory.Conditions(content, omitted, generation)
	at := metav1.NewTime(now)
	for i := range conditions {
		conditions[i].LastTransitionTime = at
	}
	return content.Status(listed, conditions, generation, at)
}

// gpuNodes lists the nodes matching sel, chunkSize at a time, and keeps the GPU nodes reduced
// to what the inventory reads, as the operator's informer transform (nodecache.NodeTrimmer)
// does. Each page is read as a protobuf stream that skips what the trimmer drops without
// decoding it (nodecache.DecodeNodeStream).
func gpuNodes(ctx context.Context, core rest.Interface, sel labels.Selector, chunkSize int64) ([]*corev1.Node, int, error) {
	decode := nodecache.NewNodeTrimmer(nil).DecodeNode // the API server applies the selector
	opts := metav1.ListOptions{LabelSelector: sel.String(), Limit: chunkSize}
	var kept []*corev1.Node
	keep := func(node *corev1.Node) {
		if inventory.IsGPUNode(node) {
			kept = append(kept, node)
		}
	}
	read := 0
	for {
		meta, n, err := factory.StreamNodes(ctx, core, opts, decode, keep)
		if err != nil {
			return nil, 0, err
		}
		read += n
		if meta.Continue == "" {
			return kept, read, nil
		}
		opts.Continue = meta.Continue
	}
}
