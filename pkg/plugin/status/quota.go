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
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

// NoGPUQuota is what `quota` says when no quota names a GPU resource.
const NoGPUQuota = "no quota names a GPU resource: Kueue is not served or none of its ClusterQueues has quota for one, and no ResourceQuota limits a GPU resource"

// kueueGroup is Kueue's API group; kueueVersions the versions read, the newest first.
const kueueGroup = "kueue.x-k8s.io"

var kueueVersions = []string{"v1beta2", "v1beta1"}

type quotaOptions struct {
	queue  string
	output string
}

func NewQuotaCommand(env factory.Environment, c *factory.Factory) *cobra.Command {
	o := &quotaOptions{}
	cmd := &cobra.Command{
		Use:   "quota [NAME] [flags]",
		Short: "What quota promises of the GPUs, per model, cohort and queue, beside the GPUs it reaches",
		Long: `Show what Kueue's ClusterQueues and cohorts and the namespaces' ResourceQuotas promise of the
GPUs, beside the hardware that quota reaches, from one GET of the GpuInventory NAME (default:
cluster): per model and resource, the capacity, Ready and free units of the nodes the quota's
ResourceFlavors select (GPUS, READY, FREE), the nominal quota, what can be borrowed, what Kueue
reports reserved and used, its pending workloads and the operator's finding (Overcommitted:
more quota than Ready hardware; Stranded: quota no node serves, or Ready hardware no quota
covers). Then the cohorts, the ClusterQueues and the ResourceQuotas the inventory lists (the
largest quotas; a line says how many it leaves out). Counts are in the unit of each row's
RESOURCE (GPUs, MIG devices, shared replicas, DRA devices).

--queue NAME shows one ClusterQueue's rows and its cohort's; --queue NAMESPACE/NAME reads that
Kueue LocalQueue to find its ClusterQueue.

Exit status: 0 when the quota was printed, also when there is none (a line says why); 1 on
errors, including a --queue that the inventory does not list.`,
		Example: `  kubectl gpuinv quota                       # quota against hardware, per model, cohort, queue, namespace
  kubectl gpuinv quota --queue team-a        # one ClusterQueue and its cohort
  kubectl gpuinv quota --queue ml/training   # the ClusterQueue behind LocalQueue ml/training
  kubectl gpuinv quota -o json | jq -r '.queues[] | select(.finding=="Overcommitted") | .name'`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: CompleteInventoryNames(c),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch o.output {
			case factory.OutputTable, factory.OutputWide, factory.OutputJSON, factory.OutputYAML:
			default:
				return factory.Usagef("unknown output format %q: use wide, json or yaml", o.output)
			}
			if ns, name, ok := strings.Cut(o.queue, "/"); ok && (ns == "" || name == "" || strings.Contains(name, "/")) {
				return factory.Usagef("--queue %q: give a ClusterQueue's NAME or a LocalQueue's NAMESPACE/NAME", o.queue)
			}
			name := homelabv1.DefaultInventoryName
			if len(args) == 1 {
				name = args[0]
			}
			return o.run(cmd.Context(), env, c, name)
		},
	}
	cmd.Flags().StringVar(&o.queue, "queue", "", "Show only this ClusterQueue's rows and its cohort's; NAMESPACE/NAME reads that Kueue LocalQueue to find its ClusterQueue.")
	_ = cmd.RegisterFlagCompletionFunc("queue", completeQueues(c))
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: wide (adds admitted workloads, stranded Ready units per model, the cohorts' queues and the queues' flavors), json or yaml (status.quota, only the queue's rows with --queue).")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{factory.OutputWide, factory.OutputJSON, factory.OutputYAML}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (o *quotaOptions) run(ctx context.Context, env factory.Environment, c *factory.Factory, name string) error {
	gi, err := readStatus(ctx, c, name)
	if err != nil {
		return err
	}
	s := &gi.Status
	if s.Quota == nil || (s.Quota.ClusterQueues == 0 && s.Quota.Namespaces == 0 && len(s.Quota.Models) == 0) {
		return o.noQuota(env, gi)
	}
	view := printer.QuotaView{Inventory: name, Quota: s.Quota, Conditions: s.Conditions}
	if o.queue != "" {
		if view, err = o.queueView(ctx, c, gi); err != nil {
			return err
		}
	}
	switch o.output {
	case factory.OutputJSON, factory.OutputYAML:
		return factory.WriteData(env.Out, view.Quota, o.output)
	}
	return printer.Quota(env.Out, view, factory.PrintOptions(env, o.output))
}

// completeQueues completes --queue with the ClusterQueues the inventory lists.
func completeQueues(c *factory.Factory) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		name := homelabv1.DefaultInventoryName
		if len(args) == 1 {
			name = args[0]
		}
		gpu, err := c.GPU()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
		defer cancel()
		gi, err := gpu.GpuInventories().Get(ctx, name, metav1.GetOptions{})
		if err != nil || gi.Status.Quota == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		seen := map[string]bool{}
		for _, q := range gi.Status.Quota.Queues {
			if !seen[q.Name] {
				seen[q.Name] = true
				names = append(names, q.Name+"\tcohort "+cmp.Or(q.Cohort, "<none>"))
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// noQuota says why the inventory holds no quota: the operator could not read it, the
// inventory covers only some nodes, or no quota names a GPU resource.
func (o *quotaOptions) noQuota(env factory.Environment, gi *homelabv1.GpuInventory) error {
	if sel := gi.Spec.NodeSelector; sel != nil && (len(sel.MatchLabels) > 0 || len(sel.MatchExpressions) > 0) {
		return fmt.Errorf("GpuInventory %q covers the nodes of a selector (%s): quota is the cluster's, reported on an inventory without a node selector, such as %q",
			gi.Name, printer.SelectorString(sel), homelabv1.DefaultInventoryName)
	}
	why := NoGPUQuota
	stored := &homelabv1.GpuQuota{}
	if q := gi.Status.Quota; q != nil {
		stored = q
		if q.Kueue != "" {
			why = fmt.Sprintf("no quota names a GPU resource: no ClusterQueue of Kueue %s has quota for one, and no ResourceQuota limits a GPU resource", q.Kueue)
		}
	}
	if c := meta.FindStatusCondition(gi.Status.Conditions, homelabv1.ConditionQuotaUnknown); c != nil && c.Status == metav1.ConditionTrue && c.Message != "" {
		why = "quota unknown: " + c.Message
	}
	if o.queue != "" {
		return fmt.Errorf("GpuInventory %q lists no ClusterQueue %q: %s", gi.Name, o.queue, why)
	}
	if o.output == factory.OutputJSON || o.output == factory.OutputYAML {
		// Scripts get the quota as stored (or an empty one) on stdout; people the reason on stderr.
		fmt.Fprintf(env.ErrOut, "GpuInventory %s: %s\n", gi.Name, why)
		return factory.WriteData(env.Out, stored, o.output)
	}
	return printer.Nothing(env.Out, gi.Name, why)
}

// queueView picks the rows of --queue (a ClusterQueue, or the one a LocalQueue feeds).
func (o *quotaOptions) queueView(ctx context.Context, c *factory.Factory, gi *homelabv1.GpuInventory) (printer.QuotaView, error) {
	q := gi.Status.Quota
	view := printer.QuotaView{Inventory: gi.Name, Queue: o.queue}
	if ns, name, ok := strings.Cut(o.queue, "/"); ok {
		cq, err := localQueueTarget(ctx, c, q.Kueue, ns, name)
		if err != nil {
			return view, err
		}
		view.Queue, view.LocalQueue = cq, o.queue
	}
	picked, cohort, ok := pickQueue(q, view.Queue)
	if !ok {
		err := notListedQueue(gi.Name, q, view)
		if c := meta.FindStatusCondition(gi.Status.Conditions, homelabv1.ConditionQuotaUnknown); c != nil && c.Status == metav1.ConditionTrue {
			err = fmt.Errorf("%w; and the operator read only part of the quota: %s", err, c.Message)
		}
		return view, err
	}
	view.Quota, view.Cohort = picked, cohort
	return view, nil
}

// notListedQueue is the error for a ClusterQueue the inventory does not list.
func notListedQueue(inventory string, q *homelabv1.GpuQuota, v printer.QuotaView) error {
	what := fmt.Sprintf("ClusterQueue %q", v.Queue)
	if v.LocalQueue != "" {
		what = fmt.Sprintf("ClusterQueue %q (of LocalQueue %s)", v.Queue, v.LocalQueue)
	}
	listed := map[string]bool{}
	for _, r := range q.Queues {
		listed[r.Name] = true
	}
	return fmt.Errorf("%s is not listed in GpuInventory %q: it lists %d of the %d ClusterQueues with GPU quota (those with the largest quotas); a ClusterQueue without GPU quota is not counted (`kubectl get clusterqueue %s -o yaml` shows its quota)",
		what, inventory, len(listed), q.ClusterQueues, v.Queue)
}

// pickQueue keeps the rows of ClusterQueue name and those of its cohort (the cohort named in
// its rows, the queue itself when in none, or a cohort row naming the queue). ok is false
// when no row is the queue's.
func pickQueue(q *homelabv1.GpuQuota, name string) (picked *homelabv1.GpuQuota, cohort string, ok bool) {
	picked = &homelabv1.GpuQuota{Kueue: q.Kueue, ClusterQueues: q.ClusterQueues, Cohorts: q.Cohorts,
		Namespaces: q.Namespaces, StrandedNodes: q.StrandedNodes}
	cohorts := map[string]bool{}
	for _, r := range q.Queues {
		if r.Name != name {
			continue
		}
		picked.Queues = append(picked.Queues, r)
		if r.Cohort != "" {
			cohorts[r.Cohort] = true
			cohort = r.Cohort
		} else {
			cohorts[r.Name] = true
		}
	}
	if len(picked.Queues) == 0 {
		return nil, "", false
	}
	for _, c := range q.CohortModels {
		if cohorts[c.Cohort] || slices.Contains(c.Queues, name) {
			picked.CohortModels = append(picked.CohortModels, c)
		}
	}
	return picked, cohort, true
}

// localQueueTarget reads LocalQueue namespace/name and returns its ClusterQueue. It asks
// first in the version the inventory says Kueue serves, then in the others.
func localQueueTarget(ctx context.Context, c *factory.Factory, served, namespace, name string) (string, error) {
	cfg, err := c.Config()
	if err != nil {
		return "", err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	versions := kueueVersions
	if slices.Contains(kueueVersions, served) {
		versions = append([]string{served}, slices.DeleteFunc(slices.Clone(kueueVersions), func(v string) bool { return v == served })...)
	}
	r := factory.Request{Verb: "get", Resource: "localqueues", Group: kueueGroup, Name: name, Namespaced: true, Namespace: namespace}
	for _, v := range versions {
		gvr := schema.GroupVersionResource{Group: kueueGroup, Version: v, Resource: "localqueues"}
		lq, err := dyn.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) && factory.IsMissingResource(err):
			continue // this version is not served
		case apierrors.IsNotFound(err):
			return "", fmt.Errorf("LocalQueue %q not found in namespace %q (`kubectl get localqueues -n %s` lists them); give a ClusterQueue's name without a namespace", name, namespace, namespace)
		case err != nil:
			return "", c.Explain(err, r)
		}
		return clusterQueueOf(lq)
	}
	return "", fmt.Errorf("the API server serves no Kueue (%s %s), so there is no LocalQueue %s/%s; give a ClusterQueue's name without a namespace",
		kueueGroup, strings.Join(kueueVersions, " or "), namespace, name)
}

// clusterQueueOf is a LocalQueue's spec.clusterQueue.
func clusterQueueOf(lq *unstructured.Unstructured) (string, error) {
	cq, found, err := unstructured.NestedString(lq.Object, "spec", "clusterQueue")
	if err != nil || !found || cq == "" {
		return "", errors.New("LocalQueue " + lq.GetNamespace() + "/" + lq.GetName() + " names no ClusterQueue (spec.clusterQueue)")
	}
	return cq, nil
}
