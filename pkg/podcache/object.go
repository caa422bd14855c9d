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
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// Object is what the pod client decodes a Pod into: for a GPU pod, what allocation keeps of
// it; for any other pod, only what the reflector reads (its resourceVersion, and the
// initial-events-end marker of the watch-list bookmark); for a pod whose GPU resources could
// not be read, also its name and why. A GPU pod's namespace and name are its Pod's strings,
// shared; a pod that is no GPU pod has none.
type Object struct {
	kubeproto.Compact

	// Pod is nil for a pod that requests no GPU resource, or that could not be read.
	Pod *allocation.Pod

	// err is why the pod could not be read: the store counts and forgets it.
	err error
}

// DeepCopyObject implements runtime.Object.
func (o *Object) DeepCopyObject() runtime.Object {
	out := *o
	if o.Pod != nil {
		pod := *o.Pod
		pod.Requests = slices.Clone(pod.Requests)
		out.Pod = &pod
	}
	return &out
}

// ObjectList is what the pod client decodes a PodList into: the GPU pods only, and the
// list's metadata (resourceVersion, continue token).
type ObjectList struct {
	metav1.ListMeta
	Items []*Object
}

// GetObjectKind implements runtime.Object; ObjectLists have no kind.
func (l *ObjectList) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (l *ObjectList) DeepCopyObject() runtime.Object {
	out := &ObjectList{Items: make([]*Object, len(l.Items))}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	for i, o := range l.Items {
		out.Items[i] = o.DeepCopyObject().(*Object)
	}
	return out
}
