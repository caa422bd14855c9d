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
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/tools/cache"
)

// The operator starts on every CPU the runtime allows and settles on --steady-gomaxprocs;
// GOMAXPROCS in the environment, or 0, leaves the runtime alone.
func TestProcsSetter(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2)) // the machine's own count does not matter
	if procsSetter(0) != nil {
		t.Error("--steady-gomaxprocs=0 sets GOMAXPROCS")
	}
	if procsSetter(2) != nil || procsSetter(3) != nil {
		t.Error("a steady count not below the start's sets GOMAXPROCS")
	}
	set := procsSetter(1)
	if set == nil {
		t.Fatal("--steady-gomaxprocs=1 on 2 CPUs does nothing")
	}
	set(true)
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("settled: GOMAXPROCS %d, want 1", got)
	}
	set(false)
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Errorf("listing again: GOMAXPROCS %d, want the start's 2", got)
	}
	t.Setenv("GOMAXPROCS", "2")
	if procsSetter(1) != nil {
		t.Error("GOMAXPROCS in the environment does not win")
	}
}

// The operator settles only once the first status is written and every controller has made
// its first pass.
func TestSettleWaitsForTheFirstPasses(t *testing.T) {
	var passed atomic.Bool
	polled := make(chan struct{}, 100)
	settled := make(chan bool, 1)
	setProcs := func(s bool) { settled <- s }
	firstStatus := func() bool { return true }
	started := []cache.InformerSynced{func() bool { return true }, func() bool { polled <- struct{}{}; return passed.Load() }}
	done := make(chan struct{})
	go func() { settleAfter(context.Background(), firstStatus, started, setProcs); close(done) }()
	<-polled // asked once, and told no
	select {
	case <-settled:
		t.Fatal("settled before every controller made its first pass")
	case <-done:
		t.Fatal("settle returned before every controller made its first pass")
	default:
	}
	passed.Store(true)
	if s := <-settled; !s {
		t.Error("settle told the operator it starts, not that it settled")
	}
	<-done
}
