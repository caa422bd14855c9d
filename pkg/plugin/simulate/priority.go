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

package simulate

import (
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
)

// Priorities gives each object's pods the priority and preemption policy the API server's
// Priority admission would: those of the PriorityClass the template names, else of the
// cluster's global default class, else 0. A class that does not exist is an error (the API
// server would refuse the pods); classes that cannot be read (forbidden, not served) leave
// the pods without, and a note says that preemption is not weighed.
func (in *Workload) Priorities(ctx context.Context, c *factory.Factory, errOut io.Writer) (bool, error) {
	var classes map[string]*schedulingv1.PriorityClass
	var global *schedulingv1.PriorityClass
	for _, o := range in.objects {
		spec := &o.template.Spec
		if spec.Priority != nil {
			continue
		}
		if classes == nil {
			var err error
			if classes, global, err = readPriorityClasses(ctx, c); err != nil {
				if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
					fmt.Fprintf(errOut, "Note: PriorityClasses cannot be read (%v): the replicas are placed without the scheduler's preemption\n", err)
					return false, nil
				}
				return false, c.Explain(err, factory.Request{Verb: "list", Resource: "priorityclasses", Group: schedulingv1.GroupName})
			}
		}
		pc := global
		if name := spec.PriorityClassName; name != "" {
			if pc = classes[name]; pc == nil {
				return false, fmt.Errorf("%s: PriorityClass %q does not exist: the API server would refuse its pods", o, name)
			}
		}
		spec.Priority = ptr.To(int32(0))
		if pc != nil {
			spec.Priority = ptr.To(pc.Value)
			if spec.PreemptionPolicy == nil {
				spec.PreemptionPolicy = pc.PreemptionPolicy
			}
		}
		if spec.PreemptionPolicy == nil {
			spec.PreemptionPolicy = ptr.To(corev1.PreemptLowerPriority)
		}
	}
	return true, nil
}

// readPriorityClasses lists the cluster's PriorityClasses, by name, and the global default
// (of those marked, the lowest value, as the API server picks it).
func readPriorityClasses(ctx context.Context, c *factory.Factory) (map[string]*schedulingv1.PriorityClass, *schedulingv1.PriorityClass, error) {
	api, err := c.Typed()
	if err != nil {
		return nil, nil, err
	}
	list, err := api.PriorityClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	byName := map[string]*schedulingv1.PriorityClass{}
	var global *schedulingv1.PriorityClass
	for i := range list.Items {
		pc := &list.Items[i]
		byName[pc.Name] = pc
		if pc.GlobalDefault && (global == nil || pc.Value < global.Value) {
			global = pc
		}
	}
	return byName, global, nil
}
