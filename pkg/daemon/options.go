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

package daemon

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
)

// Options are the settings every daemon has: its endpoints, its profiles, its leader election
// and its logging. A binary's options embed them.
type Options struct {
	MetricsAddress string
	HealthAddress  string
	PprofAddress   string

	LeaderElect      bool
	LeaderElectionID string
	LeaseDuration    time.Duration
	RenewDeadline    time.Duration
	RetryPeriod      time.Duration

	// Logging is component-base's logging configuration: --logging-format (text or json),
	// -v, --vmodule, --log-flush-frequency, as in Kubernetes' own components.
	Logging *logsapi.LoggingConfiguration
}

// NewOptions returns the defaults; lease is the default name of the leader-election Lease.
func NewOptions(lease string) Options {
	return Options{
		MetricsAddress:   ":8080",
		HealthAddress:    ":8081",
		LeaderElectionID: lease,
		LeaseDuration:    15 * time.Second,
		RenewDeadline:    10 * time.Second,
		RetryPeriod:      2 * time.Second,
		Logging:          logsapi.NewLoggingConfiguration(),
	}
}

// AddPprofFlag adds --pprof-bind-address (to the generic section).
func (o *Options) AddPprofFlag(fs *pflag.FlagSet) {
	fs.StringVar(&o.PprofAddress, "pprof-bind-address", o.PprofAddress, "Serve Go's /debug/pprof/ profiles on this address (for example 127.0.0.1:6060); empty: off.")
}

// AddLeaderElectionFlags adds the leader-election flags; guarded says what only the leader
// does ("writes").
func (o *Options) AddLeaderElectionFlags(fs *pflag.FlagSet, guarded string) {
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Hold a Lease before doing anything, so that only one of several replicas "+guarded+".")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "Name of the leader-election Lease.")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", o.LeaseDuration, "How long standbys wait after the last renewal before taking a lease over.")
	fs.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", o.RenewDeadline, "How long the leader keeps retrying to renew before it gives up leadership.")
	fs.DurationVar(&o.RetryPeriod, "leader-election-retry-period", o.RetryPeriod, "How often candidates try to acquire or renew the lease.")
}

// AddEndpointFlags adds the addresses of /metrics and of /healthz and /readyz (to the
// metrics section).
func (o *Options) AddEndpointFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.MetricsAddress, "metrics-bind-address", o.MetricsAddress, "Serve Prometheus /metrics on this address; 0 turns it off.")
	fs.StringVar(&o.HealthAddress, "health-probe-bind-address", o.HealthAddress, "Serve /healthz and /readyz on this address; 0 turns it off.")
}

// AddLoggingFlags adds component-base's logging flags (to the logging section).
func (o *Options) AddLoggingFlags(fs *pflag.FlagSet) {
	logsapi.AddFlags(o.Logging, fs)
}

// Validate reports settings that cannot work: the logging's, then the leader election's.
func (o *Options) Validate() []error {
	var errs []error
	if err := logsapi.Validate(o.Logging, nil, nil).ToAggregate(); err != nil {
		errs = append(errs, fmt.Errorf("logging: %w", err))
	}
	if !o.LeaderElect {
		return errs
	}
	if o.LeaderElectionID == "" {
		errs = append(errs, errors.New("--leader-election-id must not be empty with --leader-elect"))
	}
	if !(o.LeaseDuration > o.RenewDeadline && o.RenewDeadline > o.RetryPeriod && o.RetryPeriod > 0) {
		errs = append(errs, fmt.Errorf("leader election needs lease duration (%s) > renew deadline (%s) > retry period (%s) > 0",
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod))
	}
	return errs
}

// LoadConfig is the in-cluster config, else the kubeconfig (kubeconfig, else $KUBECONFIG or
// ~/.kube/config), and the namespace: namespace, else $POD_NAMESPACE, else the
// kubeconfig's (in a cluster: the ServiceAccount's), else "default".
func LoadConfig(kubeconfig, namespace string) (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	var config *rest.Config
	if kubeconfig == "" {
		config, _ = rest.InClusterConfig()
	}
	if config == nil {
		var err error
		if config, err = loader.ClientConfig(); err != nil {
			return nil, "", fmt.Errorf("load kubeconfig (set --kubeconfig or $KUBECONFIG, or run in a cluster): %w", err)
		}
	}
	if namespace == "" {
		namespace = os.Getenv("POD_NAMESPACE")
	}
	if namespace == "" {
		if ns, _, err := loader.Namespace(); err == nil && ns != "" {
			namespace = ns
		}
	}
	if namespace == "" {
		namespace = "default"
	}
	return config, namespace, nil
}
