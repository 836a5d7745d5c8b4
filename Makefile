# sandhold — build, run and test. `make run` and `make test` are the two
# commands a new developer needs (see README.md).

GO               ?= go
BIN              := bin/sandhold
TOOLS            := $(CURDIR)/.tools
GOLANGCI         := $(TOOLS)/golangci-lint
GOLANGCI_VERSION := v2.15.0
DATA_DIR         := ./.data
LISTEN           := 127.0.0.1:8080
TEST_TIMEOUT     := 20m

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: all build run test vet unit e2e cross lint deps clean bench bench-density

all: build

## build: static binary in bin/sandhold
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/sandhold

## run: build, then serve on 127.0.0.1:8080 with the data dir ./.data
run: build
	@mkdir -p $(DATA_DIR) && chmod 700 $(DATA_DIR)
	@if [ -n "$$SANDBOX_API_KEY" ]; then \
		echo "admin key: from SANDBOX_API_KEY"; \
	elif [ -f $(DATA_DIR)/admin.key ]; then \
		echo "admin key: $$(cat $(DATA_DIR)/admin.key)"; \
	else \
		echo "admin key: generated on first start (printed below, saved in $(DATA_DIR)/admin.key)"; \
	fi
	./$(BIN) serve --listen $(LISTEN) --data-dir $(DATA_DIR)

## test: everything CI runs: deps, go vet, the cross-platform build, every
## test (e2e is a superset of unit), golangci-lint
test: deps vet cross e2e lint

vet:
	$(GO) vet ./...

## unit: the fast tests, no root needed (-short skips real sandboxes and servers)
unit:
	$(GO) test -short -timeout $(TEST_TIMEOUT) ./...

## e2e: every test, with real sandboxes (run as root on Linux)
e2e:
	$(GO) test -timeout $(TEST_TIMEOUT) ./...

## cross: vet and build for darwin and linux/arm64 (stubs must compile and fail closed)
cross:
	GOOS=darwin $(GO) vet ./...
	GOOS=darwin CGO_ENABLED=0 $(GO) build ./...
	GOOS=linux GOARCH=arm64 $(GO) vet ./...
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build ./...

## lint: golangci-lint v2 with gosec (installed into .tools on first use)
lint: $(GOLANGCI)
	$(GOLANGCI) run ./...

$(GOLANGCI):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)

## deps: whatever the tests need on the machine (system packages go here)
deps: mcp-ts
	@$(GO) version
	@# code execution: matplotlib figures as PNG outputs (internal/coderun)
	@/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || { command -v apt-get >/dev/null && { apt-get install -y -qq python3-matplotlib || { apt-get update -qq && apt-get install -y -qq python3-matplotlib; }; }; } || echo "python3-matplotlib not installed: the image test will skip"
	@# workspace quotas: mkfs.ext4 and e2fsck (internal/sandbox)
	@test -x /usr/sbin/mkfs.ext4 || test -x /sbin/mkfs.ext4 || { apt-get update -qq && apt-get install -y -qq e2fsprogs; }
	@# the generated AIO TypeScript client test (internal/aiocompat, test/aio-ts)
	@if command -v npm >/dev/null; then cd test/aio-ts && npm ci --no-audit --no-fund; else echo "npm not found: the TypeScript client test will skip"; fi

## bench: exec/create benchmarks against bare fork/exec and bwrap (see BENCHMARKS.md)
bench: build
	@command -v bwrap >/dev/null || (apt-get update -qq && apt-get install -y -qq bubblewrap)
	$(GO) run ./bench -server $(BIN)

## bench-density: 1,000 idle sandboxes: memory added and create latency
bench-density: build
	$(GO) run ./bench density -server $(BIN)

clean:
	rm -rf bin

## mcp-ts: the official TypeScript MCP SDK for internal/mcp's client test (test/mcp-ts)
.PHONY: mcp-ts
mcp-ts:
	@if command -v npm >/dev/null; then npm ci --prefix test/mcp-ts --no-audit --no-fund; else echo "npm not found: the TypeScript MCP client test will skip"; fi
