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

// Package integration tests the operator against a real kube-apiserver and etcd (pkg/testenv).
// Run with `make test` (or `make test-integration`), which builds the components once.
package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/youngju-dev/gpu-inventory-operator/cmd/gpu-inventory-operator/app"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

const operatorNamespace = "gpu-inventory-system"

// operatorBinary and hubBinary are built once by TestMain for the tests that need a separate
// process (SIGTERM and SIGKILL behaviour; the hub's secretreader credential plugin).
var operatorBinary, hubBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gpuinv-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	operatorBinary, hubBinary = filepath.Join(dir, "gpu-inventory-operator"), filepath.Join(dir, "gpu-fleet-hub")
	build := exec.Command("go", "build", "-o", dir, "github.com/youngju-dev/gpu-inventory-operator/cmd/gpu-inventory-operator",
		"github.com/youngju-dev/gpu-inventory-operator/cmd/gpu-fleet-hub")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "build the operator and hub binaries: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cluster is a running control plane with clients for it.
type cluster struct {
	env  *testenv.Env
	kube kubernetes.Interface
	gpu  versioned.Interface
}

// startCluster starts a control plane with the operator's namespace; it stops with the test.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	return startClusterWith(t, testenv.Options{})
}

// startClusterWith is startCluster on a kube-apiserver started with opts.
func startClusterWith(t *testing.T, opts testenv.Options) *cluster {
	t.Helper()
	ctx := testContext(t)
	env, err := testenv.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(env.Stop)
	c := &cluster{env: env, kube: kubernetes.NewForConfigOrDie(env.Config), gpu: versioned.NewForConfigOrDie(env.Config)}
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return c
}

func (c *cluster) loadHomeLab(t *testing.T) {
	t.Helper()
	if err := testenv.CreateNodes(context.Background(), c.kube, fixtures.HomeLab()); err != nil {
		t.Fatal(err)
	}
}

// runningOperator is an operator running in the test process.
type runningOperator struct {
	*app.Operator
	cancel context.CancelFunc
	done   chan error
	logs   func() string // what it logged so far
}

// stop cancels the operator and waits for Run to return, failing if it takes over 5 seconds.
func (o *runningOperator) stop(t *testing.T) error {
	t.Helper()
	o.cancel()
	select {
	case err := <-o.done:
		o.done <- err // keep the result for later callers
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("operator did not stop within 5s of cancellation")
		return nil
	}
}

func testOptions() *app.Options {
	opts := app.NewOptions()
	opts.Namespace = operatorNamespace
	opts.MetricsAddress, opts.HealthAddress = "127.0.0.1:0", "127.0.0.1:0" // several operators per test process
	return opts
}

// startOperator runs an operator in the test process against cfg until the test ends.
func startOperator(t *testing.T, cfg *rest.Config, opts *app.Options) *runningOperator {
	t.Helper()
	op, err := app.NewForConfig(opts, rest.CopyConfig(cfg), opts.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	logger := testLogger(t)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	r := &runningOperator{Operator: op, cancel: cancel, done: make(chan error, 1),
		logs: logger.GetSink().(ktesting.Underlier).GetBuffer().String}
	go func() {
		err := op.Run(ctx)
		if err != nil && ctx.Err() == nil {
			t.Logf("operator stopped on its own: %v", err)
		}
		r.done <- err
	}()
	t.Cleanup(func() { _ = r.stop(t) })
	return r
}

// counted sums the series of a counter vector whose labels include match.
func counted(vec *prometheus.CounterVec, match map[string]string) int {
	ch := make(chan prometheus.Metric)
	go func() { vec.Collect(ch); close(ch) }()
	total := 0.0
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			continue
		}
		matches := true
		for _, l := range pb.GetLabel() {
			if v, ok := match[l.GetName()]; ok && v != l.GetValue() {
				matches = false
			}
		}
		if matches {
			total += pb.GetCounter().GetValue()
		}
	}
	return int(total)
}

// statusWrites, statusSkipped and statusReads count an operator's status writes, syncs that
// found the status current, and reads of whole inventories, over all inventories.
func statusWrites(op *runningOperator) int {
	return counted(op.Metrics().StatusWrites, map[string]string{"outcome": "written"})
}
func statusSkipped(op *runningOperator) int {
	return counted(op.Metrics().StatusWrites, map[string]string{"outcome": "skipped"})
}
func statusReads(op *runningOperator) int { return counted(op.Metrics().StatusReads, nil) }

// eventually polls check every 100ms until it returns nil, failing the test with the last
// error when timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %s: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *cluster) inventory(t *testing.T, name string) *homelabv1.GpuInventory {
	t.Helper()
	gi, err := c.gpu.HomelabV1().GpuInventories().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get GpuInventory %s: %v", name, err)
	}
	return gi
}

// totals is the part of a status that most tests compare.
type totals struct{ Nodes, ReadyNodes, Gpus, ReadyGpus int32 }

// waitTotals waits until inventory name reports want for the current generation.
func (c *cluster) waitTotals(t *testing.T, name string, want totals) *homelabv1.GpuInventory {
	t.Helper()
	var gi *homelabv1.GpuInventory
	eventually(t, 20*time.Second, "inventory "+name+" totals", func() error {
		var err error
		gi, err = c.gpu.HomelabV1().GpuInventories().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s := gi.Status
		got := totals{s.TotalGpuNodes, s.ReadyGpuNodes, s.TotalGpus, s.ReadyGpus}
		if got != want || s.ObservedGeneration != gi.Generation || s.InventoryHash == "" {
			return fmt.Errorf("status totals %+v at generation %d/%d, want %+v", got, s.ObservedGeneration, gi.Generation, want)
		}
		return nil
	})
	return gi
}

// setReady sets a node's Ready condition through the status subresource, as a kubelet would.
func (c *cluster) setReady(t *testing.T, name string, status corev1.ConditionStatus) {
	t.Helper()
	ctx := context.Background()
	node, err := c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			node.Status.Conditions[i].Status = status
		}
	}
	if _, err := c.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("set node %s Ready=%s: %v", name, status, err)
	}
}

// patchLabels merges labels into a node.
func (c *cluster) patchLabels(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	var parts []string
	for k, v := range labels {
		parts = append(parts, fmt.Sprintf("%q:%q", k, v))
	}
	patch := `{"metadata":{"labels":{` + strings.Join(parts, ",") + `}}}`
	if _, err := c.kube.CoreV1().Nodes().Patch(context.Background(), name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("label node %s: %v", name, err)
	}
}

// leaseHolder returns the holder of the operator's Lease ("" when released or absent).
func (c *cluster) leaseHolder(t *testing.T) string {
	t.Helper()
	lease, err := c.kube.CoordinationV1().Leases(operatorNamespace).Get(context.Background(), "gpu-inventory-operator", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatalf("get lease: %v", err)
	}
	return holder(lease)
}

func holder(lease *coordinationv1.Lease) string {
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// forbiddenRecorder wraps a client configuration and records every 403 answer.
type forbiddenRecorder struct {
	mu        sync.Mutex
	forbidden []string
}

func (f *forbiddenRecorder) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode == http.StatusForbidden {
				f.mu.Lock()
				f.forbidden = append(f.forbidden, req.Method+" "+req.URL.RequestURI())
				f.mu.Unlock()
			}
			return resp, err
		})
	}
	return cfg
}

func (f *forbiddenRecorder) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.forbidden...)
}

// requestLog wraps a client configuration and records the method and path of every request.
type requestLog struct {
	mu       sync.Mutex
	requests []string
}

func (l *requestLog) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			l.mu.Lock()
			l.requests = append(l.requests, req.Method+" "+req.URL.RequestURI())
			l.mu.Unlock()
			return rt.RoundTrip(req)
		})
	}
	return cfg
}

// of returns the recorded requests for a resource: those with a path segment named resource.
func (l *requestLog) of(resource string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.requests {
		path, _, _ := strings.Cut(strings.Fields(r)[1], "?")
		for _, segment := range strings.Split(path, "/") {
			if segment == resource {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// testContext carries a logger that writes through t at verbosity 2 (the operator's
// informative lines, without per-event detail).
func testContext(t *testing.T) context.Context {
	return klog.NewContext(context.Background(), testLogger(t))
}

// testLogger is testContext's logger; it also keeps what it wrote (for runningOperator.logs).
func testLogger(t *testing.T) klog.Logger {
	return ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2), ktesting.BufferLogs(true)))
}

// gpuPod is a pod of one container whose limits ask for count units of a GPU resource (the
// API server copies limits of extended resources into requests), bound to node as the
// scheduler would bind it, or waiting to be scheduled when node is "".
func gpuPod(namespace, name, node, gpuResource string, count int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
				corev1.ResourceName(gpuResource): *resource.NewQuantity(count, resource.DecimalSI)}}}}},
	}
}

// ensureNamespace creates a namespace unless it exists.
func (c *cluster) ensureNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

// createPod creates a pod, and its namespace when it does not exist yet.
func (c *cluster) createPod(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	c.ensureNamespace(t, pod.Namespace)
	created, err := c.kube.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return created
}

// deletePod deletes a pod at once, as the kubelet confirms a bound pod's deletion.
func (c *cluster) deletePod(t *testing.T, namespace, name string) {
	t.Helper()
	if err := c.kube.CoreV1().Pods(namespace).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatalf("delete pod %s/%s: %v", namespace, name, err)
	}
}
