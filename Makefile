# ContextOS ledger. `make help` lists the targets.
# The patched toolchain; the go command fetches it from the module proxy.
export GOTOOLCHAIN ?= go1.27.3
GO        ?= go
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(shell $(GO) env GOPATH)/bin/staticcheck
BIN       := bin
FUZZTIME  ?= 5s

.PHONY: help build test test-sim test-short test-clients packages install-packages verify fuzz-smoke bench bench-postgres demo demo-clients demo-frameworks demo-mcp chaos clean tools vuln static release

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build contextosd, ctx and the demo provider into bin/
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/...

test: ## all tests with the race detector (real embedded NATS, real processes), then the client suites
	$(GO) test -race -count=1 -timeout 20m ./...
	$(GO) test -count=1 -run '^$$' -bench . -benchtime 1x ./... > /dev/null
	$(GO) test -count=1 -run '^TestTenantIsolationUnderFlood$$' ./daemon # its latency bar holds without -race
	$(MAKE) test-sim
	$(MAKE) test-clients

test-sim: ## the deterministic simulation at its full seed count (10,000; -race runs fewer), with the count and time it took
	@out=$$(mktemp); $(GO) test -count=1 -timeout 15m -run '^TestSimulation$$' -v ./internal/testing/sim > $$out 2>&1; rc=$$?; \
	grep -E '^(--- |ok|FAIL)|seeds in' $$out; [ $$rc -eq 0 ] || tail -60 $$out; rm -f $$out; exit $$rc

# The Python client's tools and dependencies live in a virtualenv made from
# clients/python/requirements-dev.txt and, for the framework adapters,
# requirements-frameworks.txt (every package pinned), with this interpreter.
PYTHON  ?= python3
PY_VENV := clients/python/.venv
PY      := $(abspath $(PY_VENV))/bin/python
PY_REQS := clients/python/requirements-dev.txt clients/python/requirements-frameworks.txt

$(PY_VENV)/.installed: $(PY_REQS)
	rm -rf $(PY_VENV) && $(PYTHON) -m venv $(PY_VENV)
	$(PY) -m pip install -q --no-input $(addprefix -r ,$(PY_REQS))
	touch $@

clients/typescript/node_modules/.package-lock.json: clients/typescript/package-lock.json
	cd clients/typescript && npm ci --no-audit --no-fund

test-clients: build $(PY_VENV)/.installed clients/typescript/node_modules/.package-lock.json ## the Python and TypeScript client suites against a real contextosd and a TLS-only nats-server (cmd/tlsenv)
	cd clients/python && $(PY) -m mypy --strict --no-incremental contextos_ledger && $(PY) -m ruff check . && CONTEXTOS_BIN=$(CURDIR)/$(BIN) $(PY) -m pytest -q -p no:cacheprovider
	cd examples/frameworks && MYPYPATH=$(CURDIR)/clients/python $(PY) -m mypy --strict --no-incremental --cache-dir=/dev/null *.py && $(PY) -m ruff check --no-cache --config $(CURDIR)/clients/python/pyproject.toml .
	cd clients/typescript && CONTEXTOS_BIN=$(CURDIR)/$(BIN) npm test

# The client packages carry the daemon's release version (VERSION without
# its v); a build that is not a release gets 0.0.0.dev0 (Python) and
# 0.0.0-dev (npm). They are built from copies stamped with it, so the tree
# is left as it is.
PKG_DIR     := $(BIN)/packages
PKG_RELEASE  = $(shell echo '$(VERSION)' | sed -n 's/^v\([0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*\)$$/\1/p')
PY_PKG_VERSION  = $(or $(PKG_RELEASE),0.0.0.dev0)
NPM_PKG_VERSION = $(or $(PKG_RELEASE),0.0.0-dev)

packages: $(PY_VENV)/.installed clients/typescript/node_modules/.package-lock.json ## the Python wheel and sdist (python -m build) and the npm tarball (npm pack) in bin/packages, at the daemon's version
	@rm -rf $(PKG_DIR) && mkdir -p $(PKG_DIR)/src
	tar -C clients --exclude=.venv --exclude=node_modules --exclude=dist --exclude=__pycache__ --exclude=.mypy_cache -cf - python typescript | tar -C $(PKG_DIR)/src -xf -
	printf '"""The package\x27s version, stamped by make packages."""\n\n__version__ = "%s"\n' '$(PY_PKG_VERSION)' > $(PKG_DIR)/src/python/contextos_ledger/_version.py
	$(PY) -m build -q --outdir $(abspath $(PKG_DIR)) $(PKG_DIR)/src/python
	cd $(PKG_DIR)/src/typescript && ln -s $(CURDIR)/clients/typescript/node_modules node_modules && \
		npm version --no-git-tag-version --allow-same-version $(NPM_PKG_VERSION) > /dev/null && \
		npm pack --silent --pack-destination $(abspath $(PKG_DIR)) > /dev/null
	@ls -1 $(PKG_DIR) | grep -v '^src$$'

# install-packages installs the built packages as a user would: the wheel
# into a new virtualenv (the dependency versions held to
# requirements-dev.txt's), with the extras of the framework adapters (held
# to requirements-frameworks.txt's), the tarball into a new folder with the
# TypeScript agent; the demos then run against these, not the sources.
install-packages: packages
	rm -rf $(PKG_DIR)/venv $(PKG_DIR)/ts-agent && $(PYTHON) -m venv $(PKG_DIR)/venv
	$(PKG_DIR)/venv/bin/pip install -q --no-input $(addprefix -c ,$(PY_REQS)) '$(PKG_DIR)/contextos_ledger-$(PY_PKG_VERSION)-py3-none-any.whl[openai-agents,langgraph,mcp]'
	cd / && $(abspath $(PKG_DIR))/venv/bin/python -c 'import contextos_ledger as l, sys; v = "$(PY_PKG_VERSION)"; \
		assert l.__version__ == v and "/venv/" in l.__file__, (l.__version__, l.__file__); print("installed contextos_ledger", v, "at", l.__file__)'
	mkdir -p $(PKG_DIR)/ts-agent && cp examples/ts-agent/agent.ts examples/ts-agent/tsconfig.json $(PKG_DIR)/ts-agent/
	cd $(PKG_DIR)/ts-agent && printf '{"name":"ts-agent","private":true,"type":"module"}\n' > package.json && \
		npm install --no-audit --no-fund --silent ../contextos-ledger-$(NPM_PKG_VERSION).tgz typescript@5.9.3 @types/node@20.19.43 && \
		node -e 'const v=require("./node_modules/contextos-ledger/package.json").version; if (v !== "$(NPM_PKG_VERSION)") throw new Error(v); console.log("installed contextos-ledger", v)' && \
		npx tsc -p .

test-short: ## quick tests without the race detector
	$(GO) test -short -count=1 ./...

$(STATICCHECK):
	$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

tools: $(STATICCHECK) ## install pinned tools

verify: $(STATICCHECK) ## gofmt, go vet, staticcheck, go mod tidy leaves no diff
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	@cp go.mod /tmp/go.mod.verify && cp go.sum /tmp/go.sum.verify
	$(GO) mod tidy
	@if ! diff -q go.mod /tmp/go.mod.verify >/dev/null || ! diff -q go.sum /tmp/go.sum.verify >/dev/null; then \
		echo "go mod tidy changed go.mod/go.sum"; cp /tmp/go.mod.verify go.mod; cp /tmp/go.sum.verify go.sum; exit 1; fi

fuzz-smoke: ## run every fuzz target for $(FUZZTIME)
	@for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 1s $$pkg || exit 1; \
		done; \
	done

bench: ## comparative benchmarks (JetStream, engine, gateway, PostgreSQL peer): writes BENCHMARKS.md and docs/benchmarks.png
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || $(MAKE) bench-postgres
	$(GO) run ./cmd/bench -out BENCHMARKS.md -chart docs/benchmarks.png $(BENCHFLAGS)

bench-postgres: # PostgreSQL from Debian's packages for the bench's peer (needs root)
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql

demo: build ## the shared-refund race on the embedded default, end to end
	$(GO) run ./examples/shared-guarantees --bin $(BIN)

# The clients' stories run the agents from the installed packages (the wheel
# with its framework extras, the npm tarball), never from the sources.
RACE := $(GO) run ./examples/python-agent/race --bin $(BIN) --python $(PKG_DIR)/venv/bin/python

demo-clients: build install-packages ## the built packages installed, then an agent on the Python client races one on the Go client; a TypeScript agent meets each status; then the framework agents (demo-frameworks)
	$(RACE) --ts-agent $(PKG_DIR)/ts-agent/agent.js
	$(RACE) --frameworks examples/frameworks

demo-frameworks: build install-packages ## the framework agents of examples/frameworks (OpenAI Agents SDK, LangGraph, MCP SDK) meet each status and refusal, from the installed wheel
	$(RACE) --frameworks examples/frameworks

demo-mcp: build ## the shared-refund race over MCP: scripted MCP agents, an MCP server as the provider
	$(GO) run ./examples/mcp-agent --bin $(BIN)

clean:
	rm -rf $(BIN)

# static and release: contextosd and ctx with no C dependency (CGO_ENABLED=0),
# no local paths (-trimpath), stripped (-s -w), and the release version stamped
# into internal/version (what --version prints). deploy/Dockerfile runs
# `make static`, so the image holds exactly these binaries.
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS    := -s -w -X github.com/contextos/ledger/internal/version.Version=$(VERSION)
STATIC_DIR ?= $(BIN)/static
RELEASE_DIR ?= $(BIN)/release
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64

static: ## contextosd and ctx as static, trimmed, stripped binaries in $(STATIC_DIR) (what deploy/Dockerfile builds)
	@mkdir -p $(STATIC_DIR)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(STATIC_DIR)/ ./cmd/contextosd ./cmd/ctx

release: ## a .tar.gz of contextosd and ctx per platform of RELEASE_PLATFORMS, and SHA256SUMS, in $(RELEASE_DIR)
	@rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR)
	@set -e; for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; name=contextos-$(VERSION)-$$os-$$arch; dir=$(RELEASE_DIR)/$$name; \
		GOOS=$$os GOARCH=$$arch $(MAKE) --no-print-directory static STATIC_DIR=$$dir VERSION=$(VERSION); \
		cp README.md docs/config.md docs/operations.md deploy/systemd/contextosd.service $$dir/; \
		tar -C $(RELEASE_DIR) --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -czf $(RELEASE_DIR)/$$name.tar.gz $$name; \
		rm -rf $$dir; \
	done
	cd $(RELEASE_DIR) && sha256sum *.tar.gz > SHA256SUMS && cat SHA256SUMS

# vuln: govulncheck against a local copy of the Go vulnerability database.
# The database is the module golang.org/x/vulndb (its data/osv/*.json), fetched
# through the module proxy at a pinned version and indexed by its own
# cmd/indexdb into the layout `-db file://` reads (index/db.json,
# index/modules.json, index/vulns.json, ID/<id>.json); govulncheck then
# contacts nothing. Bump VULNDB_VERSION to a newer pseudo-version to refresh.
GOVULNCHECK_VERSION := v1.9.0
VULNDB_VERSION      := v0.0.0-20261105234957-e22db6528018
GOVULNCHECK := $(abspath $(BIN))/tools/govulncheck@$(GOVULNCHECK_VERSION)/govulncheck
VULNDB      := $(abspath $(BIN))/vulndb@$(VULNDB_VERSION)
VULN_PKGS   ?= ./cmd/contextosd ./cmd/ctx

$(GOVULNCHECK):
	GOBIN=$(dir $(GOVULNCHECK)) $(GO) install golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION)

$(VULNDB)/index/db.json:
	@rm -rf $(VULNDB) $(VULNDB).tmp
	@src=$$(cd / && $(GO) mod download -json golang.org/x/vulndb@$(VULNDB_VERSION) | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p'); \
	if [ -z "$$src" ]; then echo "cannot download golang.org/x/vulndb@$(VULNDB_VERSION)"; exit 1; fi; \
	echo "indexing $$(ls $$src/data/osv | wc -l) reports of $$src/data/osv"; \
	(cd / && $(GO) run golang.org/x/vulndb/cmd/indexdb@$(VULNDB_VERSION) -vulns $$src/data/osv -out $(VULNDB).tmp) && mv $(VULNDB).tmp $(VULNDB)

vuln: $(GOVULNCHECK) $(VULNDB)/index/db.json ## govulncheck (pinned) on contextosd and ctx against a local, pinned vulnerability database; fails on a reachable vulnerability
	@$(GO) version
	$(GOVULNCHECK) -db file://$(VULNDB) $(VULN_PKGS)

.PHONY: chaos-short fuzz

chaos: ## long chaos run: 3 contextosd vs one nats-server, then vs a 3-node R3 cluster, with faults; prints the tables, fails on any violation
	CHAOS_LONG=1 $(GO) test -count=1 -v -run '^TestChaos$$' -timeout 60m ./internal/testing/chaos/

chaos-short: ## the short chaos run CI does inside `make test` (about 4 minutes)
	$(GO) test -count=1 -v -run '^TestChaos$$' -timeout 15m ./internal/testing/chaos/

# fuzz runs every fuzz target of FUZZ_PKGS for FUZZTIME each (30s unless
# FUZZTIME is given on the command line or in the environment) and prints
# the executions and the result of each; a finding is kept by go test in the
# package's testdata/fuzz/<FuzzName>/ and fails the target.
FUZZ_PKGS ?= ./gateway ./config ./events/codec ./kernel ./verifier ./mcpgw ./packet
fuzz: ## each fuzz target for FUZZTIME (default 30s here), with executions and findings
	@t=$(if $(filter command line environment,$(origin FUZZTIME)),$(FUZZTIME),30s); fail=0; summary=""; \
	for pkg in $(FUZZ_PKGS); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "== $$pkg $$f ($$t)"; \
			out=$$($(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $$t -parallel 2 $$pkg 2>&1); rc=$$?; \
			execs=$$(echo "$$out" | grep -o 'execs: [0-9]*' | tail -1 | cut -d' ' -f2); \
			if [ $$rc -eq 0 ]; then res="no findings"; else res="FINDING (see $$pkg/testdata/fuzz/$$f)"; fail=1; echo "$$out" | tail -20; fi; \
			summary="$$summary$$(printf '%-12s %-28s %12s  %s' $$pkg $$f "$${execs:-0}" "$$res")\n"; \
		done; \
	done; \
	printf '\n%-12s %-28s %12s  %s\n' package target executions result; printf "$$summary"; exit $$fail
