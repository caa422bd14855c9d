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

package app

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/gpufleet"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/nominate"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/member"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/memberwatch"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
)

// A sourceRow is one input of the hub: what it reads, when, and how it is built (as the
// operator's, docs/design/sources.md).
type sourceRow struct {
	// name is the built source's Name().
	name string
	// reads is what the hub's RBAC grants for it; TestSourcesReadWhatTheRBACGrants checks
	// manifests/hub against it.
	reads []grant
	// on reports whether it is read in this run (what the hub's API server serves); nil:
	// always. An error is logged and reads as off until the next run.
	on func(ctx context.Context, e *env) (bool, error)
	// build makes it; the sources of the rows above it are in e.
	build func(ctx context.Context, e *env) (source.Source, error)
}

// grant is one rule of the RBAC a source needs.
type grant struct {
	group     string
	resources []string
	// where is the manifest of manifests/hub that grants it: "" the ClusterRole, "kueue" the
	// Role in Kueue's namespace (the multikueue component).
	where string
	verbs []string // nil: get, list, watch
}

// sources are the hub's inputs, in the order they are built and started: the objects that
// name members before the registry that reads them.
var sources = []sourceRow{
	{name: gpufleet.InformerName, reads: []grant{{group: homelabv1.GroupName, resources: []string{"gpufleets"}}},
		build: func(_ context.Context, e *env) (source.Source, error) {
			return gpufleet.NewInformer(kubeclient.GpuFleets(e.clients.homelab), 0), nil
		}},
	{name: memberwatch.ClusterProfilesName, reads: []grant{{group: v1alpha1.Group, resources: []string{"clusterprofiles"}}},
		on: func(ctx context.Context, e *env) (bool, error) {
			return memberwatch.ClusterProfilesServed(ctx, e.clients.core)
		},
		build: func(_ context.Context, e *env) (source.Source, error) {
			return memberwatch.NewProfiles(e.clients.config)
		}},
	{name: memberwatch.MultiKueueClustersName, reads: []grant{{group: "kueue.x-k8s.io", resources: []string{"multikueueclusters"}}},
		on: func(ctx context.Context, e *env) (bool, error) {
			return memberwatch.MultiKueueClustersServed(ctx, e.clients.core)
		},
		build: func(_ context.Context, e *env) (source.Source, error) {
			return memberwatch.NewMultiKueueClusters(e.clients.config)
		}},
	// The kubeconfig Secrets MultiKueueClusters name, by name: get only, no list or watch.
	{name: memberwatch.Name, reads: []grant{{resources: []string{"secrets"}, where: "kueue", verbs: []string{"get"}}},
		build: newRegistry},
	// With --dispatch, where MultiKueue is served: the pending Workloads and what makes them
	// MultiKueue's (docs/design/hub.md#gpu-aware-dispatch-for-multikueue), then the workers.
	{name: nominate.KueueObjectsName, on: dispatching, build: newKueueObjectsSource,
		reads: []grant{{group: "kueue.x-k8s.io", resources: []string{"workloads", "admissionchecks", "multikueueconfigs"}, where: "dispatch"}}},
	{name: nominate.WorkersName, on: dispatching, build: newWorkersSource},
}

// env is what the rows of one run are built with.
type env struct {
	opts      *Options
	clients   *clients
	providers *access.Config
	namespace string
	metrics   *metrics.Fleet
	dispatch  *nominate.Metrics
	recorder  record.EventRecorder
	built     []source.Source
}

// newRegistry makes the member registry: Secrets got by name on the hub, ClusterProfiles from
// the run's cache (none when they are not served).
func newRegistry(_ context.Context, e *env) (source.Source, error) {
	profiles, _ := builtNamed[*memberwatch.Profiles](e, memberwatch.ClusterProfilesName)
	reader := member.Reader{Providers: e.providers,
		Secret: func(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
			return kubeclient.Secrets(e.clients.core, namespace).Get(ctx, name, metav1.GetOptions{})
		},
		ClusterProfile: func(ctx context.Context, namespace, name string) (*v1alpha1.ClusterProfile, error) {
			if profiles == nil {
				return nil, apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("clusterprofiles").GroupResource(), name)
			}
			return profiles.Get(ctx, namespace, name)
		}}
	return memberwatch.New(memberwatch.Options{Reader: reader, MaxObjectBytes: e.opts.MemberMaxObjectBytes, Metrics: e.metrics,
		ListTimeout: e.opts.MemberListTimeout, Backoff: e.opts.MemberBackoff}), nil
}

// buildSources builds the rows that are on, in order.
func buildSources(ctx context.Context, e *env, rows []sourceRow) ([]source.Source, error) {
	for _, row := range rows {
		if on, err := isOn(ctx, e, row); !on {
			if err != nil {
				klog.FromContext(ctx).Error(err, "Cannot tell whether to read a source; not reading it until the next run", "source", row.name)
			} else {
				klog.FromContext(ctx).Info("Not reading: the hub's API server does not serve it", "source", row.name)
			}
			continue
		}
		s, err := row.build(ctx, e)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", row.name, err)
		}
		if s.Name() != row.name {
			return nil, fmt.Errorf("source %s is built as %s", row.name, s.Name())
		}
		e.built = append(e.built, s)
	}
	return e.built, nil
}

func isOn(ctx context.Context, e *env, row sourceRow) (bool, error) {
	if row.on == nil {
		return true, nil
	}
	return row.on(ctx, e)
}

// builtNamed is the built source of that name, if it is a T.
func builtNamed[T source.Source](e *env, name string) (T, bool) {
	for _, s := range e.built {
		if t, ok := s.(T); ok && s.Name() == name {
			return t, true
		}
	}
	var zero T
	return zero, false
}

// clients are the hub's API clients on its own cluster (pkg/kubeclient): built-in kinds as
// protobuf, custom resources as JSON. Members are reached by clients of their own
// (pkg/memberwatch).
type clients struct {
	config       *rest.Config   // JSON, with the hub's transport
	core         rest.Interface // core/v1: Secrets by name, Events
	coordination rest.Interface // coordination.k8s.io/v1: the Lease
	homelab      rest.Interface // homelab.youngju.dev/v1: GpuFleets
	apiext       rest.Interface // apiextensions.k8s.io/v1: the GpuFleet CRD
}
