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

import "testing"

func TestNotReady(t *testing.T) {
	o := &Operator{opts: NewOptions(), state: &state{}}
	if why := o.notReady(); why == "" {
		t.Error("an operator whose controllers have not started must not be ready")
	}
	o.state.controllers.Store(&[]builtController{})
	if why := o.notReady(); why != "" {
		t.Errorf("an operator whose controllers have all started is ready, got %q", why)
	}
}
