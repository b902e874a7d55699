"""Figures of notebook 03 "who works the most?" (Cabral's heterogeneous servers).

Exact values are lines, simulated values are points with 95% confidence intervals.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from qlib.heterogeneous.simulate import SimulationResult
from qlib.plots import plain_log_ticks
from qlib.studies.who_works_the_most import FAMILIES, ClaimsGrid, Profile


def busy_and_work_figure(profiles: list[Profile], sims: list[SimulationResult | None] | None = None):
    """P_j (left) and mu_j P_j (right) against mu_j, one colour per load; sims add points ± CI."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    sims = sims if sims is not None else [None] * len(profiles)
    for i, (p, s) in enumerate(zip(profiles, sims)):
        col = f"C{i}"
        a1.plot(p.mus, p.busy, "-", color=col, label=f"exact, $\\rho$ = {p.rho:g}")
        a2.plot(p.mus, p.work, "-", color=col, label=f"exact, $\\rho$ = {p.rho:g}")
        if s is not None and s.replicas >= 2:
            for ax, name in ((a1, "busy_fraction"), (a2, "throughput")):
                est = s.estimate(name)
                ax.errorbar(s.mus, est.mean, yerr=est.halfwidth(), fmt="o", ms=4, color=col, capsize=2,
                            label="simulated ± 95% CI" if (i == 0 and ax is a1) else None)
    a1.set(xscale="log", xlabel=r"service rate $\mu_j$",
           ylabel=r"$P_j = P(\mathrm{server}\ j\ \mathrm{busy})$",
           title="the faster a server, the less often it is busy")
    a2.set(xscale="log", yscale="log", xlabel=r"service rate $\mu_j$",
           ylabel=r"$\mu_j P_j$ (completions per unit time)",
           title="... yet the faster it is, the more it works")
    for a in (a1, a2):
        plain_log_ticks(a)
    a1.legend(fontsize=8)
    fig.tight_layout()
    return fig


def band_figure(p: Profile, ax=None):
    """For each adjacent pair (l faster than m): the band ((mu_m/mu_l) P_m, P_m) and P_l inside it."""
    fig = None
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 4))
    L, M = np.arange(p.n - 1), np.arange(1, p.n)
    lo, hi = p.mus[M] / p.mus[L] * p.busy[M], p.busy[M]
    x = np.arange(len(L))
    ax.vlines(x, lo, hi, lw=6, alpha=0.35, color="C0", label="band ((mu_m/mu_l) P_m, P_m)")
    ax.plot(x, p.busy[L], "o", color="C3", label="P_l (faster server)")
    ax.set(xticks=x, xticklabels=[f"{l + 1}|{m + 1}" for l, m in zip(L, M)],
           xlabel="pair l|m (servers fastest first)",
           ylabel="probability", title=f"claim 3 (= claims 1 and 2) at rho = {p.rho:g}, spread {p.spread:g}")
    if len(x) > 12:
        ax.set_xticks(x[:: max(1, len(x) // 12)])
    ax.legend(fontsize=8)
    return fig if fig is not None else ax.figure


def informed_figure(p: Profile, sim_fastest: SimulationResult | None = None, axes=None):
    """Uninformed (random idle server) vs informed (fastest idle server) customers."""
    fig = None
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    a1, a2 = axes
    j = np.arange(1, p.n + 1)
    a1.plot(j, p.busy, "o-", label="uninformed (random idle)")
    a2.plot(j, p.work, "o-", label="uninformed (random idle)")
    if p.informed_busy is not None:
        a1.plot(j, p.informed_busy, "s--", label="informed (fastest idle), exact")
        a2.plot(j, p.informed_work, "s--", label="informed (fastest idle), exact")
    if sim_fastest is not None and sim_fastest.replicas >= 2:
        o = np.argsort(-sim_fastest.mus, kind="stable")
        for ax, name in ((a1, "busy_fraction"), (a2, "throughput")):
            est = sim_fastest.estimate(name)
            ax.errorbar(j, est.mean[o], yerr=est.halfwidth()[o], fmt="x", color="C2", capsize=2,
                        label="informed, simulated ± 95% CI")
    a1.set(xlabel="server (fastest first)", ylabel="P_j", title="busy probability")
    a2.set(xlabel="server (fastest first)", ylabel="mu_j P_j", title="work done", yscale="log")
    a1.legend(fontsize=8)
    return fig if fig is not None else a1.figure


def grid_figure(grid: ClaimsGrid):
    """The closed form evaluated over the grid: for each rate family, the smallest relative margin
    of claims 1 and 2 (claim 3 is the two together) over the adjacent pairs of a point, against the
    load, one line per n (all > 0; log scale, so a violation would fall off the bottom). This
    checks the numerics of the product form, not the claims: every product form whose weights
    depend only on |S| has these signs (docs/models.md#cabral-identities)."""
    fig, axes = plt.subplots(1, 3, figsize=(12, 4.2), sharey=True, layout="constrained")
    ns = sorted(set(int(n) for n in grid.n))
    cmap = plt.get_cmap("viridis")
    for f, ax in enumerate(axes):
        sel_f = grid.family == f
        for i, n in enumerate(ns):
            sel = sel_f & (grid.n == n)
            if not sel.any():
                continue
            m = np.minimum(grid.min_rel1[sel], grid.min_rel2[sel])
            ax.plot(grid.rho[sel], m, "o-", ms=3, color=cmap(i / max(1, len(ns) - 1)), label=f"n = {n}")
        ax.set(xscale="log", yscale="log", xlabel=r"load $\rho = \lambda \,/\, \Sigma_j\, \mu_j$",
               title=f"rates: {FAMILIES[f]}")
    axes[0].set_ylabel("smallest relative margin of claims 1 and 2")
    # one colour scale for n instead of a legend per line: legible at notebook width
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import BoundaryNorm

    norm = BoundaryNorm(np.arange(len(ns) + 1) - 0.5, max(2, len(ns)))
    sm = ScalarMappable(norm=norm, cmap=cmap.resampled(max(2, len(ns))))
    cb = fig.colorbar(sm, ax=axes, ticks=range(len(ns)), fraction=0.03)
    cb.ax.set_yticklabels([str(n) for n in ns], fontsize=8)
    cb.set_label("servers $n$")
    fig.suptitle(f"The closed form over a grid (a check of the numerics, not of the claims): "
                 f"{int(grid.pairs.sum())} adjacent pairs at {grid.n.size} points, "
                 f"{int(grid.violations1.sum() + grid.violations2.sum())} violations of claims 1 and 2",
                 fontsize=10)
    return fig


from qlib.plots import style_figures  # noqa: E402

style_figures(globals())  # the house style inside every *_figure (no global rcParams)
