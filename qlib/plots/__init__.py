"""Plotting: one ``savefig`` for every figure, and one module of plot functions per notebook."""

from __future__ import annotations

from pathlib import Path

import matplotlib

from qlib.config import figures_dir

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
matplotlib.rcParams.update(STYLE)


def savefig(fig, name: str, formats: tuple[str, ...] = ("png", "svg")) -> list[Path]:
    """Save ``fig`` as figures/NAME.png and figures/NAME.svg (PNG for the README, SVG to zoom).

    SVGs carry no date stamp, so an unchanged figure gives an unchanged file.
    """
    out = []
    for ext in formats:
        p = figures_dir() / f"{name}.{ext}"
        meta = {"Date": None} if ext == "svg" else {"Software": None}
        fig.savefig(p, bbox_inches="tight", metadata=meta)
        out.append(p)
    return out
