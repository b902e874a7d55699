"""Plotting: one ``show`` for every notebook figure, and one module of plot functions per notebook.

The house style (:data:`STYLE`) is applied only inside :func:`style`: around every
``*_figure`` function of the plot modules (:func:`style_figures`) and around :func:`savefig`.
Importing qlib.plots leaves matplotlib's global ``rcParams`` alone.

Where figures go (running a notebook never changes the repository): :func:`show` draws inline
and writes ``figures/`` only when the runner of ``make figures`` sets ``QLIB_PUBLISH=1``; when
``QLIB_FIGURES`` names a folder (the tests, ``--smoke``) it writes there; otherwise nowhere.
In smoke mode every figure says "smoke" on it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib

from qlib.config import RunConfig, current, figures_dir, smoke_mode

#: set to 1 by the runner of ``make figures`` (qlib.notebooks): only then does a figure reach figures/
PUBLISH_ENV = RunConfig.ENV["publish"]

STYLE = {
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "font.size": 10,
    # SVG element ids are random unless salted: a fixed salt makes an unchanged figure an
    # unchanged file, so `make figures` twice leaves git clean.
    "svg.hashsalt": "qlib",
}


@contextmanager
def style() -> Iterator[None]:
    """qlib's matplotlib style, for the figures made (and saved) inside this block only."""
    with matplotlib.rc_context(STYLE):
        yield


def styled(fn: Callable) -> Callable:
    """``fn`` run inside :func:`style` (axes, grids and legends pick the style up when made)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any):
        with style():
            return fn(*args, **kwargs)

    wrapper.__wrapped_by_qlib_style__ = True  # type: ignore[attr-defined]
    return wrapper


def style_figures(namespace: MutableMapping[str, Any]) -> None:
    """Wrap every public ``*_figure`` function of a plot module's namespace in :func:`styled`."""
    for name, obj in list(namespace.items()):
        if name.endswith("_figure") and not name.startswith("_") and callable(obj) \
                and not getattr(obj, "__wrapped_by_qlib_style__", False):
            namespace[name] = styled(obj)


def savefig(fig, name: str, formats: tuple[str, ...] = ("png", "svg")) -> list[Path]:
    """Save ``fig`` as figures/NAME.png and figures/NAME.svg (PNG for the README, SVG to zoom).

    SVGs carry no date stamp, so an unchanged figure gives an unchanged file.
    """
    out = []
    with style():  # savefig.dpi and the SVG hash salt are read at save time
        for ext in formats:
            p = figures_dir() / f"{name}.{ext}"
            meta = {"Date": None} if ext == "svg" else {"Software": None}
            fig.savefig(p, bbox_inches="tight", metadata=meta)
            out.append(p)
    return out


def plain_log_ticks(ax, axis: str = "both") -> None:
    """Log-axis tick labels as plain numbers (0.5, 2, 30; not "2×10⁰"), minor ticks labelled
    only where an axis spans about a decade or less."""
    from matplotlib.ticker import LogFormatter

    class Plain(LogFormatter):
        def _num_to_string(self, x, vmin, vmax):  # LogFormatter picks the ticks, %g writes them
            return f"{x:g}"

    for which in ("x", "y") if axis == "both" else (axis,):
        a = ax.xaxis if which == "x" else ax.yaxis
        if a.get_scale() == "log":
            a.set_major_formatter(Plain(labelOnlyBase=False, minor_thresholds=(1, 0.4)))
            a.set_minor_formatter(Plain(labelOnlyBase=False, minor_thresholds=(1, 0.4)))


def save_target() -> Path | None:
    """Where :func:`show` writes figures: ``$QLIB_FIGURES`` if set, ``figures/`` under
    ``QLIB_PUBLISH=1``, else None (draw inline only: an interactive run writes nothing)."""
    if current().figures or current().publish:
        return figures_dir()
    return None


def mark_smoke(fig) -> None:
    """Write "smoke run" across the figure's bottom edge, so it cannot pass for the published one."""
    fig.text(0.995, 0.005, "smoke run (QLIB_SMOKE=1): tiny parameters, not the published figure",
             ha="right", va="bottom", fontsize=7, color="tab:red", alpha=0.8)


def show(fig, name: str) -> None:
    """Display a notebook figure: marked "smoke" in smoke mode, saved (:func:`savefig`) only where
    :func:`save_target` allows, then shown inline and closed (returns nothing, so a cell that
    ends with it shows the figure only)."""
    import matplotlib.pyplot as plt

    if smoke_mode():
        mark_smoke(fig)
    if save_target() is not None:
        savefig(fig, name)
    plt.show()
    plt.close(fig)
