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
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

// trainerDeployment is 3 replicas of 4 GPUs, given as limits only.
const trainerDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: trainer, namespace: ml}
spec:
  replicas: 3
  selector: {matchLabels: {app: trainer}}
  template:
    metadata: {labels: {app: trainer}}
    spec:
      nodeSelector: {pool: train}
      containers:
      - name: main
        image: cuda:12
        resources:
          limits: {nvidia.com/gpu: 4}
`

// runFit runs `fit` with the file's content on standard input (or as the file given in args).
func runFit(t testing.TB, c *factory.Factory, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"fit"}, args...), factory.Environment{Out: &out, ErrOut: &errOut,
		In: strings.NewReader(stdin), Now: func() time.Time { return now }}, c)
	return result{out.String(), errOut.String(), code}
}

// twoNodes are two 8-GPU nodes; held are pods holding GPUs on them (node, count pairs).
func twoNodes(held ...any) []runtime.Object {
	objs := []runtime.Object{schedNode("gpu-a", "train", 8), schedNode("gpu-b", "train", 8), schedNode("cpu-1", "train", 0)}
	for i := 0; i+1 < len(held); i += 2 {
		node := held[i].(string)
		objs = append(objs, gpuPod("other", "holder-"+node, node, statusTime, allocation.ResourceGPU, held[i+1].(int)))
	}
	return objs
}

// assertNoWrites fails for any API call but a list or a get.
func assertNoWrites(t *testing.T, kube *fake.Clientset) {
	t.Helper()
	for _, action := range kube.Actions() {
		if action.GetVerb() != "list" && action.GetVerb() != "get" {
			t.Errorf("fit called %s %s: it must not write", action.GetVerb(), action.GetResource().Resource)
		}
	}
}

func TestFitDeployment(t *testing.T) {
	for _, tc := range []struct {
		name string
		held []any
		code int
	}{
		{"fit-deployment", []any{"gpu-b", 4}, factory.ExitOK},                        // 8 + 4 free: 4, 4 and 4
		{"fit-deployment-no", []any{"gpu-a", 2, "gpu-b", 4}, factory.ExitDoesNotFit}, // 6 + 4 free: two fit
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, kube := kubeClients(twoNodes(tc.held...)...)
			r := runFit(t, c, trainerDeployment, "-f", "-")
			if r.code != tc.code || r.err != "" {
				t.Fatalf("exit %d, stderr %q; want %d", r.code, r.err, tc.code)
			}
			golden(t, tc.name+".golden", r.out)
			assertNoWrites(t, kube)
		})
	}
}

func TestFitDeploymentJSON(t *testing.T) {
	c, _ := kubeClients(twoNodes("gpu-a", 2, "gpu-b", 4)...)
	r := runFit(t, c, trainerDeployment, "-f", "-", "-o", "json")
	if r.code != factory.ExitDoesNotFit {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	golden(t, "fit-deployment-no-json.golden", r.out)
	var a printer.Fit
	if err := json.Unmarshal([]byte(r.out), &a); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]string{}
	for _, p := range a.Pods {
		nodes[p.Pod] = p.Node
	}
	// Best fit: the first goes where it leaves least (gpu-b: 0 left, gpu-a would leave 2).
	if diff := cmp.Diff(map[string]string{"trainer-0": "gpu-b", "trainer-1": "gpu-a", "trainer-2": ""}, nodes); diff != "" {
		t.Errorf("placements (-want +got):\n%s", diff)
	}
	if a.Fits || a.Placed != 2 || a.Replicas != 3 || a.FirstMiss == nil || a.FirstMiss.Message != "0/3 nodes are available: 3 Insufficient nvidia.com/gpu." {
		t.Errorf("answer %+v, first miss %+v", a, a.FirstMiss)
	}
}

// draJob is a Job of parallelism pods each with a claim of two H100s from a template.
func draJob(parallelism int) string {
	return `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: h100-pair}
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly: {deviceClassName: gpu.nvidia.com, count: 2}
---
apiVersion: batch/v1
kind: Job
metadata: {name: sweep}
spec:
  parallelism: ` + string(rune('0'+parallelism)) + `
  completions: 10
  template:
    spec:
      restartPolicy: Never
      resourceClaims:
      - {name: gpus, resourceClaimTemplateName: h100-pair}
      containers:
      - name: main
        image: cuda:12
        resources:
          claims: [{name: gpus}]
`
}

func draCluster(t *testing.T) []runtime.Object {
	return append([]runtime.Object{schedNode("dra-h100-1", "train", 0), gpuClass(false)}, draSlices(t)...)
}

// Each replica's claim from the template is its own: 3 pairs of the 8 H100s fit, 5 do not.
func TestFitJobWithClaimTemplate(t *testing.T) {
	for _, tc := range []struct {
		name        string
		parallelism int
		code        int
	}{
		{"fit-job-dra", 3, factory.ExitOK},
		{"fit-job-dra-no", 5, factory.ExitDoesNotFit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, kube := kubeClients(draCluster(t)...)
			r := runFit(t, c, draJob(tc.parallelism), "-f", "-", "-n", "sweeps")
			if r.code != tc.code || r.err != "" {
				t.Fatalf("exit %d, stderr %q; want %d", r.code, r.err, tc.code)
			}
			golden(t, tc.name+".golden", r.out)
			assertNoWrites(t, kube)
		})
	}
}

// A claim named by resourceClaimName is one claim for every replica: allocated once.
func TestFitSharedClaim(t *testing.T) {
	file := `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared-h100}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com}
---
apiVersion: batch/v1
kind: Job
metadata: {name: readers}
spec:
  parallelism: 3
  template:
    spec:
      resourceClaims:
      - {name: gpu, resourceClaimName: shared-h100}
      containers: [{name: main, image: cuda:12}]
`
	c, _ := kubeClients(draCluster(t)...)
	r := runFit(t, c, file, "-f", "-", "-o", "json")
	if r.code != factory.ExitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	var a printer.Fit
	if err := json.Unmarshal([]byte(r.out), &a); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range a.Pods {
		if len(p.Claims) != 1 || p.Claims[0].Name != "shared-h100" || len(p.Claims[0].Devices) != 1 {
			t.Fatalf("%s gets %+v, want the shared claim's one device", p.Pod, p.Claims)
		}
		seen[p.Claims[0].Devices[0].Device] = true
	}
	if len(a.Pods) != 3 || len(seen) != 1 {
		t.Errorf("%d pods on devices %v, want 3 pods sharing one device", len(a.Pods), seen)
	}
}

// Any object with spec.template and spec.replicas is read, as a custom resource would be;
// a file is read as well as standard input, JSON as well as YAML.
func TestFitCustomResource(t *testing.T) {
	file := `{"apiVersion": "example.com/v1", "kind": "TrainingRun", "metadata": {"name": "llm", "namespace": "research"},
 "spec": {"replicas": 2, "workers": "ignored", "template": {"spec": {"containers": [
   {"name": "main", "image": "cuda:12", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}}`
	path := filepath.Join(t.TempDir(), "run.json")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := kubeClients(twoNodes()...)
	r := runFit(t, c, "", "-f", path)
	if r.code != factory.ExitOK || r.err != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	golden(t, "fit-custom-resource.golden", r.out)
}

// Bad input is an error naming the object, with exit status 2 (1 is "does not fit").
func TestFitBadInput(t *testing.T) {
	template := func(class, selector string) string {
		sel := ""
		if selector != "" {
			sel = `, selectors: [{cel: {expression: '` + selector + `'}}]`
		}
		return `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: t}
spec: {spec: {devices: {requests: [{name: gpus, exactly: {deviceClassName: ` + class + sel + `}}]}}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: j}
spec:
  template:
    spec:
      resourceClaims: [{name: gpus, resourceClaimTemplateName: t}]
      containers: [{name: main, image: cuda:12}]
`
	}
	deployment := func(replicas string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: " + replicas +
			"\n  template: {spec: {containers: [{name: main, image: cuda:12}]}}\n"
	}
	for _, tc := range []struct {
		name, file string
		args       []string
		want       string
	}{
		{"not YAML", "{\"kind\": \"Pod\",", nil, "error: standard input: document 1 is not YAML or JSON"},
		{"not an object", "just words\n", nil, "error: standard input: document 1 is not a Kubernetes object"},
		{"no kind", "metadata: {name: x}\n", nil, "error: standard input: document 1: not a Kubernetes object (no kind or apiVersion)"},
		{"empty", "---\n", nil, "error: standard input holds nothing to place"},
		{"no template", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {a: b}\n", nil,
			"error: ConfigMap default/cm: no pod template (spec.template)"},
		{"negative replicas", deployment("-1"), nil, "error: Deployment default/d: spec.replicas is -1: a replica count must not be negative"},
		{"fractional replicas", deployment("1.5"), nil, "error: Deployment default/d: spec.replicas is 1.5: not a whole number"},
		{"string replicas", deployment("three"), nil, "error: Deployment default/d: spec.replicas is three: not a number"},
		{"a typo", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containerz: []}\n", nil, `error: Pod default/p: strict decoding error: unknown field "spec.containerz"`},
		{"DaemonSet", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: ds}\nspec: {template: {}}\n", nil, "error: DaemonSet default/ds: a DaemonSet places one pod on each node"},
		{"class missing", template("nope", ""), nil, "error: Job default/j: replica j-0: invalid claim or class: request gpus: device class nope does not exist"},
		{"CEL error", template("gpu.nvidia.com", `device.attributes["gpu.nvidia.com"].productName ==`), nil, "error: Job default/j: replica j-0: invalid claim or class: claim default/j-0-gpus: selector #0: CEL compile error"},
		{"template missing", template("gpu.nvidia.com", "")[strings.Index(template("gpu.nvidia.com", ""), "---")+4:], nil,
			"error: Job default/j: resource claim gpus: ResourceClaimTemplate default/t is neither in the file nor in the cluster"},
		{"claim missing", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {resourceClaims: [{name: g, resourceClaimName: gone}], containers: [{name: main, image: x}]}\n", nil,
			"error: Pod default/p: pod default/p: resource claim default/gone does not exist"},
		{"old DRA version", "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\nmetadata: {name: c}\nspec: {}\n", nil,
			"error: ResourceClaim default/c: resource.k8s.io/v1beta1 is not read: write it as resource.k8s.io/v1"},
		{"no file", "", []string{"-o", "json"}, "error: fit needs -f FILE (- reads standard input)\nSee 'kubectl gpuinv --help' for usage.\n"},
		{"no such file", "", []string{"-f", "/nonexistent/x.yaml"}, "error: open /nonexistent/x.yaml: no such file or directory\n"},
		{"an argument", "", []string{"-f", "-", "extra"}, "error: fit takes no arguments"},
		{"unknown flag", "", []string{"--replicas", "3"}, "error: unknown flag: --replicas"},
		{"several contexts", "", []string{"-f", "-", "--context", "a,b"}, "error: `kubectl gpuinv fit` reads one cluster"},
		{"unknown output", trainerDeployment, []string{"-f", "-", "-o", "wide"}, "error: unknown output format \"wide\": use json or yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := kubeClients(draCluster(t)...)
			args := tc.args
			if args == nil {
				args = []string{"-f", "-"}
			}
			r := runFit(t, c, tc.file, args...)
			if r.code != factory.ExitFitError || !strings.HasPrefix(r.err, tc.want) || r.out != "" {
				t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit %d and a message starting:\n%s", r.code, r.out, r.err, factory.ExitFitError, tc.want)
			}
		})
	}
}

// A workload scaled to zero has nothing to place: it fits.
func TestFitZeroReplicas(t *testing.T) {
	c, _ := kubeClients(twoNodes()...)
	r := runFit(t, c, strings.Replace(trainerDeployment, "replicas: 3", "replicas: 0", 1), "-f", "-")
	if r.code != factory.ExitOK || !strings.HasPrefix(r.out, "No replicas to place: every object asks for 0.\n") {
		t.Errorf("exit %d, stderr %q, output:\n%s", r.code, r.err, r.out)
	}
}

// fit and why read the Nodes and pods uncompressed, unless --disable-compression is given:
// =false asks the API server for gzip, as kubectl does by default.
func TestFitReadsUncompressedUnlessAsked(t *testing.T) {
	var mu sync.Mutex
	var encodings []string // Accept-Encoding of the Node and pod reads
	server := prototest.NewServer(t, prototest.Options{Wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/api/v1/nodes" || r.URL.Path == "/api/v1/pods" {
				mu.Lock()
				encodings = append(encodings, r.Header.Get("Accept-Encoding"))
				mu.Unlock()
			}
			h.ServeHTTP(w, r)
		})
	}}, prototest.Nodes, prototest.Pods, prototest.ResourceSlices, prototest.ResourceClaims, deviceClasses)
	server.Set(twoNodes("gpu-a", 8)...)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: server.Config().Host}
	kc.AuthInfos["c"] = &clientcmdapi.AuthInfo{Token: "t"}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "c"}
	kc.CurrentContext = "c"
	dir := t.TempDir()
	kubeconfig, file := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "trainer.yaml")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(trainerDeployment), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{nil, "identity"},
		{[]string{"--disable-compression"}, "identity"},
		{[]string{"--disable-compression=false"}, "gzip"},
	} {
		mu.Lock()
		encodings = nil
		mu.Unlock()
		var out, errOut bytes.Buffer
		code := Run(context.Background(), append([]string{"--kubeconfig", kubeconfig, "fit", "-f", file}, c.flags...),
			factory.Environment{Out: &out, ErrOut: &errOut, Getenv: func(string) string { return "" }, Now: func() time.Time { return now }})
		if code != factory.ExitDoesNotFit || !strings.Contains(out.String(), "2 of 3 replicas fit now") {
			t.Fatalf("fit %v: exit %d, want %d (2 of 3 replicas fit, on gpu-b); stdout:\n%s\nstderr:\n%s", c.flags, code, factory.ExitDoesNotFit, out.String(), errOut.String())
		}
		mu.Lock()
		if len(encodings) == 0 || slices.ContainsFunc(encodings, func(e string) bool { return e != c.want }) {
			t.Errorf("fit %v: the Nodes and pods were read with Accept-Encoding %q, want %q", c.flags, encodings, c.want)
		}
		mu.Unlock()
	}
}

// priorityClass is a PriorityClass of the value; global marks the cluster's default.
func priorityClass(name string, value int32, global bool) *schedulingv1.PriorityClass {
	return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value, GlobalDefault: global}
}

// A Deployment of a PriorityClass above the pods that hold the GPUs: the replicas that find no
// room are placed by the scheduler's preemption, which evicts the fewest pods of lower
// priority; fit names them, and exits 1: the replicas do not fit without evicting.
func TestFitPreemptsAsTheScheduler(t *testing.T) {
	objs := twoNodes("gpu-a", 2, "gpu-b", 4)
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			p.Spec.Priority = ptr.To(int32(10)) // admitted at the global default, batch
		}
	}
	objs = append(objs, priorityClass("production", 1000, false), priorityClass("batch", 10, true))
	c, kube := kubeClients(objs...)
	prod := strings.Replace(trainerDeployment, "      nodeSelector: {pool: train}\n", "      nodeSelector: {pool: train}\n      priorityClassName: production\n", 1)
	r := runFit(t, c, prod, "-f", "-")
	if r.code != factory.ExitDoesNotFit || r.err != "" {
		t.Fatalf("exit %d, stderr %q; want %d", r.code, r.err, factory.ExitDoesNotFit)
	}
	golden(t, "fit-preempt.golden", r.out)
	assertNoWrites(t, kube)

	r = runFit(t, c, prod, "-f", "-", "-o", "json")
	var a printer.Fit
	if err := json.Unmarshal([]byte(r.out), &a); err != nil {
		t.Fatal(err)
	}
	if a.Fits || !a.FitsByPreemption || a.Preempted != 1 || a.Pods[2].Node == "" || len(a.Pods[2].Preempts) != 1 {
		t.Errorf("answer %+v: want all 3 placed, the third by evicting one pod", a)
	}

	// The holders run at the global default (batch, 10); a Deployment naming no class gets it
	// too: no victims, as for the scheduler.
	r = runFit(t, c, trainerDeployment, "-f", "-")
	if r.code != factory.ExitDoesNotFit || !strings.Contains(r.out, "No preemption victims found for incoming pod") {
		t.Errorf("a Deployment of the default class: exit %d\n%s", r.code, r.out)
	}

	missing := strings.Replace(prod, "production", "platinum", 1)
	if r = runFit(t, c, missing, "-f", "-"); r.code != factory.ExitFitError || !strings.Contains(r.err, `PriorityClass "platinum" does not exist`) {
		t.Errorf("a class that does not exist: exit %d, stderr %q", r.code, r.err)
	}
}
