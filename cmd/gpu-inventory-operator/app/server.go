// Package app wires the operator: flags, clients, CRD self-install, informers, controllers and
// leader election.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/gpuinventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/nodestatus"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/crd"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned/scheme"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/informers/externalversions"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventorycache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/nodecache"
)

// Main parses args, runs the operator until SIGTERM or SIGINT, and returns the exit code.
func Main(args []string) int {
	opts := NewOptions()
	fs := flag.NewFlagSet("gpu-inventory-operator", flag.ContinueOnError)
	opts.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "gpu-inventory-operator: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "gpu-inventory-operator: %v\n", err)
		return 2
	}
	// Main may run more than once in a process (tests); the same configuration is fine.
	logsapi.ReapplyHandling = logsapi.ReapplyHandlingIgnoreUnchanged
	if err := logsapi.ValidateAndApply(opts.Logging, nil); err != nil {
		fmt.Fprintf(os.Stderr, "gpu-inventory-operator: logging: %v\n", err)
		return 2
	}
	defer klog.Flush() // also flushes the JSON logger (klog.FlushLogger)
	if os.Getenv("GOGC") == "" {
		// The heap is mostly the long-lived node cache; collecting at 50 % growth instead of
		// 100 % keeps the resident set near it at little CPU cost (allocation is low after
		// the initial list). GOGC in the environment overrides this.
		debug.SetGCPercent(50)
	}

	ctx, stop := signalContext()
	defer stop()
	logger := klog.Background()
	ctx = klog.NewContext(ctx, logger)

	op, err := New(opts)
	if err != nil {
		logger.Error(err, "Cannot start")
		return 1
	}
	if opts.PprofAddress != "" {
		if err := servePprof(ctx, opts.PprofAddress); err != nil {
			logger.Error(err, "Cannot serve profiles")
			return 1
		}
	}
	if err := op.Run(ctx); err != nil {
		logger.Error(err, "Operator stopped")
		return 1
	}
	logger.Info("Operator stopped")
	return 0
}

// servePprof serves Go's profiles until ctx is cancelled.
func servePprof(ctx context.Context, addr string) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--pprof-bind-address %s: %w", addr, err)
	}
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = server.Serve(listener) }()
	context.AfterFunc(ctx, func() { _ = server.Close() })
	return nil
}

// signalContext is cancelled by the first SIGTERM or SIGINT; a second one exits at once.
func signalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-ch
		cancel()
		<-ch
		os.Exit(1)
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}

// Operator is one running instance of the operator.
type Operator struct {
	opts      *Options
	config    *rest.Config
	namespace string
	kube      kubernetes.Interface // protobuf: Nodes and the ConfigMap are the bulk of what it reads
	// protobufConfig makes the Node informer's client (see nodeClient).
	protobufConfig *rest.Config
	client         versioned.Interface
	apiext         apiextensionsclient.Interface
	identity       string

	leaderHealth *leaderelection.HealthzAdaptor
	leading      atomic.Bool
	metricsAddr  string
	healthAddr   string

	mu           sync.Mutex
	inventory    *gpuinventory.Controller
	writesBefore int64 // by the controllers of earlier runs (before a re-list)
	readsBefore  int64
}

// New builds an operator from options, resolving the kubeconfig.
func New(opts *Options) (*Operator, error) {
	config, namespace, err := opts.ClientConfig()
	if err != nil {
		return nil, err
	}
	return NewForConfig(opts, config, namespace)
}

// NewForConfig builds an operator that talks to the API server of config.
func NewForConfig(opts *Options, config *rest.Config, namespace string) (*Operator, error) {
	config = rest.CopyConfig(config)
	// The operator's largest responses are its own status and ConfigMap (up to 256 KiB each,
	// several times a second under churn); gzip costs CPU on both sides for no gain on a
	// cluster network. Watches are never compressed.
	config.DisableCompression = !opts.Compression
	o := &Operator{opts: opts, config: config, namespace: namespace}
	var err error
	// Built-in types (Nodes, the ConfigMap, Events, the Lease) travel as protobuf; the CRD
	// clients below use JSON, the only encoding custom resources have.
	protobuf := rest.CopyConfig(config)
	protobuf.ContentType = "application/vnd.kubernetes.protobuf"
	protobuf.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	o.protobufConfig = protobuf
	if o.kube, err = kubernetes.NewForConfig(protobuf); err != nil {
		return nil, fmt.Errorf("create Kubernetes client: %w", err)
	}
	if o.client, err = versioned.NewForConfig(config); err != nil {
		return nil, fmt.Errorf("create GpuInventory client: %w", err)
	}
	if o.apiext, err = apiextensionsclient.NewForConfig(config); err != nil {
		return nil, fmt.Errorf("create apiextensions client: %w", err)
	}
	hostname, _ := os.Hostname()
	o.identity = hostname + "_" + string(uuid.NewUUID())
	return o, nil
}

// MetricsAddress and HealthAddress are the bound addresses ("" when off or not started).
func (o *Operator) MetricsAddress() string { o.mu.Lock(); defer o.mu.Unlock(); return o.metricsAddr }
func (o *Operator) HealthAddress() string  { o.mu.Lock(); defer o.mu.Unlock(); return o.healthAddr }

// Identity is this instance's leader-election identity.
func (o *Operator) Identity() string { return o.identity }

// StatusWrites counts the GpuInventory status writes this instance made (0 before it led).
func (o *Operator) StatusWrites() int64 {
	return o.counted(&o.writesBefore, (*gpuinventory.Controller).StatusWrites)
}

// StatusReads counts the GETs of a whole inventory this instance made because its cached
// copy (decoded without the node list) held a version it had not written itself.
func (o *Operator) StatusReads() int64 {
	return o.counted(&o.readsBefore, (*gpuinventory.Controller).StatusReads)
}

// counted adds what the current inventory controller counted to what earlier ones did.
func (o *Operator) counted(before *int64, current func(*gpuinventory.Controller) int64) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.inventory == nil {
		return *before
	}
	return *before + current(o.inventory)
}

// StatusSkipped counts the syncs that found a status current (so wrote nothing).
func (o *Operator) StatusSkipped() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.inventory == nil {
		return 0
	}
	return o.inventory.StatusSkipped()
}

// Run runs the operator until ctx is cancelled. With leader election, nothing is written
// before the lease is held, and losing the lease is an error (the process should exit).
func (o *Operator) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	logger.Info("Starting gpu-inventory-operator", "namespace", o.namespace, "host", o.config.Host, "leaderElect", o.opts.LeaderElect)
	if o.opts.LeaderElect {
		o.leaderHealth = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	}
	metricsAddr, healthAddr, err := o.serveEndpoints(ctx)
	if err != nil {
		return err
	}
	o.mu.Lock()
	o.metricsAddr, o.healthAddr = metricsAddr, healthAddr
	o.mu.Unlock()
	if !o.opts.LeaderElect {
		metrics.Leader.Set(1)
		defer metrics.Leader.Set(0)
		return o.runControllers(ctx)
	}
	return o.runWithLeaderElection(ctx)
}

func (o *Operator) runWithLeaderElection(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("lease", klog.KRef(o.namespace, o.opts.LeaderElectionID), "identity", o.identity)
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, o.namespace, o.opts.LeaderElectionID,
		o.kube.CoreV1(), o.kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: o.identity})
	if err != nil {
		return fmt.Errorf("create leader-election lock: %w", err)
	}

	// The elector runs on its own context so that, on shutdown, the controllers stop first
	// and only then is the lease released: no write can follow the release.
	electorCtx, stopElector := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElector()
	controllersDone := make(chan struct{})
	var controllersErr error
	var led atomic.Bool
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.opts.LeaseDuration,
		RenewDeadline:   o.opts.RenewDeadline,
		RetryPeriod:     o.opts.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            o.opts.LeaderElectionID,
		WatchDog:        o.leaderHealth,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadCtx context.Context) {
				led.Store(true)
				o.leading.Store(true)
				metrics.Leader.Set(1)
				defer close(controllersDone)
				logger.Info("Became leader, starting controllers")
				runCtx, cancel := context.WithCancel(leadCtx)
				defer cancel()
				stopOnShutdown := context.AfterFunc(ctx, cancel)
				defer stopOnShutdown()
				controllersErr = o.runControllers(runCtx)
				stopElector() // controllers ended (shutdown or error): give the lease up
			},
			OnStoppedLeading: func() {
				o.leading.Store(false)
				metrics.Leader.Set(0)
				logger.Info("No longer the leader")
			},
			OnNewLeader: func(identity string) {
				if identity != o.identity {
					logger.Info("Another instance leads", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("configure leader election: %w", err)
	}

	// On shutdown, let the controllers finish before the lease is released.
	go func() {
		<-ctx.Done()
		if elector.IsLeader() {
			select {
			case <-controllersDone:
			case <-time.After(o.opts.RenewDeadline):
			}
		}
		stopElector()
	}()
	elector.Run(electorCtx)
	if led.Load() {
		<-controllersDone // the elector cancelled them; make sure no write is still under way
	}

	switch {
	case ctx.Err() != nil:
		return nil // asked to stop; the lease was released
	case controllersErr != nil:
		return controllersErr
	default:
		return fmt.Errorf("leader election lost: lease %s/%s is no longer held by %s", o.namespace, o.opts.LeaderElectionID, o.identity)
	}
}

// runControllers installs the CRD, makes sure the default inventory exists and runs both
// controllers until ctx is cancelled.
func (o *Operator) runControllers(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if o.opts.InstallCRD {
		result, err := crd.Ensure(ctx, o.apiext)
		if err != nil {
			return err
		}
		logger.Info("GpuInventory CRD "+string(result), "crd", homelabv1.CustomResourceDefinitionName)
		if err := crd.WaitEstablished(ctx, o.apiext, homelabv1.CustomResourceDefinitionName, 30*time.Second); err != nil {
			return err
		}
	}
	if err := o.ensureDefaultInventory(ctx); err != nil {
		return err
	}

	// The node cache keeps only the labels the inventory and the current node selectors read.
	// When an inventory's selector names another label, the informers are started again with
	// that label kept (a re-list, about as costly as a start).
	for {
		keys, err := o.selectorKeys(ctx)
		if err != nil {
			return err
		}
		relist := make(chan string, 1)
		runCtx, cancel := context.WithCancel(ctx)
		err = o.runInformers(runCtx, nodecache.NewNodeTrimmer(keys), func(key string) {
			select {
			case relist <- key:
			default:
			}
			cancel()
		})
		cancel()
		select {
		case key := <-relist:
			if ctx.Err() == nil {
				logger.Info("A node selector names a label the node cache drops; re-listing nodes", "label", key)
				continue
			}
		default:
		}
		return err
	}
}

// nodeClient is a clientset for the Node informer whose decoder reads each protobuf Node
// straight into the trimmer's compact form, skipping its images, addresses, managed fields
// and other labels (about 95 % of a realistic Node's bytes) instead of decoding and then
// dropping them; a Node that comes as JSON is trimmed right after decoding. So the informer
// gets only trimmed Nodes; its transform (nodecache.NewNodeInformer) then keeps of the ones
// that are no GPU node their name only.
func (o *Operator) nodeClient(trimmer *nodecache.NodeTrimmer) (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(o.protobufConfig)
	cfg.GroupVersion = &corev1.SchemeGroupVersion
	cfg.APIPath = "/api"
	cfg.NegotiatedSerializer = nodecache.NewTrimmingSerializer(
		rest.CodecFactoryForGeneratedClient(kubescheme.Scheme, kubescheme.Codecs).WithoutConversion(), trimmer)
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("create Node client: %w", err)
	}
	return kubernetes.New(rc), nil
}

// configMapSyncFactor: the ConfigMap is a secondary mirror of up to 256 KiB; under churn it
// is rewritten at most once per this many sync intervals, and after a change in a quiet
// cluster it follows the GpuInventory status by one interval: the two largest writes of
// the operator do not reach the API server together (each takes it about 100 ms at 5,000
// nodes), so the status is not slowed down by its mirror.
const configMapSyncFactor = 4

// selectorKeys lists the label keys that the node selectors of all GpuInventories name.
func (o *Operator) selectorKeys(ctx context.Context) ([]string, error) {
	list, err := o.client.HomelabV1().GpuInventories().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list GpuInventories: %w", err)
	}
	var keys []string
	for _, gi := range list.Items {
		sel, err := inventory.Selector(gi.Spec.NodeSelector)
		if err != nil {
			continue
		}
		reqs, _ := sel.Requirements()
		for _, r := range reqs {
			keys = append(keys, r.Key())
		}
	}
	return keys, nil
}

// runInformers runs the informers and both controllers until ctx is cancelled.
func (o *Operator) runInformers(ctx context.Context, trimmer *nodecache.NodeTrimmer, onUnknownKey func(string)) error {
	nodes, err := o.nodeClient(trimmer)
	if err != nil {
		return err
	}
	// The node client's decoder trims every Node (see nodeClient).
	nodeFactory := informers.NewSharedInformerFactory(nodes, 0)
	configMapFactory := informers.NewSharedInformerFactoryWithOptions(o.kube, 0,
		informers.WithNamespace(o.namespace),
		informers.WithTweakListOptions(func(opts *metav1.ListOptions) {
			opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", homelabv1.NodeStatusConfigMapName).String()
		}))
	// The GpuInventory informer's client leaves status.nodes out (see
	// inventorycache.NewInformerClient): the controller's own writes come back without it.
	inventories, err := inventorycache.NewInformerClient(o.config)
	if err != nil {
		return err
	}
	// The resync period must be the factory's too: an informer made without one ignores the
	// per-handler period the inventory controller asks for.
	inventoryFactory := externalversions.NewSharedInformerFactory(inventories, o.opts.ResyncPeriod)

	// The node cache holds GPU nodes as Nodes and the others as metadata (see
	// nodecache.NewNodeInformer).
	nodeInformer := nodeFactory.InformerFor(&corev1.Node{}, nodecache.NewNodeInformer)
	// Events about GPU nodes go to the GpuInventory; the broadcaster aggregates repeats.
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: o.kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: homelabv1.FieldManager})

	entries := inventory.NewEntryCache() // both controllers read the same nodes
	invController, err := gpuinventory.NewController(ctx, o.client, nodeInformer,
		inventoryFactory.Homelab().V1().GpuInventories(), gpuinventory.Config{
			ResyncPeriod: o.opts.ResyncPeriod, MaxStatusNodes: o.opts.MaxStatusNodes, Recorder: recorder,
			MinSyncInterval: o.opts.MinSyncInterval, KeepsLabel: trimmer.Keeps, OnUnknownSelectorKey: onUnknownKey,
			PerNodeMetrics: o.opts.PerNodeMetrics,
			Entries:        entries,
		})
	if err != nil {
		return err
	}
	statusController, err := nodestatus.NewController(o.kube, o.namespace, o.opts.MaxStatusNodes,
		configMapSyncFactor*o.opts.MinSyncInterval, o.opts.MinSyncInterval, entries, nodeInformer, configMapFactory.Core().V1().ConfigMaps())
	if err != nil {
		return err
	}
	o.mu.Lock()
	if o.inventory != nil {
		o.writesBefore += o.inventory.StatusWrites()
		o.readsBefore += o.inventory.StatusReads()
	}
	o.inventory = invController
	o.mu.Unlock()

	nodeFactory.Start(ctx.Done())
	configMapFactory.Start(ctx.Done())
	inventoryFactory.Start(ctx.Done())
	defer func() {
		nodeFactory.Shutdown()
		configMapFactory.Shutdown()
		inventoryFactory.Shutdown()
	}()

	// The initial list reads about 20 KB of protobuf per Node to keep a few hundred bytes of
	// it; hand the buffers' memory back to the OS once the caches hold only trimmed objects.
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), nodeInformer.HasSynced) {
			runtime.GC()
			debug.FreeOSMemory()
		}
	}()

	errs := make(chan error, 2)
	go func() { errs <- invController.Run(ctx, o.opts.Workers) }()
	go func() { errs <- statusController.Run(ctx) }()
	return errors.Join(<-errs, <-errs)
}

// ensureDefaultInventory creates the GpuInventory that covers every node, if it is missing.
func (o *Operator) ensureDefaultInventory(ctx context.Context) error {
	name := o.opts.DefaultInventory
	if name == "" {
		return nil
	}
	_, err := o.client.HomelabV1().GpuInventories().Create(ctx, &homelabv1.GpuInventory{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       homelabv1.GpuInventorySpec{Note: "Created by gpu-inventory-operator: every GPU node in the cluster."},
	}, metav1.CreateOptions{FieldManager: homelabv1.FieldManager})
	switch {
	case err == nil:
		klog.FromContext(ctx).Info("Created default GpuInventory", "inventory", name)
		return nil
	case apierrors.IsAlreadyExists(err):
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("create default GpuInventory %s: the GpuInventory CRD is not installed "+
			"(run with --install-crd=true, or `kubectl apply -f manifests/crd/`): %w", name, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("create default GpuInventory %s: the operator may not create gpuinventories.homelab.youngju.dev "+
			"(apply the RBAC in manifests/, or run with --default-inventory=\"\"): %w", name, err)
	default:
		return fmt.Errorf("create default GpuInventory %s: %w", name, err)
	}
}
