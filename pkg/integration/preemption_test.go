//go:build integration

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

package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

const preemptNS = "preempt"

// whyPreemption is what `why -o json` says of a pending pod's scheduling and preemption.
type whyPreemption struct {
	Message    string `json:"message"`
	Preemption struct {
		Message    string `json:"message"`
		Candidates []struct {
			Node    string `json:"node"`
			Victims []struct {
				Pod string `json:"pod"`
			} `json:"victims"`
		} `json:"candidates"`
	} `json:"preemption"`
}

func (c *cluster) whyJSON(t *testing.T, pod string) whyPreemption {
	t.Helper()
	r := runPlugin(context.Background(), c.env.KubeconfigPath(), "why", "-n", preemptNS, pod, "-o", "json")
	if r.code != 0 {
		t.Fatalf("why %s: exit %d, stderr %s", pod, r.code, r.err)
	}
	var w whyPreemption
	if err := json.Unmarshal([]byte(r.out), &w); err != nil {
		t.Fatalf("why -o json: %v\n%s", err, r.out)
	}
	return w
}

func (c *cluster) priorityClass(t *testing.T, name string, value int32, never bool) {
	t.Helper()
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	if never {
		pc.PreemptionPolicy = ptr.To(corev1.PreemptNever)
	}
	if _, err := c.kube.SchedulingV1().PriorityClasses().Create(context.Background(), pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func withPriority(p *corev1.Pod, class string) *corev1.Pod {
	p.Spec.PriorityClassName = class
	return p
}

// `why` gives a pending pod the scheduler's whole FailedScheduling message, preemption's
// part included, and says which pods the scheduler would evict for it, as `fit -f` does for a
// file of the same pod: a pod of the same spec then makes the real scheduler evict exactly
// those and run where they said.
func TestWhyPreemptsAsTheSchedulerDoes(t *testing.T) {
	c := startSchedulingCluster(t)
	ctx := context.Background()
	gpus := func(n string) corev1.ResourceList { return corev1.ResourceList{oracleGPU: resource.MustParse(n)} }
	if err := testenv.CreateNodes(ctx, c.kube, []*corev1.Node{kwokNode("pre-a", gpus("8")), kwokNode("pre-b", gpus("8")), kwokNode("pre-small", gpus("2"))}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"pre-a", "pre-b", "pre-small"} {
		c.waitSchedulable(t, n)
	}
	c.priorityClass(t, "lowest", 50, false)
	c.priorityClass(t, "low", 100, false)
	c.priorityClass(t, "high", 1000, false)
	c.priorityClass(t, "high-never", 1000, true)
	// pre-a: two low-priority pods of 4 GPUs; pre-b: one high-priority pod of 8.
	for _, p := range []*corev1.Pod{
		withPriority(inNamespace(pinned("pre-a", "low-100", oracleGPU, 4), preemptNS), "low"),
		withPriority(inNamespace(pinned("pre-a", "low-50", oracleGPU, 4), preemptNS), "lowest"),
		withPriority(inNamespace(pinned("pre-b", "high-b", oracleGPU, 8), preemptNS), "high"),
	} {
		c.waitRunning(t, c.createPod(t, p))
	}

	t.Run("no pod of lower priority", func(t *testing.T) {
		pod := c.createPod(t, inNamespace(withResources(unpinned("same"), oracleGPU, 8), preemptNS))
		defer c.deletePod(t, preemptNS, pod.Name)
		c.whySaysTheEvent(t, pod, "No preemption victims found")
	})
	t.Run("preemptionPolicy Never", func(t *testing.T) {
		pod := c.createPod(t, withPriority(inNamespace(withResources(unpinned("never"), oracleGPU, 4), preemptNS), "high-never"))
		defer c.deletePod(t, preemptNS, pod.Name)
		c.whySaysTheEvent(t, pod, "preemptionPolicy=Never")
	})
	t.Run("victims", func(t *testing.T) {
		// A pod no scheduler takes asks why; then the same pod for the real scheduler.
		probe := withPriority(inNamespace(withResources(unpinned("urgent-probe"), oracleGPU, 4), preemptNS), "high")
		probe.Spec.SchedulerName = "nobody"
		c.createPod(t, probe)
		defer c.deletePod(t, preemptNS, probe.Name)
		w := c.whyJSON(t, probe.Name)
		if len(w.Preemption.Candidates) != 1 || w.Preemption.Candidates[0].Node != "pre-a" ||
			len(w.Preemption.Candidates[0].Victims) != 1 || w.Preemption.Candidates[0].Victims[0].Pod != "low-50" {
			t.Fatalf("why: preemption %+v, want pre-a evicting low-50 alone (nothing on pre-b is of lower priority; one pod makes room and the scheduler keeps the more important)", w.Preemption)
		}
		c.fitPreempts(t, "pre-a", "low-50")
		urgent := c.createPod(t, withPriority(inNamespace(withResources(unpinned("urgent"), oracleGPU, 4), preemptNS), "high"))
		ev := c.waitFailedScheduling(t, urgent, "preemption:")
		if got := w.Message + " " + w.Preemption.Message; got != ev.Message {
			t.Errorf("why says\n  %s\nthe scheduler's event says\n  %s", got, ev.Message)
		}
		if running := c.waitRunning(t, urgent); running.Spec.NodeName != "pre-a" {
			t.Errorf("urgent runs on %s, want pre-a", running.Spec.NodeName)
		}
		pods, err := c.kube.CoreV1().Pods(preemptNS).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", "pre-a").String()})
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				left = append(left, p.Name)
			}
		}
		if len(left) != 2 || !slices.Contains(left, "low-100") || !slices.Contains(left, "urgent") {
			t.Errorf("pods left on pre-a: %v, want low-100 and urgent (low-50 evicted)", left)
		}
	})
}

// fitPreempts checks that `fit -f` places a pod like urgent on node by evicting victim.
func (c *cluster) fitPreempts(t *testing.T, node, victim string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "urgent.yaml")
	pod := `apiVersion: v1
kind: Pod
metadata: {name: urgent-fit, namespace: ` + preemptNS + `}
spec:
  priorityClassName: high
  containers:
  - name: main
    image: job
    resources:
      limits: {nvidia.com/gpu: 4}
`
	if err := os.WriteFile(file, []byte(pod), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runPlugin(context.Background(), c.env.KubeconfigPath(), "fit", "-f", file, "-o", "json")
	var a struct {
		FitsByPreemption bool `json:"fitsByPreemption"`
		Pods             []struct {
			Node     string `json:"node"`
			Preempts []struct {
				Pod string `json:"pod"`
			} `json:"preempts"`
		} `json:"pods"`
	}
	if err := json.Unmarshal([]byte(r.out), &a); err != nil {
		t.Fatalf("fit -o json (exit %d, stderr %s): %v\n%s", r.code, r.err, err, r.out)
	}
	if r.code != 1 || !a.FitsByPreemption || len(a.Pods) != 1 || a.Pods[0].Node != node ||
		len(a.Pods[0].Preempts) != 1 || a.Pods[0].Preempts[0].Pod != victim {
		t.Errorf("fit: exit %d, %+v; want exit 1, placed on %s by evicting %s", r.code, a, node, victim)
	}
}

// whySaysTheEvent waits for the scheduler's FailedScheduling event of a pending pod (one that
// says want) and checks that why's message, preemption's part included, is the event's.
func (c *cluster) whySaysTheEvent(t *testing.T, pod *corev1.Pod, want string) {
	t.Helper()
	ev := c.waitFailedScheduling(t, pod, want)
	w := c.whyJSON(t, pod.Name)
	if got := w.Message + " " + w.Preemption.Message; got != ev.Message {
		t.Errorf("why says\n  %s\nthe scheduler's event says\n  %s", got, ev.Message)
	}
}

// unpinned is a pod that names no node.
func unpinned(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: oracleNS, Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "job"}}}}
}
