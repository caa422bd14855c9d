//go:build integration

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

package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/rest"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/crd"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// homeLabReport is the first version's report for the home lab.
var homeLabReport = []homelabv1.GpuNodeEntry{
	{Name: "nuc1", Ready: false, Product: "NVIDIA-GeForce-RTX-4070-Laptop-GPU-SHARED", GpuCount: 1, GpuMemoryMiB: 8188, WorkloadConfig: "vm-passthrough"},
	{Name: "nuc2", Ready: false, WorkloadConfig: "vm-passthrough"},
	{Name: "omen", Ready: false, WorkloadConfig: "vm-passthrough"},
	{Name: "omen2", Ready: false, WorkloadConfig: "container"},
}

func TestCRDSelfInstallOnEmptyServer(t *testing.T) {
	c := startCluster(t)
	startOperator(t, c.env.Config, testOptions())

	// The default inventory exists only once the CRD is Established.
	eventually(t, 30*time.Second, "default inventory created", func() error {
		_, err := c.gpu.HomelabV1().GpuInventories().Get(context.Background(), "cluster", metav1.GetOptions{})
		return err
	})
	// A user's inventory created right away is accepted.
	if _, err := c.gpu.HomelabV1().GpuInventories().Create(context.Background(),
		&homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create a GpuInventory right after start: %v", err)
	}
	c.waitTotals(t, "mine", totals{})

	// The installed CRD compares equal to the embedded one: a restart changes nothing.
	apiext := apiextensionsclient.NewForConfigOrDie(c.env.Config)
	outcomes, err := crd.Ensure(context.Background(), apiext.ApiextensionsV1().CustomResourceDefinitions())
	if err != nil || len(outcomes) != 2 {
		t.Fatalf("Ensure against the installed CRDs = %v, %v; want both %q", outcomes, err, crd.Current)
	}
	for _, o := range outcomes {
		if o.Result != crd.Current {
			t.Errorf("Ensure against the installed CRD %s = %q, want %q", o.Name, o.Result, crd.Current)
		}
	}
}

func TestCRDSelfInstallUpdatesAnOlderCRD(t *testing.T) {
	c := startCluster(t)
	older, err := crd.GpuInventory()
	if err != nil {
		t.Fatal(err)
	}
	older.Spec.Versions[0].AdditionalPrinterColumns = nil // as an earlier release shipped it
	apiext := apiextensionsclient.NewForConfigOrDie(c.env.Config)
	if _, err := apiext.ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), older, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startOperator(t, c.env.Config, testOptions())
	eventually(t, 30*time.Second, "CRD updated to the current printer columns", func() error {
		got, err := apiext.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), homelabv1.CustomResourceDefinitionName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n := len(got.Spec.Versions[0].AdditionalPrinterColumns); n != 7 {
			return fmt.Errorf("%d printer columns", n)
		}
		return nil
	})
	c.waitTotals(t, "cluster", totals{})
}

// A rollback: the operator finds its CRD installed by a newer release, with a field its own
// schema lacks, and leaves it, so that the field users set survives.
func TestCRDSelfInstallKeepsANewerCRD(t *testing.T) {
	c := startCluster(t)
	newer, err := crd.GpuInventory()
	if err != nil {
		t.Fatal(err)
	}
	own := crd.SchemaRevision(newer)
	newer.Annotations[crd.SchemaRevisionAnnotation] = strconv.Itoa(own + 1)
	spec := newer.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	spec.Properties["futureField"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	newer.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	apiext := apiextensionsclient.NewForConfigOrDie(c.env.Config)
	if _, err := apiext.ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), newer, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := crd.WaitEstablished(context.Background(), apiext.ApiextensionsV1().CustomResourceDefinitions(), newer.Name, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	mine := []byte(`{"apiVersion":"homelab.youngju.dev/v1","kind":"GpuInventory","metadata":{"name":"mine"},"spec":{"futureField":"kept"}}`)
	if err := c.gpu.HomelabV1().RESTClient().Post().Resource("gpuinventories").Body(mine).Do(context.Background()).Error(); err != nil {
		t.Fatal(err)
	}

	startOperator(t, c.env.Config, testOptions())
	c.waitTotals(t, "mine", totals{}) // the operator is past its CRD install

	got, err := apiext.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), newer.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, known := got.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["futureField"]
	if rev := crd.SchemaRevision(got); rev != own+1 || !known {
		t.Errorf("installed CRD: schema revision %d, spec.futureField in its schema %t; want the newer one left as it was (revision %d, true)", rev, known, own+1)
	}
	raw, err := c.gpu.HomelabV1().RESTClient().Get().Resource("gpuinventories").Name("mine").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"futureField":"kept"`) {
		t.Errorf("inventory mine lost the field only the newer CRD knows: %s", raw)
	}
}

func TestHomeLabStatusEqualsFirstVersionReport(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	startOperator(t, c.env.Config, testOptions())

	gi := c.waitTotals(t, "cluster", totals{Nodes: 4, ReadyNodes: 0, Gpus: 1, ReadyGpus: 0})
	if diff := cmp.Diff(homeLabReport, inventory.ReportFields(gi.Status.Nodes)); diff != "" {
		t.Errorf("status.nodes (-first version's report +got):\n%s", diff)
	}
	degraded := gi.Status.Conditions[0]
	if degraded.Type != "Degraded" || degraded.Status != metav1.ConditionTrue ||
		degraded.Message != "4 of 4 GPU nodes are not Ready: nuc1, nuc2, omen, omen2" {
		t.Errorf("Degraded = %+v", degraded)
	}

	eventually(t, 20*time.Second, "ConfigMap gpu-node-status holds the four GPU nodes", func() error {
		cm, err := c.kube.CoreV1().ConfigMaps(operatorNamespace).Get(context.Background(), homelabv1.NodeStatusConfigMapName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var keys []string
		for k := range cm.Data {
			keys = append(keys, k)
		}
		if len(keys) != 4 || cm.Data["nuc1"] == "" || cm.Data["nuc2"] == "" || cm.Data["omen"] == "" || cm.Data["omen2"] == "" {
			return fmt.Errorf("data keys %v", keys)
		}
		return nil
	})

	// A deleted ConfigMap comes back.
	if err := c.kube.CoreV1().ConfigMaps(operatorNamespace).Delete(context.Background(), homelabv1.NodeStatusConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "ConfigMap recreated", func() error {
		cm, err := c.kube.CoreV1().ConfigMaps(operatorNamespace).Get(context.Background(), homelabv1.NodeStatusConfigMapName, metav1.GetOptions{})
		if err == nil && len(cm.Data) != 4 {
			return fmt.Errorf("%d keys", len(cm.Data))
		}
		return err
	})
}

// Regression test for the first version's HTTP 400: its status apply had no apiVersion/kind.
func TestStatusIsWrittenByServerSideApply(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	op := startOperator(t, c.env.Config, testOptions())
	gi := c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})

	// The answer to each apply (metadata only) gives the operator the resourceVersion its
	// write produced, so the syncs after its own writes never read the whole inventory back.
	eventually(t, 5*time.Second, "operator counted its write", func() error {
		if statusWrites(op) == 0 {
			return fmt.Errorf("no write counted")
		}
		return nil
	})
	reads, writes := statusReads(op), statusWrites(op)
	for _, ready := range []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionTrue} {
		c.setReady(t, "nuc1", ready)
		want := totals{Nodes: 4, Gpus: 1}
		if ready == corev1.ConditionTrue {
			want.ReadyNodes, want.ReadyGpus = 1, 1
		}
		gi = c.waitTotals(t, "cluster", want)
	}
	eventually(t, 5*time.Second, "operator counted its writes", func() error {
		if got := statusWrites(op) - writes; got < 3 {
			return fmt.Errorf("%d writes counted, want 3", got)
		}
		return nil
	})
	if got := statusReads(op) - reads; got != 0 {
		t.Errorf("the operator read the inventory back %d times after its own 3 writes, want 0", got)
	}

	var found bool
	for _, mf := range gi.ManagedFields {
		if mf.Manager == homelabv1.FieldManager && mf.Subresource == "status" {
			found = true
			if mf.Operation != metav1.ManagedFieldsOperationApply {
				t.Errorf("status written by %s, want Apply", mf.Operation)
			}
		}
	}
	if !found {
		t.Fatalf("no managedFields entry of %s for the status subresource: %+v", homelabv1.FieldManager, gi.ManagedFields)
	}

	// The real server rejects what the first version sent, which a fake clientset would accept.
	body := []byte(`{"status":{"totalGpuNodes":4}}`)
	err := c.gpu.HomelabV1().RESTClient().Patch(types.ApplyPatchType).Resource("gpuinventories").Name("cluster").
		SubResource("status").Param("fieldManager", "first-version").Body(body).Do(context.Background()).Error()
	var status apierrors.APIStatus
	if err == nil || !asAPIStatus(err, &status) || status.Status().Code != http.StatusBadRequest {
		t.Errorf("apply without apiVersion/kind: got %v, want HTTP 400 from the real server", err)
	}
}

func asAPIStatus(err error, out *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	if ok {
		*out = s
	}
	return ok
}

// Regression test for the first version's hot loop: after convergence nothing is written,
// however often the inventory is re-examined.
func TestNoHotLoop(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	opts := testOptions()
	opts.ResyncPeriod = time.Second
	op := startOperator(t, c.env.Config, opts)
	gi := c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})
	// The write that led to gi is counted once the apply call returns; wait for that.
	eventually(t, 5*time.Second, "operator counted its write", func() error {
		if statusWrites(op) == 0 {
			return fmt.Errorf("no write counted")
		}
		return nil
	})
	writes, skipped := statusWrites(op), statusSkipped(op)

	w, err := c.gpu.HomelabV1().GpuInventories().Watch(context.Background(), metav1.ListOptions{
		FieldSelector: "metadata.name=cluster", ResourceVersion: gi.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	quiet := time.After(6 * time.Second) // six resync periods
	for done := false; !done; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch of the inventory ended")
			}
			if ev.Type != watch.Bookmark {
				t.Fatalf("GpuInventory changed while the cluster was quiet: %s %+v", ev.Type, ev.Object)
			}
		case <-quiet:
			done = true
		}
	}
	if got := c.inventory(t, "cluster").ResourceVersion; got != gi.ResourceVersion {
		t.Errorf("resourceVersion moved from %s to %s while quiet", gi.ResourceVersion, got)
	}
	if got := statusWrites(op); got != writes {
		t.Errorf("status writes went from %d to %d while quiet", writes, got)
	}
	// ... although the inventory was re-examined once per resync period all along.
	if got := statusSkipped(op) - skipped; got < 5 {
		t.Errorf("the inventory was re-examined %d times in six 1s resync periods, want at least 5", got)
	}
}

func TestChangesPropagate(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	ctx := context.Background()
	c.patchLabels(t, "nuc1", map[string]string{"pool": "laptops"})
	c.patchLabels(t, "omen", map[string]string{"pool": "desktops"})
	c.patchLabels(t, "omen2", map[string]string{"pool": "desktops"})
	startOperator(t, c.env.Config, testOptions())
	// The operator installs the CRD; create the pool inventories once it is served.
	eventually(t, 30*time.Second, "pool inventories created", func() error {
		for name, pool := range map[string]string{"laptops": "laptops", "desktops": "desktops"} {
			gi := &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: homelabv1.GpuInventorySpec{NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": pool}}}}
			if _, err := c.gpu.HomelabV1().GpuInventories().Create(ctx, gi, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
		return nil
	})
	c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})
	c.waitTotals(t, "laptops", totals{Nodes: 1, Gpus: 1})
	c.waitTotals(t, "desktops", totals{Nodes: 2})

	t.Run("a node turns Ready", func(t *testing.T) {
		c.setReady(t, "nuc1", corev1.ConditionTrue)
		c.waitTotals(t, "cluster", totals{Nodes: 4, ReadyNodes: 1, Gpus: 1, ReadyGpus: 1})
		c.waitTotals(t, "laptops", totals{Nodes: 1, ReadyNodes: 1, Gpus: 1, ReadyGpus: 1})
	})
	t.Run("labels appear", func(t *testing.T) {
		c.patchLabels(t, "omen", map[string]string{"nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-4090", "nvidia.com/gpu.count": "2", "nvidia.com/gpu.memory": "24564"})
		c.waitTotals(t, "cluster", totals{Nodes: 4, ReadyNodes: 1, Gpus: 3, ReadyGpus: 1})
		gi := c.waitTotals(t, "desktops", totals{Nodes: 2, Gpus: 2})
		if n := gi.Status.Nodes[0]; n.Name != "omen" || n.Product != "NVIDIA-GeForce-RTX-4090" || n.GpuMemoryMiB != 24564 {
			t.Errorf("omen = %+v", n)
		}
	})
	t.Run("a GPU node is deleted", func(t *testing.T) {
		if err := c.kube.CoreV1().Nodes().Delete(ctx, "omen2", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		c.waitTotals(t, "cluster", totals{Nodes: 3, ReadyNodes: 1, Gpus: 3, ReadyGpus: 1})
		c.waitTotals(t, "desktops", totals{Nodes: 1, Gpus: 2})
	})
	t.Run("a GPU node is added", func(t *testing.T) {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "h100-1", Labels: map[string]string{
				"pool": "desktops", "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8",
			}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
		}
		if err := testenv.CreateNodes(ctx, c.kube, []*corev1.Node{node}); err != nil {
			t.Fatal(err)
		}
		c.waitTotals(t, "cluster", totals{Nodes: 4, ReadyNodes: 2, Gpus: 11, ReadyGpus: 9})
		c.waitTotals(t, "desktops", totals{Nodes: 2, ReadyNodes: 1, Gpus: 10, ReadyGpus: 8})
	})
	t.Run("a node moves to another pool", func(t *testing.T) {
		c.patchLabels(t, "h100-1", map[string]string{"pool": "laptops"})
		c.waitTotals(t, "desktops", totals{Nodes: 1, Gpus: 2})
		c.waitTotals(t, "laptops", totals{Nodes: 2, ReadyNodes: 2, Gpus: 9, ReadyGpus: 9})
	})
	t.Run("a selector changes", func(t *testing.T) {
		gi := c.inventory(t, "desktops")
		gi.Spec.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: metav1.LabelSelectorOpExists}}}
		if _, err := c.gpu.HomelabV1().GpuInventories().Update(ctx, gi, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.waitTotals(t, "desktops", totals{Nodes: 3, ReadyNodes: 2, Gpus: 11, ReadyGpus: 9})
	})
	// Every change above after the first write updated the ConfigMap, whose answers the
	// operator reads as metadata only.
	t.Run("the ConfigMap follows", func(t *testing.T) {
		eventually(t, 20*time.Second, "ConfigMap gpu-node-status without omen2 and with h100-1", func() error {
			cm, err := c.kube.CoreV1().ConfigMaps(operatorNamespace).Get(ctx, homelabv1.NodeStatusConfigMapName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if _, gone := cm.Data["omen2"]; gone || !strings.Contains(cm.Data["h100-1"], "NVIDIA-H100-80GB-HBM3") || !strings.Contains(cm.Data["omen"], "NVIDIA-GeForce-RTX-4090") {
				return fmt.Errorf("data %v", cm.Data)
			}
			return nil
		})
	})
}

func TestAPIServerRestart(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	op := startOperator(t, c.env.Config, testOptions())
	c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})

	if err := c.env.StopAPIServer(); err != nil {
		t.Fatalf("stop kube-apiserver: %v", err)
	}
	time.Sleep(3 * time.Second) // the outage itself: the operator must ride it out
	if err := c.env.StartAPIServer(testContext(t)); err != nil {
		t.Fatalf("restart kube-apiserver: %v", err)
	}
	select {
	case err := <-op.done:
		t.Fatalf("operator stopped during the outage: %v", err)
	default:
	}
	c.setReady(t, "nuc1", corev1.ConditionTrue)
	c.patchLabels(t, "nuc2", map[string]string{"nvidia.com/gpu.count": "1", "nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-3060"})
	c.waitTotals(t, "cluster", totals{Nodes: 4, ReadyNodes: 1, Gpus: 2, ReadyGpus: 1})
}

// After a 10 s outage the informers resume at once: a node change shows in the inventory
// within 5 s of the server's return (client-go's own backoff alone took 18 s).
func TestBackSoonAfterAnOutage(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	startOperator(t, c.env.Config, testOptions())
	c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})
	if err := c.env.StopAPIServer(); err != nil {
		t.Fatalf("stop kube-apiserver: %v", err)
	}
	time.Sleep(10 * time.Second) // the outage itself
	if err := c.env.StartAPIServer(testContext(t)); err != nil {
		t.Fatalf("restart kube-apiserver: %v", err)
	}
	back := time.Now()
	c.setReady(t, "nuc1", corev1.ConditionTrue)
	deadline := 5*time.Second - time.Since(back)
	eventually(t, deadline, "nuc1 Ready in the inventory within 5s of the server's return", func() error {
		gi, err := c.gpu.HomelabV1().GpuInventories().Get(context.Background(), "cluster", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if gi.Status.ReadyGpuNodes != 1 {
			return fmt.Errorf("%d ready GPU nodes", gi.Status.ReadyGpuNodes)
		}
		return nil
	})
	t.Logf("the change showed %s after the server was back", time.Since(back))
}

// Against an API server without streaming lists (or with KUBE_FEATURE_WatchListClient=false)
// the caches fill from plain lists, through the same decoder and transform: the inventory is
// the same, and a node first cached as metadata only is picked up when it becomes a GPU node.
func TestNodeCacheWithoutStreamingList(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	c := startCluster(t)
	c.loadHomeLab(t)
	var mu sync.Mutex
	var nodeQueries []url.Values
	cfg := rest.CopyConfig(c.env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Path == "/api/v1/nodes" {
				mu.Lock()
				nodeQueries = append(nodeQueries, req.URL.Query())
				mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	}
	startOperator(t, cfg, testOptions())
	gi := c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})
	if diff := cmp.Diff(homeLabReport, inventory.ReportFields(gi.Status.Nodes)); diff != "" {
		t.Errorf("status.nodes (-first version's report +got):\n%s", diff)
	}
	c.patchLabels(t, "worker1", map[string]string{"nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.count": "1"})
	c.waitTotals(t, "cluster", totals{Nodes: 5, ReadyNodes: 1, Gpus: 2, ReadyGpus: 1})

	mu.Lock()
	defer mu.Unlock()
	var lists, streams int
	for _, q := range nodeQueries {
		switch {
		case q.Get("watch") != "true":
			lists++
		case q.Get("sendInitialEvents") == "true":
			streams++
		}
	}
	if lists == 0 || streams != 0 {
		t.Errorf("the operator made %d plain lists and %d streaming lists of nodes, want a plain list and no streaming one", lists, streams)
	}
}

// With --install-crd=false and a CRD older than the operator (it lacks a field the operator
// writes), every status write is refused; the log says why and what to do, and once the
// current CRD is applied the status is written without a restart.
func TestOlderCRDIsExplained(t *testing.T) {
	c := startCluster(t)
	older, err := crd.GpuInventory()
	if err != nil {
		t.Fatal(err)
	}
	status := older.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"]
	delete(status.Properties["nodes"].Items.Schema.Properties, "workloadConfig") // as before the field existed
	apiext := apiextensionsclient.NewForConfigOrDie(c.env.Config)
	if _, err := apiext.ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), older, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := crd.WaitEstablished(context.Background(), apiext.ApiextensionsV1().CustomResourceDefinitions(), homelabv1.CustomResourceDefinitionName, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	c.loadHomeLab(t)
	opts := testOptions()
	opts.InstallCRD = false
	op := startOperator(t, c.env.Config, opts)
	want := "the installed GpuInventory CRD is older than this operator: let the operator install it (--install-crd, the default) or apply manifests/crd of this release"
	eventually(t, 20*time.Second, "the refused write explained in the log", func() error {
		if !strings.Contains(op.logs(), want) || !strings.Contains(op.logs(), "workloadConfig: field not declared in schema") {
			return fmt.Errorf("no %q naming the field in the log", want)
		}
		return nil
	})
	// The GpuNode CRD of this release is not applied either: the operator says so and runs
	// without records.
	if !strings.Contains(op.logs(), "GpuNode records are not served: running without them") {
		t.Errorf("no word in the log about the missing GpuNode CRD")
	}
	if _, err := crd.Ensure(context.Background(), apiext.ApiextensionsV1().CustomResourceDefinitions()); err != nil {
		t.Fatal(err)
	}
	c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})
}
