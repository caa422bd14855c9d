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
	"errors"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// StartNodeLifecycle runs, until Stop, the part of kube-controller-manager's node lifecycle
// controller that scheduling needs: once a kwok node (annotation kwok.x-k8s.io/node=fake) is
// Ready, it lifts the node.kubernetes.io/not-ready NoSchedule taint that the API server's
// admission puts on every new node. Other nodes, and kwok nodes that are not Ready, keep it,
// as NotReady nodes do in a real cluster. It returns once it has seen every node.
func (e *Env) StartNodeLifecycle(ctx context.Context) error {
	if e.stopNodes != nil {
		return nil
	}
	kube, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(kube, 0)
	nodes := factory.Core().V1().Nodes()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	enqueue := func(obj any) {
		if node, ok := obj.(*corev1.Node); ok && notReadyTaintToLift(node) >= 0 {
			queue.Add(node.Name)
		}
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx)) // runs until Stop, not until ctx ends
	var wg sync.WaitGroup
	stop := func() {
		cancel()
		queue.ShutDown()
		factory.Shutdown()
		wg.Wait()
	}
	factory.Start(runCtx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced) {
		stop()
		return errors.New("node lifecycle: the node informer did not sync")
	}
	wg.Go(func() {
		for liftNotReadyTaint(runCtx, kube, nodes.Lister(), queue) {
		}
	})
	e.stopNodes = stop
	return nil
}

// liftNotReadyTaint removes the not-ready taint of the next queued node if it still has one
// to lift; a failed update (a conflict with kwok's heartbeat) is retried with backoff. It
// returns false once the queue is shut down.
func liftNotReadyTaint(ctx context.Context, kube kubernetes.Interface, lister listerscorev1.NodeLister, queue workqueue.TypedRateLimitingInterface[string]) bool {
	name, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(name)
	node, err := lister.Get(name)
	if err != nil { // deleted meanwhile
		queue.Forget(name)
		return true
	}
	i := notReadyTaintToLift(node)
	if i < 0 {
		queue.Forget(name)
		return true
	}
	node = node.DeepCopy()
	node.Spec.Taints = slices.Delete(node.Spec.Taints, i, i+1)
	_, err = kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{FieldManager: "node-lifecycle-controller"})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		queue.AddRateLimited(name)
		return true
	}
	queue.Forget(name)
	return true
}

// notReadyTaintToLift returns the index of the not-ready NoSchedule taint of a Ready kwok
// node, or -1 when there is none to lift.
func notReadyTaintToLift(node *corev1.Node) int {
	if node.Annotations[KwokAnnotation] != "fake" {
		return -1
	}
	ready := slices.ContainsFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
	})
	if !ready {
		return -1
	}
	return slices.IndexFunc(node.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == corev1.TaintNodeNotReady && t.Effect == corev1.TaintEffectNoSchedule
	})
}
