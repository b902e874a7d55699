"""Figures of notebook 02 (mixing time of the supermarket model).

Time axes are in jump-chain steps; one unit of model time is (1 + lam) n steps.
Error bars are 95% Student-t intervals over independent replicas.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from qlib import stats
from qlib.studies.mixing import DrainSweep, Exploration, GoodSetRun, MeetingSweep, StartsComparison

STEPS = "jump-chain steps; 1 time unit = (1+λ)n steps"


def _mean_ci(T: np.ndarray):
    est = stats.replica_mean(np.asarray(T, float), axis=1)
    return est.mean, est.halfwidth()


def meeting_vs_n_figure(a: MeetingSweep):
    """(a) T_meet against n (log-log) with an n log n reference and the fitted exponent."""
    ns, T = a.n.astype(float), a.T
    m, h = _mean_ci(T)
    fit = stats.fit_power_law(ns, T)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4))
    ax.errorbar(ns, m, yerr=h, fmt="o", capsize=3, label="E[T_meet] (95% CI)")
    ref = ns * np.log(ns)
    ax.plot(ns, ref * m[-1] / ref[-1], "k--", lw=1, label="∝ n ln n")
    ax.plot(ns, fit.prefactor * ns ** fit.exponent, ":", label=f"fit n^{fit.exponent:.3f}")
    ax.set(xscale="log", yscale="log", xlabel="n (queues)", ylabel=f"T_meet ({STEPS})",
           title=f"(a) meeting time, d={int(a.d[0])}, λ={a.lam[0]}: exponent {fit}")
    ax.title.set_fontsize(8)
    ax.legend()
    bx.errorbar(ns, m / ref, yerr=h / ref, fmt="o", capsize=3)
    bx.set(xscale="log", xlabel="n (queues)", ylabel="T_meet / (n ln n)  (steps per n ln n)",
           title="flat = n log n scaling", ylim=(0, None))
    fig.tight_layout()
    return fig


def meeting_vs_d_k_figure(b: MeetingSweep, ks: MeetingSweep):
    """(b) T_meet against d at fixed k, lam (top start and good start), then against k."""
    ds = b.d.astype(float)
    k = int(b.k[0])
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4))
    for T, lab in ((b.T, "top start (all at k+1)"), (b.T_good, "good start (fluid vs stationary)")):
        m, h = _mean_ci(T)
        f = stats.fit_power_law(ds, T)
        ax.errorbar(ds, m, yerr=h, fmt="o-", capsize=3, label=f"{lab}: exponent {f.exponent:.2f}")
    mt, _ = _mean_ci(b.T)
    ax.plot(ds, mt[0] * (ds / ds[0]) ** (k - 1), "k--", lw=1, label=f"∝ d^(k-1) = d^{k - 1}")
    ax.set(xscale="log", yscale="log", xlabel="d (choices)", ylabel=f"T_meet ({STEPS})",
           title=f"(b) fixed k={k}, λ={b.lam[0]}, n={int(b.n[0])}")
    ax.title.set_fontsize(9)
    ax.legend(fontsize=7)
    kk = ks.k.astype(float)
    m, h = _mean_ci(ks.T)
    n, d = float(ks.n[0]), float(ks.d[0])
    bound = kk * d ** (kk - 1) * n * math.log(n)
    drain = (1 + ks.lam) * n / (1 - ks.lam)
    bx.errorbar(kk, m, yerr=h, fmt="o-", capsize=3, label="E[T_meet] (95% CI)")
    bx.plot(kk, bound, "k--", lw=1, label="k d^(k-1) n ln n")
    bx.plot(kk, drain, "g:", label="(1+λ)n/(1-λ): net drain of n customers")
    bx.plot(kk, n * (ks.lam * d) ** (kk - 1), "r-.", lw=1, label="lower bound n(λd)^(k-1)")
    bx.set(yscale="log", xlabel="k (λ = 1 - d^-(k-1/2), mid-window)", ylabel=f"T_meet ({STEPS})",
           title=f"against k, d={int(d)}, n={int(n)}", xticks=kk)
    bx.title.set_fontsize(9)
    bx.legend(fontsize=7)
    fig.tight_layout()
    return fig


def drain_figure(c: DrainSweep):
    """(c) Drain time from all queues at k+1 against the lower bound n(λd)^(k-1)."""
    n, d, lam, k = c.n.astype(float), c.d, c.lam, c.k
    m, h = _mean_ci(c.T)
    lb = n * (lam * d) ** (k - 1)
    fl = c.fluid_time * (1 + lam) * n
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4))
    ax.errorbar(lb, m, yerr=h, fmt="o", capsize=3, label="measured T_drain (95% CI)")
    ax.plot(lb, fl, "x", ms=8, label="fluid limit (1+λ)n·t_fluid")
    lim = np.array([lb.min() / 2, max(m.max(), fl.max()) * 2])
    ax.plot(lim, lim, "k--", lw=1, label="T = n(λd)^(k-1)")
    ax.set(xscale="log", yscale="log", xlabel="n (λd)^(k-1)  (steps)", ylabel=f"T_drain ({STEPS})",
           title="(c) drain from all queues at k+1 vs the lower bound")
    ax.legend(fontsize=7)
    same = (d == d[0]) & (lam == lam[0])
    bx.errorbar(n[same], m[same] / ((1 + lam[same]) * n[same]), yerr=h[same] / ((1 + lam[same]) * n[same]),
                fmt="o-", capsize=3, label="T_drain / ((1+λ)n)")
    bx.axhline(c.fluid_time[same][0], color="k", ls="--", lw=1, label="fluid drain time")
    bx.set(xscale="log", xlabel="n (queues)", ylabel="T_drain (model time units)",
           title=f"order n: d={int(d[0])}, λ={lam[0]}", ylim=(0, None))
    bx.legend(fontsize=7)
    fig.tight_layout()
    return fig


def starts_figure(res: StartsComparison, *, n: int, lam: float, title: str = "(d)"):
    """(d) TV distance of u_k(t) from several starts, the coupling bound, and L1 distances."""
    t = res.times
    meet = res.T_meet
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4))
    for s, lab in enumerate(res.labels):
        ax.plot(t, res.tv[s], label=f"start: {lab}")
    ax.axhline(float(res.noise), color="gray", ls=":", label="sampling noise floor")
    ax.plot(t, [(meet > s).mean() for s in t], "k--", label="P(T_meet > t), bottom/top bound")
    ax.set(xlabel=f"t ({STEPS})", ylabel="d_TV of law of u_k(t) vs equilibrium (binned)",
           title=f"{title} good vs bad starts (n={n}, λ={lam})", ylim=(0, 1.02))
    ax.legend(fontsize=7)
    for s, lab in enumerate(res.labels[1:], 1):
        bx.plot(t, res.l1[s], label=f"{lab} vs {res.labels[0]}")
    bx.set(xlabel=f"t ({STEPS})", ylabel="E Σ_i |u_i - u'_i| / n  (customers per queue)",
           title="L1 distance between coupled chains", ylim=(0, None))
    bx.legend(fontsize=7)
    fig.tight_layout()
    return fig


def good_set_figure(g: GoodSetRun, *, n: int, lam: float):
    """(e) Fraction of time in the good set N^eps per window, from the fluid point."""
    f = g.frac  # (eps, replicas, windows)
    W = float(g.window_steps)
    x = (np.arange(f.shape[2]) + 0.5) * W
    fig, ax = plt.subplots(figsize=(6, 4))
    for j, e in enumerate(g.eps):
        est = stats.replica_mean(f[j], axis=0)
        ax.errorbar(x, est.mean, yerr=est.halfwidth(), fmt="o-", ms=3, capsize=2, label=f"ε = {e:g}")
    ax.set(xlabel=f"t ({STEPS})", ylabel="fraction of window in N^ε",
           title=f"(e) staying near equilibrium (n={n}, λ={lam}); window {W:.3g} steps", ylim=(-0.02, 1.02))
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def explore_figure(x: Exploration):
    """Slider view: survival of T_meet and the L1 distance of the coupled pair."""
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.5))
    T = np.sort(x.T)
    ax.step(T, 1 - np.arange(1, T.size + 1) / T.size, where="post")
    ax.set(xlabel=f"t ({STEPS})", ylabel="P(T_meet > t)", title=f"n={x.n}, d={x.d}, λ={x.lam}, k={x.k}")
    bx.plot(x.times, x.l1)
    bx.set(xlabel=f"t ({STEPS})", ylabel="E Σ_i |u_i - u'_i| / n", title="bottom vs top, L1 distance")
    fig.tight_layout()
    return fig
