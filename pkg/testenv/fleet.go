package testenv

import (
	"context"
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

// SetNodeReady sets the Ready condition of a node as its kubelet would (status subresource).
func SetNodeReady(ctx context.Context, kube kubernetes.Interface, name string, ready bool) error {
	status := corev1.ConditionFalse
	reason := "KubeletNotReady"
	if ready {
		status, reason = corev1.ConditionTrue, "KubeletReady"
	}
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":%q,"reason":%q,"lastHeartbeatTime":%q}]}}`,
		status, reason, time.Now().UTC().Format(time.RFC3339))
	_, err := kube.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kubelet"}, "status")
	return err
}

// Churn flips the Ready condition of random GPU nodes among the first n fleet nodes at rate
// changes per second until ctx is done, and returns how many changes it made. Most changes
// flip Ready; every tenth relabels a node instead (GFD's timestamp), as a GFD restart does;
// every 25th makes a node leave the cluster and join it again (deleted and created anew).
// Changes are sent concurrently, so that the rate holds whatever the API server's latency.
func Churn(ctx context.Context, kube kubernetes.Interface, n int, rate float64) (int, error) {
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
			relabel := changes%10 == 9
			rejoin := changes%25 == 24
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
					err = kube.CoreV1().Nodes().Delete(ctx, fixtures.FleetNodeName(i), metav1.DeleteOptions{})
					if err == nil {
						err = createFleetNode(ctx, kube, i)
					}
				} else if relabel {
					patch := fmt.Sprintf(`{"metadata":{"labels":{"nvidia.com/gfd.timestamp":"%d"}}}`, time.Now().UnixNano())
					_, err = kube.CoreV1().Nodes().Patch(ctx, fixtures.FleetNodeName(i), types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "nfd-master"})
				} else {
					err = SetNodeReady(ctx, kube, fixtures.FleetNodeName(i), !isReady)
				}
				// A change that meets a node in the middle of leaving and joining is lost, as
				// a kubelet's would be.
				if err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) {
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
