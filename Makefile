# Two commands do all the set-up: `make run` and `make test` each create .venv and install from pyproject.toml.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
SCENARIO ?= scenarios/crescendo.yaml

.PHONY: install run test lint bench clean

$(BIN)/simrun: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

install: $(BIN)/simrun

run: install
	$(BIN)/simrun $(SCENARIO)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: install lint
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python bench/engine_throughput.py
	$(BIN)/python -m bench.transport_ceiling
	$(BIN)/python -m bench.loadtest_ceiling

clean:
	rm -rf $(VENV) runs .mypy_cache .ruff_cache .pytest_cache
