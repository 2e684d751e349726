# ellm needs Go 1.27.3 (github.com/ardanlabs/jinja v1.12.0 requires it); the go
# command fetches that toolchain through the module proxy on first use.
export GOTOOLCHAIN := go1.27.3
GO      ?= go
SHARED  ?= $(abspath ../shared)
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
ARGS    ?= serve
BIN     := bin/ellm

.PHONY: build test test-go test-align test-clients test-arm64 bench lint run generate check-generate check-tidy image

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/ellm

# The one test command: unit and integration tests, every alignment case for
# every model in $(SHARED)/align, the Go kernels on arm64, then the real npm clients.
test: test-go test-align test-arm64 test-clients

test-go:
	ELLM_SHARED=$(SHARED) $(GO) test -count=1 -timeout 30m ./...

# align-all runs every alignment case of every model in $(SHARED)/align with
# the command $(1) and the arguments $(2); a model with a failed case stops
# it, unless $(3) says what to do instead.
align-all = for ref in $(SHARED)/align/*/; do \
		case "$$ref" in */tokenizer/) continue;; esac; \
		echo "== $(1) align all --ref $$ref $(2)"; \
		$(1) align all --ref "$$ref" $(2) $(or $(3),|| exit 1); \
	done

test-align: build
	@$(call align-all,./$(BIN))
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

# The kernels and the engine as arm64 runs them, under qemu-user (about three
# to five minutes): the NEON products' bits against the fused definition every FMA
# path is held to (so the same bits as amd64's), the Go kernels' against
# theirs, on a compiler that may fuse a multiply and an add where amd64's does
# not, the products and attention against their references, every alignment
# case on the NEON path, and every tensor those cases dump (also with int8
# weights and cache) and seeded sampled answers the same bits as amd64's avx2
# path gives. qemu-user's mappings report no huge pages, hence the skip.
# Without qemu-aarch64-static it is skipped with a notice, except under CI
# (CI=true), where .ci/run installs it.
QEMU_ARM64 := GOARCH=arm64 $(GO) test -count=1 -exec qemu-aarch64-static
DUMPS      := bin/align-dumps
# int8 weights and cache fail some bf16 tolerances by design (docs/alignment.md):
# only their dumps are compared.
INT8       := --dtype int8 --kv-dtype int8
# A sampled answer of the built-in model: the sampler's arithmetic too.
SAMPLED    := -p "Write a story" --max-tokens 48 --temperature 0.8 --top-p 0.9 --repetition-penalty 1.1
test-arm64: build
	@if [ "$$(uname -m)" != x86_64 ]; then \
		echo "test-arm64: SKIPPED: it compares against amd64's avx2 path (test-go runs the tests natively here)"; exit 0; \
	fi; \
	if ! command -v qemu-aarch64-static >/dev/null; then \
		if [ -n "$$CI" ]; then echo "test-arm64: qemu-aarch64-static is missing" >&2; exit 1; fi; \
		echo "test-arm64: SKIPPED: qemu-aarch64-static is not installed (apt-get install qemu-user-static)"; exit 0; \
	fi; \
	$(QEMU_ARM64) -skip TestWeightsOnHugePages ./kernels ./kernels/gemm ./kernels/ops && \
	$(QEMU_ARM64) -run 'TestTileGoMatchesDefinition|TestTileKernelsMatchFused|TestDequantNEONMatchesGo|TestMatchesFloat64Reference' ./kernels/attn && \
	GOARCH=arm64 $(GO) build -o $(BIN)-arm64 ./cmd/ellm && \
	rm -rf $(DUMPS) && \
	$(call align-all,qemu-aarch64-static ./$(BIN)-arm64,--dump $(DUMPS)/neon) && \
	$(call align-all,./$(BIN),--kernels avx2 --dump $(DUMPS)/avx2) >/dev/null && \
	diff -r -x manifest.json $(DUMPS)/avx2 $(DUMPS)/neon && \
	$(call align-all,qemu-aarch64-static ./$(BIN)-arm64,$(INT8) --dump $(DUMPS)/neon-int8,|| true) >/dev/null && \
	$(call align-all,./$(BIN),--kernels avx2 $(INT8) --dump $(DUMPS)/avx2-int8,|| true) >/dev/null && \
	test -n "$$(find $(DUMPS)/neon-int8 -name '*.safetensors')" && \
	diff -r -x manifest.json $(DUMPS)/avx2-int8 $(DUMPS)/neon-int8 && \
	for seed in 1 2 3; do \
		qemu-aarch64-static ./$(BIN)-arm64 run $(SAMPLED) --seed $$seed > $(DUMPS)/neon-run-$$seed.txt && \
		ELLM_KERNELS=avx2 ./$(BIN) run $(SAMPLED) --seed $$seed > $(DUMPS)/avx2-run-$$seed.txt && \
		test -s $(DUMPS)/neon-run-$$seed.txt && cmp $(DUMPS)/avx2-run-$$seed.txt $(DUMPS)/neon-run-$$seed.txt || exit 1; \
	done && \
	echo "test-arm64: every tensor of every alignment case is the same bits on neon (arm64) as on avx2 (amd64), also with int8 weights and cache, and so are sampled answers"

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./kernels/... ./pkg/tokenizer/...

# The purego build (generic kernels only, any GOARCH) must keep compiling, and
# arm64's assembly must pass vet's checks of its frames and arguments.
lint:
	$(GO) vet ./...
	$(GO) vet -tags purego ./...
	GOARCH=arm64 $(GO) vet ./...
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
