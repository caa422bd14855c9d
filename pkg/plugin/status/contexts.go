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

package status

import (
	"context"
	"io"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
)

// syncWriter serialises the writes of several goroutines (the clusters' warnings).
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// member is one context of a fleet: its factory and what reading its inventory gave.
type member struct {
	context string
	clients *factory.Factory
	gi      *homelabv1.GpuInventory
	problem string // why gi could not be read
}

// fetchAll reads the inventory name in every member at once, each within its timeout.
func fetchAll(ctx context.Context, members []*member, name string, timeout func(*factory.Factory) time.Duration) {
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() { m.gi, m.problem = fetch(ctx, m.clients, name, timeout(m.clients)) })
	}
	wg.Wait()
}

// fetch reads one cluster's inventory. A cluster that does not answer within timeout is left
// behind (its request ends when the process does, or when the server answers).
func fetch(ctx context.Context, c *factory.Factory, name string, timeout time.Duration) (*homelabv1.GpuInventory, string) {
	gpu, err := c.GPU()
	if err != nil {
		return nil, strings.Join(strings.Fields(err.Error()), " ")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type answer struct {
		gi  *homelabv1.GpuInventory
		err error
	}
	done := make(chan answer, 1)
	go func() {
		gi, err := gpu.GpuInventories().Get(ctx, name, metav1.GetOptions{})
		done <- answer{gi, err}
	}()
	select {
	case a := <-done:
		if a.err != nil {
			return nil, c.Problem(a.err, name, ctx.Err() != nil, timeout)
		}
		return a.gi, ""
	case <-ctx.Done():
		return nil, c.Problem(ctx.Err(), name, true, timeout)
	}
}
