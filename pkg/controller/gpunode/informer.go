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

package gpunode

import (
	"context"
	"strconv"
	"time"
	"unique"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	listersv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/generated/listers/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/intern"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
)

// RecordGetter reads a GpuNode record: kubeclient.GpuNodes, or a clientset's
// HomelabV1().GpuNodes().
type RecordGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*homelabv1.GpuNode, error)
}

// RecordClient reads, applies (a server-side apply patch) and deletes records.
type RecordClient interface {
	RecordGetter
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*homelabv1.GpuNode, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// RecordListWatcher lists and watches the records.
type RecordListWatcher interface {
	List(ctx context.Context, opts metav1.ListOptions) (*homelabv1.GpuNodeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// RecordInformer is a cache of records and its lister.
type RecordInformer interface {
	Informer() cache.SharedIndexInformer
	Lister() listersv1.GpuNodeLister
}

// NewRecordInformer returns an informer for the GpuNode records client lists and watches,
// whose cache keeps of a record as this controller writes it, while its node is not missing,
// only its summary (Summarized), and of any other record all but its managedFields, with one
// copy of each string that many records repeat. Its Lister expands the summaries. Run it
// it as a source (Run).
func NewRecordInformer(client RecordListWatcher, resync time.Duration) *Records {
	informer := cache.NewSharedIndexInformerWithOptions(kubeclient.ListWatch[*homelabv1.GpuNodeList](client, nil),
		&homelabv1.GpuNode{}, cache.SharedIndexInformerOptions{ResyncPeriod: resync, Indexers: cache.Indexers{}})
	_ = informer.SetTransform(TrimRecord) // fails only once the informer has started
	return &Records{source.FromInformer("gpunodes", informer)}
}

// summarized marks, in an expanded summary only, a record of which the cache kept the summary.
const summarized = homelabv1.GroupName + "/cache-summarized"

// TrimRecord is the record informer's transform. A record as this controller writes it (the
// hash annotation alone, naming its spec's hash; its node as its only owner) whose node is
// not missing becomes its summary: what the controllers read of it while the node's sources
// still say the rest (a recordSummary). Any other record (the memory of a node whose sources
// vanished, one that someone edited) is kept without managedFields, with the strings that
// many records repeat (type, owner's kind, model, versions, device types and names, profiles,
// conditions) sharing one copy (sharedStrings). Anything else passes untouched.
func TrimRecord(obj any) (any, error) {
	r, ok := obj.(*homelabv1.GpuNode)
	if !ok {
		return obj, nil
	}
	if summary := summaryOf(r); summary != nil {
		return summary, nil
	}
	r.ManagedFields = nil
	share(&r.APIVersion, &r.Kind)
	if hash, ok := r.Annotations[homelabv1.IdentityHashAnnotation]; ok && len(r.Annotations) == 1 {
		r.Annotations = map[string]string{homelabv1.IdentityHashAnnotation: hash} // the constant key
	}
	for i := range r.OwnerReferences {
		share(&r.OwnerReferences[i].APIVersion, &r.OwnerReferences[i].Kind)
	}
	spec := &r.Spec
	share(&spec.Product, &spec.Family, &spec.ComputeCapability, &spec.DriverVersion, &spec.CudaVersion,
		&spec.WorkloadConfig, &spec.Clique, &spec.Source)
	if spec.Sharing != nil {
		share(&spec.Sharing.Strategy)
	}
	if m := spec.MIG; m != nil {
		share(&m.Strategy, &m.Config, &m.ConfigState)
		for i := range m.Devices {
			share(&m.Devices[i].Profile)
		}
	}
	for i := range spec.Devices {
		d := &spec.Devices[i]
		share(&d.Name, &d.Type, &d.Profile)
		shareAll(d.Taints)
	}
	shareAll(spec.Conditions)
	shareAll(spec.Warnings)
	return obj, nil
}

// Summarized reports whether a record the Lister returned is the expansion of a summary: it
// held, when cached, exactly the identity its hash annotation names, and its spec holds only
// what the summary keeps. A reader that needs the rest gets the record from the API server.
func Summarized(r *homelabv1.GpuNode) bool {
	_, ok := r.Annotations[summarized]
	return ok
}

// recordSummary is what the cache keeps of a record as this controller writes it whose node
// is not missing: its identity (metadata.name, uid, resourceVersion), its hash, its owner's
// UID, and what inventory.ComputeWithRecords and the controller read of a node whose
// sources just vanished. The rest (devices, versions, conditions) its node's sources say.
// The UIDs, the resourceVersion and the hash are kept packed (odd keeps them as they came
// where they are spelled otherwise), the model once for all records of it.
type recordSummary struct {
	name            string
	uid, ownerUID   [16]byte
	resourceVersion uint64
	hash            [12]byte
	gpuCount        int32
	model           unique.Handle[recordModel]
	gpuMemoryMiB    int64
	odd             *oddIDs
}

// recordModel is what a summary keeps of a record's GPU model.
type recordModel struct{ product, family, computeCapability, source string }

// oddIDs are a summary's IDs as they came, where they are not spelled as the API server
// spells them.
type oddIDs struct{ uid, ownerUID, resourceVersion string }

// uidLayout is how the API server spells UIDs; inventory.IdentityHash spells hashes as
// hashLayout.
const (
	uidLayout  = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
	hashLayout = "xxxxxxxxxxxxxxxxxxxxxxxx"
)

// summaryOf returns the summary of a record as this controller writes it whose node is not
// missing, or nil.
func summaryOf(r *homelabv1.GpuNode) *recordSummary {
	hash, ok := r.Annotations[homelabv1.IdentityHashAnnotation]
	if !ok || len(r.Annotations) != 1 || len(r.Labels) != 0 || len(r.Finalizers) != 0 || r.DeletionTimestamp != nil ||
		len(r.OwnerReferences) != 1 || r.Spec.MissingSince != nil {
		return nil
	}
	owner := r.OwnerReferences[0]
	if owner != (metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: r.Name, UID: owner.UID}) ||
		inventory.IdentityHash(r.Spec) != hash {
		return nil
	}
	spec := &r.Spec
	s := &recordSummary{name: r.Name, gpuCount: spec.GpuCount, gpuMemoryMiB: spec.GpuMemoryMiB,
		model: unique.Make(recordModel{spec.Product, spec.Family, spec.ComputeCapability, spec.Source})}
	intern.PackHex(hashLayout, hash, s.hash[:]) // IdentityHash's own spelling
	rv, err := strconv.ParseUint(r.ResourceVersion, 10, 64)
	if !intern.PackHex(uidLayout, string(r.UID), s.uid[:]) || !intern.PackHex(uidLayout, string(owner.UID), s.ownerUID[:]) ||
		err != nil || strconv.FormatUint(rv, 10) != r.ResourceVersion {
		s.odd = &oddIDs{uid: string(r.UID), ownerUID: string(owner.UID), resourceVersion: r.ResourceVersion}
	}
	s.resourceVersion = rv
	return s
}

// ids are the summary's UIDs and resourceVersion, spelled as they came.
func (s *recordSummary) ids() (uid, ownerUID types.UID, resourceVersion string) {
	if s.odd != nil {
		return types.UID(s.odd.uid), types.UID(s.odd.ownerUID), s.odd.resourceVersion
	}
	return types.UID(intern.UnpackHex(uidLayout, s.uid[:])), types.UID(intern.UnpackHex(uidLayout, s.ownerUID[:])),
		strconv.FormatUint(s.resourceVersion, 10)
}

// expand returns the record a summary stands for, holding what the summary keeps and marked
// Summarized.
func (s *recordSummary) expand() *homelabv1.GpuNode {
	uid, ownerUID, rv := s.ids()
	m := s.model.Value()
	return &homelabv1.GpuNode{
		TypeMeta: metav1.TypeMeta{APIVersion: homelabv1.SchemeGroupVersion.String(), Kind: "GpuNode"},
		ObjectMeta: metav1.ObjectMeta{Name: s.name, UID: uid, ResourceVersion: rv,
			Annotations:     map[string]string{homelabv1.IdentityHashAnnotation: intern.UnpackHex(hashLayout, s.hash[:]), summarized: ""},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: s.name, UID: ownerUID}}},
		Spec: homelabv1.GpuNodeSpec{Product: m.product, GpuCount: s.gpuCount, GpuMemoryMiB: s.gpuMemoryMiB,
			Family: m.family, ComputeCapability: m.computeCapability, Source: m.source},
	}
}

// GetObjectKind implements runtime.Object; the cache's summaries have no kind.
func (s *recordSummary) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (s *recordSummary) DeepCopyObject() runtime.Object {
	out := *s
	return &out
}

// GetObjectMeta implements metav1.ObjectMetaAccessor, through which the informer's store
// reads the name and resourceVersion.
func (s *recordSummary) GetObjectMeta() metav1.Object {
	uid, _, rv := s.ids()
	return &metav1.ObjectMeta{Name: s.name, UID: uid, ResourceVersion: rv}
}

// recordOf returns the record a cached object stands for: the record itself, or the
// expansion of its summary; nil for anything else.
func recordOf(obj any) *homelabv1.GpuNode {
	switch o := obj.(type) {
	case *homelabv1.GpuNode:
		return o
	case *recordSummary:
		return o.expand()
	}
	return nil
}

// sharedStrings holds one copy of each short string records repeat.
var sharedStrings intern.Strings

func share(strs ...*string) {
	for _, s := range strs {
		*s = sharedStrings.Intern(*s)
	}
}

func shareAll(strs []string) {
	for i := range strs {
		strs[i] = sharedStrings.Intern(strs[i])
	}
}

// Records is the records' cache as a source: its changes are the names of the nodes whose
// record changed.
type Records struct{ *source.InformerSource }

// Record is the spec of a node's record; nil when it has none.
func (r *Records) Record(name string) *homelabv1.GpuNodeSpec {
	if rec, err := r.Lister().Get(name); err == nil {
		return &rec.Spec
	}
	return nil
}

// Lister lists the cached records, their summaries expanded.
func (r *Records) Lister() listersv1.GpuNodeLister {
	return recordLister{r.Informer().GetIndexer()}
}

// recordLister is the generated lister for a cache of records and summaries: it returns
// summaries expanded.
type recordLister struct{ indexer cache.Indexer }

func (l recordLister) List(selector labels.Selector) ([]*homelabv1.GpuNode, error) {
	var out []*homelabv1.GpuNode
	for _, obj := range l.indexer.List() {
		if r := recordOf(obj); r != nil && selector.Matches(labels.Set(r.Labels)) {
			out = append(out, r)
		}
	}
	return out, nil
}

func (l recordLister) Get(name string) (*homelabv1.GpuNode, error) {
	obj, exists, err := l.indexer.GetByKey(name)
	if err != nil {
		return nil, err
	}
	r := recordOf(obj)
	if !exists || r == nil {
		return nil, apierrors.NewNotFound(homelabv1.Resource("gpunodes"), name)
	}
	return r, nil
}
