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

package testenv

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

var (
	heldGPU = DCGMGPU{Node: "dgx-01", Index: 0, UUID: "GPU-a8c294d0-6b80-5491-8500-21f3285de696", Model: "NVIDIA H100 80GB HBM3",
		Namespace: "train", Pod: "llm-0", Container: "trainer", Util: 0.42}
	freeGPU = DCGMGPU{Node: "dgx-01", Index: 1, UUID: "GPU-c55f9437-3105-5ed2-94b6-6e0cdc1228cd", Model: "NVIDIA H100 80GB HBM3",
		Driver: "570.124.06"}
	migDevice = DCGMGPU{Node: "dgx-02", Index: 2, UUID: "GPU-f6a9069a-e282-52a0-8761-13049d9de6c3", Model: "NVIDIA H100 80GB HBM3",
		MIGProfile: "1g.10gb", MIGInstance: 13, Namespace: "infer", Pod: "small", Container: "server", Util: 1}
)

// /metrics is DCGM exporter's text: HELP and TYPE as its counters file words them, labels in
// its template's order (the pod mapping last, sorted), GPU_UTIL a whole percent, profiling
// ratios with six decimals, MIG devices with their parent's gpu and UUID and no GPU_UTIL.
func TestDCGMExporterServesTheExportersText(t *testing.T) {
	x, err := StartDCGMExporter(heldGPU, freeGPU, migDevice)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	resp, err := http.Get("http://" + x.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := `# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a8c294d0-6b80-5491-8500-21f3285de696",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="dgx-01",DCGM_FI_DRIVER_VERSION="580.105.08",container="trainer",namespace="train",pod="llm-0"} 42
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-c55f9437-3105-5ed2-94b6-6e0cdc1228cd",pci_bus_id="00000000:28:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="dgx-01",DCGM_FI_DRIVER_VERSION="570.124.06"} 0
# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.
# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge
DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-a8c294d0-6b80-5491-8500-21f3285de696",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="dgx-01",DCGM_FI_DRIVER_VERSION="580.105.08",container="trainer",namespace="train",pod="llm-0"} 0.420000
DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="1",UUID="GPU-c55f9437-3105-5ed2-94b6-6e0cdc1228cd",pci_bus_id="00000000:28:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="dgx-01",DCGM_FI_DRIVER_VERSION="570.124.06"} 0.000000
DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="2",UUID="GPU-f6a9069a-e282-52a0-8761-13049d9de6c3",pci_bus_id="00000000:38:00.0",device="nvidia2",modelName="NVIDIA H100 80GB HBM3",GPU_I_PROFILE="1g.10gb",GPU_I_ID="13",Hostname="dgx-02",DCGM_FI_DRIVER_VERSION="580.105.08",container="server",namespace="infer",pod="small"} 1.000000
`
	if string(body) != want {
		t.Errorf("/metrics:\n%s\nwant:\n%s", body, want)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q, want the text format's", ct)
	}

	x.SetProfiling(false)
	if got := string(x.Exposition()); strings.Contains(got, DCGMGrEngineActive) || strings.Count(got, DCGMGPUUtil+"{") != 2 {
		t.Errorf("without profiling:\n%s\nwant only the two GPUs' DCGM_FI_DEV_GPU_UTIL", got)
	}
}

// A DRA device mapped with --kubernetes-enable-dra carries its claim's attributes between
// container and namespace, sorted as the exporter sorts them.
func TestDCGMExporterNamesDRAClaims(t *testing.T) {
	g := DCGMGPU{Node: "dra-h100-1", Index: 0, UUID: "GPU-a8c294d0-6b80-5491-8500-21f3285de696", Model: "NVIDIA H100 80GB HBM3",
		Namespace: "dra", Pod: "worker", Container: "main", DRA: &DCGMClaim{Namespace: "dra", Name: "one-gpu", Pool: "dra-h100-1", Device: "gpu-0"}}
	x, err := StartDCGMExporter(g)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	want := `DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-a8c294d0-6b80-5491-8500-21f3285de696",pci_bus_id="00000000:18:00.0",device="nvidia0",` +
		`modelName="NVIDIA H100 80GB HBM3",Hostname="dra-h100-1",DCGM_FI_DRIVER_VERSION="580.105.08",container="main",dra_claim_name="one-gpu",` +
		`dra_claim_namespace="dra",dra_device_name="gpu-0",dra_driver_name="gpu.nvidia.com",dra_pool_name="dra-h100-1",namespace="dra",pod="worker"} 0.000000` + "\n"
	if got := string(x.Exposition()); !strings.Contains(got, want) {
		t.Errorf("/metrics:\n%s\nwant the line:\n%s", got, want)
	}
	g.Pod, g.Namespace = "", ""
	if err := x.SetGPUs(g); err == nil || !strings.Contains(err.Error(), "DRA claim without the pod") {
		t.Errorf("a claim without a pod: %v", err)
	}
}

// A test changes devices while the exporter runs; WaitScrape returns once a reader has seen
// the change.
func TestDCGMExporterChangesWhileRunning(t *testing.T) {
	x, err := StartDCGMExporter(heldGPU)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if err := x.Update(heldGPU.UUID, 0, func(g *DCGMGPU) { g.Pod, g.Namespace, g.Container, g.Util = "", "", "", 0 }); err != nil {
		t.Fatal(err)
	}
	if err := x.Update("GPU-unknown", 0, func(*DCGMGPU) {}); err == nil || !strings.Contains(err.Error(), "no device GPU-unknown") {
		t.Errorf("update of an unknown device: %v", err)
	}
	next := x.NextScrape()
	resp, err := http.Get("http://" + x.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	select {
	case <-next:
	default:
		t.Fatalf("NextScrape's channel is open after a scrape")
	}
	if strings.Contains(string(body), "pod=") || !strings.Contains(string(body), "} 0\n") {
		t.Errorf("after the holder left:\n%s", body)
	}
	if x.Scrapes() == 0 {
		t.Errorf("no scrape counted")
	}

	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if err := x.WaitScrape(short); err == nil || !strings.Contains(err.Error(), "not scraped") {
		t.Errorf("WaitScrape without a scrape: %v", err)
	}
}

// Devices a real exporter could not report are refused with what is wrong, and change nothing.
func TestDCGMExporterRefusesImpossibleDevices(t *testing.T) {
	for _, tc := range []struct {
		name string
		gpus []DCGMGPU
		want string
	}{
		{"no node", []DCGMGPU{{UUID: "GPU-1", Model: "m"}}, "no Node"},
		{"UUID not a GPU's", []DCGMGPU{{Node: "n", UUID: "MIG-1", Model: "m"}}, `UUID "MIG-1" does not start with GPU-`},
		{"no model", []DCGMGPU{{Node: "n", UUID: "GPU-1"}}, "no Model"},
		{"percent for a fraction", []DCGMGPU{{Node: "n", UUID: "GPU-1", Model: "m", Util: 42}}, "utilisation 42 outside 0-1"},
		{"pod without namespace", []DCGMGPU{{Node: "n", UUID: "GPU-1", Model: "m", Pod: "p"}}, "a pod without a namespace"},
		{"twice", []DCGMGPU{{Node: "n", UUID: "GPU-1", Model: "m"}, {Node: "n", UUID: "GPU-1", Model: "m"}}, "GPU-1 is set twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := StartDCGMExporter(tc.gpus...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("StartDCGMExporter: %v, want an error with %q", err, tc.want)
			}
		})
	}
	x, err := StartDCGMExporter(heldGPU)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if err := x.Update(heldGPU.UUID, 0, func(g *DCGMGPU) { g.Util = -1 }); err == nil {
		t.Errorf("a negative utilisation was taken")
	}
	if got := x.GPUs(); len(got) != 1 || got[0] != heldGPU {
		t.Errorf("devices after a refused update: %+v", got)
	}
}

// The history is OpenMetrics with timestamps in seconds: each series' samples together and in
// time order, the scrape's job and instance labels, the state At gives at each step (a device
// reporting nothing is left out), and # EOF.
func TestWriteDCGMHistory(t *testing.T) {
	from := time.Unix(1_700_000_000, 0)
	var b strings.Builder
	err := WriteDCGMHistory(&b, []DCGMGPU{heldGPU, migDevice}, DCGMHistory{
		From: from, To: from.Add(2 * time.Minute), Step: time.Minute, Job: "dcgm", Instance: "10.0.0.1:9400", Profiling: true,
		At: func(at time.Time, g DCGMGPU) (DCGMGPU, bool) {
			if g.Pod == "small" {
				return g, at.After(from) // the MIG device appears after the first step
			}
			if at.Equal(from.Add(2 * time.Minute)) {
				g.Util = 0
			}
			return g, true
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	held := `gpu="0",UUID="GPU-a8c294d0-6b80-5491-8500-21f3285de696",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="dgx-01",DCGM_FI_DRIVER_VERSION="580.105.08",container="trainer",namespace="train",pod="llm-0",instance="10.0.0.1:9400",job="dcgm"`
	mig := `gpu="2",UUID="GPU-f6a9069a-e282-52a0-8761-13049d9de6c3",pci_bus_id="00000000:38:00.0",device="nvidia2",modelName="NVIDIA H100 80GB HBM3",GPU_I_PROFILE="1g.10gb",GPU_I_ID="13",Hostname="dgx-02",DCGM_FI_DRIVER_VERSION="580.105.08",container="server",namespace="infer",pod="small",instance="10.0.0.1:9400",job="dcgm"`
	want := `# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{` + held + `} 42 1700000000
DCGM_FI_DEV_GPU_UTIL{` + held + `} 42 1700000060
DCGM_FI_DEV_GPU_UTIL{` + held + `} 0 1700000120
# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.
# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge
DCGM_FI_PROF_GR_ENGINE_ACTIVE{` + held + `} 0.420000 1700000000
DCGM_FI_PROF_GR_ENGINE_ACTIVE{` + held + `} 0.420000 1700000060
DCGM_FI_PROF_GR_ENGINE_ACTIVE{` + held + `} 0.000000 1700000120
DCGM_FI_PROF_GR_ENGINE_ACTIVE{` + mig + `} 1.000000 1700000060
DCGM_FI_PROF_GR_ENGINE_ACTIVE{` + mig + `} 1.000000 1700000120
# EOF
`
	if b.String() != want {
		t.Errorf("history:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestWriteDCGMHistoryRefusesWhatPromtoolCouldNotMatch(t *testing.T) {
	from := time.Unix(1_700_000_000, 0)
	ok := DCGMHistory{From: from, To: from.Add(time.Hour), Step: time.Minute, Job: "j", Instance: "i"}
	for _, tc := range []struct {
		name   string
		change func(*DCGMHistory)
		want   string
	}{
		{"sub-second step", func(h *DCGMHistory) { h.Step = time.Millisecond }, "under a second"},
		{"empty range", func(h *DCGMHistory) { h.To = h.From }, "is not before"},
		{"no instance", func(h *DCGMHistory) { h.Instance = "" }, "job and instance labels"},
		{"impossible state", func(h *DCGMHistory) {
			h.At = func(_ time.Time, g DCGMGPU) (DCGMGPU, bool) { g.Util = 2; return g, true }
		}, "utilisation 2 outside 0-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := ok
			tc.change(&h)
			if err := WriteDCGMHistory(io.Discard, []DCGMGPU{heldGPU}, h); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("WriteDCGMHistory: %v, want an error with %q", err, tc.want)
			}
		})
	}
}
