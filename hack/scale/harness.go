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
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventorycache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// harness is what the phases share: the options, the API server and its clients (none
// rate-limited on the client side), the fleet as generated, the running operator, and what
// a phase measured that a later one reads.
type harness struct {
	o    *options
	env  *testenv.Env
	kube kubernetes.Interface // protobuf
	// json writes the quiet phase's probes and the churn, as a kubelet's JSON client would.
	json kubernetes.Interface
	gpu  versioned.Interface
	// watcher reads inventories without their node list, as the operator's informer does,
	// so that decoding them takes little of the 2 cores being measured.
	watcher  versioned.Interface
	apiext   apiextensionsclient.Interface
	launcher *launcher
	op       *operatorProc // the running operator (a restart replaces it)
	logPath  string        // the operator's log
	fleet    []fleetNode   // the GPU nodes as generated
	prof     profiler
	probeLog *os.File // with --profile-dir: each probe's start and latency

	statusWrites *writeCounter // the default inventory's writes from the warm start on
	quietRSS     float64       // KiB: the steady RSS after sync, which later phases compare with
	alloc        *allocationResult

	closers []func() // what the cold start set up, undone in reverse by close
}

// close stops what the phases started, the last first.
func (h *harness) close() {
	for i := len(h.closers) - 1; i >= 0; i-- {
		h.closers[i]()
	}
	h.closers = nil
}

// startCluster starts the API server, connects the clients, creates the fleet and opens the
// operator's launcher.
func (h *harness) startCluster(ctx context.Context) error {
	env, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		return err
	}
	h.env = env
	h.closers = append(h.closers, env.Stop)
	if err := h.connect(env.Config); err != nil {
		return err
	}
	if h.fleet, err = createFleet(ctx, h.json, h.o.nodes, h.o.draShare); err != nil {
		return err
	}
	h.logPath = filepath.Join(env.Dir, "logs", "operator.log")
	return h.openLauncher(env.KubeconfigPath())
}

func (h *harness) connect(config *rest.Config) error {
	bulk := rest.CopyConfig(config)
	bulk.QPS = -1
	watcher, err := inventorycache.NewInformerClient(bulk)
	if err != nil {
		return err
	}
	protobuf := rest.CopyConfig(bulk)
	protobuf.ContentType = "application/vnd.kubernetes.protobuf"
	protobuf.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	h.json = kubernetes.NewForConfigOrDie(bulk)
	h.kube = kubernetes.NewForConfigOrDie(protobuf)
	h.gpu = versioned.NewForConfigOrDie(bulk)
	h.watcher = versioned.New(watcher)
	h.apiext = apiextensionsclient.NewForConfigOrDie(bulk)
	return nil
}

// createFleet creates the operator's namespace and a fleet of n nodes, half of them GPU
// nodes (draShare of those with a ResourceSlice), and returns its GPU nodes as generated.
func createFleet(ctx context.Context, kube kubernetes.Interface, n int, draShare float64) ([]fleetNode, error) {
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gpu-inventory-system"}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := testenv.CreateDRAFleet(ctx, kube, 0, n, 16, draShare); err != nil {
		return nil, err
	}
	fleet := gpuFleet(n, draShare)
	sample, _ := kube.CoreV1().Nodes().Get(ctx, fixtures.FleetNodeName(0), metav1.GetOptions{})
	raw, _ := sample.Marshal()
	fmt.Fprintf(os.Stderr, "created %d nodes in %s (a GPU node is %d bytes of protobuf, %d labels); %d of the %d GPU nodes are DRA nodes, each with a ResourceSlice\n",
		n, time.Since(start).Round(time.Second), len(raw), len(sample.Labels), draNodes(fleet), len(fleet))
	return fleet, nil
}

// openLauncher opens the operator's log (with --profile-dir, also the probe log) and makes
// the launcher of the operator with the run's flags; close closes the logs (with
// --profile-dir, copying the operator's into it first).
func (h *harness) openLauncher(kubeconfig string) error {
	logFile, err := os.Create(h.logPath)
	if err != nil {
		return err
	}
	h.closers = append(h.closers, func() { logFile.Close() })
	args := []string{"--kubeconfig=" + kubeconfig, "--namespace=gpu-inventory-system", "--health-probe-bind-address=127.0.0.1:0"}
	args = append(args, strings.Fields(h.o.operatorArgs)...)
	if h.prof.dir != "" {
		args = append(args, "--pprof-bind-address="+pprofAddr, "-v=4") // -v=4 logs every sync with its duration
		if h.probeLog, err = os.Create(filepath.Join(h.prof.dir, "probes.log")); err != nil {
			return err
		}
		h.closers = append(h.closers, func() {
			h.prof.save("operator.log", func() ([]byte, error) { return os.ReadFile(h.logPath) })
			h.probeLog.Close()
		})
	}
	h.launcher = &launcher{binary: h.o.operator, args: args, env: strings.Fields(h.o.operatorEnv), log: logFile}
	return nil
}

// startOperator starts the first operator; close stops whichever runs then.
func (h *harness) startOperator() error {
	op, err := h.launcher.start()
	if err != nil {
		return err
	}
	h.op = op
	h.closers = append(h.closers, func() { h.op.stop() })
	return nil
}

// pprofAddr is where the operator serves pprof with --profile-dir.
const pprofAddr = "127.0.0.1:16060"

// profiler saves profiles into --profile-dir; without it, it does nothing.
type profiler struct{ dir string }

// save writes what data returns into the directory.
func (p profiler) save(file string, data func() ([]byte, error)) {
	if p.dir == "" {
		return
	}
	b, err := data()
	if err != nil {
		fmt.Fprintf(os.Stderr, "profile %s: %v\n", file, err)
		return
	}
	_ = os.WriteFile(filepath.Join(p.dir, file), b, 0o644)
}

// fetch saves a profile from the operator's pprof endpoint.
func (p profiler) fetch(path, file string) {
	p.save(file, func() ([]byte, error) { return get(http.DefaultClient, "http://"+pprofAddr+path) })
}

// heap saves the operator's heap profile.
func (p profiler) heap(file string) { p.fetch("/debug/pprof/heap", file) }

// phase fetches a CPU profile of a phase that lasts d (ending a second before it) and,
// unless allocsFile is empty, what it allocated; wait on wg.
func (p profiler) phase(wg *sync.WaitGroup, d time.Duration, cpuFile, allocsFile string) {
	if p.dir == "" {
		return
	}
	seconds := max(1, int(d.Seconds())-1)
	wg.Go(func() { p.fetch(fmt.Sprintf("/debug/pprof/profile?seconds=%d", seconds), cpuFile) })
	if allocsFile != "" {
		wg.Go(func() { p.fetch(fmt.Sprintf("/debug/pprof/allocs?seconds=%d", seconds), allocsFile) })
	}
}

// start saves a CPU profile of the next operator's first d, from the moment its pprof
// endpoint answers.
func (p profiler) start(wg *sync.WaitGroup, d time.Duration, cpuFile string) {
	if p.dir == "" {
		return
	}
	wg.Go(func() {
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err := http.Get("http://" + pprofAddr + "/debug/pprof/")
			if err == nil {
				resp.Body.Close()
				break
			}
			if time.Now().After(deadline) {
				fmt.Fprintf(os.Stderr, "profile of the start: %v\n", err)
				return
			}
			time.Sleep(10 * time.Millisecond) // the operator has not started listening yet
		}
		p.fetch(fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d.Seconds())), cpuFile)
	})
}

// apiServer saves a CPU profile of the API server's next d.
func (p profiler) apiServer(wg *sync.WaitGroup, config *rest.Config, d time.Duration, file string) {
	if p.dir == "" {
		return
	}
	wg.Go(func() {
		p.save(file, func() ([]byte, error) {
			client, err := rest.HTTPClientFor(config)
			if err != nil {
				return nil, err
			}
			return get(client, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", config.Host, int(d.Seconds())))
		})
	})
}

// get reads the body at url.
func get(client *http.Client, url string) ([]byte, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}
