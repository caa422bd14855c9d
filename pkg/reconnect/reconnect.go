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

// Package reconnect keeps the operator's reads waiting for an API server that is away, so
// that its informers resume as soon as the server is back. client-go's reflectors back off
// exponentially up to 30 s after failed lists and watches; a read that waits here instead of
// failing never makes them back off.
package reconnect

import (
	"errors"
	"io"
	"net/http"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Policy says how often a read is retried while the server cannot be reached: every Short
// for the first Patience of an outage, then with doubling waits up to Long, so that a
// server that stays down is not hammered.
type Policy struct {
	Short, Patience, Long time.Duration
}

// DefaultPolicy retries every half second for a minute, then backs off to 30 s.
var DefaultPolicy = Policy{Short: 500 * time.Millisecond, Patience: time.Minute, Long: 30 * time.Second}

// Transport wraps rt: a GET that cannot reach the server (connection refused or reset, or
// closed before an answer) is retried under p until it gets an answer or its context ends.
// Other methods are not retried (their callers decide).
func Transport(rt http.RoundTripper, p Policy) http.RoundTripper {
	return &transport{next: rt, policy: p}
}

type transport struct {
	next   http.RoundTripper
	policy Policy
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.Body != nil && req.Body != http.NoBody {
		return t.next.RoundTrip(req)
	}
	start := time.Now()
	wait := t.policy.Short
	for {
		resp, err := t.next.RoundTrip(req)
		if err == nil || !unreachable(err) {
			return resp, err
		}
		if time.Since(start) >= t.policy.Patience {
			wait = min(2*wait, t.policy.Long)
		}
		timer := time.NewTimer(wait)
		select {
		case <-req.Context().Done():
			timer.Stop()
			return nil, err
		case <-timer.C:
		}
	}
}

// unreachable reports errors that say the server is not there (as opposed to an answer).
func unreachable(err error) bool {
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
