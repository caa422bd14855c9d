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

package plugin

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
)

// Pod states of `why`.
const (
	statePending  = "Pending"  // waiting for the scheduler
	stateGated    = "Gated"    // has scheduling gates: the scheduler does not try it
	stateBound    = "Bound"    // on a node
	stateFinished = "Finished" // Succeeded or Failed: holds nothing
)

type whyOptions struct {
	namespace string
	output    string
	// compressionSet: --disable-compression was given (question.compressionSet).
	compressionSet bool
}

func newWhyCommand(env Environment, c *clients) *cobra.Command {
	o := &whyOptions{}
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
				return usagef("why takes one pod name, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			switch o.output {
			case outputTable, outputJSON, outputYAML:
			default:
				return usagef("unknown output format %q: use json or yaml", o.output)
			}
			o.compressionSet = cmd.Flags().Changed(disableCompressionFlag)
			return o.run(cmd.Context(), env, c, args[0])
		},
	}
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "The pod's namespace (default: the current context's).")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: json or yaml (the answer, for scripts).")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{outputJSON, outputYAML}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// whyAnswer is what `why` says, and what it prints with -o json.
type whyAnswer struct {
	Namespace string          `json:"namespace"`
	Pod       string          `json:"pod"`
	State     string          `json:"state"`
	Phase     corev1.PodPhase `json:"phase"`
	// Node is where the pod is bound.
	Node        string `json:"node,omitempty"`
	Terminating bool   `json:"terminating,omitempty"`
	// Gates are the pod's scheduling gates.
	Gates []string `json:"gates,omitempty"`
	// Resources are the GPU resources the pod requests (on a node: holds) from device plugins.
	Resources map[string]int64 `json:"resources,omitempty"`
	Claims    []podClaim       `json:"claims,omitempty"`
	// FitsOn are the nodes a pending pod fits on now.
	FitsOn []string `json:"fitsOn,omitempty"`
	// Unresolvable is why the scheduler cannot try any node (a missing claim or class, a
	// selector that does not compile).
	Unresolvable string `json:"unresolvable,omitempty"`
	// The diagnosis of a pending pod that fits nowhere.
	*Diagnosis `json:",omitempty"`
	// Preemption is what the scheduler's preemption makes of a pending pod that fits nowhere.
	Preemption *preemptionAnswer `json:"preemption,omitempty"`
	// Scheduler is the scheduler's latest FailedScheduling event for the pod.
	Scheduler *schedulerEvent `json:"scheduler,omitempty"`
}

// podClaim is one of a pod's ResourceClaims.
type podClaim struct {
	// Name is the claim's; for a claim not yet made from its template, the template's.
	Name string `json:"name"`
	// Template: the claim is still to be made from this template.
	Template  string            `json:"template,omitempty"`
	Missing   bool              `json:"missing,omitempty"` // named but does not exist
	Allocated bool              `json:"allocated"`
	Devices   []allocatedDevice `json:"devices,omitempty"`
}

type schedulerEvent struct {
	Message string      `json:"message"`
	Time    metav1.Time `json:"time"`
	Count   int32       `json:"count,omitempty"`
}

func (o *whyOptions) run(ctx context.Context, env Environment, c *clients, name string) error {
	ns := o.namespace
	if ns == "" {
		var err error
		if ns, err = c.namespace(); err != nil {
			return err
		}
	}
	api, err := c.typed()
	if err != nil {
		return err
	}
	pod, err := api.Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("pod %q not found in namespace %q: `kubectl get pods -n %s` lists its pods, -n picks another namespace", name, ns, ns)
	}
	if err != nil {
		return c.explain(err, request{verb: "get", resource: "pods", name: name, namespaced: true, namespace: ns})
	}
	a := &whyAnswer{Namespace: ns, Pod: name, Phase: pod.Status.Phase, Node: pod.Spec.NodeName, Terminating: pod.DeletionTimestamp != nil}
	a.Resources = gpuRequests(pod)
	switch {
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		a.State = stateFinished
	case pod.Spec.NodeName != "":
		a.State = stateBound
		a.Claims, err = describeClaims(pod, apiClaims(ctx, c, api, ns))
	case len(pod.Spec.SchedulingGates) > 0:
		a.State = stateGated
		for _, g := range pod.Spec.SchedulingGates {
			a.Gates = append(a.Gates, g.Name)
		}
	default:
		a.State = statePending
		err = a.pending(ctx, env, c, question{pods: []*corev1.Pod{pod}, compressionSet: o.compressionSet, preemption: true})
	}
	if err != nil {
		return err
	}
	if o.output != outputTable {
		return writeData(env.Out, a, o.output)
	}
	return a.write(env.Out, env.now())
}

// gpuRequests are the pod's GPU resource requests, as the scheduler computes them.
func gpuRequests(pod *corev1.Pod) map[string]int64 {
	requests := capacity.Requests(pod)
	var out map[string]int64
	for _, name := range gpuResourceNames(requests) {
		if out == nil {
			out = map[string]int64{}
		}
		q := requests[name]
		out[string(name)] = q.Value()
	}
	return out
}

// pending runs the scheduler's filters for q's pod on every node.
func (a *whyAnswer) pending(ctx context.Context, env Environment, c *clients, q question) error {
	pod := q.pods[0]
	l, err := loadCluster(ctx, c, q)
	if err != nil {
		return err
	}
	api, err := c.typed()
	if err != nil {
		return err
	}
	v := newView(l)
	if a.Claims, err = describeClaims(pod, v.claimLookup()); err != nil {
		return err
	}
	if ev, err := latestFailedScheduling(ctx, api, pod); err != nil {
		fmt.Fprintf(env.ErrOut, "Note: the scheduler's own message is not shown: %v\n", c.explainList(err, request{verb: "list", resource: "events", namespaced: true, namespace: pod.Namespace}))
	} else {
		a.Scheduler = ev
	}
	templates, err := podTemplates(ctx, c, api, pod)
	if err != nil {
		return err
	}
	claims, err := v.snap.PodClaims(pod, templates)
	if err != nil {
		a.Unresolvable = err.Error()
		return nil
	}
	results, err := v.fitAll(pod, claims, 0)
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
	if a.Diagnosis, err = v.diagnose(pod, claims, results); err != nil {
		return err
	}
	a.Preemption, err = v.preemption(pod, claims, results)
	return err
}

// claimLookup finds claims in the snapshot.
func (v *view) claimLookup() func(ns, name string) (*resourcev1.ResourceClaim, error) {
	return func(ns, name string) (*resourcev1.ResourceClaim, error) {
		return v.claims[nsName(ns, name)], nil
	}
}

// apiClaims gets claims from the API server; nil for one that does not exist.
func apiClaims(ctx context.Context, c *clients, api kubeAPI, ns string) func(ns, name string) (*resourcev1.ResourceClaim, error) {
	return func(ns, name string) (*resourcev1.ResourceClaim, error) {
		claim, err := api.ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, c.explain(err, request{verb: "get", resource: "resourceclaims", group: resourcev1.GroupName, name: name, namespaced: true, namespace: ns})
		}
		return claim, nil
	}
}

// describeClaims describes the pod's claims, found with lookup.
func describeClaims(pod *corev1.Pod, lookup func(ns, name string) (*resourcev1.ResourceClaim, error)) ([]podClaim, error) {
	var out []podClaim
	for _, pc := range pod.Spec.ResourceClaims {
		name := ptrString(pc.ResourceClaimName)
		if name == "" {
			name = generatedClaimName(pod, pc.Name)
		}
		if name == "" {
			if pc.ResourceClaimTemplateName != nil {
				out = append(out, podClaim{Name: *pc.ResourceClaimTemplateName, Template: *pc.ResourceClaimTemplateName})
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

func lookupClaim(ns, name string, lookup func(ns, name string) (*resourcev1.ResourceClaim, error)) (podClaim, error) {
	claim, err := lookup(ns, name)
	if err != nil || claim == nil {
		return podClaim{Name: name, Missing: true}, err
	}
	return podClaim{Name: name, Allocated: claim.Status.Allocation != nil, Devices: allocatedDevices(claim)}, nil
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
func podTemplates(ctx context.Context, c *clients, api kubeAPI, pod *corev1.Pod) (map[string]*resourcev1.ResourceClaimTemplate, error) {
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
			return nil, c.explain(err, request{verb: "get", resource: "resourceclaimtemplates", group: resourcev1.GroupName, name: name, namespaced: true, namespace: pod.Namespace})
		}
		out[name] = t
	}
	return out, nil
}

// latestFailedScheduling is the scheduler's latest FailedScheduling event for the pod, or nil.
func latestFailedScheduling(ctx context.Context, api kubeAPI, pod *corev1.Pod) (*schedulerEvent, error) {
	sel := fields.Set{"involvedObject.name": pod.Name, "involvedObject.namespace": pod.Namespace, "involvedObject.uid": string(pod.UID)}
	var latest *schedulerEvent
	err := listAll(ctx, api.Events(pod.Namespace).List, metav1.ListOptions{FieldSelector: sel.AsSelector().String()}, func(l *corev1.EventList) string {
		for i := range l.Items {
			e := &l.Items[i]
			if e.InvolvedObject.UID != pod.UID || e.InvolvedObject.Name != pod.Name || e.Reason != "FailedScheduling" {
				continue
			}
			ev := &schedulerEvent{Message: e.Message, Time: eventTime(e), Count: e.Count}
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

// write prints the answer for people.
func (a *whyAnswer) write(w io.Writer, now time.Time) error {
	var b strings.Builder
	pod := a.Namespace + "/" + a.Pod
	switch a.State {
	case stateFinished:
		fmt.Fprintf(&b, "Pod %s has finished (%s)%s: it holds no GPUs.\n", pod, a.Phase, onNode(a.Node))
	case stateGated:
		fmt.Fprintf(&b, "Pod %s is gated: it waits in the scheduler's queue, which does not try it until its scheduling gates are removed: %s.\n", pod, strings.Join(a.Gates, ", "))
	case stateBound:
		if err := a.writeBound(&b, pod); err != nil {
			return err
		}
	default:
		if err := a.writePending(&b, pod, now); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func onNode(node string) string {
	if node == "" {
		return ""
	}
	return " on node " + node
}

// writeBound says where a bound pod's GPUs are.
func (a *whyAnswer) writeBound(b *strings.Builder, pod string) error {
	terminating := ""
	if a.Terminating {
		terminating = ", terminating (it holds its GPUs until it is gone)"
	}
	fmt.Fprintf(b, "Pod %s is %s on node %s%s.\n", pod, a.Phase, a.Node, terminating)
	if len(a.Resources) == 0 && len(a.Claims) == 0 {
		b.WriteString("It requests no GPU resources and has no ResourceClaims.\n")
		return nil
	}
	if len(a.Resources) > 0 {
		fmt.Fprintf(b, "Device-plugin GPUs: %s\n", gpuHolder{Resources: a.Resources}.holds())
	}
	if len(a.Claims) == 0 {
		return nil
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(b, 0, 8, 2, ' ', 0)
	// NOTE is last, and left out when empty: no padding after the devices.
	fmt.Fprintln(tw, "CLAIM\tREQUEST\tDRIVER\tPOOL/DEVICE\tNOTE")
	for _, c := range a.Claims {
		switch {
		case c.Missing:
			fmt.Fprintf(tw, "%s\t-\t-\t-\tdoes not exist\n", c.Name)
		case c.Template != "":
			fmt.Fprintf(tw, "%s\t-\t-\t-\tnot made yet from template %s\n", c.Name, c.Template)
		case !c.Allocated:
			fmt.Fprintf(tw, "%s\t-\t-\t-\tnot allocated\n", c.Name)
		}
		for _, d := range c.Devices {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s/%s", c.Name, d.Request, d.Driver, d.Pool, d.Device)
			if d.AdminAccess {
				fmt.Fprint(tw, "\tadmin access (monitors the device, holds nothing)")
			}
			fmt.Fprintln(tw)
		}
	}
	return tw.Flush()
}

// writePending says why a pending pod fits nowhere, or where it fits now.
func (a *whyAnswer) writePending(b *strings.Builder, pod string, now time.Time) error {
	fmt.Fprintf(b, "Pod %s is pending.\n", pod)
	if asks := a.asks(); asks != "" {
		fmt.Fprintf(b, "Asks for:   %s\n", asks)
	}
	switch {
	case a.Unresolvable != "":
		fmt.Fprintf(b, "Now:        the scheduler cannot try any node: %s\n", a.Unresolvable)
	case len(a.FitsOn) > 0:
		fmt.Fprintf(b, "Now:        it fits on %s: %s (the scheduler retries it when the cluster changes)\n",
			countOf(int64(len(a.FitsOn)), "node", "nodes"), shortList(a.FitsOn, namesShown))
	default:
		fmt.Fprintf(b, "Now:        %s\n", a.schedulerMessage())
	}
	if a.Scheduler != nil {
		fmt.Fprintf(b, "Scheduler:  %s (FailedScheduling, %s ago)\n", a.Scheduler.Message, age(a.Scheduler.Time.Time, now))
	} else {
		b.WriteString("Scheduler:  no FailedScheduling event for the pod (events expire, after an hour by default)\n")
	}
	if a.Diagnosis == nil {
		return nil
	}
	if a.Preemption != nil {
		if err := a.Preemption.write(b); err != nil {
			return err
		}
	}
	b.WriteString("\n")
	return a.Diagnosis.write(b)
}

// schedulerMessage is the FailedScheduling event the scheduler gives the pod now: the
// filters' summary, then preemption's.
func (a *whyAnswer) schedulerMessage() string {
	if a.Preemption == nil {
		return a.Message
	}
	return a.Message + " " + a.Preemption.Message
}

// asks is what the pod asks for: its GPU resources and claims.
func (a *whyAnswer) asks() string {
	var parts []string
	if len(a.Resources) > 0 {
		parts = append(parts, gpuHolder{Resources: a.Resources}.holds())
	}
	for _, c := range a.Claims {
		switch {
		case c.Template != "":
			parts = append(parts, "a claim from template "+c.Template)
		case c.Missing:
			parts = append(parts, "claim "+c.Name+" (does not exist)")
		case c.Allocated:
			var devices []string
			for _, d := range c.Devices {
				devices = append(devices, d.Pool+"/"+d.Device)
			}
			parts = append(parts, fmt.Sprintf("claim %s (allocated: %s)", c.Name, strings.Join(slices.Compact(devices), ",")))
		default:
			parts = append(parts, "claim "+c.Name)
		}
	}
	return strings.Join(parts, "; ")
}
