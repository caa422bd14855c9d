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
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// podCodec is the pod client's decoder: every Pod it decodes (watch events, list items) comes
// out as an *Object and every PodList as an *ObjectList holding the GPU pods (and the pods it
// could not read) only. Protobuf Pods are decoded by DecodePod, which reads nothing more of
// a pod that names no GPU resource; Pods and PodLists in JSON are decoded in full and then
// reduced with allocation.FromPod.
var podCodec = kubeproto.Codec[Object, ObjectList]{
	GroupVersion: corev1.SchemeGroupVersion, Kind: "Pod", ListKind: "PodList",
	Object: decodeObject,
	List:   decodeList,
	Reduce: reduce,
}

// reduce is the Object of a Pod, or the ObjectList of a PodList, decoded in full; anything
// else (a watch's error Status) is returned as it is.
func reduce(obj runtime.Object) runtime.Object {
	switch o := obj.(type) {
	case *corev1.Pod:
		return objectOf(o)
	case *corev1.PodList:
		list := &ObjectList{ListMeta: o.ListMeta}
		for i := range o.Items {
			if obj := objectOf(&o.Items[i]); obj.Pod != nil {
				list.Items = append(list.Items, obj)
			}
		}
		return list
	}
	return obj
}

// objectOf is the Object of a Pod decoded in full.
func objectOf(pod *corev1.Pod) *Object {
	if p := allocation.FromPod(pod); p != nil {
		internPod(p)
		return gpuObject(p, pod.ResourceVersion)
	}
	return &Object{Compact: kubeproto.Compact{ResourceVersion: pod.ResourceVersion,
		InitialEventsEnd: pod.Annotations[metav1.InitialEventsAnnotationKey]}}
}

// gpuObject is the Object of a GPU pod: its metadata shares the Pod's strings.
func gpuObject(p *allocation.Pod, resourceVersion string) *Object {
	return &Object{Compact: kubeproto.Compact{Namespace: p.Namespace, Name: p.Name, ResourceVersion: resourceVersion}, Pod: p}
}

// decodeObject decodes a protobuf Pod into its Object. A pod whose metadata can be read but
// not its GPU resources becomes an Object with err, so that one such pod does not stop the
// list or the watch; one whose metadata cannot be read is an error. Of a pod that is no GPU
// pod, only what the reflector reads is copied.
func decodeObject(raw []byte) (*Object, error) {
	pod, resourceVersion, err := decodePod(raw)
	if err == nil && pod != nil {
		return gpuObject(pod, resourceVersion), nil
	}
	var meta kubeproto.ObjectMeta
	if metaErr := readMeta(raw, &meta); metaErr != nil {
		return nil, errors.Join(err, metaErr)
	}
	obj := &Object{Compact: kubeproto.Compact{ResourceVersion: string(meta.ResourceVersion),
		InitialEventsEnd: string(meta.InitialEventsEnd)}, err: err}
	if err != nil {
		obj.Namespace, obj.Name = interned.intern(kubeproto.View(meta.Namespace)), string(meta.Name)
	}
	return obj, nil
}

// decodeList decodes a protobuf PodList into an ObjectList of its GPU pods and of the pods it
// could not read.
func decodeList(raw []byte) (*ObjectList, error) {
	list := &ObjectList{}
	count := 0
	err := kubeproto.DecodeList(raw, &list.ListMeta, func(item []byte) error {
		count++
		return list.add(item, count)
	})
	return list, err
}

// add decodes the Pod of the list's nth item and keeps it if it is a GPU pod or could not be read.
func (l *ObjectList) add(raw []byte, n int) error {
	obj, err := listItem(raw, n)
	if obj != nil {
		l.Items = append(l.Items, obj)
	}
	return err
}

// listItem decodes the Pod of a list's nth item: nil unless it is a GPU pod or could not be
// read.
func listItem(raw []byte, n int) (*Object, error) {
	obj, err := decodeObject(raw)
	if err != nil {
		return nil, fmt.Errorf("pod %d of the list: %w", n, err)
	}
	if obj.Pod == nil && obj.err == nil {
		return nil, nil
	}
	return obj, nil
}
