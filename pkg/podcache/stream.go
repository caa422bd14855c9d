package podcache

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// PageSize is how many pods StreamPods asks for at a time.
const PageSize = 500

// MaxPodBytes bounds one Pod's message in a stream: far above any Pod etcd stores, far below
// what a claimed size from a broken or hostile server could make the reader allocate.
const MaxPodBytes = 16 << 20

// podList reads pod lists one Pod at a time.
var podList = kubeproto.List{Resource: "pods", MaxItemBytes: MaxPodBytes}

// StreamPods lists the pods of namespace ("" for all) through client (the core group's REST
// client), PageSize at a time, and calls fn with what allocation keeps of each GPU pod
// (DecodePod), finished ones included. Each page is read as a protobuf stream holding one
// Pod's bytes at a time; pods without GPU resources cost their bytes' reading only. An
// error from fn stops the listing and is returned.
func StreamPods(ctx context.Context, client rest.Interface, namespace string, fn func(*allocation.Pod) error) error {
	return podList.Stream(ctx, client, namespace, metav1.ListOptions{Limit: PageSize}, kubeproto.Decoded("pod", DecodePod, fn))
}
