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

package kubeproto

import "k8s.io/client-go/rest"

// StreamConfig is a copy of config for a client that reads lists and watches in bulk:
// protobuf (JSON when the server has no protobuf), over HTTP/1.1 on a connection of its own.
// Over HTTP/2 the client writes a flow-control window update back for every 4 KiB it reads,
// and one large list holds up every other request that shares the connection.
func StreamConfig(config *rest.Config) *rest.Config {
	cfg := rest.CopyConfig(config)
	cfg.ContentType = ContentType
	cfg.AcceptContentTypes = ContentType + ",application/json"
	cfg.NextProtos = []string{"http/1.1"}
	return cfg
}
