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
	"fmt"
	"io"
	"mime"
	"net/http"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// DefaultMaxObjectBytes is the largest object the hub reads from a member: far above any
// GpuInventory the operator writes (etcd refuses objects over 1.5 MiB by default), far
// below what would hurt the hub.
const DefaultMaxObjectBytes = 4 << 20

// TooLargeError is what reading an answer returns once it holds an object larger than the
// limit: the rest is not read, and the connection is closed.
type TooLargeError struct {
	// Limit is the limit in bytes; URL the request's.
	Limit int64
	URL   string
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the member's answer to %s %s %d bytes; the hub reads no more of it (the limit is --member-max-object-bytes)", e.URL, tooLargeText, e.Limit)
}

// Capped returns a copy of config whose answers are read through a cap: no JSON value (a
// whole answer, or one event of a watch stream) may be longer than limit bytes, nor may
// any other answer. Watches stay open as long as each event is under the limit. limit <= 0
// means DefaultMaxObjectBytes.
func Capped(config *rest.Config, limit int64) *rest.Config {
	if limit <= 0 {
		limit = DefaultMaxObjectBytes
	}
	cfg := rest.CopyConfig(config)
	cfg.WrapTransport = transport.Wrappers(cfg.WrapTransport, func(rt http.RoundTripper) http.RoundTripper {
		return &cappedTransport{next: rt, limit: limit}
	})
	return cfg
}

type cappedTransport struct {
	next  http.RoundTripper
	limit int64
}

func (t *cappedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	resp.Body = &cappedBody{body: resp.Body, limit: t.limit, url: req.URL.Redacted(),
		values: mediaType == "application/json"}
	return resp, nil
}

// WrappedRoundTripper lets client-go's transport helpers see through the cap.
func (t *cappedTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

// cappedBody counts the bytes of the JSON value being read, the white space before it
// included, since a decoder holds that too (a watch stream is one object per event; the
// counter restarts after each), or of the whole body when it is not JSON. It follows strings
// and nesting only: the decoder above it still checks the syntax.
type cappedBody struct {
	body   io.ReadCloser
	limit  int64
	url    string
	values bool

	n        int64 // bytes since the last top-level value ended
	depth    int
	inString bool
	escaped  bool
	err      error
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.body.Read(p)
	if over := b.count(p[:n]); over >= 0 {
		b.err = &TooLargeError{Limit: b.limit, URL: b.url}
		return over, b.err
	}
	return n, err
}

// count adds p to the current value and returns the index at which the value went over the
// limit, or -1.
func (b *cappedBody) count(p []byte) int {
	for i, c := range p {
		b.n++
		if b.n > b.limit {
			return i
		}
		if !b.values {
			continue
		}
		switch {
		case b.inString && b.escaped:
			b.escaped = false
		case b.inString && c == '\\':
			b.escaped = true
		case b.inString && c == '"':
			b.inString = false
		case b.inString:
		case c == '"':
			b.inString = true
		case c == '{' || c == '[':
			b.depth++
		case (c == '}' || c == ']') && b.depth > 0:
			b.depth--
			if b.depth == 0 {
				b.n = 0
			}
		}
	}
	return -1
}

func (b *cappedBody) Close() error { return b.body.Close() }
