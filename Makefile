# ellm needs Go 1.27.3 (github.com/ardanlabs/jinja v1.12.0 requires it); the go
# command fetches that toolchain through the module proxy on first use.
export GOTOOLCHAIN := go1.27.3
GO      ?= go
SHARED  ?= $(abspath ../shared)
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
ARGS    ?= serve
BIN     := bin/ellm

.PHONY: build test test-go test-align test-clients bench lint run generate check-generate check-tidy image

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/ellm

# The one test command: unit and integration tests, every alignment case for
# every model in $(SHARED)/align, then the real npm clients.
test: test-go test-align test-clients

test-go:
	ELLM_SHARED=$(SHARED) $(GO) test -count=1 -timeout 30m ./...

test-align: build
	@for ref in $(SHARED)/align/*/; do \
		case "$$ref" in */tokenizer/) continue;; esac; \
		echo "== ellm align all --ref $$ref"; \
		./$(BIN) align all --ref "$$ref" || exit 1; \
	done
	./$(BIN) align tokenizer --ref $(SHARED)/align/tokenizer

# Real clients (the openai SDK, the Vercel AI SDK, LangChain, Qwen Code; pinned in
# test/clients/package-lock.json) against ellm serve on 127.0.0.1, in a network
# namespace with only loopback. Needs node >= 20, npm, unshare and ip; not part of `make test`.
# npm install from the committed lock rather than npm ci, which refuses this lock:
# @qwen-code/qwen-code lists optional platform packages (@teddyzhu/clipboard-*)
# that were never published, so no lock can hold them. The lock must not change.
# Real clients nobody here wrote (test/clients). Without npm they are skipped
# with a notice, except under CI (CI=true), where .ci/run installs npm first.
test-clients: build
	@if ! command -v npm >/dev/null; then \
		if [ -n "$$CI" ]; then echo "test-clients: npm is missing" >&2; exit 1; fi; \
		echo "test-clients: SKIPPED: npm is not installed (apt-get install nodejs npm)"; exit 0; \
	fi; \
	cd test/clients && npm install --no-save --no-audit --no-fund && git diff --exit-code package-lock.json && cd ../.. && \
	ELLM_SHARED=$(SHARED) ELLM_BIN=$(abspath $(BIN)) test/clients/run.sh

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./kernels/... ./pkg/tokenizer/...

# The purego build (generic kernels only, any GOARCH) must keep compiling.
lint:
	$(GO) vet ./...
	$(GO) vet -tags purego ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Runs the main job; with no --model-path ellm uses its built-in synthetic model.
run: build
	./$(BIN) $(ARGS)

generate:
	$(GO) generate ./...

check-generate: generate
	git diff --exit-code

# go.mod must list exactly what the code imports (direct vs indirect included).
check-tidy:
	$(GO) mod tidy -diff

# The container image, built with buildah and smoke-tested (deploy/image.sh;
# ELLM_LOCAL_BUILDER=1 where no registry is reachable). Not part of `make test`.
image:
	deploy/image.sh
