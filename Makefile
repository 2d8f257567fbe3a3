# The release (docs/upgrade.md): the version the binaries embed, and the commit
# every build stamps into them (-dirty when tracked files differ from it).
VERSION := $(shell cat pkg/version/VERSION)
ifndef COMMIT
COMMIT := $(shell rev=$$(git rev-parse HEAD 2>/dev/null) && { test -z "$$(git status --porcelain --untracked-files=no)" && echo $$rev || echo $$rev-dirty; })
endif
LDFLAGS := -X github.com/dtq-dev/dtq/pkg/version.commit=$(COMMIT)
# The images' tag: v<VERSION>, never latest.
IMAGE_TAG ?= v$(VERSION)
# Image URLs used by docker-build, build-installer and deploy.
IMG ?= ghcr.io/dtq-dev/dtq-manager:$(IMAGE_TAG)
WORKER_IMG ?= ghcr.io/dtq-dev/dtq-worker:$(IMAGE_TAG)
API_IMG ?= ghcr.io/dtq-dev/dtq-api:$(IMAGE_TAG)
# Registry and architecture of `make images` (images built without Docker).
IMAGE_REGISTRY ?= ghcr.io/dtq-dev
IMAGE_ARCH ?= $(shell go env GOARCH)
# The images' creation time (their org.opencontainers.image.created label): the
# commit's, so a rebuild of one commit gives the same digests.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
CONTAINER_TOOL ?= docker

SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

LOCALBIN ?= $(shell pwd)/bin
KUBECTL ?= kubectl
KUSTOMIZE ?= $(LOCALBIN)/kustomize
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
HELM ?= $(LOCALBIN)/helm
KUSTOMIZE_VERSION ?= v5.8.1
CONTROLLER_TOOLS_VERSION ?= v0.23.0
# golangci-lint of `make lint`, built from the module proxy into bin/ under its version.
GOLANGCI_LINT_VERSION ?= v2.15.0
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
# apidiff of `make verify`'s SDK API check (hack/apidiff.sh), built from the module proxy into bin/.
APIDIFF_VERSION ?= v0.0.0-20261113113407-e3970619a1a4
APIDIFF ?= $(LOCALBIN)/apidiff-$(APIDIFF_VERSION)
export APIDIFF
# The helm CLI of `make helm-lint`; the tests use the same version's Go API (go.mod).
HELM_VERSION ?= $(shell go list -m -f '{{.Version}}' helm.sh/helm/v3)
# Kubernetes version of the envtest control plane (kube-apiserver, etcd, kubectl).
K8S_VERSION ?= 1.37.2
export K8S_VERSION

# The Go modules besides the operator's (the root): the SDK and its Kubernetes
# credentials (docs/architecture.md). `go test ./...`, `go vet ./...` and
# golangci-lint in the root do not descend into them, so every target that
# runs those runs them in each of these too (go -C).
SDK_MODULES := pkg pkg/kubeauth
# Every module, for go mod tidy: the SDK's, the operator's and the benchmarks'.
GO_MODULES := . $(SDK_MODULES) test/bench

# go test flags for `make test`; the race detector covers the packages with
# concurrent Redis code (the whole SDK module, and the operator's tests of the
# SDK's clients), the rest runs without it to stay fast on 2 cores.
TEST_FLAGS ?= -count=1 -timeout 40m
RACE_PKGS ?= ./test/client/... ./test/direct/...

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

# Redis of `make dev`: single (one redis-server) or cluster (a three-master Redis Cluster).
DEV_REDIS ?= single

.PHONY: dev
dev: build envtest redis handler-runtimes ## Run the local stack (control plane, Redis, operator, workers) and apply the samples; DEV_REDIS=cluster for a Redis Cluster.
	KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" $(LOCALBIN)/kubectl-dtq dev --redis=$(DEV_REDIS)

.PHONY: manifests
manifests: controller-gen ## Generate CRDs and RBAC from the API types and markers.
	"$(CONTROLLER_GEN)" rbac:roleName=manager-role crd paths="./..." output:crd:artifacts:config=config/crd/bases

.PHONY: generate
generate: controller-gen ## Generate DeepCopy methods.
	"$(CONTROLLER_GEN)" object:headerFile="hack/boilerplate.go.txt" paths="./..."

.PHONY: fmt
fmt: ## Run go fmt.
	@for m in $(GO_MODULES); do go -C $$m fmt ./... || exit 1; done

.PHONY: vet
vet: ## Run go vet.
	@for m in . $(SDK_MODULES); do echo "go vet ($$m)"; go -C $$m vet ./... || exit 1; done

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint with .golangci.yml; fails on any finding.
	@for m in . $(SDK_MODULES); do echo "golangci-lint ($$m)"; (cd $$m && "$(abspath $(GOLANGCI_LINT))" run ./...) || exit 1; done

.PHONY: test
test: vet lint envtest redis chromium handler-runtimes node images previous-images kustomize ## Run every test: lint, unit, Redis integration, envtest integration, end to end, the real node.
	KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" go test $(TEST_FLAGS) ./...
	@assets="$$(hack/envtest-assets.sh)" && for m in $(SDK_MODULES); do \
		echo "go test ($$m)"; KUBEBUILDER_ASSETS="$$assets" go -C $$m test $(TEST_FLAGS) ./... || exit 1; \
	done
	go test $(TEST_FLAGS) -race $(RACE_PKGS)
	go -C pkg test $(TEST_FLAGS) -race ./...
	$(MAKE) test-node-run
	$(MAKE) fuzz

# Native Go fuzz targets `make fuzz` runs, as package:Target (packages of the
# SDK module under ./pkg/, run in that module: go fuzzes main-module packages
# only), each for FUZZ_TIME
# (their seed corpora also run in every `go test`). FUZZ_TIME is a count of
# inputs: with a duration, go test fails a run whose time ends while it
# minimises a new input ("context deadline exceeded").
FUZZ_TARGETS ?= ./internal/httpapi:FuzzDecodeSubmit ./internal/httpapi:FuzzDecodeBatch ./pkg/client/internal/sse:FuzzReader
FUZZ_TIME ?= 10000x

# The real-node test (test/node, docs/install.md "A real node"): dist/install.yaml and
# the images of `make images` on a real kubelet and containerd, after the upgrade from
# the previous release's chart and images (make previous-images). Needs root. Its files
# carry the build tag `node`, so `go test ./...` leaves it to this target.
.PHONY: test-node
test-node: envtest redis kustomize node images previous-images ## Run the real-node test alone.
	$(MAKE) test-node-run

.PHONY: test-node-run
test-node-run:
	KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" DTQ_NODE_ASSETS="$$(hack/node-assets.sh)" \
		DTQ_PREVIOUS_RELEASE="$$(hack/previous-images.sh)" go test -tags node $(TEST_FLAGS) -v ./test/node/...

.PHONY: fuzz
fuzz: ## Fuzz the request decoders and the events stream (SSE) parser, FUZZ_TIME per target.
	@for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t#*:} ($(FUZZ_TIME))"; \
		p=$${t%%:*}; m=.; case $$p in ./pkg/*) m=pkg; p=./$${p#./pkg/};; esac; \
		go -C $$m test $$p -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZ_TIME) || exit 1; \
	done

.PHONY: verify
verify: manifests generate chart build-installer $(APIDIFF) ## Fail when generated files, the chart's copies, dist/install.yaml or a module's go.mod are stale, or the SDK's API broke unannounced.
	@for m in $(GO_MODULES); do go -C $$m mod tidy || exit 1; done
	@git diff --exit-code -- ':(glob)**/go.mod' ':(glob)**/go.sum' api config dist || { echo "verify: generated files or a go.mod are stale; run 'make manifests generate chart build-installer' and go mod tidy in each of $(GO_MODULES) and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- dist)" || { git status --short -- dist; echo "verify: new files under dist/; commit them"; exit 1; }
	hack/apidiff.sh

.PHONY: bench
bench: envtest redis ## Run the benchmarks of docs/benchmarks.md (dtq vs asynq, the HTTP API vs the engine, then the CR path).
	assets="$$(hack/envtest-assets.sh)" && cd test/bench && KUBEBUILDER_ASSETS="$$assets" go run .
	KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" go test ./controllers -run '^$$' -bench CRPath -benchtime 1x

##@ Build

.PHONY: build
build: ## Build the manager, api, worker and kubectl-dtq binaries into bin/.
	CGO_ENABLED=0 go build -ldflags "$(LDFLAGS)" -o $(LOCALBIN)/ ./cmd/...

.PHONY: run
run: ## Run the manager against the cluster in ~/.kube/config.
	go run ./cmd/manager

.PHONY: images
images: ## Build the images without Docker: OCI layouts in bin/images/<name>, for `crane push`.
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) go run ./hack/images -out $(LOCALBIN)/images -registry $(IMAGE_REGISTRY) -tag $(IMAGE_TAG) -arch $(IMAGE_ARCH) -commit "$(COMMIT)"

.PHONY: docker-build
docker-build: ## Build the manager, API and worker images (needs a Docker engine).
	$(CONTAINER_TOOL) build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) --target manager -t $(IMG) .
	$(CONTAINER_TOOL) build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) --target api -t $(API_IMG) .
	$(CONTAINER_TOOL) build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) --target worker -t $(WORKER_IMG) .

.PHONY: docker-push
docker-push: ## Push the images.
	$(CONTAINER_TOOL) push $(IMG)
	$(CONTAINER_TOOL) push $(API_IMG)
	$(CONTAINER_TOOL) push $(WORKER_IMG)

.PHONY: build-installer
build-installer: manifests kustomize ## Write dist/install.yaml: CRDs, RBAC, the manager and the API.
	mkdir -p dist
	cd config/manager && "$(KUSTOMIZE)" edit set image controller=$(IMG)
	cd config/api && "$(KUSTOMIZE)" edit set image api=$(API_IMG)
	"$(KUSTOMIZE)" build config/default > dist/install.yaml

.PHONY: chart
chart: manifests ## Copy the CRDs and the manager's RBAC rules from config/ into the Helm chart (dist/chart).
	hack/chart-sync.sh

.PHONY: helm-lint
helm-lint: chart helm ## Lint the Helm chart with default values and with the API and metrics enabled.
	"$(HELM)" lint --strict dist/chart
	"$(HELM)" lint --strict dist/chart --set api.enabled=true,metrics.serviceMonitor.enabled=true,metrics.podMonitor.enabled=true

##@ Deployment

.PHONY: install
install: manifests kustomize ## Install the CRDs and the Task admission policy into the cluster in ~/.kube/config.
	"$(KUSTOMIZE)" build config/crd | "$(KUBECTL)" apply --server-side -f -
	"$(KUSTOMIZE)" build config/admission-install | "$(KUBECTL)" apply --server-side -f -

.PHONY: uninstall
uninstall: manifests kustomize ## Remove the CRDs and the Task admission policy.
	"$(KUSTOMIZE)" build config/admission-install | "$(KUBECTL)" delete --ignore-not-found -f -
	"$(KUSTOMIZE)" build config/crd | "$(KUBECTL)" delete --ignore-not-found -f -

.PHONY: deploy
deploy: manifests kustomize ## Deploy the operator and the API to the cluster in ~/.kube/config.
	cd config/manager && "$(KUSTOMIZE)" edit set image controller=$(IMG)
	cd config/api && "$(KUSTOMIZE)" edit set image api=$(API_IMG)
	"$(KUSTOMIZE)" build config/default | "$(KUBECTL)" apply --server-side -f -

.PHONY: undeploy
undeploy: kustomize ## Remove the operator.
	"$(KUSTOMIZE)" build config/default | "$(KUBECTL)" delete --ignore-not-found -f -

##@ Dependencies

.PHONY: envtest
envtest: ## Build or reuse kube-apiserver, etcd and kubectl under bin/k8s.
	@hack/envtest-assets.sh >/dev/null

.PHONY: previous-images
previous-images: ## Build or reuse the previous release's images and chart (test/upgrade/previous-release) under bin/previous-release/<commit>.
	@hack/previous-images.sh >/dev/null

.PHONY: node
node: ## Build or reuse the parts of a real node under bin/node (kubelet, kube-scheduler, kube-controller-manager, containerd, a pause image; runc and CNI plugins from apt).
	@hack/node-assets.sh >/dev/null

.PHONY: redis
redis: ## Make sure redis-server is installed (apt when missing).
	@hack/redis.sh

.PHONY: handler-runtimes
handler-runtimes: ## Make sure python3 and node are installed for the HTTP handler examples (apt when missing).
	@hack/handler-runtimes.sh

.PHONY: chromium
chromium: ## Make sure Chromium is installed for the console's browser tests (apt when missing).
	@hack/chromium.sh

.PHONY: kustomize
kustomize: $(KUSTOMIZE)
$(KUSTOMIZE):
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)

$(APIDIFF):
	GOBIN=$(LOCALBIN)/apidiff.tmp go install golang.org/x/exp/cmd/apidiff@$(APIDIFF_VERSION)
	mv $(LOCALBIN)/apidiff.tmp/apidiff $@ && rmdir $(LOCALBIN)/apidiff.tmp

$(GOLANGCI_LINT):
	GOBIN=$(LOCALBIN)/golangci-lint.tmp go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(LOCALBIN)/golangci-lint.tmp/golangci-lint $@ && rmdir $(LOCALBIN)/golangci-lint.tmp

.PHONY: helm
helm: $(HELM)
$(HELM):
	GOBIN=$(LOCALBIN) go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN)
$(CONTROLLER_GEN):
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
