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

// Package schedule holds the verbs that ask kube-scheduler's questions without the
// scheduler: why (a pod waits, or where its GPUs are) and fit (would a workload's replicas
// fit now). Each owns its options, its reads of the pod or the file and its output; both run
// the simulation of pkg/plugin/simulate.
package schedule

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/simulate"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

type whyOptions struct {
	// load reads the cluster (simulate.Load).
	load      simulate.Loader
	namespace string
	output    string
	// compressionSet: --disable-compression was given (question.compressionSet).
	compressionSet bool
}

func NewWhyCommand(env factory.Environment, c *factory.Factory, load simulate.Loader) *cobra.Command {
	o := &whyOptions{load: load}
	cmd := &cobra.Command{
		Use:   "why POD [-n NAMESPACE]",
		Short: "Why a pod waits for GPUs, in the scheduler's words, and what would make room; or where its GPUs are",
		Long: `Explain one pod. For a pending pod, run kube-scheduler's own filters (node name, unschedulable,
taints, node affinity, resources, DRA claims through the scheduler's allocator) on every node
and print the FailedScheduling event they give, with the nodes behind each reason, and what the
scheduler's preemption would do (the pods of lower priority it would evict, and where); then the
nearest nodes (those that lack only room: fewest GPU units missing first) and the pods holding
GPUs there, terminating ones marked; and the scheduler's own latest FailedScheduling event, to
compare. A gated pod is named with its gates (the scheduler does not try it). For a pod on a
node: the node, the device-plugin GPUs it requests, its claims' allocated devices.

It reads the Nodes, and only as far as the filters that read the node alone need them; the
unfinished pods of the nodes those filters leave, node by node; DRA's DeviceClasses, and its
ResourceSlices and ResourceClaims when the answer depends on them (none where
resource.k8s.io/v1 is not served); and the pod's events.`,
		Example: `  kubectl gpuinv why -n ml trainer-0
  kubectl gpuinv why trainer-0 -o json | jq '.nearest[0].holders'`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return factory.Usagef("why takes one pod name, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			switch o.output {
			case factory.OutputTable, factory.OutputJSON, factory.OutputYAML:
			default:
				return factory.Usagef("unknown output format %q: use json or yaml", o.output)
			}
			o.compressionSet = cmd.Flags().Changed(factory.DisableCompressionFlag)
			return o.run(cmd.Context(), env, c, args[0])
		},
	}
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "The pod's namespace (default: the current context's).")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: json or yaml (the answer, for scripts).")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{factory.OutputJSON, factory.OutputYAML}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (o *whyOptions) run(ctx context.Context, env factory.Environment, c *factory.Factory, name string) error {
	ns := o.namespace
	if ns == "" {
		var err error
		if ns, err = c.Namespace(); err != nil {
			return err
		}
	}
	api, err := c.Typed()
	if err != nil {
		return err
	}
	pod, err := api.Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("pod %q not found in namespace %q: `kubectl get pods -n %s` lists its pods, -n picks another namespace", name, ns, ns)
	}
	if err != nil {
		return c.Explain(err, factory.Request{Verb: "get", Resource: "pods", Name: name, Namespaced: true, Namespace: ns})
	}
	a := &printer.Why{Namespace: ns, Pod: name, Phase: pod.Status.Phase, Node: pod.Spec.NodeName, Terminating: pod.DeletionTimestamp != nil}
	a.Resources = simulate.GPURequests(pod)
	switch {
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		a.State = printer.WhyFinished
	case pod.Spec.NodeName != "":
		a.State = printer.WhyBound
		a.Claims, err = describeClaims(pod, apiClaims(ctx, c, api, ns))
	default:
		err = o.waiting(ctx, a, env, c, api, pod)
	}
	if err != nil {
		return err
	}
	if o.output != factory.OutputTable {
		return factory.WriteData(env.Out, a, o.output)
	}
	return printer.WhyReport(env.Out, a, env.Clock())
}

// waiting explains a pod that waits: with its gang (a PodGroup's, or a Kueue Workload's
// waiting for quota), gated, or alone.
func (o *whyOptions) waiting(ctx context.Context, a *printer.Why, env factory.Environment, c *factory.Factory, api factory.KubeAPI, pod *corev1.Pod) error {
	a.State = printer.WhyPending
	for _, g := range pod.Spec.SchedulingGates {
		a.Gates = append(a.Gates, g.Name)
	}
	if len(a.Gates) > 0 {
		a.State = printer.WhyGated
	}
	w, err := gangWait(ctx, c, api, pod, env.ErrOut)
	if err != nil || w != nil {
		if err == nil {
			err = whyGang(ctx, a, env, c, o.load, w, o.compressionSet)
		}
		if err != nil || pod.Spec.SchedulingGroup == nil {
			return err
		}
		if a.Scheduler, err = latestFailedScheduling(ctx, api, pod); err != nil {
			fmt.Fprintf(env.ErrOut, "Note: the scheduler's own message is not shown: %v\n", c.ExplainList(err, factory.Request{Verb: "list", Resource: "events", Namespaced: true, Namespace: pod.Namespace}))
		}
		return nil
	}
	if a.State == printer.WhyGated {
		return nil
	}
	return pending(ctx, a, env, c, o.load, simulate.Question{Pods: []*corev1.Pod{pod}, CompressionSet: o.compressionSet, Preemption: true})
}

// pending runs the scheduler's filters for q's pod on every node.
func pending(ctx context.Context, a *printer.Why, env factory.Environment, c *factory.Factory, load simulate.Loader, q simulate.Question) error {
	pod := q.Pods[0]
	l, err := load(ctx, c, q)
	if err != nil {
		return err
	}
	api, err := c.Typed()
	if err != nil {
		return err
	}
	v := simulate.NewView(l)
	if a.Claims, err = describeClaims(pod, v.ClaimLookup()); err != nil {
		return err
	}
	if ev, err := latestFailedScheduling(ctx, api, pod); err != nil {
		fmt.Fprintf(env.ErrOut, "Note: the scheduler's own message is not shown: %v\n", c.ExplainList(err, factory.Request{Verb: "list", Resource: "events", Namespaced: true, Namespace: pod.Namespace}))
	} else {
		a.Scheduler = ev
	}
	templates, err := podTemplates(ctx, c, api, pod)
	if err != nil {
		return err
	}
	claims, err := v.PodClaims(pod, templates)
	if err != nil {
		a.Unresolvable = err.Error()
		return nil
	}
	results, err := v.FitAll(pod, claims, 0)
	if err != nil {
		a.Unresolvable = err.Error()
		return nil
	}
	for _, r := range results {
		if r.Fits() {
			a.FitsOn = append(a.FitsOn, r.Node)
		}
	}
	if len(a.FitsOn) > 0 {
		return nil
	}
	if a.Diagnosis, err = v.Diagnose(pod, claims, results); err != nil {
		return err
	}
	a.Preemption, err = v.Preemption(pod, claims, results)
	return err
}

// apiClaims gets claims from the API server; nil for one that does not exist.
func apiClaims(ctx context.Context, c *factory.Factory, api factory.KubeAPI, ns string) func(ns, name string) (*resourcev1.ResourceClaim, error) {
	return func(ns, name string) (*resourcev1.ResourceClaim, error) {
		claim, err := api.ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, c.Explain(err, factory.Request{Verb: "get", Resource: "resourceclaims", Group: resourcev1.GroupName, Name: name, Namespaced: true, Namespace: ns})
		}
		return claim, nil
	}
}

// describeClaims describes the pod's claims, found with lookup.
func describeClaims(pod *corev1.Pod, lookup func(ns, name string) (*resourcev1.ResourceClaim, error)) ([]printer.PodClaim, error) {
	var out []printer.PodClaim
	for _, pc := range pod.Spec.ResourceClaims {
		name := ptrString(pc.ResourceClaimName)
		if name == "" {
			name = generatedClaimName(pod, pc.Name)
		}
		if name == "" {
			if pc.ResourceClaimTemplateName != nil {
				out = append(out, printer.PodClaim{Name: *pc.ResourceClaimTemplateName, Template: *pc.ResourceClaimTemplateName})
			}
			continue
		}
		pcl, err := lookupClaim(pod.Namespace, name, lookup)
		if err != nil {
			return nil, err
		}
		out = append(out, pcl)
	}
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil && st.ResourceClaimName != "" {
		pcl, err := lookupClaim(pod.Namespace, st.ResourceClaimName, lookup)
		if err != nil {
			return nil, err
		}
		out = append(out, pcl)
	}
	return out, nil
}

func lookupClaim(ns, name string, lookup func(ns, name string) (*resourcev1.ResourceClaim, error)) (printer.PodClaim, error) {
	claim, err := lookup(ns, name)
	if err != nil || claim == nil {
		return printer.PodClaim{Name: name, Missing: true}, err
	}
	return printer.PodClaim{Name: name, Allocated: claim.Status.Allocation != nil, Devices: simulate.AllocatedDevices(claim)}, nil
}

func generatedClaimName(pod *corev1.Pod, claim string) string {
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.Name == claim && st.ResourceClaimName != nil {
			return *st.ResourceClaimName
		}
	}
	return ""
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// podTemplates gets the templates of the pod's claims that are not made yet; a template that
// does not exist is left out (PodClaims then says so).
func podTemplates(ctx context.Context, c *factory.Factory, api factory.KubeAPI, pod *corev1.Pod) (map[string]*resourcev1.ResourceClaimTemplate, error) {
	out := map[string]*resourcev1.ResourceClaimTemplate{}
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.ResourceClaimTemplateName == nil || generatedClaimName(pod, pc.Name) != "" {
			continue
		}
		name := *pc.ResourceClaimTemplateName
		t, err := api.ResourceClaimTemplates(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, c.Explain(err, factory.Request{Verb: "get", Resource: "resourceclaimtemplates", Group: resourcev1.GroupName, Name: name, Namespaced: true, Namespace: pod.Namespace})
		}
		out[name] = t
	}
	return out, nil
}

// latestFailedScheduling is the scheduler's latest FailedScheduling event for the pod, or nil.
func latestFailedScheduling(ctx context.Context, api factory.KubeAPI, pod *corev1.Pod) (*printer.SchedulerEvent, error) {
	sel := fields.Set{"involvedObject.name": pod.Name, "involvedObject.namespace": pod.Namespace, "involvedObject.uid": string(pod.UID)}
	var latest *printer.SchedulerEvent
	err := factory.ListAll(ctx, api.Events(pod.Namespace).List, metav1.ListOptions{FieldSelector: sel.AsSelector().String()}, func(l *corev1.EventList) string {
		for i := range l.Items {
			e := &l.Items[i]
			if e.InvolvedObject.UID != pod.UID || e.InvolvedObject.Name != pod.Name || e.Reason != "FailedScheduling" {
				continue
			}
			ev := &printer.SchedulerEvent{Message: e.Message, Time: eventTime(e), Count: e.Count}
			if e.Series != nil {
				ev.Count = e.Series.Count
			}
			if latest == nil || latest.Time.Before(&ev.Time) {
				latest = ev
			}
		}
		return l.Continue
	})
	return latest, err
}

// eventTime is when an event was last seen, from whichever API wrote it.
func eventTime(e *corev1.Event) metav1.Time {
	t := e.CreationTimestamp
	for _, c := range []metav1.Time{e.LastTimestamp, {Time: e.EventTime.Time}} {
		if c.After(t.Time) {
			t = c
		}
	}
	if e.Series != nil && e.Series.LastObservedTime.After(t.Time) {
		t = metav1.Time{Time: e.Series.LastObservedTime.Time}
	}
	return t
}
