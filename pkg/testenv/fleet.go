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
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
)

// CreateFleet creates nodes first..first+n-1 as real clusters do: the kubelet creates each
// node with its status, then nfd-master server-side applies the feature labels. It uses
// workers concurrent requests.
func CreateFleet(ctx context.Context, kube kubernetes.Interface, first, n, workers int) error {
	return CreateDRAFleet(ctx, kube, first, n, workers, 0)
}

// CreateDRAFleet is CreateFleet where draShare of the GPU nodes (fixtures.IsFleetDRANode) run
// NVIDIA's DRA driver: such a node is created with the GPU Operator's DRA-mode labels only,
// then the driver publishes its ResourceSlice (fixtures.FleetSlice).
func CreateDRAFleet(ctx context.Context, kube kubernetes.Interface, first, n, workers int, draShare float64) error {
	indexes := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range workers {
		wg.Go(func() {
			for i := range indexes {
				if err := createFleetNode(ctx, kube, i, fixtures.IsFleetDRANode(i, draShare)); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := first; i < first+n; i++ {
		indexes <- i
	}
	close(indexes)
	wg.Wait()
	return firstErr
}

// createFleetNode creates fleet node i, a DRA node with its ResourceSlice when dra. A slice
// that already exists (the node rejoined: nothing deletes its slice here) is left as it is.
func createFleetNode(ctx context.Context, kube kubernetes.Interface, i int, dra bool) error {
	node, labels := fixtures.FleetNode(i)
	if dra {
		node, labels = fixtures.FleetDRANode(i)
	}
	created, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{FieldManager: "kubelet"})
	if err != nil {
		return fmt.Errorf("create node %s: %w", node.Name, err)
	}
	apply := applycorev1.Node(node.Name).WithLabels(labels)
	if _, err := kube.CoreV1().Nodes().Apply(ctx, apply, metav1.ApplyOptions{FieldManager: "nfd-master", Force: true}); err != nil {
		return fmt.Errorf("label node %s: %w", node.Name, err)
	}
	if !dra {
		return nil
	}
	slice := fixtures.FleetSlice(i, created.UID)
	_, err = kube.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{FieldManager: sliceManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("publish ResourceSlice %s of node %s: %w", slice.Name, node.Name, err)
	}
	return nil
}

// sliceManager is the field manager of the DRA driver's slice writes.
const sliceManager = "gpu.nvidia.com"

// SliceTaintKey is the device taint RepublishSlice sets: the driver's Xid taint.
const SliceTaintKey = "gpu.nvidia.com/xid"

// taintedDevice is the device of a fleet slice that RepublishSlice taints.
const taintedDevice = "gpu-3"

// RepublishSlice publishes DRA fleet node i's slice again, as the driver does when it
// restarts: the same devices in generation+1. With tainted, one GPU carries an Xid
// NoSchedule taint (the driver's health monitor saw a fatal Xid), without it none does.
func RepublishSlice(ctx context.Context, kube kubernetes.Interface, i int, tainted bool) error {
	name := fixtures.FleetSliceName(i)
	slices := kube.ResourceV1().ResourceSlices()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := slices.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Pool.Generation++
		for j := range s.Spec.Devices {
			d := &s.Spec.Devices[j]
			d.Taints = nil
			if tainted && d.Name == taintedDevice {
				d.Taints = []resourcev1.DeviceTaint{{Key: SliceTaintKey, Value: "79", Effect: resourcev1.DeviceTaintEffectNoSchedule, TimeAdded: ptr.To(metav1.Now().Rfc3339Copy())}}
			}
		}
		_, err = slices.Update(ctx, s, metav1.UpdateOptions{FieldManager: sliceManager})
		return err
	})
	if err != nil {
		return fmt.Errorf("republish ResourceSlice %s: %w", name, err)
	}
	return nil
}

// Ready condition reasons and messages as a kubelet writes them.
const (
	readyReason     = "KubeletReady"
	readyMessage    = "kubelet is posting ready status"
	notReadyReason  = "KubeletNotReady"
	notReadyMessage = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"
)

// heartbeatConditions are the conditions whose heartbeat a kubelet rewrites with every status
// update besides Ready (those of fixtures.FleetNode).
var heartbeatConditions = []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure}

// SetNodeReady sets the Ready condition of a node as its kubelet would: a strategic merge
// patch of the status subresource that rewrites every condition's heartbeat and Ready's
// status, reason, message and transition time.
func SetNodeReady(ctx context.Context, kube kubernetes.Interface, name string, ready bool) error {
	readyCond := nodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: notReadyReason, Message: notReadyMessage}
	if ready {
		readyCond.Status, readyCond.Reason, readyCond.Message = corev1.ConditionTrue, readyReason, readyMessage
	}
	now := metav1.Now().Rfc3339Copy()
	readyCond.LastTransitionTime = &now
	return patchConditions(ctx, kube, name, now, readyCond)
}

// nodeCondition is a condition in a strategic merge patch: fields left empty are not patched.
type nodeCondition struct {
	Type               corev1.NodeConditionType `json:"type"`
	Status             corev1.ConditionStatus   `json:"status,omitempty"`
	LastHeartbeatTime  metav1.Time              `json:"lastHeartbeatTime"`
	LastTransitionTime *metav1.Time             `json:"lastTransitionTime,omitempty"`
	Reason             string                   `json:"reason,omitempty"`
	Message            string                   `json:"message,omitempty"`
}

// patchConditions patches ready and a heartbeat of the other kubelet conditions at now into
// the node's status (conditions merge by type).
func patchConditions(ctx context.Context, kube kubernetes.Interface, name string, now metav1.Time, ready nodeCondition) error {
	ready.LastHeartbeatTime = now
	conditions := []nodeCondition{}
	for _, t := range heartbeatConditions {
		conditions = append(conditions, nodeCondition{Type: t, LastHeartbeatTime: now})
	}
	conditions = append(conditions, ready)
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": conditions}})
	if err != nil {
		return fmt.Errorf("encode status patch of node %s: %w", name, err)
	}
	if _, err := kube.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: "kubelet"}, "status"); err != nil {
		return fmt.Errorf("patch status of node %s: %w", name, err)
	}
	return nil
}

// ChurnCounts says what a churn changed.
type ChurnCounts struct {
	Changes     int // all of them
	Republishes int // DRA slices published again (generation+1)
	Taints      int // of those, the ones that added or removed a device taint
}

// ChurnDRA changes random GPU nodes among the first n fleet nodes (created with
// CreateDRAFleet(draShare)) at rate changes per second until ctx is done, and says what it
// changed. Most changes flip Ready; every tenth relabels a GFD node instead (GFD's
// timestamp), as a GFD restart does; every 25th makes a node leave the cluster and join it
// again (deleted and created anew); a change that falls on a DRA node republishes its slice
// (RepublishSlice) half of the time, and every fifth republish toggles a device taint, which
// changes the node's healthy GPUs. Changes are sent concurrently, so that the rate holds
// whatever the API server's latency; a node that is rejoining when ctx ends joins before
// ChurnDRA returns.
func ChurnDRA(ctx context.Context, kube kubernetes.Interface, n int, rate float64, draShare float64) (ChurnCounts, error) {
	return churn(ctx, kube, n, rate, churnKinds{relabels: true, rejoins: true, republishes: true}, draShare)
}

// FlipReady is ChurnDRA with Ready flips only: no relabel, no node leaving, no republish.
func FlipReady(ctx context.Context, kube kubernetes.Interface, n int, rate float64) (int, error) {
	counts, err := churn(ctx, kube, n, rate, churnKinds{}, 0)
	return counts.Changes, err
}

// FlipAndRepublish is ChurnDRA without the relabels and the rejoins: Ready flips, and on
// DRA nodes as many slice republishes. Like every churn it takes the slices to be untainted
// at its start: its first republish of a slice an earlier churn left tainted clears the taint.
func FlipAndRepublish(ctx context.Context, kube kubernetes.Interface, n int, rate float64, draShare float64) (ChurnCounts, error) {
	return churn(ctx, kube, n, rate, churnKinds{republishes: true}, draShare)
}

// churnKinds says which changes a churn makes beside the Ready flips.
type churnKinds struct{ relabels, rejoins, republishes bool }

// churn is ChurnDRA with the kinds of change of its own. It is long because the kinds of
// change are chosen and sent in one loop.
func churn(ctx context.Context, kube kubernetes.Interface, n int, rate float64, kinds churnKinds, draShare float64) (ChurnCounts, error) {
	var counts ChurnCounts
	if rate <= 0 {
		<-ctx.Done()
		return counts, nil
	}
	ticker := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer ticker.Stop()
	rng := rand.New(rand.NewPCG(7, 7))
	ready := map[int]bool{}
	tainted := map[int]bool{}
	inFlight := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-ticker.C:
			i := (1 + rng.IntN(max(1, (n+1)/2-1))) * 2 // a GPU node, never node 0 (the probes' marker)
			isDRA := fixtures.IsFleetDRANode(i, draShare)
			rejoin := kinds.rejoins && counts.Changes%25 == 24
			relabel := kinds.relabels && !rejoin && !isDRA && counts.Changes%10 == 9
			republish := kinds.republishes && !rejoin && isDRA && rng.IntN(2) == 0
			isReady, seen := ready[i]
			if !seen {
				isReady = true
			}
			taint := tainted[i]
			switch {
			case rejoin:
				delete(ready, i) // it joins Ready
			case republish:
				counts.Republishes++
				if counts.Republishes%5 == 0 {
					taint = !taint
					tainted[i] = taint
					counts.Taints++
				}
			case !relabel:
				ready[i] = !isReady
			}
			counts.Changes++
			inFlight <- struct{}{}
			wg.Go(func() {
				defer func() { <-inFlight }()
				var err error
				switch {
				case rejoin:
					err = rejoinNode(ctx, kube, i, isDRA)
				case republish:
					err = RepublishSlice(ctx, kube, i, taint)
				case relabel:
					patch := fmt.Sprintf(`{"metadata":{"labels":{"nvidia.com/gfd.timestamp":"%d"}}}`, time.Now().UnixNano())
					_, err = kube.CoreV1().Nodes().Patch(ctx, fixtures.FleetNodeName(i), types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "nfd-master"})
				default:
					err = SetNodeReady(ctx, kube, fixtures.FleetNodeName(i), !isReady)
				}
				// A change that meets a node in the middle of leaving and joining is lost, as
				// a kubelet's would be.
				if err != nil && (ctx.Err() == nil || rejoin) && !apierrors.IsNotFound(err) {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	return counts, firstErr
}

// rejoinNode deletes fleet node i and creates it anew with its labels (a DRA node's slice
// stays, as while its owner reference is not yet collected), on a context that
// the churn's end does not cancel: a request cut short could leave the node deleted, or
// without its labels. Churn waits for it.
func rejoinNode(ctx context.Context, kube kubernetes.Interface, i int, dra bool) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := kube.CoreV1().Nodes().Delete(ctx, fixtures.FleetNodeName(i), metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete node %s to rejoin it: %w", fixtures.FleetNodeName(i), err)
	}
	return createFleetNode(ctx, kube, i, dra)
}
