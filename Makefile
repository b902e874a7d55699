# make lint     — ruff over qlib, tests and benchmarks (make test runs it first).
# make test     — set up (a .venv unless an environment is active), lint and run the test-suite,
#                 which executes every notebook in smoke mode (about 8.4 min from a fresh clone on
#                 a 2-core machine, setup included; largest process 4.0 GB, 2026-12-06: docs/testing.md).
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
# make book     — optional: the static site (Sphinx + myst-nb) of the stored notebooks, claims table,
#                 docs and API reference -> build/book/html, nothing executed; installs
#                 requirements-book.lock on top of make setup's (docs/running.md#the-book).
# make book-test — the built site in headless Chromium: every image loaded, no internal link 404,
#                 screenshots at 1280 px (browser-screenshots/book/).

ACTIVE := $(or $(VIRTUAL_ENV),$(CONDA_PREFIX))
ifeq ($(ACTIVE),)
VENV := .venv
PY := $(VENV)/bin/python
else
PY := python
endif
STAMP := $(if $(VENV),$(VENV),.)/.qlib-installed

.PHONY: lock lock-book book book-test setup lint test test-quick validate mutants figures results-long bench bench-quick browser-test claims clean lab

# The install: exactly the lock (requirements.lock: every package, its version and its hashes, for
# Python 3.11 on Linux; docs/running.md), then qlib itself, editable, with no dependency resolved
# anew. uv where it installs (parallel downloads and unpacking: ~25 s from nothing on the 2-core
# machine, against ~50 s for pip), else pip; uv's own version is the lock's. In .venv the install is
# a sync (nothing but the lock); in an active environment (conda, a venv of yours) it only adds.
# Installed files are byte-compiled: this machine sets PYTHONDONTWRITEBYTECODE, so every process of
# the test-suite would compile them again.
LOCK := requirements.lock
UV_PIN := $(shell grep -o '^uv==[^ ]*' $(LOCK))
UV_INSTALL := $(if $(VENV),sync,install -r)

$(STAMP): pyproject.toml $(LOCK)
	@if [ -n "$(VENV)" ] && [ ! -x "$(PY)" ]; then python3 -m venv $(VENV); fi
	@$(PY) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || \
	  echo "warning: requirements.lock is for Python 3.11, this is $$($(PY) -V): pip may refuse a locked version"
	@if $(PY) -m pip install -q '$(UV_PIN)' 2>/dev/null && \
	    $(PY) -m uv pip $(UV_INSTALL) -q --compile-bytecode --python $(PY) --require-hashes $(LOCK) && \
	    $(PY) -m uv pip install -q --compile-bytecode --python $(PY) --no-deps --no-build-isolation -e .; then \
	  echo "installed requirements.lock with uv"; \
	else \
	  $(PY) -m pip install -q --require-hashes -r $(LOCK) && \
	  $(PY) -m pip install -q --no-deps --no-build-isolation -e . && echo "installed requirements.lock with pip"; \
	fi
	@touch $(STAMP)

setup: $(STAMP)

# two workers (one per core of the 2-core reference machine; each worker's JAX uses both cores'
# host devices when the other is idle), one test file per worker at a time: a module fixture is set
# up once (--dist loadgroup interleaves files and builds a module fixture again: 7.3 min against 6.9)
JOBS ?= 2

# the linter (ruff, configured in pyproject.toml), run first by make test
lint: setup
	$(PY) -m ruff check qlib tests benchmarks book

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
	$(PY) tests/browser/run_browser_test.py $(BROWSER_ARGS)

# make lock — refresh requirements.lock on purpose (the newest versions the registry serves for the
#                 pins of pyproject.toml): commit it alone, then run make figures (docs/running.md).
lock: setup
	printf 'uv\n' | $(PY) -m uv pip compile pyproject.toml - --extra test --extra bench --extra browser \
	  --python-version 3.11 --generate-hashes --upgrade --custom-compile-command 'make lock' -o $(LOCK)

# The book's packages (Sphinx, myst-nb, sphinx-book-theme, MathJax) are pinned apart, in
# requirements-book.lock, constrained to requirements.lock's versions of everything they share: the
# stored results name the hash of requirements.lock (docs/running.md#the-lock), which the book must
# not change. Installed on top of make setup's environment, never by make setup itself. In .venv a
# later sync of requirements.lock removes them; the stamp then follows $(STAMP) and they come back.
BOOK_LOCK := requirements-book.lock
BOOK_STAMP := $(if $(VENV),$(VENV),.)/.qlib-book-installed

$(BOOK_STAMP): $(STAMP) $(BOOK_LOCK)
	@$(PY) -m uv pip install -q --compile-bytecode --python $(PY) --require-hashes -r $(BOOK_LOCK) || \
	  $(PY) -m pip install -q --require-hashes -r $(BOOK_LOCK)
	@touch $(BOOK_STAMP)

book: $(BOOK_STAMP)
	$(PY) book/build.py

book-test: book
	$(PY) tests/browser/run_book_test.py $(BROWSER_ARGS)

# make lock-book — refresh requirements-book.lock on purpose (the book extra's newest versions that
#                 agree with requirements.lock); requirements.lock is untouched.
lock-book: setup
	$(PY) -m uv pip compile pyproject.toml --extra book -c $(LOCK) \
	  --python-version 3.11 --generate-hashes --upgrade --custom-compile-command 'make lock-book' -o $(BOOK_LOCK)

clean:
	rm -rf .qlib_cache .pytest_cache build/book

bench-quick: setup
	$(PY) benchmarks/run.py --quick

# make lab — JupyterLab at the repository root, the notebooks/*.md opening as notebooks
# (the project's Jupyter config in .jupyter/ adds to the user's own: docs/notebooks.md).
lab: setup
	JUPYTER_CONFIG_PATH="$(CURDIR)/.jupyter$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
	  $(PY) -m jupyter lab --ServerApp.root_dir="$(CURDIR)" $(if $(filter 0,$(shell id -u)),--allow-root)
