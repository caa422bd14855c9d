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

package memberwatch

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
)

// The hub's sources of members, by name.
const (
	ClusterProfilesName     = "clusterprofiles"
	MultiKueueClustersName  = "multikueueclusters"
	multiKueueClustersGroup = "kueue.x-k8s.io"
)

// MultiKueueClusterGVR is the MultiKueueClusters the hub reads (Kueue v0.17's stored version).
var MultiKueueClusterGVR = schema.GroupVersionResource{Group: multiKueueClustersGroup, Version: "v1beta2", Resource: "multikueueclusters"}

// profileScheme knows ClusterProfiles, and nothing else: the hub's binary alone decodes them.
var profileScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	s.AddKnownTypes(v1alpha1.GroupVersion, &v1alpha1.ClusterProfile{}, &v1alpha1.ClusterProfileList{})
	metav1.AddToGroupVersion(s, v1alpha1.GroupVersion)
	return s
}()

// ClusterProfilesServed reports whether the hub's API server serves ClusterProfiles.
func ClusterProfilesServed(ctx context.Context, c rest.Interface) (bool, error) {
	return kubeclient.Serves(ctx, c, v1alpha1.GroupVersion, "clusterprofiles")
}

// MultiKueueClustersServed reports whether the hub's API server serves MultiKueueClusters.
func MultiKueueClustersServed(ctx context.Context, c rest.Interface) (bool, error) {
	return kubeclient.Serves(ctx, c, MultiKueueClusterGVR.GroupVersion(), MultiKueueClusterGVR.Resource)
}

// Profiles is the hub's cache of ClusterProfiles (every namespace), a source named
// ClusterProfilesName.
type Profiles struct {
	*source.InformerSource
}

// NewProfiles makes the ClusterProfile cache on config (the hub's).
func NewProfiles(config *rest.Config) (*Profiles, error) {
	codecs := serializer.NewCodecFactory(profileScheme)
	rc, err := kubeclient.New(config, v1alpha1.GroupVersion, rest.CodecFactoryForGeneratedClient(profileScheme, codecs).WithoutConversion())
	if err != nil {
		return nil, err
	}
	return NewProfilesFrom(gentype.NewClientWithList("clusterprofiles", rc, runtime.NewParameterCodec(profileScheme), "",
		func() *v1alpha1.ClusterProfile { return &v1alpha1.ClusterProfile{} },
		func() *v1alpha1.ClusterProfileList { return &v1alpha1.ClusterProfileList{} })), nil
}

// NewProfilesFrom makes the ClusterProfile cache on client (a fake clientset's in tests).
func NewProfilesFrom(client kubeclient.ListWatcher[*v1alpha1.ClusterProfileList]) *Profiles {
	informer := cache.NewSharedIndexInformer(kubeclient.ListWatch(client, nil), &v1alpha1.ClusterProfile{}, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = informer.SetTransform(dropManagedFields)
	return &Profiles{source.FromInformer(ClusterProfilesName, informer)}
}

// Get is the cached ClusterProfile namespace/name, or a NotFound error.
func (p *Profiles) Get(_ context.Context, namespace, name string) (*v1alpha1.ClusterProfile, error) {
	obj, ok, err := p.Informer().GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("clusterprofiles").GroupResource(), name)
	}
	return obj.(*v1alpha1.ClusterProfile), nil
}

// List is the cached ClusterProfiles of namespace ("": all) that selector selects.
func (p *Profiles) List(namespace string, selector labels.Selector) []*v1alpha1.ClusterProfile {
	var out []*v1alpha1.ClusterProfile
	add := func(obj any) {
		if cp, ok := obj.(*v1alpha1.ClusterProfile); ok && selector.Matches(labels.Set(cp.Labels)) {
			out = append(out, cp)
		}
	}
	if namespace == "" {
		for _, obj := range p.Informer().GetStore().List() {
			add(obj)
		}
		return out
	}
	objs, _ := p.Informer().GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	for _, obj := range objs {
		add(obj)
	}
	return out
}

// MultiKueueClusters is the hub's cache of MultiKueueClusters, a source named
// MultiKueueClustersName: each holds only what names its worker (metadata and spec).
type MultiKueueClusters struct {
	*source.InformerSource
}

// NewMultiKueueClusters makes the MultiKueueCluster cache on config (the hub's).
func NewMultiKueueClusters(config *rest.Config) (*MultiKueueClusters, error) {
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("create the MultiKueueCluster client: %w", err)
	}
	return NewMultiKueueClustersFrom(dyn.Resource(MultiKueueClusterGVR)), nil
}

// NewMultiKueueClustersFrom makes the MultiKueueCluster cache on client (a fake dynamic
// client's in tests).
func NewMultiKueueClustersFrom(client dynamic.ResourceInterface) *MultiKueueClusters {
	informer := cache.NewSharedIndexInformer(kubeclient.ListWatch(client, nil), &unstructured.Unstructured{}, 0, cache.Indexers{})
	_ = informer.SetTransform(func(obj any) (any, error) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			u.SetManagedFields(nil)
			delete(u.Object, "status")
		}
		return obj, nil
	})
	return &MultiKueueClusters{source.FromInformer(MultiKueueClustersName, informer)}
}

// List is every cached MultiKueueCluster.
func (m *MultiKueueClusters) List() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, obj := range m.Informer().GetStore().List() {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			out = append(out, u)
		}
	}
	return out
}

func dropManagedFields(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
	}
	return obj, nil
}
