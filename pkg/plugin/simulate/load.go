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

// Package simulate is the scheduler simulation that `kubectl gpuinv why` and `fit` share,
// a room of its own under the plugin: the verbs own their flags, their reads of the pod or
// the file and their output; this package reads the cluster as far as a question needs
// (Load), explains the verdicts of kube-scheduler's filters (View: FitAll, Diagnose), places
// a workload's replicas (Place) and runs the scheduler's preemption. pkg/capacity decides
// every verdict; pkg/printer's types hold the answers.
//
// It reads the objects through the caches' decoders, never a decoder of its own: Nodes by
// the node cache's (nodecache.NewTrimmer, with the keep-rules the question's placing
// gives), Pods by the pod cache's scheduling keep-rule (podcache.DecodeSchedulingPod), where
// a ResourceSlice is by the slice cache's header reader (slicecache.DecodeSliceHeader), the
// slices it keeps whole by the generated decoder. docs/design/why-fit.md says why it reads
// what it reads.
package simulate

import (
	"context"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/podcache"
)

// unfinishedPods is the field selector of the scheduler's pod informer: finished pods hold
// nothing.
const unfinishedPods = "status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)

var unfinished = fields.ParseSelectorOrDie(unfinishedPods)

// nodeChunk is the page size of the node list, read as a stream.
const nodeChunk = 1000

// podLists is how many lists of one node's pods run at once.
const podLists = 16

// MaxNodeLists is the most candidates whose pods are listed node by node; past it one list
// of every pod is read. A variable, so that tests run either way.
var MaxNodeLists = 1000

var (
	sliceRequest = factory.Request{Verb: "list", Resource: "resourceslices", Group: resourcev1.GroupName}
	classRequest = factory.Request{Verb: "list", Resource: "deviceclasses", Group: resourcev1.GroupName}
)

// Question is what why or fit asks of the cluster, for Load to read only what the
// answer needs.
type Question struct {
	// Pods are the pods to place: why's pending pod; one replica of each of fit's objects
	// (the other replicas are the same pod to the filters).
	Pods []*corev1.Pod
	// FreeDevices: the answer reads the free DRA devices of the nodes that fit (fit's best
	// fit).
	FreeDevices bool
	// Claims: the question brings claims of its own (fit's file), which may exist already.
	Claims bool
	// CompressionSet: --disable-compression was given, and the Nodes and pods are read
	// compressed or not as it and the kubeconfig say; else uncompressed (readConfig).
	CompressionSet bool
	// Preemption: the answer runs the scheduler's preemption for the pods, which reads the
	// candidates' pods of lower priority (kept, not only counted).
	Preemption bool
	// Labels are node labels the answer reads besides the pods' selectors (a gang's
	// topology keys).
	Labels []string
	// Stubs: the nodes where the node-only filters reject every pod are kept in the cluster
	// as stubs (a gang's placements count them), not as Rejections.
	Stubs bool
	// EveryNode: every node is kept whole, with its Ready condition (Kueue counts the
	// capacity of nodes the scheduler's filters reject).
	EveryNode bool
	// Within: only the nodes that carry every one of these labels are read into the
	// cluster (a gang's domains are made of them); the others are left out, pods and all.
	Within []string
}

// Loader reads the cluster for a question: Load, or in unit tests the whole cluster.
type Loader = func(context.Context, *factory.Factory, Question) (Loaded, error)

// Loaded is what Load read for a question: the cluster the filters run on, and the
// nodes where the node-only filters reject every pod of the question, in name order.
type Loaded struct {
	Cluster  capacity.Cluster
	Rejected []Rejection
}

// Load reads what kube-scheduler decides on for the question's pods, and no more.
// Every Node is read, but only as far as the filters that read the node alone (node name,
// unschedulable, taints, node affinity) need: where they reject every pod, their reasons are
// the answer there whatever runs on the node. The other nodes, the candidates, are kept for
// the filters (placing), and only their unfinished pods are read, as soon as each
// candidate is found (the pods no answer names only counted, capacity.Usage). DRA's
// DeviceClasses are read when resource.k8s.io/v1 is served; its ResourceSlices (the
// candidates' whole, the others' as stubs) when the pods ask for devices or the answer counts
// free ones; its ResourceClaims when the pods ask for devices, the question brings claims,
// or the answer reads them: a candidate's pods hold some, or its devices are counted.
func Load(ctx context.Context, c *factory.Factory, q Question) (Loaded, error) {
	var l Loaded
	api, err := c.Typed()
	r := &podReader{c: c}
	if q.Preemption {
		r.below = ptr.To(maxPriority(q.Pods))
	}
	if err == nil && c.Streams() {
		if r.cfg, err = c.ReadConfig(q.CompressionSet); err == nil {
			r.small, err = smallListsClient(r.cfg) // made before the lists that share it start
		}
	}
	if err != nil {
		return l, err
	}
	var served bool
	if l.Cluster.Classes, served, err = readClasses(ctx, c, api); err != nil {
		return l, err
	}
	dra := served && q.asksForDevices(l.Cluster.Classes)
	claimsFirst := dra || (served && q.Claims)
	afterNodes := func(candidates map[string]bool) (err error) {
		if served && (dra || q.FreeDevices) {
			l.Cluster.Slices, err = readSlices(ctx, c, candidates)
		}
		return err
	}
	err = parallel(func() error {
		return readNodesAndPods(ctx, r, newPlacing(q, dra), q.Stubs, &l, afterNodes)
	}, func() (err error) {
		if claimsFirst {
			l.Cluster.Claims, err = readClaims(ctx, c, api)
		}
		return err
	})
	if err != nil || claimsFirst || !served {
		return l, err
	}
	// Claims the answer reads after all: those the candidates' pods hold, and the
	// allocations of the candidates' devices.
	if holdClaims(l.Cluster.Pods) || (q.FreeDevices && hasDevices(l.Cluster.Slices)) {
		l.Cluster.Claims, err = readClaims(ctx, c, api)
	}
	return l, err
}

// readNodesAndPods reads the Nodes as p trims them into l, and the pods of each candidate as
// soon as it is read: one list per node, podLists at a time (the API server's watch cache
// finds a node's pods by an index), or, past MaxNodeLists candidates, one list of every pod.
// afterNodes runs once the nodes are read, beside the pod lists.
func readNodesAndPods(ctx context.Context, r *podReader, p *placing, stubs bool, l *Loaded, afterNodes func(map[string]bool) error) error {
	c := r.c
	listsCtx, stopLists := context.WithCancel(ctx)
	defer stopLists()
	found := make(chan string, MaxNodeLists)
	candidates := map[string]bool{}
	readNodes := func() error {
		defer close(found)
		err := listNodes(ctx, c, r.cfg, p, func(n *corev1.Node) {
			if !p.within(n) {
				return
			}
			kept, rejected := p.trim(n)
			switch {
			case rejected != nil && stubs:
				l.Cluster.Nodes = append(l.Cluster.Nodes, p.stub.TrimNode(n))
				return
			case rejected != nil:
				l.Rejected = append(l.Rejected, *rejected)
				return
			}
			l.Cluster.Nodes = append(l.Cluster.Nodes, kept)
			if candidates[kept.Name] = true; len(candidates) <= MaxNodeLists {
				found <- kept.Name
			} else {
				stopLists() // too many to list one by one
			}
		})
		if err != nil {
			return c.ExplainList(err, factory.ListNodes)
		}
		return afterNodes(candidates)
	}
	lists := []func() error{readNodes}
	for range podLists {
		lists = append(lists, func() error {
			for name := range found {
				if err := r.node(listsCtx, name); err != nil && listsCtx.Err() == nil {
					return err
				}
			}
			return nil
		})
	}
	if err := parallel(lists...); err != nil {
		return err
	}
	if len(candidates) > MaxNodeLists {
		if err := r.all(ctx, candidates); err != nil {
			return err
		}
	}
	slices.SortFunc(l.Rejected, func(a, b Rejection) int { return strings.Compare(a.Node, b.Node) })
	l.Cluster.Pods, l.Cluster.Usage = r.pods, r.usage
	return nil
}

// asksForDevices reports a pod of the question with claims, or asking for an extended
// resource that a DeviceClass maps to DRA devices (on a node without it, the scheduler asks
// the allocator).
func (q Question) asksForDevices(classes []*resourcev1.DeviceClass) bool {
	for _, p := range q.Pods {
		if len(p.Spec.ResourceClaims) > 0 {
			return true
		}
		for name, quantity := range capacity.Requests(p) {
			if !quantity.IsZero() && slices.ContainsFunc(classes, func(c *resourcev1.DeviceClass) bool { return mapsResource(c, name) }) {
				return true
			}
		}
	}
	return false
}

// mapsResource reports a class that serves the extended resource: by its
// extendedResourceName, or by its implicit name deviceclass.resource.kubernetes.io/<class>.
func mapsResource(c *resourcev1.DeviceClass, name corev1.ResourceName) bool {
	n := string(name)
	return n == implicitResourcePrefix+c.Name || (c.Spec.ExtendedResourceName != nil && *c.Spec.ExtendedResourceName == n)
}

const implicitResourcePrefix = "deviceclass.resource.kubernetes.io/"

// holdClaims reports a pod whose claims (its own, from templates, or for extended
// resources) may hold devices.
func holdClaims(pods []*corev1.Pod) bool {
	return slices.ContainsFunc(pods, func(p *corev1.Pod) bool { return len(claimNames(p)) > 0 })
}

// hasDevices reports a slice with devices (a stub has none).
func hasDevices(slices []*resourcev1.ResourceSlice) bool {
	for _, s := range slices {
		if len(s.Spec.Devices) > 0 {
			return true
		}
	}
	return false
}

// readClasses lists the DeviceClasses; served is false where resource.k8s.io/v1 is not.
func readClasses(ctx context.Context, c *factory.Factory, api factory.KubeAPI) (classes []*resourcev1.DeviceClass, served bool, err error) {
	err = factory.ListAll(ctx, api.DeviceClasses().List, metav1.ListOptions{}, func(l *resourcev1.DeviceClassList) string {
		classes = appendTrimmed(classes, l.Items, always[*resourcev1.DeviceClass])
		return l.Continue
	})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, c.ExplainList(err, classRequest)
	}
	return classes, true, nil
}

// readSlices reads the ResourceSlices the question needs (slicing).
func readSlices(ctx context.Context, c *factory.Factory, candidates map[string]bool) ([]*resourcev1.ResourceSlice, error) {
	s := &slicing{candidates: candidates}
	if err := listSlices(ctx, c, s.decode, s.add); err != nil {
		return nil, c.ExplainList(err, sliceRequest)
	}
	return s.slices(), nil
}

// readClaims lists the ResourceClaims of every namespace.
func readClaims(ctx context.Context, c *factory.Factory, api factory.KubeAPI) ([]*resourcev1.ResourceClaim, error) {
	out := []*resourcev1.ResourceClaim{} // read, if empty: not nil
	err := factory.ListAll(ctx, api.ResourceClaims("").List, metav1.ListOptions{}, func(l *resourcev1.ResourceClaimList) string {
		out = appendTrimmed(out, l.Items, always[*resourcev1.ResourceClaim])
		return l.Continue
	})
	if err != nil {
		return nil, c.ExplainList(err, factory.ListClaims(""))
	}
	return out, nil
}

// podReader reads the unfinished pods of candidates. It keeps those an answer names
// (holders: device-plugin GPUs or claims; possible preemption victims), trimmed
// (capacity.KeepPod), and counts the others per node.
type podReader struct {
	c     *factory.Factory
	cfg   *rest.Config   // of the Node and pod reads (readConfig); nil for the fake clientset
	small rest.Interface // of the lists of one node's pods (smallListsClient)
	// below: pods of a priority below it are kept too (the scheduler's preemption victims).
	below *int32
	mu    sync.Mutex
	pods  []*corev1.Pod
	usage map[string]*capacity.Usage
}

// node reads the pods of the named node.
func (r *podReader) node(ctx context.Context, name string) error {
	opts := metav1.ListOptions{FieldSelector: fields.AndSelectors(fields.OneTermEqualSelector("spec.nodeName", name), unfinished).String()}
	return r.read(ctx, true, opts, func(node string) bool { return node == name })
}

// all reads the pods of the nodes, and only those, from every pod: namespace by namespace,
// a few at a time, where namespaces may be listed (the API server encodes the lists on
// several cores), else in one list. What was read before is dropped.
func (r *podReader) all(ctx context.Context, nodes map[string]bool) error {
	r.pods, r.usage = nil, nil
	opts := metav1.ListOptions{FieldSelector: unfinishedPods, Limit: factory.ListChunk}
	on := func(node string) bool { return nodes[node] }
	if r.c.Streams() {
		client, err := streamClient(r.cfg)
		if err != nil {
			return err
		}
		if names, _, err := podcache.SplitNamespaces(ctx, client, ""); err == nil && names != nil {
			_, err := podStream.StreamEach(ctx, client, names, podcache.Listers, opts, func(string) func([]byte) error {
				return kubeproto.Decoded("pod", podcache.DecodeSchedulingPod, func(p *corev1.Pod) error {
					if on(p.Spec.NodeName) && !finished(p) {
						r.add(p)
					}
					return nil
				})
			})
			return r.c.ExplainList(err, factory.ListPods(""))
		}
	}
	return r.read(ctx, false, opts, on)
}

// read lists pods and adds those on the nodes on selects (an API server that ignores the
// field selector gives them all).
func (r *podReader) read(ctx context.Context, small bool, opts metav1.ListOptions, on func(string) bool) error {
	client, stream := r.small, smallPodStream
	if !small {
		client, stream = nil, podStream
	}
	err := listPods(ctx, r.c, r.cfg, client, stream, opts, func(p *corev1.Pod) {
		if on(p.Spec.NodeName) && !finished(p) {
			r.add(p)
		}
	})
	return r.c.ExplainList(err, factory.ListPods(""))
}

func (r *podReader) add(p *corev1.Pod) {
	requests := capacity.Requests(p)
	var kept *corev1.Pod
	if named(p, requests) || (r.below != nil && corev1helpers.PodPriority(p) < *r.below) {
		kept = capacity.KeepPod(p)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if kept != nil {
		r.pods = append(r.pods, kept)
		return
	}
	if r.usage == nil {
		r.usage = map[string]*capacity.Usage{}
	}
	if r.usage[p.Spec.NodeName] == nil {
		r.usage[p.Spec.NodeName] = &capacity.Usage{}
	}
	r.usage[p.Spec.NodeName].AddRequests(requests)
}

// named reports a pod that an answer names among a node's holders: one that asks for
// device-plugin GPUs (requests are its Requests) or has claims.
func named(p *corev1.Pod, requests corev1.ResourceList) bool {
	return len(gpuResourceNames(requests)) > 0 || len(claimNames(p)) > 0
}

// maxPriority is the highest priority of pods.
func maxPriority(pods []*corev1.Pod) int32 {
	var top int32
	for i, p := range pods {
		if prio := corev1helpers.PodPriority(p); i == 0 || prio > top {
			top = prio
		}
	}
	return top
}

func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// parallel runs fns at once and returns the first of their errors, in fns' order.
func parallel(fns ...func() error) error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() { errs[i] = fn() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// metaObject is a listed object: a pointer to a Kubernetes type.
type metaObject[T any] interface {
	*T
	metav1.Object
}

// appendTrimmed appends pointers to the items that keep accepts, their managed fields dropped
// (keep may drop more): the questions never read them, and they are often the larger part.
func appendTrimmed[T any, P metaObject[T]](out []P, items []T, keep func(P) bool) []P {
	for i := range items {
		p := P(&items[i])
		p.SetManagedFields(nil)
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

func always[P any](P) bool { return true }
