"""Shared test fixtures.

``run_on_devices``: run a snippet of Python in a fresh process with K JAX host devices (the
device count is fixed when JAX starts, so each count needs its own process) and return the
arrays it saved. Every "1 device == many devices, bit for bit" test goes through it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pytest

import qlib

# Before any test runs JAX: one host device per core and XLA:CPU's larger small-loop threshold,
# as the CLI and the notebook runner set them (test_sequential_loop_compiles_to_one_kernel and
# the multi-device tests rely on them); importing qlib sets nothing.
qlib.configure_xla()

from child_process import child_env  # noqa: E402


@pytest.fixture
def run_on_devices(tmp_path: Path) -> Callable[[int, str], dict[str, np.ndarray]]:
    """``run_on_devices(k, code)``: execute ``code`` with k host devices; return what it saved.

    ``code`` must define a dict ``out`` of arrays; it runs after ``import numpy as np``, and the
    child asserts that JAX really sees k devices. Fails with the child's stderr on error.
    """
    def run(devices: int, code: str) -> dict[str, np.ndarray]:
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


@pytest.fixture(scope="module")
def fresh_cache(tmp_path_factory) -> Iterator[Path]:
    """A module's own empty result cache (QLIB_CACHE), so a study's smoke run computes every point."""
    path = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("QLIB_CACHE", str(path))
        yield path
