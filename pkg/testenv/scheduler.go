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
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// DRAFeatureGates are the DRA feature gates that scheduling tests rely on: admin access,
// device taints, prioritized lists, extended resources backed by DRA (GA in v1.37), and
// partitionable devices and consumable capacity (beta, on by default). kube-apiserver and
// kube-scheduler enable all of them by default, so neither gets --feature-gates for them;
// FeatureGates reads what a running component has.
var DRAFeatureGates = []string{
	"DRAAdminAccess", "DRADeviceTaints", "DRAPrioritizedList", "DRAExtendedResource",
	"DRAPartitionableDevices", "DRAConsumableCapacity",
}

// StartScheduling makes e a cluster that runs pods, in this order: kwok with pod stages
// (StartKwokWithPods), the node lifecycle controller (StartNodeLifecycle), the ResourceClaim
// controller (StartResourceClaimController) and kube-scheduler (StartScheduler). Pods then
// go to the kwok nodes (annotation kwok.x-k8s.io/node=fake) the way they would in a cluster.
func (e *Env) StartScheduling(ctx context.Context) error {
	for _, start := range []func(context.Context) error{
		e.StartKwokWithPods, e.StartNodeLifecycle, e.StartResourceClaimController, e.StartScheduler,
	} {
		if err := start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// StartScheduler runs kube-scheduler for the admin user without leader election, serving on a
// free loopback port, with Options.SchedulerArgs, and waits for its /readyz. It logs to
// Dir/logs/kube-scheduler.log; Stop stops it.
func (e *Env) StartScheduler(ctx context.Context) error {
	if e.scheduler != nil && e.scheduler.running() {
		return nil
	}
	bin, err := e.component("kube-scheduler")
	if err != nil {
		return err
	}
	kc := e.KubeconfigPath()
	e.scheduler, err = startOnFreePort(func(port int) (*process, error) {
		args := []string{
			"--kubeconfig=" + kc,
			"--authentication-kubeconfig=" + kc, // for /metrics; /readyz is open to anyone
			"--authorization-kubeconfig=" + kc,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port),
			"--v=2", // one line per binding and per unschedulable attempt
		}
		p, err := startProcess(bin, filepath.Join(e.Dir, "logs", "kube-scheduler.log"), append(args, e.schedArgs...)...)
		if err != nil {
			return nil, err
		}
		e.schedulerURL = "https://127.0.0.1:" + strconv.Itoa(port)
		return p, e.waitHealthy(ctx, p, e.schedulerURL+"/readyz", nil, selfSignedClient())
	})
	return err
}

// StartResourceClaimController runs kube-controller-manager's ResourceClaim controller, which
// creates a pod's ResourceClaims from its ResourceClaimTemplates (the scheduler waits for
// them) and releases them: once the pod is done or gone, it leaves their reservedFor and the
// claims are deallocated; a done pod's claims are deleted, a deleted pod's stay deallocated
// (deleting those is the garbage collector's job, which does not run here). It logs to
// Dir/logs/resourceclaim-controller.log; Stop stops it.
func (e *Env) StartResourceClaimController(ctx context.Context) error {
	if e.claimCtrl != nil && e.claimCtrl.running() {
		return nil
	}
	bin, err := e.component("resourceclaim-controller")
	if err != nil {
		return err
	}
	e.claimCtrl, err = startOnFreePort(func(port int) (*process, error) {
		address := "127.0.0.1:" + strconv.Itoa(port)
		args := []string{"--kubeconfig=" + e.KubeconfigPath(), "--health-address=" + address, "--v=2"}
		for _, a := range e.schedArgs {
			if strings.HasPrefix(a, "--feature-gates=") { // the scheduler's gates, as kube-controller-manager would share them
				args = append(args, a)
			}
		}
		p, err := startProcess(bin, filepath.Join(e.Dir, "logs", "resourceclaim-controller.log"), args...)
		if err != nil {
			return nil, err
		}
		return p, e.waitHealthy(ctx, p, "http://"+address+"/healthz", nil)
	})
	return err
}

// component returns the path of a binary of binDir, or an error that says how to get it.
func (e *Env) component(name string) (string, error) {
	bin := filepath.Join(e.binDir, name)
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("%s not found in %s=%s (run `make testbin`): %w", name, BinDirEnv, e.binDir, err)
	}
	return bin, nil
}

// startOnFreePort runs start on a free port, on a new one when another socket took it before
// the component bound it (up to startAttempts times). A failed start's process is stopped.
func startOnFreePort(start func(port int) (*process, error)) (*process, error) {
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		p, err := start(port)
		if err == nil {
			return p, nil
		}
		if p != nil {
			p.stop(3 * time.Second)
		}
		if attempt == startAttempts || !strings.Contains(err.Error(), "address already in use") {
			return nil, err
		}
	}
}

// selfSignedClient talks to a component's self-signed loopback endpoint.
func selfSignedClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // self-signed serving cert on loopback
	}}
}

// featureLine is a sample of the kubernetes_feature_enabled gauge in /metrics.
var featureLine = regexp.MustCompile(`^kubernetes_feature_enabled\{.*name="([^"]+)".*\} (\S+)$`)

// FeatureGates returns the feature gates that component ("kube-apiserver" or
// "kube-scheduler", which must be running) reports in its /metrics, enabled or not, by name.
func (e *Env) FeatureGates(ctx context.Context, component string) (map[string]bool, error) {
	var url string
	var client *http.Client
	switch component {
	case "kube-apiserver":
		url = e.Config.Host + "/metrics"
		var err error
		if client, err = rest.HTTPClientFor(e.Config); err != nil {
			return nil, err
		}
	case "kube-scheduler":
		if e.scheduler == nil || !e.scheduler.running() {
			return nil, errors.New("kube-scheduler is not running")
		}
		url, client = e.schedulerURL+"/metrics", selfSignedClient()
	default:
		return nil, fmt.Errorf("unknown component %q", component)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s /metrics: %w", component, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s /metrics: %s", component, resp.Status)
	}
	gates := map[string]bool{}
	scanner := bufio.NewScanner(resp.Body)
	scanner.Buffer(make([]byte, 64<<10), 1<<20)
	for scanner.Scan() {
		if m := featureLine.FindStringSubmatch(scanner.Text()); m != nil {
			gates[m[1]] = m[2] == "1"
		}
	}
	return gates, scanner.Err()
}
