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
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	cliflag "k8s.io/component-base/cli/flag"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/daemon"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

// Options are the operator's command-line settings.
type Options struct {
	Kubeconfig string
	Namespace  string
	InstallCRD bool
	Allocation bool
	// ListPodsByNamespace: the pod cache's first list is one list per namespace.
	ListPodsByNamespace bool
	// Quota: read Kueue's queues and the ResourceQuotas; QuotaDRAResources are the resource
	// names Kueue counts DRA GPUs in (its deviceClassMappings).
	Quota             bool
	QuotaDRAResources []string
	// Topology: group the GPU nodes into topology domains by node labels and Kueue's
	// Topologies, for status.topology.
	Topology         bool
	DefaultInventory string
	ResyncPeriod     time.Duration
	Workers          int
	MaxStatusNodes   int
	MinSyncInterval  time.Duration
	PerNodeMetrics   bool
	QPS              float64
	Burst            int
	RecordQPS        float64
	RecordBurst      int
	Compression      bool
	SteadyProcs      int

	// UsageOptions: reading DCGM exporter's utilisation from Prometheus (--prometheus-url).
	UsageOptions

	// Options: the endpoints, --pprof-bind-address, leader election and logging.
	daemon.Options

	// BeforeInventorySync, for tests only (no flag), runs at the start of every inventory sync.
	BeforeInventorySync func(name string)
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		InstallCRD:       true,
		Allocation:       true,
		Quota:            true,
		Topology:         true,
		UsageOptions:     defaultUsageOptions(),
		DefaultInventory: homelabv1.DefaultInventoryName,
		ResyncPeriod:     30 * time.Second,
		Workers:          2,
		MaxStatusNodes:   inventory.DefaultMaxStatusNodes,
		MinSyncInterval:  time.Second,
		QPS:              20,
		Burst:            40,
		RecordQPS:        100,
		RecordBurst:      200,
		SteadyProcs:      1,
		Options:          daemon.NewOptions(name),
	}
}

// Flags returns the options' flags in the sections --help prints, as Kubernetes' own
// components group them.
func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	o.addGenericFlags(fss.FlagSet("generic"))
	o.AddLeaderElectionFlags(fss.FlagSet("leader election"), "writes")
	o.AddEndpointFlags(fss.FlagSet("metrics"))
	fss.FlagSet("metrics").BoolVar(&o.PerNodeMetrics, "metrics-per-node", o.PerNodeMetrics, "Also export a series per not-ready GPU node (label cardinality grows with the fleet).")
	o.addUsageFlags(fss.FlagSet("usage"))
	o.AddLoggingFlags(fss.FlagSet("logging"))
	return fss
}

func (o *Options) addGenericFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig. Without it: the in-cluster config, else $KUBECONFIG or ~/.kube/config, as kubectl does.")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "Namespace of the gpu-node-status ConfigMap and the leader-election Lease. Default: $POD_NAMESPACE, else the kubeconfig context's namespace, else \"default\".")
	fs.BoolVar(&o.InstallCRD, "install-crd", o.InstallCRD, "Create or update the GpuInventory CRD at startup. Set to false when the CRD is installed with 'kubectl apply -f manifests/crd/' and the operator may not write CRDs.")
	fs.BoolVar(&o.Allocation, "allocation", o.Allocation, "Read pods (and DRA ResourceClaims) to report which GPUs are allocated, free and waited for. Set to false where the operator may not read pods.")
	fs.BoolVar(&o.ListPodsByNamespace, "list-pods-by-namespace", o.ListPodsByNamespace, "At start, list the pods namespace by namespace, three at a time, rather than all at once: the API server encodes them on several cores, and the first complete status comes sooner on a cluster with many pods. Needs \"list\" on namespaces (manifests/list-pods-by-namespace); without it, with fewer than two or more than 256 namespaces, the pods are listed at once.")
	fs.BoolVar(&o.Quota, "quota", o.Quota, "Read Kueue's ResourceFlavors, ClusterQueues, Cohorts and LocalQueues (where Kueue is installed, picked up while running) and the ResourceQuotas, to put quota beside the hardware in status.quota. Set to false where the operator may not read them.")
	fs.BoolVar(&o.Topology, "topology", o.Topology, "Group the GPU nodes into topology domains (zones, network blocks, racks, NVLink cliques) by their labels and Kueue's Topologies (read where Kueue serves them), and count per domain the free GPUs and the gangs that fit, in status.topology. Set to false to keep no topology labels in memory and read no Topologies.")
	fs.StringSliceVar(&o.QuotaDRAResources, "quota-dra-resources", o.QuotaDRAResources, "Resource names in which Kueue counts DRA GPUs (the names of its resources.deviceClassMappings): quota given in them is compared with the nodes' DRA GPUs.")
	fs.StringVar(&o.DefaultInventory, "default-inventory", o.DefaultInventory, "Name of a GpuInventory covering all nodes that is created at startup if missing; empty creates none.")
	fs.DurationVar(&o.ResyncPeriod, "resync-period", o.ResyncPeriod, "How often every inventory is re-examined; costs no API call when nothing changed.")
	fs.IntVar(&o.Workers, "workers", o.Workers, "Number of inventories synced in parallel.")
	fs.IntVar(&o.MaxStatusNodes, "max-status-nodes", o.MaxStatusNodes, "Most GPU nodes listed in a GpuInventory's status.nodes and in the ConfigMap (problem nodes first); totals always count every node.")
	fs.DurationVar(&o.MinSyncInterval, "min-sync-interval", o.MinSyncInterval, "Under churn, write each inventory's status at most once per interval (the ConfigMap once per 4 intervals); a change in a quiet cluster is still synced at once (the ConfigMap one interval after the status).")
	fs.Float64Var(&o.QPS, "kube-api-qps", o.QPS, "Sustained queries per second to the API server.")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "Burst of queries to the API server.")
	fs.Float64Var(&o.RecordQPS, "gpunode-qps", o.RecordQPS, "Sustained writes per second of GpuNode records (a client of their own): the first start on a large cluster creates one per GPU node.")
	fs.IntVar(&o.RecordBurst, "gpunode-burst", o.RecordBurst, "Burst of GpuNode record writes.")
	fs.BoolVar(&o.Compression, "kube-api-compression", o.Compression, "Ask the API server to gzip large responses: saves bandwidth on a slow link to a remote API server, costs CPU on both sides.")
	fs.IntVar(&o.SteadyProcs, "steady-gomaxprocs", o.SteadyProcs, "Once the caches have synced and every controller has made its first pass, run Go code on at most this many CPUs at once (GOMAXPROCS): the start and every re-list use all the runtime allows, the steady trickle of events costs less CPU on one. 0 keeps the runtime's choice; GOMAXPROCS in the environment overrides this flag.")
	o.AddPprofFlag(fs)
}

// Validate reports settings that cannot work.
func (o *Options) Validate() error {
	var errs []error
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--workers must be at least 1, got %d", o.Workers))
	}
	if o.MaxStatusNodes < 1 {
		errs = append(errs, fmt.Errorf("--max-status-nodes must be at least 1, got %d", o.MaxStatusNodes))
	}
	if o.MinSyncInterval < 0 {
		errs = append(errs, fmt.Errorf("--min-sync-interval must not be negative, got %s", o.MinSyncInterval))
	}
	if o.SteadyProcs < 0 {
		errs = append(errs, fmt.Errorf("--steady-gomaxprocs must not be negative, got %d", o.SteadyProcs))
	}
	if o.ResyncPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--resync-period must be positive, got %s", o.ResyncPeriod))
	}
	if o.QPS <= 0 || o.Burst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive"))
	}
	if o.RecordQPS <= 0 || o.RecordBurst < 1 {
		errs = append(errs, fmt.Errorf("--gpunode-qps and --gpunode-burst must be positive"))
	}
	errs = append(errs, o.Options.Validate()...)
	errs = append(errs, o.validateUsage(o.Allocation)...)
	return errors.Join(errs...)
}

// ClientConfig resolves the API server connection and the operator's namespace.
func (o *Options) ClientConfig() (*rest.Config, string, error) {
	config, namespace, err := daemon.LoadConfig(o.Kubeconfig, o.Namespace)
	if err != nil {
		return nil, "", err
	}
	config.QPS, config.Burst = float32(o.QPS), o.Burst
	config.UserAgent = name
	return config, namespace, nil
}
