// Command gpu-inventory-operator keeps GpuInventory objects and the gpu-node-status ConfigMap
// equal to what the cluster's Nodes say about their NVIDIA GPUs.
package main

import (
	"os"

	"github.com/youngju-dev/gpu-inventory-operator/cmd/gpu-inventory-operator/app"
)

func main() {
	os.Exit(app.Main(os.Args[1:]))
}
