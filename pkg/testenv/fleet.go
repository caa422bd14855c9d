package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
)

// GPUModel is a GPU Feature Discovery label set for one kind of GPU node.
type GPUModel struct {
	Labels   map[string]string
	Capacity int64 // nvidia.com/gpu capacity
	Extra    corev1.ResourceList
}

// GPUModels are the models a generated fleet mixes: plain, MIG single and mixed, time-sliced.
var GPUModels = []GPUModel{
	{Capacity: 8, Labels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8", "nvidia.com/gpu.memory": "81559",
		"nvidia.com/gpu.family": "hopper", "nvidia.com/gpu.compute.major": "9", "nvidia.com/gpu.compute.minor": "0", "nvidia.com/gpu.machine": "DGX-H100"}},
	{Capacity: 56, Labels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "nvidia.com/gpu.count": "56", "nvidia.com/gpu.memory": "4864",
		"nvidia.com/gpu.family": "ampere", "nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "0", "nvidia.com/mig.capable": "true",
		"nvidia.com/mig.strategy": "single", "nvidia.com/mig.config": "all-1g.5gb", "nvidia.com/mig.config.state": "success", "nvidia.com/gpu.machine": "DGX-A100"}},
	{Capacity: 0, Labels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", "nvidia.com/gpu.count": "8", "nvidia.com/gpu.memory": "40960",
		"nvidia.com/gpu.family": "ampere", "nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "0", "nvidia.com/mig.capable": "true",
		"nvidia.com/mig.strategy": "mixed", "nvidia.com/mig.config": "all-balanced", "nvidia.com/mig.config.state": "success",
		"nvidia.com/mig-1g.5gb.count": "16", "nvidia.com/mig-1g.5gb.memory": "4864", "nvidia.com/mig-1g.5gb.multiprocessors": "14",
		"nvidia.com/mig-2g.10gb.count": "8", "nvidia.com/mig-2g.10gb.memory": "9728", "nvidia.com/mig-2g.10gb.multiprocessors": "28",
		"nvidia.com/mig-3g.20gb.count": "8", "nvidia.com/mig-3g.20gb.memory": "19968", "nvidia.com/mig-3g.20gb.multiprocessors": "42"},
		Extra: corev1.ResourceList{"nvidia.com/mig-1g.5gb": resource.MustParse("16"), "nvidia.com/mig-2g.10gb": resource.MustParse("8"), "nvidia.com/mig-3g.20gb": resource.MustParse("8")}},
	{Capacity: 4, Labels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.count": "4", "nvidia.com/gpu.memory": "23034",
		"nvidia.com/gpu.family": "ada-lovelace", "nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "9"}},
	{Capacity: 16, Labels: map[string]string{"nvidia.com/gpu.product": "Tesla-T4-SHARED", "nvidia.com/gpu.count": "4", "nvidia.com/gpu.memory": "15360",
		"nvidia.com/gpu.family": "turing", "nvidia.com/gpu.compute.major": "7", "nvidia.com/gpu.compute.minor": "5",
		"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"}},
}

// FleetNodeName is the name of the i-th generated node.
func FleetNodeName(i int) string {
	return fmt.Sprintf("ip-10-%d-%d-%d.ec2.internal", i/65536%256, i/256%256, i%256)
}

// IsFleetGPUNode says whether the i-th generated node is a GPU node (every other one).
func IsFleetGPUNode(i int) bool { return i%2 == 0 }

// FleetNode returns the i-th node as its kubelet creates it (with status), and the labels
// Node Feature Discovery and GPU Feature Discovery add to it afterwards.
func FleetNode(i int) (*corev1.Node, map[string]string) {
	name := FleetNodeName(i)
	rng := rand.New(rand.NewPCG(uint64(i), 42))
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
			"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
			"node.kubernetes.io/instance-type": "p5.48xlarge", "topology.kubernetes.io/region": "us-east-1",
			"topology.kubernetes.io/zone": fmt.Sprintf("us-east-1%c", 'a'+rune(i%3)),
		}, Annotations: map[string]string{
			"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true",
		}},
		Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.%d.%d.0/24", 100+i/65536, i/256%256), ProviderID: "aws:///us-east-1a/i-" + hexID(i, 17)},
	}
	now := metav1.NewTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	node.Status = corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
		},
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.%d.%d.%d", i/65536%256, i/256%256, i%256)},
			{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalDNS, Address: name},
		},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
		NodeInfo: corev1.NodeSystemInfo{
			MachineID: hexID(i, 32), SystemUUID: hexID(i+1, 32), BootID: hexID(i+2, 32), KernelVersion: "6.8.0-1015-aws",
			OSImage: "Ubuntu 22.04.4 LTS", ContainerRuntimeVersion: "containerd://1.7.22", KubeletVersion: "v1.32.5",
			OperatingSystem: "linux", Architecture: "amd64",
		},
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("192"), corev1.ResourceMemory: resource.MustParse("2097152Mi"),
			corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("3812Gi")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("191450m"), corev1.ResourceMemory: resource.MustParse("2086000Mi"),
			corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("3500Gi")},
	}
	for j := range 50 {
		node.Status.Images = append(node.Status.Images, corev1.ContainerImage{
			Names: []string{
				fmt.Sprintf("registry.example.com/team-%d/image-%d@sha256:%s", j%7, j, hexID(j, 64)),
				fmt.Sprintf("registry.example.com/team-%d/image-%d:v1.%d.%d", j%7, j, j, rng.IntN(20)),
			},
			SizeBytes: int64(50_000_000 + rng.IntN(2_000_000_000)),
		})
	}
	labels := nfdLabels(i)
	if IsFleetGPUNode(i) {
		model := GPUModels[(i/2)%len(GPUModels)]
		for k, v := range model.Labels {
			labels[k] = v
		}
		for k, v := range map[string]string{
			"nvidia.com/gpu.present": "true", "nvidia.com/gpu.mode": "compute", "nvidia.com/gpu-driver-upgrade-state": "upgrade-done",
			"nvidia.com/cuda.driver-version.full": "570.124.06", "nvidia.com/cuda.driver-version.major": "570",
			"nvidia.com/cuda.driver-version.minor": "124", "nvidia.com/cuda.driver-version.revision": "06",
			"nvidia.com/cuda.runtime-version.full": "12.8", "nvidia.com/cuda.runtime-version.major": "12",
			"nvidia.com/cuda.runtime-version.minor": "8", "nvidia.com/gfd.timestamp": "1764417600",
			"nvidia.com/gpu.deploy.driver": "true", "nvidia.com/gpu.deploy.device-plugin": "true",
			"nvidia.com/gpu.deploy.gpu-feature-discovery": "true", "nvidia.com/gpu.deploy.dcgm-exporter": "true",
			"feature.node.kubernetes.io/pci-10de.present": "true",
		} {
			if _, set := labels[k]; !set {
				labels[k] = v
			}
		}
		if _, ok := model.Labels["nvidia.com/gpu.replicas"]; !ok {
			labels["nvidia.com/gpu.replicas"] = "0"
			labels["nvidia.com/gpu.sharing-strategy"] = "none"
		}
		gpus := *resource.NewQuantity(model.Capacity, resource.DecimalSI)
		node.Status.Capacity["nvidia.com/gpu"] = gpus
		node.Status.Allocatable["nvidia.com/gpu"] = gpus
		for r, q := range model.Extra {
			node.Status.Capacity[r] = q
			node.Status.Allocatable[r] = q
		}
	}
	return node, labels
}

// nfdLabels are about 60 Node Feature Discovery labels, as on a real server.
func nfdLabels(i int) map[string]string {
	l := map[string]string{}
	for _, f := range []string{"ADX", "AESNI", "AMXBF16", "AMXINT8", "AMXTILE", "AVX", "AVX2", "AVX512BF16", "AVX512BITALG", "AVX512BW",
		"AVX512CD", "AVX512DQ", "AVX512F", "AVX512FP16", "AVX512IFMA", "AVX512VBMI", "AVX512VBMI2", "AVX512VL", "AVX512VNNI",
		"AVX512VPOPCNTDQ", "AVXVNNI", "CETIBT", "CETSS", "CMPXCHG8", "FMA3", "FSRM", "FXSR", "FXSROPT", "GFNI", "HYPERVISOR",
		"LAHF", "MOVBE", "MOVDIR64B", "MOVDIRI", "OSXSAVE", "SERIALIZE", "SHA", "SPEC_CTRL_SSBD", "STIBP", "SYSCALL", "SYSEE",
		"VAES", "VMX", "VPCLMULQDQ", "WAITPKG", "X87", "XGETBV1", "XSAVE", "XSAVEC", "XSAVEOPT", "XSAVES"} {
		l["feature.node.kubernetes.io/cpu-cpuid."+f] = "true"
	}
	l["feature.node.kubernetes.io/cpu-hardware_multithreading"] = "true"
	l["feature.node.kubernetes.io/cpu-model.family"] = "6"
	l["feature.node.kubernetes.io/cpu-model.id"] = "143"
	l["feature.node.kubernetes.io/cpu-model.vendor_id"] = "Intel"
	l["feature.node.kubernetes.io/kernel-version.full"] = "6.8.0-1015-aws"
	l["feature.node.kubernetes.io/kernel-version.major"] = "6"
	l["feature.node.kubernetes.io/kernel-version.minor"] = "8"
	l["feature.node.kubernetes.io/system-os_release.ID"] = "ubuntu"
	l["feature.node.kubernetes.io/system-os_release.VERSION_ID"] = "22.04"
	l["feature.node.kubernetes.io/pci-1d0f.present"] = "true"
	l["feature.node.kubernetes.io/memory-numa"] = "true"
	l["feature.node.kubernetes.io/storage-nonrotationaldisk"] = "true"
	l["feature.node.kubernetes.io/network-sriov.capable"] = fmt.Sprint(i%3 == 0)
	return l
}

func hexID(i, n int) string {
	sum := sha256.Sum256([]byte(fmt.Sprint(i)))
	s := hex.EncodeToString(sum[:])
	for len(s) < n {
		s += s
	}
	return s[:n]
}

// CreateFleet creates nodes first..first+n-1 as real clusters do: the kubelet creates each
// node with its status, then nfd-master server-side applies the feature labels. It uses
// workers concurrent requests.
func CreateFleet(ctx context.Context, kube kubernetes.Interface, first, n, workers int) error {
	indexes := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range workers {
		wg.Go(func() {
			for i := range indexes {
				if err := createFleetNode(ctx, kube, i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := first; i < first+n; i++ {
		indexes <- i
	}
	close(indexes)
	wg.Wait()
	return firstErr
}

func createFleetNode(ctx context.Context, kube kubernetes.Interface, i int) error {
	node, labels := FleetNode(i)
	if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{FieldManager: "kubelet"}); err != nil {
		return fmt.Errorf("create node %s: %w", node.Name, err)
	}
	apply := applycorev1.Node(node.Name).WithLabels(labels)
	if _, err := kube.CoreV1().Nodes().Apply(ctx, apply, metav1.ApplyOptions{FieldManager: "nfd-master", Force: true}); err != nil {
		return fmt.Errorf("label node %s: %w", node.Name, err)
	}
	return nil
}

// SetNodeReady sets the Ready condition of a node as its kubelet would (status subresource).
func SetNodeReady(ctx context.Context, kube kubernetes.Interface, name string, ready bool) error {
	status := corev1.ConditionFalse
	reason := "KubeletNotReady"
	if ready {
		status, reason = corev1.ConditionTrue, "KubeletReady"
	}
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":%q,"reason":%q,"lastHeartbeatTime":%q}]}}`,
		status, reason, time.Now().UTC().Format(time.RFC3339))
	_, err := kube.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kubelet"}, "status")
	return err
}

// Churn flips the Ready condition of random GPU nodes among the first n fleet nodes at rate
// changes per second until ctx is done, and returns how many changes it made. Most changes
// flip Ready; every tenth relabels a node instead (GFD's timestamp), as a GFD restart does;
// every 25th makes a node leave the cluster and join it again (deleted and created anew).
// Changes are sent concurrently, so that the rate holds whatever the API server's latency.
func Churn(ctx context.Context, kube kubernetes.Interface, n int, rate float64) (int, error) {
	if rate <= 0 {
		<-ctx.Done()
		return 0, nil
	}
	ticker := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer ticker.Stop()
	rng := rand.New(rand.NewPCG(7, 7))
	ready := map[int]bool{}
	inFlight := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	changes := 0
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-ticker.C:
			i := (1 + rng.IntN(max(1, (n+1)/2-1))) * 2 // a GPU node, never node 0 (the probes' marker)
			relabel := changes%10 == 9
			rejoin := changes%25 == 24
			isReady, seen := ready[i]
			if !seen {
				isReady = true
			}
			switch {
			case rejoin:
				delete(ready, i) // it joins Ready
			case !relabel:
				ready[i] = !isReady
			}
			changes++
			inFlight <- struct{}{}
			wg.Go(func() {
				defer func() { <-inFlight }()
				var err error
				if rejoin {
					err = kube.CoreV1().Nodes().Delete(ctx, FleetNodeName(i), metav1.DeleteOptions{})
					if err == nil {
						err = createFleetNode(ctx, kube, i)
					}
				} else if relabel {
					patch := fmt.Sprintf(`{"metadata":{"labels":{"nvidia.com/gfd.timestamp":"%d"}}}`, time.Now().UnixNano())
					_, err = kube.CoreV1().Nodes().Patch(ctx, FleetNodeName(i), types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "nfd-master"})
				} else {
					err = SetNodeReady(ctx, kube, FleetNodeName(i), !isReady)
				}
				// A change that meets a node in the middle of leaving and joining is lost, as
				// a kubelet's would be.
				if err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	return changes, firstErr
}
