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

package schedule

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/simulate"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

type fitOptions struct {
	// load reads the cluster (simulate.Load).
	load      simulate.Loader
	file      string
	namespace string
	output    string
	// compressionSet: --disable-compression was given (question.compressionSet).
	compressionSet bool
}

func NewFitCommand(env factory.Environment, c *factory.Factory, load simulate.Loader) *cobra.Command {
	o := &fitOptions{load: load}
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
			o.compressionSet = cmd.Flags().Changed(factory.DisableCompressionFlag)
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
	for _, note := range in.Notes() {
		fmt.Fprintf(env.ErrOut, "Note: %s\n", note)
	}
	if in.HasGangs() {
		if err := in.ResolveQueues(ctx, c, env.ErrOut); err != nil {
			return err
		}
	}
	preempt, err := in.Priorities(ctx, c, env.ErrOut)
	if err != nil {
		return err
	}
	q := in.Question()
	if in.HasGangs() {
		q = in.GangQuestion()
	}
	q.CompressionSet, q.Preemption = o.compressionSet, preempt
	l, err := o.load(ctx, c, q)
	if err != nil {
		return err
	}
	if err := in.Resolve(ctx, c, &l.Cluster, env.ErrOut); err != nil {
		return err
	}
	v := simulate.NewView(l)
	if in.HasGangs() {
		answer, err := v.PlaceGangs(in, env.ErrOut)
		if err != nil {
			return err
		}
		return o.write(env, answer, answer.Fits, func() error { return printer.GangFitReport(env.Out, answer) })
	}
	v.Preempt = preempt
	answer, err := v.Place(in)
	if err != nil {
		return err
	}
	return o.write(env, answer, answer.Fits, func() error { return printer.FitReport(env.Out, answer) })
}

// write prints the answer (text prints it for people) and says whether it fits.
func (o *fitOptions) write(env factory.Environment, answer any, fits bool, text func() error) error {
	var err error
	if o.output != factory.OutputTable {
		err = factory.WriteData(env.Out, answer, o.output)
	} else {
		err = text()
	}
	if err != nil {
		return err
	}
	if !fits {
		return &factory.Exit{Code: factory.ExitDoesNotFit}
	}
	return nil
}

// read reads the file, or standard input for "-".
func (o *fitOptions) read(env factory.Environment, namespace string) (*simulate.Workload, error) {
	if o.file == "-" {
		return simulate.ReadWorkload(env.Input(), "standard input", namespace)
	}
	f, err := os.Open(o.file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return simulate.ReadWorkload(f, o.file, namespace)
}
