"""Figures of the k = 3 study (issue 46). Error bars are 95% Student-t intervals (over meeting pairs,
or batch means over the spacings of a stationary run). Each ``*_figure`` takes a
:class:`qlib.studies.k3.K3Result` (and, for the mixing figure, the in-regime study's result for k = 2)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from qlib import stats
from qlib.plots import plain_log_ticks
from qlib.studies.k3.claims import profile_measured, profile_prediction
from qlib.supermarket.mixing_law import predicted_meeting_time
from qlib.supermarket.theory import steps_per_time


def _tau_model(n, d, lam, T):
    """T / (n (1+lam) ln SD(N)): the relaxation time (model time) a meeting time implies."""
    t = predicted_meeting_time(int(n), int(d), float(lam))
    return np.asarray(T, float) / (steps_per_time(int(n), float(lam)) * math.log(t.sd_N))


def _mean_ci(x):
    x = np.asarray(x, float)
    if x.size < 2 or not np.all(np.isfinite(x)):
        return np.nan, np.nan
    e = stats.replica_mean(x)
    return float(e.mean), float(e.halfwidth())


def mixing_figure(k3_result, regime_result=None):
    """(h) k = 2 and k = 3 together. Left: the measured meeting time against T_pred = tau_fluid ln SD(N)
    at k = 3's points (triangles) and at family A's fresh points (k = 2, diamonds), with the diagonal
    and the pre-set band; JSQ(d/2) from k = 3's first point (x). Right: the relaxation time each
    implies, T_meet / (n (1+lam) ln SD(N)), against d, with T_pred's tau_fluid (lines) and guides of
    slope 1 and 2 through k = 3's first point."""
    C = k3_result.parameters["claims"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11.0, 4.4))
    sets = []
    if regime_result is not None and regime_result.predicted_family is not None:
        m = regime_result.predicted_family
        if not m.missing.any():
            sets.append(
                (
                    "k = 2, family A (fresh seeds)",
                    "D",
                    "C2",
                    [
                        (int(n), int(d), float(lam), m.T[j])
                        for j, (n, d, lam) in enumerate(zip(m.n, m.d, m.lam))
                    ],
                )
            )
    k3 = [(p.n, p.d, p.lam, p.T) for p in k3_result.mixing if p.missing == 0]
    if k3:
        sets.append(("k = 3, d = 21..30 (fresh seeds)", "^", "C4", k3))
    lo, hi = np.inf, 0.0
    for label, mk, c, pts in sets:
        for i, (n, d, lam, T) in enumerate(pts):
            pred = predicted_meeting_time(n, d, lam).steps
            mean, half = _mean_ci(T)
            ax.errorbar(
                pred, mean, yerr=half, fmt=mk, color=c, ms=6, capsize=2, label=label if i == 0 else None
            )
            lo, hi = min(lo, pred, mean), max(hi, pred, mean)
            tm, th = _mean_ci(_tau_model(n, d, lam, T))
            tp = predicted_meeting_time(n, d, lam).tau_fluid_steps / steps_per_time(n, lam)
            bx.errorbar(d, tm, yerr=th, fmt=mk, color=c, ms=6, capsize=2, label=label if i == 0 else None)
            bx.plot(d, tp, "_", color=c, ms=14, mew=2)
    first = k3_result.mixing[0]
    if first.T_half.size and np.all(np.isfinite(first.T_half)):
        pred = predicted_meeting_time(first.n, first.d, first.lam).steps
        ax.plot(
            pred,
            float(np.mean(first.T_half)),
            "x",
            color="C3",
            ms=8,
            label=f"JSQ({first.d // 2}) (d/2, wrong) at d = {first.d}",
        )
    if hi > 0:
        xs = np.array([lo / 1.5, hi * 1.5])
        ax.plot(xs, xs, "k-", lw=1)
        ax.fill_between(
            xs,
            C["ratio_low"] * xs,
            C["ratio_high"] * xs,
            color="C2",
            alpha=0.12,
            label=f"R in [{C['ratio_low']:g}, {C['ratio_high']:g}]",
        )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel=r"$T_\mathrm{pred} = \tau_\mathrm{fluid}\,\ln \mathrm{SD}(N)$ (steps)",
        ylabel=r"$T_\mathrm{meet}$ (steps, mean and 95% CI)",
        title="the mixing time against its prediction",
    )
    ax.legend(fontsize=8, loc="upper left")
    if k3:
        d = np.array([p[1] for p in k3], float)
        t0 = float(np.mean(_tau_model(*k3[0][:3], k3[0][3])))
        ds = np.linspace(d.min() * 0.9, d.max() * 1.1, 20)
        for s, style in ((2, "--"), (1, ":")):
            bx.plot(
                ds,
                t0 * (ds / d[0]) ** s,
                style,
                color="0.4",
                lw=1,
                label=f"slope {s} (through d = {int(d[0])})",
            )
    bx.plot([], [], "_", color="0.2", ms=14, mew=2, label=r"$\tau_\mathrm{fluid}$ of $T_\mathrm{pred}$")
    bx.set(
        xscale="log",
        yscale="log",
        xlabel="d",
        ylabel=r"$T_\mathrm{meet}\,/\,(n(1+\lambda)\ln\mathrm{SD}(N))$ (model time)",
        title=r"the relaxation time: $d^{k-1}$, not $d$",
    )
    plain_log_ticks(bx)
    bx.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def maximum_figure(k3_result):
    """(k = 3) Left: at the maximum point, the fraction of time the longest queue has each length, for
    JSQ(d) (bars, 95% CI over the spacings) and JSQ(d/2) from the same samples (hatched), with the
    pre-set threshold. Right: the fraction of queues at lengths 1..5 at every k = 3 point (markers,
    95% CI) and the refined mean field of JSQ(d) (lines)."""
    C = k3_result.parameters["claims"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11.0, 4.2))
    for p in k3_result.maximum:
        if p.missing or p.max_dist.shape[0] < 2:
            ax.text(0.5, 0.5, "the long tier lacks this point", transform=ax.transAxes, ha="center")
            continue
        L = np.arange(2, 7)
        est = stats.replica_mean(p.max_dist[:, L])
        ax.bar(L - 0.2, est.mean, 0.4, yerr=est.halfwidth(), capsize=3, color="C0", label=f"JSQ({p.d})")
        if p.half_max_dist.shape[0]:
            ax.bar(
                L + 0.2,
                p.half_max_dist[:, L].mean(axis=0),
                0.4,
                color="none",
                edgecolor="C3",
                hatch="//",
                label=f"JSQ({p.d // 2}) (d/2, wrong)",
            )
        ax.axhline(C["p_min"], color="k", lw=1, ls="--", label=f"threshold {C['p_min']:g}")
        ax.set(
            xticks=L,
            xlabel="maximum queue length",
            ylabel="fraction of time",
            title=f"P(max = i) at n = {p.n}, d = {p.d}, 1-λ = {1 - p.lam:.3g}",
        )
        ax.legend(fontsize=8)
    for i, p in enumerate(k3_result.mixing + k3_result.maximum):
        if p.missing or p.tail.shape[0] < 2:
            continue
        m, h = profile_measured(p)
        L = np.arange(1, 6)
        bx.errorbar(
            L + 0.06 * (i - 1.5),
            m[L],
            yerr=h[L],
            fmt="o",
            ms=4,
            capsize=2,
            color=f"C{i}",
            label=f"d = {p.d}, n = {p.n}",
        )
        bx.plot(L, profile_prediction(p.n, p.d, p.lam)[L], "-", color=f"C{i}", lw=1)
    bx.plot([], [], "-", color="0.3", lw=1, label="refined mean field (order 1/n)")
    bx.set(
        xticks=np.arange(1, 6),
        xlabel="queue length i",
        ylabel="fraction of queues at length i",
        title="most queues have length exactly 3",
    )
    bx.legend(fontsize=8)
    fig.tight_layout()
    return fig
