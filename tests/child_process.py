"""The environment of a test's child process (a module, not conftest: conftest names collide).

Imported by ``conftest.run_on_devices`` and ``test_distributed``.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child_env(devices: int) -> dict[str, str]:
    """The environment of a child process with ``devices`` CPU host devices and this checkout's qlib."""
    env = {k: v for k, v in os.environ.items() if k not in ("QLIB_HOST_DEVICES", "XLA_FLAGS")}
    from qlib._xla import flags  # the small-loop threshold too, as in the parent

    env.update(XLA_FLAGS=flags(f"--xla_force_host_platform_device_count={devices}"), JAX_PLATFORMS="cpu",
               PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""))
    return env
