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

	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/gpufleet"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/nominate"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/memberwatch"
)

// A controllerRow is one controller of the hub: how it is made from a run's sources.
type controllerRow struct {
	name string
	// why it stands where it does in the list.
	why string
	// build makes it on the run's sources; (nil, nil) when it has nothing to do in this run.
	build func(ctx context.Context, e *env) (*controller.Runner, error)
	// waiting says what readiness waits for while it has not made its first pass.
	waiting string
}

// controllers are made and started in this order.
var controllers = []controllerRow{
	{name: gpufleet.Name, why: "first: the GpuFleets' status, from every member the registry reads",
		build: newFleetController, waiting: "GpuFleet controller: caches not synced or a GpuFleet not yet synced"},
	{name: nominate.Name, why: "after the fleet's: it reads the same members through the registry (one reflector per worker for both), and never nominates one that is not Reachable",
		build: newDispatchController, waiting: "dispatcher: Kueue's Workloads, AdmissionChecks, MultiKueueConfigs or the workers not yet read"},
}

func newFleetController(ctx context.Context, e *env) (*controller.Runner, error) {
	fleets, ok := builtNamed[*gpufleet.Fleets](e, gpufleet.InformerName)
	if !ok {
		return nil, fmt.Errorf("no GpuFleet cache among the sources")
	}
	members, ok := builtNamed[*memberwatch.Registry](e, memberwatch.Name)
	if !ok {
		return nil, fmt.Errorf("no member registry among the sources")
	}
	profiles, _ := builtNamed[*memberwatch.Profiles](e, memberwatch.ClusterProfilesName)
	mkcs, _ := builtNamed[*memberwatch.MultiKueueClusters](e, memberwatch.MultiKueueClustersName)
	_, run, err := gpufleet.NewController(ctx, gpufleet.Options{Fleets: fleets, Profiles: profiles, MultiKueueClusters: mkcs,
		Members: members, Writer: gpufleet.NewWriter(e.clients.homelab), Metrics: e.metrics, Recorder: e.recorder,
		MinWriteInterval: e.opts.MinSyncInterval, Workers: e.opts.Workers})
	return &run, err
}

// builtController is a controller of a run, as readiness sees it.
type builtController struct {
	row    *controllerRow
	runner controller.Runner
}

// buildControllers makes the controllers of the list that have something to do, in order.
func buildControllers(ctx context.Context, e *env, rows []controllerRow) ([]builtController, error) {
	var out []builtController
	for i := range rows {
		run, err := rows[i].build(ctx, e)
		if err != nil {
			return nil, fmt.Errorf("controller %s: %w", rows[i].name, err)
		}
		if run != nil {
			out = append(out, builtController{row: &rows[i], runner: *run})
		}
	}
	return out, nil
}
