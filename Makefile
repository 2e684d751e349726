# ellm needs Go 1.27.3 (github.com/ardanlabs/jinja v1.12.0 requires it); the go
# command fetches that toolchain through the module proxy on first use.
export GOTOOLCHAIN := go1.27.3
GO      ?= go
SHARED  ?= $(abspath ../shared)
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
ARGS    ?= serve
BIN     := bin/ellm

.PHONY: build test test-go test-align bench lint run generate check-generate check-tidy

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/ellm

# The one test command: unit and integration tests, then every alignment case
# for every model in $(SHARED)/align.
test: test-go test-align

test-go:
	ELLM_SHARED=$(SHARED) $(GO) test -count=1 -timeout 30m ./...

test-align: build
	@for ref in $(SHARED)/align/*/; do \
		case "$$ref" in */tokenizer/) continue;; esac; \
		echo "== ellm align all --ref $$ref"; \
		./$(BIN) align all --ref "$$ref" || exit 1; \
	done
	./$(BIN) align tokenizer --ref $(SHARED)/align/tokenizer

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./kernels/... ./pkg/tokenizer/...

lint:
	$(GO) vet ./...
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
