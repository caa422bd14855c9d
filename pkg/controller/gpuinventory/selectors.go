package gpuinventory

import (
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

// selectors caches each inventory's parsed node selector for its spec generation, so that a
// node event does not parse every selector again.
type selectors struct {
	mu     sync.Mutex
	byName map[cache.ObjectName]parsedSelector
}

type parsedSelector struct {
	generation int64
	selector   labels.Selector
	err        error
}

func newSelectors() *selectors { return &selectors{byName: map[cache.ObjectName]parsedSelector{}} }

// get returns gi's selector, parsing it only when its spec changed.
func (s *selectors) get(gi *homelabv1.GpuInventory) (labels.Selector, error) {
	key := cache.MetaObjectToName(gi)
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.byName[key]; ok && p.generation == gi.Generation {
		return p.selector, p.err
	}
	sel, err := inventory.Selector(gi.Spec.NodeSelector)
	s.byName[key] = parsedSelector{generation: gi.Generation, selector: sel, err: err}
	return sel, err
}

func (s *selectors) forget(key cache.ObjectName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byName, key)
}
