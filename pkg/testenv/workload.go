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

package testenv

import "time"

// WorkloadSchedulingGates are the feature gates with which kube-scheduler v1.37 places a
// PodGroup's pods together, per topology domain (workload-aware scheduling): GenericWorkload
// (beta, off by default) and TopologyAwareWorkloadScheduling (alpha).
const WorkloadSchedulingGates = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"

// WithWorkloadScheduling returns opts with workload-aware scheduling on: the gates on
// kube-apiserver and kube-scheduler (and so on the ResourceClaim controller), and the API
// server serving scheduling.k8s.io/v1beta1 (PodGroup, Workload).
func WithWorkloadScheduling(opts Options) Options {
	gates := "--feature-gates=" + WorkloadSchedulingGates
	opts.APIServerArgs = append(append([]string(nil), opts.APIServerArgs...), gates, "--runtime-config=scheduling.k8s.io/v1beta1=true")
	opts.SchedulerArgs = append(append([]string(nil), opts.SchedulerArgs...), gates)
	return opts
}

// StopScheduler stops kube-scheduler (SIGTERM; SIGKILL after 3 seconds); StartScheduler
// starts it again. Objects created meanwhile wait for it: a scheduler that starts fills its
// queue from its informers before its first cycle, so a PodGroup created with its pods while
// it is stopped is tried whole.
func (e *Env) StopScheduler() {
	if e.scheduler != nil {
		e.scheduler.stop(3 * time.Second)
	}
}
