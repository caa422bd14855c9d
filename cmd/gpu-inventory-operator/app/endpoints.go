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

package app

// notReady says why the operator is not ready, or "" when it is: once every controller's
// caches have synced and it has made progress (a standby is ready: daemon.Instance.Serve).
func (o *Operator) notReady() string {
	cs := o.state.controllers.Load()
	if cs == nil {
		return "controllers not started (CRD install or default inventory pending)"
	}
	for _, c := range *cs {
		if !c.runner.Started() {
			return c.row.waiting
		}
	}
	return ""
}
