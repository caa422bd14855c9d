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

package member

import (
	"net"
	"net/url"
	"strings"

	"k8s.io/client-go/rest"
)

// Endpoint is the API server a config reaches, as a key: scheme, host in lower case, the
// port (443 when implied) and the path without a trailing slash. Two members with the same
// endpoint are the same cluster; two endpoints can still be one cluster (a load balancer
// and a node address), which only the member's answers tell.
func Endpoint(cfg *rest.Config) string {
	host := cfg.Host
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	u, err := url.Parse(host)
	if err != nil {
		return strings.ToLower(cfg.Host)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[strings.ToLower(u.Scheme)]
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port) +
		strings.TrimSuffix(u.Path, "/")
}
