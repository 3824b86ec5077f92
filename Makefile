# One-command set-up: every target creates .venv and installs what it needs (Python packages, torch's
# CPU wheel for the capture tests, Chromium for SVG export) on a fresh Debian machine.
PYTHON ?= python3
# pytest-xdist workers for `make test`: one per core. The suite keeps the cores busy (97 % here),
# and a third worker on 2 cores made the same tests take 15 % more CPU (613 against 533-549 CPU
# seconds, 5:08 against 4:35-4:43 of pytest on 2 cores, 2026-11-27); when the tests still waited on
# servers and browsers, one more worker than cores was faster (4:30 against 5:43, earlier).
TEST_WORKERS ?= $(shell nproc)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test browser lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# uv resolves and installs the same versions as pip in a few seconds (pip: about 30 s); pip
	# installs them when uv cannot be had or cannot reach the index
	( $(BIN)/pip install -q uv && $(BIN)/uv pip install -q --python $(BIN)/python -e '.[dev]' ) \
		|| $(BIN)/pip install -q -e '.[dev]'
	$(BIN)/python -m ipykernel install --sys-prefix >/dev/null
	# torch pinned to 2.13.0, the CPU wheel the capture tests use (other specs pull GBs of CUDA wheels);
	# --no-compile: pip would compile all of torch's modules (about 11 of its 16 s here), of which
	# the capture tests import a few hundred, compiled on their first import (about 1.4 s, once)
	$(BIN)/pip install -q --no-compile torch==2.13.0 \
		|| echo "torch==2.13.0 not installable: capture tests will skip"
	touch $(STAMP)

browser:
	@scripts/ensure-chromium.sh

demo: $(STAMP) browser
	$(BIN)/trace-analysis report sample_traces -o report

# The whole suite, one pytest-xdist worker per core, a test module (or a group of modules sharing a
# session resource) per unit of work, the longest first: tests/conftest.py, xdist_unit.
# PYTHONDONTWRITEBYTECODE emptied: with it set, every worker and every CLI subprocess would compile
# the package and rewrite the tests' asserts again (~3 s of collection per worker).
test: $(STAMP) browser
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

lint: $(STAMP)
	$(BIN)/ruff check analysis tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) report
