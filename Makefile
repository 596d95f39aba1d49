# stanaccel: `make demo` runs the quickstart workflow, `make test` the whole test suite (what CI
# runs), `make check` the edit loop's check (lint, the import contract, the tests not marked slow),
# `make docs` the documentation site (docs/_build/html/index.html).
# Each creates the virtual environment (.venv) on first use.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test check docs lint format bench clean

# uv installs in about 15 s what pip installs in 80. --system-certs: it trusts the certificates the
# system trusts (as pip does), not only its own bundle, so it works behind a proxy. Bytecode: Python
# writes the .pyc of each module the first time it imports it, for the few thousand of the 12,000
# installed modules that stanaccel and its tests import (about 13 CPU-s in a process that imports them
# all); compiling them all at install (--compile-bytecode) took 45 CPU-s and 20 s more of the set-up.
# Where PYTHONDONTWRITEBYTECODE is set, Python writes none, so every process (each test worker, each
# subprocess) would compile TensorFlow's and the others' sources again (10 s more per import of
# TensorFlow): there they are all compiled at install.
BYTECODE := $(if $(PYTHONDONTWRITEBYTECODE),--compile-bytecode)
$(STAMP): pyproject.toml
	@command -v g++ >/dev/null || command -v c++ >/dev/null || { \
	  echo "stanaccel needs a C++ compiler to build Stan programs (Debian: apt-get install g++)"; exit 1; }
	@echo "Setting up .venv: stanaccel and its dependencies (over 2.4 GB with TensorFlow, under a minute on first use)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet "uv>=0.13.9"
	$(BIN)/uv pip install --quiet --system-certs $(BYTECODE) --python $(BIN)/python -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/stanaccel run workflows/quickstart.toml

# The report's test drives Debian's headless chromium with Selenium (no browser download).
# STANACCEL_PCH=1: the suite builds some twenty Stan programs, so a precompiled Stan header (built
# once, about 30 s) pays for itself; see stanaccel.stan.compiler's notes.
CHROMIUM_INSTALL := apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium chromium-driver

# On a cold cache the first compile (the header, the bridge, a program: about 90 s on one core)
# starts in the background while the linters run; the tests wait for it. The other bundled programs
# the tests use compile in a second background chain beside it, niced: they take the time a core
# would idle while the workers wait for the bridge (every program's link needs it) or for each other's
# compiles, and a test that needs one finds it built or being built. Warm, each is a cache hit.
# tests/test_docs.py builds the site (warnings as errors) in one worker while the other runs tests.
# OPENBLAS_NUM_THREADS=1: one BLAS thread per test worker. The workers already fill the cores, and
# OpenBLAS's own threads spin waiting for work on the cores the other worker needs: with them the
# warm suite took 807 CPU-s and 429 s against 761 and 406 (tests/tuning/test_bayesopt.py: 31 CPU-s, 11).
TEST_ENV := STANACCEL_PCH=1 OPENBLAS_NUM_THREADS=1
FIRST_BUILT := mvn_mean
PREBUILT := gp_ard logistic logistic_latent pde_surrogate gp_density gp_ard_lowrank
test: $(STAMP)
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  echo "Installing Debian's chromium and chromium-driver for the report's browser test"; \
	  if [ "$$(id -u)" = 0 ]; then sh -c '$(CHROMIUM_INSTALL)'; else sudo sh -c '$(CHROMIUM_INSTALL)'; fi; }
	STANACCEL_PCH=1 $(BIN)/stanaccel compile $(FIRST_BUILT) >/dev/null 2>&1 &
	(for p in $(PREBUILT); do STANACCEL_PCH=1 nice -n 10 $(BIN)/stanaccel compile $$p; done) >/dev/null 2>&1 &
	$(BIN)/ruff check pkg tests benchmarks
	$(BIN)/ruff format --check pkg tests benchmarks
	$(BIN)/lint-imports
	$(TEST_ENV) $(BIN)/python -m pytest -n auto --dist loadfile --durations=20

# The edit loop: everything but the slow tests (@pytest.mark.slow: over 2 s each) and the site's.
check: $(STAMP)
	$(BIN)/ruff check pkg tests benchmarks
	$(BIN)/ruff format --check pkg tests benchmarks
	$(BIN)/lint-imports
	$(TEST_ENV) $(BIN)/python -m pytest -n auto --dist loadfile -q -m "not slow and not docs"

# The documentation site, warnings as errors; -E rereads every page and docstring, so a warning
# of an unchanged page is not hidden by an earlier build (about 20 s).
SPHINX_BUILD = $(BIN)/sphinx-build -E -W --keep-going -q -b html docs docs/_build/html

docs: $(STAMP)
	$(SPHINX_BUILD)
	@echo "Documentation: docs/_build/html/index.html"

# lint-imports: the layers contract in pyproject.toml ([tool.importlinter])
lint: $(STAMP)
	$(BIN)/ruff check pkg tests benchmarks
	$(BIN)/lint-imports

format: $(STAMP)
	$(BIN)/ruff format pkg tests benchmarks
	$(BIN)/ruff check --fix pkg tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/gradient_overhead.py

clean:
	rm -rf $(VENV) output docs/_build docs/api
