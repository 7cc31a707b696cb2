# registrar Makefile. Tools are pinned and installed as versioned binaries under bin/.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

IMG ?= registrar:latest
KUBE_VERSION ?= v1.37.2
ETCD_VERSION ?= v3.7.3
CONTROLLER_TOOLS_VERSION ?= v0.23.0
KUSTOMIZE_VERSION ?= v5.8.1
GINKGO_VERSION ?= v2.34.0

LOCALBIN ?= $(shell pwd)/bin
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
KUSTOMIZE ?= $(LOCALBIN)/kustomize-$(KUSTOMIZE_VERSION)
# The kustomize overlay build-installer and deploy use: config/default needs cert-manager;
# config/default-selfsigned does not (one replica, self-signed webhook certificate).
INSTALL_OVERLAY ?= config/default
GINKGO ?= $(LOCALBIN)/ginkgo-$(GINKGO_VERSION)
ENVTEST_ASSETS ?= $(LOCALBIN)/k8s/$(KUBE_VERSION)-etcd$(ETCD_VERSION)
TEST_TIMEOUT ?= 20m
# Files controller-gen writes; verify-generated fails when they differ from what is committed.
GENERATED := api/v1alpha1/zz_generated.deepcopy.go config/crd/bases config/rbac/role.yaml config/webhook/manifests.yaml

.PHONY: all
all: build

##@ General
.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development
.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRD, RBAC and webhook manifests.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd webhook paths="./..." output:crd:artifacts:config=config/crd/bases output:webhook:artifacts:config=config/webhook

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate DeepCopy methods.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./..."

.PHONY: verify-generated
verify-generated: manifests generate ## Fail when generated files differ from what is committed.
	@if [ -n "$$(git status --porcelain -- $(GENERATED))" ]; then \
		git status --porcelain -- $(GENERATED); git --no-pager diff --stat -- $(GENERATED); \
		echo "generated files are stale: run 'make generate manifests bundle docs' and commit them"; exit 1; fi

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: envtest-assets
envtest-assets: $(ENVTEST_ASSETS)/kube-apiserver ## Build kube-apiserver and etcd from source (cached in bin/).

$(ENVTEST_ASSETS)/kube-apiserver $(ENVTEST_ASSETS)/etcd:
	KUBE_VERSION=$(KUBE_VERSION) ETCD_VERSION=$(ETCD_VERSION) ASSETS_DIR=$(ENVTEST_ASSETS) hack/envtest-assets.sh

.PHONY: test
test: verify-generated vet envtest-assets store-assets ## Run unit and envtest suites against a real kube-apiserver and etcd.
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) ETCD_BIN=$(ENVTEST_ASSETS)/etcd $(STORE_TEST_ENV) \
		go test ./... -race -count=1 -timeout $(TEST_TIMEOUT) -coverprofile cover.out

##@ Fuzzing
FUZZTIME ?= 30s
FUZZ_PACKAGES ?= ./internal/store/etcd

.PHONY: fuzz
fuzz: ## Run every Go fuzz target of FUZZ_PACKAGES for FUZZTIME each (seed corpora also run in make test).
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh $(FUZZ_PACKAGES)

##@ Stores (the real servers the tests of internal/store/coredns and zookeeper run against)
COREDNS_VERSION := $(shell awk '$$1 == "github.com/coredns/coredns" || ($$1 == "require" && $$2 == "github.com/coredns/coredns") {print $$NF; exit}' hack/coredns/go.mod)
COREDNS_BIN ?= $(LOCALBIN)/coredns-$(COREDNS_VERSION)
STORE_TEST_ENV = COREDNS_BIN=$(COREDNS_BIN)

.PHONY: store-assets
store-assets: $(COREDNS_BIN) zookeeper-assets ## Build CoreDNS (etcd plugin only, cached in bin/); install ZooKeeper (apt) when missing.

.PHONY: zookeeper-assets
zookeeper-assets:
	hack/zookeeper.sh >/dev/null

$(COREDNS_BIN): hack/coredns/go.mod hack/coredns/main.go
	OUT=$@ hack/coredns.sh

.PHONY: measure-dns-lag
measure-dns-lag: envtest-assets store-assets ## Pod unready -> gone from DNS (CoreDNS answering, server side), from the multi-store envtest (3 runs).
	for i in 1 2 3; do KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) ETCD_BIN=$(ENVTEST_ASSETS)/etcd $(STORE_TEST_ENV) \
		go test ./test/multistore/ -count=1 -v -args -ginkgo.v -ginkgo.focus='registers ready pods in both stores' \
		| grep 'unready -> gone from DNS (server side'; done

##@ Build
.PHONY: build
build: ## Build the manager binary.
	CGO_ENABLED=0 go build -o bin/registrar ./cmd

.PHONY: build-registrarctl
build-registrarctl: ## Build the registrarctl CLI (bin/registrarctl).
	CGO_ENABLED=0 go build -o bin/registrarctl ./cmd/registrarctl

.PHONY: run
run: envtest-assets ## Run the operator against $$KUBECONFIG, or a local control plane when none is reachable.
	ENVTEST_ASSETS=$(ENVTEST_ASSETS) hack/run.sh

.PHONY: build-installer
build-installer: manifests $(KUSTOMIZE) ## Write dist/install.yaml (INSTALL_OVERLAY, image IMG).
	mkdir -p dist
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build $(INSTALL_OVERLAY) > dist/install.yaml
	cd config/manager && $(KUSTOMIZE) edit set image controller=registrar:latest

.PHONY: deploy
deploy: manifests $(KUSTOMIZE) ## Install into the cluster in $$KUBECONFIG (INSTALL_OVERLAY, image IMG).
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build $(INSTALL_OVERLAY) | kubectl apply -f -
	cd config/manager && $(KUSTOMIZE) edit set image controller=registrar:latest

.PHONY: undeploy
undeploy: $(KUSTOMIZE) ## Remove what deploy installed.
	$(KUSTOMIZE) build $(INSTALL_OVERLAY) | kubectl delete --ignore-not-found -f -

.PHONY: docker-build
docker-build: ## Build the container image (needs a Docker engine).
	docker build -t $(IMG) .

##@ Tools
$(CONTROLLER_GEN):
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(LOCALBIN)/controller-gen $@

$(KUSTOMIZE):
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	mv $(LOCALBIN)/kustomize $@

$(GINKGO):
	GOBIN=$(LOCALBIN) go install github.com/onsi/ginkgo/v2/ginkgo@$(GINKGO_VERSION)
	mv $(LOCALBIN)/ginkgo $@

##@ Measurements
.PHONY: measure-lag
measure-lag: envtest-assets ## Deregistration and warm-up timings from the envtest suite (3 runs).
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) ETCD_BIN=$(ENVTEST_ASSETS)/etcd hack/measure-lag.sh 3

BREAKER_RUNS ?= 3
BREAKER_FAIL_FOR ?= 20s

.PHONY: bench-breaker
bench-breaker: envtest-assets ## The seed's breaker scenario: 50 callers, a dependency down for 20s; per-instance vs coordinated (BREAKER_RUNS runs): table + docs/bench/breaker-*.json.
	ETCD_BIN=$(ENVTEST_ASSETS)/etcd go run ./test/breakerbench/cmd -runs $(BREAKER_RUNS) -fail-for $(BREAKER_FAIL_FOR)
	ETCD_BIN=$(ENVTEST_ASSETS)/etcd go test ./pkg/discovery/ -run '^$$' -bench 'BenchmarkDo' -count 3

##@ Fault tests (test/faults; a fast subset runs in make test)
FAULTS_TIMEOUT ?= 30m

.PHONY: test-faults
test-faults: envtest-assets ## Run every fault test (real processes on loopback) and print the summary table.
	mkdir -p $(LOCALBIN)
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) ETCD_BIN=$(ENVTEST_ASSETS)/etcd FAULTS_FULL=1 FAULTS_SUMMARY=$(LOCALBIN)/faults-summary.md \
		go test ./test/faults/ -count=1 -v -timeout $(FAULTS_TIMEOUT) 2>&1 | grep -v '^\s*>' | tee $(LOCALBIN)/faults.log | grep -E '^(=== RUN|--- |\s+\S+_test.go|PASS|FAIL|ok)'
	@echo; echo "Fault suite summary ($$(date -u +%FT%TZ), make test-faults):"; echo; cat $(LOCALBIN)/faults-summary.md

##@ Benchmark (test/bench; see README "Performance")
BENCH_DIR ?= $(LOCALBIN)/bench
BENCH_ARGS ?=
BENCH_RUN = KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) ETCD_BIN=$(ENVTEST_ASSETS)/etcd go run ./test/bench/cmd \
	-operator $(BENCH_DIR)/registrar -kube-controller-manager $(ENVTEST_ASSETS)/kube-controller-manager

.PHONY: bench
bench: envtest-assets $(ENVTEST_ASSETS)/kube-controller-manager ## 1,000 pods / 100 registries vs the EndpointSlice controller and a TTL registry: table + bin/bench/bench-results.json.
	CGO_ENABLED=0 go build -o $(BENCH_DIR)/registrar ./cmd
	$(BENCH_RUN) -pods 1000 -registries 100 -workdir $(BENCH_DIR)/run -out $(BENCH_DIR)/bench-results.json $(BENCH_ARGS)

.PHONY: bench-large
bench-large: envtest-assets $(ENVTEST_ASSETS)/kube-controller-manager ## 5,000 pods / 500 registries, with the operator's CPU and heap profiles: bin/bench/large/.
	CGO_ENABLED=0 go build -o $(BENCH_DIR)/registrar ./cmd
	$(BENCH_RUN) -pods 5000 -registries 500 -workdir $(BENCH_DIR)/large/run -profile-dir $(BENCH_DIR)/large/profiles \
		-out $(BENCH_DIR)/large/bench-results.json $(BENCH_ARGS)

$(ENVTEST_ASSETS)/kube-controller-manager:
	KUBE_VERSION=$(KUBE_VERSION) ETCD_VERSION=$(ETCD_VERSION) ASSETS_DIR=$(ENVTEST_ASSETS) \
		KUBE_EXTRA_BINARIES=kube-controller-manager hack/envtest-assets.sh

##@ Images
IMAGES_DIR ?= $(LOCALBIN)/images
IMAGE_GO_BUILD := CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags "-s -w"

.PHONY: images
images: ## Static binaries and image tars bin/images/{registrar,pause,demoapp}.tar for `ctr -n k8s.io images import` (no Docker).
	mkdir -p $(IMAGES_DIR)
	$(IMAGE_GO_BUILD) -o $(LOCALBIN)/registrar-linux-amd64 ./cmd
	$(IMAGE_GO_BUILD) -o $(LOCALBIN)/pause-linux-amd64 ./test/e2e/pause
	$(IMAGE_GO_BUILD) -o $(LOCALBIN)/demoapp-linux-amd64 ./test/e2e/demoapp
	go build -o $(LOCALBIN)/imagetool ./hack/imagetool
	$(LOCALBIN)/imagetool -binary $(LOCALBIN)/registrar-linux-amd64 -name registrar.dev/registrar:local \
		-entrypoint /registrar -user 65532 -out $(IMAGES_DIR)/registrar.tar
	$(LOCALBIN)/imagetool -binary $(LOCALBIN)/pause-linux-amd64 -name registrar.dev/pause:local \
		-entrypoint /pause -out $(IMAGES_DIR)/pause.tar
	$(LOCALBIN)/imagetool -binary $(LOCALBIN)/demoapp-linux-amd64 -name registrar.dev/demoapp:local \
		-entrypoint /demoapp -user 65532 -out $(IMAGES_DIR)/demoapp.tar
	@ls -l $(IMAGES_DIR)

##@ Cluster (single-node Kubernetes on this machine; see hack/cluster/README.md)
CLUSTER_BINARIES := kube-controller-manager kube-scheduler kubelet

.PHONY: cluster-binaries
cluster-binaries: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubelet into bin/k8s/.
	KUBE_VERSION=$(KUBE_VERSION) ETCD_VERSION=$(ETCD_VERSION) ASSETS_DIR=$(ENVTEST_ASSETS) \
		KUBE_EXTRA_BINARIES="$(CLUSTER_BINARIES)" hack/envtest-assets.sh

.PHONY: cluster-up
cluster-up: ## Start the cluster (builds missing binaries; state in bin/cluster). hack/cluster/up.sh exits 2 where it cannot run.
	KUBE_VERSION=$(KUBE_VERSION) ETCD_VERSION=$(ETCD_VERSION) CLUSTER_ASSETS=$(ENVTEST_ASSETS) hack/cluster/up.sh

.PHONY: cluster-down
cluster-down: ## Stop the cluster and remove its processes, mounts, network and state (KEEP_STATE=1 keeps bin/cluster).
	hack/cluster/down.sh

##@ End-to-end (real kubelet)
E2E_TIMEOUT ?= 40m
E2E_ARGS ?=
E2E_RESULTS ?= $(LOCALBIN)/e2e-results/test-e2e.json
E2E_RUNS ?= 3
E2E_BENCH_OUT ?= docs/bench/e2e-$(shell date -u +%Y-%m-%d).json
# E2E_GO_TEST runs the e2e suite against bin/cluster, the comparison's raw results into $$res;
# E2E_SETUPS (e.g. registrar) limits the compared setups.
E2E_GO_TEST = set -a; . bin/cluster/cluster.env; set +a; \
	E2E_KUBECONFIG=$(CURDIR)/bin/cluster/admin.kubeconfig E2E_NODE_IP=$$(ip -4 -o addr show dev $$CLUSTER_BRIDGE | awk '{print $$4}' | cut -d/ -f1) \
		E2E_INSTALL=$(CURDIR)/dist/install.yaml E2E_CONTAINERD_SOCK=$(CURDIR)/bin/cluster/containerd/containerd.sock ETCD_BIN=$(ENVTEST_ASSETS)/etcd \
		E2E_RESULTS=$$res go test -tags e2e ./test/e2e/ -count=1 -timeout $(E2E_TIMEOUT) -v

.PHONY: test-e2e
test-e2e: images cluster-up ## Install registrar on the real single-node cluster and run the e2e suite (the comparison's table included; raw results in E2E_RESULTS), then tear the cluster down (KEEP_CLUSTER=1 keeps it).
	$(MAKE) build-installer IMG=registrar.dev/registrar:local INSTALL_OVERLAY=config/default-selfsigned
	rc=0; res=$(E2E_RESULTS); $(E2E_GO_TEST) -args -ginkgo.v $(E2E_ARGS) || rc=$$?; \
	if [ -z "$(KEEP_CLUSTER)" ]; then hack/cluster/down.sh; fi; exit $$rc

.PHONY: bench-e2e
bench-e2e: images cluster-up ## The e2e comparison (graceful rollout + four failures, every setup) E2E_RUNS times on one cluster: median/spread tables into E2E_BENCH_OUT (docs/bench/e2e-<date>.json).
	$(MAKE) build-installer IMG=registrar.dev/registrar:local INSTALL_OVERLAY=config/default-selfsigned
	rm -rf $(LOCALBIN)/e2e-results/bench; mkdir -p $(LOCALBIN)/e2e-results/bench
	rc=0; for i in $$(seq 1 $(E2E_RUNS)); do \
		res=$(LOCALBIN)/e2e-results/bench/run-$$i.json; $(E2E_GO_TEST) -args -ginkgo.v -ginkgo.focus='Comparison under load' -ginkgo.seed=$$i $(E2E_ARGS) || rc=$$?; \
	done; \
	if ls $(LOCALBIN)/e2e-results/bench/run-*.json >/dev/null 2>&1; then go run ./hack/e2ebench -command "make bench-e2e E2E_RUNS=$(E2E_RUNS)" -out $(E2E_BENCH_OUT) $(LOCALBIN)/e2e-results/bench/run-*.json || rc=$$?; fi; \
	if [ -z "$(KEEP_CLUSTER)" ]; then hack/cluster/down.sh; fi; exit $$rc

.PHONY: print-envtest-assets
print-envtest-assets:
	@echo $(ENVTEST_ASSETS)

##@ OLM bundle and configuration reference (generated: verify-generated fails when stale)
VERSION ?= 0.1.0
CHANNELS ?= candidate
DEFAULT_CHANNEL ?= candidate
BUNDLE_IMG ?= registrar-bundle:v$(VERSION)
GENERATED += bundle bundle.Dockerfile docs/reference.md

verify-generated: bundle docs

.PHONY: bundle
bundle: manifests ## Generate the OLM bundle (bundle/, bundle.Dockerfile) from config/manifests and config/samples, offline.
	go run ./hack/bundlegen -version $(VERSION) -image $(IMG) -channels $(CHANNELS) -default-channel $(DEFAULT_CHANNEL)

.PHONY: bundle-build
bundle-build: bundle ## Build the bundle image BUNDLE_IMG (needs a Docker engine).
	docker build -f bundle.Dockerfile -t $(BUNDLE_IMG) .

.PHONY: docs
docs: manifests ## Regenerate docs/reference.md (manager flags, annotations, conditions, CRD fields) from the code.
	go test ./cmd -run '^TestConfigurationReference$$' -count=1 -args -update-docs

##@ xDS
.PHONY: bench-xds
bench-xds: envtest-assets ## 100 ADS clients × 100 registries under 100 pod changes/s, 3 runs: docs/bench/xds-run-{1,2,3}.json and xds-summary.json (median, spread).
	mkdir -p docs/bench
	for i in 1 2 3; do KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) ETCD_BIN=$(ENVTEST_ASSETS)/etcd XDS_BENCH_OUT=$(CURDIR)/docs/bench/xds-run-$$i.json \
		go test ./test/xds/ -count=1 -timeout 20m -ginkgo.label-filter=bench || exit 1; done
	python3 hack/xds-bench-summary.py docs/bench/xds-run-1.json docs/bench/xds-run-2.json docs/bench/xds-run-3.json > docs/bench/xds-summary.json
	cat docs/bench/xds-summary.json
