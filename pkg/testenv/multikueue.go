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
	"fmt"
	"slices"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/member"
)

// MultiKueue's kinds on a manager (cluster-scoped).
var (
	AdmissionChecksResource    = schema.GroupVersionResource{Group: KueueGroup, Version: KueueVersion, Resource: "admissionchecks"}
	MultiKueueConfigsResource  = schema.GroupVersionResource{Group: KueueGroup, Version: KueueVersion, Resource: "multikueueconfigs"}
	MultiKueueClustersResource = schema.GroupVersionResource{Group: KueueGroup, Version: KueueVersion, Resource: "multikueueclusters"}
)

// MultiKueue's names the bed uses.
const (
	// MultiKueueControllerName is the controllerName of MultiKueue's AdmissionChecks, and
	// the managedBy of the manager's Jobs.
	MultiKueueControllerName = "kueue.x-k8s.io/multikueue"
	// MultiKueueCheck names the bed's AdmissionCheck and MultiKueueConfig.
	MultiKueueCheck = "multikueue"
)

// VerifiedKubeconfig is a kubeconfig of the admin user that verifies the API server's
// serving certificate (MultiKueue refuses insecure-skip-tls-verify).
func (e *Env) VerifiedKubeconfig() ([]byte, error) {
	ca, err := e.ServingCA()
	if err != nil {
		return nil, err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["testenv"] = &clientcmdapi.Cluster{Server: e.Config.Host, CertificateAuthorityData: ca}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: e.Config.BearerToken}
	kc.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: "admin"}
	kc.CurrentContext = "testenv"
	return clientcmd.Write(*kc)
}

// MultiKueueOptions configure StartMultiKueue.
type MultiKueueOptions struct {
	// Workers names the worker clusters (their MultiKueueClusters); each is a control plane
	// of its own.
	Workers []string
	// DispatcherName is the manager's multiKueue.dispatcherName.
	DispatcherName string
	// Namespace is where Jobs run, on every cluster; Queue names the LocalQueue there and
	// the ClusterQueue it feeds, on every cluster (MultiKueue's layout).
	Namespace, Queue string
	// WorkerFlavors are created on every worker; WorkerQuotas are each worker's ClusterQueue.
	WorkerFlavors []*unstructured.Unstructured
	WorkerQuotas  []KueueQuota
	// ManagerQuotas are the manager's ClusterQueue, on its flavor "default" (Flavor unused).
	ManagerQuotas []KueueQuota
	// SecretReader, when set, is the command line of a credential plugin with the protocol
	// of cluster-inventory-api's plugins/secretreader that takes --kubeconfig and --namespace
	// (`gpu-fleet-hub secretreader`). The manager then serves ClusterProfiles: their CRD,
	// Kueue's MultiKueueClusterProfile gate and the provider "secretreader" in its
	// Configuration, run as the manager's admin user on Kueue's namespace. Every worker gets a
	// ClusterProfile in Kueue's namespace (CreateClusterProfile) and the token Secret
	// MultiKueue reads for it there (the worker's admin token).
	SecretReader []string
	// ThroughProfiles are the workers whose MultiKueueCluster names their ClusterProfile
	// (clusterSource.clusterProfileRef; needs SecretReader); the others' name a kubeconfig
	// Secret.
	ThroughProfiles []string
}

// MultiKueue is a manager and its workers: MultiKueue on the manager sends Workloads to the
// workers, where kube-scheduler places their pods on kwok nodes.
type MultiKueue struct {
	Manager *Env
	Workers map[string]*Env
	opts    MultiKueueOptions
}

// StartMultiKueue starts the workers (each StartSchedulingWithKueue) and the manager
// (Kueue with MultiKueue and opts.DispatcherName, no scheduler), and connects them: a
// MultiKueueCluster per worker, through a kubeconfig Secret or a ClusterProfile
// (opts.SecretReader, opts.ThroughProfiles), a MultiKueueConfig and an
// AdmissionCheck both named MultiKueueCheck, the queues on every cluster. It returns once
// the AdmissionCheck and every MultiKueueCluster are Active. Stop stops it all.
func StartMultiKueue(ctx context.Context, opts MultiKueueOptions) (m *MultiKueue, err error) {
	m = &MultiKueue{Workers: map[string]*Env{}, opts: opts}
	defer func() {
		if err != nil {
			m.Stop()
		}
	}()
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(opts.Workers)+1)
	for i, name := range opts.Workers {
		wg.Go(func() {
			env, err := Start(ctx, Options{})
			if env != nil {
				mu.Lock()
				m.Workers[name] = env
				mu.Unlock()
			}
			if err == nil {
				err = env.StartSchedulingWithKueue(ctx, KueueOptions{})
			}
			errs[i] = err
		})
	}
	wg.Go(func() {
		env, err := Start(ctx, Options{})
		if err == nil && opts.SecretReader != nil {
			err = env.InstallClusterProfileCRDs(ctx) // before Kueue, which reads them only if served at its start
		}
		if err == nil {
			err = env.StartKueue(ctx, m.managerKueue(env))
		}
		m.Manager, errs[len(opts.Workers)] = env, err
	})
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return m, fmt.Errorf("start %s: %w", m.clusterName(i), err)
		}
	}
	for _, name := range opts.Workers {
		if err := m.setUpWorker(ctx, m.Workers[name]); err != nil {
			return m, fmt.Errorf("worker %s: %w", name, err)
		}
	}
	if err := m.setUpManager(ctx); err != nil {
		return m, fmt.Errorf("manager: %w", err)
	}
	return m, nil
}

func (m *MultiKueue) clusterName(i int) string {
	if i < len(m.opts.Workers) {
		return "worker " + m.opts.Workers[i]
	}
	return "the manager"
}

// managerKueue is the manager's Kueue: MultiKueue with the dispatcher, and with
// SecretReader the ClusterProfiles' credentials through it.
func (m *MultiKueue) managerKueue(manager *Env) KueueOptions {
	multiKueue := map[string]any{"dispatcherName": m.opts.DispatcherName}
	if m.opts.SecretReader == nil {
		return KueueOptions{MultiKueue: multiKueue}
	}
	args := append(slices.Clone(m.opts.SecretReader[1:]), "--kubeconfig="+manager.KubeconfigPath(), "--namespace="+KueueNamespace)
	multiKueue["clusterProfile"] = map[string]any{"credentialsProviders": []any{map[string]any{"name": member.SecretReaderProvider,
		"execConfig": map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "command": m.opts.SecretReader[0], "args": args,
			"provideClusterInfo": true, "interactiveMode": "Never"}}}}
	return KueueOptions{MultiKueue: multiKueue, FeatureGates: map[string]bool{"MultiKueueClusterProfile": true}}
}

// setUpWorker makes the namespace, flavors and queues on a worker.
func (m *MultiKueue) setUpWorker(ctx context.Context, w *Env) error {
	if err := ensureNamespaces(ctx, w, m.opts.Namespace); err != nil {
		return err
	}
	objs := append([]*unstructured.Unstructured{}, m.opts.WorkerFlavors...)
	objs = append(objs, KueueClusterQueue{Name: m.opts.Queue, Quotas: m.opts.WorkerQuotas}.Object(),
		KueueLocalQueue(m.opts.Namespace, m.opts.Queue, m.opts.Queue))
	if _, err := ApplyObjects(ctx, w.Config, "testenv", objs); err != nil {
		return err
	}
	return waitActive(ctx, w, ClusterQueuesResource, m.opts.Queue)
}

// setUpManager connects the manager to the workers and makes its queues.
func (m *MultiKueue) setUpManager(ctx context.Context) error {
	if err := ensureNamespaces(ctx, m.Manager, KueueNamespace, m.opts.Namespace); err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(m.Manager.Config)
	if err != nil {
		return err
	}
	var objs []*unstructured.Unstructured
	for _, name := range m.opts.Workers {
		source, err := m.connect(ctx, kube, name)
		if err != nil {
			return fmt.Errorf("connect worker %s: %w", name, err)
		}
		objs = append(objs, kueueObject("MultiKueueCluster", "", name, map[string]any{"clusterSource": source}))
	}
	objs = append(objs, m.managerQueues()...)
	if _, err := ApplyObjects(ctx, m.Manager.Config, "testenv", objs); err != nil {
		return err
	}
	for _, name := range m.opts.Workers {
		if err := waitActive(ctx, m.Manager, MultiKueueClustersResource, name); err != nil {
			return err
		}
	}
	if err := waitActive(ctx, m.Manager, AdmissionChecksResource, MultiKueueCheck); err != nil {
		return err
	}
	return waitActive(ctx, m.Manager, ClusterQueuesResource, m.opts.Queue)
}

// connect makes what the manager reaches worker name with (its ClusterProfile and token
// Secret with SecretReader, else or beside them a kubeconfig Secret), and returns the
// clusterSource of its MultiKueueCluster.
func (m *MultiKueue) connect(ctx context.Context, kube kubernetes.Interface, name string) (map[string]any, error) {
	w := m.Workers[name]
	if m.opts.SecretReader != nil {
		ca, err := w.ServingCA()
		if err != nil {
			return nil, err
		}
		if err := createSecret(ctx, kube, name, "token", []byte(w.Config.BearerToken)); err != nil {
			return nil, err
		}
		if err := CreateClusterProfile(ctx, m.Manager.Config, KueueNamespace, name, nil, w.Config.Host, ca); err != nil {
			return nil, err
		}
		if slices.Contains(m.opts.ThroughProfiles, name) {
			return map[string]any{"clusterProfileRef": map[string]any{"name": name}}, nil
		}
	}
	kubeconfig, err := w.VerifiedKubeconfig()
	if err != nil {
		return nil, err
	}
	if err := createSecret(ctx, kube, name+"-kubeconfig", "kubeconfig", kubeconfig); err != nil {
		return nil, err
	}
	return map[string]any{"kubeConfig": map[string]any{"locationType": "Secret", "location": name + "-kubeconfig"}}, nil
}

// createSecret creates the Secret name of Kueue's namespace holding value under key.
func createSecret(ctx context.Context, kube kubernetes.Interface, name, key string, value []byte) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: KueueNamespace, Name: name}, Data: map[string][]byte{key: value}}
	if _, err := kube.CoreV1().Secrets(KueueNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create Secret %s/%s: %w", KueueNamespace, name, err)
	}
	return nil
}

// managerQueues are the MultiKueueConfig, the AdmissionCheck, the flavor and the queues of
// the manager.
func (m *MultiKueue) managerQueues() []*unstructured.Unstructured {
	clusters := make([]any, len(m.opts.Workers))
	for i, name := range m.opts.Workers {
		clusters[i] = name
	}
	quotas := make([]KueueQuota, len(m.opts.ManagerQuotas))
	for i, q := range m.opts.ManagerQuotas {
		q.Flavor = "default"
		quotas[i] = q
	}
	cq := KueueClusterQueue{Name: m.opts.Queue, Quotas: quotas}.Object()
	cq.Object["spec"].(map[string]any)["admissionChecksStrategy"] = map[string]any{
		"admissionChecks": []any{map[string]any{"name": MultiKueueCheck}}}
	return []*unstructured.Unstructured{
		kueueObject("MultiKueueConfig", "", MultiKueueCheck, map[string]any{"clusters": clusters}),
		kueueObject("AdmissionCheck", "", MultiKueueCheck, map[string]any{"controllerName": MultiKueueControllerName,
			"parameters": map[string]any{"apiGroup": KueueGroup, "kind": "MultiKueueConfig", "name": MultiKueueCheck}}),
		KueueResourceFlavor("default", nil),
		cq,
		KueueLocalQueue(m.opts.Namespace, m.opts.Queue, m.opts.Queue),
	}
}

func ensureNamespaces(ctx context.Context, e *Env, names ...string) error {
	kube, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	for _, name := range names {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	return nil
}

// waitActive waits until Kueue marks a cluster-scoped object Active.
func waitActive(ctx context.Context, e *Env, gvr schema.GroupVersionResource, name string) error {
	ctx, cancel := context.WithTimeout(ctx, e.startTimeout)
	defer cancel()
	if _, err := WaitObject(ctx, e.Config, gvr, "", name, func(o *unstructured.Unstructured) bool {
		return o != nil && KueueConditionTrue(o, "Active")
	}); err != nil {
		return fmt.Errorf("not Active: %w; last lines of Kueue's log:\n%s", err, e.KueueLogTail())
	}
	return nil
}

// Stop stops every cluster.
func (m *MultiKueue) Stop() {
	if m.Manager != nil {
		m.Manager.Stop()
	}
	for _, w := range m.Workers {
		w.Stop()
	}
}

// MultiKueueJob is KueueJob for a manager: managed by MultiKueue, which runs it on a worker
// and copies its status back; it never runs on the manager.
func MultiKueueJob(namespace, name, queue string, pods int32, requests corev1.ResourceList) *batchv1.Job {
	job := KueueJob(namespace, name, queue, pods, requests)
	job.Spec.ManagedBy = ptr.To(MultiKueueControllerName)
	return job
}
