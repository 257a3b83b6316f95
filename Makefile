# Two commands for a fresh machine (Python 3.11 to 3.13):
#   make book   set up .venv, build the book, print the page to open
#   make test   set up .venv, run every test (unit, distributed, notebooks,
#               book build, contracts, site in headless Chromium)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: book test check colab-check bench clean wheelhouse course lint unit labs site gpu-check

$(VENV)/.installed: requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] <= (3, 13) else "Python 3.11 to 3.13 is needed; set PYTHON=python3.11 (or 3.12, 3.13)")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

# The labs run two at a time into a cache first (scripts/execute_labs.py); the
# build takes their outputs from it and executes every chapter as usual.
LABS_CACHE := _build/.labs_cache
book: $(VENV)/.installed
	rm -rf _build
	$(BIN)/python scripts/execute_labs.py --cache $(LABS_CACHE) --jobs 2
	CLUSTERLAB_EXECUTION_CACHE=$(CURDIR)/$(LABS_CACHE) $(BIN)/jupyter-book build . -W -n --keep-going
	@echo
	@echo "The book is built. Open this file in a browser:"
	@echo "    $(CURDIR)/_build/html/index.html"

# One pytest-xdist worker per core; the labs and the book build stay together
# in one worker, in that order, and the site tests go out last, in parts that
# read the published book (conftest.py). Then the tests that time this machine
# (marked timing) run alone, with no other test beside them.
test: $(VENV)/.installed
	$(BIN)/python -m pytest -n logical --dist loadfile -m "not timing"
	$(BIN)/python -m pytest -m timing

# Before a commit: lint, the unit tests and the contract tests. No ranks, no
# kernels, no browser (tests/unit/conftest.py refuses a test that starts ranks).
CHECK_TESTS := tests/unit tests/test_book_contract.py tests/test_lab_anatomy.py \
	tests/test_course.py tests/test_parallel_run.py
check: lint
	$(BIN)/python -m pytest -n logical $(CHECK_TESTS)

bench: $(VENV)/.installed
	$(BIN)/python scripts/benchmark.py

# The book's measurements on this machine's GPUs (matmul, bandwidth, memory
# model, NCCL, tests/gpu, every lab, serving), with provenance, in a few
# minutes; on a CPU it says what it skips. Results: _build/gpu_check/.
gpu-check: $(VENV)/.installed
	$(BIN)/python scripts/gpu_check.py

# For a workshop with no network: every package the labs need, in wheelhouse/
# (the editable line of requirements.txt is left out: it is this folder).
wheelhouse: $(VENV)/.installed
	grep -v '^-e' requirements.txt > $(VENV)/pins.txt
	$(BIN)/pip download --quiet -d wheelhouse -r $(VENV)/pins.txt setuptools

# The course kit: a student edition (answers removed) and an instructor edition
# (answers filled in) of every lab, in _build/course/student and .../instructor.
course: $(VENV)/.installed
	rm -rf _build/course
	$(BIN)/python -m clusterlab.course --labs labs --out _build/course

# ruff's lint and format checks (the paths of tests/test_lint.py), and no
# notebook committed with outputs (the same check as the pre-commit hook).
LINT_PATHS := src tests scripts _ext labs conftest.py
lint: $(VENV)/.installed
	$(BIN)/python -m ruff check --no-cache $(LINT_PATHS)
	$(BIN)/python -m ruff format --check --no-cache $(LINT_PATHS)
	$(BIN)/python scripts/check_notebooks_stripped.py

# The package's unit tests: no ranks (tests/unit/conftest.py), no kernels.
unit: $(VENV)/.installed
	$(BIN)/python -m pytest -n logical tests/unit

# Every lab, executed cell by cell (nbval, at SMOKE size).
labs: $(VENV)/.installed
	$(BIN)/python -m pytest labs

# The built site in headless Chromium, offline. It builds the book first, unless
# SITE names a build already made: make book && make site SITE=_build/html
site: $(VENV)/.installed
	CLUSTERLAB_SITE="$(SITE)" $(BIN)/python -m pytest tests/test_site.py

# Before each release: every lab on Colab's versions (Python 3.13, torch 2.11),
# the package installed from its wheel (CONTRIBUTING.md). About 3 GB of wheels.
colab-check:
	$(PYTHON) scripts/colab_check.py

clean:
	rm -rf _build .pytest_cache
