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

package claimcache

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// StreamPageSize is how many claims StreamClaims asks for at a time: the reader holds one
// item at a time whatever the page size, while each page costs a round trip and the
// API server's start of a list, so small pages make a large list several times slower.
const StreamPageSize = 5000

// MaxClaimBytes bounds one ResourceClaim's message in a stream: far above any claim etcd
// stores, far below what a size claimed by a broken server could make the reader allocate.
const MaxClaimBytes = 16 << 20

// claimList reads ResourceClaim lists one claim at a time.
var claimList = kubeproto.List{Resource: "resourceclaims", MaxItemBytes: MaxClaimBytes}

// StreamClaims calls fn with each ResourceClaim of namespace ("" for all) that the
// allocation keeps (DecodeClaim), in pages of StreamPageSize, each read as a protobuf stream
// that holds one claim's bytes at a time. client is a REST client for resource.k8s.io/v1
// (a clientset's ResourceV1().RESTClient()). An error of fn ends the stream and is returned;
// so are the API server's (apierrors.IsNotFound: the server does not serve the API).
func StreamClaims(ctx context.Context, client rest.Interface, namespace string, fn func(*allocation.Claim) error) error {
	return claimList.Stream(ctx, client, namespace, metav1.ListOptions{Limit: StreamPageSize}, kubeproto.Decoded("ResourceClaim", DecodeClaim, fn))
}
