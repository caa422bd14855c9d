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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/crd"
)

// Kueue's API as the test bed uses it: the version that Kueue v0.17.0 stores and serves first.
const (
	KueueGroup   = "kueue.x-k8s.io"
	KueueVersion = "v1beta2"
	// KueueQueueNameLabel puts a Job in a LocalQueue.
	KueueQueueNameLabel = "kueue.x-k8s.io/queue-name"
	// KueueNamespace is the namespace Kueue's configuration names, as a real install's.
	KueueNamespace = "kueue-system"
)

// Resources of Kueue's kinds (namespaced: LocalQueues and Workloads).
var (
	ResourceFlavorsResource = schema.GroupVersionResource{Group: KueueGroup, Version: KueueVersion, Resource: "resourceflavors"}
	ClusterQueuesResource   = schema.GroupVersionResource{Group: KueueGroup, Version: KueueVersion, Resource: "clusterqueues"}
	CohortsResource         = schema.GroupVersionResource{Group: KueueGroup, Version: KueueVersion, Resource: "cohorts"}
	LocalQueuesResource     = schema.GroupVersionResource{Group: KueueGroup, Version: KueueVersion, Resource: "localqueues"}
	WorkloadsResource       = schema.GroupVersionResource{Group: KueueGroup, Version: KueueVersion, Resource: "workloads"}
)

// KueueOptions configure StartKueue.
type KueueOptions struct {
	// FeatureGates are set on Kueue's --feature-gates besides VisibilityOnDemand=false (the
	// visibility server wants certificates from a fixed path).
	FeatureGates map[string]bool
	// Resources is the Configuration's resources section as JSON would hold it (for example
	// deviceClassMappings for DRA); nil leaves it out.
	Resources map[string]any
	// MultiKueue is the Configuration's multiKueue section (for example dispatcherName); nil
	// leaves it out.
	MultiKueue map[string]any
}

// StartSchedulingWithKueue is StartScheduling with Kueue: kwok runs pods, but a Job's pods
// run until deleted, as a training job holding its GPUs does (StartKwokWithRunningJobs); then
// the node lifecycle controller, the ResourceClaim controller, kube-scheduler, the Job
// controller and Kueue (StartKueue). A Job that Kueue admits gets pods that the scheduler
// places on the nodes of the flavor Kueue chose.
func (e *Env) StartSchedulingWithKueue(ctx context.Context, opts KueueOptions) error {
	for _, start := range []func(context.Context) error{
		e.StartKwokWithRunningJobs, e.StartNodeLifecycle, e.StartResourceClaimController, e.StartScheduler,
	} {
		if err := start(ctx); err != nil {
			return err
		}
	}
	return e.StartKueue(ctx, opts)
}

// StartKwokWithRunningJobs is StartKwokWithPods where a Job's pods stay Running until
// deleted instead of completing at once. Kwok runs with one set of stages: after StartKwok or
// StartKwokWithPods it fails.
func (e *Env) StartKwokWithRunningJobs(ctx context.Context) error {
	return e.startKwok(ctx, "kwok-job-stages.yaml")
}

// StartJobController runs kube-controller-manager's Job controller, which makes the pods of a
// Job that is not suspended and deletes those of a Job suspended again. No garbage collector
// runs: the pods of a deleted Job stay until deleted. It logs to Dir/logs/job-controller.log;
// Stop stops it.
func (e *Env) StartJobController(ctx context.Context) error {
	if e.jobCtrl != nil && e.jobCtrl.running() {
		return nil
	}
	bin, err := e.component("job-controller")
	if err != nil {
		return err
	}
	e.jobCtrl, err = startOnFreePort(func(port int) (*process, error) {
		address := "127.0.0.1:" + strconv.Itoa(port)
		p, err := startProcess(bin, filepath.Join(e.Dir, "logs", "job-controller.log"),
			"--kubeconfig="+e.KubeconfigPath(), "--health-address="+address, "--v=2")
		if err != nil {
			return nil, err
		}
		return p, e.waitHealthy(ctx, p, "http://"+address+"/healthz", nil)
	})
	return err
}

// StartKueue installs Kueue's CRDs (InstallKueueCRDs), runs the Job controller
// (StartJobController) and Kueue's own controller for the admin user, and returns once Kueue
// marks a ClusterQueue Active (it creates one, and deletes it again). Kueue manages Jobs
// labelled kueue.x-k8s.io/queue-name, which must be created suspended: Kueue's webhooks are
// served but not registered with the API server. It logs to Dir/logs/kueue.log; StopKueue
// and Stop stop it, and a failed start returns the end of that log.
func (e *Env) StartKueue(ctx context.Context, opts KueueOptions) error {
	if e.kueue != nil && e.kueue.running() {
		return nil
	}
	bin, err := e.component("kueue")
	if err != nil {
		return err
	}
	if err := e.InstallKueueCRDs(ctx); err != nil {
		return err
	}
	if err := e.StartJobController(ctx); err != nil {
		return err
	}
	dir := filepath.Join(e.Dir, "kueue")
	if err := writeSelfSignedPair(filepath.Join(dir, "certs")); err != nil {
		return err
	}
	gates := maps.Clone(opts.FeatureGates)
	if gates == nil {
		gates = map[string]bool{}
	}
	if _, set := gates["VisibilityOnDemand"]; !set {
		gates["VisibilityOnDemand"] = false
	}
	e.kueue, err = startOnFreePort(func(healthPort int) (*process, error) {
		webhookPort, err := freePort()
		if err != nil {
			return nil, err
		}
		config := filepath.Join(dir, "config.json")
		if err := writeKueueConfig(config, filepath.Join(dir, "certs"), healthPort, webhookPort, opts); err != nil {
			return nil, err
		}
		p, err := startProcess(bin, filepath.Join(e.Dir, "logs", "kueue.log"),
			"--kubeconfig="+e.KubeconfigPath(), "--config="+config, "--feature-gates="+gateList(gates),
			"--metrics-cert-dir="+filepath.Join(dir, "certs"))
		if err != nil {
			return nil, err
		}
		return p, e.waitHealthy(ctx, p, "http://127.0.0.1:"+strconv.Itoa(healthPort)+"/readyz", nil)
	})
	if err != nil {
		return err
	}
	if err := e.waitKueueActive(ctx); err != nil {
		e.kueue.stop(3 * time.Second)
		return err
	}
	return nil
}

// StopKueue stops Kueue's controller (SIGTERM; SIGKILL after 10 seconds); its CRDs and
// objects stay, and so does the Job controller. It fails when Kueue did not exit cleanly.
func (e *Env) StopKueue() error {
	if e.kueue == nil {
		return nil
	}
	e.kueue.stop(10 * time.Second)
	if e.kueue.exitErr != nil {
		return fmt.Errorf("kueue did not stop cleanly (%v); last lines of %s:\n%s", e.kueue.exitErr, e.kueue.logPath, e.kueue.logTail())
	}
	return nil
}

// KueueLogTail returns the last lines of Kueue's log (Dir/logs/kueue.log), for a test's
// failure message.
func (e *Env) KueueLogTail() string {
	return (&process{logPath: filepath.Join(e.Dir, "logs", "kueue.log")}).logTail()
}

// gateList writes feature gates as --feature-gates wants them, sorted by name.
func gateList(gates map[string]bool) string {
	names := slices.Sorted(maps.Keys(gates))
	list := make([]string, len(names))
	for i, name := range names {
		list[i] = name + "=" + strconv.FormatBool(gates[name])
	}
	return strings.Join(list, ",")
}

// writeKueueConfig writes Kueue's Configuration for a controller outside a cluster: no leader
// election, certificates from certDir (no internal cert management, which would wait for its
// webhook configurations), webhooks and probes on loopback, no metrics server, Jobs only;
// opts' resources and multiKueue sections where set.
func writeKueueConfig(path, certDir string, healthPort, webhookPort int, opts KueueOptions) error {
	config := map[string]any{
		"apiVersion":                 "config.kueue.x-k8s.io/v1beta2",
		"kind":                       "Configuration",
		"namespace":                  KueueNamespace,
		"manageJobsWithoutQueueName": false,
		"leaderElection":             map[string]any{"leaderElect": false},
		"internalCertManagement":     map[string]any{"enable": false},
		"webhook":                    map[string]any{"host": "127.0.0.1", "port": webhookPort, "certDir": certDir},
		"health":                     map[string]any{"healthProbeBindAddress": "127.0.0.1:" + strconv.Itoa(healthPort)},
		"metrics":                    map[string]any{"bindAddress": "0"},
		"integrations":               map[string]any{"frameworks": []string{"batch/job"}},
	}
	if opts.Resources != nil {
		config["resources"] = opts.Resources
	}
	if opts.MultiKueue != nil {
		config["multiKueue"] = opts.MultiKueue
	}
	data, err := json.MarshalIndent(config, "", "  ")
	if err != nil {
		return fmt.Errorf("write kueue's configuration: %w", err)
	}
	return os.WriteFile(path, data, 0o644)
}

// writeSelfSignedPair writes tls.crt and tls.key, a self-signed certificate for 127.0.0.1
// and localhost, into dir (made if missing).
func writeSelfSignedPair(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate a key: %w", err)
	}
	template := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("self-sign a certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
}

// kueueProbeQueue is the ClusterQueue StartKueue waits on.
const kueueProbeQueue = "testenv-kueue-probe"

// waitKueueActive creates a ClusterQueue, waits until Kueue marks it Active, then deletes it
// and waits until Kueue has released it (its finalizer), so tests start with no queue.
func (e *Env) waitKueueActive(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, e.startTimeout)
	defer cancel()
	queues, err := e.kueueClient(ClusterQueuesResource, "")
	if err != nil {
		return err
	}
	probe := KueueClusterQueue{Name: kueueProbeQueue}.Object()
	if _, err := queues.Create(ctx, probe, metav1.CreateOptions{FieldManager: "testenv"}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ClusterQueue %s: %w", kueueProbeQueue, err)
	}
	if _, err := WaitObject(ctx, e.Config, ClusterQueuesResource, "", kueueProbeQueue, func(cq *unstructured.Unstructured) bool {
		return cq != nil && KueueConditionTrue(cq, "Active")
	}); err != nil {
		return fmt.Errorf("kueue did not mark ClusterQueue %s Active: %w; last lines of %s:\n%s", kueueProbeQueue, err, e.kueue.logPath, e.kueue.logTail())
	}
	if err := queues.Delete(ctx, kueueProbeQueue, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete ClusterQueue %s: %w", kueueProbeQueue, err)
	}
	if _, err := WaitObject(ctx, e.Config, ClusterQueuesResource, "", kueueProbeQueue, func(cq *unstructured.Unstructured) bool {
		return cq == nil
	}); err != nil {
		return fmt.Errorf("kueue did not release ClusterQueue %s: %w; last lines of %s:\n%s", kueueProbeQueue, err, e.kueue.logPath, e.kueue.logTail())
	}
	return nil
}

// kueueClient is a dynamic client of one of Kueue's resources, in namespace when namespaced.
func (e *Env) kueueClient(gvr schema.GroupVersionResource, namespace string) (dynamic.ResourceInterface, error) {
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		return nil, err
	}
	if namespace != "" {
		return dyn.Resource(gvr).Namespace(namespace), nil
	}
	return dyn.Resource(gvr), nil
}

// WaitObject follows one object of a resource (namespace "" for a cluster-scoped one) until
// cond accepts it, and returns the object accepted; cond gets nil while the object does not
// exist, so cond can wait for a deletion too. It fails when ctx ends, with the last object
// seen.
func WaitObject(ctx context.Context, cfg *rest.Config, gvr schema.GroupVersionResource, namespace, name string, cond func(*unstructured.Unstructured) bool) (*unstructured.Unstructured, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	var client dynamic.ResourceInterface = dyn.Resource(gvr)
	if namespace != "" {
		client = dyn.Resource(gvr).Namespace(namespace)
	}
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			return client.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return client.Watch(ctx, opts)
		},
	}
	var last *unstructured.Unstructured
	absent := func(store cache.Store) (bool, error) {
		if len(store.List()) == 0 {
			return cond(nil), nil
		}
		return false, nil
	}
	_, err = watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, absent, func(ev watch.Event) (bool, error) {
		obj, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			return false, nil
		}
		if ev.Type == watch.Deleted {
			last = nil
			return cond(nil), nil
		}
		last = obj
		return cond(obj), nil
	})
	if err != nil {
		if last == nil {
			return nil, fmt.Errorf("%s %s: %w (last seen: absent)", gvr.Resource, name, err)
		}
		status, _ := json.Marshal(last.Object["status"])
		return nil, fmt.Errorf("%s %s: %w (last status seen: %s)", gvr.Resource, name, err, status)
	}
	return last, nil
}

// kueueCRDs reads Kueue's CRDs, which `make testbin` copies from the Kueue module.
func (e *Env) kueueCRDs() ([]*unstructured.Unstructured, error) {
	dir := filepath.Join(e.binDir, "kueue-crds")
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("kueue-crds not found in %s=%s (run `make testbin`): %w", BinDirEnv, e.binDir, err)
	}
	return ReadManifests(dir)
}

// InstallKueueCRDs server-side applies Kueue's own CRDs (no controller: see StartKueue) and
// waits until the API server serves them all.
func (e *Env) InstallKueueCRDs(ctx context.Context) error {
	crds, err := e.kueueCRDs()
	if err != nil {
		return err
	}
	if _, err := ApplyObjects(ctx, e.Config, "testenv", crds); err != nil {
		return fmt.Errorf("install Kueue's CRDs: %w", err)
	}
	apiext, err := apiextensionsclient.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	for _, c := range crds {
		if err := crd.WaitEstablished(ctx, apiext.ApiextensionsV1().CustomResourceDefinitions(), c.GetName(), e.startTimeout); err != nil {
			return err
		}
	}
	return nil
}

// UninstallKueueCRDs deletes Kueue's objects and CRDs, and returns once the API server no
// longer has them. Finalizers left on the objects (Kueue's, which a stopped Kueue no longer
// removes) are cleared, as an administrator clears them when removing Kueue.
func (e *Env) UninstallKueueCRDs(ctx context.Context) error {
	crds, err := e.kueueCRDs()
	if err != nil {
		return err
	}
	apiext, err := apiextensionsclient.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, e.startTimeout)
	defer cancel()
	// Objects first: a CRD deleted with objects left waits for them in 5-second polls.
	for _, c := range crds {
		if err := deleteObjects(ctx, dyn, c); err != nil {
			return err
		}
	}
	for _, c := range crds {
		err := apiext.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, c.GetName(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete CRD %s: %w", c.GetName(), err)
		}
	}
	crdResource := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, c := range crds {
		if _, err := WaitObject(ctx, e.Config, crdResource, "", c.GetName(), func(o *unstructured.Unstructured) bool { return o == nil }); err != nil {
			return fmt.Errorf("uninstall Kueue's CRDs: %w", err)
		}
	}
	return nil
}

// deleteObjects deletes every object of the kind that CRD c defines, and clears the
// finalizers of those deleted (none can be added once an object is being deleted).
func deleteObjects(ctx context.Context, dyn dynamic.Interface, c *unstructured.Unstructured) error {
	group, _, _ := unstructured.NestedString(c.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(c.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(c.Object, "spec", "versions")
	for _, v := range versions {
		version, _ := v.(map[string]any)
		if storage, _ := version["storage"].(bool); !storage {
			continue
		}
		name, _ := version["name"].(string)
		gvr := schema.GroupVersionResource{Group: group, Version: name, Resource: plural}
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil // not installed
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", plural, err)
		}
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		for _, obj := range list.Items {
			client := dyn.Resource(gvr).Namespace(obj.GetNamespace())
			if err := client.Delete(ctx, obj.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete %s %s: %w", plural, obj.GetName(), err)
			}
			if len(obj.GetFinalizers()) == 0 {
				continue
			}
			if _, err := client.Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("clear the finalizers of %s %s: %w", plural, obj.GetName(), err)
			}
		}
	}
	return nil
}

// KueueResourceFlavor is a ResourceFlavor whose pods go to the nodes carrying nodeLabels
// (Kueue adds them to the node selector of the pods it admits on the flavor).
func KueueResourceFlavor(name string, nodeLabels map[string]string) *unstructured.Unstructured {
	labels := map[string]any{}
	for k, v := range nodeLabels {
		labels[k] = v
	}
	spec := map[string]any{}
	if len(labels) > 0 {
		spec["nodeLabels"] = labels
	}
	return kueueObject("ResourceFlavor", "", name, spec)
}

// KueueQuota is the quota of one resource on one flavor, quantities as written in a
// ClusterQueue ("8"); an empty limit is none (unlimited borrowing, everything lendable).
type KueueQuota struct {
	Flavor, Resource string
	Nominal          string
	BorrowingLimit   string
	LendingLimit     string
}

// KueueClusterQueue describes a ClusterQueue (Object) or a Cohort (CohortObject).
type KueueClusterQueue struct {
	Name string
	// Cohort is the ClusterQueue's cohort, or a Cohort's parent; "" for none.
	Cohort string
	// Quotas are grouped into resource groups by the resources a flavor covers, in order:
	// flavors covering the same resources share a group.
	Quotas []KueueQuota
}

// Object is the ClusterQueue, open to every namespace.
func (q KueueClusterQueue) Object() *unstructured.Unstructured {
	spec := map[string]any{"namespaceSelector": map[string]any{}}
	if q.Cohort != "" {
		spec["cohortName"] = q.Cohort
	}
	if groups := resourceGroups(q.Quotas); len(groups) > 0 {
		spec["resourceGroups"] = groups
	}
	return kueueObject("ClusterQueue", "", q.Name, spec)
}

// CohortObject is a Cohort object of that name, parent (Cohort) and quotas.
func (q KueueClusterQueue) CohortObject() *unstructured.Unstructured {
	spec := map[string]any{}
	if q.Cohort != "" {
		spec["parentName"] = q.Cohort
	}
	if groups := resourceGroups(q.Quotas); len(groups) > 0 {
		spec["resourceGroups"] = groups
	}
	return kueueObject("Cohort", "", q.Name, spec)
}

// resourceGroups writes quotas as Kueue's resourceGroups.
func resourceGroups(quotas []KueueQuota) []any {
	var flavors []string
	byFlavor := map[string][]KueueQuota{}
	for _, q := range quotas {
		if _, seen := byFlavor[q.Flavor]; !seen {
			flavors = append(flavors, q.Flavor)
		}
		byFlavor[q.Flavor] = append(byFlavor[q.Flavor], q)
	}
	var groups []any
	groupOf := map[string]map[string]any{} // by covered resources
	for _, flavor := range flavors {
		var covered []string
		var resources []any
		for _, q := range byFlavor[flavor] {
			covered = append(covered, q.Resource)
			r := map[string]any{"name": q.Resource, "nominalQuota": q.Nominal}
			if q.BorrowingLimit != "" {
				r["borrowingLimit"] = q.BorrowingLimit
			}
			if q.LendingLimit != "" {
				r["lendingLimit"] = q.LendingLimit
			}
			resources = append(resources, r)
		}
		key := strings.Join(covered, ",")
		group := groupOf[key]
		if group == nil {
			coveredAny := make([]any, len(covered))
			for i, c := range covered {
				coveredAny[i] = c
			}
			group = map[string]any{"coveredResources": coveredAny, "flavors": []any{}}
			groupOf[key] = group
			groups = append(groups, group)
		}
		group["flavors"] = append(group["flavors"].([]any), map[string]any{"name": flavor, "resources": resources})
	}
	return groups
}

// KueueLocalQueue is a LocalQueue of namespace that sends its workloads to clusterQueue.
func KueueLocalQueue(namespace, name, clusterQueue string) *unstructured.Unstructured {
	return kueueObject("LocalQueue", namespace, name, map[string]any{"clusterQueue": clusterQueue})
}

func kueueObject(kind, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	obj.SetAPIVersion(KueueGroup + "/" + KueueVersion)
	obj.SetKind(kind)
	obj.SetName(name)
	obj.SetNamespace(namespace)
	return obj
}

// KueueJob is a suspended Job in LocalQueue queue, of pods pods at once (parallelism and
// completions), each of one container whose requests and limits are requests. Kueue admits it by unsuspending it.
func KueueJob(namespace, name, queue string, pods int32, requests corev1.ResourceList) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{KueueQueueNameLabel: queue}},
		Spec: batchv1.JobSpec{
			Suspend:      ptr.To(true),
			Parallelism:  ptr.To(pods),
			Completions:  ptr.To(pods),
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: requests, Limits: requests.DeepCopy()}}},
			}},
		},
	}
}

// KueueConditionTrue reports whether a Kueue object's condition of that type is True.
func KueueConditionTrue(obj *unstructured.Unstructured, conditionType string) bool {
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conditions {
		if c, ok := c.(map[string]any); ok && c["type"] == conditionType {
			return c["status"] == "True"
		}
	}
	return false
}

// KueueFlavorTotal is what a ClusterQueue's (or LocalQueue's) status field
// ("flavorsReservation" or "flavorsUsage") counts of resource on flavor: zero when absent.
func KueueFlavorTotal(obj *unstructured.Unstructured, field, flavor, res string) resource.Quantity {
	flavors, _, _ := unstructured.NestedSlice(obj.Object, "status", field)
	for _, f := range flavors {
		f, ok := f.(map[string]any)
		if !ok || f["name"] != flavor {
			continue
		}
		resources, _ := f["resources"].([]any)
		for _, r := range resources {
			if r, ok := r.(map[string]any); ok && r["name"] == res {
				total, _ := r["total"].(string)
				q, err := resource.ParseQuantity(total)
				if err == nil {
					return q
				}
			}
		}
	}
	return resource.Quantity{}
}

// KueueCount is one of a queue's workload counts in its status ("pendingWorkloads",
// "reservingWorkloads", "admittedWorkloads"); -1 when the status has none yet.
func KueueCount(obj *unstructured.Unstructured, field string) int64 {
	n, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "status", field)
	switch n := n.(type) {
	case int64: // as the API machinery decodes JSON numbers
		return n
	case float64: // as encoding/json does
		return int64(n)
	}
	return -1
}
