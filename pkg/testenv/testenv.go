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

// Package testenv runs a real, local Kubernetes control plane for tests and the demo: etcd and
// kube-apiserver (and optionally kwok's fake kubelets, kube-scheduler and the ResourceClaim
// controller: see StartScheduling) on free loopback ports, in a temporary directory, from
// binaries that `make testbin` builds from the Go module proxy.
//
// It is this project's envtest: no container, no download, no kubelet. Every process it
// starts is stopped by Stop, and dies with the test process if that is killed.
package testenv

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// BinDirEnv names the environment variable that points at the built components.
const BinDirEnv = "TESTBIN_DIR"

// Options configure Start.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kwok, kube-scheduler, resourceclaim-controller and
	// kwok's stages (kwok-stages.yaml, kwok-pod-stages.yaml). Default: $TESTBIN_DIR.
	BinDir string
	// Dir is where data, certificates and logs go. Default: a new temporary directory that
	// Stop removes.
	Dir string
	// StartTimeout bounds each component's start. Default: 60s.
	StartTimeout time.Duration
	// APIServerArgs are appended to kube-apiserver's flags, for example
	// --runtime-config=resource.k8s.io/v1=false for a cluster without an API group.
	APIServerArgs []string
	// SchedulerArgs are appended to kube-scheduler's flags (StartScheduler), for example
	// --feature-gates for a gate that is off by default; a --feature-gates=... argument also
	// reaches the ResourceClaim controller. kube-apiserver gets its own in APIServerArgs.
	SchedulerArgs []string
}

// Env is a running control plane.
type Env struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Dir holds the data, the logs and the admin kubeconfig (Dir/kubeconfig).
	Dir string

	binDir       string
	removeDir    bool
	startTimeout time.Duration
	apiArgs      []string
	schedArgs    []string
	token        string
	etcdURL      string
	apiPort      int
	etcd         *process
	apiserver    *process
	kwok         *process
	kwokStages   string // the stages file kwok runs with
	scheduler    *process
	claimCtrl    *process
	jobCtrl      *process // StartJobController
	kueue        *process // StartKueue
	schedulerURL string
	stopNodes    func() // stops StartNodeLifecycle's controller
}

// Start runs etcd and kube-apiserver and returns once /readyz answers ok. On failure every
// started process is stopped and the error carries the tail of the failing component's log.
func Start(ctx context.Context, opts Options) (env *Env, err error) {
	e := &Env{binDir: opts.BinDir, Dir: opts.Dir, startTimeout: opts.StartTimeout, apiArgs: opts.APIServerArgs, schedArgs: opts.SchedulerArgs}
	if e.binDir == "" {
		e.binDir = os.Getenv(BinDirEnv)
	}
	if e.binDir == "" {
		return nil, fmt.Errorf("no control-plane binaries: set %s (`make testbin` prints the directory; `make test` sets it)", BinDirEnv)
	}
	for _, bin := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(e.binDir, bin)); err != nil {
			return nil, fmt.Errorf("%s not found in %s=%s (run `make testbin`): %w", bin, BinDirEnv, e.binDir, err)
		}
	}
	if e.startTimeout == 0 {
		e.startTimeout = 60 * time.Second
	}
	if err = e.setUp(ctx, e.startControlPlane); err != nil {
		e.Stop()
		return nil, err
	}
	return e, nil
}

// setUp makes e's directory (a new temporary one unless Dir is set) and what goes in it,
// then runs start, again when a port was taken between choosing it and binding it.
func (e *Env) setUp(ctx context.Context, start func(context.Context) error) error {
	if e.Dir == "" {
		dir, err := os.MkdirTemp("", "gpuinv-testenv-")
		if err != nil {
			return err
		}
		e.Dir, e.removeDir = dir, true
	}
	if err := e.prepare(); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err := start(ctx)
		if err == nil {
			return nil
		}
		if attempt == startAttempts || !strings.Contains(err.Error(), "address already in use") {
			return err
		}
		e.stopControlPlane()
	}
}

// startAttempts bounds Start's tries when a component cannot bind its port: freePort finds a
// port free and closes it, and another socket may take it before the component binds it.
const startAttempts = 3

// startControlPlane starts etcd on an empty data directory and kube-apiserver, on new ports.
func (e *Env) startControlPlane(ctx context.Context) error {
	if err := e.choosePorts(); err != nil {
		return err
	}
	etcdDir := filepath.Join(e.Dir, "etcd")
	if err := os.RemoveAll(etcdDir); err != nil {
		return err
	}
	if err := os.MkdirAll(etcdDir, 0o755); err != nil {
		return err
	}
	if err := e.startEtcd(ctx); err != nil {
		return err
	}
	return e.StartAPIServer(ctx)
}

// stopControlPlane stops what startControlPlane started.
func (e *Env) stopControlPlane() {
	for _, p := range []*process{e.apiserver, e.etcd} {
		if p != nil {
			p.stop(3 * time.Second)
		}
	}
	e.apiserver, e.etcd = nil, nil
}

// prepare writes the service-account key and the token file (choosePorts writes the admin
// kubeconfig, startControlPlane makes etcd's data directory).
func (e *Env) prepare() error {
	for _, d := range []string{"certs", "logs"} {
		if err := os.MkdirAll(filepath.Join(e.Dir, d), 0o755); err != nil {
			return err
		}
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generate service-account key: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(filepath.Join(e.Dir, "sa.key"), keyPEM, 0o600); err != nil {
		return err
	}
	tokenBytes := make([]byte, 16)
	if _, err := rand.Read(tokenBytes); err != nil {
		return err
	}
	e.token = hex.EncodeToString(tokenBytes)
	return os.WriteFile(filepath.Join(e.Dir, "tokens.csv"), []byte(e.token+",admin,admin,system:masters\n"), 0o600)
}

// choosePorts picks kube-apiserver's port and writes the admin config and kubeconfig for it.
func (e *Env) choosePorts() (err error) {
	if e.apiPort, err = freePort(); err != nil {
		return err
	}
	e.Config = &rest.Config{
		Host:            "https://127.0.0.1:" + strconv.Itoa(e.apiPort),
		BearerToken:     e.token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}, // self-signed serving cert on loopback
		QPS:             200,
		Burst:           400,
	}
	return e.writeKubeconfig(e.KubeconfigPath(), e.Config)
}

// KubeconfigPath is the admin kubeconfig, for kubectl and for the operator's --kubeconfig.
func (e *Env) KubeconfigPath() string { return filepath.Join(e.Dir, "kubeconfig") }

func (e *Env) writeKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["testenv"] = &clientcmdapi.Cluster{Server: cfg.Host, InsecureSkipTLSVerify: true}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: "user", Namespace: "default"}
	kc.CurrentContext = "testenv"
	return clientcmd.WriteToFile(*kc, path)
}

func (e *Env) startEtcd(ctx context.Context) error {
	clientPort, err := freePort()
	if err != nil {
		return err
	}
	peerPort, err := freePort()
	if err != nil {
		return err
	}
	e.etcdURL = "http://127.0.0.1:" + strconv.Itoa(clientPort)
	e.etcd, err = startProcess(filepath.Join(e.binDir, "etcd"), filepath.Join(e.Dir, "logs", "etcd.log"),
		"--data-dir", filepath.Join(e.Dir, "etcd"),
		"--listen-client-urls", e.etcdURL,
		"--advertise-client-urls", e.etcdURL,
		"--listen-peer-urls", "http://127.0.0.1:"+strconv.Itoa(peerPort),
		"--initial-advertise-peer-urls", "http://127.0.0.1:"+strconv.Itoa(peerPort),
		"--initial-cluster", "default=http://127.0.0.1:"+strconv.Itoa(peerPort),
		"--unsafe-no-fsync", // test data: durability across power loss is not needed
		// The scale run writes more between the API server's compactions than etcd's default
		// 2 GiB holds (64 KiB Ready messages of hostile nodes, then 100,000 pods).
		"--quota-backend-bytes", strconv.Itoa(8<<30),
		"--log-level", "warn",
	)
	if err != nil {
		return err
	}
	return e.waitHealthy(ctx, e.etcd, e.etcdURL+"/health", nil)
}

// StartAPIServer starts kube-apiserver (again, after StopAPIServer) on the same port and etcd
// data, with Options.APIServerArgs, and waits for /readyz.
func (e *Env) StartAPIServer(ctx context.Context) error {
	if e.apiserver != nil && e.apiserver.running() {
		return errors.New("kube-apiserver is already running")
	}
	port := strconv.Itoa(e.apiPort)
	saKey := filepath.Join(e.Dir, "sa.key")
	args := []string{
		"--etcd-servers=" + e.etcdURL,
		"--secure-port=" + port,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + filepath.Join(e.Dir, "certs"),
		"--service-account-issuer=https://127.0.0.1:" + port,
		"--service-account-key-file=" + saKey,
		"--service-account-signing-key-file=" + saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--token-auth-file=" + filepath.Join(e.Dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--disable-admission-plugins=ServiceAccount",
		"--v=1",
	}
	var err error
	e.apiserver, err = startProcess(filepath.Join(e.binDir, "kube-apiserver"), filepath.Join(e.Dir, "logs", "kube-apiserver.log"),
		append(args, e.apiArgs...)...)
	if err != nil {
		return err
	}
	client, err := rest.HTTPClientFor(e.Config)
	if err != nil {
		return err
	}
	return e.waitHealthy(ctx, e.apiserver, e.Config.Host+"/readyz", func(r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+e.token)
	}, client)
}

// StopAPIServer stops kube-apiserver; etcd and its data stay. The server gets SIGTERM, and
// SIGKILL after 3 seconds: with clients' watches open its graceful shutdown can stall for
// much longer, and all its state is in etcd anyway.
func (e *Env) StopAPIServer() error {
	if e.apiserver == nil {
		return nil
	}
	e.apiserver.stop(3 * time.Second)
	return nil
}

// waitHealthy polls url until it answers 200 "ok"-like, the process exits, or the start
// timeout passes; failures carry the tail of the process's log.
func (e *Env) waitHealthy(ctx context.Context, p *process, url string, auth func(*http.Request), clients ...*http.Client) error {
	client := &http.Client{Timeout: 2 * time.Second}
	if len(clients) > 0 {
		client = clients[0]
	}
	ctx, cancel := context.WithTimeout(ctx, e.startTimeout)
	defer cancel()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if auth != nil {
			auth(req)
		}
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited before it was ready (%v); last lines of %s:\n%s", p.name, p.exitErr, p.logPath, p.logTail())
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s (last answer: %s); last lines of %s:\n%s", p.name, e.startTimeout, last, p.logPath, p.logTail())
		case <-ticker.C:
		}
	}
}

// StartKwok runs kwok so that nodes annotated kwok.x-k8s.io/node=fake are kept Ready by fake
// kubelets. Nodes without the annotation are left as they are, and so are pods: tests set
// their phases themselves.
func (e *Env) StartKwok(ctx context.Context) error {
	return e.startKwok(ctx, "kwok-stages.yaml")
}

// StartKwokWithPods is StartKwok where kwok also runs the pods bound to its nodes, as kubelets
// would: Running at once, Succeeded for a Job's pods, graceful deletions completed.
func (e *Env) StartKwokWithPods(ctx context.Context) error {
	return e.startKwok(ctx, "kwok-pod-stages.yaml")
}

// startKwok runs kwok with the stages file of binDir named stages, unless it runs already.
func (e *Env) startKwok(ctx context.Context, stages string) error {
	if e.kwok != nil && e.kwok.running() {
		if e.kwokStages != stages {
			return fmt.Errorf("kwok already runs with %s, not %s", e.kwokStages, stages)
		}
		return nil
	}
	config := filepath.Join(e.binDir, stages)
	if _, err := os.Stat(config); err != nil {
		return fmt.Errorf("kwok stages %s not found (run `make testbin`): %w", stages, err)
	}
	serverPort, err := freePort()
	if err != nil {
		return err
	}
	e.kwokStages = stages
	e.kwok, err = startProcess(filepath.Join(e.binDir, "kwok"), filepath.Join(e.Dir, "logs", "kwok.log"),
		"--kubeconfig="+e.KubeconfigPath(),
		"--config="+config,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+KwokAnnotation+"=fake",
		"--server-address=127.0.0.1:"+strconv.Itoa(serverPort),
	)
	if err != nil {
		return err
	}
	return e.waitHealthy(ctx, e.kwok, "http://127.0.0.1:"+strconv.Itoa(serverPort)+"/healthz", nil)
}

// KwokAnnotation marks the nodes that kwok keeps Ready (value "fake").
const KwokAnnotation = fixtures.KwokAnnotation

// ServiceAccountConfig returns a client configuration that authenticates as the given
// ServiceAccount (which must exist), with a token from the TokenRequest API.
func (e *Env) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	kube, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return nil, err
	}
	expiry := int64(3600)
	tr, err := kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("request a token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	cfg := rest.CopyConfig(e.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg, nil
}

// WriteKubeconfig writes a kubeconfig for cfg (for example a ServiceAccount's) to path.
func (e *Env) WriteKubeconfig(path string, cfg *rest.Config) error {
	return e.writeKubeconfig(path, cfg)
}

// Stop stops every process the environment started (the node lifecycle controller,
// kube-scheduler, the ResourceClaim controller, kwok, kube-apiserver, etcd) and removes the
// temporary directory it created. It is safe to call more than once.
func (e *Env) Stop() {
	if e.stopNodes != nil {
		e.stopNodes()
		e.stopNodes = nil
	}
	for _, p := range []*process{e.kueue, e.jobCtrl, e.scheduler, e.claimCtrl, e.kwok} {
		if p != nil {
			p.stop(3 * time.Second)
		}
	}
	e.stopControlPlane()
	if e.removeDir && e.Dir != "" {
		_ = os.RemoveAll(e.Dir)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
