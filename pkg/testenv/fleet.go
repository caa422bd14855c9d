package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
)

// CreateFleet creates nodes first..first+n-1 as real clusters do: the kubelet creates each
// node with its status, then nfd-master server-side applies the feature labels. It uses
// workers concurrent requests.
func CreateFleet(ctx context.Context, kube kubernetes.Interface, first, n, workers int) error {
	indexes := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range workers {
		wg.Go(func() {
			for i := range indexes {
				if err := createFleetNode(ctx, kube, i); err != nil {
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

func createFleetNode(ctx context.Context, kube kubernetes.Interface, i int) error {
	node, labels := fixtures.FleetNode(i)
	if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{FieldManager: "kubelet"}); err != nil {
		return fmt.Errorf("create node %s: %w", node.Name, err)
	}
	apply := applycorev1.Node(node.Name).WithLabels(labels)
	if _, err := kube.CoreV1().Nodes().Apply(ctx, apply, metav1.ApplyOptions{FieldManager: "nfd-master", Force: true}); err != nil {
		return fmt.Errorf("label node %s: %w", node.Name, err)
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

// Churn flips the Ready condition of random GPU nodes among the first n fleet nodes at rate
// changes per second until ctx is done, and returns how many changes it made. Most changes
// flip Ready; every tenth relabels a node instead (GFD's timestamp), as a GFD restart does;
// every 25th makes a node leave the cluster and join it again (deleted and created anew).
// Changes are sent concurrently, so that the rate holds whatever the API server's latency;
// a node that is rejoining when ctx ends joins before Churn returns.
func Churn(ctx context.Context, kube kubernetes.Interface, n int, rate float64) (int, error) {
	return churn(ctx, kube, n, rate, true)
}

// FlipReady is Churn with Ready flips only: no relabel, no node leaving.
func FlipReady(ctx context.Context, kube kubernetes.Interface, n int, rate float64) (int, error) {
	return churn(ctx, kube, n, rate, false)
}

// churn is Churn; mixed adds the relabels and the rejoins to the Ready flips. It is long
// because the three kinds of change are chosen and sent in one loop.
func churn(ctx context.Context, kube kubernetes.Interface, n int, rate float64, mixed bool) (int, error) {
	if rate <= 0 {
		<-ctx.Done()
		return 0, nil
	}
	ticker := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer ticker.Stop()
	rng := rand.New(rand.NewPCG(7, 7))
	ready := map[int]bool{}
	inFlight := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	changes := 0
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-ticker.C:
			i := (1 + rng.IntN(max(1, (n+1)/2-1))) * 2 // a GPU node, never node 0 (the probes' marker)
			relabel := mixed && changes%10 == 9
			rejoin := mixed && changes%25 == 24
			isReady, seen := ready[i]
			if !seen {
				isReady = true
			}
			switch {
			case rejoin:
				delete(ready, i) // it joins Ready
			case !relabel:
				ready[i] = !isReady
			}
			changes++
			inFlight <- struct{}{}
			wg.Go(func() {
				defer func() { <-inFlight }()
				var err error
				if rejoin {
					err = rejoinNode(ctx, kube, i)
				} else if relabel {
					patch := fmt.Sprintf(`{"metadata":{"labels":{"nvidia.com/gfd.timestamp":"%d"}}}`, time.Now().UnixNano())
					_, err = kube.CoreV1().Nodes().Patch(ctx, fixtures.FleetNodeName(i), types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "nfd-master"})
				} else {
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
	return changes, firstErr
}

// rejoinNode deletes fleet node i and creates it anew with its labels, on a context that
// the churn's end does not cancel: a request cut short could leave the node deleted, or
// without its labels. Churn waits for it.
func rejoinNode(ctx context.Context, kube kubernetes.Interface, i int) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := kube.CoreV1().Nodes().Delete(ctx, fixtures.FleetNodeName(i), metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete node %s to rejoin it: %w", fixtures.FleetNodeName(i), err)
	}
	return createFleetNode(ctx, kube, i)
}
