# sandhold — build, run and test. `make run` and `make test` are the two
# commands a new developer needs (see README.md).

GO               ?= go
# The Go toolchain every target builds, vets, lints and tests with: go.mod's
# toolchain line (else its go line). Exported, so it overrides a machine's
# GOTOOLCHAIN=local (this project's machines set it in go.env) and reaches every go
# command a target, a script or a test starts; the go command fetches it from
# the module proxy on first use (~10 s) into the module cache. Older toolchains
# ship standard-library vulnerabilities `make vuln` finds reachable.
GO_TOOLCHAIN     := $(or $(shell sed -n 's/^toolchain[[:space:]]*//p' go.mod),go$(shell sed -n 's/^go[[:space:]]*//p' go.mod))
export GOTOOLCHAIN := $(GO_TOOLCHAIN)
# Compiled packages are keyed by their content, not by the clone's directory
# (-trimpath): a fresh clone on a machine that built the project before
# reuses the build cache instead of compiling every package of the module
# again for vet, each cross build and the tests. No test result is taken from
# that cache: e2e runs with -count=1.
export GOFLAGS := $(strip $(filter-out -trimpath,$(GOFLAGS)) -trimpath)
BIN              := bin/sandhold
INIT_BIN         := internal/agent/initbin/sandhold-init
# the extractor the init runs for each extract or pack (cmd/sandhold-archive)
ARCHIVE_BIN      := internal/agent/initbin/sandhold-archive
# On amd64 the lean init's entry point is its keeper (cmd/sandhold-init/
# keeper_amd64.s): the program an idle init sleeps in. Elsewhere there is no
# keeper, the entry stays the Go runtime's and sandboxes do not sleep.
INIT_ENTRY        = $(if $(filter amd64,$(shell $(GO) env GOARCH)),-E main.keeperEntry)
TOOLS            := $(CURDIR)/.tools
# Tools that load Go packages (type-check the standard library's source) must be
# built by the toolchain they check: a golangci-lint built by go1.26 fails on
# go1.27's standard library. They live in a directory per toolchain, so raising
# the toolchain rebuilds them.
GOTOOLS          := $(TOOLS)/$(GO_TOOLCHAIN)
GOLANGCI         := $(GOTOOLS)/golangci-lint
GOLANGCI_VERSION := v2.15.0
DATA_DIR         := ./.data
LISTEN           := 127.0.0.1:8080
TEST_TIMEOUT     := 20m
# MIN_FREE_GIB: make test refuses to start with less free space (scripts/free-space.sh)
MIN_FREE_GIB     ?= 8
# e2e's output, written as it comes (progress during a make test)
E2E_LOG          := .e2e.log
# more go test flags for unit and e2e (TESTFLAGS=-json for per-test durations)
TESTFLAGS        ?=

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: all build run test vet unit e2e cross lint deps clean bench bench-density bench-load

all: build

## build: static binary in bin/sandhold, carrying the lean sandbox init
## (cmd/sandhold-init, embedded with -tags leaninit, run from a sealed memfd)
build: console
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(ARCHIVE_BIN) ./cmd/sandhold-archive
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w $(INIT_ENTRY)' -o $(INIT_BIN) ./cmd/sandhold-init
	CGO_ENABLED=0 $(GO) build -trimpath -tags leaninit -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/sandhold

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

## install: build, then put sandhold on PATH: $(BINDIR)/sandhold (PREFIX
## /usr/local; `make install PREFIX=~/.local` without root). The systemd
## unit is deploy/systemd/sandhold.service.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
.PHONY: install
install: build
	install -d $(DESTDIR)$(BINDIR)
	install -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/sandhold
	@echo "installed $(DESTDIR)$(BINDIR)/sandhold"

## test: everything CI runs: deps, go vet, the cross-platform build, the Helm
## chart, every test (e2e is a superset of unit), golangci-lint, the gates.
## The secrets scan, the license check and govulncheck run beside the tests,
## one at a time (each reads the tree, none needs another's output; the tests
## leave most of a core idle while they wait on sandboxes and browsers); the
## rest runs in order, and any failure fails make test as before.
test:
	@scripts/free-space.sh $(MIN_FREE_GIB) "$${TMPDIR:-/tmp}" "$$($(GO) env GOCACHE)" .
	@$(MAKE) --no-print-directory deps vet cross helm-check
	@$(MAKE) --no-print-directory -j2 --output-sync=target e2e secrets licenses vuln
	@$(MAKE) --no-print-directory lint fuzz-short

vet:
	$(GO) vet ./...

## unit: the fast tests, no root needed (-short skips real sandboxes and servers)
unit: $(CYCLONEDX)
	$(GO) test -short $(TESTFLAGS) -timeout $(TEST_TIMEOUT) ./...

## e2e: every test, with real sandboxes (run as root on Linux), every time
## (-count=1: never a result cached by an earlier run); the release tests
## need cyclonedx-gomod. Its output also goes to $(E2E_LOG) as it comes (a
## line per package as each ends): under make test's --output-sync the
## terminal sees it only at the end, so `tail -f .e2e.log` shows progress.
e2e: $(CYCLONEDX)
	@echo '$(GO) test -count=1 $(TESTFLAGS) -timeout $(TEST_TIMEOUT) ./...  (progress: tail -f $(E2E_LOG))'
	@{ $(GO) test -count=1 $(TESTFLAGS) -timeout $(TEST_TIMEOUT) ./... 2>&1; echo $$? >$(E2E_LOG).rc; } | tee $(E2E_LOG); \
		rc=$$(cat $(E2E_LOG).rc 2>/dev/null || echo 1); rm -f $(E2E_LOG).rc; exit $$rc

## cross: vet and build for darwin and linux/arm64 (stubs must compile and fail closed)
cross:
	GOOS=darwin $(GO) vet ./...
	GOOS=darwin CGO_ENABLED=0 $(GO) build ./...
	GOOS=linux GOARCH=arm64 $(GO) vet ./...
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build ./...

## lint: golangci-lint v2 with gosec (installed into .tools on first use);
## another golangci-lint on the machine (another clone's make test) is waited
## for, not a failure ("parallel golangci-lint is running"). Its cache is this
## checkout's own (.tools): with the one in ~/.cache shared by checkouts of
## the project on one machine, a fresh clone was once told of issues at the
## lines another checkout's newer copy of a file had, its //nolint lines
## missed by three (a fresh make test failed so on code that was clean)
lint: $(GOLANGCI)
	GOLANGCI_LINT_CACHE=$(TOOLS)/golangci-lint-cache $(GOLANGCI) run --allow-serial-runners ./...

$(GOLANGCI):
	GO="$(GO)" scripts/gotool.sh $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)

## console: the web console's assets (web/, esbuild from npm) into
## internal/console/dist, which the Go build embeds; without npm the
## binary serves a page saying how to build them
.PHONY: console
console:
	@if command -v npm >/dev/null; then cd web && npm ci --no-audit --no-fund && npm run build; else echo "npm not found: the console is not built (the binary serves a page saying how)"; fi

## deps: whatever the tests need on the machine (system packages go here);
## the npm installs (the console's and the TypeScript clients' of the tests)
## run side by side (scripts/npm-ci.sh: they wait on the registry, not the CPU)
deps:
	@# the web console (built into internal/console/dist, embedded by the Go build);
	@# the official TypeScript MCP SDK (internal/mcp, test/mcp-ts); the generated AIO
	@# TypeScript client (internal/aiocompat, test/aio-ts); Playwright's connectOverCDP
	@# and Puppeteer's connect against the DevTools relay (internal/daemon,
	@# test/browser-ts, test/puppeteer-ts; puppeteer-core, no browser download); the
	@# official E2B SDKs, e2b and @e2b/code-interpreter (internal/e2b, test/e2b-ts)
	@scripts/npm-ci.sh web test/mcp-ts test/aio-ts test/browser-ts test/puppeteer-ts test/e2b-ts
	@if command -v npm >/dev/null; then cd web && npm run build; fi
	@$(GO) version
	@# code execution: matplotlib figures as PNG outputs (internal/coderun)
	@/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || { command -v apt-get >/dev/null && { apt-get install -y -qq python3-matplotlib || { apt-get update -qq && apt-get install -y -qq python3-matplotlib; }; }; } || echo "python3-matplotlib not installed: the image test will skip"
	@# workspace quotas: mkfs.ext4 and e2fsck (internal/sandbox)
	@test -x /usr/sbin/mkfs.ext4 || test -x /sbin/mkfs.ext4 || { apt-get update -qq && apt-get install -y -qq e2fsprogs; }
	@# templates (internal/template, internal/agent): a static busybox and mmdebstrap build the test images offline from Debian's packages
	@{ test -x /bin/busybox && command -v mmdebstrap >/dev/null; } || { command -v apt-get >/dev/null && { apt-get install -y -qq busybox-static mmdebstrap || { apt-get update -qq && apt-get install -y -qq busybox-static mmdebstrap; }; }; } || echo "busybox-static/mmdebstrap not installed: the template tests will skip"
	@# util/convert_to_markdown: pandoc (HTML, DOCX, ODT, EPUB, …) and pdftotext (PDF), run inside sandboxes (internal/convert)
	@{ command -v pandoc >/dev/null && command -v pdftotext >/dev/null; } || { command -v apt-get >/dev/null && { apt-get install -y -qq pandoc poppler-utils || { apt-get update -qq && apt-get install -y -qq pandoc poppler-utils; }; }; } || echo "pandoc/poppler-utils not installed: the conversion tests will skip"
	@# PostgreSQL store tests: Debian's server binaries (internal/store/pgtest runs initdb + postgres in a temp dir)
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || { command -v apt-get >/dev/null && { apt-get install -y -qq postgresql || { apt-get update -qq && apt-get install -y -qq postgresql; }; }; } || echo "postgresql not installed: the PostgreSQL store tests will skip"
	@# the console's browser test (internal/console): Debian's Chromium, driven by playwright-core
	@command -v chromium >/dev/null || { command -v apt-get >/dev/null && { apt-get install -y -qq chromium || { apt-get update -qq && apt-get install -y -qq chromium; }; }; } || echo "chromium not installed: the console browser test will skip"
	@# the browser in each sandbox (internal/browser): Chromium, and Xvfb + x11vnc for the headful desktop
	@test -x /usr/lib/chromium/chromium && command -v Xvfb >/dev/null && command -v x11vnc >/dev/null || { command -v apt-get >/dev/null && { apt-get install -y -qq chromium xvfb x11vnc fonts-liberation || { apt-get update -qq && apt-get install -y -qq chromium xvfb x11vnc fonts-liberation; }; }; } || echo "chromium not installed: the browser tests will skip"
	@# snapshots on a file system with reflinks (internal/snapshot's clone test, bench-snapshots): XFS
	@command -v mkfs.xfs >/dev/null || { command -v apt-get >/dev/null && { apt-get install -y -qq xfsprogs || { apt-get update -qq && apt-get install -y -qq xfsprogs; }; }; } || echo "xfsprogs not installed: the snapshot reflink test will skip"
	@# page and desktop recordings (internal/browser): ffmpeg, run inside the sandbox
	@command -v ffmpeg >/dev/null || { command -v apt-get >/dev/null && { apt-get install -y -qq --no-install-recommends ffmpeg || { apt-get update -qq && apt-get install -y -qq --no-install-recommends ffmpeg; }; }; } || echo "ffmpeg not installed: the recording tests will skip"

## bench: exec/create benchmarks against bare fork/exec and bwrap (see BENCHMARKS.md)
bench: build
	@command -v bwrap >/dev/null || (apt-get update -qq && apt-get install -y -qq bubblewrap)
	$(GO) run ./bench -server $(BIN)

## bench-load: 10,000 mixed requests at concurrency 64 (16 on one sandbox), then RSS/goroutines a minute later
bench-load: build
	$(GO) run ./bench load -server $(BIN)

## bench-cluster: 3 nodes on a throw-away PostgreSQL: forwarding ratio, creates/s, audit, propagation
.PHONY: bench-cluster
bench-cluster: build
	$(GO) run ./bench cluster -server $(BIN)

## bench-browser: the in-sandbox browser against the same Chromium on the host: cold start,
## navigate+screenshot, screenshots/s, idle headless and headful memory (BENCHMARKS.md)
.PHONY: bench-browser
bench-browser: build
	$(GO) run ./bench browser -server $(BIN)

## bench-templates: a ~300 MB template against host: cold create + first exec, what a second
## sandbox of it adds (disk, memory, page cache), a rebuild from the cache (BENCHMARKS.md)
.PHONY: bench-templates
bench-templates: build
	$(GO) run ./bench templates -server $(BIN)

## bench-snapshots: snapshot of 100 MB against cp --reflink=auto, fork x10 and resume against a cold
## create, memory freed by hibernate; on the data dir's file system and on XFS with reflinks (BENCHMARKS.md)
.PHONY: bench-snapshots
bench-snapshots: build
	@command -v mkfs.xfs >/dev/null || { apt-get install -y -qq xfsprogs || { apt-get update -qq && apt-get install -y -qq xfsprogs; }; }
	$(GO) run ./bench snapshots -xfs -server $(BIN)

## bench-density: 1,000 idle sandboxes: memory added and create latency
bench-density: build
	$(GO) run ./bench density -server $(BIN)

clean:
	rm -rf bin $(INIT_BIN) $(ARCHIVE_BIN)

## proto: regenerate internal/e2b/envdpb (the Go code of E2B's envd protocol,
## from the .proto files in internal/e2b/envdpb/proto) with protoc (Debian's
## protobuf-compiler) and protoc-gen-go / protoc-gen-connect-go at the
## versions go.mod pins; the generated code is committed, so make test needs
## none of them
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_CONNECT_VERSION := v1.21.1
.PHONY: proto
proto:
	@command -v protoc >/dev/null || { apt-get update -qq && apt-get install -y -qq protobuf-compiler; }
	GO="$(GO)" scripts/gotool.sh $(TOOLS)/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GO="$(GO)" scripts/gotool.sh $(TOOLS)/protoc-gen-connect-go connectrpc.com/connect/cmd/protoc-gen-connect-go@$(PROTOC_GEN_CONNECT_VERSION)
	cd internal/e2b/envdpb/proto && protoc -I . \
		--plugin=protoc-gen-go=$(TOOLS)/protoc-gen-go --go_out=.. --go_opt=paths=source_relative \
		--plugin=protoc-gen-connect-go=$(TOOLS)/protoc-gen-connect-go --connect-go_out=.. --connect-go_opt=paths=source_relative \
		--go_opt=Mprocess.proto=github.com/sandhold/sandhold/internal/e2b/envdpb/processpb \
		--go_opt=Mfilesystem.proto=github.com/sandhold/sandhold/internal/e2b/envdpb/filesystempb \
		--connect-go_opt=Mprocess.proto=github.com/sandhold/sandhold/internal/e2b/envdpb/processpb \
		--connect-go_opt=Mfilesystem.proto=github.com/sandhold/sandhold/internal/e2b/envdpb/filesystempb \
		process.proto filesystem.proto
	cd internal/e2b/envdpb && mkdir -p processpb filesystempb && mv process.pb.go processpb/ && mv filesystem.pb.go filesystempb/ \
		&& rm -rf processpb/processpbconnect filesystempb/filesystempbconnect \
		&& mv processpbconnect processpb/ && mv filesystempbconnect filesystempb/

## mcp-ts: the official TypeScript MCP SDK for internal/mcp's client test (test/mcp-ts)
.PHONY: mcp-ts
mcp-ts:
	@if command -v npm >/dev/null; then npm ci --prefix test/mcp-ts --no-audit --no-fund; else echo "npm not found: the TypeScript MCP client test will skip"; fi

## helm-check: lint and render the Kubernetes chart (deploy/kubernetes), validate the objects with
## kubeconform (strict) against schemas made offline from a Kubernetes OpenAPI document a Go module ships;
## the Go test there checks the objects
HELM         := $(TOOLS)/helm
HELM_VERSION := v3.22.0
KUBECONFORM         := $(TOOLS)/kubeconform
KUBECONFORM_VERSION := v0.8.0
K8S_SCHEMAS         := $(TOOLS)/k8s-schemas
.PHONY: helm-check
CHART_DIGEST := image.digest=sha256:$(shell printf '0%.0s' $$(seq 64))
helm-check: $(HELM) $(KUBECONFORM) $(K8S_SCHEMAS)
	$(HELM) lint deploy/kubernetes/sandhold --set $(CHART_DIGEST),secret.databaseURL=postgres://db/x,secret.clusterSecret=$$(printf 's%.0s' $$(seq 32)),secret.adminKey=shk_$$(printf 'k%.0s' $$(seq 43))
	$(HELM) lint deploy/kubernetes/sandhold --set $(CHART_DIGEST),mode=single
	$(HELM) template sb deploy/kubernetes/sandhold --set $(CHART_DIGEST),secret.databaseURL=postgres://db/x,secret.clusterSecret=x,secret.adminKey=x >$(TOOLS)/chart.yaml
	$(HELM) template sb deploy/kubernetes/sandhold --set $(CHART_DIGEST),mode=single,ingress.enabled=true,ingress.hosts={sandhold.example},contentDomain=sandbox-content.example,networkPolicy.enabled=true >$(TOOLS)/chart-single.yaml
	$(KUBECONFORM) -strict -summary -schema-location '$(K8S_SCHEMAS)/{{.ResourceKind}}{{.KindSuffix}}.json' $(TOOLS)/chart.yaml $(TOOLS)/chart-single.yaml

$(HELM):
	GO="$(GO)" scripts/gotool.sh $@ helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

$(KUBECONFORM):
	GO="$(GO)" scripts/gotool.sh $@ github.com/yannh/kubeconform/cmd/kubeconform@$(KUBECONFORM_VERSION)

$(K8S_SCHEMAS): deploy/kubernetes/schemagen/main.go
	$(GO) run ./deploy/kubernetes/schemagen -out $@.tmp && rm -rf $@ && mv $@.tmp $@

## image: the container image, built without a Docker daemon: a Debian root made from Debian's
## packages by mmdebstrap (IMAGE_PACKAGES, IMAGE_EXTRA) and bin/sandhold, assembled into two
## layers by go-containerregistry (internal/release/image.go), every time clamped to IMAGE_EPOCH.
## Writes $(IMAGE_DIR)/oci (an OCI layout: push it with crane or skopeo to keep its digest),
## $(IMAGE_DIR)/sandhold-image.tar (docker load) and image.json; prints the digest the Helm chart
## takes (image.digest). docs/kubernetes.md says what the root holds and why.
IMAGE_DIR      ?= bin/image
IMAGE_REF      ?= ghcr.io/sandhold/sandhold:dev
IMAGE_SUITE    ?= bookworm
# a Debian mirror, e.g. a snapshot.debian.org URL to rebuild the root of a past day (default: apt's)
IMAGE_MIRROR   ?=
# what sandboxes can run in a pod: the image's /usr is the "host" template's /usr
IMAGE_PACKAGES ?= bash,ca-certificates,coreutils,curl,e2fsprogs,git,less,nodejs,procps,python3,xz-utils
# more, e.g. IMAGE_EXTRA=chromium,xvfb,x11vnc,fonts-liberation,ffmpeg for the browser and the desktop
IMAGE_EXTRA    ?=
IMAGE_EPOCH    ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_ROOTFS   ?= $(IMAGE_DIR)/rootfs-$(IMAGE_SUITE).tar
.PHONY: image image-rootfs
image: build image-rootfs
	$(RELEASETOOL) image -rootfs $(IMAGE_ROOTFS) -binary $(BIN) -arch $$($(GO) env GOARCH) -epoch $(IMAGE_EPOCH) \
		-version $(VERSION) -commit $(COMMIT) -ref $(IMAGE_REF) -out $(IMAGE_DIR)

## image-rootfs: the Debian root of the image (kept; delete it to rebuild from today's mirror);
## its package versions go to $(IMAGE_DIR)/packages.txt
image-rootfs: $(IMAGE_ROOTFS)
$(IMAGE_ROOTFS):
	@command -v mmdebstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq mmdebstrap; }
	@mkdir -p $(IMAGE_DIR)
	SOURCE_DATE_EPOCH=$(IMAGE_EPOCH) mmdebstrap --variant=minbase --mode=auto --format=tar --skip=output/dev \
		--include=$(IMAGE_PACKAGES)$(if $(IMAGE_EXTRA),$(comma)$(IMAGE_EXTRA)) \
		--customize-hook='chroot "$$1" dpkg-query -W >$(abspath $(IMAGE_DIR))/packages.txt' \
		$(IMAGE_SUITE) $@.tmp $(IMAGE_MIRROR)
	mv $@.tmp $@
comma := ,

# ---------------------------------------------------------------------------
# Release provenance and supply-chain gates (SECURITY.md, "Release and
# supply-chain gates"; docs/releases.md). Tools are installed
# into .tools on first use from the Go module proxy, at pinned versions.
CYCLONEDX_VERSION   := v1.10.0
GITLEAKS_VERSION    := v8.30.1
GOVULNCHECK_VERSION := v1.9.0
# The Go vulnerability database as a Go module (data/osv), indexed locally.
VULNDB_VERSION      := v0.0.0-20261105234957-e22db6528018
CYCLONEDX   := $(TOOLS)/cyclonedx-gomod
GITLEAKS    := $(TOOLS)/gitleaks
GOVULNCHECK := $(GOTOOLS)/govulncheck
DIST           ?= dist
RELEASE_KEY    ?= $(HOME)/.config/sandhold/release-signing-key
RELEASE_PUBKEY ?= $(RELEASE_KEY).pub
FUZZTIME       ?= 3s
FUZZTIME_LONG  ?= 2m
RELEASETOOL := $(GO) run ./internal/release/releasetool

.PHONY: gates tools release verify-release release-key secrets licenses vuln fuzz fuzz-short

## gates: secrets scan, license allow list, reachable known vulnerabilities,
## every fuzz target briefly (the gosec-suppression and dependency-budget gates
## are tests in internal/gates)
gates: secrets licenses vuln fuzz-short

tools: $(CYCLONEDX) $(GITLEAKS) $(GOVULNCHECK)

$(CYCLONEDX):
	GO="$(GO)" scripts/gotool.sh $@ github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_VERSION)

$(GITLEAKS):
	GO="$(GO)" scripts/gotool.sh $@ github.com/zricethezav/gitleaks/v8@$(GITLEAKS_VERSION)

$(GOVULNCHECK):
	GO="$(GO)" scripts/gotool.sh $@ golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION)

## release: static linux/amd64+arm64 binaries (web console embedded, built
## offline from the npm cache: run `make console` once to fill it), source
## archive, SBOMs (CycloneDX, SPDX), provenance, SHA256SUMS signed with
## RELEASE_KEY, in dist/; with the container image of the amd64 binary
## (its OCI archive, its digest in the provenance) once `make image-rootfs` made a root
release: $(CYCLONEDX) $(RELEASE_KEY)
	$(RELEASETOOL) make -out $(DIST) -key $(RELEASE_KEY) -cyclonedx $(CYCLONEDX) $(if $(RELEASE_VERSION),-version $(RELEASE_VERSION)) \
		$(if $(wildcard $(IMAGE_ROOTFS)),-image-rootfs $(IMAGE_ROOTFS))

## verify-release: sums, signature (RELEASE_PUBKEY), SBOMs against the
## binaries, the commit stamp and the source digest
verify-release:
	$(RELEASETOOL) verify -dir $(DIST) -pubkey $(RELEASE_PUBKEY) -repo . $(if $(EXPECT_COMMIT),-commit $(EXPECT_COMMIT))

## release-key: an ed25519 signing key for releases (kept outside the tree)
release-key: $(RELEASE_KEY)

$(RELEASE_KEY):
	@mkdir -p $(dir $(RELEASE_KEY)) && chmod 700 $(dir $(RELEASE_KEY))
	ssh-keygen -q -t ed25519 -N '' -C sandhold-release -f $(RELEASE_KEY)
	@echo "NEW RELEASE SIGNING KEY: $(RELEASE_KEY) (private, keep it safe)"
	@echo "publish its public half through a channel users trust: $(RELEASE_PUBKEY)"

## secrets: gitleaks over the working tree (.gitleaks.toml lists the reviewed fixtures)
secrets: $(GITLEAKS)
	$(GITLEAKS) dir --no-banner --redact --exit-code 1 --config .gitleaks.toml .

## licenses: licenses of every module linked into the server against the allow list
licenses: $(CYCLONEDX)
	$(RELEASETOOL) licenses -cyclonedx $(CYCLONEDX)

## vuln: govulncheck against a local database built from the golang.org/x/vulndb module
## (indexed once per machine into VULNDB_CACHE, default ~/.cache/sandhold); part
## of make test: a reachable vulnerability fails it (exit 3), and so does a
## database that cannot be fetched (NOT RUN, exit 2)
vuln: $(GOVULNCHECK)
	GO="$(GO)" VULNDB_VERSION=$(VULNDB_VERSION) GOVULNCHECK=$(GOVULNCHECK) scripts/vuln.sh

## fuzz-short: every fuzz target for FUZZTIME (part of make test)
fuzz-short:
	GO="$(GO)" scripts/fuzz.sh $(FUZZTIME)

## fuzz: every fuzz target for FUZZTIME_LONG; crashers land in testdata/fuzz: commit them
fuzz:
	GO="$(GO)" scripts/fuzz.sh $(FUZZTIME_LONG)
