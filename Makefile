# gpu-inventory-operator: `make help` lists what you can do.
SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help

GO        ?= go
BIN       := bin
TESTBIN    = $(shell bash hack/testbin.sh)

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/gpu-inventory-operator, the fleet hub bin/gpu-fleet-hub and the kubectl plugin bin/kubectl-gpuinv.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/gpu-inventory-operator ./cmd/gpu-inventory-operator
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/gpu-fleet-hub ./cmd/gpu-fleet-hub
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/kubectl-gpuinv ./cmd/kubectl-gpuinv

ARCH      ?= $(shell $(GO) env GOARCH)
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE     ?= gpu-inventory-operator:dev
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
# The commit's time, so that a rebuild of the same commit is the same binary.
BUILD_DATE ?= $(shell git show -s --format=%cI HEAD 2>/dev/null)
# What the binaries report in --version.
LDFLAGS   := -X github.com/youngju-dev/gpu-inventory-operator/pkg/version.version=$(VERSION) \
             -X github.com/youngju-dev/gpu-inventory-operator/pkg/version.commit=$(COMMIT) \
             -X github.com/youngju-dev/gpu-inventory-operator/pkg/version.buildDate=$(BUILD_DATE)

.PHONY: image
image: ## Build the container image (the operator, its entrypoint, and /gpu-fleet-hub) as bin/gpu-inventory-operator-image.tar without a daemon (ARCH, IMAGE); docker/podman load it.
	CGO_ENABLED=0 GOOS=linux GOARCH=$(ARCH) $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' -o $(BIN)/linux-$(ARCH)/ ./cmd/gpu-inventory-operator ./cmd/gpu-fleet-hub
	$(GO) run ./hack/image --binary $(BIN)/linux-$(ARCH)/gpu-inventory-operator --extra-binary $(BIN)/linux-$(ARCH)/gpu-fleet-hub --arch $(ARCH) --version $(VERSION) --tag $(IMAGE) --output $(BIN)/gpu-inventory-operator-image.tar

RELEASE_DIR   := $(BIN)/release
RELEASE_IMAGE ?= gpu-inventory-operator:$(VERSION)

.PHONY: release
release: ## Release VERSION (a v-tag) into bin/release: tar.gz of each binary (+LICENSE, README.md) for linux and darwin amd64/arm64 and windows/amd64 (the fleet hub: linux and darwin only), SHA256SUMS, the krew manifest gpuinv.yaml, the operator's linux/amd64+arm64 image index (the hub inside too) as an oci-archive (skopeo copy oci-archive:, podman load, docker load with the containerd store) and in bin/release-oci as an OCI layout (crane push); checked after writing.
	rm -rf $(RELEASE_DIR) $(BIN)/release-oci
	$(GO) run ./hack/release --version '$(VERSION)' --ldflags '-s -w $(LDFLAGS)' --date '$(BUILD_DATE)' --image '$(RELEASE_IMAGE)' --go '$(GO)' --output $(RELEASE_DIR) --oci-layout $(BIN)/release-oci

.PHONY: demo
demo: build ## Run the operator on a local control plane loaded with the home lab and Kueue queues (Ctrl-C to stop).
	$(GO) build -o $(BIN)/demo ./hack/demo
	dir=$$(bash hack/testbin.sh demo) && TESTBIN_DIR="$$dir" $(BIN)/demo --operator $(BIN)/gpu-inventory-operator

.PHONY: test
test: test-unit test-integration ## Unit tests, then integration tests against a real kube-apiserver.

.PHONY: test-unit
test-unit: ## Unit tests (fake clientset, pure packages); no external process.
	$(GO) test ./...

.PHONY: test-integration
test-integration: testbin ## Integration tests against a local etcd + kube-apiserver (builds them once).
	TESTBIN_DIR="$(TESTBIN)" $(GO) test -tags integration -count=1 -timeout 30m ./pkg/integration/...

.PHONY: test-race
test-race: testbin ## Unit and integration tests with Go's race detector (needs cgo and a C compiler).
	$(GO) test -race ./...
	TESTBIN_DIR="$(TESTBIN)" $(GO) test -race -tags integration -count=1 -timeout 60m ./pkg/integration/...

N         ?= 5000
CHURN     ?= 50
INVENTORIES ?= 1000
OUTAGE    ?= 2m

.PHONY: bench
bench: build testbin ## Benchmarks of the pure package, then the scale run: kubectl gpuinv over 10 clusters, the fleet hub over 50 member doubles, a real control plane, operator and kubectl plugin, GpuNode records, hostile nodes, many inventories, a GFD outage and allocation with 100,000 pods (N=5000 CHURN=50 INVENTORIES=1000 OUTAGE=2m; needs about 16 GiB free).
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/inventory/
	$(GO) test -run '^$$' -bench DecodeBench -benchmem ./pkg/nodecache/ ./pkg/slicecache/ ./pkg/claimcache/ ./pkg/podcache/
	TESTBIN_DIR="$(TESTBIN)" $(GO) run ./hack/scale --operator $(BIN)/gpu-inventory-operator --plugin $(BIN)/kubectl-gpuinv --hub $(BIN)/gpu-fleet-hub --nodes $(N) --churn $(CHURN) --flip-duration 30s --republish-duration 30s --hostile-duration 1m --inventories $(INVENTORIES) --outage-duration $(OUTAGE) --pods 100000 --gpu-pods 20000 --pod-churn 100 --pod-churn-duration 30s

.PHONY: bench-large
bench-large: build testbin ## Not part of bench: the scale run's first phases on 20,000 nodes (10,000 GPU nodes, half of them DRA nodes); prints steady RSS, peak RSS and CPU at 50 Ready flips/s (CHURN). Needs the whole machine.
	TESTBIN_DIR="$(TESTBIN)" $(GO) run ./hack/scale --operator $(BIN)/gpu-inventory-operator --nodes 20000 --churn $(CHURN) --flip-duration 30s --republish-duration 30s --relabel-duration 0 --hostile-duration 0 --inventories 0 --outage-duration 0 --hub-members 0

.PHONY: testbin
testbin: ## Build the test bed from the Go module proxy into a cache (once; about 25 min cold on 2 cores): kube-apiserver, etcd, kwok, kube-scheduler, the ResourceClaim and Job controllers, Kueue and its CRDs, Prometheus and promtool.
	@bash hack/testbin.sh >/dev/null

REF         ?=
BENCH_COUNT ?= 6

.PHONY: bench-compare
bench-compare: ## This build's Go benchmarks against REF's (a git ref, checked out in a temporary worktree), compared by benchstat (BENCH_COUNT=6, BENCH_PKGS; SCALE=1 also runs make bench's scale run at both and keeps both outputs).
	@test -n "$(REF)" || { echo "usage: make bench-compare REF=<git ref> [BENCH_COUNT=6] [BENCH_PKGS=./pkg/x/] [SCALE=1]"; exit 2; }
	bash hack/bench-compare --count $(BENCH_COUNT) $(if $(SCALE),--scale) $(REF)

.PHONY: generate
generate: ## Regenerate deepcopy, clientset, listers, informers, apply configurations, the CRD and the Grafana dashboard.
	bash hack/update-codegen.sh
	$(GO) run ./hack/dashboard
	$(GO) mod tidy

.PHONY: verify
verify: ## Fail when generated files are stale, go.mod is untidy, code is unformatted or lacks the licence notice, or go vet or staticcheck complain.
	bash hack/verify-codegen.sh
	$(GO) run ./hack/dashboard --verify
	bash hack/verify-boilerplate.sh
	@$(GO) mod tidy -diff >/dev/null || { $(GO) mod tidy -diff; echo "go.mod/go.sum: run 'go mod tidy'"; exit 1; }
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: run 'gofmt -w' on the files above"; exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags integration ./pkg/integration/...
	$(GO) tool staticcheck -tags integration $$($(GO) list ./... | grep -v /pkg/generated/)

.PHONY: clean
clean: ## Remove build output, bin/ with the release assets in bin/release (the testbin cache stays; see hack/testbin.sh).
	rm -rf $(BIN)
