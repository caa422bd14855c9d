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
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

type fitOptions struct {
	file      string
	namespace string
	output    string
	// compressionSet: --disable-compression was given (question.compressionSet).
	compressionSet bool
}

func newFitCommand(env factory.Environment, c *factory.Factory) *cobra.Command {
	o := &fitOptions{}
	cmd := &cobra.Command{
		Use:   "fit -f FILE",
		Short: "Would all replicas of a workload fit now, and on which nodes (nothing is created)",
		Long: `Answer "would every replica of these objects fit now, at once, and where" by kube-scheduler's
own filters (node name, unschedulable, taints, node affinity, resources, DRA claims through the
scheduler's allocator), without creating anything: it makes no API writes.

FILE (- for standard input) holds YAML or JSON documents: Pods, Deployments, StatefulSets,
ReplicaSets, Jobs (spec.parallelism pods, at most spec.completions), CronJobs, and any object
with a pod template at spec.template and a replica count at spec.replicas (custom resources
too), with the ResourceClaimTemplates and ResourceClaims they use (a template the file lacks
is read from the cluster). Each object is in its metadata.namespace, else -n, else the
current context's namespace.

Replicas are placed one at a time, each on the fitting node with the fewest free GPU units
left after it (best fit: a packing of equal replicas is found whenever one exists), and count
for the next. Each replica's claims from templates are claims of its own; a claim named by
resourceClaimName is shared by all of them. The scheduler's own scoring may spread the pods
differently: the answer is whether they fit, and one placement that does.

Each object's pods get the priority the API server would give them (their PriorityClass, else
the global default); a replica that fits nowhere goes where the scheduler's preemption would
put it, and the pods of lower priority it evicts there are listed.

Exit status: 0 when every replica fits with no pod evicted; 1 when some does not (the first
one that does not is explained as ` + "`why`" + ` explains a pending pod), or all fit only by
evicting others; 2 on errors (a wrong flag, a file that cannot be read or holds something it
cannot place, an API error).`,
		Example: `  kubectl gpuinv fit -f trainer.yaml
  helm template ./chart | kubectl gpuinv fit -f - -n ml
  kubectl gpuinv fit -f job.yaml -o json | jq -r '.pods[] | [.pod, .node] | @tsv'`,
		Annotations: map[string]string{factory.ErrorExitCode: strconv.Itoa(factory.ExitFitError)},
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return factory.Usagef("fit takes no arguments (got %q): give the objects with -f FILE", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch o.output {
			case factory.OutputTable, factory.OutputJSON, factory.OutputYAML:
			default:
				return factory.Usagef("unknown output format %q: use json or yaml", o.output)
			}
			if o.file == "" {
				return factory.Usagef("fit needs -f FILE (- reads standard input)")
			}
			o.compressionSet = cmd.Flags().Changed(disableCompressionFlag)
			return o.run(cmd.Context(), env, c)
		},
	}
	cmd.Flags().StringVarP(&o.file, "filename", "f", "", "The file of objects to place (YAML or JSON, several documents); - reads standard input.")
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "The namespace of objects that name none (default: the current context's).")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: json or yaml (the answer, for scripts).")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{factory.OutputJSON, factory.OutputYAML}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (o *fitOptions) run(ctx context.Context, env factory.Environment, c *factory.Factory) error {
	ns := o.namespace
	if ns == "" {
		var err error
		if ns, err = c.Namespace(); err != nil {
			return err
		}
	}
	in, err := o.read(env, ns)
	if err != nil {
		return err
	}
	preempt, err := in.priorities(ctx, c, env.ErrOut)
	if err != nil {
		return err
	}
	q := in.question()
	q.compressionSet, q.preemption = o.compressionSet, preempt
	l, err := loadCluster(ctx, c, q)
	if err != nil {
		return err
	}
	if err := in.resolve(ctx, c, &l.cluster, env.ErrOut); err != nil {
		return err
	}
	v := newView(l)
	v.preempt = preempt
	answer, err := v.place(in)
	if err != nil {
		return err
	}
	if o.output != factory.OutputTable {
		err = factory.WriteData(env.Out, answer, o.output)
	} else {
		err = printer.FitReport(env.Out, answer)
	}
	if err != nil {
		return err
	}
	if !answer.Fits {
		return &factory.Exit{Code: factory.ExitDoesNotFit}
	}
	return nil
}

// read reads the file, or standard input for "-".
func (o *fitOptions) read(env factory.Environment, namespace string) (*fitInput, error) {
	if o.file == "-" {
		return readFitInput(env.Input(), "standard input", namespace)
	}
	f, err := os.Open(o.file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readFitInput(f, o.file, namespace)
}

// place places every object's replicas, one at a time, on the snapshot.
func (v *view) place(in *fitInput) (*printer.Fit, error) {
	a := &printer.Fit{Objects: []printer.FitCount{}, Pods: []printer.FitPod{}}
	for k, o := range in.objects {
		templates := in.templatesIn(o.namespace)
		fc := printer.FitCount{Object: o.kind + "/" + o.name, Namespace: o.namespace, Replicas: o.replicas}
		for i := int64(0); i < o.replicas; i++ {
			pod := o.pod(i)
			claims, err := v.snap.PodClaims(pod, templates)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", o, err)
			}
			results, err := v.fitAll(pod, claims, k)
			if err != nil {
				return nil, fmt.Errorf("%s: replica %s: %w", o, pod.Name, err)
			}
			fp := printer.FitPod{Object: fc.Object, Namespace: o.namespace, Pod: pod.Name}
			r, ok := v.bestFit(pod, results)
			var miss *printer.Preemption
			if !ok && v.preempt {
				if r, fp.Preempts, miss, err = v.preemptFor(pod, claims, results); err != nil {
					return nil, fmt.Errorf("%s: replica %s: %w", o, pod.Name, err)
				}
				ok = miss == nil
			}
			if !ok {
				a.Pods = append(a.Pods, fp)
				if a.FirstMiss == nil {
					d, err := v.diagnose(pod, claims, results)
					if err != nil {
						return nil, fmt.Errorf("%s: replica %s: %w", o, pod.Name, err)
					}
					a.FirstMiss = &printer.FitMiss{Object: o.String(), Namespace: o.namespace, Pod: pod.Name, Diagnosis: d, Preemption: miss}
				}
				fc.NotTried = o.replicas - i - 1 // the same pod: it would not fit either
				break
			}
			a.Preempted += int64(len(fp.Preempts))
			fp.Node, fp.Resources, fp.Claims = r.Node, v.devicePluginGPUs(pod, r.Node), v.assume(pod, claims, r)
			a.Pods = append(a.Pods, fp)
			fc.Placed++
		}
		a.Objects = append(a.Objects, fc)
		a.Replicas += fc.Replicas
		a.Placed += fc.Placed
	}
	a.Fits = a.Placed == a.Replicas && a.Preempted == 0
	a.FitsByPreemption = a.Placed == a.Replicas && a.Preempted > 0
	return a, nil
}

// preemptFor runs the scheduler's preemption for a replica no node takes: on the node it
// picks, the victims are evicted and the replica fits there. miss is what preemption says
// when it finds no such node.
func (v *view) preemptFor(pod *corev1.Pod, claims []*resourcev1.ResourceClaim, results []capacity.Result) (capacity.Result, []printer.Victim, *printer.Preemption, error) {
	p, err := v.snap.Preempt(pod, claims, results)
	if err != nil {
		return capacity.Result{}, nil, nil, err
	}
	answer := v.answerOf(pod, p)
	if len(p.Candidates) == 0 {
		return capacity.Result{}, nil, answer, nil
	}
	best := p.Candidates[0]
	v.snap.Evict(best.Node, best.Victims)
	r, err := v.snap.Fit(pod, claims, best.Node)
	if err != nil || !r.Fits() {
		return r, nil, answer, err
	}
	return r, answer.Candidates[0].Victims, nil, nil
}

// bestFit picks, of the nodes that fit, the one with the fewest free GPU units left once the
// pod is there (the first by name on a tie).
func (v *view) bestFit(pod *corev1.Pod, results []capacity.Result) (capacity.Result, bool) {
	var best capacity.Result
	var bestLeft int64
	found := false
	for _, r := range results {
		if !r.Fits() {
			continue
		}
		left := v.gpuUnits(r.Node) - v.taken(pod, r)
		if !found || left < bestLeft {
			best, bestLeft, found = r, left, true
		}
	}
	return best, found
}

// gpuUnits are the node's free GPU units: device-plugin GPU resources and DRA GPUs.
func (v *view) gpuUnits(node string) int64 {
	var n int64
	for name, q := range v.snap.Node(node).Status.Allocatable {
		if allocation.IsGPUResource(string(name)) && !q.IsZero() {
			n += v.snap.DevicePluginFree(node, name)
		}
	}
	return n + v.snap.FreeDevices(node, allocation.DRADriver)
}

// taken are the GPU units the pod takes on r's node: its device-plugin GPUs and the GPUs
// allocated to its claims.
func (v *view) taken(pod *corev1.Pod, r capacity.Result) int64 {
	var n int64
	for _, q := range v.devicePluginGPUs(pod, r.Node) {
		n += q
	}
	for i := range r.Allocations {
		for _, d := range resultDevices(&r.Allocations[i]) {
			if !d.AdminAccess && d.Driver == allocation.DRADriver {
				n++
			}
		}
	}
	return n
}

// devicePluginGPUs are the GPU resources the pod requests that the node's device plugins
// serve (the others are served through DRA there, if at all).
func (v *view) devicePluginGPUs(pod *corev1.Pod, node string) map[string]int64 {
	out := map[string]int64{}
	for name, n := range gpuRequests(pod) {
		if q, ok := v.snap.Node(node).Status.Allocatable[corev1.ResourceName(name)]; ok && !q.IsZero() {
			out[name] = n
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// assume places the pod on r's node for the questions that follow, as the scheduler's cache
// would: its new claims allocated as r says and named in its status, a shared claim (named by
// resourceClaimName) allocated once for every replica. It returns what the pod's claims hold.
func (v *view) assume(pod *corev1.Pod, claims []*resourcev1.ResourceClaim, r capacity.Result) []printer.PodClaim {
	var out []printer.PodClaim
	mine := map[*resourcev1.ResourceClaim]bool{} // the claims PodClaims gave: the others are for extended resources
	for _, c := range claims {
		mine[c] = true
	}
	made := map[*resourcev1.ResourceClaim]bool{}
	for i, c := range r.Claims {
		made[c] = true
		out = append(out, printer.PodClaim{Name: c.Name, Allocated: true, Devices: resultDevices(&r.Allocations[i])})
		if v.claims[nsName(c.Namespace, c.Name)] == c {
			c.Status.Allocation = r.Allocations[i].DeepCopy() // the snapshot's own, shared claim
			continue
		}
		allocated := c.DeepCopy()
		allocated.Status.Allocation = r.Allocations[i].DeepCopy()
		v.claims[nsName(c.Namespace, c.Name)] = allocated
		if mine[c] {
			pod.Status.ResourceClaimStatuses = append(pod.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{
				Name: strings.TrimPrefix(c.Name, pod.Name+"-"), ResourceClaimName: &allocated.Name})
			continue
		}
		st := &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: c.Name}
		for name := range gpuRequests(pod) {
			if _, viaPlugin := v.devicePluginGPUs(pod, r.Node)[name]; !viaPlugin {
				st.RequestMappings = append(st.RequestMappings, corev1.ContainerExtendedResourceRequest{ResourceName: name})
			}
		}
		pod.Status.ExtendedResourceClaimStatus = st
	}
	for _, c := range claims {
		if !made[c] && c.Status.Allocation != nil {
			out = append(out, printer.PodClaim{Name: c.Name, Allocated: true, Devices: allocatedDevices(c)})
		}
	}
	v.snap.Assume(pod, r)
	return out
}
