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

package gpuinventory

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/klog/v2"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

// Bounds of what one node's malformed labels may cost: the labels remembered per node, and
// the log lines (a burst, then one per interval).
const (
	maxWarnedLabelsPerNode = 32
	warningBurst           = 5
	warningEvery           = 10 * time.Minute
)

// warnings logs each malformed label value the first time it is seen, not on every sync,
// with a bounded memory and log rate per node; a node's memory goes with the node.
type warnings struct {
	mu    sync.Mutex
	nodes map[string]*nodeWarnings
}

type nodeWarnings struct {
	values map[string]string // label -> the malformed value last logged
	lines  *rate.Limiter
}

func newWarnings() *warnings { return &warnings{nodes: map[string]*nodeWarnings{}} }

func (w *warnings) log(logger klog.Logger, found []inventory.Warning) {
	if len(found) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, warning := range found {
		n, ok := w.nodes[warning.Node]
		if !ok {
			n = &nodeWarnings{values: map[string]string{}, lines: rate.NewLimiter(rate.Every(warningEvery), warningBurst)}
			w.nodes[warning.Node] = n
		}
		last, known := n.values[warning.Label]
		if known && last == warning.Value || !known && len(n.values) >= maxWarnedLabelsPerNode {
			continue
		}
		n.values[warning.Label] = warning.Value
		if n.lines.Allow() {
			logger.Info("Warning: ignoring malformed GPU label", "node", klog.KRef("", warning.Node),
				"label", warning.Label, "value", warning.Value, "reason", warning.Reason)
		}
	}
}

// forgetNode drops what was remembered of a node that is gone.
func (w *warnings) forgetNode(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.nodes, name)
}
