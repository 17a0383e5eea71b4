# One entry point for every check; .ci/run calls `make check`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CODE := $(wildcard src tests examples bench)

.PHONY: install demo check format lint typecheck test bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/subagents demo

format: $(STAMP)
	$(BIN)/ruff format $(CODE)

lint: $(STAMP)
	$(BIN)/ruff format --check $(CODE)
	$(BIN)/ruff check $(CODE)

typecheck: $(STAMP)
	$(BIN)/pyright

test: $(STAMP)
	$(BIN)/pytest

check: lint typecheck test

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
