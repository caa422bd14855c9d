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
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/gpuinventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/gpunode"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/nodestatus"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/section"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/statuswriter"
)

// A controllerRow is one controller of the operator: how it is made from a run's sources.
type controllerRow struct {
	name string
	// why it stands where it does in the list.
	why string
	// build makes it on cc and the run's sources; (nil, nil) when it has nothing to do in
	// this run (the records' controller without records).
	build func(ctx context.Context, e *env, cc *controller.Context) (*controller.Runner, error)
	// waiting says what readiness waits for while the controller has not made its first pass.
	waiting string
}

// controllers are made in this order, and hear each node event in this order.
var controllers = []controllerRow{
	{name: gpunode.Name, why: "first: a node's record write is queued before the syncs that read the record",
		build: newRecordController, waiting: "GpuNode controller: caches not synced or the nodes seen at start not all synced yet"},
	{name: gpuinventory.Name, why: "before the ConfigMap, which follows the status by one interval",
		build: newInventoryController, waiting: "GpuInventory controller: caches not synced or no inventory synced yet"},
	{name: nodestatus.Name, why: "last: a secondary mirror of the entries",
		build: newConfigMapController, waiting: "gpu-node-status controller: caches not synced or the ConfigMap not written yet"},
}

// recordWorkers write GpuNode records in parallel: the first start on a large cluster
// creates one per GPU node, at --gpunode-qps.
const recordWorkers = 4

// configMapSyncFactor: under churn the ConfigMap (a secondary mirror of up to 256 KiB) is
// written at most once per this many sync intervals, and it follows the status by one
// interval, so the operator's two largest writes do not reach the API server together.
const configMapSyncFactor = 4

func newRecordController(ctx context.Context, e *env, cc *controller.Context) (*controller.Runner, error) {
	records, ok := builtNamed[*gpunode.Records](e, "gpunodes")
	if !ok {
		return nil, nil
	}
	seed := &seeder{homelab: e.clients.homelab, core: e.clients.core, namespace: e.namespace, ctx: ctx}
	_, run, err := gpunode.NewController(ctx, cc, gpunode.Options{Client: kubeclient.GpuNodes(e.clients.recordWriter),
		Reader: kubeclient.GpuNodes(e.clients.recordReader), Records: records, Seed: seed.lookup, Workers: recordWorkers})
	return &run, err
}

func newInventoryController(ctx context.Context, e *env, cc *controller.Context) (*controller.Runner, error) {
	inventories, ok := builtNamed[*gpuinventory.Inventories](e, "gpuinventories")
	if !ok {
		return nil, fmt.Errorf("no GpuInventory cache among the sources")
	}
	_, run, err := gpuinventory.NewController(ctx, cc, gpuinventory.Options{
		Writer:         statuswriter.New(e.clients.homelab),
		Client:         kubeclient.GpuInventories(e.clients.homelab),
		Inventories:    inventories,
		Sections:       section.Of(e.built),
		ResyncPeriod:   e.opts.ResyncPeriod,
		PerNodeMetrics: e.opts.PerNodeMetrics,
		Workers:        e.opts.Workers,
		BeforeSync:     e.opts.BeforeInventorySync,
	})
	return &run, err
}

func newConfigMapController(ctx context.Context, e *env, cc *controller.Context) (*controller.Runner, error) {
	configMaps, ok := builtNamed[*source.InformerSource](e, "configmap")
	if !ok {
		return nil, fmt.Errorf("no ConfigMap cache among the sources")
	}
	_, run, err := nodestatus.NewController(ctx, cc, nodestatus.Options{Namespace: e.namespace,
		Client: kubeclient.ConfigMaps(e.clients.core, e.namespace), REST: e.clients.core, ConfigMaps: configMaps.Informer(),
		MinInterval: configMapSyncFactor * cc.MinSyncInterval, Delay: cc.MinSyncInterval})
	return &run, err
}

// builtController is a controller of a run, as readiness sees it.
type builtController struct {
	row    *controllerRow
	runner controller.Runner
}

// buildControllers makes the controllers of the list that have something to do, in order.
func buildControllers(ctx context.Context, e *env, cc *controller.Context, rows []controllerRow) ([]builtController, error) {
	var out []builtController
	for i := range rows {
		run, err := rows[i].build(ctx, e, cc)
		if err != nil {
			return nil, fmt.Errorf("controller %s: %w", rows[i].name, err)
		}
		if run != nil {
			out = append(out, builtController{row: &rows[i], runner: *run})
		}
	}
	return out, nil
}
