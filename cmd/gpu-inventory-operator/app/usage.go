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
	"fmt"
	"net/url"
	"time"

	"github.com/spf13/pflag"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/usage"
)

// UsageOptions say where and how to read DCGM exporter's utilisation from Prometheus, for
// status.usage. Off without PrometheusURL.
type UsageOptions struct {
	PrometheusURL             string
	PrometheusBearerTokenFile string
	PrometheusCAFile          string
	PrometheusTimeout         time.Duration
	Interval                  time.Duration
	IdleWindow                time.Duration
	IdleBelow                 float64
	IdleAfter                 time.Duration
}

func defaultUsageOptions() UsageOptions {
	return UsageOptions{PrometheusTimeout: 10 * time.Second, Interval: time.Minute, IdleWindow: 24 * time.Hour,
		IdleBelow: 0.05, IdleAfter: 4 * time.Hour}
}

func (o *UsageOptions) addUsageFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.PrometheusURL, "prometheus-url", o.PrometheusURL, "Prometheus (or a Prometheus-compatible API) that scrapes DCGM exporter, e.g. http://prometheus-operated.monitoring:9090: the operator asks it, read-only, what the pods that hold GPUs use of them, for status.usage. Empty: off.")
	fs.StringVar(&o.PrometheusBearerTokenFile, "prometheus-bearer-token-file", o.PrometheusBearerTokenFile, "File holding a bearer token sent to Prometheus, read at each query.")
	fs.StringVar(&o.PrometheusCAFile, "prometheus-ca-file", o.PrometheusCAFile, "PEM file of the CA certificates that verify Prometheus' serving certificate.")
	fs.DurationVar(&o.PrometheusTimeout, "prometheus-timeout", o.PrometheusTimeout, "Longest wait for Prometheus' answers (all queries of one reading); beyond it the UsageUnknown condition says Prometheus is unreachable.")
	fs.DurationVar(&o.Interval, "usage-interval", o.Interval, "How often Prometheus is asked (at least 1m).")
	fs.DurationVar(&o.IdleWindow, "idle-window", o.IdleWindow, "Span the GPU-hours held and idle are counted over.")
	fs.Float64Var(&o.IdleBelow, "idle-below", o.IdleBelow, "Utilisation (a 0-1 fraction; DCGM_FI_DEV_GPU_UTIL's percent is divided by 100) below which a GPU counts as idle.")
	fs.DurationVar(&o.IdleAfter, "idle-after", o.IdleAfter, "How long a pod's GPUs must be idle for them to count in idleGpus and gpu_inventory_idle_gpus (and the GpuHeldIdle alert).")
}

func (o *UsageOptions) validateUsage(allocation bool) []error {
	if o.PrometheusURL == "" {
		return nil
	}
	var errs []error
	if u, err := url.Parse(o.PrometheusURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("--prometheus-url must be an http or https URL, got %q", o.PrometheusURL))
	}
	if !allocation {
		errs = append(errs, fmt.Errorf("--prometheus-url needs --allocation: usage is read for the pods that hold GPUs"))
	}
	if o.PrometheusTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--prometheus-timeout must be positive, got %s", o.PrometheusTimeout))
	}
	if o.Interval < usage.Step {
		errs = append(errs, fmt.Errorf("--usage-interval must be at least %s, got %s", usage.Step, o.Interval))
	}
	if o.IdleWindow < time.Hour || o.IdleWindow%usage.Step != 0 {
		errs = append(errs, fmt.Errorf("--idle-window must be whole minutes, at least 1h, got %s", o.IdleWindow))
	}
	if !(o.IdleBelow > 0 && o.IdleBelow <= 1) {
		errs = append(errs, fmt.Errorf("--idle-below must be a fraction in (0, 1], got %g", o.IdleBelow))
	}
	if o.IdleAfter < 0 {
		errs = append(errs, fmt.Errorf("--idle-after must not be negative, got %s", o.IdleAfter))
	}
	return errs
}
