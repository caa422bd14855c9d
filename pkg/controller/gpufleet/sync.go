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

package gpufleet

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fleet"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/memberwatch"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
)

// syncHandler brings one fleet's status up to date: its members as the registry reads them,
// the status they give, written only when its hash (or the generation) differs from the
// stored one; then the fleet is enqueued again for when its next member turns stale.
func (c *Controller) syncHandler(ctx context.Context, key cache.ObjectName) error {
	obj, exists, err := c.fleets.Informer().GetStore().GetByKey(key.Name)
	if err != nil {
		return err
	}
	if !exists {
		c.forget(key)
		return nil
	}
	gf := obj.(*homelabv1.GpuFleet)
	now := c.clock.Now()
	members := c.members.Members(ctx, consumer(gf.Name), c.sourcesOf(gf), gf.Spec.InventoryNameOrDefault())
	opts := fleet.Options{Now: now, StaleAfter: staleAfter(gf), Generation: gf.Generation}
	st := fleet.Status(members, opts)
	keepTransitionTimes(&st, &gf.Status, now)
	c.metrics.SetFleet(gf.Name, &st)
	if next, ok := fleet.NextChange(members, opts); ok {
		c.queue.AddAfter(key, next.Sub(now))
	}

	c.mu.Lock()
	c.syncedOnce[gf.Name] = true
	changedAt, pending := c.changedAt[gf.Name]
	delete(c.changedAt, gf.Name)
	last := c.written[gf.Name]
	c.mu.Unlock()
	upToDate := gf.Status.FleetHash == st.FleetHash && gf.Status.ObservedGeneration == gf.Generation
	unseen := last.hash == st.FleetHash && last.over == gf.ResourceVersion // our write, not in the cache yet
	if upToDate || unseen {
		c.metrics.StatusWrites.WithLabelValues(metrics.FleetSkipped).Inc()
		return nil
	}
	if _, err := c.writer.ApplyStatus(ctx, gf.Name, st); err != nil {
		c.metrics.StatusWrites.WithLabelValues(metrics.FleetFailed).Inc()
		if pending {
			c.mu.Lock()
			if _, again := c.changedAt[gf.Name]; !again {
				c.changedAt[gf.Name] = changedAt
			}
			c.mu.Unlock()
		}
		return err
	}
	c.limiter.Wrote(key)
	c.metrics.StatusWrites.WithLabelValues(metrics.FleetWritten).Inc()
	if pending {
		c.metrics.MemberChange.Observe(c.clock.Since(changedAt).Seconds())
	}
	c.mu.Lock()
	c.written[gf.Name] = written{hash: st.FleetHash, over: gf.ResourceVersion}
	c.mu.Unlock()
	klog.FromContext(ctx).V(2).Info("Wrote GpuFleet status", "fleet", gf.Name, "hash", st.FleetHash,
		"members", st.TotalMembers, "reachable", st.ReachableMembers)
	if gf.Status.FleetHash != "" {
		c.announce(gf, st.Members)
	}
	return nil
}

// forget drops what the controller and the registry keep for a deleted fleet.
func (c *Controller) forget(key cache.ObjectName) {
	c.members.Forget(consumer(key.Name))
	c.limiter.Forget(key)
	c.metrics.ForgetFleet(key.Name)
	c.mu.Lock()
	delete(c.written, key.Name)
	delete(c.changedAt, key.Name)
	delete(c.syncedOnce, key.Name)
	c.mu.Unlock()
}

// sourcesOf are the objects that name the fleet's members: the ClusterProfiles its spec
// selects and, with spec.multiKueue, every MultiKueueCluster.
func (c *Controller) sourcesOf(gf *homelabv1.GpuFleet) []memberwatch.Source {
	var out []memberwatch.Source
	if sel := gf.Spec.ClusterProfiles; sel != nil && c.profiles != nil {
		selector := labels.Everything()
		if sel.Selector != nil {
			var err error
			if selector, err = metav1.LabelSelectorAsSelector(sel.Selector); err != nil {
				c.recorder.Eventf(gf, corev1.EventTypeWarning, "InvalidSelector",
					"spec.clusterProfiles.selector selects no ClusterProfile: %v", err)
				selector = labels.Nothing()
			}
		}
		for _, cp := range c.profiles.List(sel.Namespace, selector) {
			out = append(out, memberwatch.FromClusterProfile(cp))
		}
	}
	if mk := gf.Spec.MultiKueue; mk != nil && c.mkcs != nil {
		ns := mk.Namespace
		if ns == "" {
			ns = homelabv1.DefaultKueueNamespace
		}
		for _, u := range c.mkcs.List() {
			out = append(out, memberwatch.FromMultiKueueCluster(u, ns))
		}
	}
	return out
}

func staleAfter(gf *homelabv1.GpuFleet) time.Duration {
	if gf.Spec.StaleAfter == nil {
		return fleet.DefaultStaleAfter
	}
	return gf.Spec.StaleAfter.Duration
}

// keepTransitionTimes gives each condition the transition time of the stored one when its
// status did not change, else now.
func keepTransitionTimes(st, stored *homelabv1.GpuFleetStatus, now time.Time) {
	for i := range st.Conditions {
		c := &st.Conditions[i]
		c.LastTransitionTime = metav1.NewTime(now).Rfc3339Copy()
		if old := meta.FindStatusCondition(stored.Conditions, c.Type); old != nil && old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
	}
}

// announce records an Event on the fleet for every listed member whose state changed.
func (c *Controller) announce(gf *homelabv1.GpuFleet, rows []homelabv1.FleetMember) {
	before := map[string]homelabv1.FleetMember{}
	for _, r := range gf.Status.Members {
		before[r.Name] = r
	}
	for _, r := range rows {
		old, ok := before[r.Name]
		if ok && old.State == r.State && old.Reason == r.Reason {
			continue
		}
		from := "new"
		if ok {
			from = old.State
		}
		typ := corev1.EventTypeNormal
		if r.State == homelabv1.MemberUnreachable || r.State == homelabv1.MemberStale {
			typ = corev1.EventTypeWarning
		}
		msg := fmt.Sprintf("member %s: %s → %s", r.Name, from, r.State)
		if r.Reason != "" {
			msg += fmt.Sprintf(" (%s: %s)", r.Reason, r.Message)
		}
		c.recorder.Event(gf, typ, "Member"+r.State, msg)
	}
}
