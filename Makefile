# Trellis build. Tools are pinned here and installed from the Go module proxy into bin/tools; nothing else is fetched.
SHELL := /bin/bash
GO ?= go
TOOLS := $(CURDIR)/bin/tools
BUF_VERSION := v1.75.0
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
GRPC_GATEWAY_VERSION := v2.32.0
ETCD_VERSION := v3.7.3
KUBE_VERSION := v1.36.3
# controller-gen writes the extension API's deep-copy functions and CRDs (extsdk/apis, deploy/crds).
CONTROLLER_TOOLS_VERSION := v0.23.0
# golangci-lint runs the linters of .golangci.yml, among them the import rules of docs/architecture.md (make lint).
GOLANGCI_LINT_VERSION := v2.15.0
# Test binaries are cached per machine, keyed by version, and linked from bin/testbin.
TESTBIN_CACHE ?= $(HOME)/.cache/trellis/testbin
ETCD_CACHE ?= $(TESTBIN_CACHE)/etcd-$(ETCD_VERSION)
# Each of KUBE_BINARIES is cached in $(TESTBIN_CACHE)/<name>-$(KUBE_VERSION).
KUBE_BINARIES := kube-apiserver kube-controller-manager
BINARIES := trellis-hub trellis-agent trellisctl provider-local etcd-backup-restore

.PHONY: all build test lint generate checkgenerate tools testbin testbin-etcd testbin-kube testbin-node images up down bench-api bench-agents fuzz clean

all: build

## tools: install the pinned code generators and buf into bin/tools.
tools: $(TOOLS)/buf $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc $(TOOLS)/protoc-gen-grpc-gateway

tools: $(TOOLS)/controller-gen $(TOOLS)/golangci-lint

$(TOOLS)/controller-gen:
	GOBIN=$(TOOLS) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
$(TOOLS)/golangci-lint:
	GOBIN=$(TOOLS) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
$(TOOLS)/buf:
	GOBIN=$(TOOLS) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(TOOLS)/protoc-gen-go:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
$(TOOLS)/protoc-gen-go-grpc:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
$(TOOLS)/protoc-gen-grpc-gateway:
	GOBIN=$(TOOLS) $(GO) install github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway@$(GRPC_GATEWAY_VERSION)

## generate: regenerate the kind services, the shared resource names (proto/resources), Go code, gateway, OpenAPI and
## trellisctl's kinds from the protos.
generate: tools $(TOOLS)/protoc-gen-trellisctl
	$(GO) run ./proto/kindgen -proto proto -go-out hub/api/zz_generated_kinds.go -resources-out proto/resources/zz_generated_resources.go
	$(TOOLS)/buf generate
	@# The OpenAPI documents (hub/openapi) from an image of the protos that keeps their comments.
	@mkdir -p bin
	$(TOOLS)/buf build -o bin/protos.binpb
	$(GO) run ./hub/openapi/gen -image bin/protos.binpb -out docs/openapi
	@# The dashboard's API types follow the OpenAPI documents just written (generate-dashboard, below).
	$(MAKE) --no-print-directory generate-dashboard

## protoc-gen-trellisctl: the local buf plugin writing ctl/kinds, rebuilt at every generate (go build caches it).
.PHONY: $(TOOLS)/protoc-gen-trellisctl
$(TOOLS)/protoc-gen-trellisctl:
	$(GO) build -o $@ ./cmd/protoc-gen-trellisctl

## checkgenerate: fail when generated files differ from what is committed.
checkgenerate: generate
	@git add -N proto hub/api docs/openapi ctl/kinds >/dev/null 2>&1 || true
	@if ! git diff --quiet -- proto hub/api/zz_generated_kinds.go docs/openapi ctl/kinds; then \
		echo "generated files are out of date; run 'make generate' and commit:"; \
		git diff --stat -- proto hub/api/zz_generated_kinds.go docs/openapi ctl/kinds; exit 1; fi

## generate-apis (part of generate): deep-copy functions of the extension API types and their CRDs in deploy/crds
## (one file per kind, stale ones removed first), both from the Go types and their kubebuilder markers.
.PHONY: generate-apis checkgenerate-apis
generate: generate-apis
generate-apis: $(TOOLS)/controller-gen
	rm -f deploy/crds/extensions.gardener.cloud_*.yaml
	$(TOOLS)/controller-gen object crd paths=./extsdk/apis/... output:crd:dir=deploy/crds

## checkgenerate-apis (part of checkgenerate): fail when the generated API files differ from what is committed,
## including new and deleted files (git status, so nothing is staged).
checkgenerate: checkgenerate-apis
checkgenerate-apis: generate-apis
	@out=$$(git status --porcelain -- 'extsdk/apis/*zz_generated.deepcopy.go' 'deploy/crds/*.yaml'); \
	if [ -n "$$out" ]; then echo "generated API files are out of date; run 'make generate' and commit:"; echo "$$out"; exit 1; fi

## generate-extensions (part of generate): the registrations in deploy/extensions, e.g. provider-local's
## ControllerDeployment (deploy/charts/provider-local inline) and ControllerRegistration (local.Kinds(), type local).
## checkgenerate-extensions (part of checkgenerate) fails when they differ from what is committed.
.PHONY: generate-extensions checkgenerate-extensions
generate: generate-extensions
generate-extensions:
	$(GO) run ./deploy/extensions/gen
checkgenerate: checkgenerate-extensions
checkgenerate-extensions: generate-extensions
	@out=$$(git status --porcelain -- 'deploy/extensions/*/controller-registration.yaml'); \
	if [ -n "$$out" ]; then echo "generated extension registrations are out of date; run 'make generate' and commit:"; echo "$$out"; exit 1; fi

## build: build every binary into bin/.
build:
	@mkdir -p bin
	$(GO) build -trimpath -o bin/ $(addprefix ./cmd/,$(BINARIES))

## dashboard (part of build): the web dashboard's page, dashboard/web (Svelte, Vite) built into dashboard/dist, which
## the hub embeds; dist is committed, so a clone compiles without Node.js. Rebuilt only when its sources changed, with
## `npm ci` first when the lockfile did; skipped with a note when npm is missing (the committed dist is served).
## generate-dashboard (run by generate, after the OpenAPI documents) writes the page's API types
## (dashboard/web/src/api) from docs/openapi/v3 and rebuilds dist; checkgenerate-dashboard (part of checkgenerate)
## fails when either differs from what is committed.
.PHONY: dashboard dashboard-deps generate-dashboard checkgenerate-dashboard
DASHBOARD_WEB := dashboard/web
DASHBOARD_SOURCES := $(shell find $(DASHBOARD_WEB)/src $(DASHBOARD_WEB)/public -type f 2>/dev/null) \
	$(addprefix $(DASHBOARD_WEB)/,index.html package.json package-lock.json vite.config.ts svelte.config.js tsconfig.json)
build: dashboard
dashboard: dashboard/dist/index.html
dashboard/dist/index.html: $(DASHBOARD_SOURCES)
	@if ! command -v npm >/dev/null; then echo "npm not found: serving the committed dashboard/dist"; exit 0; fi; \
	$(MAKE) --no-print-directory dashboard-deps && cd $(DASHBOARD_WEB) && npx vite build --logLevel warn
dashboard-deps:
	@cd $(DASHBOARD_WEB) && if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then \
		npm ci --no-audit --no-fund --loglevel=error; fi
generate-dashboard: dashboard-deps
	cd $(DASHBOARD_WEB) && node scripts/gen-api.mjs && npx vite build --logLevel warn
## lint-dashboard (part of lint): the page's TypeScript and Svelte type check (svelte-check).
.PHONY: lint-dashboard
lint: lint-dashboard
lint-dashboard: dashboard-deps
	cd $(DASHBOARD_WEB) && npx svelte-check --tsconfig ./tsconfig.json --fail-on-warnings --output human
checkgenerate: checkgenerate-dashboard
checkgenerate-dashboard: generate
	@out=$$(git status --porcelain -- $(DASHBOARD_WEB)/src/api dashboard/dist); \
	if [ -n "$$out" ]; then echo "the dashboard's generated files are out of date; run 'make generate' and commit:"; echo "$$out"; exit 1; fi

## lint: gofmt, go vet, buf lint and golangci-lint (.golangci.yml: the import rules between hub, agent, extsdk, ctl
## and gateway of docs/architecture.md, errcheck, staticcheck, unused, revive, gosec on the hub's inputs, ...).
lint: $(TOOLS)/buf $(TOOLS)/golangci-lint
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^proto/gen/')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(TOOLS)/buf lint
	$(TOOLS)/golangci-lint run ./...
	@$(MAKE) --no-print-directory lint-deps

## lint-deps (part of lint): what each binary links, all of its dependencies, which depguard's per-import rules do not
## see: trellis-agent nothing of the hub, the gateway, the CLI or etcd's server, nor the parts of client-go and
## controller-runtime that would link every typed client, informer and lister of client-go (a whole clientset, leader
## election, events, controller-runtime's cluster, manager and metrics registry, the apiextensions clientset:
## docs/benchmarks.md, "The agent's footprint"); trellisctl and provider-local nothing of the hub or the agent
## (docs/architecture.md).
.PHONY: lint-deps
lint-deps:
	@fail=0; check() { bad=$$($(GO) list -deps ./cmd/$$1 | grep -E "$$2" || true); \
		if [ -n "$$bad" ]; then echo "cmd/$$1 links what it must not:"; echo "$$bad" | head -5; fail=1; fi; }; \
	check trellis-agent '^github.com/trellis-dev/trellis/(hub|gateway|ctl)(/|$$)|^go.etcd.io/etcd/server/'; \
	check trellis-agent '^k8s.io/client-go/(kubernetes|informers|tools/leaderelection|tools/events)$$|^sigs.k8s.io/controller-runtime/pkg/(cluster|manager|metrics)$$|^k8s.io/apiextensions-apiserver/pkg/client/'; \
	check trellisctl '^github.com/trellis-dev/trellis/(hub|agent|extsdk|gateway)(/|$$)|^go.etcd.io/etcd/server/'; \
	check provider-local '^github.com/trellis-dev/trellis/(hub|agent|gateway|ctl)(/|$$)|^go.etcd.io/etcd/server/'; \
	exit $$fail

## testbin: build the test binaries into bin/testbin: etcd (store conformance suite, seed), kube-apiserver and
## kube-controller-manager (the seed of the agent tests, run by test/seedtest), and the parts of a seed's node
## (testbin-node). Cached per machine and version under $(TESTBIN_CACHE), so another clone reuses them; a cold build
## takes about 8 minutes for the seed and about 30 more for the node.
testbin: testbin-etcd testbin-kube testbin-node

## testbin-node: the parts of a local seed's node (test/localnode) into bin/testbin/node: kubelet, kube-proxy,
## kube-scheduler, kubectl, containerd v2, CoreDNS, local-path-provisioner (Go modules, cached in $(TESTBIN_CACHE)),
## and, from Debian with apt-get when missing, runc, the CNI plugins, iptables, conntrack and busybox-static.
## The node's images (deploy/images.NodeImages), the shoot control plane's (deploy/images.ControlPlaneImages, which
## the agent runs on local seeds) and kube-proxy's for shoots' machines (deploy/images.ShootSystemImages) go to
## bin/testbin/images; etcd-backup-restore, the project's, is built statically
## for its image.
testbin-node:
	@./test/testbin/build-node.sh $(KUBE_VERSION) $(TESTBIN_CACHE) bin/testbin
	@CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-buildid=' -o bin/testbin/images/bin/ ./cmd/etcd-backup-restore
	@$(GO) run ./deploy/images/cmd/build-images -only pause,busybox,coredns,local-path-provisioner,etcd,kube-apiserver,kube-controller-manager,kube-scheduler,kube-proxy,etcd-backup-restore -bin bin/testbin/images/bin -out bin/testbin/images

## images: the image archives of deploy/images (the project's binaries and the cached components), one
## bin/images/<name>.tar per image, named local.trellis.dev/<name>:<version> (VERSION, default dev), labelled with
## the OCI version, source and revision (the git commit); reproducible (-trimpath, no build ID, fixed times: the
## same commit gives the same digests), rewritten only on change. The project's binaries are built again statically
## (CGO_ENABLED=0) for them: the images hold no C library. PUSH=registry/prefix also pushes every image to
## <prefix>/<name>:<version> (PUSH_ARGS=-push-insecure for a plain-HTTP registry on loopback).
VERSION ?= dev
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
IMAGE_LDFLAGS := -buildid= -X main.version=$(VERSION)
images: testbin
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(IMAGE_LDFLAGS)' -o bin/images/bin/ $(addprefix ./cmd/,$(BINARIES))
	$(GO) run ./deploy/images/cmd/build-images -bin bin/images/bin -out bin/images -version $(VERSION) \
		-revision "$(REVISION)" $(if $(PUSH),-push $(PUSH)) $(PUSH_ARGS)

## testbin-etcd: build etcd (go.etcd.io/etcd/server/v3 $(ETCD_VERSION)) into a per-machine cache.
testbin-etcd:
	@mkdir -p bin/testbin $(ETCD_CACHE)
	@if [ ! -x $(ETCD_CACHE)/etcd ]; then \
		echo "building etcd $(ETCD_VERSION) into $(ETCD_CACHE)"; \
		$(GO) build -o $(ETCD_CACHE)/etcd.partial go.etcd.io/etcd/server/v3 && mv -f $(ETCD_CACHE)/etcd.partial $(ETCD_CACHE)/etcd; fi
	@ln -sfn $(ETCD_CACHE)/etcd bin/testbin/etcd

## testbin-kube: build $(KUBE_BINARIES) (k8s.io/kubernetes $(KUBE_VERSION), staging modules at their published
## versions) into a per-machine cache, for the seed tests and the peer comparisons; only missing ones are built, about
## 7 minutes for both the first time.
testbin-kube:
	@mkdir -p bin/testbin
	@./test/testbin/build-kube.sh $(KUBE_VERSION) $(TESTBIN_CACHE) $(KUBE_BINARIES)
	@for b in $(KUBE_BINARIES); do ln -sfn $(TESTBIN_CACHE)/$$b-$(KUBE_VERSION)/$$b bin/testbin/$$b; done

## test: every test, with short fuzz runs; needs testbin, and the tools (ctl/ctlgen's test runs buf with the plugins).
## The tests run as go test -count=1 runs them, through test/suite, which keeps each package's test binary in a
## per-machine cache (TRELLIS_TEST_CACHE; "off": none) and links only those whose sources changed, where go test links
## all of them on every run (436 CPU-seconds on 2 cores); it runs no go vet, which make lint does.
## The packages in TEST_FIRST, the longest, start first (test/suite runs packages in the order given) and TEST_P packages
## run at once: the two long ones and, in the third slot, all others from the start, on the CPU that the node tests
## leave idle while they wait for processes, pods and machines (test/e2e runs its long tests two at a time, too). The
## fuzz phase runs beside go test at a lower CPU priority (nice 10), one worker per target, from the seed corpora only
## (a fresh FUZZCACHE, bin/fuzz/corpus: the machine's accumulated corpora would make every run slower than the last);
## its output (bin/fuzz.log) follows go test's, and either failing fails make test. go test and the go builds the
## tests run (GOFLAGS) use -trimpath: the module's packages, compiled without it, are cached per directory, so a fresh
## clone would compile them all again; with it a clone reuses what any clone of the same sources compiled.
## TEST_RACE are the packages whose tests also run with the race detector once go test has ended, beside the fuzz
## phase's tail: the watch cache, the agent link's sessions, the REST gateway, the Table handler and the hub's
## controllers, where goroutines share cached objects and memos (bin/race.log follows the fuzz log; a race fails make
## test). Alone they take two minutes; beside the node tests, at nice 10, they starved for half an hour and their own
## waits ran out. The long node tests (a landscape or shoots on local nodes, in test/e2e and test/shootcontrolplane)
## take turns across both packages: TEST_NODE_TESTS at once (TRELLIS_NODE_TESTS, localnode.TakeTurn; default one per
## core, at least two). Every test binary, fuzz binary and binary a test builds (test/binproc) is linked without DWARF
## (TEST_LDFLAGS -w): a fifth less of each link's CPU, and over a hundred links per run; stack traces do not need it.
## TEST_TIMEOUT_SCALE multiplies every wait the tests set for work whose speed depends on the machine (control planes
## on local nodes, rollouts, the browser; test/timescale, TRELLIS_TEST_TIMEOUT_SCALE): the waits written in the tests
## are a lone test's on an idle fast machine, and a machine that takes twice the CPU for the same work, with all of
## this running at once, needed more than three times some of them. A passing test never waits one out. The package
## timeouts (TEST_TIMEOUT, TEST_RACE_TIMEOUT) are set for such a machine, too: there test/e2e and
## test/shootcontrolplane took 58 minutes each, and make test over an hour (docs/testing.md).
TEST_FIRST ?= ./test/e2e ./test/shootcontrolplane
TEST_P ?= 3
TEST_TIMEOUT_SCALE ?= 3
TEST_TIMEOUT ?= 80m
TEST_RACE_TIMEOUT ?= 20m
TEST_NODE_TESTS ?=
TEST_RACE ?= ./hub/store ./hub/agentlink ./gateway ./hub/table ./hub/controller/...
TEST_LDFLAGS ?= -w
test: export TRELLIS_TEST_TIMEOUT_SCALE = $(TEST_TIMEOUT_SCALE)
test: export TRELLIS_NODE_TESTS = $(TEST_NODE_TESTS)
test: testbin build tools
	@mkdir -p bin; rm -rf bin/fuzz/corpus; \
	GOFLAGS="$$GOFLAGS -ldflags=$(TEST_LDFLAGS)" nice -n 10 $(MAKE) --no-print-directory fuzz FUZZTIME=10000x FUZZPARALLEL=1 \
		FUZZCACHE=$(CURDIR)/bin/fuzz/corpus >bin/fuzz.log 2>&1 & fuzz=$$!; \
	GOFLAGS="$$GOFLAGS -trimpath -ldflags=$(TEST_LDFLAGS)" $(GO) run ./test/suite -p $(TEST_P) -timeout $(TEST_TIMEOUT) $(TEST_FIRST) ./...; tests=$$?; \
	GOFLAGS="$$GOFLAGS -trimpath -ldflags=$(TEST_LDFLAGS)" $(GO) run ./test/suite -race -p 2 -timeout $(TEST_RACE_TIMEOUT) $(TEST_RACE) \
		>bin/race.log 2>&1; raced=$$?; \
	wait $$fuzz; fuzzed=$$?; cat bin/fuzz.log; \
	if [ $$fuzzed -ne 0 ]; then echo "make test: the fuzz phase failed (bin/fuzz.log)"; fi; \
	cat bin/race.log; \
	if [ $$raced -ne 0 ]; then echo "make test: the race detector's run failed (bin/race.log)"; fi; \
	[ $$tests -eq 0 ] && [ $$fuzzed -eq 0 ] && [ $$raced -eq 0 ]

## fuzz: run every fuzz target (found by its `func Fuzz…(` line) for FUZZTIME; one instrumented test binary per package,
## built once, without go vet (make lint runs it) and with -trimpath (the instrumented compiles are Go's cached ones in
## any clone of the same sources, where a path in the cache key would compile the module again in each new clone),
## runs each of its targets in the package's directory with go test's corpus cache: a number of executions (10000x) or
## a duration (30s). make test uses a count: Go 1.26's fuzzing coordinator can fail a duration-bounded run with a
## spurious "context deadline exceeded" when its deadline meets a busy worker (go.dev/issue/75804, fixed in Go 1.27),
## which a count never hits.
## FUZZCACHE: where the corpora a run finds are kept and read again (default Go's own, $GOCACHE/fuzz, which
## `go test -fuzz` shares); FUZZPARALLEL: worker processes per target (default GOMAXPROCS); FUZZBIN: where the
## instrumented binaries are kept (default the machine's test binary cache, TRELLIS_TEST_CACHE as test/suite reads it,
## under "fuzz"; bin/fuzz when it is "off"), so that go test -c links only the binaries whose sources changed.
FUZZTIME ?= 30s
FUZZCACHE ?=
FUZZPARALLEL ?=
FUZZBIN ?= $(if $(filter off,$(TRELLIS_TEST_CACHE)),$(CURDIR)/bin/fuzz,$(or $(TRELLIS_TEST_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/trellis/tests)/fuzz)
fuzz:
	@set -e; mkdir -p bin/fuzz $(FUZZBIN); cache=$(or $(FUZZCACHE),$$($(GO) env GOCACHE)/fuzz); mod=$$($(GO) list -m); \
	for dir in $$(grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(' . | grep -v '^./bin/' | xargs -n1 dirname | sort -u); do \
		pkg=$$mod/$${dir#./}; bin=$(FUZZBIN)/$$(echo $${dir#./} | tr / _).test; \
		echo "fuzz: build $$pkg"; $(GO) test -c -vet=off -trimpath -fuzz=. -o $$bin $$dir; \
		for f in $$(sed -n -E 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/p' $$dir/*_test.go | sort -u); do \
			echo "fuzz $$pkg $$f"; \
			(cd $$dir && $$bin -test.run '^$$' -test.fuzz "^$$f$$" -test.fuzztime $(FUZZTIME) \
				-test.fuzzcachedir $$cache/$$pkg $(if $(FUZZPARALLEL),-test.parallel $(FUZZPARALLEL))); \
		done; done

## bench-api: REST benchmark of 10,000 realistic shoots against a real hub (create, get, update, patch, list, watch,
## apply, delete); with kube-apiserver and etcd in bin/testbin (make testbin) also against them serving a Shoot CRD
## (-peer), phase by phase in turn, with the ratios. BENCH_ARGS="-loops" adds a hub with its loops on.
BENCH_API_PEER = $(if $(and $(wildcard bin/testbin/kube-apiserver),$(wildcard bin/testbin/etcd)),-peer)
bench-api: build
	$(GO) run ./test/bench/api $(BENCH_API_PEER) $(BENCH_ARGS)

## bench-cli: trellisctl's start-up (first byte of `trellisctl version`, 200 runs) beside kubectl's
## (`kubectl version --client`, k8s.io/kubernetes $(KUBE_VERSION), built into the testbin cache the first time, about
## 5 minutes); results in bin/bench/cli.json.
.PHONY: bench-cli
bench-cli: build
	@./test/testbin/build-kube.sh $(KUBE_VERSION) $(TESTBIN_CACHE) kubectl
	$(GO) run ./test/bench/cli -trellisctl bin/trellisctl -kubectl $(TESTBIN_CACHE)/kubectl-$(KUBE_VERSION)/kubectl $(BENCH_ARGS)

## bench-tunnel: tunnels through a real hub, agent and seed kube-apiserver: seed API request latency (hub vs direct,
## p50/p99), passthrough round trips, 100 MB streams (tunnel vs direct; then through the tunnel with heartbeat acks and
## another tunnel's round trips timed meanwhile), memory of 1,000 idle tunnels; then with the hub as its own process: its memory per idle tunnel
## and per watch, 1,000 watches through the hub against direct (event delays); then 1,000 watches through 100 agents
## (hub RSS per open tunnel, event delays and deliveries/s against direct); then with two hub replicas, streams and seed
## API requests through the agent's replica and through the other (forwarded); then 100 MB streams with the client and
## target in a process of their own, sharing the CPUs with the hub and agent and then pinned to a CPU of their own (the
## relays to the other); one run, results in bin/bench/tunnel.json, tunnel-process.json, tunnel-agents.json,
## tunnel-replica.json and tunnel-split.json. TRELLIS_BENCH_PARTS picks parts of the first;
## TRELLIS_BENCH_SEED_CLUSTERS=N gives the 100 seeds N kube-apiservers (default 1).
.PHONY: bench-tunnel
bench-tunnel: testbin
	TRELLIS_BENCH=1 $(GO) test -count=1 -v -timeout 20m -run 'TestTunnel(Process|Agents|Replica|Split)?Bench' ./test/bench/tunnel $(BENCH_ARGS)

## bench-agents: agent link benchmark: N simulated agents (default 1000) against a real hub over loopback TCP
## (connect, steady-state RSS/CPU/heartbeat acks/etcd writes, assignment latency, reconnect storm); results in
## bin/bench/agents-N.json. Extra flags in BENCH_ARGS, e.g. BENCH_ARGS="-reuse -kill9 -profile"; BENCH_ARGS="-replicas 3"
## runs three hub replicas on a three-member etcd cluster (make testbin) and SIGKILLs the leader.
bench-agents: build
	$(GO) run ./test/bench/agents -n $(or $(N),1000) $(BENCH_ARGS)

## bench-shoots: seed-side benchmark: a landscape of real binaries (hub, localseed, trellis-agent, provider-local, built
## into a temporary directory) and N shoots (default 20) created at once, updated and deleted; per-shoot latencies,
## CPU and peak RSS of every process per phase; results in bin/bench/shoots-N.json. Extra flags in BENCH_ARGS, e.g.
## BENCH_ARGS="-seeds 2 -concurrent-syncs 20".
.PHONY: bench-shoots
bench-shoots: testbin
	$(GO) run ./test/bench/shoots -n $(or $(N),20) $(BENCH_ARGS)

## bench-scheduler: the shoot scheduler on a real in-process store (embedded etcd, no hub process): 100 seeds and
## N pending shoots (default 10,000) bound by the scheduler (shoots/s, time to bind p50/p99), then 1,000 shoots
## created at 200/s (create → bind p50/p99), and the distribution across seeds; results in bin/bench/scheduler.json.
## Extra flags in BENCH_ARGS, e.g. BENCH_ARGS="-workers 20 -strategy MinimalDistance".
.PHONY: bench-scheduler
bench-scheduler:
	$(GO) run ./test/bench/scheduler -n $(or $(N),10000) $(BENCH_ARGS)

## up: build and run the local landscape in the foreground, with its data in .trellis/local (test/landscape, docs/local.md):
## a hub on embedded etcd (127.0.0.1:8443), seed "local" with a node, its agent (the trellis-agent chart's pod) and
## provider-local (its ControllerInstallation's pod), the example resources;
## writes .trellis/local/env. Ctrl-C or `make down` stops it; the next `make up` reuses the data. Flags in UP_ARGS.
up: build testbin
	$(GO) build -trimpath -o bin/ ./test/localseed ./test/landscape/cmd/landscape
	@# Static: with nodes, provider-local and the agent run as pods from images of these binaries.
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/ ./cmd/provider-local ./cmd/trellis-agent
	bin/landscape $(UP_ARGS)

## down: stop a landscape that `make up` left running (pid in .trellis/local/landscape.pid).
down:
	./deploy/local/down.sh

clean:
	rm -rf $(addprefix bin/,$(BINARIES)) bin/localseed bin/landscape .trellis
