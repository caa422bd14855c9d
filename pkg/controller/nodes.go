package controller

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// TrimNode is an informer transform: it keeps only what the inventory and node selectors read
// (name, labels, Ready condition, unschedulable, lifecycle taints, nvidia.com resources) so that kubelet status
// such as images, addresses, volumes and managedFields never enters the cache. Heartbeat
// times are dropped too, so a kubelet heartbeat leaves the cached node unchanged.
// Objects other than Nodes pass through untouched.
func TrimNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	trimmed := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:              node.Name,
			UID:               node.UID,
			ResourceVersion:   node.ResourceVersion,
			Labels:            node.Labels,
			CreationTimestamp: node.CreationTimestamp,
			DeletionTimestamp: node.DeletionTimestamp,
		},
		Spec: corev1.NodeSpec{Unschedulable: node.Spec.Unschedulable, Taints: lifecycleTaints(node.Spec.Taints)},
		Status: corev1.NodeStatus{
			Capacity:    nvidiaResources(node.Status.Capacity),
			Allocatable: nvidiaResources(node.Status.Allocatable),
		},
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			trimmed.Status.Conditions = []corev1.NodeCondition{{
				Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message,
				LastTransitionTime: c.LastTransitionTime,
			}}
		}
	}
	return trimmed, nil
}

// lifecycleTaints keeps the node lifecycle controller's taints (unreachable, not-ready).
func lifecycleTaints(taints []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range taints {
		if strings.HasPrefix(t.Key, "node.kubernetes.io/") {
			out = append(out, corev1.Taint{Key: t.Key, Effect: t.Effect})
		}
	}
	return out
}

func nvidiaResources(list corev1.ResourceList) corev1.ResourceList {
	var out corev1.ResourceList
	for name, q := range list {
		if strings.HasPrefix(string(name), "nvidia.com/") {
			if out == nil {
				out = corev1.ResourceList{}
			}
			out[name] = q
		}
	}
	return out
}

// NodeChanged reports whether anything the operator reads differs between two cached
// (trimmed) versions of a node, so that update events that change nothing of interest, such
// as resyncs and heartbeats, are dropped before they reach a queue.
func NodeChanged(old, cur *corev1.Node) bool {
	return old.Spec.Unschedulable != cur.Spec.Unschedulable ||
		!equality.Semantic.DeepEqual(old.Spec.Taints, cur.Spec.Taints) ||
		!equality.Semantic.DeepEqual(old.Labels, cur.Labels) ||
		!equality.Semantic.DeepEqual(old.Status.Conditions, cur.Status.Conditions) ||
		!equality.Semantic.DeepEqual(old.Status.Capacity, cur.Status.Capacity) ||
		!equality.Semantic.DeepEqual(old.Status.Allocatable, cur.Status.Allocatable)
}

// NodeFromObj returns the Node inside an informer event object, including the final state of
// a node whose deletion the informer missed.
func NodeFromObj(obj any) (*corev1.Node, bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	node, ok := obj.(*corev1.Node)
	return node, ok
}
