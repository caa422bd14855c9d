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

// Command podinformer holds what an ordinary controller holds of every Pod: a client-go
// SharedIndexInformer over all namespaces (a namespace index, an event handler) whose
// transform drops managedFields and the last-applied annotation. Once synced and quiet, it
// prints its resident size as JSON. hack/scale runs it as a process of its own beside the
// operator, so that each size is only its own.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/youngju-dev/gpu-inventory-operator/hack/scale/proc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

type result struct {
	Pods        int     `json:"pods"`
	SyncSeconds float64 `json:"syncSeconds"`
	// RSSKiB and HeapKiB are read after the quiet period, as the operator's steady figure is.
	RSSKiB  int64 `json:"rssKiB"`
	HeapKiB int64 `json:"heapKiB"`
	// ...AfterGCKiB after a forced collection that returns freed memory to the system: the
	// least this cache can take.
	RSSAfterGCKiB  int64 `json:"rssAfterGCKiB"`
	HeapAfterGCKiB int64 `json:"heapAfterGCKiB"`
	PeakKiB        int64 `json:"peakKiB"`
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "Kubeconfig of the cluster.")
	quiet := flag.Duration("quiet", 10*time.Second, "Wait after sync before reading the resident size.")
	protobuf := flag.Bool("protobuf", true, "Read Pods in protobuf (as kube-controller-manager does); false: JSON, client-go's default.")
	flag.Parse()
	if err := run(*kubeconfig, *quiet, *protobuf); err != nil {
		fmt.Fprintf(os.Stderr, "podinformer: %v\n", err)
		os.Exit(1)
	}
}

func run(kubeconfig string, quiet time.Duration, protobuf bool) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	if protobuf {
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(stripForCache))
	pods := factory.Core().V1().Pods().Informer()
	var events atomic.Int64
	count := func(any) { events.Add(1) }
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: count, UpdateFunc: func(_, obj any) { count(obj) }, DeleteFunc: count}); err != nil {
		return err
	}
	start := time.Now()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced) {
		return fmt.Errorf("pod informer did not sync")
	}
	res := result{SyncSeconds: time.Since(start).Seconds()}
	time.Sleep(quiet) // a quiet cluster: nothing to wait for
	res.Pods = len(pods.GetStore().ListKeys())
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	self := proc.Self()
	res.RSSKiB, res.HeapKiB = int64(self.RSS()), int64(ms.HeapInuse/1024)
	runtime.GC()
	debug.FreeOSMemory()
	runtime.ReadMemStats(&ms)
	res.RSSAfterGCKiB, res.HeapAfterGCKiB, res.PeakKiB = int64(self.RSS()), int64(ms.HeapInuse/1024), int64(self.Peak())
	runtime.KeepAlive(pods)
	return json.NewEncoder(os.Stdout).Encode(res)
}

// stripForCache is the transform of a controller that does not need managedFields or the
// last-applied annotation.
func stripForCache(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		pod.ManagedFields = nil
		delete(pod.Annotations, corev1.LastAppliedConfigAnnotation)
		return pod, nil
	}
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
