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

// Package claimcache keeps what allocation needs of the cluster's ResourceClaims: those
// that hold or ask for NVIDIA devices, each as an allocation.Claim, fed to an
// allocation.Tracker. Claims are read as protobuf and decoded field by field (DecodeClaim),
// so no full ResourceClaim is ever built, and claims of other drivers cost nothing beyond
// their key while they pass through.
package claimcache

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/slicecache"
)

// GroupVersion is the API the cache reads ResourceClaims from.
const GroupVersion = slicecache.GroupVersion

// Served reports whether the API server serves resourceclaims in resource.k8s.io/v1 (no
// error and false when it does not), asking on c (a REST client of any group version).
func Served(ctx context.Context, c rest.Interface) (bool, error) {
	return kubeclient.Serves(ctx, c, resourcev1.SchemeGroupVersion, "resourceclaims")
}

// Cache follows all namespaces' ResourceClaims with a client-go Reflector whose store keeps
// only the claims allocation.FromClaim keeps and hands them to the Tracker. Run it only
// where Served says the API exists.
type Cache struct {
	reflector *cache.Reflector
	store     *store
}

// New builds the cache on a copy of config that asks for protobuf and decodes through
// claimCodec. Nothing runs until Run.
func New(config *rest.Config, tracker *allocation.Tracker) (*Cache, error) {
	client, err := kubeproto.NewClient(config, claimCodec)
	if err != nil {
		return nil, err
	}
	s := &store{tracker: tracker, keys: map[string]struct{}{}}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return claimsRequest(client, "", opts).Do(ctx).Get()
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			return claimsRequest(client, "", opts).Watch(ctx)
		},
	}
	reflector := cache.NewReflectorWithOptions(lw, nil, s, cache.ReflectorOptions{
		Name:            "claimcache",
		TypeDescription: "*v1.ResourceClaim", // in the reflector's log lines
	})
	return &Cache{reflector: reflector, store: s}, nil
}

// claimsRequest is a GET of the ResourceClaims of namespace ("" for all) with opts, as the
// generated client makes it.
func claimsRequest(client rest.Interface, namespace string, opts metav1.ListOptions) *rest.Request {
	req := client.Get().Namespace(namespace).Resource("resourceclaims").VersionedParams(&opts, kubeclient.ParameterCodec)
	if opts.TimeoutSeconds != nil {
		req = req.Timeout(time.Duration(*opts.TimeoutSeconds) * time.Second)
	}
	return req
}

// Run lists and watches the claims until ctx ends.
func (c *Cache) Run(ctx context.Context) { c.reflector.RunWithContext(ctx) }

// HasSynced reports whether the first complete list has reached the Tracker.
func (c *Cache) HasSynced() bool { return c.store.synced.Load() }

// store is the reflector's store: it keeps no objects, only the keys of the claims the
// Tracker holds, so that it can tell the Tracker when one goes and ignore the rest. The
// reflector tracks resource versions itself, from every event, ignored or not.
type store struct {
	tracker *allocation.Tracker
	keys    map[string]struct{} // only the reflector's goroutine uses it
	synced  atomic.Bool
}

func objectFrom(obj any) (*Object, error) {
	o, ok := obj.(*Object)
	if !ok {
		return nil, fmt.Errorf("claim cache: unexpected object %T", obj)
	}
	return o, nil
}

func (s *store) Add(obj any) error { return s.Update(obj) }

func (s *store) Update(obj any) error {
	o, err := objectFrom(obj)
	if err != nil {
		return err
	}
	key := o.Namespace + "/" + o.Name
	if o.Claim != nil {
		s.keys[key] = struct{}{}
		s.tracker.SetClaim(o.Claim)
		return nil
	}
	s.forget(key) // a claim that no longer holds or asks for NVIDIA devices
	return nil
}

func (s *store) Delete(obj any) error {
	o, err := objectFrom(obj)
	if err != nil {
		return err
	}
	s.forget(o.Namespace + "/" + o.Name)
	return nil
}

func (s *store) forget(key string) {
	if _, ok := s.keys[key]; ok {
		delete(s.keys, key)
		s.tracker.DeleteClaim(key)
	}
}

func (s *store) Replace(list []any, _ string) error {
	keys := map[string]struct{}{}
	var claims []*allocation.Claim
	for _, obj := range list {
		o, err := objectFrom(obj)
		if err != nil {
			return err
		}
		if o.Claim != nil {
			keys[o.Namespace+"/"+o.Name] = struct{}{}
			claims = append(claims, o.Claim)
		}
	}
	s.keys = keys
	s.tracker.ReplaceClaims(claims)
	s.synced.Store(true)
	return nil
}

func (s *store) Resync() error { return nil }
