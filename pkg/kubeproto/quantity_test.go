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

package kubeproto_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// The bounds: at most 64 bytes and three digits of exponent (after the last e or E, wherever
// they stand); the same answer for a string and its bytes.
func TestAbsurdQuantity(t *testing.T) {
	for s, want := range map[string]bool{
		"":                             false,
		"8":                            false,
		"500m":                         false,
		"1e999":                        false,
		"1E-999":                       false,
		"1e1000":                       true,
		"1E-1000":                      true,
		"1e9e999":                      false, // digits count after the last e
		"1e9999e9":                     false,
		"1e1.0.0.0":                    true, // every digit after the e counts
		"1Ei":                          false,
		strings.Repeat("9", 64):        false,
		strings.Repeat("9", 65):        true,
		"0." + strings.Repeat("0", 62): false,
		"0." + strings.Repeat("0", 63): true,
		"1é9999":                       false, // no e: é is not one
	} {
		if got := kubeproto.AbsurdQuantity(s); got != want {
			t.Errorf("AbsurdQuantity(%q) = %v; want %v", s, got, want)
		}
		if got := kubeproto.AbsurdQuantity([]byte(s)); got != want {
			t.Errorf("AbsurdQuantity([]byte(%q)) = %v; want %v", s, got, want)
		}
	}
}

// Quantity refuses a string beyond the bounds with ErrAbsurdQuantity, and parses one within
// them as ParseQuantity does.
func TestQuantityRefusesAbsurdStrings(t *testing.T) {
	message := func(s string) []byte {
		return protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), s)
	}
	for _, s := range []string{"1e1000", strings.Repeat("9", 65)} {
		var q resource.Quantity
		if err := kubeproto.Quantity(message(s), &q); !errors.Is(err, kubeproto.ErrAbsurdQuantity) {
			t.Errorf("Quantity(%.20s) error %v; want ErrAbsurdQuantity", s, err)
		}
	}
	for _, s := range []string{"1e999", strings.Repeat("9", 64), "500m"} {
		var q resource.Quantity
		if err := kubeproto.Quantity(message(s), &q); err != nil || q.Cmp(resource.MustParse(s)) != 0 {
			t.Errorf("Quantity(%.20s) = %v, %v; want %s", s, q.String(), err, s)
		}
	}
}
