# stanaccel: `make demo` runs the quickstart workflow, `make test` the whole test suite.
# Both create the virtual environment (.venv) on first use.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint format bench clean

$(STAMP): pyproject.toml
	@command -v g++ >/dev/null || command -v c++ >/dev/null || { \
	  echo "stanaccel needs a C++ compiler to build Stan programs (Debian: apt-get install g++)"; exit 1; }
	@echo "Setting up .venv: stanaccel and its dependencies (over 2.4 GB with TensorFlow, 1-3 minutes on first use)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/stanaccel run workflows/quickstart.toml

# The report's test drives Debian's headless chromium with Selenium (no browser download).
CHROMIUM_INSTALL := apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium chromium-driver

test: $(STAMP)
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  echo "Installing Debian's chromium and chromium-driver for the report's browser test"; \
	  if [ "$$(id -u)" = 0 ]; then sh -c '$(CHROMIUM_INSTALL)'; else sudo sh -c '$(CHROMIUM_INSTALL)'; fi; }
	$(BIN)/ruff check pkg tests benchmarks
	$(BIN)/ruff format --check pkg tests benchmarks
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -n auto --dist loadfile

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
	rm -rf $(VENV) output
