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

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
)

const (
	ordinaryNamespaces = 40 // team-00 ...: ordinary pods
	gpuNamespaces      = 16 // ml-00 ...: GPU pods, more than the status's top 10
	replicasPerApp     = 20 // pods of one Deployment
	resourceGPU        = "nvidia.com/gpu"
	productLabel       = "nvidia.com/gpu.product"
)

// podPlan is one pod of the allocation phase: where it runs and what GPUs it asks for.
type podPlan struct {
	namespace, name string
	app, hash       string // its Deployment and ReplicaSet hash
	node            int    // fleet index of spec.nodeName; -1: waiting to be scheduled
	slot            gpuSlot
	gpu             string // GPU resource asked for; empty: an ordinary pod
	count           int64
	pinned          string // the product it pins
	byAffinity      bool   // pinned by a required node affinity, not the node selector
	finished        bool   // Succeeded: a Job's completed pod, which holds nothing
}

func (p *podPlan) bound() bool { return p.node >= 0 }

// holds reports whether the pod holds GPUs: bound, asking for some and not finished.
func (p *podPlan) holds() bool { return p.gpu != "" && p.bound() && !p.finished }

// gpuSlot is a share of one GPU node's capacity that one pod can take.
type gpuSlot struct {
	fleet    int // index in the harness's fleet
	resource string
	count    int64
}

// gpuSlots cuts the capacity of every GPU node labelled by GPU Feature Discovery into pod
// requests that fill it: whole GPUs in pieces of 8, 4, 2 and 1, single-strategy MIG devices
// and time-sliced replicas one or two at a time, mixed-strategy MIG devices one each. DRA
// nodes have no device-plugin capacity and get none.
func gpuSlots(fleet []fleetNode, rng *rand.Rand) []gpuSlot {
	var out []gpuSlot
	for k, n := range fleet {
		if n.dra {
			continue
		}
		add := func(resource string, count int64) {
			out = append(out, gpuSlot{fleet: k, resource: resource, count: count})
		}
		replicas, _ := strconv.Atoi(n.labels["nvidia.com/gpu.replicas"])
		switch {
		case n.labels["nvidia.com/mig.strategy"] == "mixed":
			for key, v := range n.labels {
				profile, ok := strings.CutSuffix(strings.TrimPrefix(key, "nvidia.com/mig-"), ".count")
				if !ok || !strings.HasPrefix(key, "nvidia.com/mig-") {
					continue
				}
				devices, _ := strconv.Atoi(v)
				for range devices {
					add("nvidia.com/mig-"+profile, 1)
				}
			}
		case strings.Contains(n.product, "-MIG-") || replicas > 1:
			units := int64(n.gpus) * int64(max(replicas, 1)) // a MIG node's count is its MIG devices
			for units > 0 {
				take := min(units, 1+int64(rng.IntN(2)))
				add(resourceGPU, take)
				units -= take
			}
		default:
			left := int64(n.gpus)
			for left > 0 {
				sizes := []int64{1, 1, 1, 1, 2, 2, 2, 4, 4, 8}
				take := sizes[rng.IntN(len(sizes))]
				if take <= left {
					add(resourceGPU, take)
					left -= take
				}
			}
		}
	}
	// Map order made the mixed nodes' order random: sort, then shuffle with the seeded rng.
	slices.SortFunc(out, func(a, b gpuSlot) int {
		if a.fleet != b.fleet {
			return a.fleet - b.fleet
		}
		return strings.Compare(a.resource, b.resource)
	})
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// pendingModels are what waiting pods pin: a model of the fleet by node selector, another by
// node affinity, one no node has, and any model.
var pendingModels = []struct {
	product    string
	byAffinity bool
}{{"NVIDIA-H100-80GB-HBM3", false}, {"NVIDIA-L4", true}, {"NVIDIA-B200", false}, {"", false}, {"", false}}

// podPopulation is the allocation phase's pods: total pods, gpuPods of them asking for GPUs
// (1 % waiting to be scheduled, 1 % finished, the rest bound to a free share of a GPU node),
// the others bound to any of the n nodes. It returns the shares of GPU nodes left free.
func podPopulation(fleet []fleetNode, n, total, gpuPods int, names *podNames, rng *rand.Rand) (pods []*podPlan, free []gpuSlot, err error) {
	pending, finished := gpuPods/100, gpuPods/100
	bound := gpuPods - pending
	slots := gpuSlots(fleet, rng)
	if bound > len(slots) {
		return nil, nil, fmt.Errorf("%d bound GPU pods do not fit the fleet's GPU nodes: at most %d (more --nodes, fewer --gpu-pods)", bound, len(slots))
	}
	for k := range gpuPods {
		p := names.next(fmt.Sprintf("ml-%02d", k/replicasPerApp%gpuNamespaces), k/replicasPerApp, true)
		switch {
		case k < pending:
			m := pendingModels[k%len(pendingModels)]
			p.node, p.gpu, p.count, p.pinned, p.byAffinity = -1, resourceGPU, []int64{1, 2, 4, 8}[k%4], m.product, m.byAffinity
		default:
			s := slots[k-pending]
			p.node, p.slot, p.gpu, p.count = fleet[s.fleet].index, s, s.resource, s.count
			p.finished = k-pending < finished
		}
		pods = append(pods, p)
	}
	for k := range total - gpuPods {
		p := names.next(fmt.Sprintf("team-%02d", k/replicasPerApp%ordinaryNamespaces), k/replicasPerApp, false)
		p.node = rng.IntN(n)
		pods = append(pods, p)
	}
	return pods, slots[bound:], nil
}

// podNames names pods as a Deployment's ReplicaSet does: <app>-<hash>-<suffix>.
type podNames struct{ serial int }

// generateNameAlphabet is the alphabet of generateName's random suffix.
const generateNameAlphabet = "bcdfghjklmnpqrstvwxz2456789"

func (n *podNames) next(namespace string, app int, gpu bool) *podPlan {
	kind := "web"
	if gpu {
		kind = "trainer"
	}
	name := fmt.Sprintf("%s-%s-%04d", kind, []string{"api", "worker", "infer", "batch", "search", "ingest"}[app%6], app)
	hash := digest(name, 10)
	var suffix [5]byte
	s := n.serial
	for i := range suffix {
		suffix[4-i] = generateNameAlphabet[s%len(generateNameAlphabet)]
		s /= len(generateNameAlphabet)
	}
	n.serial++
	return &podPlan{namespace: namespace, app: name, hash: hash, name: name + "-" + hash + "-" + string(suffix[:]), node: -1}
}

// digest is a stable hex string of length n derived from s.
func digest(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	out := hex.EncodeToString(sum[:])
	for len(out) < n {
		out += out
	}
	return out[:n]
}

// buildPod is the pod as a Deployment's ReplicaSet creates it, bound as the scheduler binds
// it: one container with environment from literals, the downward API and a Secret, probes,
// config, secret, scratch and service account token volumes, labels and annotations of a
// Helm-installed app.
func buildPod(p *podPlan) *corev1.Pod {
	app, volumes := appContainer(p), appVolumes(p)
	var tolerations []corev1.Toleration
	if p.gpu != "" {
		count := *resource.NewQuantity(p.count, resource.DecimalSI)
		app.Resources.Limits[corev1.ResourceName(p.gpu)] = count
		app.Resources.Requests[corev1.ResourceName(p.gpu)] = count
		app.VolumeMounts = append(app.VolumeMounts, corev1.VolumeMount{Name: "dshm", MountPath: "/dev/shm"})
		volumes = append(volumes, corev1.Volume{Name: "dshm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}})
		tolerations = append(tolerations, corev1.Toleration{Key: resourceGPU, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.name, Namespace: p.namespace, GenerateName: p.app + "-" + p.hash + "-", Labels: appLabels(p),
			Annotations: map[string]string{
				"kubectl.kubernetes.io/restartedAt": "2026-11-28T09:14:03Z", "prometheus.io/scrape": "true", "prometheus.io/port": "9090",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: p.app + "-" + p.hash,
				UID: types.UID(uuidOf(p.namespace + p.app)), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{app},
			Volumes:                       volumes,
			ServiceAccountName:            p.app,
			TerminationGracePeriodSeconds: ptr.To(int64(30)),
			SecurityContext:               &corev1.PodSecurityContext{FSGroup: ptr.To(int64(2000)), RunAsUser: ptr.To(int64(1000))},
			Tolerations:                   tolerations,
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname",
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.app}}}}}}},
		},
	}
	if p.bound() {
		pod.Spec.NodeName = fixtures.FleetNodeName(p.node)
	}
	switch {
	case p.pinned != "" && p.byAffinity:
		pod.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: productLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{p.pinned}}}}}}}
	case p.pinned != "":
		pod.Spec.NodeSelector = map[string]string{productLabel: p.pinned}
	}
	return pod
}

// appLabels are the labels of a Helm-installed app's pod.
func appLabels(p *podPlan) map[string]string {
	return map[string]string{
		"app": p.app, "app.kubernetes.io/name": p.app, "app.kubernetes.io/instance": p.app + "-prod",
		"app.kubernetes.io/version": "1.14.2", "app.kubernetes.io/managed-by": "Helm", "pod-template-hash": p.hash,
	}
}

// appContainer is the pod's one container, without GPUs.
func appContainer(p *podPlan) corev1.Container {
	image := fmt.Sprintf("registry.example.com/%s/%s:1.14.2@sha256:%s", p.namespace, p.app, digest(p.app, 64))
	env := []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
		{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}},
		{Name: "DATABASE_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: p.app + "-db"}, Key: "password"}}},
		{Name: "LOG_LEVEL", Value: "info"}, {Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "http://otel-collector.observability.svc:4317"},
	}
	probe := func(path string, delay int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("http")}},
			InitialDelaySeconds: delay, PeriodSeconds: 10, TimeoutSeconds: 2, FailureThreshold: 3}
	}
	return corev1.Container{
		Name: "app", Image: image, Args: []string{"--config=/etc/app/config.yaml", "--listen=:8080", "--metrics-listen=:9090"},
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}, {Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}},
		Env:   env,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
		},
		VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app", ReadOnly: true}, {Name: "tls", MountPath: "/etc/tls", ReadOnly: true},
			{Name: "scratch", MountPath: "/tmp"}, {Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
		LivenessProbe: probe("/healthz", 10), ReadinessProbe: probe("/readyz", 5),
		SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true), ReadOnlyRootFilesystem: ptr.To(true),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
	}
}

// appVolumes are the pod's volumes, without the GPU pod's /dev/shm.
func appVolumes(p *podPlan) []corev1.Volume {
	return []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: p.app + "-config"}}}},
		{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: p.app + "-tls"}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("1Gi"))}}},
		{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To(int64(3607)), Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		}}}},
	}
}

// uuidOf is a UUID-shaped string derived from s.
func uuidOf(s string) string {
	d := digest(s, 32)
	return d[:8] + "-" + d[8:12] + "-" + d[12:16] + "-" + d[16:20] + "-" + d[20:32]
}

// podStatus is the status the kubelet writes of a started pod (Running, or Succeeded for a
// finished one) or the scheduler of one that does not fit (PodScheduled False, its message
// naming the fleetSize nodes).
func podStatus(pod *corev1.Pod, p *podPlan, serial, fleetSize int) corev1.PodStatus {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	st := pod.Status
	if !p.bound() {
		st.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			LastTransitionTime: now, Message: fmt.Sprintf("0/%d nodes are available: insufficient %s. preemption: not eligible due to preemptionPolicy=Never.", fleetSize, p.gpu)}}
		return st
	}
	hostIP := fmt.Sprintf("10.%d.%d.%d", p.node/65536%256, p.node/256%256, p.node%256)
	podIP := fmt.Sprintf("10.%d.%d.%d", 100+serial/65536%100, serial/256%256, serial%256)
	ready := corev1.ConditionTrue
	st.Phase = corev1.PodRunning
	if p.finished {
		st.Phase, ready = corev1.PodSucceeded, corev1.ConditionFalse
	}
	cond := func(t corev1.PodConditionType, s corev1.ConditionStatus) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: s, LastTransitionTime: now}
	}
	st.Conditions = []corev1.PodCondition{cond("PodReadyToStartContainers", corev1.ConditionTrue), cond(corev1.PodInitialized, corev1.ConditionTrue),
		cond(corev1.PodReady, ready), cond(corev1.ContainersReady, ready), cond(corev1.PodScheduled, corev1.ConditionTrue)}
	st.HostIP, st.HostIPs = hostIP, []corev1.HostIP{{IP: hostIP}}
	st.PodIP, st.PodIPs = podIP, []corev1.PodIP{{IP: podIP}}
	st.StartTime = &now
	status := func(c corev1.Container) corev1.ContainerStatus {
		s := corev1.ContainerStatus{Name: c.Name, Image: strings.Split(c.Image, "@")[0], ImageID: "registry.example.com/sha256@" + digest(c.Image, 64),
			ContainerID: "containerd://" + digest(pod.Name+c.Name, 64), Ready: ready == corev1.ConditionTrue, Started: ptr.To(!p.finished)}
		if p.finished {
			s.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now, ContainerID: s.ContainerID}
		} else {
			s.State.Running = &corev1.ContainerStateRunning{StartedAt: now}
		}
		return s
	}
	st.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, status(c))
	}
	return st
}
