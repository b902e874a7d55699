"""The run's configuration: one frozen :class:`RunConfig`, and the one place qlib reads the
environment.

A command (``python -m qlib``, in :mod:`qlib.__main__`) builds its ``RunConfig`` once, from its
arguments and the environment (:meth:`RunConfig.from_environ`), and puts it in force with
:func:`using`; what runs inside reads it with :func:`current`. A child process (a notebook kernel, a
process of ``results-long --processes``) gets it through its environment
(:meth:`RunConfig.to_environ`), so a notebook run by hand, a kernel and a test that sets a variable
all read the environment here, when nothing is in force. Only :mod:`qlib._xla` reads variables of its
own (the XLA flags, before JAX starts: they configure the process, not a run).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from pathlib import Path

SMOKE_ENV = "QLIB_SMOKE"
SCALE_ENV = "QLIB_SCALE"
ROOT = Path(__file__).resolve().parent.parent

_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class RunConfig:
    """Every switch of a run, as the environment variable that carries it to a child process.

    Args:
        smoke: ``QLIB_SMOKE``: tiny parameters (the notebooks' smoke mode).
        scale: ``QLIB_SCALE`` as given (``--scale S``; :func:`scale` checks it): the factor on every
            full-mode run length, "" for 1.
        figures: ``QLIB_FIGURES``: where figures go (None: ``figures/``).
        cache: ``QLIB_CACHE``: the sweep cache's folder (None: ``.qlib_cache/``).
        publish: ``QLIB_PUBLISH=1``: a notebook writes its figures to ``figures/``.
        refresh: ``QLIB_REFRESH``: recompute what the caches hold.
        results_dir: ``QLIB_RESULTS_DIR``: the stored results' folder ("": ``results/``; "off": none).
        write_tier: ``QLIB_RESULTS_WRITE``: the tier a run writes ("": none).
        run_id: ``QLIB_RESULTS_RUN``: the id of that run.
        log: ``QLIB_RESULTS_LOG``: the file each written entry's comparison is appended to.
        command: ``QLIB_RESULTS_COMMAND``: the command that recomputes the tier, for the record.
        study: ``QLIB_RESULTS_STUDY``: the study a ``results-long`` job is running, for the record.
        traceback: ``QLIB_TRACEBACK``: the command line raises instead of printing one line.
        num_processes, process_id: ``QLIB_NUM_PROCESSES``, ``QLIB_PROCESS_ID`` as given: a
            multi-process job (:mod:`qlib.distributed`).
        code: ``QLIB_RESULTS_CODE``: the code's state captured when a run that writes a tier started
            (JSON, :mod:`qlib.results.pins`).
        allow_dirty: ``QLIB_ALLOW_DIRTY``: such a run proceeds on uncommitted code.
    """

    smoke: bool = False
    scale: str = ""
    figures: str | None = None
    cache: str | None = None
    publish: bool = False
    refresh: bool = False
    results_dir: str = ""
    write_tier: str = ""
    run_id: str | None = None
    log: str | None = None
    command: str | None = None
    study: str | None = None
    traceback: bool = False
    num_processes: str = ""
    process_id: str = ""
    code: str | None = None
    allow_dirty: bool = False

    #: field -> the environment variable that carries it
    ENV = {"smoke": SMOKE_ENV, "scale": SCALE_ENV, "figures": "QLIB_FIGURES", "cache": "QLIB_CACHE",
           "publish": "QLIB_PUBLISH", "refresh": "QLIB_REFRESH", "results_dir": "QLIB_RESULTS_DIR",
           "write_tier": "QLIB_RESULTS_WRITE", "run_id": "QLIB_RESULTS_RUN", "log": "QLIB_RESULTS_LOG",
           "command": "QLIB_RESULTS_COMMAND", "study": "QLIB_RESULTS_STUDY", "traceback": "QLIB_TRACEBACK",
           "num_processes": "QLIB_NUM_PROCESSES", "process_id": "QLIB_PROCESS_ID",
           "code": "QLIB_RESULTS_CODE", "allow_dirty": "QLIB_ALLOW_DIRTY"}

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> RunConfig:
        """The configuration the environment gives (``os.environ`` by default): the one reader of
        qlib's variables. Each is read as its user has always read it (a flag's true spellings,
        surrounding blanks ignored where they were)."""
        env = os.environ if environ is None else environ
        get = lambda f: env.get(cls.ENV[f])  # noqa: E731
        text = lambda f: (get(f) or "").strip()  # noqa: E731
        return cls(
            smoke=text("smoke").lower() in _TRUE, scale=text("scale"), figures=get("figures"),
            cache=get("cache"), publish=text("publish") == "1",
            refresh=text("refresh").lower() in {"1", "true", "yes"}, results_dir=text("results_dir"),
            write_tier=text("write_tier"), run_id=get("run_id") or None, log=get("log") or None,
            command=get("command") or None, study=get("study") or None, traceback=bool(get("traceback")),
            num_processes=text("num_processes"), process_id=text("process_id"), code=get("code") or None,
            allow_dirty=text("allow_dirty") in ("1", "true", "yes"))

    def to_environ(self) -> dict[str, str | None]:
        """The environment a child process needs to read this configuration back: variable -> value,
        None for a variable to unset (a field at its default)."""
        out: dict[str, str | None] = {}
        default = RunConfig()
        for f in fields(self):
            v = getattr(self, f.name)
            if v == getattr(default, f.name):
                out[self.ENV[f.name]] = None
            else:
                out[self.ENV[f.name]] = ("1" if v else None) if isinstance(v, bool) else v
        return out


_CURRENT: contextvars.ContextVar[RunConfig | None] = contextvars.ContextVar("qlib_run_config", default=None)


def current() -> RunConfig:
    """The configuration in force: the one :func:`using` put in force, else the environment's."""
    return _CURRENT.get() or RunConfig.from_environ()


@contextlib.contextmanager
def using(config: RunConfig) -> Iterator[RunConfig]:
    """Put ``config`` in force inside the block (what :func:`current` returns there)."""
    token = _CURRENT.set(config)
    try:
        yield config
    finally:
        _CURRENT.reset(token)


def child_environ(config: RunConfig | None = None) -> dict[str, str]:
    """``os.environ`` with ``config`` (default :func:`current`) written over it: a child's environment."""
    env = dict(os.environ)
    for k, v in (config or current()).to_environ().items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def smoke_mode() -> bool:
    """True when the run is in smoke mode (``QLIB_SMOKE``): notebooks then use tiny parameters."""
    return current().smoke


def scale() -> float:
    """The factor ``QLIB_SCALE`` (set by ``--scale S``) by which the studies multiply every
    full-mode run length: 1 by default; larger on bigger machines. ValueError if not > 0."""
    raw = current().scale
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
    f = current().figures
    d = Path(f) if f is not None else ROOT / "figures"
    d.mkdir(parents=True, exist_ok=True)
    return d


def cache_dir() -> Path:
    """Where sweep results are cached: ``$QLIB_CACHE`` or ``.qlib_cache/`` at the repository root."""
    c = current().cache
    d = Path(c) if c is not None else ROOT / ".qlib_cache"
    d.mkdir(parents=True, exist_ok=True)
    return d


def enable_compilation_cache(path: str | os.PathLike | None = None) -> Path:
    """Turn on JAX's persistent compilation cache, so reruns skip XLA compiles."""
    import jax  # here, not at the top: qlib.distributed reads the configuration before JAX starts

    p = Path(path) if path is not None else cache_dir() / "jax"
    p.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(p))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    return p
