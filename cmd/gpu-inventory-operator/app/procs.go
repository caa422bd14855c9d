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

import (
	"os"
	"runtime"
)

// procsSetter returns what sets GOMAXPROCS to steady once the operator has settled and back
// to the runtime's choice when it lists everything again; nil when there is nothing to do
// (steady 0 or not below the runtime's choice, or GOMAXPROCS set in the environment).
// docs/design/steady-state.md says why.
func procsSetter(steady int) func(settled bool) {
	if steady <= 0 || os.Getenv("GOMAXPROCS") != "" {
		return nil
	}
	start := runtime.GOMAXPROCS(0)
	if steady >= start {
		return nil
	}
	return func(settled bool) {
		if settled {
			runtime.GOMAXPROCS(steady)
		} else {
			runtime.GOMAXPROCS(start)
		}
	}
}
