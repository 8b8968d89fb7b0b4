# Every target installs what it needs: a fresh clone needs nothing but `make` and python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
export MCP_MEDIA_HOME ?= $(CURDIR)/.home

.PHONY: install run test test-faults test-unit soak fuzz lint format bench models clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all]'
	touch $(STAMP)

models: $(STAMP)
	$(BIN)/mcp-media models prepare

run: $(STAMP)
	$(BIN)/mcp-media demo

test: $(STAMP)
	$(BIN)/python -m pytest -m "not faults"

test-faults: $(STAMP)
	$(BIN)/python -m pytest -m faults tests/faults

# The fault scenarios in sequence on one cluster, ROUNDS rounds, a CPU burner on every core.
ROUNDS ?= 10
soak: $(STAMP)
	$(BIN)/python -m tests.faults.soak --rounds $(ROUNDS)

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

bench: $(BENCH_STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
