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
	"strings"
	"testing"
	"time"
)

// Usage is off by default; with --prometheus-url every setting is checked, and each bad one
// says which flag is wrong.
func TestValidateUsage(t *testing.T) {
	if u := NewOptions().UsageOptions; u.PrometheusURL != "" || u.PrometheusTimeout != 10*time.Second || u.Interval != time.Minute ||
		u.IdleWindow != 24*time.Hour || u.IdleBelow != 0.05 || u.IdleAfter != 4*time.Hour {
		t.Errorf("usage defaults = %+v; want off, 10s, 1m, 24h, 0.05, 4h", u)
	}
	on := func(o *Options) { o.PrometheusURL = "http://prometheus.monitoring:9090" }
	opts := NewOptions()
	on(opts)
	if err := opts.Validate(); err != nil {
		t.Fatalf("--prometheus-url with the defaults: %v", err)
	}
	cases := map[string]func(*Options){
		"--prometheus-url must be an http": func(o *Options) { o.PrometheusURL = "prometheus:9090" },
		"--prometheus-url needs --allocat": func(o *Options) { o.Allocation = false },
		"--prometheus-timeout must be pos": func(o *Options) { o.PrometheusTimeout = 0 },
		"--usage-interval must be at leas": func(o *Options) { o.Interval = 30 * time.Second },
		"--idle-window must be whole minu": func(o *Options) { o.IdleWindow = 90 * time.Second },
		"--idle-below must be a fraction":  func(o *Options) { o.IdleBelow = 5 },
		"--idle-after must not be negativ": func(o *Options) { o.IdleAfter = -time.Hour },
	}
	for want, mutate := range cases {
		opts := NewOptions()
		on(opts)
		mutate(opts)
		if err := opts.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want an error containing %q", err, want)
		}
	}
}
