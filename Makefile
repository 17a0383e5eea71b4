# One entry point for every check; .ci/run calls `make check`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
RUNTIME_STAMP := $(VENV)/.runtime
STAMP := $(VENV)/.installed
CODE := $(wildcard src tests bench)
COVERAGE_FLOOR := 90

.PHONY: install sandbox-deps browser-deps demo check format lint typecheck test bench hooks clean

# The runtime alone (what `make demo` needs); the dev tools come on top for `make check`.
$(RUNTIME_STAMP): pyproject.toml | sandbox-deps
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $(RUNTIME_STAMP)

$(STAMP): $(RUNTIME_STAMP) | browser-deps
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# bubblewrap confines workflow scripts and bash (docs/sandbox.md). Installed where missing when we
# are root with apt; otherwise a note, since sandboxed runs fall back to Landlock.
sandbox-deps:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap) \
	      || echo "note: could not install bubblewrap; sandboxed runs fall back to Landlock"; \
	  else \
	    echo "note: bubblewrap (bwrap) is missing; sandboxed runs fall back to Landlock (Debian: sudo apt-get install bubblewrap)"; \
	  fi; }

# Debian's chromium runs the web console's browser tests (tests/web/test_browser.py, driven by
# Playwright). Installed where missing when we are root with apt; otherwise those tests skip
# locally (and fail under CI, which must run them).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
	      || echo "note: could not install chromium; the browser tests will not run"; \
	  else \
	    echo "note: chromium is missing; the browser tests skip (Debian: sudo apt-get install chromium)"; \
	  fi; }

demo: $(RUNTIME_STAMP)
	$(BIN)/subagents demo

format: $(STAMP)
	$(BIN)/ruff format $(CODE)

lint: $(STAMP)
	$(BIN)/ruff format --check $(CODE)
	$(BIN)/ruff check $(CODE)

typecheck: $(STAMP)
	$(BIN)/pyright

# Coverage of the package in the test process and in the Python subprocesses it starts
# (confined runs, such as the launcher and the workflow guest, are tested by running them and
# are not measured); branch coverage, and the floor only goes up.
test: export COVERAGE_FILE = $(CURDIR)/.coverage
test: $(STAMP)
	$(BIN)/coverage erase
	$(BIN)/coverage run -m pytest
	$(BIN)/coverage combine --quiet
	@total=$$($(BIN)/coverage report --format=total) && echo "coverage: $$total% (floor $(COVERAGE_FLOOR)%)" \
	  && [ "$$total" -ge $(COVERAGE_FLOOR) ]

check: lint typecheck test

bench: $(STAMP)
	$(BIN)/python -m bench

# Git hooks that run the same targets (.pre-commit-config.yaml): lint and typecheck before a
# commit, `make check` before a push.
hooks: $(STAMP)
	$(BIN)/pre-commit install --install-hooks

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
