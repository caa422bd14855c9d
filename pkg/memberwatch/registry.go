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
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fleet"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventorycache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/member"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
)

// Name is the registry's name as a source of the hub.
const Name = "members"

// Options configure a Registry.
type Options struct {
	// Reader reads what a member's source names on the hub (Secrets by name, profiles from
	// the cache) with the hub's access providers.
	Reader member.Reader
	// MaxObjectBytes caps each object read from a member (member.Capped; 0: the default).
	MaxObjectBytes int64
	// Metrics counts the members' failed reads; nil: not counted.
	Metrics *metrics.Fleet
	// Clock is the time source; nil: the real clock.
	Clock clock.PassiveClock
	// ListTimeout bounds a member's list (0: 30s); MaxLists the lists in flight (0: 8).
	ListTimeout time.Duration
	MaxLists    int
	// Backoff replaces the reflectors' backoff between failed tries (tests); nil: client-go's.
	Backoff *wait.Backoff
	// NewClient makes the GpuInventory client of a member's config; nil: one that decodes
	// without status.nodes (pkg/inventorycache). Tests may give their own.
	NewClient func(*rest.Config) (kubeclient.ListWatcher[*homelabv1.GpuInventoryList], error)
}

// Registry holds the members every consumer (a GpuFleet, the dispatcher) asks for, and
// runs one reflector per member cluster and inventory, however many consumers and sources
// name it. It is the hub's "members" source: its changes are consumers' names.
type Registry struct {
	opts     Options
	resolver resolver
	lists    chan struct{}

	mu        sync.Mutex
	ctx       context.Context // Run's; nil before Run and once it ends
	ran       bool
	running   sync.WaitGroup
	resolved  map[string]*resolved // by Source.key
	watchers  map[watchKey]*running
	wants     map[string]map[watchKey]bool // by consumer
	listeners []func(consumer string)
}

// watchKey is one reflector: a member cluster (its endpoint), the credentials it is read
// with (the config's fingerprint) and an inventory's name. Two sources of one cluster with
// the same credentials share it; with other credentials each is read as it would be alone.
type watchKey struct{ endpoint, fingerprint, inventory string }

// running is a started reflector.
type running struct {
	w      *watcher
	cancel context.CancelFunc
}

// New makes a registry; members are read once it runs.
func New(opts Options) *Registry {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.ListTimeout <= 0 {
		opts.ListTimeout = 30 * time.Second
	}
	if opts.MaxLists <= 0 {
		opts.MaxLists = 8
	}
	if opts.NewClient == nil {
		opts.NewClient = func(cfg *rest.Config) (kubeclient.ListWatcher[*homelabv1.GpuInventoryList], error) {
			rc, err := inventorycache.NewInformerClient(cfg)
			if err != nil {
				return nil, err
			}
			return kubeclient.GpuInventories(rc), nil
		}
	}
	return &Registry{opts: opts, resolver: resolver{reader: opts.Reader}, lists: make(chan struct{}, opts.MaxLists),
		resolved: map[string]*resolved{}, watchers: map[watchKey]*running{}, wants: map[string]map[watchKey]bool{}}
}

// Name is the source's name.
func (r *Registry) Name() string { return Name }

// HasSynced reports whether the registry has run: members asked for are then read.
func (r *Registry) HasSynced() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ran
}

// OnChange registers f, called with a consumer's name when a member it asked for changes.
func (r *Registry) OnChange(f func(consumer string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.listeners = append(r.listeners, f)
}

// Run reads members until ctx ends, then stops every reflector and returns once they have.
func (r *Registry) Run(ctx context.Context) {
	r.mu.Lock()
	r.ctx, r.ran = ctx, true
	r.mu.Unlock()
	<-ctx.Done()
	r.mu.Lock()
	r.ctx = nil // nothing starts after this
	for k, run := range r.watchers {
		run.cancel()
		delete(r.watchers, k)
	}
	r.mu.Unlock()
	r.running.Wait()
}

// Members are the members consumer asks for now, each read on its GpuInventory inventory:
// one per source, as the hub knows it (fleet.Member). Reflectors start for members not yet
// read, restart for a member whose config changed, and stop once no consumer asks for them.
// A source whose config cannot be built is Unreachable with the reason, and never read.
func (r *Registry) Members(ctx context.Context, consumer string, sources []Source, inventory string) []fleet.Member {
	sources = slices.Clone(sources)
	slices.SortFunc(sources, func(a, b Source) int { return cmp.Compare(a.Name(), b.Name()) })
	configs := r.resolve(ctx, sources)

	r.mu.Lock()
	defer r.mu.Unlock()
	wanted := map[watchKey]bool{}
	out := make([]fleet.Member, len(sources))
	for i, s := range sources {
		m := &out[i]
		m.Name = s.Name()
		if s.ClusterProfile != nil {
			m.ClusterProfile = m.Name
		} else {
			m.MultiKueueCluster = m.Name
		}
		res := configs[i]
		if res.err != nil {
			m.State, m.Since = homelabv1.MemberUnreachable, res.since
			m.Reason, m.Message = member.Explain(res.err)
			continue
		}
		key := watchKey{endpoint: member.Endpoint(res.config), fingerprint: res.fingerprint, inventory: inventory}
		m.Server = key.endpoint
		run := r.ensure(key, m.Name, res.config)
		wanted[key] = true
		if run == nil {
			m.State = homelabv1.MemberConnecting
			continue
		}
		st := run.w.get()
		m.State, m.Reason, m.Message, m.Since, m.Inventory = st.State, st.Reason, st.Message, st.Since, st.Inventory
	}
	r.wants[consumer] = wanted
	r.stopUnwanted()
	return out
}

// Forget drops what consumer asked for (a deleted fleet); members nobody else reads stop.
func (r *Registry) Forget(consumer string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.wants, consumer)
	r.stopUnwanted()
}

// resolve returns each source's config, built again when the source (or what it names)
// changed or its credentials were refused.
func (r *Registry) resolve(ctx context.Context, sources []Source) []resolved {
	out := make([]resolved, len(sources))
	for i, s := range sources {
		version := r.resolver.version(s)
		r.mu.Lock()
		prev := r.resolved[s.key()]
		r.mu.Unlock()
		if prev != nil && prev.version == version && !prev.reread {
			out[i] = *prev
			continue
		}
		cfg, err := r.resolver.config(ctx, s)
		res := &resolved{version: version, config: cfg, err: err, since: r.opts.Clock.Now()}
		if cfg != nil {
			res.fingerprint = fingerprint(cfg)
		}
		if prev != nil && prev.err != nil && err != nil && sameFailure(prev.err, err) {
			res.since = prev.since
		}
		r.mu.Lock()
		r.resolved[s.key()] = res
		r.mu.Unlock()
		out[i] = *res
	}
	return out
}

func sameFailure(a, b error) bool {
	ra, ma := member.Explain(a)
	rb, mb := member.Explain(b)
	return ra == rb && ma == mb
}

// ensure returns the reflector of key, started with cfg (of the member name) unless it
// runs; nil before Run.
func (r *Registry) ensure(key watchKey, name string, cfg *rest.Config) *running {
	if run := r.watchers[key]; run != nil || r.ctx == nil {
		return run
	}
	w := &watcher{inventory: key.inventory, clock: r.opts.Clock, lists: r.lists, listTimeout: r.opts.ListTimeout,
		backoff: r.opts.Backoff, state: State{State: homelabv1.MemberConnecting, Since: r.opts.Clock.Now()}}
	w.changed = func() { r.notify(key) }
	w.failed = func(reason string, entered bool) { r.failed(key, name, reason, entered) }
	ctx, cancel := context.WithCancel(r.ctx)
	run := &running{w: w, cancel: cancel}
	r.watchers[key] = run
	client, err := r.opts.NewClient(member.Capped(withUserAgent(cfg), r.opts.MaxObjectBytes))
	if err != nil { // a config the REST client refuses: never read (no callback: r.mu is held)
		w.state.State = homelabv1.MemberUnreachable
		w.state.Reason, w.state.Message = member.Explain(err)
		return run
	}
	w.client = client
	logger := klog.FromContext(ctx).WithValues("member", name, "server", key.endpoint, "inventory", key.inventory)
	r.running.Go(func() { w.run(klog.NewContext(ctx, logger)) })
	return run
}

func withUserAgent(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "gpu-fleet-hub"
	return cfg
}

// stopUnwanted stops the reflectors no consumer asks for.
func (r *Registry) stopUnwanted() {
	for key, run := range r.watchers {
		wanted := false
		for _, keys := range r.wants {
			wanted = wanted || keys[key]
		}
		if !wanted {
			run.cancel()
			delete(r.watchers, key)
		}
	}
}

// notify tells every consumer that asks for key that it changed.
func (r *Registry) notify(key watchKey) {
	r.mu.Lock()
	var consumers []string
	for c, keys := range r.wants {
		if keys[key] {
			consumers = append(consumers, c)
		}
	}
	listeners := slices.Clone(r.listeners)
	r.mu.Unlock()
	slices.Sort(consumers)
	for _, c := range consumers {
		for _, f := range listeners {
			f(c)
		}
	}
}

// failed counts a failed read of the member name. Credentials refused make the sources
// with those credentials be read again at the next ask, and their consumers asked to ask:
// a Secret may have been rotated in place (each try of the reflector, spaced by its backoff,
// costs one get of the Secret).
func (r *Registry) failed(key watchKey, name, reason string, entered bool) {
	if r.opts.Metrics != nil {
		r.opts.Metrics.MemberReadErrors.WithLabelValues(name, reason).Inc()
	}
	if reason != homelabv1.ReasonUnauthorized {
		return
	}
	r.mu.Lock()
	for _, res := range r.resolved {
		if res.fingerprint == key.fingerprint {
			res.reread = true
		}
	}
	r.mu.Unlock()
	if !entered { // else the state's change tells them
		r.notify(key)
	}
}
