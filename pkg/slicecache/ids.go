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

import "github.com/youngju-dev/gpu-inventory-operator/pkg/intern"

// A device's UUIDs are unique to it (or to its GPU), and its PCI bus ID packed is smaller
// than a shared string's header: the cache keeps them packed, as the hex digits of the
// spelling NVIDIA's driver uses. A value in any other spelling is kept as it came, in the
// device's deviceMore.

// idElsewhere is the spelling of a packed ID whose value is held as a string elsewhere.
const idElsewhere = 0xff

// uuidSpellings are the UUID spellings kept packed: x is a lower-case hex digit, anything
// else is itself. Spelling 0 is the empty string.
var uuidSpellings = [...]string{1: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", 2: "MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"}

// pciSpellings are the PCI bus ID spellings kept packed (domain:bus:device.function).
var pciSpellings = [...]string{1: "xxxx:xx:xx.x"}

// packedUUID is a UUID of one of uuidSpellings, as its spelling and its digits.
type packedUUID struct {
	spelling uint8
	digits   [16]byte
}

// packedPCI is a PCI bus ID of one of pciSpellings, as its spelling and its digits.
type packedPCI struct {
	spelling uint8
	digits   [5]byte
}

// pack packs s into u, reporting false (and marking u as held elsewhere) if s is not in
// one of uuidSpellings.
func (u *packedUUID) pack(s string) bool {
	*u = packedUUID{}
	return packID(s, uuidSpellings[:], &u.spelling, u.digits[:])
}

func (u *packedUUID) String() string { return unpackID(uuidSpellings[:], u.spelling, u.digits[:]) }

// pack packs s into p, as packedUUID.pack does.
func (p *packedPCI) pack(s string) bool {
	*p = packedPCI{}
	return packID(s, pciSpellings[:], &p.spelling, p.digits[:])
}

func (p *packedPCI) String() string { return unpackID(pciSpellings[:], p.spelling, p.digits[:]) }

// packID packs s as the first of spellings that spells it; the empty string is spelling 0.
func packID(s string, spellings []string, spelling *uint8, digits []byte) bool {
	if s == "" {
		return true
	}
	for i, layout := range spellings {
		if layout != "" && intern.PackHex(layout, s, digits) {
			*spelling = uint8(i)
			return true
		}
	}
	*spelling = idElsewhere
	clear(digits)
	return false
}

// unpackID is the string packID packed: "" for spelling 0 and for one held elsewhere.
func unpackID(spellings []string, spelling uint8, digits []byte) string {
	if spelling == 0 || int(spelling) >= len(spellings) {
		return ""
	}
	return intern.UnpackHex(spellings[spelling], digits)
}
