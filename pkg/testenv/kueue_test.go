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
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A ClusterQueue groups flavors by the resources they cover, as Kueue requires: two GPU
// flavors share a group, a MIG flavor gets its own; limits are written only when set.
func TestKueueClusterQueueGroupsFlavorsByCoveredResources(t *testing.T) {
	cq := KueueClusterQueue{Name: "research", Cohort: "lab", Quotas: []KueueQuota{
		{Flavor: "a100", Resource: "nvidia.com/gpu", Nominal: "8", BorrowingLimit: "4", LendingLimit: "2"},
		{Flavor: "mig-1g", Resource: "nvidia.com/mig-1g.10gb", Nominal: "14"},
		{Flavor: "h100", Resource: "nvidia.com/gpu", Nominal: "16"},
	}}.Object()
	want := `{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":"research"},"spec":{` +
		`"cohortName":"lab","namespaceSelector":{},"resourceGroups":[` +
		`{"coveredResources":["nvidia.com/gpu"],"flavors":[` +
		`{"name":"a100","resources":[{"borrowingLimit":"4","lendingLimit":"2","name":"nvidia.com/gpu","nominalQuota":"8"}]},` +
		`{"name":"h100","resources":[{"name":"nvidia.com/gpu","nominalQuota":"16"}]}]},` +
		`{"coveredResources":["nvidia.com/mig-1g.10gb"],"flavors":[{"name":"mig-1g","resources":[{"name":"nvidia.com/mig-1g.10gb","nominalQuota":"14"}]}]}]}}`
	assertJSON(t, cq, want)

	cohort := KueueClusterQueue{Name: "lab", Cohort: "org", Quotas: []KueueQuota{{Flavor: "a100", Resource: "nvidia.com/gpu", Nominal: "4"}}}.CohortObject()
	assertJSON(t, cohort, `{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"Cohort","metadata":{"name":"lab"},"spec":{"parentName":"org",`+
		`"resourceGroups":[{"coveredResources":["nvidia.com/gpu"],"flavors":[{"name":"a100","resources":[{"name":"nvidia.com/gpu","nominalQuota":"4"}]}]}]}}`)

	assertJSON(t, KueueClusterQueue{Name: "empty"}.Object(),
		`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":"empty"},"spec":{"namespaceSelector":{}}}`)
	assertJSON(t, KueueResourceFlavor("l4", map[string]string{"nvidia.com/gpu.product": "NVIDIA-L4"}),
		`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ResourceFlavor","metadata":{"name":"l4"},"spec":{"nodeLabels":{"nvidia.com/gpu.product":"NVIDIA-L4"}}}`)
	assertJSON(t, KueueLocalQueue("team", "train", "research"),
		`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"LocalQueue","metadata":{"name":"train","namespace":"team"},"spec":{"clusterQueue":"research"}}`)
}

func assertJSON(t *testing.T, obj *unstructured.Unstructured, want string) {
	t.Helper()
	got, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s %s:\n got %s\nwant %s", obj.GetKind(), obj.GetName(), got, want)
	}
}

// A queued Job is created suspended in its LocalQueue, and its pods ask for the resources
// given as requests and limits (the API server wants both equal for GPUs).
func TestKueueJobIsSuspendedInItsQueue(t *testing.T) {
	gpus := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}
	job := KueueJob("team", "llm", "train", 2, gpus)
	if job.Labels[KueueQueueNameLabel] != "train" || job.Spec.Suspend == nil || !*job.Spec.Suspend {
		t.Errorf("Job labels %v, suspend %v: want queue-name train and suspended", job.Labels, job.Spec.Suspend)
	}
	if *job.Spec.Parallelism != 2 || *job.Spec.Completions != 2 {
		t.Errorf("parallelism %d, completions %d: want 2 pods at once", *job.Spec.Parallelism, *job.Spec.Completions)
	}
	res := job.Spec.Template.Spec.Containers[0].Resources
	if !reflect.DeepEqual(res.Requests, gpus) || !reflect.DeepEqual(res.Limits, gpus) {
		t.Errorf("container resources %+v: want requests and limits %v", res, gpus)
	}
}

// The status readers read what Kueue writes, and say when it has written nothing yet.
func TestKueueStatusReaders(t *testing.T) {
	cq := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(`{"status":{"admittedWorkloads":1,"pendingWorkloads":0,
		"conditions":[{"type":"Active","status":"True","reason":"Ready"}],
		"flavorsReservation":[{"name":"a100","resources":[{"name":"cpu","total":"0"},{"name":"nvidia.com/gpu","total":"8","borrowed":"0"}]}]}}`), &cq.Object); err != nil {
		t.Fatal(err)
	}
	if got := KueueFlavorTotal(cq, "flavorsReservation", "a100", "nvidia.com/gpu"); got.Value() != 8 {
		t.Errorf("reserved GPUs of a100 = %s, want 8", got.String())
	}
	if got := KueueFlavorTotal(cq, "flavorsReservation", "h100", "nvidia.com/gpu"); !got.IsZero() {
		t.Errorf("reserved GPUs of a flavor not in the status = %s, want 0", got.String())
	}
	if got := KueueFlavorTotal(cq, "flavorsUsage", "a100", "nvidia.com/gpu"); !got.IsZero() {
		t.Errorf("used GPUs with no flavorsUsage = %s, want 0", got.String())
	}
	if KueueCount(cq, "admittedWorkloads") != 1 || KueueCount(cq, "pendingWorkloads") != 0 || KueueCount(cq, "reservingWorkloads") != -1 {
		t.Errorf("counts admitted %d, pending %d, reserving %d: want 1, 0 and -1 (not written)",
			KueueCount(cq, "admittedWorkloads"), KueueCount(cq, "pendingWorkloads"), KueueCount(cq, "reservingWorkloads"))
	}
	if !KueueConditionTrue(cq, "Active") || KueueConditionTrue(cq, "Terminating") {
		t.Errorf("Active %t, Terminating %t: want true and false", KueueConditionTrue(cq, "Active"), KueueConditionTrue(cq, "Terminating"))
	}
}

// Kueue's configuration runs it beside a test: no leader election, no internal certificate
// management (it would wait for webhook configurations), everything on loopback, Jobs only.
func TestKueueConfigurationForALoopbackController(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	if err := writeKueueConfig(path, "/certs", 1234, 5678, KueueOptions{Resources: map[string]any{"excludeResourcePrefixes": []string{"ephemeral"}},
		MultiKueue: map[string]any{"dispatcherName": "example.com/d"}}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var config struct {
		APIVersion     string `json:"apiVersion"`
		Kind           string `json:"kind"`
		LeaderElection struct {
			LeaderElect bool `json:"leaderElect"`
		} `json:"leaderElection"`
		InternalCertManagement struct {
			Enable bool `json:"enable"`
		} `json:"internalCertManagement"`
		Webhook struct {
			Host    string `json:"host"`
			Port    int    `json:"port"`
			CertDir string `json:"certDir"`
		} `json:"webhook"`
		Health struct {
			Address string `json:"healthProbeBindAddress"`
		} `json:"health"`
		Metrics struct {
			BindAddress string `json:"bindAddress"`
		} `json:"metrics"`
		Integrations struct {
			Frameworks []string `json:"frameworks"`
		} `json:"integrations"`
		Resources  map[string]any `json:"resources"`
		MultiKueue struct {
			DispatcherName string `json:"dispatcherName"`
		} `json:"multiKueue"`
	}
	if err := json.Unmarshal(data, &config); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	if config.APIVersion != "config.kueue.x-k8s.io/v1beta2" || config.Kind != "Configuration" || config.LeaderElection.LeaderElect ||
		config.InternalCertManagement.Enable || config.Webhook.Host != "127.0.0.1" || config.Webhook.Port != 5678 ||
		config.Webhook.CertDir != "/certs" || config.Health.Address != "127.0.0.1:1234" || config.Metrics.BindAddress != "0" ||
		!reflect.DeepEqual(config.Integrations.Frameworks, []string{"batch/job"}) || config.Resources["excludeResourcePrefixes"] == nil ||
		config.MultiKueue.DispatcherName != "example.com/d" {
		t.Errorf("configuration:\n%s", data)
	}
}

// The webhook and metrics servers' pair loads and serves 127.0.0.1.
func TestSelfSignedPairServesLoopback(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	if err := writeSelfSignedPair(dir); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatalf("load the pair: %v", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		if err := cert.VerifyHostname(host); err != nil {
			t.Errorf("certificate for %s: %v", host, err)
		}
	}
}

// Without `make testbin`'s Kueue, starting Kueue or installing its CRDs says how to get them.
func TestKueueWithoutBinariesSaysHowToGetThem(t *testing.T) {
	e := &Env{binDir: t.TempDir(), Dir: t.TempDir()}
	if err := e.StartKueue(context.Background(), KueueOptions{}); err == nil || !strings.Contains(err.Error(), "make testbin") {
		t.Errorf("StartKueue without kueue: %v, want an error that names `make testbin`", err)
	}
	if err := e.InstallKueueCRDs(context.Background()); err == nil || !strings.Contains(err.Error(), "make testbin") {
		t.Errorf("InstallKueueCRDs without the CRDs: %v, want an error that names `make testbin`", err)
	}
}
