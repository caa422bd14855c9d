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

// Command gpu-fleet-hub runs on a hub cluster: it finds the member clusters from
// ClusterProfiles and MultiKueueClusters, watches each member's GpuInventory, and keeps the
// GpuFleets' status (docs/design/hub.md).
package main

import (
	"os"

	"github.com/youngju-dev/gpu-inventory-operator/cmd/gpu-fleet-hub/app"
)

func main() {
	os.Exit(app.Main(os.Args[1:]))
}
