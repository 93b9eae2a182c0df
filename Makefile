# Two commands on a fresh machine: `make dev` (local stack on :3000) and `make test`.
SHELL := /bin/bash
# Python 3.13, found as the layer's build finds it (pyenv's newest 3.13 where pyenv is installed).
include layers/core/python.mk
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: dev test bench fuzz lint smoke clean install matrix console-vendor

$(STAMP): requirements-dev.txt layers/core/requirements.txt clients/python/pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 13), "Python 3.13 is required"'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $(STAMP)

install: $(STAMP)

dev: $(STAMP)
	$(BIN)/python -m local.stack

test: lint matrix
	$(BIN)/python -m pytest

# The MCP conformance matrix's servers (tests/mcp_matrix): the Python SDK 1.x in venvs of their own
# under .cache/, the TypeScript SDK by `npm ci` from its lockfile (node and npm on the machine).
matrix: $(STAMP)
	$(BIN)/python -m tests.mcp_matrix

bench: $(STAMP)
	$(BIN)/python -m bench.run
	$(BIN)/python -m bench.cold_start
	$(BIN)/python -m bench.memory_sections
	$(BIN)/python -m bench.prompt_cache
	-$(BIN)/python -m bench.prompt_cache --held-out
	-$(BIN)/python -m bench.prompt_cache --held-out-2
	-$(BIN)/python -m bench.prompt_cache --audit
	$(BIN)/python -m bench.mcp_tools
	$(BIN)/python -m bench.mcp_matrix
	$(BIN)/python -m bench.mcp_health
	$(BIN)/python -m bench.oauth
	$(BIN)/python -m bench.authorizer
	$(BIN)/python -m bench.mcp_server
	$(BIN)/python -m bench.streaming
	$(BIN)/python -m bench.approvals
	$(BIN)/python -m bench.cli
	$(BIN)/python -m bench.facts
	$(BIN)/python -m bench.secrets
	$(BIN)/python -m bench.extraction
	$(BIN)/python -m bench.hostile_tools
	$(BIN)/python -m bench.tracing
	$(BIN)/python -m bench.limits
	$(BIN)/python -m bench.runs
	$(BIN)/python -m bench.local_scale
	$(BIN)/python -m bench.user_size
	$(BIN)/python -m bench.soak
	$(BIN)/python -m bench.console_load

# The console's Markdown renderer and sanitiser, copied into its static/ (committed) from the versions
# layers/console-vendor/package-lock.json pins; run after changing a version there.
console-vendor:
	cd layers/console-vendor && npm ci --no-audit --no-fund --loglevel=error && npm run vendor

# The schema fuzz of docs/openapi.yaml against the local stack, longer than make test's bounded one:
# thousands of requests, schemathesis's coverage phase, a new seed each run (printed; FUZZ_SEED=...
# replays it); FUZZ_EXAMPLES (per operation, default 50) and FUZZ_SCENARIOS (stateful, 100) scale it.
fuzz: $(STAMP)
	FUZZ_LONG=1 $(BIN)/python -m pytest tests/e2e/test_fuzz_http.py

# A user's first conversation with a running stack, then its clean-up (README, Deploy): smoke/, the
# standard library only, so no venv; the token goes through the environment, not the command line.
smoke:
	@if [ -z "$$URL" ] || [ -z "$$TOKEN" ]; then \
		echo 'usage: make smoke URL=<ApiUrl, or http://127.0.0.1:3000> TOKEN=<an access token, or dev-<user> locally>' >&2; \
		exit 2; \
	fi
	@SMOKE_URL="$$URL" SMOKE_TOKEN="$$TOKEN" $(PYTHON) -m smoke

# ruff (lint and format), mypy --strict on the core (pyproject.toml), cfn-lint on the template.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/cfn-lint template.yaml

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .aws-sam .mypy_cache .ruff_cache
