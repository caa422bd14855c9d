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

package plugin

import (
	"errors"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// mayParseForever matches bytes that could hold a quantity whose parsing takes unbounded time
// (a long run of digits, a large exponent), which the generated decoder parses unbounded.
var mayParseForever = regexp.MustCompile(`[eE][+-]?[0-9]{4}|[0-9.]{40}`)

// unmarshalPod decodes data with the generated decoder; false when it fails or panics (it
// slices with unchecked lengths).
func unmarshalPod(data []byte) (pod *corev1.Pod, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	pod = &corev1.Pod{}
	return pod, pod.Unmarshal(data) == nil
}

// Whatever the bytes, the hand decoder reads a pod as the generated one does, for all that
// capacity keeps and counts of it.
func FuzzReadPod(f *testing.F) {
	for _, p := range boundPods() {
		data, err := p.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := readPod(data)
		if errors.Is(err, kubeproto.ErrAbsurdQuantity) || mayParseForever.Match(data) {
			return
		}
		want, ok := unmarshalPod(data)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("readPod fails (%v) where the generated decoder does not", err)
		}
		if diff := cmp.Diff(capacity.KeepPod(want), capacity.KeepPod(got), equalObjects); diff != "" {
			t.Fatalf("kept (-generated +hand):\n%s", diff)
		}
		if diff := cmp.Diff(capacity.Requests(want), capacity.Requests(got), equalObjects); diff != "" {
			t.Fatalf("requests (-generated +hand):\n%s", diff)
		}
	})
}
