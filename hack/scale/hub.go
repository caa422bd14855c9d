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
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	"github.com/youngju-dev/gpu-inventory-operator/hack/scale/proc"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/member"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// The hub phase's objects on the hub.
const (
	hubNamespace      = "gpu-fleet-hub" // the hub's Lease and the secretreader plugin's token Secrets
	profileNamespace  = "fleet"         // the ClusterProfiles
	workloadNamespace = "bench"         // the pending MultiKueue Workloads
	hubFleet          = "bench"         // the GpuFleet over every ClusterProfile
	memberToken       = "hub-bench-member-token"
)

var profileGVR = v1alpha1.GroupVersion.WithResource("clusterprofiles")

// hubResult is what the hub phase measured.
type hubResult struct {
	members, memberNodes, workers int
	inventoryBytes                int
	gpuNodes, listed              int32
	reachable                     time.Duration // the hub's start to every row Reachable
	changes                       []time.Duration
	nominations                   []time.Duration
	quiet                         proc.Window // the hub's RSS over the quiet window
	peak, anon                    float64     // KiB: VmHWM over the whole run; RssAnon at the end
	fleetWrites, nominationWrites int64       // the hub's own counts over the quiet window
	apiWrites                     map[string]int64
	apiErr                        error // why the API server's counts could not be read
}

// hubBed is what the hub phase runs: the hub's API server and clients, the member doubles and
// the hub.
type hubBed struct {
	o       *options
	env     *testenv.Env
	kube    kubernetes.Interface
	gpu     versioned.Interface
	dyn     dynamic.Interface
	doubles *memberDoubles
	hub     *operatorProc
	logPath string // the hub's
}

// hubPhase runs the fleet hub (--dispatch) over --hub-members member doubles on a
// kube-apiserver of its own: its memory, a member's change to the GpuFleet status, a pending
// MultiKueue Workload to its nomination, and its writes while nothing changes.
func hubPhase(ctx context.Context, h *harness) (result, error) {
	o := h.o
	b := &hubBed{o: o}
	env, err := testenv.Start(ctx, testenv.Options{StartTimeout: 3 * time.Minute})
	if err != nil {
		return nil, err
	}
	defer env.Stop()
	b.env, b.kube, b.gpu, b.dyn = env, kubernetes.NewForConfigOrDie(env.Config), versioned.NewForConfigOrDie(env.Config), dynamic.NewForConfigOrDie(env.Config)
	if err := errorsOf(env.InstallKueueCRDs(ctx), env.InstallClusterProfileCRDs(ctx)); err != nil {
		return nil, err
	}
	if b.doubles, err = startMemberDoubles(env.Dir, o.hubMembers, o.hubMemberNodes); err != nil {
		return nil, err
	}
	defer b.doubles.stop()
	res := &hubResult{members: o.hubMembers, memberNodes: o.hubMemberNodes, workers: min(o.hubWorkers, o.hubMembers),
		inventoryBytes: b.doubles.ready.InventoryBytes, gpuNodes: b.doubles.ready.GpuNodes, listed: b.doubles.ready.ListedNodes}
	if err := b.createMembers(ctx, res.workers); err != nil {
		return nil, err
	}
	if b.hub, err = b.startHub(); err != nil {
		return nil, err
	}
	defer func() {
		b.hub.stop()
		h.prof.save("hub.log", func() ([]byte, error) { return os.ReadFile(b.logPath) })
	}()
	if res.reachable, err = b.createFleet(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "hub: %d members of %d nodes Reachable %.1f s after the hub started\n", res.members, res.memberNodes, res.reachable.Seconds())
	if res.changes, err = b.changes(ctx, o.hubChanges); err != nil {
		b.logTail()
		return res, err
	}
	res.nominations, err = b.nominations(ctx, o.hubWorkloads, res.workers)
	b.quiet(ctx, res) // the memory and the quiet writes, even if a nomination failed
	if err != nil {
		b.logTail()
	}
	return res, err
}

// logTail prints the end of the hub's log, which a failure leaves on the screen; with
// --profile-dir, the whole log is saved there.
func (b *hubBed) logTail() {
	data, _ := os.ReadFile(b.logPath)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	fmt.Fprintf(os.Stderr, "the hub's log, its last lines:\n%s\n", strings.Join(lines[max(0, len(lines)-20):], "\n"))
}

func errorsOf(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// startMemberDoubles runs the member doubles' process (this binary, memberDoublesEnv set),
// its log in dir/logs, and waits until it serves.
func startMemberDoubles(dir string, members, nodes int) (*memberDoubles, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "logs", "member-doubles.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, fmt.Sprintf("--members=%d", members), fmt.Sprintf("--nodes=%d", nodes), "--token="+memberToken)
	cmd.Env = append(os.Environ(), memberDoublesEnv+"=1")
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the member doubles: %w", err)
	}
	d := &memberDoubles{cmd: stdin, out: bufio.NewScanner(stdout), stop: func() {
		_ = stdin.Close() // the end of its commands ends it
		_ = cmd.Wait()
		logFile.Close()
	}}
	if !d.out.Scan() || json.Unmarshal(d.out.Bytes(), &d.ready) != nil || len(d.ready.Servers) != members {
		d.stop()
		return nil, fmt.Errorf("the member doubles did not start (%s): %q", logFile.Name(), d.out.Text())
	}
	return d, nil
}

// memberName is the i-th member's ClusterProfile (and MultiKueueCluster) name.
func memberName(i int) string { return fmt.Sprintf("member-%02d", i) }

// createMembers names every double by a ClusterProfile whose access provider is the hub's
// secretreader plugin (its token Secret on the hub), and the first workers also by a
// MultiKueueCluster (Active, its kubeconfig Secret) of the MultiKueueConfig of the
// MultiKueue AdmissionCheck.
func (b *hubBed) createMembers(ctx context.Context, workers int) error {
	for _, ns := range []string{hubNamespace, profileNamespace, workloadNamespace, homelabv1.DefaultKueueNamespace} {
		if _, err := b.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	var clusters []any
	for i, server := range b.doubles.ready.Servers {
		name := memberName(i)
		if err := b.secret(ctx, hubNamespace, name, "token", []byte(memberToken)); err != nil {
			return err
		}
		if err := b.profile(ctx, name, server); err != nil {
			return err
		}
		if i < workers {
			clusters = append(clusters, name)
			if err := b.multiKueueCluster(ctx, name, server); err != nil {
				return err
			}
		}
	}
	if err := b.kueueApply(ctx, testenv.MultiKueueConfigsResource, testenv.MultiKueueCheck, map[string]any{"clusters": clusters}, nil); err != nil {
		return err
	}
	return b.kueueApply(ctx, testenv.AdmissionChecksResource, testenv.MultiKueueCheck, map[string]any{"controllerName": testenv.MultiKueueControllerName,
		"parameters": map[string]any{"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": testenv.MultiKueueCheck}}, nil)
}

func (b *hubBed) secret(ctx context.Context, namespace, name, key string, value []byte) error {
	_, err := b.kube.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Data: map[string][]byte{key: value}}, metav1.CreateOptions{})
	return err
}

// profile creates ClusterProfile fleet/name of the double at server, as cluster-inventory-api's
// secretreader plugin reads it.
func (b *hubBed) profile(ctx context.Context, name, server string) error {
	cp := &unstructured.Unstructured{Object: map[string]any{"apiVersion": v1alpha1.GroupVersion.String(), "kind": "ClusterProfile",
		"metadata": map[string]any{"namespace": profileNamespace, "name": name},
		"spec":     map[string]any{"displayName": name, "clusterManager": map[string]any{"name": "hack-scale"}}}}
	created, err := b.dyn.Resource(profileGVR).Namespace(profileNamespace).Create(ctx, cp, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	created.Object["status"] = map[string]any{"accessProviders": []any{map[string]any{"name": member.SecretReaderProvider, "cluster": map[string]any{
		"server": server, "certificate-authority-data": b.doubles.ready.CA,
		"extensions": []any{map[string]any{"name": "client.authentication.k8s.io/exec", "extension": map[string]any{"clusterName": name}}}}}}}
	_, err = b.dyn.Resource(profileGVR).Namespace(profileNamespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}

// multiKueueCluster creates MultiKueueCluster name, its kubeconfig the Secret kueue-system/name
// (the double at server, the token), Active as Kueue would mark it.
func (b *hubBed) multiKueueCluster(ctx context.Context, name, server string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["member"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: b.doubles.ready.CA}
	kc.AuthInfos["hub"] = &clientcmdapi.AuthInfo{Token: memberToken}
	kc.Contexts["member"] = &clientcmdapi.Context{Cluster: "member", AuthInfo: "hub"}
	kc.CurrentContext = "member"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	if err := b.secret(ctx, homelabv1.DefaultKueueNamespace, name, member.KubeconfigKey, data); err != nil {
		return err
	}
	active := map[string]any{"conditions": []any{map[string]any{"type": "Active", "status": "True", "reason": "Active",
		"message": "Connected", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}
	return b.kueueApply(ctx, testenv.MultiKueueClustersResource, name,
		map[string]any{"clusterSource": map[string]any{"kubeConfig": map[string]any{"locationType": "Secret", "location": name}}}, active)
}

// kueueApply applies the cluster-scoped Kueue object name of resource gvr with spec, and
// its status (nil: none), under Kueue's manager.
func (b *hubBed) kueueApply(ctx context.Context, gvr schema.GroupVersionResource, name string, spec, status map[string]any) error {
	kind := map[string]string{"admissionchecks": "AdmissionCheck", "multikueueconfigs": "MultiKueueConfig", "multikueueclusters": "MultiKueueCluster"}[gvr.Resource]
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": kind,
		"metadata": map[string]any{"name": name}, "spec": spec}}
	client := b.dyn.Resource(gvr)
	if _, err := client.Apply(ctx, name, u, metav1.ApplyOptions{FieldManager: "kueue"}); err != nil {
		return fmt.Errorf("apply %s %s: %w", kind, name, err)
	}
	if status == nil {
		return nil
	}
	u = &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": kind,
		"metadata": map[string]any{"name": name}, "status": status}}
	if _, err := client.ApplyStatus(ctx, name, u, metav1.ApplyOptions{FieldManager: "kueue"}); err != nil {
		return fmt.Errorf("apply the status of %s %s: %w", kind, name, err)
	}
	return nil
}

// startHub starts the hub's built binary with --dispatch, as the hub's admin, the
// secretreader plugin of the same binary its access provider.
func (b *hubBed) startHub() (*operatorProc, error) {
	binary, err := filepath.Abs(b.o.hub)
	if err != nil {
		return nil, err
	}
	kubeconfig := b.env.KubeconfigPath()
	providers, _ := json.Marshal(map[string]any{"providers": []any{map[string]any{"name": member.SecretReaderProvider,
		"execConfig": map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "command": binary,
			"args": []string{"secretreader", "--kubeconfig=" + kubeconfig, "--namespace=" + hubNamespace}, "provideClusterInfo": true}}}})
	providerFile := filepath.Join(b.env.Dir, "providers.json")
	if err := os.WriteFile(providerFile, providers, 0o600); err != nil {
		return nil, err
	}
	b.logPath = filepath.Join(b.env.Dir, "logs", "hub.log")
	logFile, err := os.Create(b.logPath)
	if err != nil {
		return nil, err
	}
	l := &launcher{binary: binary, log: logFile, args: []string{"--kubeconfig=" + kubeconfig, "--namespace=" + hubNamespace,
		"--clusterprofile-provider-file=" + providerFile, "--dispatch", "--health-probe-bind-address=127.0.0.1:0"}}
	p, err := l.start()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	return p, nil
}

// createFleet creates the GpuFleet over the ClusterProfiles once the hub has installed its
// CRD, and returns when, from the hub's start, a watch saw every member Reachable.
func (b *hubBed) createFleet(ctx context.Context) (time.Duration, error) {
	apiext := apiextensionsclient.NewForConfigOrDie(b.env.Config)
	if err := waitCRDEstablished(ctx, apiext, homelabv1.GpuFleetCRDName, time.Minute); err != nil {
		return 0, fmt.Errorf("the hub's GpuFleet CRD: %w", err)
	}
	gf := &homelabv1.GpuFleet{ObjectMeta: metav1.ObjectMeta{Name: hubFleet},
		Spec: homelabv1.GpuFleetSpec{ClusterProfiles: &homelabv1.FleetClusterProfiles{Namespace: profileNamespace}}}
	if _, err := b.gpu.HomelabV1().GpuFleets().Create(ctx, gf, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	seen, err := b.untilFleet(ctx, 5*time.Minute, nil, func(st *homelabv1.GpuFleetStatus) bool {
		return reachableRows(st) == b.o.hubMembers
	})
	if err != nil {
		return 0, fmt.Errorf("every member Reachable: %w", err)
	}
	return seen.Sub(b.hub.started), nil
}

// reachableRows counts the Reachable rows of a GpuFleet status.
func reachableRows(st *homelabv1.GpuFleetStatus) int {
	n := 0
	for _, m := range st.Members {
		if m.State == homelabv1.MemberReachable {
			n++
		}
	}
	return n
}

// untilFleet follows the GpuFleet from its state now (after start, unless nil, ran) until
// done accepts its status, at most timeout, and returns when the watch saw it.
func (b *hubBed) untilFleet(ctx context.Context, timeout time.Duration, start func() error, done func(*homelabv1.GpuFleetStatus) bool) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	fleets := b.gpu.HomelabV1().GpuFleets()
	gf, err := fleets.Get(ctx, hubFleet, metav1.GetOptions{})
	if err != nil {
		return time.Time{}, err
	}
	if start == nil && done(&gf.Status) {
		return time.Now(), nil
	}
	w, err := fleets.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", hubFleet).String(), ResourceVersion: gf.ResourceVersion})
	if err != nil {
		return time.Time{}, err
	}
	defer w.Stop()
	if start != nil {
		if err := start(); err != nil {
			return time.Time{}, err
		}
	}
	for e := range w.ResultChan() {
		if gf, ok := e.Object.(*homelabv1.GpuFleet); ok && done(&gf.Status) {
			return time.Now(), nil
		}
	}
	return time.Time{}, fmt.Errorf("not within %s: %w", timeout, ctx.Err())
}

// changes changes the readyGpuNodes of n members in turn, each to a value of its own, and
// measures from the double's MODIFIED event to a watch on the hub seeing the member's row
// show it.
func (b *hubBed) changes(ctx context.Context, n int) ([]time.Duration, error) {
	var out []time.Duration
	for k := 1; k <= n; k++ {
		i, want := (k*7)%b.o.hubMembers, b.doubles.ready.ReadyGpuNodes-int32(k)
		row := profileNamespace + "/" + memberName(i)
		var sent time.Time
		seen, err := b.untilFleet(ctx, 30*time.Second, func() (err error) {
			sent, err = b.doubles.set(i, want)
			return err
		}, func(st *homelabv1.GpuFleetStatus) bool {
			for _, m := range st.Members {
				if m.Name == row {
					return m.ReadyGpuNodes == want
				}
			}
			return false
		})
		if err != nil {
			return out, fmt.Errorf("row %s showing readyGpuNodes %d: %w", row, want, err)
		}
		out = append(out, seen.Sub(sent))
		fmt.Fprintf(os.Stderr, "hub: %s readyGpuNodes %d shown after %s\n", row, want, seen.Sub(sent).Round(time.Millisecond))
		time.Sleep(2 * time.Second) // the pace: each change comes to a quiet fleet (--min-sync-interval 1s)
	}
	return out, nil
}
