"""Figures of notebook 01: the maximum queue length of the supermarket model concentrates on k.

Each ``*_figure`` function takes the :class:`qlib.studies.max_length.MaxLengthResult` (or one of
its parts) and returns a matplotlib Figure; the notebook saves it with :func:`qlib.plots.savefig`.
Error bars are the 95% confidence intervals of :func:`qlib.supermarket.estimate_equilibrium`.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import BoundaryNorm

from qlib.studies.max_length import (
    INDEPENDENT_BAND,
    Estimates,
    FromEmptyRun,
    MaxLengthResult,
)
from qlib.supermarket.refined import refined_mean_field
from qlib.supermarket.theory import asymptotic_profile, fluid_fixed_point


def _k_map(ax, eps_range, d_range, kmax: int = 8):
    E = np.geomspace(*eps_range, 300)
    D = np.geomspace(*d_range, 300)
    EE, DD = np.meshgrid(E, D, indexing="ij")
    K = np.minimum(np.ceil(np.log(1 / EE) / np.log(DD) - 1e-9), kmax)
    levels = np.arange(0.5, kmax + 1.5)
    cmap = plt.get_cmap("viridis", len(levels) - 1)
    norm = BoundaryNorm(levels, cmap.N)
    pc = ax.pcolormesh(EE, DD, K, cmap=cmap, norm=norm, shading="auto", alpha=0.45, rasterized=True)
    for j in range(1, kmax + 1):  # boundaries (1-lam) d^j = 1
        dj = E ** (-1.0 / j)
        ok = (dj >= D.min()) & (dj <= D.max())
        ax.plot(E[ok], dj[ok], "k-", lw=0.7, alpha=0.6)
    # the regime edge (1-lam) d^(k-1) = 0.1 for k = 2, 3
    for j in (1, 2):
        dj = (0.1 / E) ** (1.0 / j)
        ok = (dj >= D.min()) & (dj <= D.max())
        ax.plot(E[ok], dj[ok], "k:", lw=0.9, alpha=0.7)
    return pc


def regime_map_figure(result: MaxLengthResult):
    """(a) Predicted k over (1-lam, d) with the boundaries (1-lam) d^j = 1 (solid) and the regime
    edges (1-lam) d^(k-1) = 0.1 (dotted); markers: every simulated point, coloured by the
    measured fraction of time the maximum equals k (n in the label)."""
    fig, ax = plt.subplots(figsize=(7.4, 5.4))
    pc = _k_map(ax, (1e-4 / 1.5, 0.2), (2, 2000))
    sets = [("max", "o", "maximum rows"), ("sweep", "s", "profile sweep ($d = 100$)"),
            ("boundary", "D", "boundary and control"), ("profile", "^", "profile row"),
            (r"family", "v", r"paper's family $\lambda = 1 - n^{-0.75}$, $d = n^{0.5}$"),
            ("finite_n", "P", r"finite-$n$ tail ($\lambda = 0.999$, $d = 100$)")]
    sc, labels = None, {}
    for name, marker, label in sets:
        e: Estimates = getattr(result, name)
        f = np.array([e.max_dist[j, int(e.k[j])] for j in range(e.n.size)])
        sc = ax.scatter(1 - e.lam, e.d, c=f, cmap="RdYlGn", vmin=0, vmax=1, marker=marker, s=80,
                        edgecolors="k", zorder=3, label=label)
        for j in range(e.n.size):  # one label per position: points that share it list their n together
            key = (round(float(1 - e.lam[j]), 12), int(e.d[j]))
            labels.setdefault(key, []).append(f"{int(e.n[j]):.0e}".replace("e+0", "e"))
    row = {}  # labels of points at the same d alternate above and below, so neighbours do not overprint
    for (x, y), ns in sorted(labels.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        up = row.setdefault(y, 0) % 2 == 0
        row[y] += 1
        ax.annotate("n = " + ", ".join(dict.fromkeys(ns)), (x, y), xytext=(5, 6 if up else -13),
                    textcoords="offset points", fontsize=6.5,
                    bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.7))
    ax.set(xscale="log", yscale="log", xlabel=r"$1-\lambda$", ylabel="$d$ (sampled queues)",
           title="Where $k$ is predicted, where we measured,\nand how often the maximum is $k$")
    ax.title.set_fontsize(10)
    ax.invert_xaxis()
    cb = fig.colorbar(pc, ax=ax, ticks=range(1, 9), pad=0.02, fraction=0.05)
    cb.set_label(r"predicted $k = \lceil \log\frac{1}{1-\lambda} / \log d \rceil$")
    fig.colorbar(sc, ax=ax, label=r"measured $P(\max = k)$", location="left", pad=0.17, fraction=0.05)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, fontsize=7)
    return fig


def _yerr(y: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Error bars (2, m) from a CI [low, high] around y, never negative (y may be clipped for a
    log axis, or sit a rounding error outside its CI)."""
    return np.maximum(np.vstack([y - low, high - y]), 0.0)


def _profile_panel(ax, e: Estimates, j: int, title: str):
    d, lam, k = int(e.d[j]), float(e.lam[j]), int(e.k[j])
    L = min(k + 3, e.p.shape[1] - 1)
    i = np.arange(L + 1)
    s = fluid_fixed_point(d, lam, L + 1)
    fl = s[:-1] - s[1:]
    y = np.maximum(e.p[j, : L + 1], 1e-9)
    err = _yerr(y, e.p_low[j, : L + 1], e.p_high[j, : L + 1])
    ax.errorbar(i, y, yerr=err, fmt="o", color="C3", ms=4, capsize=3, label="simulation (95% CI)")
    ax.plot(i, np.maximum(fl, 1e-300), "k_", ms=16, mew=2, label=r"fluid fixed point ($n \to \infty$)")
    a = asymptotic_profile(d, lam)
    ax.plot(np.arange(a.size), a, "s", mfc="none", mec="tab:green", ms=8, mew=1.4,
            label="asymptotic formulas")
    ax.axvline(k, color="grey", ls=":", lw=1)
    ax.set(yscale="log", ylim=(1e-5, 1.5), xticks=i, xlabel="queue length $i$")
    ax.set_title(title, fontsize=8)


def profiles_figure(result: MaxLengthResult):
    """(b) The fraction of queues at each length: the sweep at d = 100 as (1-lam) d -> 0 (first
    panels), the k = 3 profile point, and the boundary case."""
    sw = result.sweep
    def where(e, j):
        return f"$n = {int(e.n[j])}$, $d = {int(e.d[j])}$, $1-\\lambda = {1 - e.lam[j]:.1g}$"

    panels = [(sw, j, f"{where(sw, j)}: $(1-\\lambda)d = {(1 - sw.lam[j]) * sw.d[j]:.2g}$")
              for j in range(sw.n.size)]
    pr, bd = result.profile, result.boundary
    panels.append((pr, 0, f"$k = 3$: {where(pr, 0)}"))
    panels.append((bd, 0, f"boundary: {where(bd, 0)}"))
    cols = 2 if len(panels) % 2 == 0 and len(panels) % 3 else 3  # no empty slot where avoidable
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.0 * cols, 3.2 * rows), squeeze=False)
    for ax, (e, j, t) in zip(axes.flat, panels):
        _profile_panel(ax, e, j, t)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_axis_off()
    for row in axes:
        row[0].set_ylabel("fraction with length exactly $i$")
    axes[0][0].legend(fontsize=6, loc="lower left")
    fig.tight_layout()
    return fig


def concentration_figure(result: MaxLengthResult):
    """(c) Along the paper's family lam = 1 - n^(-alpha), d = floor(n^beta): the fraction of time
    the maximum equals k and k + 1 against n, with the fraction of queues at k."""
    e = result.family
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for off, lab, c in ((0, "P(max = k)", "C0"), (1, "P(max = k+1)", "C1")):
        y = np.array([e.max_dist[j, int(e.k[j]) + off] for j in range(e.n.size)])
        lo = np.array([e.max_low[j, int(e.k[j]) + off] for j in range(e.n.size)])
        hi = np.array([e.max_high[j, int(e.k[j]) + off] for j in range(e.n.size)])
        ax.errorbar(e.n, y, yerr=_yerr(y, lo, hi), fmt="o-", color=c, capsize=3, label=lab + " (95% CI)")
    pk = np.array([e.p[j, int(e.k[j])] for j in range(e.n.size)])
    ax.plot(e.n, pk, "s--", color="C2", label="fraction of queues at k")
    ax.set(xscale="log", ylim=(-0.02, 1.05), xlabel="n (queues)", ylabel="fraction",
           title=f"Along $\\lambda = 1 - n^{{-{result.parameters['family']['alpha']:g}}}$, $d = \\lfloor n^{{"
                 f"{result.parameters['family']['beta']:g}}}\\rfloor$ ($k$ = "
                 f"{sorted(set(int(x) for x in e.k))})")
    ax.title.set_fontsize(9)
    ax.legend(fontsize=7)
    return fig


def finite_n_figure(result: MaxLengthResult):
    """(d) The equilibrium tail E[u_3]/n against n at lam = 0.999, d = 100, as a multiple of the
    fluid value: converged estimates (95% CI), the refined mean field of order 1/n and 1/n^2 (curves),
    the independent measurement at n = 1e5, and the short run from the fluid point."""
    fn = result.finite_n
    lv = result.parameters["finite_n"]["level"]
    fl = float(result.refined[0, 0])
    fig, ax = plt.subplots(figsize=(6.6, 4.4))
    y = fn.tail[:, lv] / fl
    ax.errorbar(fn.n, y, yerr=_yerr(y, fn.tail_low[:, lv] / fl, fn.tail_high[:, lv] / fl), fmt="o", ms=6,
                capsize=3, color="C3", label="estimate_equilibrium (from empty, 20 τ burn-in; 95% CI)")
    # the refined mean fields as curves over n (cheap: one fixed point and its derivatives)
    grid = np.geomspace(min(float(fn.n.min()), 1e3), 1e5, 30)
    d, lam = int(fn.d[0]), float(fn.lam[0])
    for order, mk, c in ((1, "--", "C0"), (2, "-.", "C2")):
        r = refined_mean_field(d, lam, order=order)
        ax.plot(grid, [r.tail_fraction(int(x))[lv] / fl for x in grid], mk, color=c,
                label=f"refined mean field, order 1/n{'²' if order == 2 else ''}")
    ax.axhline(1.0, color="k", lw=1, ls=":", label="fluid fixed point")
    ax.fill_between([1e5 / 1.3, 1e5 * 1.3], *INDEPENDENT_BAND, color="grey", alpha=0.3,
                    label="independent codes at n = 1e5, ~1200 τ "
                          f"({INDEPENDENT_BAND[0]:g}-{INDEPENDENT_BAND[1]:g}x)")
    sh = result.finite_n_short["tail"] / fl
    n_sh = float(result.finite_n_short["n"])
    ax.errorbar([n_sh * 1.15], [sh.mean()], yerr=[1.96 * sh.std(ddof=1) / math.sqrt(sh.size)], fmt="x",
                color="k",
                ms=8, capsize=3,
                label=f"{float(result.finite_n_short['taus']):g} τ from the fluid point (old protocol)")
    ax.set(xscale="log", yscale="log", xlabel="n (queues)", ylabel="E[u_3]/n ÷ fluid s_3",
           title=f"Finite-$n$ tail at length 3 ($\\lambda$ = {float(fn.lam[0]):.6g}, $d$ = {int(fn.d[0])})")
    # below the axes: inside, every corner holds a curve, a point or the fluid line (y = 1)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)
    return fig


def from_empty_figure(data: FromEmptyRun, n: int, d: int, lam: float):
    """(e) From empty to equilibrium: u_i/n against time in relaxation times, with the fluid ODE."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    L = data.sim.shape[1] - 1
    colors = plt.get_cmap("tab10")
    tau = float(data.tau)
    for i in range(1, L + 1):
        if data.fixed_point[i] < 1e-6 and data.sim[:, i].max() < 1e-4:
            continue
        ax.plot(data.t / tau, data.sim[:, i], color=colors(i % 10), lw=1.2, label=f"sim u_{i}/n")
        ax.plot(data.t / tau, data.fluid[:, i], color=colors(i % 10), ls="--", lw=1)
    ax.plot([], [], "k--", lw=1, label="fluid ODE from empty")
    ax.set_xlabel(f"time in relaxation times τ = {tau:.1f} (mean service times)")
    ax.set_ylabel("fraction of queues with length >= i")
    ax.set_title(f"From empty to equilibrium ($n$ = {n:g}, $d$ = {d}, $\\lambda$ = {float(lam):.6g})",
                 fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    return fig


from qlib.plots import style_figures  # noqa: E402

style_figures(globals())  # the house style inside every *_figure (no global rcParams)
