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
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/crd"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

var (
	// fleetContexts is the number of clusters of the fleet phase (0: skip it).
	fleetContexts int
	// fleetGPUNodes is the number of GPU nodes each fleet-phase inventory covers.
	fleetGPUNodes int
	// fleetOnly runs the fleet phase alone.
	fleetOnly bool
)

// fleetPhase measures `kubectl gpuinv --all-contexts` over contexts clusters: as many
// kube-apiservers, each under its own prefix of one etcd, each with the GpuInventory the
// operator would write for gpuNodes GPU nodes (its node list bounded as the operator bounds
// it). No operator runs: the status is written once, and the plugin reads it. It prints its
// table.
func fleetPhase(ctx context.Context, contexts, gpuNodes int) error {
	start := time.Now()
	first, err := testenv.Start(ctx, testenv.Options{StartTimeout: 3 * time.Minute})
	if err != nil {
		return err
	}
	defer first.Stop()
	envs := make([]*testenv.Env, contexts)
	envs[0] = first
	// A few at a time: a kube-apiserver's start takes a core for some seconds.
	slots := make(chan struct{}, 3)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var startErr error
	for i := 1; i < contexts; i++ {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			env, err := first.StartSharingEtcd(ctx, fmt.Sprintf("/fleet-%02d", i), testenv.Options{StartTimeout: 3 * time.Minute})
			mu.Lock()
			defer mu.Unlock()
			envs[i] = env
			startErr = errors.Join(startErr, err)
		})
	}
	wg.Wait()
	defer func() {
		for _, env := range envs[1:] {
			if env != nil {
				env.Stop()
			}
		}
	}()
	if startErr != nil {
		return fmt.Errorf("start the fleet's kube-apiservers: %w", startErr)
	}
	started := time.Since(start)

	kc := clientcmdapi.NewConfig()
	var objBytes int
	var listed, total int32
	for i, env := range envs {
		name := fmt.Sprintf("cluster-%02d", i)
		gi, size, err := writeFleetInventory(ctx, env, i, gpuNodes)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		objBytes, listed, total = size, int32(len(gi.Status.Nodes)), gi.Status.TotalGpuNodes
		kc.Clusters[name] = &clientcmdapi.Cluster{Server: env.Config.Host, InsecureSkipTLSVerify: true}
		kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: env.Config.BearerToken}
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	kc.CurrentContext = "cluster-00"
	kubeconfig := filepath.Join(first.Dir, "fleet-kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "fleet: %d kube-apiservers on one etcd started in %s, each with an inventory of %d GPU nodes\n", contexts, started.Round(time.Second), total)

	read, err := fleetReads(pluginBinary, kubeconfig)
	if err != nil {
		return err
	}
	if read != contexts {
		return fmt.Errorf("kubectl gpuinv --all-contexts -o json listed %d inventories, want %d", read, contexts)
	}
	runs, err := measurePlugin(first.Dir, pluginBinary, kubeconfig, pluginRuns, "--all-contexts")
	if err != nil {
		return err
	}
	fmt.Printf("\n`kubectl gpuinv --all-contexts` over %d contexts: %d kube-apiservers sharing one etcd (one prefix each), each GpuInventory covering %d GPU nodes and listing %d (%.0f KiB) (%d runs, output to /dev/null; median wall time, largest max RSS)\n\n",
		contexts, contexts, total, listed, float64(objBytes)/1024, pluginRuns)
	fmt.Println("| command | wall time | CPU | max RSS | target |")
	fmt.Println("|---|---|---|---|---|")
	fmt.Printf("| `kubectl gpuinv --all-contexts` (%d GETs at once, fleet report) | %s | %s | %s | ≤ 1 s: %s |\n",
		contexts, runs.wall(), runs.cpu(), runs.rss(), verdict(runs.medianWall() <= time.Second))
	return nil
}

// writeFleetInventory installs the CRDs in env and writes the inventory of cluster i: the
// operator's status for gpuNodes GPU nodes of the generated fleet (a node in 50 NotReady),
// listing at most the operator's default number of nodes. It returns the object and its size
// as the API server sends it.
func writeFleetInventory(ctx context.Context, env *testenv.Env, i, gpuNodes int) (*homelabv1.GpuInventory, int, error) {
	apiext := apiextensionsclient.NewForConfigOrDie(env.Config)
	if _, err := crd.Ensure(ctx, apiext.ApiextensionsV1().CustomResourceDefinitions()); err != nil {
		return nil, 0, err
	}
	if err := crd.WaitAllEstablished(ctx, apiext.ApiextensionsV1().CustomResourceDefinitions(), time.Minute); err != nil {
		return nil, 0, err
	}
	var nodes []*corev1.Node
	for k := range gpuNodes {
		node, labels := fixtures.FleetNode(2 * (i*gpuNodes + k)) // GPU nodes are the even ones
		for key, v := range labels {
			node.Labels[key] = v
		}
		if k%50 == 49 {
			for c := range node.Status.Conditions {
				if node.Status.Conditions[c].Type == corev1.NodeReady {
					node.Status.Conditions[c].Status = corev1.ConditionFalse
				}
			}
		}
		nodes = append(nodes, node)
	}
	now := time.Now()
	content, _ := inventory.NewEntryCache().Compute(nodes, nil, now)
	listed, omitted := content.Listed(inventory.DefaultMaxStatusNodes, inventory.MaxNodeListBytes)
	conditions := inventory.Conditions(content, omitted, 1)
	for c := range conditions {
		conditions[c].LastTransitionTime = metav1.NewTime(now)
	}
	gpu := versioned.NewForConfigOrDie(env.Config)
	gi, err := gpu.HomelabV1().GpuInventories().Create(ctx, &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: homelabv1.DefaultInventoryName}}, metav1.CreateOptions{})
	if err != nil {
		return nil, 0, err
	}
	gi.Status = content.Status(listed, conditions, gi.Generation, metav1.NewTime(now))
	if gi, err = gpu.HomelabV1().GpuInventories().UpdateStatus(ctx, gi, metav1.UpdateOptions{}); err != nil {
		return nil, 0, err
	}
	raw, err := gpu.HomelabV1().RESTClient().Get().Resource("gpuinventories").Name(gi.Name).DoRaw(ctx)
	return gi, len(raw), err
}

// fleetReads runs `kubectl gpuinv --all-contexts -o json` once and returns how many
// inventories it listed (it must exit 0: every cluster read).
func fleetReads(binary, kubeconfig string) (int, error) {
	out, err := exec.Command(binary, "--kubeconfig", kubeconfig, "--all-contexts", "-o", "json").Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return 0, fmt.Errorf("kubectl gpuinv --all-contexts -o json: %w: %s", err, exit.Stderr)
		}
		return 0, err
	}
	var list struct {
		Items []homelabv1.GpuInventory `json:"items"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		return 0, fmt.Errorf("decode kubectl gpuinv --all-contexts -o json: %w", err)
	}
	return len(list.Items), nil
}
