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

package inventorycache

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/framer"
)

// chunkReader hands out its data in pieces of random sizes, as a network stream does.
type chunkReader struct {
	data []byte
	rng  *rand.Rand
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(r.data), 1+r.rng.IntN(64<<10))
	if r.rng.IntN(4) == 0 {
		n = min(n, 1+r.rng.IntN(8))
	}
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

func (*chunkReader) Close() error { return nil }

// frames reads every frame of r as client-go's streaming decoder does: into a buffer that
// starts small and doubles while the frame does not fit.
func frames(r io.Reader) ([]string, error) {
	var out []string
	buf := make([]byte, 16)
	for {
		var frame []byte
		for {
			n, err := r.Read(buf)
			frame = append(frame, buf[:n]...)
			if errors.Is(err, io.ErrShortBuffer) {
				buf = make([]byte, 2*len(buf))
				continue
			}
			if err != nil {
				return out, err
			}
			break
		}
		out = append(out, string(frame))
	}
}

// randomValue is a JSON value whose strings hold what a scanner can trip over: brackets,
// quotes and backslashes, escaped.
func randomValue(rng *rand.Rand, depth int) any {
	switch k := rng.IntN(6); {
	case depth > 3 || k == 0:
		return strings.Repeat(`a"{}[]\`, rng.IntN(3)) + strings.Repeat(`\`, rng.IntN(4)) + "é\n"
	case k == 1:
		return rng.Float64() * 1e6
	case k == 2:
		return rng.IntN(2) == 0
	case k == 3:
		return nil
	case k == 4:
		list := make([]any, rng.IntN(5))
		for i := range list {
			list[i] = randomValue(rng, depth+1)
		}
		return list
	default:
		obj := map[string]any{}
		for i := range rng.IntN(6) {
			obj[fmt.Sprintf(`k%d"}`, i)] = randomValue(rng, depth+1)
		}
		return obj
	}
}

// A stream of JSON objects (watch events) comes out of the framer frame by frame, exactly
// as client-go's JSON framer cuts it, whatever pieces the stream arrives in and however
// small the reader's buffer starts.
func TestJSONFramerCutsAsClientGoDoes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 200 {
		var stream bytes.Buffer
		for range 1 + rng.IntN(20) {
			obj := map[string]any{"type": "MODIFIED", "object": randomValue(rng, 0)}
			if rng.IntN(10) == 0 {
				obj["object"] = map[string]any{"nodes": strings.Repeat("x", 200<<10)} // larger than a read
			}
			data, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			stream.Write(data)
			stream.WriteString([]string{"", "\n", " \r\n\t "}[rng.IntN(3)])
		}
		want, wantErr := frames(framer.NewJSONFramedReader(io.NopCloser(bytes.NewReader(stream.Bytes()))))
		got, gotErr := frames(jsonFramer{}.NewFrameReader(&chunkReader{data: stream.Bytes(), rng: rng}))
		if wantErr != io.EOF || gotErr != io.EOF {
			t.Fatalf("trial %d: streams ended with %v (client-go) and %v; want EOF", trial, wantErr, gotErr)
		}
		if len(got) != len(want) {
			t.Fatalf("trial %d: %d frames, client-go cuts %d", trial, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("trial %d: frame %d is\n%.300s\nclient-go cuts\n%.300s", trial, i, got[i], want[i])
			}
		}
	}
}

// A stream that breaks off inside an object, or holds something else than objects, ends
// with an error, not with a frame.
func TestJSONFramerReportsBrokenStreams(t *testing.T) {
	for _, tc := range []struct {
		stream, want string
	}{
		{`{"type":"ADDED","object":{"a":"}"}}` + "\n" + `{"type":"MOD`, "unexpected EOF"},
		{`{"a":"\"}`, "unexpected EOF"},
		{`{"a":1}}`, `holds '}' where an object should begin`},
		{`{"a":1} "s"`, "a JSON string where an object should be"},
		{`nul`, `holds 'n' where an object should begin`},
	} {
		got, err := frames(jsonFramer{}.NewFrameReader(io.NopCloser(strings.NewReader(tc.stream))))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: frames %q, error %v; want an error saying %q", tc.stream, got, err, tc.want)
		}
	}
}

func BenchmarkJSONFramer(b *testing.B) {
	event, err := json.Marshal(map[string]any{"type": "MODIFIED", "object": randomValue(rand.New(rand.NewPCG(1, 1)), 0),
		"nodes": strings.Repeat(`{"name":"gpu-node-0001","product":"NVIDIA-H100-80GB-HBM3","gpus":8},`, 2000)})
	if err != nil {
		b.Fatal(err)
	}
	stream := bytes.Repeat(append(event, '\n'), 10)
	for _, impl := range []struct {
		name string
		new  func(io.ReadCloser) io.ReadCloser
	}{{"client-go", framer.NewJSONFramedReader}, {"scan", jsonFramer{}.NewFrameReader}} {
		b.Run(impl.name, func(b *testing.B) {
			b.SetBytes(int64(len(stream)))
			buf := make([]byte, 2*len(event))
			for b.Loop() {
				r := impl.new(io.NopCloser(bytes.NewReader(stream)))
				for {
					if _, err := r.Read(buf); err != nil {
						break
					}
				}
			}
		})
	}
}
