# registrar Makefile. Tools are pinned and installed as versioned binaries under bin/.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

IMG ?= registrar:latest
KUBE_VERSION ?= v1.37.2
ETCD_VERSION ?= v3.7.3
CONTROLLER_TOOLS_VERSION ?= v0.23.0
KUSTOMIZE_VERSION ?= v5.8.1
GINKGO_VERSION ?= v2.34.0
# helm CLI for the chart's tests (charts/registrar); built from the module proxy, not linked
# into the operator. Its k8s minor (default capabilities, deprecation lint) is the client-go
# minor of helm v3.22.0's go.mod.
HELM_VERSION ?= v3.22.0
HELM_K8S_MINOR ?= 37
# promtool for the alert rules' tests (config/prometheus), built from the module proxy.
PROMTOOL_VERSION ?= v0.316.0

LOCALBIN ?= $(shell pwd)/bin
# Every build without the race detector is CGO_ENABLED=0 (the images must be static anyway), so
# go vet, go run of the generators, the operator the tests start, the images and the tools share
# one build cache; only the -race test runs (which need cgo) set CGO_ENABLED=1.
export CGO_ENABLED = 0
RACE_GO_TEST = CGO_ENABLED=1 go test -race
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
KUSTOMIZE ?= $(LOCALBIN)/kustomize-$(KUSTOMIZE_VERSION)
HELM ?= $(LOCALBIN)/helm-$(HELM_VERSION)
PROMTOOL ?= $(LOCALBIN)/promtool-$(PROMTOOL_VERSION)
CHART_DIR := charts/registrar
# The kustomize overlay build-installer and deploy use: config/default needs cert-manager;
# config/default-selfsigned does not (one replica, self-signed webhook certificate).
INSTALL_OVERLAY ?= config/default
GINKGO ?= $(LOCALBIN)/ginkgo-$(GINKGO_VERSION)
ENVTEST_ASSETS ?= $(LOCALBIN)/k8s/$(KUBE_VERSION)-etcd$(ETCD_VERSION)
TEST_TIMEOUT ?= 20m
# Files controller-gen writes; verify-generated fails when they differ from what is committed.
GENERATED := api/v1alpha1/zz_generated.deepcopy.go api/v1beta1/zz_generated.deepcopy.go config/crd/bases config/rbac/role.yaml config/webhook/manifests.yaml \
	config/prometheus/prometheusrule.yaml $(CHART_DIR)/files

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
	@# The Helm chart ships the same CRDs (rendered by templates/crds.yaml, with the conversion
	@# webhook), manager rules and webhooks (test/helm checks they are identical).
	rm -f $(CHART_DIR)/files/crds/*.yaml && cp config/crd/bases/*.yaml $(CHART_DIR)/files/crds/
	cp config/rbac/role.yaml $(CHART_DIR)/files/manager-role.yaml
	cp config/rbac/leader_election_role.yaml $(CHART_DIR)/files/leader-election-role.yaml
	cp config/webhook/manifests.yaml $(CHART_DIR)/files/webhook-manifests.yaml
	@# The alert rules: one source (config/prometheus/rules.yaml, tested by make test-rules),
	@# wrapped into a PrometheusRule for kustomize and shipped in the chart.
	hack/prometheusrule.sh config/prometheus/rules.yaml > config/prometheus/prometheusrule.yaml
	cp config/prometheus/rules.yaml $(CHART_DIR)/files/prometheus-rules.yaml

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
envtest-assets: $(ENVTEST_ASSETS)/etcd $(ENVTEST_ASSETS)/kube-apiserver ## Build kube-apiserver and etcd from source (cached in bin/).

# One binary per target (etcd, kube-apiserver, and the cluster's kube-controller-manager,
# kube-scheduler, kubelet), so CI times each build; all the Kubernetes ones come from one module.
$(ENVTEST_ASSETS)/%:
	KUBE_VERSION=$(KUBE_VERSION) ETCD_VERSION=$(ETCD_VERSION) ASSETS_DIR=$(ENVTEST_ASSETS) hack/envtest-assets.sh $* >/dev/null

# CoreDNS (built from source into bin/): the DNS canary test in make test, the CoreDNS
# store suite in make test-stores.
COREDNS_VERSION := $(shell awk '$$1 == "github.com/coredns/coredns" || ($$1 == "require" && $$2 == "github.com/coredns/coredns") {print $$NF; exit}' hack/coredns/go.mod)
COREDNS_BIN ?= $(LOCALBIN)/coredns-$(COREDNS_VERSION)
STORE_TEST_ENV = COREDNS_BIN=$(COREDNS_BIN)

# The suites that need the slower store servers (CoreDNS built from source, ZooKeeper on a
# JVM) run in make test-stores; make test runs every other package.
STORE_TEST_PACKAGES := ./internal/store/coredns ./internal/store/zookeeper ./test/multistore
TEST_PACKAGES = $(shell go list ./... | grep -v -E '/internal/store/(coredns|zookeeper)$$|/test/multistore$$')

.PHONY: test
test: verify-generated vet envtest-assets $(HELM) $(COREDNS_BIN) test-rules ## Run unit and envtest suites against a real kube-apiserver and etcd, test/helm (helm lint, helm template, chart vs kustomize, helm install into envtest), the DNS canary against a real CoreDNS and the alert rules' unit tests (make test-rules); not the CoreDNS-store/ZooKeeper suites: make test-stores.
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) ETCD_BIN=$(ENVTEST_ASSETS)/etcd $(CHART_TEST_ENV) $(STORE_TEST_ENV) \
		$(RACE_GO_TEST) $(TEST_PACKAGES) -count=1 -timeout $(TEST_TIMEOUT) -coverprofile cover.out

.PHONY: test-rules
test-rules: $(PROMTOOL) ## promtool check rules and promtool test rules on config/prometheus (the alerts fire, and do not, on the series of rules_test.yaml).
	$(PROMTOOL) check rules config/prometheus/rules.yaml
	cd config/prometheus && $(PROMTOOL) test rules rules_test.yaml
	@# Every query of the Grafana dashboard must parse: checked as recording rules.
	python3 -c 'import json,sys; q=[t["expr"] for p in json.load(open(sys.argv[1]))["panels"] for t in p.get("targets",[])]; \
		print("groups:\n- name: dashboard\n  rules:"); [print("  - record: dashboard:query_%d\n    expr: %s" % (i, json.dumps(e))) for i, e in enumerate(q)]' \
		config/prometheus/dashboard.json > $(LOCALBIN)/dashboard-queries.yaml
	$(PROMTOOL) check rules $(LOCALBIN)/dashboard-queries.yaml

.PHONY: test-stores
test-stores: envtest-assets store-assets ## Run the store suites that need CoreDNS (built into bin/) and ZooKeeper (apt, JDK): STORE_TEST_PACKAGES.
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) ETCD_BIN=$(ENVTEST_ASSETS)/etcd $(STORE_TEST_ENV) \
		$(RACE_GO_TEST) $(STORE_TEST_PACKAGES) -count=1 -timeout $(TEST_TIMEOUT) -coverprofile cover-stores.out

##@ Lint
GOLANGCI_LINT_VERSION := $(shell awk '$$1 == "github.com/golangci/golangci-lint/v2" {print $$2; exit}' hack/golangci-lint/go.mod)
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (.golangci.yml: kubebuilder's linter set, the Kube API Linter on api/; the build-tagged suites too), the layering rules (hack/layercheck), the doc links and the bench tables.
	$(GOLANGCI_LINT) run ./...
	go run ./hack/layercheck
	go run ./hack/doccheck
	go run ./bench/benchdoc -check

.PHONY: lint-fix
lint-fix: $(GOLANGCI_LINT) ## Run golangci-lint and apply the fixes it knows.
	$(GOLANGCI_LINT) run --fix ./...

$(GOLANGCI_LINT): hack/golangci-lint/go.mod hack/golangci-lint/main.go
	OUT=$@ hack/golangci-lint.sh

CHART_TEST_ENV = HELM_BIN=$(HELM)

.PHONY: test-chart
test-chart: envtest-assets $(HELM) ## helm lint and helm template of charts/registrar, the chart vs the kustomize output, helm install into envtest (test/helm).
	$(HELM) lint --strict $(CHART_DIR)
	$(HELM) template registrar $(CHART_DIR) --namespace registrar-system > /dev/null
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) $(CHART_TEST_ENV) go test ./test/helm/ -count=1 -v

##@ Fuzzing
FUZZTIME ?= 30s
FUZZ_PACKAGES ?= ./internal/store/etcd

.PHONY: fuzz
fuzz: ## Run every Go fuzz target of FUZZ_PACKAGES for FUZZTIME each (seed corpora also run in make test).
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh $(FUZZ_PACKAGES)

##@ Stores (the real servers the tests of internal/store/coredns and zookeeper run against: make test-stores)

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
build-registrarctl: ## Build the registrarctl CLI (bin/registrarctl) and the same binary as the kubectl plugin bin/kubectl-registrar (docs/registrarctl.md).
	CGO_ENABLED=0 go build -o bin/registrarctl ./cmd/registrarctl
	cp bin/registrarctl bin/kubectl-registrar
	install -m 0755 cmd/registrarctl/kubectl_complete-registrar bin/kubectl_complete-registrar

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

$(HELM):
	GOBIN=$(LOCALBIN) go install -ldflags "-X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
		-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(HELM_K8S_MINOR) \
		-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(HELM_K8S_MINOR)" \
		helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(LOCALBIN)/helm $@

$(GINKGO):
	GOBIN=$(LOCALBIN) go install github.com/onsi/ginkgo/v2/ginkgo@$(GINKGO_VERSION)
	mv $(LOCALBIN)/ginkgo $@

# remove_all_sd: promtool without the cloud service discoveries (AWS, Azure, GCE, ...) the rule
# tests never use, a third fewer packages to compile on a cold cache.
$(PROMTOOL):
	GOBIN=$(LOCALBIN) go install -tags remove_all_sd -ldflags "-X github.com/prometheus/common/version.Version=$(PROMTOOL_VERSION:v%=%)" \
		github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_VERSION)
	mv $(LOCALBIN)/promtool $@

##@ Measurements
.PHONY: measure-lag
measure-lag: envtest-assets ## Deregistration and warm-up timings from the envtest suite (3 runs).
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) ETCD_BIN=$(ENVTEST_ASSETS)/etcd hack/measure-lag.sh 3

BREAKER_RUNS ?= 3
BREAKER_FAIL_FOR ?= 20s

.PHONY: bench-breaker
bench-breaker: envtest-assets ## The seed's breaker scenario: 50 callers, a dependency down for 20s; per-instance vs coordinated (BREAKER_RUNS runs): table + docs/bench/breaker-*.json.
	ETCD_BIN=$(ENVTEST_ASSETS)/etcd go run ./bench/breaker/cmd -runs $(BREAKER_RUNS) -fail-for $(BREAKER_FAIL_FOR)
	ETCD_BIN=$(ENVTEST_ASSETS)/etcd go test ./pkg/discovery/ -run '^$$' -bench 'BenchmarkDo' -count 3

##@ Multi-cluster suite (test/multicluster; the short variant runs in make test)
MULTICLUSTER_RUNS ?= 3
MULTICLUSTER_OUT ?= $(LOCALBIN)/multicluster/multicluster.json
.PHONY: test-multicluster
test-multicluster: envtest-assets ## Two envtest control planes, one registrar each, one shared etcd (--store-shared): isolation under churn, identity clash, partition and return, a registrar killed beyond the TTL, caller failover (MULTICLUSTER_RUNS runs, each with its own seed).
	mkdir -p $(LOCALBIN)/multicluster && rm -f $(LOCALBIN)/multicluster/run-*.log
	before="$$(cut -d' ' -f1-3 /proc/loadavg)"; \
	for i in $$(seq 1 $(MULTICLUSTER_RUNS)); do \
		echo "run $$i: $$(uptime)"; \
		rc=0; KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) ETCD_BIN=$(ENVTEST_ASSETS)/etcd MULTICLUSTER_FULL=1 \
			$(RACE_GO_TEST) ./test/multicluster/ -count=1 -timeout 20m -v -ginkgo.v -ginkgo.no-color -ginkgo.seed=$$i > $(LOCALBIN)/multicluster/run-$$i.log 2>&1 || rc=$$?; \
		grep -v '^\s*>' $(LOCALBIN)/multicluster/run-$$i.log | grep -E '^\s*(cluster \S+: |east.s registrar|caller failover|xds fail|\[FAILED\]|.*(Passed|Failed))|^(ok|FAIL)' || true; \
		echo "run $$i: $$(uptime)"; \
		[ $$rc -eq 0 ] || { echo "run $$i failed: $(LOCALBIN)/multicluster/run-$$i.log"; exit 1; }; \
	done; \
	go run ./bench/multicluster -dir $(LOCALBIN)/multicluster -out $(MULTICLUSTER_OUT) -load-before "$$before" -load-after "$$(cut -d' ' -f1-3 /proc/loadavg)" \
		-command "make test-multicluster MULTICLUSTER_RUNS=$(MULTICLUSTER_RUNS)"; \
	echo "wrote $(MULTICLUSTER_OUT) (copy it to docs/bench/ and run make docs to publish)"

##@ Interop: existing Spring Cloud clients, unchanged (test/interop, issue 36)
INTEROP_APP_DIR := test/interop/app
INTEROP_APP_JAR ?= $(LOCALBIN)/interop-caller.jar
# hack/maven.sh runs Maven with the project's own local repository (MAVEN_REPO, default
# ${XDG_CACHE_HOME:-~/.cache}/registrar/maven): the first build downloads Spring Boot and Spring
# Cloud from Maven Central (hack/maven-settings.xml: nothing else), later ones download nothing.
INTEROP_RUNS ?= 1
INTEROP_TIMEOUT ?= 30m

$(INTEROP_APP_JAR): hack/maven.sh hack/maven-settings.xml $(INTEROP_APP_DIR)/pom.xml $(shell find $(INTEROP_APP_DIR)/src -type f 2>/dev/null)
	hack/maven.sh -q -f $(INTEROP_APP_DIR)/pom.xml -DskipTests package
	mkdir -p $(LOCALBIN) && cp $(INTEROP_APP_DIR)/target/interop-caller.jar $@

.PHONY: interop-app
interop-app: $(INTEROP_APP_JAR) ## Build the Spring Boot caller of make test-interop (hack/maven.sh: Maven Central, cached in MAVEN_REPO; the jar in bin/).

.PHONY: test-interop
test-interop: envtest-assets zookeeper-assets $(INTEROP_APP_JAR) ## Spring Cloud's Eureka client (on cmd/eureka-api) and Zookeeper discovery client (on the ZooKeeper store) reading pods the operator publishes, INTEROP_RUNS times (logs and results in bin/interop/; INTEROP_DOC=docs/bench/x.json publishes them).
	rm -rf $(LOCALBIN)/interop && mkdir -p $(LOCALBIN)/interop
	before="$$(cut -d' ' -f1-3 /proc/loadavg)"; \
	for i in $$(seq 1 $(INTEROP_RUNS)); do \
		echo "test-interop run $$i/$(INTEROP_RUNS) ($$(date -u +%T) UTC, load $$(cut -d' ' -f1-3 /proc/loadavg))"; \
		KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) ETCD_BIN=$(ENVTEST_ASSETS)/etcd INTEROP_APP_JAR=$(INTEROP_APP_JAR) \
			INTEROP_LOG_DIR=$(LOCALBIN)/interop/run-$$i INTEROP_SEED=$$i INTEROP_OUT=$(LOCALBIN)/interop/result-$$i.json \
			go test -tags interop ./test/interop/ -count=1 -v -timeout $(INTEROP_TIMEOUT) 2>&1 | tee $(LOCALBIN)/interop/run-$$i.log | grep -v '^\s*>' \
			|| { echo "test-interop run $$i failed: $(LOCALBIN)/interop/run-$$i.log, process logs in $(LOCALBIN)/interop/run-$$i/"; exit 1; }; \
	done; \
	$(if $(INTEROP_DOC),go run ./bench/interop -dir $(LOCALBIN)/interop -out $(INTEROP_DOC) -load-before "$$before" \
		-load-after "$$(cut -d' ' -f1-3 /proc/loadavg)" -command "make test-interop INTEROP_RUNS=$(INTEROP_RUNS)",true)

##@ Fault tests (test/faults; a fast subset runs in make test)
FAULTS_TIMEOUT ?= 45m

.PHONY: test-eureka
test-eureka: $(ENVTEST_ASSETS)/etcd ## The Eureka API read by a real Eureka client (fargo, module test/eureka of its own) over a real etcd written by the operator's store.
	cd test/eureka && ETCD_BIN=$(ENVTEST_ASSETS)/etcd CGO_ENABLED=1 go test -race -count=1 ./...

.PHONY: test-faults
test-faults: envtest-assets ## Run every fault test (real processes on loopback) and print the summary table.
	mkdir -p $(LOCALBIN)
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) ETCD_BIN=$(ENVTEST_ASSETS)/etcd FAULTS_FULL=1 FAULTS_SUMMARY=$(LOCALBIN)/faults-summary.md \
		go test ./test/faults/ -count=1 -v -timeout $(FAULTS_TIMEOUT) 2>&1 | grep -v '^\s*>' | tee $(LOCALBIN)/faults.log | grep -E '^(=== RUN|--- |\s+\S+_test.go|PASS|FAIL|ok)'
	@echo; echo "Fault suite summary ($$(date -u +%FT%TZ), make test-faults):"; echo; cat $(LOCALBIN)/faults-summary.md

##@ Production-shaped scenario (test/faults TestProductionScenario; the short variant runs in make test, the full one also in make test-faults)
SCENARIO_SEEDS ?= 1,2,3
SCENARIO_OUT ?= docs/bench/scenario.json
SCENARIO_TIMEOUT ?= 120m

.PHONY: test-scenario
test-scenario: envtest-assets ## The production-shaped scenario at full size (a 2,000-pod service, 300 services of 1-5 pods in 30 namespaces, 30 nodes, 20 xDS clients, every feature on) once per seed of SCENARIO_SEEDS: per-phase table into SCENARIO_OUT, rendered into docs/reliability.md.
	mkdir -p $(LOCALBIN)
	rc=0; KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) ETCD_BIN=$(ENVTEST_ASSETS)/etcd FAULTS_FULL=1 SCENARIO_SEEDS=$(SCENARIO_SEEDS) \
		SCENARIO_JSON=$(abspath $(SCENARIO_OUT)) SCENARIO_COMMAND="make test-scenario SCENARIO_SEEDS=$(SCENARIO_SEEDS)" \
		go test ./test/faults/ -run '^TestProductionScenario$$' -count=1 -v -timeout $(SCENARIO_TIMEOUT) > $(LOCALBIN)/scenario.log 2>&1 || rc=$$?; \
	grep -E -e '--- (PASS|FAIL)|_test\.go:[0-9]+: (production scenario|set up in|phase "|webhook:|node Lease loss:|kill -9:|wrote )|^(ok|FAIL|PASS)' $(LOCALBIN)/scenario.log | cut -c1-400 || true; \
	echo "$$(grep -c 'invariant violation' $(LOCALBIN)/scenario.log) invariant violations; full log: $(LOCALBIN)/scenario.log"; \
	if [ -f $(SCENARIO_OUT) ]; then go run ./bench/benchdoc; fi; exit $$rc

##@ Benchmark (bench/controlplane; every benchmark, its JSON and its page: bench/README.md)
BENCH_DIR ?= $(LOCALBIN)/bench
BENCH_ARGS ?=
# BENCH_RUNS runs of the configuration, each on a fresh control plane: the summary gives the
# median and range of every figure and says which are within noise. BENCH_OUT is the envelope
# (docs/bench/*.json to publish: then `make docs` renders its tables).
BENCH_RUNS ?= 1
BENCH_OUT ?= $(BENCH_DIR)/bench-results.json
BENCH_LARGE_OUT ?= $(BENCH_DIR)/large/bench-results.json
BENCH_XL_OUT ?= $(BENCH_DIR)/xl/bench-results.json
# The sweep: BENCH_SWEEP pod counts (registries = pods / 10), BENCH_RUNS runs of each, at
# BENCH_SWEEP_RATE transitions/s (issue 16's floor target is at 100/s). Its PNG plot goes next
# to BENCH_SWEEP_OUT (.png); publish with BENCH_SWEEP_OUT=docs/bench/bench-sweep.json.
BENCH_SWEEP ?= 1000,5000,20000
BENCH_SWEEP_RATE ?= 100
# Pods each round of a sweep run flips (the same ones through all four rounds): every pod up to
# it, this many above (20,000 pods: 5,000 flipped), so the run time stays bounded.
BENCH_SWEEP_TRANSITIONS ?= 5000
BENCH_SWEEP_OUT ?= $(BENCH_DIR)/sweep/bench-sweep.json
BENCH_RUN = KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) ETCD_BIN=$(ENVTEST_ASSETS)/etcd go run ./bench/controlplane/cmd \
	-operator $(BENCH_DIR)/registrar -kube-controller-manager $(ENVTEST_ASSETS)/kube-controller-manager -runs $(BENCH_RUNS)

.PHONY: bench
bench: envtest-assets $(ENVTEST_ASSETS)/kube-controller-manager ## 1,000 pods / 100 registries vs the EndpointSlice controller, graceful and crashing TTL clients and the API watch floor (BENCH_RUNS runs): table + BENCH_OUT.
	CGO_ENABLED=0 go build -o $(BENCH_DIR)/registrar ./cmd
	$(BENCH_RUN) -pods 1000 -registries 100 -workdir $(BENCH_DIR)/run -out $(BENCH_OUT) -kind bench \
		-command "make bench BENCH_RUNS=$(BENCH_RUNS) BENCH_OUT=$(BENCH_OUT) BENCH_ARGS='$(BENCH_ARGS)'" $(BENCH_ARGS)

.PHONY: bench-large
bench-large: envtest-assets $(ENVTEST_ASSETS)/kube-controller-manager ## 5,000 pods / 500 registries, with the operator's CPU and heap profiles (BENCH_RUNS runs): bin/bench/large/ + BENCH_LARGE_OUT.
	CGO_ENABLED=0 go build -o $(BENCH_DIR)/registrar ./cmd
	$(BENCH_RUN) -pods 5000 -registries 500 -workdir $(BENCH_DIR)/large/run -profile-dir $(BENCH_DIR)/large/profiles \
		-out $(BENCH_LARGE_OUT) -kind bench-large -table-id bench-large \
		-command "make bench-large BENCH_RUNS=$(BENCH_RUNS) BENCH_LARGE_OUT=$(BENCH_LARGE_OUT) BENCH_ARGS='$(BENCH_ARGS)'" $(BENCH_ARGS)

.PHONY: bench-cache
bench-cache: ## Heap bytes per cached pod: whole, managedFields stripped, and trimmed by internal/leancache (5,000 realistic pods): docs/bench/cache-bytes.json.
	go run ./bench/podbytes -pods 5000 -out docs/bench/cache-bytes.json -command "make bench-cache"
.PHONY: bench-xl
bench-xl: envtest-assets $(ENVTEST_ASSETS)/kube-controller-manager ## 20,000 pods / 2,000 registries (created at the API server's pace: the run prints how long), with the operator's profiles (BENCH_RUNS runs): bin/bench/xl/ + BENCH_XL_OUT.
	CGO_ENABLED=0 go build -o $(BENCH_DIR)/registrar ./cmd
	$(BENCH_RUN) -pods 20000 -registries 2000 -setup-timeout 30m -workdir $(BENCH_DIR)/xl/run -profile-dir $(BENCH_DIR)/xl/profiles \
		-out $(BENCH_XL_OUT) -kind bench-xl -table-id bench-xl \
		-command "make bench-xl BENCH_RUNS=$(BENCH_RUNS) BENCH_XL_OUT=$(BENCH_XL_OUT) BENCH_ARGS='$(BENCH_ARGS)'" $(BENCH_ARGS)

.PHONY: bench-sweep
bench-sweep: envtest-assets $(ENVTEST_ASSETS)/kube-controller-manager ## BENCH_SWEEP pod counts (1k, 5k, 20k) at BENCH_SWEEP_RATE/s, BENCH_SWEEP_TRANSITIONS pods flipped per round at most, BENCH_RUNS runs each (median (min–max)): CPU s per 1,000 transitions and peak RSS of registrar and the EndpointSlice controller, dereg p99 vs the API watch floor, store txns/s, issue 16's targets met/missed; BENCH_SWEEP_OUT + its .png plot.
	CGO_ENABLED=0 go build -o $(BENCH_DIR)/registrar ./cmd
	$(BENCH_RUN) -sweep $(BENCH_SWEEP) -rate $(BENCH_SWEEP_RATE) -transitions-per-round $(BENCH_SWEEP_TRANSITIONS) \
		-workdir $(BENCH_DIR)/sweep/run -out $(BENCH_SWEEP_OUT) -kind bench-sweep -table-id bench-sweep \
		-command "make bench-sweep BENCH_RUNS=$(BENCH_RUNS) BENCH_SWEEP=$(BENCH_SWEEP) BENCH_SWEEP_RATE=$(BENCH_SWEEP_RATE) BENCH_SWEEP_TRANSITIONS=$(BENCH_SWEEP_TRANSITIONS) BENCH_SWEEP_OUT=$(BENCH_SWEEP_OUT) BENCH_ARGS='$(BENCH_ARGS)'" $(BENCH_ARGS)

# The restart benchmark (issue 39 §3): RESTART_RUNS fresh control planes of RESTART_PODS pods
# (registries = pods / 10), each populated once (every pod created ready and registered: minutes
# at 20,000 pods, at the API server's pace), then on it registrar restarted, kube-controller-
# manager restarted and registrar failing over (two replicas, the leader killed), each killed
# with nothing changed and again while 100 pods die. RESTART_ARGS adds flags (-restart-trials,
# -restart-dying, -restart-signal, -failover-args, ...: go run ./bench/controlplane/cmd -h).
RESTART_PODS ?= 20000
RESTART_RUNS ?= 3
RESTART_OUT ?= docs/bench/bench-restart.json
RESTART_ARGS ?=
.PHONY: bench-restart
bench-restart: envtest-assets $(ENVTEST_ASSETS)/kube-controller-manager ## Restart and fail-over at RESTART_PODS pods (20,000), RESTART_RUNS control planes (median (min–max)): registrar restarted, its leader failing over, the EndpointSlice controller restarted: writes caused (target 0), API requests, time until synced, peak RSS, dereg lag of pods dying meanwhile; RESTART_OUT.
	CGO_ENABLED=0 go build -o $(BENCH_DIR)/registrar ./cmd
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) ETCD_BIN=$(ENVTEST_ASSETS)/etcd go run ./bench/controlplane/cmd -restart \
		-operator $(BENCH_DIR)/registrar -kube-controller-manager $(ENVTEST_ASSETS)/kube-controller-manager -runs $(RESTART_RUNS) \
		-pods $(RESTART_PODS) -registries $$(( $(RESTART_PODS) / 10 )) -setup-timeout 30m -workdir $(BENCH_DIR)/restart/run \
		-out $(RESTART_OUT) -kind bench-restart -table-id bench-restart \
		-command "make bench-restart RESTART_PODS=$(RESTART_PODS) RESTART_RUNS=$(RESTART_RUNS) RESTART_OUT=$(RESTART_OUT) RESTART_ARGS='$(RESTART_ARGS)'" $(RESTART_ARGS)

$(ENVTEST_ASSETS)/kube-controller-manager:
	KUBE_VERSION=$(KUBE_VERSION) ETCD_VERSION=$(ETCD_VERSION) ASSETS_DIR=$(ENVTEST_ASSETS) \
		KUBE_EXTRA_BINARIES=kube-controller-manager hack/envtest-assets.sh

##@ Images
IMAGES_DIR ?= $(LOCALBIN)/images
# No -trimpath: it would compile every package again instead of reusing go vet's and the tests'.
IMAGE_GO_BUILD := CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -ldflags "-s -w"

# The bundled store's image (config/components/etcd, the chart's etcd.*): the etcd server built
# from its Go module by hack/envtest-assets.sh (the same binary the tests run), tagged with its version.
ETCD_IMG ?= registrar.dev/etcd:$(ETCD_VERSION)

.PHONY: images
images: $(ENVTEST_ASSETS)/etcd ## Static binaries and image tars bin/images/{registrar,eureka-api,etcd,pause,demoapp}.tar for `ctr -n k8s.io images import` (no Docker).
	mkdir -p $(IMAGES_DIR)
	$(IMAGE_GO_BUILD) -o $(LOCALBIN)/registrar-linux-amd64 ./cmd
	$(IMAGE_GO_BUILD) -o $(LOCALBIN)/eureka-api-linux-amd64 ./cmd/eureka-api
	$(IMAGE_GO_BUILD) -o $(LOCALBIN)/pause-linux-amd64 ./test/e2e/pause
	$(IMAGE_GO_BUILD) -o $(LOCALBIN)/demoapp-linux-amd64 ./test/e2e/demoapp
	go build -o $(LOCALBIN)/imagetool ./hack/imagetool
	$(LOCALBIN)/imagetool -binary $(LOCALBIN)/registrar-linux-amd64 -name registrar.dev/registrar:local \
		-entrypoint /registrar -user 65532 -out $(IMAGES_DIR)/registrar.tar
	$(LOCALBIN)/imagetool -binary $(LOCALBIN)/eureka-api-linux-amd64 -name registrar.dev/eureka-api:local \
		-entrypoint /eureka-api -user 65532 -out $(IMAGES_DIR)/eureka-api.tar
	$(LOCALBIN)/imagetool -binary $(ENVTEST_ASSETS)/etcd -name $(ETCD_IMG) \
		-entrypoint /usr/local/bin/etcd -user 65532 -out $(IMAGES_DIR)/etcd.tar
	$(LOCALBIN)/imagetool -binary $(LOCALBIN)/pause-linux-amd64 -name registrar.dev/pause:local \
		-entrypoint /pause -out $(IMAGES_DIR)/pause.tar
	$(LOCALBIN)/imagetool -binary $(LOCALBIN)/demoapp-linux-amd64 -name registrar.dev/demoapp:local \
		-entrypoint /demoapp -user 65532 -out $(IMAGES_DIR)/demoapp.tar
	@ls -l $(IMAGES_DIR)

##@ Cluster (single-node Kubernetes on this machine; see hack/cluster/README.md)
CLUSTER_BINARIES := kube-controller-manager kube-scheduler kubelet

.PHONY: cluster-binaries
cluster-binaries: envtest-assets $(addprefix $(ENVTEST_ASSETS)/,$(CLUSTER_BINARIES)) ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubelet into bin/k8s/.

.PHONY: cluster-up
cluster-up: ## Start the cluster (builds missing binaries; state in bin/cluster). hack/cluster/up.sh exits 2 where it cannot run.
	KUBE_VERSION=$(KUBE_VERSION) ETCD_VERSION=$(ETCD_VERSION) CLUSTER_ASSETS=$(ENVTEST_ASSETS) hack/cluster/up.sh

.PHONY: cluster-down
cluster-down: ## Stop the cluster and remove its processes, mounts, network and state (KEEP_STATE=1 keeps bin/cluster).
	hack/cluster/down.sh

##@ End-to-end (real kubelet)
E2E_TIMEOUT ?= 40m
E2E_ARGS ?=
# kustomize (apply dist/install.yaml) or helm (helm upgrade --install charts/registrar).
E2E_INSTALL_METHOD ?= kustomize
# host: a real etcd on the host is registrar's store (the comparison's TTL setups need it);
# bundled: the etcd the install brings (config/components/etcd, the chart's etcd.enabled).
E2E_STORE ?= host
E2E_RESULTS ?= $(LOCALBIN)/e2e-results/test-e2e.json
E2E_RUNS ?= 3
E2E_BENCH_OUT ?= docs/bench/e2e-$(shell date -u +%Y-%m-%d).json
# E2E_GO_TEST runs the e2e suite against bin/cluster, the comparison's raw results into $$res;
# E2E_SETUPS (e.g. registrar) limits the compared setups.
E2E_GO_TEST = set -a; . bin/cluster/cluster.env; set +a; \
	E2E_KUBECONFIG=$(CURDIR)/bin/cluster/admin.kubeconfig E2E_NODE_IP=$$(ip -4 -o addr show dev $$CLUSTER_BRIDGE | awk '{print $$4}' | cut -d/ -f1) \
		E2E_INSTALL=$(CURDIR)/dist/install.yaml E2E_INSTALL_METHOD=$(E2E_INSTALL_METHOD) E2E_STORE=$(E2E_STORE) E2E_HELM=$(HELM) E2E_CONTAINERD_SOCK=$(CURDIR)/bin/cluster/containerd/containerd.sock ETCD_BIN=$(ENVTEST_ASSETS)/etcd \
		E2E_RESULTS=$$res go test -tags e2e ./test/e2e/ -count=1 -timeout $(E2E_TIMEOUT) -v

.PHONY: test-e2e
test-e2e: images cluster-up $(if $(filter helm,$(E2E_INSTALL_METHOD)),$(HELM)) ## Install registrar on the real single-node cluster (E2E_INSTALL_METHOD=kustomize|helm) and run the e2e suite (the comparison's table included; raw results in E2E_RESULTS), then tear the cluster down (KEEP_CLUSTER=1 keeps it).
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
	if ls $(LOCALBIN)/e2e-results/bench/run-*.json >/dev/null 2>&1; then go run ./bench/e2e -command "make bench-e2e E2E_RUNS=$(E2E_RUNS)" -out $(E2E_BENCH_OUT) $(LOCALBIN)/e2e-results/bench/run-*.json || rc=$$?; fi; \
	if [ -z "$(KEEP_CLUSTER)" ]; then hack/cluster/down.sh; fi; exit $$rc

.PHONY: print-envtest-assets
print-envtest-assets:
	@echo $(ENVTEST_ASSETS)

print-%: ## Print a variable: make -s print-HELM.
	@echo $($*)

##@ OLM bundle and configuration reference (generated: verify-generated fails when stale)
VERSION ?= 0.1.0
CHANNELS ?= candidate
DEFAULT_CHANNEL ?= candidate
BUNDLE_IMG ?= registrar-bundle:v$(VERSION)
GENERATED += bundle bundle.Dockerfile docs/reference.md

verify-generated: verify-bench-tables bundle docs

.PHONY: verify-bench-tables
verify-bench-tables: ## Fail when a table rendered from docs/bench/*.json into README.md or docs/*.md is stale (bench/benchdoc -check).
	go run ./bench/benchdoc -check

.PHONY: bundle
bundle: manifests ## Generate the OLM bundle (bundle/, bundle.Dockerfile) from config/manifests and config/samples, offline.
	go run ./hack/bundlegen -version $(VERSION) -image $(IMG) -channels $(CHANNELS) -default-channel $(DEFAULT_CHANNEL)

.PHONY: bundle-build
bundle-build: bundle ## Build the bundle image BUNDLE_IMG (needs a Docker engine).
	docker build -f bundle.Dockerfile -t $(BUNDLE_IMG) .

.PHONY: docs
docs: manifests ## Regenerate docs/reference.md (manager flags, annotations, conditions and reasons, Events, metrics, CRD fields) from the code, and the bench tables (<!-- bench:<id> --> markers) from docs/bench/*.json.
	go test ./cmd -run '^TestConfigurationReference$$' -count=1 -args -update-docs
	go run ./bench/benchdoc

##@ xDS
XDS_BENCH_RUNS ?= 3
XDS_BENCH_OUT ?= docs/bench/xds.json
XDS_BENCH_DIR ?= $(BENCH_DIR)/xds
.PHONY: bench-xds
bench-xds: envtest-assets ## 100 ADS clients × 100 registries under up to 100 pod changes/s with the API watch floor of the same run (XDS_BENCH_RUNS runs): XDS_BENCH_OUT (benchfmt envelope) and its table in docs/xds.md.
	rm -rf $(XDS_BENCH_DIR); mkdir -p $(XDS_BENCH_DIR)
	for i in $$(seq 1 $(XDS_BENCH_RUNS)); do KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) ETCD_BIN=$(ENVTEST_ASSETS)/etcd XDS_BENCH_OUT=$(XDS_BENCH_DIR)/run-$$i.json \
		go test ./test/xds/ -count=1 -timeout 20m -ginkgo.label-filter=bench || exit 1; done
	go run ./bench/xds -out $(XDS_BENCH_OUT) -command "make bench-xds XDS_BENCH_RUNS=$(XDS_BENCH_RUNS)" $(XDS_BENCH_DIR)/run-*.json
	go run ./bench/benchdoc

FLEET_CLIENTS ?= 1000 10000
FLEET_RATES ?= 10 100
FLEET_RUNS ?= 3
FLEET_DURATION ?= 30s
FLEET_DIR ?= $(BENCH_DIR)/xds-fleet
FLEET_OUT ?= docs/bench/xds-fleet.json
.PHONY: bench-xds-fleet
bench-xds-fleet: ## Simulated ADS clients (FLEET_CLIENTS, SotW and delta) × 1,000 services / 50,000 endpoints at FLEET_RATES changes/s against registrar's xDS server and go-control-plane's stock server, FLEET_RUNS runs each: FLEET_OUT and its table in docs/xds.md.
	rm -rf $(FLEET_DIR); mkdir -p $(FLEET_DIR)
	go build -o $(FLEET_DIR)/xdsfleet ./bench/xdsfleet
	for run in $$(seq 1 $(FLEET_RUNS)); do for c in $(FLEET_CLIENTS); do for r in $(FLEET_RATES); do for impl in registrar stock; do \
		$(FLEET_DIR)/xdsfleet -impl $$impl -clients $$c -rate $$r -duration $(FLEET_DURATION) -seed $$run -out $(FLEET_DIR)/$$impl-$$c-$$r-$$run.json || exit 1; \
	done; done; done; done
	$(FLEET_DIR)/xdsfleet -publish -out $(FLEET_OUT) -command "make bench-xds-fleet FLEET_CLIENTS='$(FLEET_CLIENTS)' FLEET_RATES='$(FLEET_RATES)' FLEET_RUNS=$(FLEET_RUNS) FLEET_DURATION=$(FLEET_DURATION)" $(FLEET_DIR)/*.json
	go run ./bench/benchdoc

# A 2,000-pod service rolling (issue 39 §2, bench/rollout): maxSurge 25 %, 100 xDS clients
# (half delta) and 1,000 pkg/discovery watchers of the service, the operator built from ./cmd
# with its xDS server on. ROLLOUT_ARGS adds flags (go run ./bench/rollout -h), e.g. -profile.
ROLLOUT_RUNS ?= 3
ROLLOUT_PODS ?= 2000
ROLLOUT_OUT ?= docs/bench/bench-rollout.json
ROLLOUT_DIR ?= $(BENCH_DIR)/rollout
.PHONY: bench-rollout
bench-rollout: envtest-assets ## A ROLLOUT_PODS-pod service rolling (maxSurge 25 %) with 100 xDS clients (SotW and delta) and 1,000 pkg/discovery watchers, ROLLOUT_RUNS runs: xDS and store-watch bytes per transition, operator CPU per transition and peak RSS, ready → every client tails; ROLLOUT_OUT and its table in docs/xds.md.
	mkdir -p $(ROLLOUT_DIR)
	CGO_ENABLED=0 go build -o $(ROLLOUT_DIR)/registrar ./cmd
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) ETCD_BIN=$(ENVTEST_ASSETS)/etcd go run ./bench/rollout -runs $(ROLLOUT_RUNS) -pods $(ROLLOUT_PODS) \
		-operator $(ROLLOUT_DIR)/registrar -workdir $(ROLLOUT_DIR) -out $(ROLLOUT_OUT) \
		-command "make bench-rollout ROLLOUT_RUNS=$(ROLLOUT_RUNS) ROLLOUT_PODS=$(ROLLOUT_PODS) ROLLOUT_OUT=$(ROLLOUT_OUT) ROLLOUT_ARGS='$(ROLLOUT_ARGS)'" $(ROLLOUT_ARGS)
	go run ./bench/benchdoc

# The real-Eureka comparison (issue 36 §3, test/eurekapeer): a stock Spring Cloud Netflix Eureka
# server and registrar's Eureka API read by the same Spring caller. hack/maven.sh builds the
# Spring applications (Maven Central only, cached in MAVEN_REPO like make interop-app); later
# builds download nothing. Not in CI: a run takes ~8 minutes.
EUREKA_PEER_SRC := test/eurekapeer
EUREKA_PEER_JARS := $(LOCALBIN)/eurekapeer/eurekapeer-server.jar $(LOCALBIN)/eurekapeer/eurekapeer-app.jar
EUREKA_PEER_RUNS ?= 3
EUREKA_PEER_OUT ?= docs/bench/eureka-peer.json
EUREKA_PEER_DIR ?= $(LOCALBIN)/eurekapeer/run

$(EUREKA_PEER_JARS) &: hack/maven.sh hack/maven-settings.xml $(EUREKA_PEER_SRC)/pom.xml $(EUREKA_PEER_SRC)/server/pom.xml $(EUREKA_PEER_SRC)/app/pom.xml $(shell find $(EUREKA_PEER_SRC)/server/src $(EUREKA_PEER_SRC)/app/src -type f 2>/dev/null)
	hack/maven.sh -q -f $(EUREKA_PEER_SRC)/pom.xml -DskipTests package
	mkdir -p $(LOCALBIN)/eurekapeer
	cp $(EUREKA_PEER_SRC)/server/target/eurekapeer-server.jar $(EUREKA_PEER_SRC)/app/target/eurekapeer-app.jar $(LOCALBIN)/eurekapeer/

.PHONY: eureka-peer-apps
eureka-peer-apps: $(EUREKA_PEER_JARS) ## Build the Spring applications of make bench-eureka-peer (a stock Eureka server 5.0.3; the instance/caller app) with hack/maven.sh (Maven Central, cached in MAVEN_REPO; the jars in bin/).

.PHONY: bench-eureka-peer
bench-eureka-peer: envtest-assets eureka-peer-apps ## The real-Eureka comparison: a Spring Cloud Netflix Eureka server (defaults; 5 s / 15 s lease) vs registrar's Eureka API, same Spring caller at 50 req/s, graceful/SIGKILL/hung/lost instances, fetch 30 s and 5 s (EUREKA_PEER_RUNS runs, ~8 min each): EUREKA_PEER_OUT and its table in docs/e2e.md.
	rm -rf $(EUREKA_PEER_DIR); mkdir -p $(EUREKA_PEER_DIR)
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) ETCD_BIN=$(ENVTEST_ASSETS)/etcd \
	EUREKA_PEER_SERVER_JAR=$(LOCALBIN)/eurekapeer/eurekapeer-server.jar EUREKA_PEER_APP_JAR=$(LOCALBIN)/eurekapeer/eurekapeer-app.jar \
	EUREKA_PEER_RUNS=$(EUREKA_PEER_RUNS) EUREKA_PEER_OUT=$(abspath $(EUREKA_PEER_OUT)) EUREKA_PEER_DIR=$(EUREKA_PEER_DIR) \
	EUREKA_PEER_COMMAND="make bench-eureka-peer EUREKA_PEER_RUNS=$(EUREKA_PEER_RUNS)" \
		go test -tags eurekapeer ./test/eurekapeer/ -run '^TestEurekaPeer$$' -count=1 -timeout 4h -v
	go run ./bench/benchdoc
