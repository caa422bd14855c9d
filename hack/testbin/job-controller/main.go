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

// Command job-controller runs kube-controller-manager's Job controller on its own
// (k8s.io/kubernetes/pkg/controller/job): it makes the pods of a Job that is not suspended,
// so a Job that Kueue admits (unsuspends) gets pods for the scheduler to place, and a Job
// that Kueue evicts (suspends) loses them. It is a wrapper for the reasons given in
// resourceclaim-controller's.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	schedulinginformers "k8s.io/client-go/informers/scheduling/v1beta1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/job"
	"k8s.io/kubernetes/pkg/features"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	healthAddress := flag.String("health-address", "127.0.0.1:0", "address of /healthz, served once the caches are synced")
	gates := flag.String("feature-gates", "", "feature gates, as kube-controller-manager's --feature-gates")
	workers := flag.Int("concurrent-job-syncs", 5, "Jobs synced at once")
	klog.InitFlags(nil)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, *kubeconfig, *healthAddress, *gates, *workers); err != nil {
		klog.ErrorS(err, "job-controller failed")
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, healthAddress, gates string, workers int) error {
	if gates != "" {
		if err := utilfeature.DefaultMutableFeatureGate.Set(gates); err != nil {
			return fmt.Errorf("--feature-gates: %w", err)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(rest.AddUserAgent(cfg, "job-controller"))
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	defer factory.Shutdown()
	// As kube-controller-manager: the scheduling informers only with WorkloadWithJob.
	var workloads schedulinginformers.WorkloadInformer
	var podGroups schedulinginformers.PodGroupInformer
	if utilfeature.DefaultFeatureGate.Enabled(features.WorkloadWithJob) {
		workloads, podGroups = factory.Scheduling().V1beta1().Workloads(), factory.Scheduling().V1beta1().PodGroups()
	}
	ctrl, err := job.NewController(ctx, client, factory.Core().V1().Pods(), factory.Batch().V1().Jobs(), workloads, podGroups)
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("cache of %v not synced", typ)
		}
	}
	l, err := net.Listen("tcp", healthAddress)
	if err != nil {
		return err
	}
	server := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })}
	go func() {
		if err := server.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "serve /healthz")
		}
	}()
	defer server.Close()
	ctrl.Run(ctx, workers)
	return nil
}
