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

package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/quota"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/quotacache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/section"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/topologycache"
)

// memberDoublesEnv, set to "1", makes the harness's binary the member doubles' process of the
// hub phase (runMemberDoubles) instead of the harness: the hub phase re-executes itself, so
// that the doubles' CPU and memory are neither the hub's nor the harness's.
const memberDoublesEnv = "SCALE_MEMBER_DOUBLES"

// doublesReady is the line the doubles' process prints once every double serves.
type doublesReady struct {
	CA             []byte   `json:"ca"` // PEM of the certificate every double serves with
	Servers        []string `json:"servers"`
	InventoryBytes int      `json:"inventoryBytes"` // one inventory as JSON
	GpuNodes       int32    `json:"gpuNodes"`
	ReadyGpuNodes  int32    `json:"readyGpuNodes"`
	ListedNodes    int32    `json:"listedNodes"`
}

// runMemberDoubles serves --members member doubles over TLS on loopback, each with the
// inventory of a --nodes cluster, prints doublesReady as a JSON line, then answers the
// commands read from in, one a line, until in ends:
//
//	set <member> <readyGpuNodes>  ->  set <member> <resourceVersion> <unix nanoseconds of the first MODIFIED sent>
func runMemberDoubles(args []string, in io.Reader, out io.Writer) error {
	fs := flag.NewFlagSet("member doubles", flag.ContinueOnError)
	members := fs.Int("members", 50, "Member doubles.")
	nodes := fs.Int("nodes", 5000, "Nodes of each member's cluster.")
	token := fs.String("token", "", "Bearer token the doubles accept.")
	bookmark := fs.Duration("bookmark-every", time.Minute, "Bookmark interval of a watch that allows them.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	base, err := memberInventory(*nodes, time.Now())
	if err != nil {
		return err
	}
	cert, caPEM, err := selfSignedServing()
	if err != nil {
		return err
	}
	ready := doublesReady{CA: caPEM, GpuNodes: base.Status.TotalGpuNodes, ReadyGpuNodes: base.Status.ReadyGpuNodes, ListedNodes: base.Status.ListedNodes}
	doubles := make([]*memberDouble, *members)
	for i := range doubles {
		inv := base.DeepCopy()
		inv.UID = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i)) // one cluster each
		doubles[i] = newMemberDouble(inv, *token, *bookmark)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: doubles[i], TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.ServeTLS(l, "", "") }() // HTTP/2, as an API server
		ready.Servers = append(ready.Servers, "https://"+l.Addr().String())
	}
	raw, _, _ := doubles[0].current()
	ready.InventoryBytes = len(raw)
	line, _ := json.Marshal(ready)
	if _, err := fmt.Fprintf(out, "%s\n", line); err != nil {
		return err
	}
	s := bufio.NewScanner(in)
	for s.Scan() {
		fmt.Fprintln(out, command(doubles, s.Text()))
	}
	return s.Err()
}

// command carries out one command line and returns the answer.
func command(doubles []*memberDouble, line string) string {
	var i int
	var ready int32
	if _, err := fmt.Sscanf(line, "set %d %d", &i, &ready); err != nil || i < 0 || i >= len(doubles) {
		return fmt.Sprintf("error: %q is no command (set <member 0-%d> <readyGpuNodes>)", line, len(doubles)-1)
	}
	rv := doubles[i].set(func(gi *homelabv1.GpuInventory) { gi.Status.ReadyGpuNodes = ready })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	at, err := doubles[i].sentAt(ctx, rv)
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("set %d %d %d", i, rv, at.UnixNano())
}

// parseSet reads a command's answer: the resourceVersion and when it was sent.
func parseSet(answer string) (int64, time.Time, error) {
	f := strings.Fields(answer)
	if len(f) != 4 || f[0] != "set" {
		return 0, time.Time{}, errors.New(answer)
	}
	rv, err1 := strconv.ParseInt(f[2], 10, 64)
	ns, err2 := strconv.ParseInt(f[3], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, time.Time{}, fmt.Errorf("answer %q: %w", answer, err)
	}
	return rv, time.Unix(0, ns), nil
}

// memberInventory is the GpuInventory "cluster" the operator writes for a cluster of the
// first n nodes of the generated fleet, no pod holding a GPU: its nodes listed up to the operator's bound, its
// topology from the fleet's labels, and quota of a Kueue with a flavor per model and queues in
// cohorts (memberKueue).
func memberInventory(n int, now time.Time) (*homelabv1.GpuInventory, error) {
	nodes := make([]*corev1.Node, n)
	for i := range n {
		node, labels := fixtures.FleetNode(i)
		for k, v := range labels {
			node.Labels[k] = v
		}
		nodes[i] = node
	}
	nothingHeld := func(string) *allocation.Held { return nil } // the operator's allocation, of no pod
	content, _ := inventory.NewEntryCache().WithAllocation(nothingHeld).Compute(nodes, nil, now)
	listed, omitted := content.Listed(inventory.DefaultMaxStatusNodes, inventory.MaxNodeListBytes)
	gi := &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: homelabv1.DefaultInventoryName, Generation: 1,
		CreationTimestamp: metav1.NewTime(now.Add(-24 * time.Hour))}}
	conditions := inventory.Conditions(content, omitted, gi.Generation)
	in := section.Input{Inventory: gi, Nodes: nodes, Content: &content}
	parts := []*section.Part{
		topologycache.NewSection(func() ([]topologycache.Topology, string) { return nil, "" }, nil, topologycache.Options{}).Compute(in),
		quotacache.NewSection(func() quotacache.Snapshot { return quotacache.Snapshot{Kueue: memberKueue()} }, nil, nil).Compute(in),
	}
	gi.Status = content.Status(listed, nil, gi.Generation, metav1.NewTime(now))
	for i, p := range parts {
		if p == nil {
			return nil, fmt.Errorf("the member inventory has no %s", []string{"topology", "quota"}[i])
		}
		p.Set(&gi.Status)
		conditions = append(conditions, p.Conditions...)
	}
	for i := range conditions {
		conditions[i].LastTransitionTime = metav1.NewTime(now)
	}
	gi.Status.Conditions = conditions
	return gi, nil
}

// memberKueue is a member's Kueue: a ResourceFlavor per GPU model of the fleet, 40
// ClusterQueues in 8 cohorts, each with 64 GPUs of two flavors and a LocalQueue.
func memberKueue() *quota.Kueue {
	k := &quota.Kueue{Version: "v1beta2"}
	for i, m := range fixtures.GPUModels {
		k.Flavors = append(k.Flavors, quota.Flavor{Name: fmt.Sprintf("flavor-%d", i), NodeLabels: map[string]string{"nvidia.com/gpu.product": m.Labels["nvidia.com/gpu.product"]}})
	}
	for q := range 40 {
		name := fmt.Sprintf("team-%02d", q)
		var limits []quota.Limit
		var used []quota.Usage
		for _, f := range []string{k.Flavors[q%len(k.Flavors)].Name, k.Flavors[(q+1)%len(k.Flavors)].Name} {
			limits = append(limits, quota.Limit{Flavor: f, Resource: "nvidia.com/gpu", Nominal: 64})
			used = append(used, quota.Usage{Flavor: f, Resource: "nvidia.com/gpu", Total: int64(q % 16)})
		}
		k.ClusterQueues = append(k.ClusterQueues, quota.ClusterQueue{Name: name, Cohort: fmt.Sprintf("org-%d", q%8), Quotas: limits,
			Reserved: used, Used: used, Admitted: int32(q % 5)})
		k.LocalQueues = append(k.LocalQueues, quota.LocalQueue{Namespace: name, Name: "default", ClusterQueue: name})
	}
	return k
}

// selfSignedServing is a serving certificate for 127.0.0.1, its own CA, and its PEM.
func selfSignedServing() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	template := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "member-double"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("self-sign the doubles' certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// memberDoubles is the doubles' process as the harness runs it.
type memberDoubles struct {
	ready doublesReady
	cmd   io.Writer // its stdin
	out   *bufio.Scanner
	stop  func()
}

// set sets member i's readyGpuNodes and returns when a watch was sent the change.
func (d *memberDoubles) set(i int, ready int32) (time.Time, error) {
	if _, err := fmt.Fprintf(d.cmd, "set %d %d\n", i, ready); err != nil {
		return time.Time{}, err
	}
	if !d.out.Scan() {
		return time.Time{}, fmt.Errorf("the member doubles ended: %v", d.out.Err())
	}
	_, at, err := parseSet(d.out.Text())
	return at, err
}
