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

// Package kubeclient is how the operator and kubectl-gpuinv reach the API: REST clients over
// a scheme of the few kinds they read and write, and client-go's generic typed client
// (gentype) on them. The typed clientsets (k8s.io/client-go/kubernetes and the generated
// ones) are not used by either binary: through their discovery client they link every
// built-in API group into it (docs/design/clients.md). The methods of these clients are the
// typed clientsets' own, so a package takes a small interface that both satisfy, and its
// tests can pass a fake clientset's typed client.
package kubeclient

import (
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

var (
	// Scheme knows the kinds the binaries' clients and caches decode, and no other.
	Scheme = newScheme()
	// Codecs are the serializers of Scheme's kinds.
	Codecs = serializer.NewCodecFactory(Scheme)
	// ParameterCodec turns list, get and write options into query parameters.
	ParameterCodec = runtime.NewParameterCodec(Scheme)
)

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	add := func(gv schema.GroupVersion, types ...runtime.Object) {
		s.AddKnownTypes(gv, types...)
		metav1.AddToGroupVersion(s, gv)
	}
	add(corev1.SchemeGroupVersion, &corev1.Node{}, &corev1.NodeList{}, &corev1.ConfigMap{}, &corev1.ConfigMapList{},
		&corev1.Event{}, &corev1.EventList{}, &corev1.Pod{}, &corev1.PodList{}, &corev1.ResourceQuota{}, &corev1.ResourceQuotaList{},
		&corev1.Namespace{}, &corev1.NamespaceList{}, &corev1.Secret{}, &corev1.SecretList{})
	add(resourcev1.SchemeGroupVersion, &resourcev1.ResourceSlice{}, &resourcev1.ResourceSliceList{},
		&resourcev1.ResourceClaim{}, &resourcev1.ResourceClaimList{}, &resourcev1.ResourceClaimTemplate{}, &resourcev1.ResourceClaimTemplateList{},
		&resourcev1.DeviceClass{}, &resourcev1.DeviceClassList{})
	add(schedulingv1.SchemeGroupVersion, &schedulingv1.PriorityClass{}, &schedulingv1.PriorityClassList{})
	add(coordinationv1.SchemeGroupVersion, &coordinationv1.Lease{}, &coordinationv1.LeaseList{})
	add(apiextensionsv1.SchemeGroupVersion, &apiextensionsv1.CustomResourceDefinition{}, &apiextensionsv1.CustomResourceDefinitionList{})
	utilruntime.Must(homelabv1.AddToScheme(s))
	return s
}

// New is a REST client for group version gv on a copy of config, serializing through ns
// (nil: Scheme's codecs), with config's User-Agent or else client-go's default, as the
// generated clients set it.
func New(config *rest.Config, gv schema.GroupVersion, ns runtime.NegotiatedSerializer) (*rest.RESTClient, error) {
	cfg := rest.CopyConfig(config)
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	if ns == nil {
		ns = rest.CodecFactoryForGeneratedClient(Scheme, Codecs).WithoutConversion()
	}
	cfg.NegotiatedSerializer = ns
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	client, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("create %s client: %w", gv, err)
	}
	return client, nil
}

// ConfigMaps are the ConfigMaps of namespace, on a core/v1 client.
func ConfigMaps(c rest.Interface, namespace string) *gentype.ClientWithList[*corev1.ConfigMap, *corev1.ConfigMapList] {
	return gentype.NewClientWithList("configmaps", c, ParameterCodec, namespace,
		func() *corev1.ConfigMap { return &corev1.ConfigMap{} }, func() *corev1.ConfigMapList { return &corev1.ConfigMapList{} },
		gentype.PrefersProtobuf[*corev1.ConfigMap]())
}

// Events are the Events of namespace ("": every namespace), on a core/v1 client.
func Events(c rest.Interface, namespace string) *gentype.ClientWithList[*corev1.Event, *corev1.EventList] {
	return gentype.NewClientWithList("events", c, ParameterCodec, namespace,
		func() *corev1.Event { return &corev1.Event{} }, func() *corev1.EventList { return &corev1.EventList{} },
		gentype.PrefersProtobuf[*corev1.Event]())
}

// Secrets are the Secrets of namespace, on a core/v1 client: the fleet hub gets its members'
// credentials by name.
func Secrets(c rest.Interface, namespace string) *gentype.ClientWithList[*corev1.Secret, *corev1.SecretList] {
	return gentype.NewClientWithList("secrets", c, ParameterCodec, namespace,
		func() *corev1.Secret { return &corev1.Secret{} }, func() *corev1.SecretList { return &corev1.SecretList{} },
		gentype.PrefersProtobuf[*corev1.Secret]())
}

// Nodes are the Nodes, on a core/v1 client.
func Nodes(c rest.Interface) *gentype.ClientWithList[*corev1.Node, *corev1.NodeList] {
	return gentype.NewClientWithList("nodes", c, ParameterCodec, "",
		func() *corev1.Node { return &corev1.Node{} }, func() *corev1.NodeList { return &corev1.NodeList{} },
		gentype.PrefersProtobuf[*corev1.Node]())
}

// Pods are the pods of namespace ("": every namespace), on a core/v1 client.
func Pods(c rest.Interface, namespace string) *gentype.ClientWithList[*corev1.Pod, *corev1.PodList] {
	return gentype.NewClientWithList("pods", c, ParameterCodec, namespace,
		func() *corev1.Pod { return &corev1.Pod{} }, func() *corev1.PodList { return &corev1.PodList{} },
		gentype.PrefersProtobuf[*corev1.Pod]())
}

// Namespaces are the Namespaces, on a core/v1 client.
func Namespaces(c rest.Interface) *gentype.ClientWithList[*corev1.Namespace, *corev1.NamespaceList] {
	return gentype.NewClientWithList("namespaces", c, ParameterCodec, "",
		func() *corev1.Namespace { return &corev1.Namespace{} }, func() *corev1.NamespaceList { return &corev1.NamespaceList{} },
		gentype.PrefersProtobuf[*corev1.Namespace]())
}

// ResourceSlices are the ResourceSlices, on a resource.k8s.io/v1 client.
func ResourceSlices(c rest.Interface) *gentype.ClientWithList[*resourcev1.ResourceSlice, *resourcev1.ResourceSliceList] {
	return gentype.NewClientWithList("resourceslices", c, ParameterCodec, "",
		func() *resourcev1.ResourceSlice { return &resourcev1.ResourceSlice{} },
		func() *resourcev1.ResourceSliceList { return &resourcev1.ResourceSliceList{} },
		gentype.PrefersProtobuf[*resourcev1.ResourceSlice]())
}

// ResourceClaims are the ResourceClaims of namespace ("": every namespace), on a
// resource.k8s.io/v1 client.
func ResourceClaims(c rest.Interface, namespace string) *gentype.ClientWithList[*resourcev1.ResourceClaim, *resourcev1.ResourceClaimList] {
	return gentype.NewClientWithList("resourceclaims", c, ParameterCodec, namespace,
		func() *resourcev1.ResourceClaim { return &resourcev1.ResourceClaim{} },
		func() *resourcev1.ResourceClaimList { return &resourcev1.ResourceClaimList{} },
		gentype.PrefersProtobuf[*resourcev1.ResourceClaim]())
}

// ResourceClaimTemplates are the ResourceClaimTemplates of namespace, on a
// resource.k8s.io/v1 client.
func ResourceClaimTemplates(c rest.Interface, namespace string) *gentype.ClientWithList[*resourcev1.ResourceClaimTemplate, *resourcev1.ResourceClaimTemplateList] {
	return gentype.NewClientWithList("resourceclaimtemplates", c, ParameterCodec, namespace,
		func() *resourcev1.ResourceClaimTemplate { return &resourcev1.ResourceClaimTemplate{} },
		func() *resourcev1.ResourceClaimTemplateList { return &resourcev1.ResourceClaimTemplateList{} },
		gentype.PrefersProtobuf[*resourcev1.ResourceClaimTemplate]())
}

// DeviceClasses are the DeviceClasses, on a resource.k8s.io/v1 client.
func DeviceClasses(c rest.Interface) *gentype.ClientWithList[*resourcev1.DeviceClass, *resourcev1.DeviceClassList] {
	return gentype.NewClientWithList("deviceclasses", c, ParameterCodec, "",
		func() *resourcev1.DeviceClass { return &resourcev1.DeviceClass{} },
		func() *resourcev1.DeviceClassList { return &resourcev1.DeviceClassList{} },
		gentype.PrefersProtobuf[*resourcev1.DeviceClass]())
}

// PriorityClasses are the PriorityClasses, on a scheduling.k8s.io/v1 client.
func PriorityClasses(c rest.Interface) *gentype.ClientWithList[*schedulingv1.PriorityClass, *schedulingv1.PriorityClassList] {
	return gentype.NewClientWithList("priorityclasses", c, ParameterCodec, "",
		func() *schedulingv1.PriorityClass { return &schedulingv1.PriorityClass{} },
		func() *schedulingv1.PriorityClassList { return &schedulingv1.PriorityClassList{} },
		gentype.PrefersProtobuf[*schedulingv1.PriorityClass]())
}

// Leases are the Leases of namespace, on a coordination.k8s.io/v1 client.
func Leases(c rest.Interface, namespace string) *gentype.ClientWithList[*coordinationv1.Lease, *coordinationv1.LeaseList] {
	return gentype.NewClientWithList("leases", c, ParameterCodec, namespace,
		func() *coordinationv1.Lease { return &coordinationv1.Lease{} }, func() *coordinationv1.LeaseList { return &coordinationv1.LeaseList{} },
		gentype.PrefersProtobuf[*coordinationv1.Lease]())
}

// CRDs are the CustomResourceDefinitions, on an apiextensions.k8s.io/v1 client.
func CRDs(c rest.Interface) *gentype.ClientWithList[*apiextensionsv1.CustomResourceDefinition, *apiextensionsv1.CustomResourceDefinitionList] {
	return gentype.NewClientWithList("customresourcedefinitions", c, ParameterCodec, "",
		func() *apiextensionsv1.CustomResourceDefinition { return &apiextensionsv1.CustomResourceDefinition{} },
		func() *apiextensionsv1.CustomResourceDefinitionList {
			return &apiextensionsv1.CustomResourceDefinitionList{}
		})
}

// GpuNodes are the GpuNode records, on a homelab.youngju.dev/v1 client.
func GpuNodes(c rest.Interface) *gentype.ClientWithList[*homelabv1.GpuNode, *homelabv1.GpuNodeList] {
	return gentype.NewClientWithList("gpunodes", c, ParameterCodec, "",
		func() *homelabv1.GpuNode { return &homelabv1.GpuNode{} }, func() *homelabv1.GpuNodeList { return &homelabv1.GpuNodeList{} })
}

// GpuInventories are the GpuInventories, on a homelab.youngju.dev/v1 client.
func GpuInventories(c rest.Interface) *gentype.ClientWithList[*homelabv1.GpuInventory, *homelabv1.GpuInventoryList] {
	return gentype.NewClientWithList("gpuinventories", c, ParameterCodec, "",
		func() *homelabv1.GpuInventory { return &homelabv1.GpuInventory{} }, func() *homelabv1.GpuInventoryList { return &homelabv1.GpuInventoryList{} })
}

// GpuFleets are the GpuFleets, on a homelab.youngju.dev/v1 client.
func GpuFleets(c rest.Interface) *gentype.ClientWithList[*homelabv1.GpuFleet, *homelabv1.GpuFleetList] {
	return gentype.NewClientWithList("gpufleets", c, ParameterCodec, "",
		func() *homelabv1.GpuFleet { return &homelabv1.GpuFleet{} }, func() *homelabv1.GpuFleetList { return &homelabv1.GpuFleetList{} })
}
