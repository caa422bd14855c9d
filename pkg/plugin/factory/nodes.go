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

package factory

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/nodecache"
)

// The node list of scan and nodes: read a page at a time as a protobuf stream.

// nodeListError is an error of the node list, for ExplainNodes.

type nodeListError struct{ err error }

func (e nodeListError) Error() string { return e.err.Error() }
func (e nodeListError) Unwrap() error { return e.err }

// ExplainNodes explains an error of StreamNodes's request; others are as they are.
func (c *Factory) ExplainNodes(err error) error {
	if se, ok := err.(nodeListError); ok {
		return c.Explain(se.err, ListNodes)
	}
	return err
}

// StreamNodes reads one page of the node list as a protobuf stream, decoded by decode.
func StreamNodes(ctx context.Context, core rest.Interface, opts metav1.ListOptions, decode func([]byte) (*corev1.Node, error), visit func(*corev1.Node)) (metav1.ListMeta, int, error) {
	body, err := core.Get().Resource("nodes").VersionedParams(&opts, kubeclient.ParameterCodec).
		SetHeader("Accept", "application/vnd.kubernetes.protobuf").Stream(ctx)
	if err != nil {
		return metav1.ListMeta{}, 0, nodeListError{err}
	}
	defer body.Close()
	meta, n, err := nodecache.DecodeNodeStream(body, decode, visit)
	if err != nil {
		return meta, n, fmt.Errorf("read the node list: %w", err)
	}
	return meta, n, nil
}
