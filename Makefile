# ContextOS ledger. `make help` lists the targets.
# The patched toolchain; the go command fetches it from the module proxy.
export GOTOOLCHAIN ?= go1.27.3
GO        ?= go
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(shell $(GO) env GOPATH)/bin/staticcheck
BIN       := bin
FUZZTIME  ?= 5s

.PHONY: help build test test-short test-clients verify fuzz-smoke bench bench-postgres demo demo-clients demo-mcp chaos clean tools

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build contextosd, ctx and the demo provider into bin/
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/...

test: ## all tests with the race detector (real embedded NATS, real processes), then the client suites
	$(GO) test -race -count=1 -timeout 20m ./...
	$(GO) test -count=1 -run '^$$' -bench . -benchtime 1x ./... > /dev/null
	$(MAKE) test-clients

# Debian's interpreter, which sees Debian's python3-pytest (a pyenv python3
# on PATH does not).
PYTHON ?= /usr/bin/python3

test-clients: build ## the Python and TypeScript client suites against a real contextosd (.ci/run installs pytest and the npm packages)
	cd clients/python && $(PYTHON) -m mypy --strict --no-incremental contextos_ledger && CONTEXTOS_BIN=$(CURDIR)/$(BIN) $(PYTHON) -m pytest -q -p no:cacheprovider
	cd clients/typescript && { [ -d node_modules ] || npm ci --no-audit --no-fund; } && CONTEXTOS_BIN=$(CURDIR)/$(BIN) npm test

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

demo-clients: build ## an agent on the Python client races one on the Go client; a TypeScript agent meets each status
	cd clients/typescript && { [ -d node_modules ] || npm ci --no-audit --no-fund; } && npm run build
	cd examples/ts-agent && npm run build
	$(GO) run ./examples/python-agent/race --bin $(BIN) --python $(PYTHON)

demo-mcp: build ## the shared-refund race over MCP: scripted MCP agents, an MCP server as the provider
	$(GO) run ./examples/mcp-agent --bin $(BIN)

clean:
	rm -rf $(BIN)

.PHONY: chaos-short fuzz

chaos: ## long chaos run: 3 contextosd vs one nats-server, then vs a 3-node R3 cluster, with faults; prints the tables, fails on any violation
	CHAOS_LONG=1 $(GO) test -count=1 -v -run '^TestChaos$$' -timeout 60m ./internal/chaos/

chaos-short: ## the short chaos run CI does inside `make test` (about 3 minutes)
	$(GO) test -count=1 -v -run '^TestChaos$$' -timeout 15m ./internal/chaos/

# fuzz runs every fuzz target of FUZZ_PKGS for FUZZTIME each (30s unless
# FUZZTIME is given on the command line or in the environment) and prints
# the executions and the result of each; a finding is kept by go test in the
# package's testdata/fuzz/<FuzzName>/ and fails the target.
FUZZ_PKGS ?= ./gateway ./events/codec ./kernel ./verifier ./mcpgw
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
