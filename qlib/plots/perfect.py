"""Figures of notebook 04 (exact stationary samples of the bounded supermarket model).

Each ``*_figure`` takes the :class:`qlib.studies.perfect.PerfectResult`. Times are in units of
the relaxation time tau of the fluid ODE ((1 + lam) n tau jump-chain steps); error bars are 95%
Student-t intervals over independent replicas, or Wilson intervals for proportions of iid
exact samples.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from qlib import stats
from qlib.plots import plain_log_ticks
from qlib.studies.perfect import PerfectResult


def coalescence_figure(result: PerfectResult):
    """(a) Coalescence time of coupling from the past against n, one line per lam, in relaxation
    times; the forward meeting time of the same two starts dashed beside it, and the floor n L."""
    c = result.cost
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    unit = (c.tau * (1 + c.lam) * c.n)[:, None]
    data = []
    for i, lam in enumerate(np.unique(c.lam)):
        sel = c.lam == lam
        for T, style, lab in ((c.coalescence, "o-", "from the past (perfect sample)"),
                              (c.forward, "s--", "forward meeting (burn-in certificate)")):
            est = stats.replica_mean(np.asarray(T, float)[sel] / unit[sel], axis=1)
            ax.errorbar(c.n[sel], est.mean, yerr=est.halfwidth(), fmt=style, color=f"C{i}", capsize=3,
                        label=f"$\\lambda$ = {lam:g}: {lab}")
            data.append(est.mean)
    data = np.concatenate(data)
    low, high = data.min() / 2, data.max() * 2  # the axis is the data's: the floor may lie below it
    floor = (c.n * c.capacity) / unit[:, 0]
    for i, lam in enumerate(np.unique(c.lam)):
        sel = c.lam == lam
        below = " (below the axis)" if floor[sel].max() < low else ""
        ax.plot(c.n[sel], floor[sel], ":", color=f"C{i}", label=f"$\\lambda$ = {lam:g}: floor $nL${below}")
    ax.set(xscale="log", yscale="log", ylim=(low, high),
           xlabel=f"$n$ (queues); $d$ = {int(c.d[0])}, $L = k + 3$",
           ylabel=r"steps / $(1+\lambda) n \tau$", title="(a) cost of an exact sample, in relaxation times")
    plain_log_ticks(ax)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    fig.tight_layout()
    return fig


def max_law_figure(result: PerfectResult):
    """(b) The stationary law of the longest queue from iid exact samples, with Wilson intervals;
    k marked."""
    m = result.max_law
    i = np.arange(m.max_law.size)
    fig, ax = plt.subplots(figsize=(5.6, 3.8))
    yerr = np.vstack([m.max_law - m.max_low, m.max_high - m.max_law]).clip(min=0)
    ax.bar(i, m.max_law, yerr=yerr, capsize=4, color="C0", alpha=0.8, label="exact samples (95% Wilson)")
    ax.axvline(int(m.k), color="k", ls=":", label=f"k = {int(m.k)}")
    ax.set(xlabel="longest queue", ylabel="fraction of samples", ylim=(0, 1.05),
           title=f"(b) law of the maximum: n = {int(m.n)}, d = {int(m.d)}, λ = {float(m.lam):g}, "
                 f"L = {int(m.capacity)}, {m.counts.shape[0]} samples")
    ax.legend(fontsize=8)
    return fig


def explore_figure(x):
    """The law of the maximum of one slider setting's perfect samples (Wilson intervals)."""
    i = np.arange(x.max_law.size)
    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    yerr = np.vstack([x.max_law - x.max_low, x.max_high - x.max_law]).clip(min=0)
    ax.bar(i, x.max_law, yerr=yerr, capsize=3, color="C2", alpha=0.8)
    ax.set(xlabel="longest queue", ylabel="fraction of samples", ylim=(0, 1.05),
           title=f"n = {x.n}, d = {x.d}, λ = {x.lam:g}, L = {x.capacity}: {x.samples.shape[0]} exact "
                 f"samples, mean coalescence {np.mean(x.coalescence):.3g} steps")
    return fig


from qlib.plots import style_figures  # noqa: E402

style_figures(globals())  # the house style inside every *_figure (no global rcParams)
