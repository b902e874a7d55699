# make lint     — ruff over qlib, tests and benchmarks (make test runs it first).
# make test     — set up (a .venv unless an environment is active), lint and run the test-suite,
#                 which executes every notebook in smoke mode (about 5.2 min from a fresh clone on
#                 a 2-core machine, setup included; largest process under 3 GB: README, Tests).
# make test-quick — the same without the slow tests (notebook execution): the quick local loop.
# make validate — the heavy validations (exact n = 10, long simulations against published
#                 numbers): pytest -m validation.
# make mutants  — the mutation check: named one-line mutants of the kernels, each must fail
#                 the tests (tests/mutants/run.py).
# make figures  — set up and run the main job: every notebook in full mode -> figures/,
#                 and the claims table -> figures/claims.md; recomputes results/default/ and
#                 compares it with the stored entries ("reproduced N of N"; docs/running.md).
# make results-long — the long tier -> results/long/ (the studies' long points; resumable: rerun after a kill;
#                 PROCESSES=N local processes, ONLY=name a study, SCALE=S).
# make bench    — the benchmark suite -> benchmarks/README.md tables and plots.
# make browser-test — JupyterLab in headless Chromium on the repository: Run All of each notebook
#                 (timed), every slider's key-press-to-redraw latency, git status unchanged, the
#                 rendered claims.md and README within 1000 px (report: browser-screenshots/).

ACTIVE := $(or $(VIRTUAL_ENV),$(CONDA_PREFIX))
ifeq ($(ACTIVE),)
VENV := .venv
PY := $(VENV)/bin/python
else
PY := python
endif
STAMP := $(if $(VENV),$(VENV),.)/.qlib-installed

.PHONY: setup lint test test-quick validate mutants figures results-long bench bench-quick browser-test claims clean lab

# The install: uv where it installs (parallel downloads and unpacking: ~25 s from nothing on the
# 2-core machine, against ~50 s for pip), else pip (>= 21.3 for an editable install from
# pyproject.toml). Installed files are byte-compiled either way: this machine sets
# PYTHONDONTWRITEBYTECODE, so every process of the test-suite would compile them again.
$(STAMP): pyproject.toml
	@if [ -n "$(VENV)" ] && [ ! -x "$(PY)" ]; then python3 -m venv $(VENV); fi
	@if $(PY) -m pip install -q uv 2>/dev/null && \
	    $(PY) -m uv pip install -q --compile-bytecode --python $(PY) -e '.[test,bench]'; then \
	  echo "installed with uv"; \
	else \
	  $(PY) -m pip install -q 'pip>=21.3' && $(PY) -m pip install -q -e '.[test,bench]'; \
	fi
	@touch $(STAMP)

setup: $(STAMP)

# two workers (one per core of the 2-core reference machine; each worker's JAX uses both cores'
# host devices when the other is idle), one test file per worker at a time: a module fixture is set
# up once (--dist loadgroup interleaves files and builds a module fixture again: 7.3 min against 6.9)
JOBS ?= 2

# the linter (ruff, configured in pyproject.toml), run first by make test
lint: setup
	$(PY) -m ruff check qlib tests benchmarks

test: setup lint
	$(PY) -m pytest -n $(JOBS) --dist loadfile --durations=15

test-quick: setup
	$(PY) -m pytest -n $(JOBS) --dist loadfile -m "not slow and not validation"

validate: setup
	$(PY) -m pytest -m validation

mutants: setup
	$(PY) tests/mutants/run.py

figures: setup
	$(PY) -m qlib figures

results-long: setup
	$(PY) -m qlib results-long --scale $(or $(SCALE),1) --processes $(or $(PROCESSES),1) $(if $(ONLY),--only $(ONLY))

claims: setup
	$(PY) -m qlib reproduce

bench: setup
	$(PY) benchmarks/run.py

browser-test: setup
	$(PY) -m pip install -q -e '.[browser]'
	$(PY) tests/browser/run_browser_test.py $(BROWSER_ARGS)

clean:
	rm -rf .qlib_cache .pytest_cache

bench-quick: setup
	$(PY) benchmarks/run.py --quick

# make lab — JupyterLab at the repository root, the notebooks/*.md opening as notebooks
# (the project's Jupyter config in .jupyter/ adds to the user's own: docs/notebooks.md).
lab: setup
	JUPYTER_CONFIG_PATH="$(CURDIR)/.jupyter$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
	  $(PY) -m jupyter lab --ServerApp.root_dir="$(CURDIR)" $(if $(filter 0,$(shell id -u)),--allow-root)
