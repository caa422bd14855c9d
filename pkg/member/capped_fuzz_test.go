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
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
)

// readCapped reads data through a cap of limit, in reads of at most step bytes, and returns
// how many bytes came through and whether the cap refused the rest.
func readCapped(data []byte, limit int64, step int, values bool) (int, bool) {
	body := &cappedBody{body: io.NopCloser(&chunked{data: data, step: step}), limit: limit, values: values}
	n, err := io.Copy(io.Discard, body)
	var tooLarge *TooLargeError
	return int(n), errors.As(err, &tooLarge)
}

// chunked returns its data step bytes at a time.
type chunked struct {
	data []byte
	step int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.step)], c.data)
	c.data = c.data[n:]
	return n, nil
}

// The cap's verdict does not depend on how the answer arrives in pieces, and a stream of
// JSON objects each within the limit (with the newline before it) is never refused,
// whatever their strings hold.
func FuzzCappedBody(f *testing.F) {
	f.Add([]byte(`{"a":"}\"{"}{"b":[1,2]}`), uint16(5), uint16(3), true)
	f.Add([]byte("plain text over the limit"), uint16(7), uint16(1), false)
	f.Add([]byte(`"\\\"}]`), uint16(2), uint16(4), true)
	f.Fuzz(func(t *testing.T, data []byte, limit, step uint16, values bool) {
		if limit == 0 || step == 0 {
			return
		}
		whole, refused := readCapped(data, int64(limit), len(data)+1, values)
		pieces, refusedInPieces := readCapped(data, int64(limit), int(step), values)
		if whole != pieces || refused != refusedInPieces {
			t.Fatalf("at once: %d bytes, refused %v; in pieces of %d: %d bytes, refused %v", whole, refused, step, pieces, refusedInPieces)
		}
		value, err := json.Marshal(map[string]string{"note": string(data)})
		if err != nil {
			return
		}
		stream := bytes.Join([][]byte{value, value, value}, []byte("\n"))
		if n, refused := readCapped(stream, int64(len(value)+1), int(step), true); refused || n != len(stream) {
			t.Fatalf("three values of %d bytes through a cap of %d: %d bytes read, refused %v", len(value), len(value)+1, n, refused)
		}
		if n, refused := readCapped(stream, int64(len(value)-1), int(step), true); !refused || n != len(value)-1 {
			t.Fatalf("a value of %d bytes through a cap of %d: %d bytes read, refused %v", len(value), len(value)-1, n, refused)
		}
	})
}
