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

package podcache

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// PageSize is how many pods StreamPods asks for at a time: the reader holds one
// item at a time whatever the page size, while each page costs a round trip and the
// API server's start of a list, so small pages make a large list several times slower.
const PageSize = 5000

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
