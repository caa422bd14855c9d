package gpuinventory

import (
	"sync"

	"k8s.io/klog/v2"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

// warnings logs each malformed label value the first time it is seen, not on every sync.
type warnings struct {
	mu   sync.Mutex
	seen map[inventory.Warning]struct{}
}

func newWarnings() *warnings { return &warnings{seen: map[inventory.Warning]struct{}{}} }

func (w *warnings) log(logger klog.Logger, found []inventory.Warning) {
	if len(found) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, warning := range found {
		if _, seen := w.seen[warning]; seen {
			continue
		}
		w.seen[warning] = struct{}{}
		logger.Info("Warning: ignoring malformed GPU label", "node", klog.KRef("", warning.Node),
			"label", warning.Label, "value", warning.Value, "reason", warning.Reason)
	}
}
