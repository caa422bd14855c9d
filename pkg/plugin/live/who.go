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

// Package live holds the verbs that read the cluster itself, not the operator's status:
// who (the pods and claims that hold GPUs, through the pod and claim caches' decoders) and
// scan (the inventory computed from the Nodes, through the node cache's decoder, with no
// operator needed). Each owns its options, its run and its output.
package live

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/claimcache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/podcache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/saturating"
)

// UnknownModel is the model of a holder on a node that has no GpuNode record.
const UnknownModel = "<unknown>"

type whoOptions struct {
	namespace     string
	allNamespaces bool
	byNamespace   bool
	output        string
	chunkSize     int64
}

func NewWhoCommand(env factory.Environment, c *factory.Factory) *cobra.Command {
	o := &whoOptions{chunkSize: 500}
	cmd := &cobra.Command{
		Use:   "who [flags]",
		Short: "List the pods that hold GPUs: namespace, pod, node, model, GPUs, since",
		Long: `List the pods that hold GPUs now, from the pods and DRA ResourceClaims themselves (not from the
operator): a pod bound to a node, not finished, requesting nvidia.com/gpu, nvidia.com/gpu.shared
or nvidia.com/mig-*, or reserving a ResourceClaim allocated gpu.nvidia.com devices. MODEL and
the GPUs a MIG device or a shared GPU is worth come from the node's GpuNode record.

GPUS is in GPU-equivalents: a whole GPU is 1, a MIG device its compute slices (1g.5gb of an
A100: 0.14), a time-sliced or MPS replica 1/replicas (0.25 of 4); parts show two decimals.
A GPU held through a claim that several pods share is marked * and counted once in the totals.
An allocated claim reserved for no pod is listed as claim/NAME.

Like kubectl get, it lists the current namespace; -n picks another, -A all of them. It needs
"list" on pods (and on resourceclaims.resource.k8s.io where DRA is served) there, and "list"
on gpunodes.homelab.youngju.dev for the models (without it GPUs are counted as whole units).
With -A and "list" on namespaces, each namespace's pods are listed apart, three at a time.`,
		Example: `  kubectl gpuinv who -A                    # every pod holding GPUs
  kubectl gpuinv who -n ml-team
  kubectl gpuinv who -A --by-namespace     # GPUs held per namespace
  kubectl gpuinv who -A -o json | jq '.holders[] | select(.model | test("H100"))'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch o.output {
			case factory.OutputTable, factory.OutputWide, factory.OutputJSON, factory.OutputYAML:
			default:
				return factory.Usagef("unknown output format %q: use wide, json or yaml", o.output)
			}
			if o.allNamespaces && cmd.Flags().Changed("namespace") {
				return factory.Usagef("-A lists all namespaces: do not combine it with -n")
			}
			if o.chunkSize < 0 {
				return factory.Usagef("--chunk-size must not be negative")
			}
			return o.run(cmd.Context(), env, c)
		},
	}
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "List the pods of this namespace (default: the current context's).")
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "List the pods of all namespaces.")
	cmd.Flags().BoolVar(&o.byNamespace, "by-namespace", false, "One row per namespace: its pods holding GPUs and the GPUs they hold.")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: wide (adds what each pod holds: resources, DRA devices and claims), json or yaml.")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{factory.OutputWide, factory.OutputJSON, factory.OutputYAML}, cobra.ShellCompDirectiveNoFileComp))
	cmd.Flags().Int64Var(&o.chunkSize, "chunk-size", o.chunkSize, "GpuNode records per page. 0 lists them in one response.")
	return cmd
}

func (o *whoOptions) run(ctx context.Context, env factory.Environment, c *factory.Factory) error {
	namespace := o.namespace
	if o.allNamespaces {
		namespace = ""
	} else if namespace == "" {
		var err error
		if namespace, err = c.Namespace(); err != nil {
			return err
		}
	}
	// With -A the pod lists are long: every record is read meanwhile.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		records    sync.WaitGroup
		shapes     map[string]*nodeShape
		note       string
		recordsErr error
	)
	if namespace == "" {
		records.Go(func() { shapes, note, recordsErr = readShapes(ctx, c, func(string) bool { return true }, o.chunkSize) })
	}
	pods, claims, err := readHolders(ctx, c, namespace)
	if err != nil {
		cancel()
		records.Wait()
		return err
	}
	holdings := allocation.Holdings(pods, claims)
	held, demand := allocation.Compute(pods, claims)
	nodes := map[string]*nodeShape{}
	for node := range held {
		nodes[node] = nil
	}
	for i := range holdings {
		nodes[holdings[i].Node] = nil
	}
	if namespace != "" && len(nodes) > 0 {
		shapes, note, recordsErr = readShapes(ctx, c, func(name string) bool { _, ok := nodes[name]; return ok }, o.chunkSize)
	}
	records.Wait()
	if recordsErr != nil && len(nodes) > 0 { // with nothing held, no model is needed
		return recordsErr
	}
	for name := range nodes {
		nodes[name] = shapes[name]
	}
	if note != "" && len(nodes) > 0 {
		fmt.Fprintf(env.ErrOut, "Note: %s\n", note)
	}
	answer := answerWho(namespace, holdings, held, demand, nodes, o.byNamespace)
	switch o.output {
	case factory.OutputJSON, factory.OutputYAML:
		return factory.WriteData(env.Out, answer, o.output)
	}
	return printer.WhoReport(env.Out, answer, o.output == factory.OutputWide, env.Clock())
}

// readHolders streams the GPU pods of namespace ("" for all) and its GPU claims, at once,
// keeping what allocation needs of the unfinished ones. Without the resource.k8s.io/v1 API
// there are no claims.
func readHolders(ctx context.Context, c *factory.Factory, namespace string) ([]*allocation.Pod, []*allocation.Claim, error) {
	core, err := c.Core()
	if err != nil {
		return nil, nil, err
	}
	resource, err := c.Resource()
	if err != nil {
		return nil, nil, err
	}
	var (
		claims    []*allocation.Claim
		claimsErr error
		listed    sync.WaitGroup
	)
	listed.Go(func() {
		claimsErr = claimcache.StreamClaims(ctx, resource, namespace, func(cl *allocation.Claim) error {
			claims = append(claims, cl)
			return nil
		})
	})
	var pods []*allocation.Pod
	var mu sync.Mutex // fn runs in several lists at once with -A
	podsErr := streamPods(ctx, core, namespace, func(p *allocation.Pod) error {
		if !p.Finished {
			mu.Lock()
			pods = append(pods, p)
			mu.Unlock()
		}
		return nil
	})
	listed.Wait()
	if podsErr != nil {
		return nil, nil, c.ExplainList(podsErr, factory.ListPods(namespace))
	}
	switch {
	case apierrors.IsNotFound(claimsErr):
		claims = nil // DRA is not served: pods only
	case claimsErr != nil:
		return nil, nil, c.ExplainList(claimsErr, factory.ListClaims(namespace))
	}
	return pods, claims, nil
}

// streamPods streams the GPU pods of namespace ("" for all) to fn, which must be safe to
// call from several goroutines. With -A, where namespaces may be listed, each namespace's
// pods are listed apart, podcache.Listers at a time (podcache.SplitNamespaces says when).
func streamPods(ctx context.Context, core rest.Interface, namespace string, fn func(*allocation.Pod) error) error {
	if namespace != "" {
		return podcache.StreamPods(ctx, core, namespace, fn)
	}
	names, _, err := podcache.SplitNamespaces(ctx, core, "")
	if err != nil || names == nil {
		return podcache.StreamPods(ctx, core, "", fn)
	}
	return podcache.StreamPodsEach(ctx, core, names, fn)
}

// nodeShape is what converting a node's held resources into GPUs needs, and its model.
type nodeShape struct {
	model string
	shape allocation.Shape
}

// readShapes reads the shape of each node that keep accepts from its GpuNode record, reading
// the records chunkSize at a time. Without the records (CRD not installed, or no permission)
// it returns a note instead, and the nodes stay unknown.
func readShapes(ctx context.Context, c *factory.Factory, keep func(node string) bool, chunkSize int64) (shapes map[string]*nodeShape, note string, err error) {
	gpu, err := c.GPU()
	if err != nil {
		return nil, "", err
	}
	shapes = map[string]*nodeShape{}
	opts := metav1.ListOptions{Limit: chunkSize}
	for {
		page, err := gpu.GpuNodes().List(ctx, opts)
		switch {
		case apierrors.IsNotFound(err):
			return nil, "the GpuNode CRD is not installed: models are unknown, and GPUs are counted without the nodes' MIG and sharing layout", nil
		case apierrors.IsForbidden(err):
			return nil, "cannot list gpunodes.homelab.youngju.dev (forbidden): models are unknown, and GPUs are counted without the nodes' MIG and sharing layout", nil
		case err != nil:
			return nil, "", c.Explain(err, factory.ListGpuNodes)
		}
		for i := range page.Items {
			if r := &page.Items[i]; keep(r.Name) {
				shapes[r.Name] = shapeOf(&r.Spec)
			}
		}
		if page.Continue == "" {
			return shapes, "", nil
		}
		opts.Continue = page.Continue
	}
}

// shapeOf reads a record as the inventory reads the node's entry (inventory.ShapeOf).
func shapeOf(spec *homelabv1.GpuNodeSpec) *nodeShape {
	entry := homelabv1.GpuNodeEntry{Product: spec.Product, GpuCount: spec.GpuCount, Sharing: spec.Sharing}
	model, _ := inventory.BaseModel(spec.Product)
	return &nodeShape{model: model, shape: inventory.ShapeOf(&entry)}
}

// answerWho turns holdings (for the rows) and held (for the totals, where a shared GPU
// counts once) into the answer, with each node's shape.
func answerWho(namespace string, holdings []allocation.Holding, held map[string]*allocation.Held, demand []allocation.Demand,
	nodes map[string]*nodeShape, byNamespace bool) *printer.Who {
	a := &printer.Who{Namespace: namespace}
	shape := func(node string) (string, allocation.Shape) {
		if s := nodes[node]; s != nil {
			return s.model, s.shape
		}
		return UnknownModel, allocation.Shape{}
	}
	nsPods := map[string]map[string]struct{}{}
	for _, h := range holdings {
		if h.Pod == "" {
			continue
		}
		if nsPods[h.Namespace] == nil {
			nsPods[h.Namespace] = map[string]struct{}{}
		}
		nsPods[h.Namespace][h.Pod] = struct{}{}
	}
	nsMilli := map[string]int64{}
	for node, h := range held {
		_, s := shape(node)
		for i, milli := range h.NamespaceMilli(s) {
			nsMilli[h.Namespaces[i].Namespace] = saturating.Add(nsMilli[h.Namespaces[i].Namespace], milli)
		}
		if len(h.Namespaces) > 0 {
			a.Nodes++
		}
	}
	for ns, milli := range nsMilli {
		a.MilliGpus = saturating.Add(a.MilliGpus, milli)
		if _, ok := nsPods[ns]; !ok {
			nsPods[ns] = map[string]struct{}{} // claims reserved for no pod only
		}
	}
	for _, p := range nsPods {
		a.Pods = saturating.Add(a.Pods, int32(min(len(p), 1<<31-1)))
	}
	a.Gpus = float64(a.MilliGpus) / 1000
	for _, d := range demand {
		gpus := int32(min((d.Milli+999)/1000, 1<<31-1))
		if d.Queued {
			a.QueuedPods, a.QueuedGpus = saturating.Add(a.QueuedPods, d.Pods), saturating.Add(a.QueuedGpus, gpus)
			continue
		}
		a.WaitingPods, a.WaitingGpus = saturating.Add(a.WaitingPods, d.Pods), saturating.Add(a.WaitingGpus, gpus)
	}
	if byNamespace {
		a.Namespaces = []printer.NamespaceHolding{}
		for ns, pods := range nsPods {
			milli := nsMilli[ns]
			a.Namespaces = append(a.Namespaces, printer.NamespaceHolding{Namespace: ns, Pods: int32(min(len(pods), 1<<31-1)),
				MilliGpus: milli, Gpus: float64(milli) / 1000})
		}
		slices.SortFunc(a.Namespaces, func(x, y printer.NamespaceHolding) int { return strings.Compare(x.Namespace, y.Namespace) })
		return a
	}
	a.Holders = make([]printer.WhoHolder, 0, len(holdings))
	for _, h := range holdings {
		model, s := shape(h.Node)
		_, milli := (&allocation.NamespaceHeld{Resources: h.Resources, Devices: h.Devices}).GPUs(s)
		row := printer.WhoHolder{Namespace: h.Namespace, Pod: h.Pod, Node: h.Node, Model: model, MilliGpus: milli, Gpus: float64(milli) / 1000,
			Devices: h.Devices, Claims: h.Claims, Shared: h.Shared}
		if len(h.Resources) > 0 {
			row.Resources = map[string]int64{}
			for _, r := range h.Resources {
				row.Resources[r.Name] = r.Count
			}
		}
		if h.Since > 0 {
			since := metav1.NewTime(time.Unix(h.Since, 0).UTC())
			row.Since = &since
		}
		a.Holders = append(a.Holders, row)
	}
	return a
}
