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
		echo "generated files are stale: run 'make generate manifests' and commit them"; exit 1; fi

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
test: verify-generated vet envtest-assets ## Run unit and envtest suites against a real kube-apiserver and etcd.
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) ETCD_BIN=$(ENVTEST_ASSETS)/etcd \
		go test ./... -race -count=1 -timeout $(TEST_TIMEOUT) -coverprofile cover.out

##@ Build
.PHONY: build
build: ## Build the manager binary.
	CGO_ENABLED=0 go build -o bin/registrar ./cmd

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
