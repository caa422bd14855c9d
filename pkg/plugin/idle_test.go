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

package plugin

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
)

// idleUsage is usage on the mixed fleet: a notebook idle on 2 H100s for 7 hours, a job stuck
// on a MIG device for 40 minutes, a DRA holder idle for 5 hours; 12 GPUs held.
func idleUsage() *homelabv1.GpuUsage {
	since := func(d time.Duration) metav1.Time { return metav1.NewTime(statusTime.Add(-d)) }
	return &homelabv1.GpuUsage{Window: "24h0m0s", IdleAfter: "4h0m0s", Metric: "DCGM_FI_PROF_GR_ENGINE_ACTIVE", HeldGpus: 12, IdleGpus: 3,
		Namespaces: []homelabv1.UsageNamespace{
			{Namespace: "ml-dev", Model: h100, HeldGpus: 2, HeldGpuHours: 48, IdleGpuHours: 14},
			{Namespace: "dra-lab", Model: "NVIDIA-B200", HeldGpus: 1, HeldGpuHours: 20, IdleGpuHours: 5},
			{Namespace: "ml-prod", Model: h100, HeldGpus: 8, HeldGpuHours: 192, IdleGpuHours: 2},
		},
		IdleHolders: []homelabv1.IdleHolder{
			{Namespace: "ml-dev", Pod: "notebook-alice", Node: "dgx-01", Model: h100, Gpus: 2, IdleSince: since(7 * time.Hour)},
			{Namespace: "dra-lab", Pod: "trainer-0", Node: "b200-01", Model: "NVIDIA-B200", Gpus: 1, IdleSince: since(5 * time.Hour)},
			{Namespace: "inference", Pod: "stuck-job-x7k2p", Node: "a100-mig-01", Model: a100, Gpus: 1, IdleSince: since(40 * time.Minute)},
		}}
}

func usageInventory(u *homelabv1.GpuUsage, conditions ...metav1.Condition) *homelabv1.GpuInventory {
	gi := inventoryObject("cluster", fixtures.MixedFleet(), mixedFleetPrevious, nil)
	gi.Status.Usage = u
	gi.Status.Conditions = append(gi.Status.Conditions, conditions...)
	return gi
}

var (
	usageRead = metav1.Condition{Type: homelabv1.ConditionUsageUnknown, Status: metav1.ConditionFalse, Reason: homelabv1.ReasonUsageRead,
		Message: "Prometheus answered the utilisation of the GPUs DCGM exporter reports on."}
	usageDown = metav1.Condition{Type: homelabv1.ConditionUsageUnknown, Status: metav1.ConditionTrue, Reason: homelabv1.ReasonPrometheusUnreachable,
		Message: "Prometheus at http://prometheus-operated.monitoring:9090 did not answer within 10s; status.usage is from 2026-11-29T21:40:00Z"}
)

func TestIdleGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		inv  *homelabv1.GpuInventory
		args []string
	}{
		{"idle", usageInventory(idleUsage(), usageRead), nil},
		{"idle-json", usageInventory(idleUsage(), usageRead), []string{"-o", "json"}},
		{"idle-unknown", usageInventory(idleUsage(), usageDown), nil},
		{"idle-nothing", usageInventory(&homelabv1.GpuUsage{Window: "24h0m0s", IdleAfter: "4h0m0s", Metric: "DCGM_FI_DEV_GPU_UTIL", HeldGpus: 8,
			Namespaces: []homelabv1.UsageNamespace{{Namespace: "ml-prod", Model: h100, HeldGpus: 8, HeldGpuHours: 192}}}, usageRead), nil},
		{"idle-not-read", usageInventory(nil), nil},
		{"idle-down-first", usageInventory(nil, usageDown), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runPlugin(context.Background(), fakeClients(t, nil, true, tc.inv), false, nil, append([]string{"idle"}, tc.args...)...)
			if r.code != factory.ExitOK || r.err != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.err)
			}
			golden(t, tc.name+".golden", r.out)
		})
	}
}

// -o json is status.usage as stored, read with one GET; without usage, an empty object on
// stdout and the reason on stderr.
func TestIdleJSON(t *testing.T) {
	c := fakeClients(t, nil, true, usageInventory(idleUsage(), usageRead))
	c.FakeGPU.(fakeGPU).Clientset.ClearActions()
	r := runPlugin(context.Background(), c, false, nil, "idle", "-o", "json")
	var got homelabv1.GpuUsage
	if err := json.Unmarshal([]byte(r.out), &got); err != nil || r.code != factory.ExitOK {
		t.Fatalf("exit %d, output %q: %v", r.code, r.out, err)
	}
	if diff := cmp.Diff(idleUsage(), &got); diff != "" {
		t.Errorf("-o json (-want +got):\n%s", diff)
	}
	if n := len(c.FakeGPU.(fakeGPU).Clientset.Actions()); n != 1 {
		t.Errorf("idle made %d calls, want one GET", n)
	}
	r = runPlugin(context.Background(), fakeClients(t, nil, true, usageInventory(nil)), false, nil, "idle", "-o", "json")
	if r.code != factory.ExitOK || strings.TrimSpace(r.out) == "" || !strings.Contains(r.err, "--prometheus-url") {
		t.Errorf("no usage, -o json: exit %d, stdout %q, stderr %q; want an empty object and the reason", r.code, r.out, r.err)
	}
	if r := runPlugin(context.Background(), c, false, nil, "idle", "-o", "wide"); r.code == factory.ExitOK || !strings.Contains(r.err, `unknown output format "wide"`) {
		t.Errorf("-o wide: exit %d, stderr %q; want a usage error", r.code, r.err)
	}
}
