"""Figures of notebook 01: the maximum queue length of the supermarket model concentrates on k.

Each ``*_figure`` function takes one typed result of :mod:`qlib.studies.max_length` and returns
a matplotlib Figure (the notebook saves it with :func:`qlib.plots.savefig`).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import BoundaryNorm

from qlib.stats import t_quantile
from qlib.studies.max_length import (ConcentrationSweep, FiniteNSweep, FromEmptyRun, InteractiveRun,
                                     MapSweep, ProfileSweep, ProfileView)


def _t(dof: int) -> float:
    return t_quantile(max(dof, 1))


def map_figure(data: MapSweep, *, n: int | None = None):
    """(a) Predicted k as a filled map over (1-lam, d), boundary curves (1-lam) d^j = 1, and the
    simulated modal maximum as markers (red ring: differs from k; hollow: fewer than 5 tau)."""
    eps = np.asarray(data.one_minus_lam)
    ds = np.asarray(data.d)
    fig, ax = plt.subplots(figsize=(7.2, 5.2))
    # predicted k on a fine grid (pure theory)
    E = np.geomspace(min(eps.min(), 1e-4) / 1.3, max(eps.max(), 0.1) * 1.3, 300)
    D = np.geomspace(max(1.5, ds.min() / 1.3), max(ds.max(), 1000) * 1.3, 300)
    EE, DD = np.meshgrid(E, D, indexing="ij")
    K = np.ceil(np.log(1 / EE) / np.log(DD) - 1e-9)
    kmax = int(min(K.max(), 16))
    levels = np.arange(0.5, kmax + 1.5)
    cmap = plt.get_cmap("viridis", len(levels) - 1)
    norm = BoundaryNorm(levels, cmap.N)
    pc = ax.pcolormesh(EE, DD, np.minimum(K, kmax), cmap=cmap, norm=norm, shading="auto", alpha=0.55,
                       rasterized=True)  # a 300x300 vector mesh would make a 20 MB SVG
    cb = fig.colorbar(pc, ax=ax, ticks=np.arange(1, kmax + 1))
    cb.set_label("predicted k = ceil(log(1/(1-lam)) / log d)")
    for j in range(1, kmax + 1):  # boundary curves (1-lam) d^j = 1  <=>  d = (1-lam)^(-1/j)
        dj = E ** (-1.0 / j)
        ok = (dj >= D.min()) & (dj <= D.max())
        ax.plot(E[ok], dj[ok], "k-", lw=0.8, alpha=0.7)
        if ok.any() and j <= 4:  # higher curves crowd the small-d corner
            i = np.nonzero(ok)[0][len(np.nonzero(ok)[0]) // 2]
            ax.annotate(f"(1-lam)d^{j}=1", (E[i], dj[i]), fontsize=7, alpha=0.8, rotation=0)
    EE2, DD2 = np.meshgrid(eps, ds, indexing="ij")
    mm, kk = data.modal_max, data.k
    settled = data.time >= 5 * data.tau
    match = mm == kk
    sel = match & settled
    if sel.any():
        ax.scatter(EE2[sel], DD2[sel], c=mm[sel], cmap=cmap, norm=norm, s=70, edgecolors="k",
                   label="simulated modal max = k", zorder=3)
    sel = ~settled
    if sel.any():  # hollow: the run covered fewer than 5 relaxation times
        ax.scatter(EE2[sel], DD2[sel], s=70, facecolors="none", edgecolors=cmap(norm(mm[sel])),
                   lw=1.5, label="run < 5 relaxation times (hollow)", zorder=3)
    bad = ~match
    if bad.any():
        ax.scatter(EE2[bad], DD2[bad], s=150, facecolors="none", edgecolors="red", lw=1.8,
                   label="simulated modal max != k (value shown)", zorder=4)
        for x, y, v in zip(EE2[bad], DD2[bad], mm[bad]):
            ax.annotate(f"{int(v)}", (x, y), xytext=(5, 4), textcoords="offset points",
                        color="red", fontsize=8, zorder=5)
    off = mm != data.fluid_max
    if off.any():
        ax.scatter(EE2[off], DD2[off], marker="x", s=40, c="k", zorder=6,
                   label="modal max != fluid finite-n max (largest i with n s_i >= 1/2)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.invert_xaxis()
    ax.set_xlabel("1 - lam (dimensionless; lam = arrival rate per queue, service rate 1)")
    ax.set_ylabel("d (number of sampled queues)")
    title = "Maximum queue length: predicted k vs simulated modal maximum"
    if n is not None:
        title += f" (n = {n:g})"
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, fontsize=7)
    return fig


def profiles_figure(data: ProfileSweep):
    """(b) Fraction of queues with length exactly i: simulation at several n (95% CI), fluid
    fixed point, asymptotic formulas; one panel per (1-lam, d)."""
    C = len(data.d)
    fig, axes = plt.subplots(1, C, figsize=(4.2 * C, 3.8), squeeze=False)
    ns = data.n
    L1 = data.p.shape[2]
    i = np.arange(L1)
    colors = plt.get_cmap("plasma")(np.linspace(0.1, 0.8, len(ns)))
    for c, ax in enumerate(axes[0]):
        eps, d, k = data.one_minus_lam[c], int(data.d[c]), int(data.k[c])
        x = np.log(1 / eps) / np.log(d)
        w = 0.8 / (len(ns) + 1)
        for m, n in enumerate(ns):
            y, se = data.p[c, m], data.p_se[c, m]
            ax.errorbar(i + (m - len(ns) / 2) * w, np.maximum(y, 1e-12), yerr=_t(3) * se, fmt="o",
                        ms=3.5, color=colors[m], capsize=2, label=f"simulation n = {n:.0e}")
        ax.plot(i, np.maximum(data.fluid[c], 1e-300), "k_", ms=18, mew=2, label="fluid fixed point")
        a = data.asymptotic[c]
        ax.plot(i, a, "s", mfc="none", mec="tab:green", ms=9, mew=1.5,
                label="asymptotic: 1-lam, (1-lam)d^i, 1-(1-lam)d^(k-1), e^(-(1-lam)d^k)")
        ax.axvline(k, color="grey", ls=":", lw=1)
        ax.set_yscale("log")
        ax.set_ylim(1e-6, 1.5)
        ax.set_xticks(i)
        ax.set_xlabel("queue length i (customers)")
        where = "on a boundary" if abs(x - round(x)) < 1e-6 else f"log(1/(1-lam))/log d = {x:.2f}"
        ax.set_title(f"1-lam = {eps:.2g}, d = {d}, k = {k}\n({where})", fontsize=9)
    axes[0][0].set_ylabel("fraction of queues with length exactly i")
    axes[0][-1].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return fig


def concentration_figure(data: ConcentrationSweep, alpha: float, beta: float, replicas: int):
    """(c) Along lam = 1 - n^-alpha, d = floor(n^beta): fraction of time max == k and fraction of
    queues at exactly k (95% CI over replicas), with fluid and asymptotic values."""
    n = data.n
    t = _t(replicas - 1)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.errorbar(n, data.frac_max_k, yerr=t * data.frac_max_k_se, fmt="o-", capsize=3,
                label="simulation: fraction of time max queue length == k")
    ax.errorbar(n, data.p_k, yerr=t * data.p_k_se, fmt="s-", capsize=3,
                label="simulation: fraction of queues at exactly k")
    ax.plot(n, data.fluid_p_k, "k--", lw=1, label="fluid fixed point: fraction at k")
    ax.plot(n, data.asym_p_k, ":", color="tab:green", lw=1.5, label="asymptotic: 1-(1-lam)d^(k-1)")
    ax.plot(n, data.poisson_max_k, "-.", color="tab:red", lw=1.2,
            label="exp(-n E[u_(k+1)]/n), refined mean field (Poisson heuristic)")
    ax.set_xscale("log")
    ax.set_ylim(-0.02, 1.05)
    ax.set_xlabel("n (number of queues)")
    ax.set_ylabel("fraction (of time / of queues)")
    ks = sorted(set(int(k) for k in data.k))
    ax.set_title(f"Concentration along lam = 1 - n^-{alpha:g}, d = floor(n^{beta:g}) (k = {ks})",
                 fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    return fig


def finite_n_figure(data: FiniteNSweep, replicas: int, level: int = 3, lam: float | None = None,
                    d: int | None = None):
    """(d) The tail E[u_level]/n against n (95% CI), with fluid and refined (1/n) theory."""
    n = data.n
    fl = float(data.fluid)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.errorbar(n, data.tail, yerr=_t(replicas - 1) * data.tail_se, fmt="o", capsize=3,
                label="simulation (from the fluid fixed point, 95% CI)")
    nn = np.geomspace(n.min() / 1.5, n.max() * 10, 200)
    ax.axhline(fl, color="k", ls="--", lw=1, label=f"fluid fixed point s_{level} = {fl:.2e}")
    ax.plot(nn, fl + float(data.correction) / nn, color="tab:red",
            label=f"refined mean field s_{level} + V_{level}/n (V_{level} = {float(data.correction):.1f})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n (number of queues)")
    ax.set_ylabel(f"fraction of queues with length >= {level}")
    ttl = "Finite-n effect on the tail"
    if lam is not None:
        ttl += f" (lam = {lam}, d = {d})"
    ax.set_title(ttl, fontsize=10)
    ax.legend(fontsize=7)
    return fig


def from_empty_figure(data: FromEmptyRun, n: int, d: int, lam: float):
    """The run from empty: u_i/n against time, with the fluid ODE from empty and the fixed point."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    L = data.sim.shape[1] - 1
    colors = plt.get_cmap("tab10")
    for i in range(1, L + 1):
        if data.fixed_point[i] < 1e-6 and data.sim[:, i].max() < 1e-4:
            continue
        ax.plot(data.t, data.sim[:, i], color=colors(i % 10), lw=1.2, label=f"sim u_{i}/n")
        ax.plot(data.t, data.fluid[:, i], color=colors(i % 10), ls="--", lw=1)
    ax.plot([], [], "k--", lw=1, label="fluid ODE from empty")
    ax.set_xlabel("time (mean service times)")
    ax.set_ylabel("fraction of queues with length >= i")
    ax.set_title(f"From empty to equilibrium (n = {n:g}, d = {d}, lam = {lam})", fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    return fig


def profile_view_figure(view: ProfileView, sim: InteractiveRun | None = None):
    """The slider panel: fluid, refined(n) and asymptotic profiles (and a simulation if given)."""
    fig, ax = plt.subplots(figsize=(6.0, 3.8))
    i = view.levels
    ax.bar(i - 0.2, view.fluid, width=0.4, alpha=0.6, label="fluid fixed point")
    ax.bar(i + 0.2, view.refined, width=0.4, alpha=0.6, label=f"refined, n = {view.n:g}")
    ax.plot(i, view.asymptotic, "s", mfc="none", mec="tab:green", ms=9, label="asymptotic formulas")
    if sim is not None:
        sm = sim.summary
        m = min(len(sm.p), len(i))
        ax.errorbar(i[:m], sm.p[:m], yerr=_t(int(sm.replicas) - 1) * np.nan_to_num(sm.p_se[:m]),
                    fmt="ko", ms=4, capsize=3, label="simulation (95% CI)")
    ax.axvline(view.k, color="grey", ls=":")
    ax.set_yscale("log")
    ax.set_ylim(1e-6, 1.5)
    ax.set_xlabel("queue length i (customers)")
    ax.set_ylabel("fraction of queues with length i")
    ax.set_title(f"lam = {view.lam:.6g}, d = {view.d}: k = {view.k}, "
                 f"fluid max at n: {view.fluid_max}, tau = {view.tau:.3g}", fontsize=9)
    ax.legend(fontsize=7)
    return fig
