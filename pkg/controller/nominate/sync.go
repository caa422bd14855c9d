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

package nominate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/dispatch"
)

// Why a nomination changed (gpu_fleet_dispatch_nominations_total's why).
const (
	whyNew            = "new"
	whyStoppedFitting = "stopped_fitting"
	whyUnreachable    = "unreachable"
	whyTimeout        = "timeout"
)

// Results of gpu_fleet_dispatch_workloads.
const (
	resultNominated   = "nominated"
	resultFitsNowhere = "fits_nowhere"
	resultNoGpus      = "no_gpus"
)

// decision is what the dispatcher wants for one Workload now.
type decision struct {
	nominate []string
	why      string
	// condition is the hub's condition to hold on the Workload; nil leaves it as it is.
	condition *metav1.Condition
	result    string
	// recheck asks for another look after that long (the hold or the timeout ends).
	recheck time.Duration
}

func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	obj, exists, err := c.workloads.GetIndexer().GetByKey(key.String())
	if err != nil {
		return err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !exists || !ok {
		c.forget(key)
		return nil
	}
	wl, err := dispatch.DecodeWorkload(u)
	if err != nil {
		klog.FromContext(ctx).Info("Workload not read", "workload", key, "err", err)
		c.forget(key)
		return nil
	}
	now := c.opts.Clock.Now()
	workers, problem, ours := c.eligible(wl)
	if !ours {
		c.settle(key, wl, now)
		return nil
	}
	t := c.track(key, wl, workers, now)
	req, reqErr := dispatch.RequestOf(wl)
	d := c.decide(key, t, wl, req, reqErr, problem, now)
	if err := c.carryOut(ctx, key, wl, t, d, now); err != nil {
		return err
	}
	if d.recheck > 0 {
		c.queue.AddAfter(key, d.recheck)
	}
	return nil
}

// eligible says whether the Workload is the dispatcher's, as it is Kueue's incremental
// dispatcher's: its MultiKueue admission check Pending, no cluster chosen, quota reserved
// on the manager, not finished; and its candidate workers, the clusters of the check's
// MultiKueueConfig (problem says why there are none).
func (c *Controller) eligible(wl *dispatch.Workload) (workers []string, problem string, ours bool) {
	if wl.Status.ClusterName != nil || wl.DeletionTimestamp != nil || wl.ConditionTrue(dispatch.ConditionFinished) ||
		!wl.ConditionTrue(dispatch.ConditionQuotaReserved) {
		return nil, "", false
	}
	for _, state := range wl.Status.AdmissionChecks {
		check := c.object(c.checks, state.Name)
		if check == nil {
			continue
		}
		if name, _, _ := unstructured.NestedString(check.Object, "spec", "controllerName"); name != MultiKueueControllerName {
			continue
		}
		if state.State != dispatch.CheckStatePending {
			return nil, "", false
		}
		configName, _, _ := unstructured.NestedString(check.Object, "spec", "parameters", "name")
		config := c.object(c.configs, configName)
		if config == nil {
			return nil, fmt.Sprintf("AdmissionCheck %s names MultiKueueConfig %q, which does not exist", state.Name, configName), true
		}
		clusters, _, _ := unstructured.NestedStringSlice(config.Object, "spec", "clusters")
		if len(clusters) == 0 {
			return nil, fmt.Sprintf("MultiKueueConfig %s names no cluster", configName), true
		}
		return clusters, "", true
	}
	return nil, "", false
}

// object is a cluster-scoped object of an informer by name; nil when absent.
func (c *Controller) object(informer cache.SharedIndexInformer, name string) *unstructured.Unstructured {
	obj, exists, err := informer.GetStore().GetByKey(name)
	if err != nil || !exists {
		return nil
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u
}

// track is the memory of a pending Workload, made on first sight.
func (c *Controller) track(key cache.ObjectName, wl *dispatch.Workload, workers []string, now time.Time) *tracked {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tracked[key]
	if t == nil || t.admittedOn != "" {
		t = &tracked{seenAt: now}
		c.tracked[key] = t
	}
	t.workers = workers
	if !sameSet(t.nominated, wl.Status.NominatedClusterNames) {
		// Nominated by an earlier run of the hub, or changed by someone else: held from now.
		t.nominated, t.nominatedAt = slices.Clone(wl.Status.NominatedClusterNames), now
	}
	return t
}

// settle is a Workload that is no longer the dispatcher's: one a worker admitted still
// counts there for a while, as an assumed placement; the rest is forgotten.
func (c *Controller) settle(key cache.ObjectName, wl *dispatch.Workload, now time.Time) {
	c.mu.Lock()
	t := c.tracked[key]
	admitted := t != nil && wl.Status.ClusterName != nil && wl.DeletionTimestamp == nil && !wl.ConditionTrue(dispatch.ConditionFinished)
	if admitted && t.admittedOn == "" {
		t.admittedOn, t.admittedAt, t.nominated, t.result = *wl.Status.ClusterName, now, nil, ""
		c.mu.Unlock()
		c.queue.AddAfter(key, assumeAfterAdmission)
		c.countResults()
		return
	}
	c.mu.Unlock()
	if !admitted || now.Sub(t.admittedAt) >= assumeAfterAdmission {
		c.forget(key)
	}
}

func (c *Controller) forget(key cache.ObjectName) {
	c.mu.Lock()
	delete(c.tracked, key)
	c.mu.Unlock()
	c.countResults()
}

// decide is the nomination the Workload should have now, and the condition.
func (c *Controller) decide(key cache.ObjectName, t *tracked, wl *dispatch.Workload, req dispatch.Request, reqErr error, problem string, now time.Time) decision {
	c.mu.Lock()
	t.request = req
	c.mu.Unlock()
	current := wl.Status.NominatedClusterNames
	switch {
	case problem != "":
		return decision{nominate: current, result: resultFitsNowhere,
			condition: condition(metav1.ConditionFalse, ReasonFitsNowhere, problem)}
	case reqErr != nil:
		return decision{nominate: current, result: resultFitsNowhere,
			condition: condition(metav1.ConditionFalse, ReasonInvalidWorkload, "the hub cannot judge this Workload: "+reqErr.Error())}
	case req.NotJudged != "" || req.NoGPUs():
		d := decision{nominate: c.activeWorkers(t.workers), result: resultNoGpus, why: whyNew}
		if req.NotJudged != "" {
			d.condition = condition(metav1.ConditionUnknown, ReasonNotJudged, req.NotJudged+"; nominated to every Active worker")
		}
		return d
	}
	answers := c.answers(key, t, req, now)
	dispatch.Rank(answers)
	d := c.choose(t, current, answers, now)
	if len(d.nominate) == 0 {
		d.result = resultFitsNowhere
		d.condition = condition(metav1.ConditionFalse, ReasonFitsNowhere, fitsNowhere(answers))
		return d
	}
	d.result = resultNominated
	if prior := gpuFit(wl); prior != nil && prior.Status != metav1.ConditionTrue {
		d.condition = condition(metav1.ConditionTrue, ReasonNominated, "nominated "+strings.Join(d.nominate, ", "))
	}
	return d
}

// choose applies the hold, the re-nomination and the timeout to the ranked answers.
func (c *Controller) choose(t *tracked, current []string, ranked []dispatch.Answer, now time.Time) decision {
	n := c.opts.Nominations
	if len(current) == 0 {
		d := decision{nominate: dispatch.Choose(ranked, n), why: whyNew}
		if len(d.nominate) > 0 {
			d.recheck = c.opts.Timeout // to widen it when no worker admits it
		}
		return d
	}
	age := now.Sub(t.nominatedAt)
	if age < c.opts.Hold {
		return decision{nominate: current, recheck: c.opts.Hold - age}
	}
	fits := map[string]bool{}
	unavailable := false
	for _, a := range ranked {
		fits[a.Worker] = a.Verdict != dispatch.DoesNotFit
		unavailable = unavailable || contains(current, a.Worker) && strings.HasPrefix(a.Reason, "unreachable")
	}
	keep := slices.DeleteFunc(slices.Clone(current), func(w string) bool { return !fits[w] })
	if len(keep) == 0 {
		why := whyStoppedFitting
		if unavailable {
			why = whyUnreachable
		}
		return decision{nominate: dispatch.Choose(ranked, n), why: why, recheck: c.opts.Timeout}
	}
	d := decision{nominate: keep, why: whyStoppedFitting, recheck: c.opts.Timeout}
	if len(keep) == len(current) {
		d.nominate, d.why = current, ""
	}
	if age >= c.opts.Timeout {
		for _, a := range ranked {
			if a.Verdict != dispatch.DoesNotFit && !contains(d.nominate, a.Worker) && len(d.nominate) < 20 {
				d.nominate, d.why = append(slices.Clone(d.nominate), a.Worker), whyTimeout
				break
			}
		}
	}
	if d.why == "" {
		d.recheck = c.opts.Timeout - age
	}
	return d
}

// answers judges the request on every candidate worker, after the placements of earlier
// nominations there.
func (c *Controller) answers(key cache.ObjectName, t *tracked, req dispatch.Request, now time.Time) []dispatch.Answer {
	out := make([]dispatch.Answer, 0, len(t.workers))
	for _, name := range t.workers {
		w := c.worker(name)
		var before time.Time
		if contains(t.nominated, name) {
			before = t.nominatedAt
		}
		out = append(out, dispatch.Judge(req, w, c.assumedOn(name, key, before, now)))
	}
	return out
}

// worker is what the dispatcher may know of a worker: nothing is sent to one whose
// MultiKueueCluster is not Active, or that the hub cannot read now.
func (c *Controller) worker(name string) dispatch.Worker {
	w := dispatch.Worker{Name: name}
	if why := c.inactive(name); why != "" {
		w.Unavailable = why
		return w
	}
	m, ok := c.opts.Members.Member(name)
	switch {
	case !ok:
		w.Unavailable = "the hub does not read its GpuInventory (not a member of a GpuFleet)"
	case m.State == homelabv1.MemberReachable:
		w.Status = m.Status
	case m.State == homelabv1.MemberConnecting:
		w.Unavailable = "connecting: its GpuInventory has not been read yet"
	case m.State == homelabv1.MemberDuplicate:
		w.Unavailable = "the same cluster as another member: " + m.Message
	default:
		w.Unavailable = fmt.Sprintf("unreachable: %s since %s", m.Reason, m.Since.UTC().Format(time.TimeOnly))
	}
	return w
}

// inactive says why MultiKueue cannot send copies to the worker now; "" when it can.
func (c *Controller) inactive(name string) string {
	mkc := c.object(c.clusters, name)
	if mkc == nil {
		return fmt.Sprintf("no MultiKueueCluster %s", name)
	}
	conditions, _, _ := unstructured.NestedSlice(mkc.Object, "status", "conditions")
	for _, cond := range conditions {
		if m, ok := cond.(map[string]any); ok && m["type"] == "Active" {
			if m["status"] == "True" {
				return ""
			}
			return fmt.Sprintf("MultiKueueCluster %s is not Active: %v", name, m["message"])
		}
	}
	return fmt.Sprintf("MultiKueueCluster %s is not Active yet", name)
}

// activeWorkers are the workers MultiKueue can send copies to.
func (c *Controller) activeWorkers(workers []string) []string {
	var out []string
	for _, w := range workers {
		if c.inactive(w) == "" {
			out = append(out, w)
		}
	}
	return out
}

// assumedOn is the requests of the other Workloads nominated to the worker (before the
// given time, when set) or admitted there a moment ago, oldest first.
func (c *Controller) assumedOn(worker string, self cache.ObjectName, before, now time.Time) []dispatch.Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	type held struct {
		at  time.Time
		key string
		req dispatch.Request
	}
	var list []held
	for key, t := range c.tracked {
		switch {
		case key == self:
		case contains(t.nominated, worker) && (before.IsZero() || t.nominatedAt.Before(before)):
			list = append(list, held{t.nominatedAt, key.String(), t.request})
		case t.admittedOn == worker && now.Sub(t.admittedAt) < assumeAfterAdmission:
			list = append(list, held{t.admittedAt, key.String(), t.request})
		}
	}
	slices.SortFunc(list, func(a, b held) int { return cmpOr(a.at.Compare(b.at), strings.Compare(a.key, b.key)) })
	out := make([]dispatch.Request, len(list))
	for i, h := range list {
		out[i] = h.req
	}
	return out
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// maxMessage is metav1.Condition's bound on a message.
const maxMessage = 32768

// fitsNowhere is the condition's message: each worker and why it does not take the Workload.
func fitsNowhere(answers []dispatch.Answer) string {
	var b strings.Builder
	b.WriteString("no worker takes all of it now")
	for _, a := range answers {
		line := fmt.Sprintf("; %s: %s", a.Worker, a.Reason)
		if b.Len()+len(line) > maxMessage {
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

func condition(status metav1.ConditionStatus, reason, message string) *metav1.Condition {
	return &metav1.Condition{Type: ConditionGpuFit, Status: status, Reason: reason, Message: message}
}

// gpuFit is the hub's condition on the Workload; nil when it has none.
func gpuFit(wl *dispatch.Workload) *metav1.Condition {
	for i := range wl.Status.Conditions {
		if wl.Status.Conditions[i].Type == ConditionGpuFit {
			return &wl.Status.Conditions[i]
		}
	}
	return nil
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, s := range a {
		if !contains(b, s) {
			return false
		}
	}
	return true
}
