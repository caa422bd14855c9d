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
	"fmt"

	"k8s.io/client-go/dynamic"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/nominate"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/memberwatch"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
)

// dispatching reports whether the hub dispatches in this run: --dispatch, and MultiKueue
// served by the hub's API server.
func dispatching(ctx context.Context, e *env) (bool, error) {
	if !e.opts.Dispatch {
		return false, nil
	}
	return memberwatch.MultiKueueClustersServed(ctx, e.clients.core)
}

func newKueueObjectsSource(_ context.Context, e *env) (source.Source, error) {
	client, err := dynamic.NewForConfig(e.clients.config)
	if err != nil {
		return nil, fmt.Errorf("create the Kueue client: %w", err)
	}
	return nominate.NewKueueObjects(client), nil
}

func newWorkersSource(_ context.Context, e *env) (source.Source, error) {
	registry, ok := builtNamed[*memberwatch.Registry](e, memberwatch.Name)
	if !ok {
		return nil, fmt.Errorf("no member registry among the sources")
	}
	clusters, ok := builtNamed[*memberwatch.MultiKueueClusters](e, memberwatch.MultiKueueClustersName)
	if !ok {
		return nil, fmt.Errorf("no MultiKueueCluster cache among the sources")
	}
	return nominate.NewWorkers(registry, clusters, e.opts.KueueNamespace, e.opts.DispatchInventory), nil
}

// newDispatchController is the dispatcher, on this run's Kueue informers and workers; nil
// when the hub does not dispatch in this run.
func newDispatchController(ctx context.Context, e *env) (*controller.Runner, error) {
	objects, ok := builtNamed[*nominate.KueueObjects](e, nominate.KueueObjectsName)
	if !ok {
		return nil, nil
	}
	workers, ok := builtNamed[*nominate.Workers](e, nominate.WorkersName)
	if !ok {
		return nil, fmt.Errorf("no dispatch workers among the sources")
	}
	client, err := dynamic.NewForConfig(e.clients.config)
	if err != nil {
		return nil, fmt.Errorf("create the Kueue client: %w", err)
	}
	_, run, err := nominate.NewController(ctx, nominate.Options{Client: client, Informers: objects, Members: workers, MemberChanges: workers,
		Recorder: e.recorder, Metrics: &e.metrics.Loops, Dispatch: e.dispatch, Nominations: e.opts.Nominations,
		Hold: e.opts.NominationHold, Timeout: e.opts.NominationTimeout, Workers: e.opts.Workers})
	return &run, err
}
