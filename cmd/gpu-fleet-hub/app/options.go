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
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	cliflag "k8s.io/component-base/cli/flag"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/daemon"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/member"
)

// Options are the hub's command-line settings.
type Options struct {
	Kubeconfig string
	Namespace  string
	InstallCRD bool
	// ClusterProfileProviderFile names the access providers the hub reaches ClusterProfiles'
	// clusters with (cluster-inventory-api's pkg/access file); "": none.
	ClusterProfileProviderFile string
	// MemberMaxObjectBytes caps each object read from a member.
	MemberMaxObjectBytes int64
	MinSyncInterval      time.Duration
	Workers              int
	QPS                  float64
	Burst                int

	// Dispatch makes the hub MultiKueue's dispatcher (homelabv1.MultiKueueDispatcherName) on
	// its own cluster, the MultiKueue manager.
	Dispatch bool
	// DispatchInventory is the GpuInventory read on each worker; KueueNamespace where the
	// MultiKueueClusters' kubeconfig Secrets are.
	DispatchInventory string
	KueueNamespace    string
	// Nominations, NominationHold and NominationTimeout are nominate.Options'.
	Nominations       int
	NominationHold    time.Duration
	NominationTimeout time.Duration

	// Options: the endpoints, --pprof-bind-address, leader election and logging, as the
	// operator's.
	daemon.Options

	// MemberListTimeout bounds a member's list and the start of its watch, MemberBackoff
	// spaces a member's failed tries; for tests only (no flag; zero: the defaults).
	MemberListTimeout time.Duration
	MemberBackoff     *wait.Backoff
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		InstallCRD:           true,
		MemberMaxObjectBytes: member.DefaultMaxObjectBytes,
		MinSyncInterval:      time.Second,
		Workers:              2,
		QPS:                  20,
		Burst:                40,
		DispatchInventory:    homelabv1.DefaultInventoryName,
		KueueNamespace:       homelabv1.DefaultKueueNamespace,
		Nominations:          1,
		NominationHold:       30 * time.Second,
		NominationTimeout:    5 * time.Minute,
		Options:              daemon.NewOptions(name),
	}
}

// Flags returns the options' flags in the sections --help prints.
func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	o.addGenericFlags(fss.FlagSet("generic"))
	o.addMemberFlags(fss.FlagSet("members"))
	o.addDispatchFlags(fss.FlagSet("dispatch"))
	o.AddLeaderElectionFlags(fss.FlagSet("leader election"), "reads members and writes")
	o.AddEndpointFlags(fss.FlagSet("metrics"))
	o.AddLoggingFlags(fss.FlagSet("logging"))
	return fss
}

func (o *Options) addGenericFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig of the hub cluster. Without it: the in-cluster config, else $KUBECONFIG or ~/.kube/config, as kubectl does.")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "Namespace of the leader-election Lease (and of the secretreader plugin's token Secrets). Default: $POD_NAMESPACE, else the kubeconfig context's namespace, else \"default\".")
	fs.BoolVar(&o.InstallCRD, "install-crd", o.InstallCRD, "Create or update the GpuFleet CRD at startup. Set to false when the CRD is installed with 'kubectl apply -f manifests/crd/homelab.youngju.dev_gpufleets.yaml' and the hub may not write CRDs.")
	fs.DurationVar(&o.MinSyncInterval, "min-sync-interval", o.MinSyncInterval, "Under churn, write each GpuFleet's status at most once per interval; a change in a quiet fleet is written at once.")
	fs.IntVar(&o.Workers, "workers", o.Workers, "Number of GpuFleets synced in parallel.")
	fs.Float64Var(&o.QPS, "kube-api-qps", o.QPS, "Sustained queries per second to the hub's API server.")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "Burst of queries to the hub's API server.")
	o.AddPprofFlag(fs)
}

func (o *Options) addMemberFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ClusterProfileProviderFile, "clusterprofile-provider-file", o.ClusterProfileProviderFile, "JSON file of the access providers the hub reaches a ClusterProfile's cluster with (cluster-inventory-api's pkg/access: {\"providers\": [{\"name\": ..., \"execConfig\": ...}]}); the first one a profile offers is used. Empty: ClusterProfiles are listed as members without a usable access provider.")
	fs.Int64Var(&o.MemberMaxObjectBytes, "member-max-object-bytes", o.MemberMaxObjectBytes, "Largest object read from a member (a whole answer, or one event of a watch); a larger one is cut off and the member is Unreachable with reason AnswerTooLarge.")
}

func (o *Options) addDispatchFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Dispatch, "dispatch", o.Dispatch, "Be MultiKueue's dispatcher on this cluster (Kueue's multiKueue.dispatcherName: "+homelabv1.MultiKueueDispatcherName+"): nominate, for every pending MultiKueue Workload, the workers where all of it fits now, from their GpuInventories.")
	fs.StringVar(&o.DispatchInventory, "dispatch-inventory", o.DispatchInventory, "The GpuInventory read on each MultiKueue worker.")
	fs.StringVar(&o.KueueNamespace, "kueue-namespace", o.KueueNamespace, "Namespace of Kueue on this cluster, where the MultiKueueClusters' kubeconfig Secrets are.")
	fs.IntVar(&o.Nominations, "nominations", o.Nominations, "How many workers to nominate for a Workload, best first (at most 20). Each nominated worker reserves quota for a copy.")
	fs.DurationVar(&o.NominationHold, "nomination-hold", o.NominationHold, "How long a nomination stands before a better worker may replace it (a worker that stops fitting or cannot be read is replaced at once).")
	fs.DurationVar(&o.NominationTimeout, "nomination-timeout", o.NominationTimeout, "How long a nominated worker may take to admit before the next best worker is added.")
}

// Validate reports settings that cannot work.
func (o *Options) Validate() error {
	var errs []error
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--workers must be at least 1, got %d", o.Workers))
	}
	if o.MinSyncInterval < 0 {
		errs = append(errs, fmt.Errorf("--min-sync-interval must not be negative, got %s", o.MinSyncInterval))
	}
	if o.MemberMaxObjectBytes < 64<<10 {
		errs = append(errs, fmt.Errorf("--member-max-object-bytes must be at least 65536 (a GpuInventory without its node list takes a few KiB), got %d", o.MemberMaxObjectBytes))
	}
	if o.Dispatch {
		if o.Nominations < 1 || o.Nominations > 20 {
			errs = append(errs, fmt.Errorf("--nominations must be between 1 and 20 (MultiKueue reads at most 20), got %d", o.Nominations))
		}
		if o.NominationHold <= 0 || o.NominationTimeout <= 0 {
			errs = append(errs, errors.New("--nomination-hold and --nomination-timeout must be positive"))
		}
		if o.DispatchInventory == "" || o.KueueNamespace == "" {
			errs = append(errs, errors.New("--dispatch-inventory and --kueue-namespace must not be empty with --dispatch"))
		}
	}
	if o.QPS <= 0 || o.Burst < 1 {
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must be positive"))
	}
	if o.ClusterProfileProviderFile != "" {
		if _, err := o.Providers(); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, o.Options.Validate()...)
	return errors.Join(errs...)
}

// Providers reads --clusterprofile-provider-file: nil without one.
func (o *Options) Providers() (*access.Config, error) {
	if o.ClusterProfileProviderFile == "" {
		return nil, nil
	}
	providers, err := access.NewFromFile(o.ClusterProfileProviderFile)
	if err != nil {
		return nil, fmt.Errorf("--clusterprofile-provider-file %s: %w", o.ClusterProfileProviderFile, err)
	}
	for i, p := range providers.Providers {
		if p.Name == "" {
			return nil, fmt.Errorf("--clusterprofile-provider-file %s: provider %d has no name", o.ClusterProfileProviderFile, i)
		}
	}
	return providers, nil
}

// ClientConfig resolves the hub's API server connection and the hub's namespace.
func (o *Options) ClientConfig() (*rest.Config, string, error) {
	config, namespace, err := daemon.LoadConfig(o.Kubeconfig, o.Namespace)
	if err != nil {
		return nil, "", err
	}
	config.QPS, config.Burst = float32(o.QPS), o.Burst
	config.UserAgent = name
	return config, namespace, nil
}
