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

// Package member is how the fleet hub reaches a member cluster: a rest.Config built from a
// ClusterProfile (through cluster-inventory-api's access providers) or from a
// MultiKueueCluster (its kubeconfig Secret, or the ClusterProfile it names), refused with a
// reason a GpuFleet can show when it cannot be used safely; the transport that refuses an
// answer holding an object over a size limit; and the reason of any failure to read a
// member. Nothing here starts a goroutine or keeps state (docs/design/hub.md).
package member

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// Reasons a member cannot be read that the API types do not name: they come from reading,
// not from the member's configuration.
const (
	// ReasonCredentialsFailed: the access provider's credential plugin failed.
	ReasonCredentialsFailed = "CredentialsFailed"
	// ReasonTLSUnverified: the member's certificate is not signed by the CA it was given.
	ReasonTLSUnverified = "TLSUnverified"
	// ReasonAnswerTooSlow: the member did not answer in time.
	ReasonAnswerTooSlow = "AnswerTooSlow"
)

// MaxMessage is the longest message a GpuFleet member row holds.
const MaxMessage = 1024

// Error is a member that cannot be reached as configured: Reason is one word a GpuFleet
// shows (homelabv1.Reason*), the message says what is wrong and what to do.
type Error struct {
	Reason string
	msg    string
	err    error
}

func (e *Error) Error() string {
	if e.err != nil {
		return e.msg + ": " + e.err.Error()
	}
	return e.msg
}

func (e *Error) Unwrap() error { return e.err }

func fail(reason string, err error, format string, args ...any) *Error {
	return &Error{Reason: reason, msg: fmt.Sprintf(format, args...), err: err}
}

// Explain turns any failure to reach or read a member into the reason and message of its
// GpuFleet row. The message is at most MaxMessage bytes, and names URLs without their query:
// a watch's parameters (its resourceVersion, a random timeout) differ at every try, and the
// row must not change while the failure does not.
func Explain(err error) (reason, message string) {
	reason, message = explain(err)
	return reason, truncate(urlQuery.ReplaceAllString(message, "$1"), MaxMessage)
}

// urlQuery matches a URL with its query.
var urlQuery = regexp.MustCompile(`(https?://[^\s"?]*)\?[^\s"]*`)

// tooLargeText is in the message of a TooLargeError, also once a watch has turned it into
// an error event (a Status) that errors.As cannot find.
const tooLargeText = "holds an object larger than"

func explain(err error) (string, string) {
	var own *Error
	var tooLarge *TooLargeError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case err == nil:
		return "", ""
	case errors.As(err, &own):
		return own.Reason, own.Error()
	case errors.As(err, &tooLarge), strings.Contains(err.Error(), tooLargeText):
		return homelabv1.ReasonAnswerTooLarge, err.Error()
	case errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &invalid):
		return ReasonTLSUnverified, "the member's serving certificate does not verify against the CA it was given (certificate-authority-data): " + err.Error()
	case strings.Contains(err.Error(), "getting credentials:"):
		return ReasonCredentialsFailed, "the access provider's credential plugin failed: " + err.Error()
	case apierrors.IsUnauthorized(err):
		return homelabv1.ReasonUnauthorized, "the member refused the hub's credentials (401): " + err.Error()
	case apierrors.IsForbidden(err):
		return homelabv1.ReasonForbidden, "the hub's identity on the member may not read GpuInventories: grant get, list and watch on gpuinventories.homelab.youngju.dev (docs/design/hub.md#rbac): " + err.Error()
	case apierrors.IsNotFound(err):
		return homelabv1.ReasonInventoryNotFound, "the member serves no GpuInventories (is the gpu-inventory-operator installed there?): " + err.Error()
	case errors.Is(err, context.DeadlineExceeded), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return ReasonAnswerTooSlow, "the member did not answer in time: " + err.Error()
	}
	return homelabv1.ReasonConnectionFailed, err.Error()
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
