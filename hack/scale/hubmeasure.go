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

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/nominate"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// nominations creates n Workloads of one pod of one GPU in turn, each pending as Kueue's
// manager leaves it for MultiKueue (its quota reserved, the MultiKueue check Pending, written
// by the harness since no Kueue runs), and measures from the write that makes it pending to a
// watch seeing its status.nominatedClusterNames.
func (b *hubBed) nominations(ctx context.Context, n, workers int) ([]time.Duration, error) {
	var out []time.Duration
	for k := range n {
		d, err := b.nominate(ctx, fmt.Sprintf("job-%02d", k))
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
	fmt.Fprintf(os.Stderr, "hub: %d Workloads nominated among %d workers\n", n, workers)
	return out, nil
}

func (b *hubBed) nominate(ctx context.Context, name string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	client := b.dyn.Resource(testenv.WorkloadsResource).Namespace(workloadNamespace)
	wl := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"name": name, "namespace": workloadNamespace},
		"spec": map[string]any{"queueName": "default", "podSets": []any{map[string]any{"name": "main", "count": 1,
			"template": map[string]any{"spec": map[string]any{"restartPolicy": "Never", "containers": []any{map[string]any{"name": "main", "image": "pause",
				"resources": map[string]any{"requests": map[string]any{"nvidia.com/gpu": 1}, "limits": map[string]any{"nvidia.com/gpu": 1}}}}}}}}}}}
	if _, err := client.Create(ctx, wl, metav1.CreateOptions{}); err != nil {
		return 0, fmt.Errorf("create Workload %s: %w", name, err)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	reserved := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"name": name, "namespace": workloadNamespace},
		"status": map[string]any{
			"admission": map[string]any{"clusterQueue": "bench", "podSetAssignments": []any{map[string]any{"name": "main", "count": 1,
				"flavors": map[string]any{"nvidia.com/gpu": "default"}, "resourceUsage": map[string]any{"nvidia.com/gpu": 1}}}},
			"conditions": []any{map[string]any{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
				"message": "Quota reserved in ClusterQueue bench", "lastTransitionTime": now}}}}}
	created, err := client.ApplyStatus(ctx, name, reserved, metav1.ApplyOptions{FieldManager: nominate.KueueFieldManager})
	if err != nil {
		return 0, fmt.Errorf("reserve quota for %s: %w", name, err)
	}
	w, err := client.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: created.GetResourceVersion()})
	if err != nil {
		return 0, err
	}
	defer w.Stop()
	check, _ := json.Marshal(map[string]any{"status": map[string]any{"admissionChecks": []any{map[string]any{"name": testenv.MultiKueueCheck,
		"state": "Pending", "message": "", "lastTransitionTime": now}}}})
	pending := time.Now()
	if _, err := client.Patch(ctx, name, types.MergePatchType, check, metav1.PatchOptions{FieldManager: "kueue"}, "status"); err != nil {
		return 0, fmt.Errorf("the admission check of %s: %w", name, err)
	}
	for e := range w.ResultChan() {
		if u, ok := e.Object.(*unstructured.Unstructured); ok {
			if names, _, _ := unstructured.NestedStringSlice(u.Object, "status", "nominatedClusterNames"); len(names) > 0 {
				return time.Since(pending), nil
			}
		}
	}
	return 0, fmt.Errorf("workload %s not nominated within 30 s: %w", name, ctx.Err())
}

// quiet samples the hub's RSS over --hub-quiet with nothing changing, and counts its writes
// meanwhile: its own metrics and the API server's count of writes to what it writes.
func (b *hubBed) quiet(ctx context.Context, res *hubResult) {
	// The hub counts a nomination once the API server has answered, after a watch may have
	// seen it: the window starts once it has counted every one.
	deadline := time.Now().Add(5 * time.Second)
	for _, n := b.hubWrites(); n < int64(len(res.nominations)) && time.Now().Before(deadline); _, n = b.hubWrites() {
		time.Sleep(100 * time.Millisecond) // a counter: nothing to watch
	}
	fleet0, nominations0 := b.hubWrites()
	api0, err0 := b.apiWrites()
	res.quiet = b.hub.pid.Window(ctx, b.o.hubQuiet)
	fleet1, nominations1 := b.hubWrites()
	api1, err1 := b.apiWrites()
	res.fleetWrites, res.nominationWrites = fleet1-fleet0, nominations1-nominations0
	if res.apiErr = errorsOf(err0, err1); res.apiErr == nil {
		res.apiWrites = map[string]int64{}
		for r, v := range api1 {
			res.apiWrites[r] = v - api0[r]
		}
	}
	res.peak, res.anon = b.hub.pid.Peak(), b.hub.pid.KiB("RssAnon")
}

// hubWrites is the hub's GpuFleet status writes and nominations written, from its /metrics.
func (b *hubBed) hubWrites() (fleet, nominations int64) {
	series, err := scrape("http://" + b.hub.metrics + "/metrics")
	if err != nil {
		return -1, -1
	}
	return int64(series[`gpu_fleet_status_writes_total{outcome="written"}`]),
		sumSeries(series, "gpu_fleet_dispatch_nominations_total", map[string]string{"outcome": "written"})
}

// hubWritten are the resources the hub writes: GpuFleets' status, Workloads' nominations and
// conditions, its Events.
var hubWritten = []string{"gpufleets", "workloads", "events"}

// apiWrites is the API server's count of writes (any verb but reads) to the resources the
// hub writes, by resource.
func (b *hubBed) apiWrites() (map[string]int64, error) {
	client, err := rest.HTTPClientFor(b.env.Config)
	if err != nil {
		return nil, err
	}
	body, err := get(client, b.env.Config.Host+"/metrics")
	if err != nil {
		return nil, fmt.Errorf("the API server's metrics: %w", err)
	}
	series, err := parseSeries(bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, r := range hubWritten {
		for _, verb := range []string{"POST", "PUT", "PATCH", "APPLY", "DELETE"} {
			out[r] += sumSeries(series, "apiserver_request_total", map[string]string{"resource": r, "verb": verb})
		}
	}
	return out, nil
}

// sumSeries sums the series of metric name whose labels include every one of labels.
func sumSeries(series map[string]float64, name string, labels map[string]string) int64 {
	var sum float64
	for key, v := range series {
		rest, ok := strings.CutPrefix(key, name+"{")
		if !ok {
			continue
		}
		have := strings.Split(strings.TrimSuffix(rest, "}"), ",")
		matches := true
		for l, want := range labels {
			matches = matches && slices.Contains(have, fmt.Sprintf("%s=%q", l, want))
		}
		if matches {
			sum += v
		}
	}
	return int64(sum)
}
