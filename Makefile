# Every target builds or refreshes .venv itself, so each works from a fresh clone.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-pure test-unit test-integration test-system check bench bench-full clean

# pip -qq shows errors only, and PYTHONWARNINGS reaches setuptools in pip's build
# environment: installing prints nothing unless it fails (`make demo` shows no warning).
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "installing sagacity and its dev dependencies into $(VENV) (once)"
	@PYTHONWARNINGS=ignore $(PY) -m pip install -qq --upgrade pip
	@PYTHONWARNINGS=ignore $(PY) -m pip install -qq -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(PY) -m sagacity.worker demo

# Everything, in two test processes (pytest-xdist, a file per process at a time): most
# tests wait on Temporal timers, heartbeats and worker processes rather than the CPU.
test: $(STAMP)
	$(PY) -m tests.run -n 2 --dist loadfile

# The tiers (docs/testing.md): pure = values in memory only (no disk, no server, no
# subprocess, no socket; tests/pure/conftest.py fails a test that tries), integration =
# the dev server, PostgreSQL and files, system = faults, deployment, browsers, killed
# processes.
test-pure: $(STAMP)
	$(PY) -m tests.run -q -n 2 tests/pure

test-integration: $(STAMP)
	$(PY) -m tests.run -n 2 --dist loadfile tests/integration

test-system: $(STAMP)
	$(PY) -m tests.run -n 2 --dist loadfile tests/system

# Every test that needs no server, whatever its tier: no Temporal, no PostgreSQL (a test
# that asks for one fails).
test-unit: $(STAMP)
	SAGACITY_NO_SERVERS=1 $(PY) -m tests.run -q -m "not temporal and not postgres"

check: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) -m bench --quick

bench-full: $(STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) .sagacity .pytest_cache .mypy_cache .ruff_cache
