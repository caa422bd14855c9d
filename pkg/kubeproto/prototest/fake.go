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

package prototest

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
)

// ListOnly is a fake clientset's typed client as an informer's client: like the fake
// clientset, it tells the reflector that it cannot serve watch-lists, so the reflector lists
// and then watches.
type ListOnly[L runtime.Object] struct{ kubeclient.ListWatcher[L] }

// IsWatchListSemanticsUnSupported reports that the fake serves no watch-lists.
func (ListOnly[L]) IsWatchListSemanticsUnSupported() bool { return true }
