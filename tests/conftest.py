"""Shared test fixtures.

``run_on_devices``: run a snippet of Python in a fresh process with K JAX host devices (the
device count is fixed when JAX starts, so each count needs its own process) and return the
arrays it saved. Every "1 device == many devices, bit for bit" test goes through it.

Host independence (issue 22): hypothesis runs derandomized (the "qlib" settings profile: the
same examples on every machine and run, no example database), and the memory probe
``qlib._validate.available_memory`` is pinned to 16 GiB in every test, so a test that expects a
run to be refused (or accepted) for its size gives the same verdict whatever the host has free;
a test that needs another amount monkeypatches it itself.

Markers: ``slow`` (notebook execution; in ``make test``, not in ``make test-quick``) and
``validation`` (the heavy validations: exact n = 10, long simulations; ``make validate`` runs
them, ``make test`` deselects them; each has a cheap twin in the quick suite that covers the
same code path).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

import qlib

# Before any test runs JAX: one host device per core and XLA:CPU's larger small-loop threshold,
# as the CLI and the notebook runner set them (test_sequential_loop_compiles_to_one_kernel and
# the multi-device tests rely on them); importing qlib sets nothing.
qlib.configure_xla()

from child_process import child_env  # noqa: E402

settings.register_profile("qlib", derandomize=True, database=None, print_blob=True)
settings.load_profile("qlib")

PINNED_MEMORY = 16 * 2**30


@pytest.fixture(autouse=True)
def _pinned_memory_probe(monkeypatch):
    """Every test sees 16 GiB available, whatever the host has free (see the module docstring)."""
    from qlib import _validate

    monkeypatch.setattr(_validate, "available_memory", lambda: PINNED_MEMORY)


@pytest.fixture
def run_on_devices(tmp_path: Path) -> Callable[[int, str], dict[str, np.ndarray]]:
    """``run_on_devices(k, code)``: execute ``code`` with k host devices; return what it saved.

    ``code`` must define a dict ``out`` of arrays; it runs after ``import numpy as np``, and the
    child asserts that JAX really sees k devices. Fails with the child's stderr on error.

    When this process already has exactly k CPU devices (``make test`` on a 2-core machine: the
    workers have 2), ``code`` runs here, in a namespace of its own: the same devices and XLA flags
    as such a child, without a process start and its imports (and kernels this worker compiled
    already are not compiled again).
    """
    def run(devices: int, code: str) -> dict[str, np.ndarray]:
        import jax

        if jax.default_backend() == "cpu" and jax.device_count() == devices:
            scope: dict = {"np": np}
            exec(compile(textwrap.dedent(code), f"<run_on_devices({devices})>", "exec"), scope)
            return {k: np.asarray(v) for k, v in scope["out"].items()}
        path = tmp_path / f"devices{devices}.npz"
        script = ("import sys\nimport numpy as np\nimport jax\n"
                  f"assert jax.device_count() == {devices}, jax.devices()\n"
                  + textwrap.dedent(code)
                  + "\nnp.savez(sys.argv[1], **{k: np.asarray(v) for k, v in out.items()})\n")
        p = subprocess.run([sys.executable, "-c", script, str(path)], env=child_env(devices),
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr[-4000:]
        with np.load(path) as z:
            return {k: z[k] for k in z.files}

    return run


def _shared_dir(tmp_path_factory, name: str) -> Path:
    """A folder of this test run that every pytest-xdist worker shares (``make test`` runs two):
    the parent of the worker's base temp folder under xdist, the base temp folder otherwise."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    p = base / name
    p.mkdir(exist_ok=True)
    return p


@pytest.fixture(scope="session")
def smoke_cache(tmp_path_factory) -> Path:
    """The run's result cache for the studies' smoke runs, shared by the workers: empty at the
    start of the run (entries are written atomically, so workers may share it)."""
    return _shared_dir(tmp_path_factory, "smoke_cache")


@pytest.fixture(scope="session", autouse=True)
def _compilation_cache(smoke_cache) -> None:
    """JAX's persistent compilation cache in the run's smoke cache (where the notebook kernels
    look for it too): a kernel that one worker, or a notebook, compiled is not compiled again."""
    import qlib.config

    qlib.config.enable_compilation_cache(smoke_cache / "jax")


@pytest.fixture(scope="module")
def fresh_cache(smoke_cache) -> Iterator[Path]:
    """The session's smoke cache (QLIB_CACHE), empty when a study's smoke run first uses it, so the
    study test computes every point; the notebook tests run last (see below) and read the same
    entries instead of computing them a second time (``make test`` stays cheap; the code that
    computes them is run by the study tests)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("QLIB_CACHE", str(smoke_cache))
        yield smoke_cache


def pytest_collection_modifyitems(config, items):
    """Notebook executions last, after the study tests have filled the smoke cache."""
    last = [it for it in items
            if it.nodeid.startswith("tests/test_notebooks.py::test_notebook_runs_in_smoke_mode")]
    if last:
        items[:] = [it for it in items if it not in last] + last


@pytest.fixture
def tiers(tmp_path, monkeypatch):
    """A private cache and results folder; no tier written unless a test says so."""
    from qlib import results
    from qlib.results import pins

    monkeypatch.setenv("QLIB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(results.RESULTS_DIR_ENV, str(tmp_path / "results"))
    for k in (results.WRITE_ENV, results.RUN_ENV, results.LOG_ENV, "QLIB_REFRESH", pins.CODE_ENV):
        monkeypatch.delenv(k, raising=False)
    # the suite runs in a working tree being edited: a run that writes a tier proceeds on it (the
    # refusal and the recorded diff are tested on a throw-away repository, tests/test_pins.py)
    monkeypatch.setenv(pins.ALLOW_DIRTY_ENV, "1")
    return tmp_path / "results"
