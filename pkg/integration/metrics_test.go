//go:build integration

package integration

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func get(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// The /metrics endpoint of a running operator, on the home lab: names, types and values.
func TestMetricsAndHealthEndpoints(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	op := startOperator(t, c.env.Config, testOptions())
	c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})

	eventually(t, 20*time.Second, "/readyz answers ok", func() error {
		addr := op.HealthAddress()
		if addr == "" {
			return fmt.Errorf("health server not started")
		}
		code, body, err := get("http://" + addr + "/readyz")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("%d %q %v", code, body, err)
		}
		return nil
	})
	if code, body, err := get("http://" + op.HealthAddress() + "/healthz"); err != nil || code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz = %d %q %v, want 200 ok", code, body, err)
	}

	var text string
	eventually(t, 20*time.Second, "metrics reflect the home lab", func() error {
		code, body, err := get("http://" + op.MetricsAddress() + "/metrics")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("%d %v", code, err)
		}
		text = body
		if !strings.Contains(text, `gpu_inventory_status_writes_total{inventory="cluster",outcome="written"}`) {
			return fmt.Errorf("no status write counted yet")
		}
		return nil
	})
	for _, want := range []string{
		"# TYPE gpu_inventory_gpu_nodes gauge",
		`gpu_inventory_gpu_nodes{inventory="cluster",ready="false"} 4`,
		`gpu_inventory_gpu_nodes{inventory="cluster",ready="true"} 0`,
		`gpu_inventory_gpus{inventory="cluster",ready="false"} 1`,
		`gpu_inventory_model_gpus{inventory="cluster",product="NVIDIA-GeForce-RTX-4070-Laptop-GPU",ready="false"} 1`,
		`gpu_inventory_unhealthy_gpus{inventory="cluster"} 0`,
		`gpu_inventory_labels_missing_nodes{inventory="cluster"} 0`,
		"# TYPE gpu_inventory_leader gauge",
		"gpu_inventory_leader 1",
		"# TYPE gpu_inventory_syncs_total counter",
		`gpu_inventory_syncs_total{controller="gpuinventory",result="success"}`,
		"# TYPE gpu_inventory_sync_duration_seconds histogram",
		"# TYPE gpu_inventory_last_successful_sync_timestamp_seconds gauge",
		`gpu_inventory_last_successful_sync_timestamp_seconds{inventory="cluster"}`,
		"# TYPE workqueue_adds_total counter",
		`workqueue_adds_total{name="gpuinventory"}`,
		`workqueue_depth{name="gpu-node-status"}`,
		"# TYPE gpu_inventory_rest_client_request_duration_seconds histogram",
		`gpu_inventory_rest_client_requests_total{code="200",host=`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(text, "gpu_inventory_node_not_ready{") {
		t.Error("per-node series are exported without --metrics-per-node")
	}
}
