"""Run-time switches shared by notebooks, the CLI and the test-suite."""

from __future__ import annotations

import os
from pathlib import Path

import jax

SMOKE_ENV = "QLIB_SMOKE"
SCALE_ENV = "QLIB_SCALE"
ROOT = Path(__file__).resolve().parent.parent


def smoke_mode() -> bool:
    """True when ``QLIB_SMOKE`` is set to a true value: notebooks then use tiny parameters."""
    return os.environ.get(SMOKE_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def scale() -> float:
    """The factor ``QLIB_SCALE`` (set by ``--scale S``) by which the studies multiply every
    full-mode run length: 1 by default; larger on bigger machines. ValueError if not > 0."""
    raw = os.environ.get(SCALE_ENV, "").strip()
    if not raw:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ValueError(f"--scale ({SCALE_ENV}) must be a finite number > 0; got {raw!r}")
    return value


def figures_dir() -> Path:
    """Where figures go: ``$QLIB_FIGURES`` or ``figures/`` at the repository root."""
    d = Path(os.environ.get("QLIB_FIGURES", ROOT / "figures"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def cache_dir() -> Path:
    """Where sweep results are cached: ``$QLIB_CACHE`` or ``.qlib_cache/`` at the repository root."""
    d = Path(os.environ.get("QLIB_CACHE", ROOT / ".qlib_cache"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def enable_compilation_cache(path: str | os.PathLike | None = None) -> Path:
    """Turn on JAX's persistent compilation cache, so reruns skip XLA compiles."""
    p = Path(path) if path is not None else cache_dir() / "jax"
    p.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(p))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    return p
