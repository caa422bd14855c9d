package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
)

// nodeServer answers the node list as the API server does: protobuf pages of at most limit
// nodes with a continue token, the label selector applied.
type nodeServer struct {
	nodes []*corev1.Node
	fail  *apierrors.StatusError // when set, the answer to every request

	mu       sync.Mutex
	requests []listRequest
}

// listRequest is what a node list request asked for.
type listRequest struct {
	limit    int64
	selector string
}

// start serves s until the test ends and returns its config.
func (s *nodeServer) start(t *testing.T) *rest.Config {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

// core starts s and returns the plugin's client of it.
func (s *nodeServer) core(t *testing.T) rest.Interface {
	t.Helper()
	core, err := (&clients{base: s.start(t), warnings: io.Discard}).Core()
	if err != nil {
		t.Fatal(err)
	}
	return core
}

func (s *nodeServer) listRequests() []listRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]listRequest(nil), s.requests...)
}

func (s *nodeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.fail != nil {
		writeStatus(w, s.fail)
		return
	}
	if r.Method != http.MethodGet || r.URL.Path != "/api/v1/nodes" {
		writeStatus(w, apierrors.NewNotFound(corev1.Resource("nodes"), r.URL.Path))
		return
	}
	if !strings.HasPrefix(r.Header.Get("Accept"), "application/vnd.kubernetes.protobuf") {
		writeStatus(w, apierrors.NewBadRequest("the test server answers node lists in protobuf only, asked for "+r.Header.Get("Accept")))
		return
	}
	q := r.URL.Query()
	req := listRequest{selector: q.Get("labelSelector")}
	if l := q.Get("limit"); l != "" {
		var err error
		if req.limit, err = strconv.ParseInt(l, 10, 64); err != nil {
			writeStatus(w, apierrors.NewBadRequest("limit: "+err.Error()))
			return
		}
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()

	sel, err := labels.Parse(req.selector)
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest("labelSelector: "+err.Error()))
		return
	}
	var matching []*corev1.Node
	for _, n := range s.nodes {
		if sel.Matches(labels.Set(n.Labels)) {
			matching = append(matching, n)
		}
	}
	start := 0
	if c := q.Get("continue"); c != "" {
		if start, err = strconv.Atoi(c); err != nil || start > len(matching) {
			writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("continue %q", c)))
			return
		}
	}
	end := len(matching)
	if req.limit > 0 {
		end = min(end, start+int(req.limit))
	}
	cont := ""
	if end < len(matching) {
		cont = strconv.Itoa(end)
	}
	body, err := testenv.ProtobufNodeList(matching[start:end], cont)
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
	_, _ = w.Write(body)
}

// writeStatus answers with err's Status, as the API server does for a failed request.
func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	status := err.Status()
	status.Kind, status.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(status.Code))
	_ = json.NewEncoder(w).Encode(status)
}
