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
# Test binaries are cached per machine, keyed by version, and linked from bin/testbin.
TESTBIN_CACHE ?= $(HOME)/.cache/trellis/testbin
ETCD_CACHE ?= $(TESTBIN_CACHE)/etcd-$(ETCD_VERSION)
KUBE_CACHE ?= $(TESTBIN_CACHE)/kube-apiserver-$(KUBE_VERSION)
BINARIES := trellis-hub trellis-agent trellisctl

.PHONY: all build test lint generate checkgenerate tools testbin testbin-etcd testbin-kube up down bench-api bench-agents fuzz clean

all: build

## tools: install the pinned code generators and buf into bin/tools.
tools: $(TOOLS)/buf $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc $(TOOLS)/protoc-gen-grpc-gateway $(TOOLS)/protoc-gen-openapiv2

$(TOOLS)/buf:
	GOBIN=$(TOOLS) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(TOOLS)/protoc-gen-go:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
$(TOOLS)/protoc-gen-go-grpc:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
$(TOOLS)/protoc-gen-grpc-gateway:
	GOBIN=$(TOOLS) $(GO) install github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway@$(GRPC_GATEWAY_VERSION)
$(TOOLS)/protoc-gen-openapiv2:
	GOBIN=$(TOOLS) $(GO) install github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-openapiv2@$(GRPC_GATEWAY_VERSION)

## generate: regenerate the kind services, Go code, gateway and OpenAPI from the protos.
generate: tools
	$(GO) run ./proto/kindgen -proto proto -go-out hub/api/zz_generated_kinds.go
	$(TOOLS)/buf generate

## checkgenerate: fail when generated files differ from what is committed.
checkgenerate: generate
	@git add -N proto hub/api docs/openapi >/dev/null 2>&1 || true
	@if ! git diff --quiet -- proto hub/api/zz_generated_kinds.go docs/openapi; then \
		echo "generated files are out of date; run 'make generate' and commit:"; \
		git diff --stat -- proto hub/api/zz_generated_kinds.go docs/openapi; exit 1; fi

## build: build every binary into bin/.
build:
	@mkdir -p bin
	$(GO) build -o bin/ $(addprefix ./cmd/,$(BINARIES))

## lint: gofmt, go vet and buf lint.
lint: $(TOOLS)/buf
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^proto/gen/')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(TOOLS)/buf lint

## testbin: build the test binaries into bin/testbin: etcd (store conformance suite, seed) and kube-apiserver (the
## seed of the agent tests, run by test/seedtest through envtest). Cached per machine and version under
## $(TESTBIN_CACHE), so another clone reuses them; a cold build takes about 5 minutes.
testbin: testbin-etcd testbin-kube

## testbin-etcd: build etcd (go.etcd.io/etcd/server/v3 $(ETCD_VERSION)) into a per-machine cache.
testbin-etcd:
	@mkdir -p bin/testbin $(ETCD_CACHE)
	@if [ ! -x $(ETCD_CACHE)/etcd ]; then \
		echo "building etcd $(ETCD_VERSION) into $(ETCD_CACHE)"; \
		$(GO) build -o $(ETCD_CACHE)/etcd.partial go.etcd.io/etcd/server/v3 && mv -f $(ETCD_CACHE)/etcd.partial $(ETCD_CACHE)/etcd; fi
	@ln -sfn $(ETCD_CACHE)/etcd bin/testbin/etcd

## testbin-kube: build kube-apiserver (k8s.io/kubernetes $(KUBE_VERSION), staging modules at their published versions)
## into a per-machine cache, for the seed tests and the peer comparisons; about 5 minutes the first time.
testbin-kube:
	@mkdir -p bin/testbin
	@if [ ! -x $(KUBE_CACHE)/kube-apiserver ]; then ./test/testbin/build-kube-apiserver.sh $(KUBE_VERSION) $(KUBE_CACHE); fi
	@ln -sfn $(KUBE_CACHE)/kube-apiserver bin/testbin/kube-apiserver

## test: every test, with short fuzz runs; needs testbin.
test: testbin build
	$(GO) test -count=1 -timeout 30m ./...
	$(MAKE) fuzz FUZZTIME=10s

## fuzz: run every fuzz target for FUZZTIME.
FUZZTIME ?= 30s
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz' || true); do \
			echo "fuzz $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; done

## bench-api: REST benchmark of 10,000 realistic shoots against a real hub (create, get, list, watch).
bench-api: build
	$(GO) run ./test/bench/api $(BENCH_ARGS)

## bench-agents: agent link benchmark: N simulated agents (default 1000) against a real hub over loopback TCP
## (connect, steady-state RSS/CPU/heartbeat acks/etcd writes, assignment latency, reconnect storm); results in
## bin/bench/agents-N.json. Extra flags in BENCH_ARGS, e.g. BENCH_ARGS="-reuse -kill9 -profile".
bench-agents: build
	$(GO) run ./test/bench/agents -n $(or $(N),1000) $(BENCH_ARGS)

## up: build and run a local landscape under .trellis/local: hub on embedded etcd, a seed with its agent, example resources.
up: build testbin
	$(GO) build -o bin/localseed ./test/localseed
	./deploy/local/up.sh

## down: stop the local landscape.
down:
	./deploy/local/down.sh

clean:
	rm -rf bin/trellis-hub bin/trellis-agent bin/trellisctl bin/localseed .trellis
