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

package slicecache

import "testing"

// A device's IDs read back exactly as the driver spelt them, packed or not; only the
// driver's spellings are packed.
func TestDeviceIDsReadBackExactly(t *testing.T) {
	for _, c := range []struct {
		uuid, parentUUID, pciBusID string
		packed                     bool
	}{
		{"GPU-3d8b1043-01c0-5b13-b0f4-069ffe7938e0", "", "0000:0f:00.0", true},
		{"MIG-d0a80b69-a228-5b3c-bfe7-52e17bf34200", "GPU-3d8b1043-01c0-5b13-b0f4-069ffe7938e0", "00ff:a7:1f.7", true},
		{"", "", "", true},
		{"GPU-3D8B1043-01C0-5B13-B0F4-069FFE7938E0", "", "0000:0F:00.0", false}, // upper case
		{"MIG-GPU-3d8b1043-01c0-5b13-b0f4-069ffe7938e0/1/0", "GPU-dra-1-gpu-0", "00000000:0f:00.0", false},
		{"GPU-3d8b1043-01c0-5b13-b0f4-069ffe7938e", "GPU-3d8b1043-01c0-5b13-b0f4-069ffe7938e0 ", "0000:0g:00.0", false},
		{"gpu-3d8b1043-01c0-5b13-b0f4-069ffe7938e0", "GPU-3d8b1043+01c0-5b13-b0f4-069ffe7938e0", "0000-0f:00.0", false},
	} {
		d := (&trimmer{}).newDevice("gpu-0", c.uuid, c.parentUUID, c.pciBusID, model{}, nil)
		uuid, parentUUID, pciBusID := d.ids()
		if uuid != c.uuid || parentUUID != c.parentUUID || pciBusID != c.pciBusID {
			t.Errorf("%q %q %q read back as %q %q %q", c.uuid, c.parentUUID, c.pciBusID, uuid, parentUUID, pciBusID)
		}
		if packed := d.more == nil; packed != c.packed {
			t.Errorf("%q %q %q: packed %v, want %v", c.uuid, c.parentUUID, c.pciBusID, packed, c.packed)
		}
	}
}

// Any string reads back as it was, and two devices' IDs are equal when their strings are.
func FuzzDeviceIDs(f *testing.F) {
	f.Add("GPU-3d8b1043-01c0-5b13-b0f4-069ffe7938e0", "0000:0f:00.0")
	f.Add("MIG-d0a80b69-a228-5b3c-bfe7-52e17bf34200", "0000:0F:00.0")
	f.Add("", "x")
	f.Fuzz(func(t *testing.T, a, b string) {
		tr := &trimmer{}
		da, db := tr.newDevice("", a, b, a, model{}, nil), tr.newDevice("", b, a, b, model{}, nil)
		uuid, parentUUID, pciBusID := da.ids()
		if uuid != a || parentUUID != b || pciBusID != a {
			t.Fatalf("%q, %q read back as %q %q %q", a, b, uuid, parentUUID, pciBusID)
		}
		if sameDevice(da, db) != (a == b) {
			t.Fatalf("%q and %q: same device %v", a, b, sameDevice(da, db))
		}
	})
}
