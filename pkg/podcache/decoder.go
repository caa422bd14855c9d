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
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// NewDecodingSerializer wraps a client's serializer so that every Pod it decodes (watch
// events, list items) comes out as an *Object and every PodList as an *ObjectList holding
// the GPU pods only: protobuf Pods are decoded by DecodePod, which reads nothing more of a
// pod that names no GPU resource; Pods and PodLists in JSON are decoded by the wrapped
// serializer and then reduced with allocation.FromPod. Other objects (a watch's error
// Status) pass through.
func NewDecodingSerializer(ns runtime.NegotiatedSerializer) runtime.NegotiatedSerializer {
	return decodingSerializer{ns}
}

type decodingSerializer struct {
	runtime.NegotiatedSerializer
}

func (s decodingSerializer) DecoderToVersion(d runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	return podDecoder{next: s.NegotiatedSerializer.DecoderToVersion(d, gv)}
}

type podDecoder struct {
	next runtime.Decoder
}

var (
	podGVK     = corev1.SchemeGroupVersion.WithKind("Pod")
	podListGVK = corev1.SchemeGroupVersion.WithKind("PodList")
)

func (d podDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	switch into.(type) {
	case nil, *Object, *ObjectList:
	default:
		return d.next.Decode(data, defaults, into)
	}
	if apiVersion, kind, raw, err := kubeproto.Envelope(data); err == nil && string(apiVersion) == "v1" {
		switch string(kind) {
		case "Pod":
			obj, err := decodeObject(raw)
			if err != nil {
				return nil, nil, fmt.Errorf("decode Pod: %w", err)
			}
			return deliver(into, obj, podGVK)
		case "PodList":
			list, err := decodeList(raw)
			if err != nil {
				return nil, nil, fmt.Errorf("decode PodList: %w", err)
			}
			return deliver(into, list, podListGVK)
		}
	}
	obj, gvk, err := d.next.Decode(data, defaults, nil)
	if err != nil {
		return obj, gvk, err
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		return deliver(into, objectOf(o), podGVK)
	case *corev1.PodList:
		list := &ObjectList{ListMeta: o.ListMeta}
		for i := range o.Items {
			if obj := objectOf(&o.Items[i]); obj.Pod != nil {
				list.Items = append(list.Items, obj)
			}
		}
		return deliver(into, list, podListGVK)
	}
	if into != nil {
		return nil, nil, fmt.Errorf("cannot decode %T into %T", obj, into)
	}
	return obj, gvk, nil
}

// deliver stores obj in into when it is given (of obj's type) and returns it.
func deliver(into, obj runtime.Object, gvk schema.GroupVersionKind) (runtime.Object, *schema.GroupVersionKind, error) {
	switch dst := into.(type) {
	case nil:
		return obj, &gvk, nil
	case *Object:
		src, ok := obj.(*Object)
		if !ok {
			return nil, nil, fmt.Errorf("cannot decode %s into %T", gvk.Kind, into)
		}
		*dst = *src
	case *ObjectList:
		src, ok := obj.(*ObjectList)
		if !ok {
			return nil, nil, fmt.Errorf("cannot decode %s into %T", gvk.Kind, into)
		}
		*dst = *src
	}
	return into, &gvk, nil
}

// objectOf is the Object of a Pod decoded in full.
func objectOf(pod *corev1.Pod) *Object {
	if p := allocation.FromPod(pod); p != nil {
		internPod(p)
		return &Object{Pod: p, resourceVersion: pod.ResourceVersion}
	}
	return &Object{resourceVersion: pod.ResourceVersion, initialEventsEnd: pod.Annotations[metav1.InitialEventsAnnotationKey]}
}

// decodeObject decodes a protobuf Pod into its Object. A pod whose metadata can be read but
// not its GPU resources becomes an Object with Err, so that one such pod does not stop the
// list or the watch; one whose metadata cannot be read is an error.
func decodeObject(raw []byte) (*Object, error) {
	pod, resourceVersion, err := decodePod(raw)
	if err == nil && pod != nil {
		return &Object{Pod: pod, resourceVersion: resourceVersion}, nil
	}
	meta, metaErr := readMeta(raw, err != nil)
	if metaErr != nil {
		return nil, errors.Join(err, metaErr)
	}
	return &Object{resourceVersion: meta.resourceVersion, initialEventsEnd: meta.initialEventsEnd,
		namespace: meta.namespace, name: meta.name, err: err}, nil
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
