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

// fleetResult is what the fleet phase measured.
type fleetResult struct {
	contexts      int
	total, listed int32 // GPU nodes each inventory covers, and lists
	objBytes      int   // an inventory as the API server sends it
	runs          pluginResults
}

// fleetPhase measures `kubectl gpuinv --all-contexts` over --fleet-contexts clusters: as
// many kube-apiservers, each under its own prefix of one etcd, each with the GpuInventory the
// operator would write for --fleet-gpu-nodes GPU nodes (its node list bounded as the operator
// bounds it). No operator runs: the status is written once, and the plugin reads it.
func fleetPhase(ctx context.Context, h *harness) (result, error) {
	contexts, gpuNodes := h.o.fleetContexts, h.o.fleetGPUNodes
	start := time.Now()
	first, err := testenv.Start(ctx, testenv.Options{StartTimeout: 3 * time.Minute})
	if err != nil {
		return nil, err
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
		return nil, fmt.Errorf("start the fleet's kube-apiservers: %w", startErr)
	}
	started := time.Since(start)

	kc := clientcmdapi.NewConfig()
	res := &fleetResult{contexts: contexts}
	for i, env := range envs {
		name := fmt.Sprintf("cluster-%02d", i)
		gi, size, err := writeFleetInventory(ctx, env, i, gpuNodes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		res.objBytes, res.listed, res.total = size, int32(len(gi.Status.Nodes)), gi.Status.TotalGpuNodes
		kc.Clusters[name] = &clientcmdapi.Cluster{Server: env.Config.Host, InsecureSkipTLSVerify: true}
		kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: env.Config.BearerToken}
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	kc.CurrentContext = "cluster-00"
	kubeconfig := filepath.Join(first.Dir, "fleet-kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "fleet: %d kube-apiservers on one etcd started in %s, each with an inventory of %d GPU nodes\n", contexts, started.Round(time.Second), res.total)

	read, err := fleetReads(h.o.plugin, kubeconfig)
	if err != nil {
		return nil, err
	}
	if read != contexts {
		return nil, fmt.Errorf("kubectl gpuinv --all-contexts -o json listed %d inventories, want %d", read, contexts)
	}
	if res.runs, err = measurePlugin(first.Dir, h.o.plugin, kubeconfig, h.o.pluginRuns, "--all-contexts"); err != nil {
		return nil, err
	}
	return res, nil
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
