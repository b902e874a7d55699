"""Figures of notebook 02 (mixing time of the supermarket model).

Time axes are in jump-chain steps (one unit of model time is (1 + lam) n steps) or in the
units the claim is stated in; error bars are 95% Student-t intervals over independent replicas.
Each ``*_figure`` takes the :class:`qlib.studies.mixing.MixingResult` (or a part of it).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from qlib import stats
from qlib.plots import plain_log_ticks
from qlib.studies.mixing import Exploration, MeetingTimes, MixingResult
from qlib.studies.mixing_regime import LONG_COMMAND, relaxation_scale
from qlib.supermarket.mixing_law import predicted_meeting_time
from qlib.supermarket.refined import relaxation_time
from qlib.supermarket.regime import lower_time, reference_time
from qlib.supermarket.theory import steps_per_time

STEPS = "jump-chain steps; 1 time unit = (1+λ)n steps"


def _mean_ci(T: np.ndarray):
    est = stats.replica_mean(np.asarray(T, float), axis=1)
    return est.mean, est.halfwidth()


def _ratios(m: MeetingTimes):
    ref = np.array([reference_time(int(n), int(d), float(lam)) for n, d, lam in zip(m.n, m.d, m.lam)])
    return m.T / ref[:, None], ref


def upper_bounds_figure(result: MixingResult):
    """(a) Along the paper's family: T_meet / (k d^(k-1) n ln n) against n from a good start (fluid
    point vs a stationary sample) and from a bad start (all empty vs all at k+1), with the drain
    term (1+lam) n/(1-lam) on the same scale; wrong models that never met are marked at their cap."""
    fig, ax = plt.subplots(figsize=(6.8, 4.4))
    for m, lab, c in ((result.good, "good start (fluid point vs stationary sample)", "C0"),
                      (result.top, "bad start (all empty vs all at k+1)", "C1")):
        r, _ = _ratios(m)
        if np.all(np.isfinite(r)):
            mean, h = _mean_ci(r)
            ax.errorbar(m.n, mean, yerr=h, fmt="o-", color=c, capsize=3, label=lab)
    g = result.top
    drain = [(1 + lam) * n / (1 - lam) / reference_time(int(n), int(d), float(lam))
             for n, d, lam in zip(g.n, g.d, g.lam)]
    ax.plot(g.n, drain, "k:", label="drain term (1+λ)n/(1-λ), same scale")
    for m, lab, mk in ((result.good_jsq2, "JSQ(2), good start", "v"),
                       (result.uncoupled, "uncoupled chains", "x")):
        r, ref = _ratios(m)
        unmet = ~np.isfinite(r).all(axis=1)
        cap = m.cap / ref
        ax.scatter(m.n[unmet], cap[unmet], marker=mk, color="C3", s=50, zorder=4,
                   label=f"{lab}: not met by the cap (shown at the cap)")
    ax.set(xscale="log", yscale="log", xlabel="n (queues); λ = 1 - n^-0.75, d = floor(n^0.5)",
           ylabel="T_meet / (k d^(k-1) n ln n)", title="(a) upper bounds along the paper's family")
    ax.legend(fontsize=7)
    return fig


def d_scaling_figure(result: MixingResult):
    """(b) Good-start meeting time against d at fixed 1 - lam (k fixed): it grows like d^(k-1),
    which 1/(1-lam) cannot explain; the same protocol with d held at its first value stays flat."""
    m, f = result.d_sweep, result.d_fixed
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    d = m.d.astype(float)
    mean, h = _mean_ci(m.T)
    ax.errorbar(d, mean, yerr=h, fmt="o-", capsize=3, label="JSQ(d), good start (95% CI)")
    if np.all(np.isfinite(f.T)):
        mf, hf = _mean_ci(f.T)
        ax.errorbar(d, mf, yerr=hf, fmt="s--", capsize=3, color="C3",
                    label=f"d held at {int(f.d[0])} (wrong model)")
    k = int(m.k[0])
    ax.plot(d, mean[0] * (d / d[0]) ** (k - 1), "k:", label=f"∝ d^(k-1) = d^{k - 1}")
    fit = stats.fit_power_law(d, m.T) if np.all(np.isfinite(m.T)) else None
    ax.set(xscale="log", yscale="log", xlabel="d (choices)", ylabel=f"T_meet ({STEPS})",
           title=f"(b) fixed 1-λ = {1 - float(m.lam[0]):g}, n = {int(m.n[0])}, k = {k}"
                 + (f": exponent {fit.exponent:.2f} [{fit.ci[0]:.2f}, {fit.ci[1]:.2f}]" if fit else ""))
    ax.title.set_fontsize(9)
    ax.legend(fontsize=7)
    return fig


def lower_bound_figure(result: MixingResult):
    """(c) The lower bound from a good start: P_t(A) - pi(A) for A = {more customers than the
    stationary median}, from a stationary-typical state displaced to the 97.5% point of N and
    from stationary samples, against t / (n (lam d)^(k-1)); d_TV(t) is at least this gap."""
    lo = result.lower
    thr = result.parameters["lower"]["threshold"]
    fig, ax = plt.subplots(figsize=(6.6, 4.2))
    for j in range(lo.n.size):
        x = lo.times[j] / lower_time(int(lo.n[j]), int(lo.d[j]), float(lo.lam[j]))
        ax.plot(x, lo.p_good[j] - lo.pi_A[j], "-", color=f"C{j}",
                label=f"n = {int(lo.n[j])}, displaced good start")
        ax.plot(x, lo.p_stationary[j] - lo.pi_A[j], ":", color=f"C{j}",
                label=f"n = {int(lo.n[j])}, stationary start")
    ax.axhline(thr, color="grey", lw=1, label="1/4")
    ax.axvline(0.2, color="k", lw=1, ls="--", label=r"$0.2\, n (\lambda d)^{k-1}$")
    ax.set(xscale="log", ylim=(-0.15, 0.55), xlabel=r"$t \,/\, n (\lambda d)^{k-1}$",
           ylabel=r"$P_t(A) - \pi(A)$  ($\leq d_{TV}$)",
           title=r"(c) lower bound: from a good start the chain needs a time of order $n(\lambda d)^{k-1}$")
    ax.title.set_fontsize(9)
    ax.legend(fontsize=7, ncol=2, loc="upper center",
              bbox_to_anchor=(0.5, -0.16))  # below the axes, off the curves
    fig.tight_layout()
    return fig


def tail_figure(result: MixingResult):
    """(d) P(T_meet > t) against t / median on a log scale: past the median it falls at least as
    fast as the submultiplicative bound 2^(-t/m); uncoupled chains never meet."""
    T = result.tail.T[0]
    fig, ax = plt.subplots(figsize=(6.2, 4.0))
    if np.all(np.isfinite(T)):
        m = float(np.median(T))
        t = np.sort(T) / m
        surv = 1 - np.arange(1, t.size + 1) / t.size
        ax.step(t, np.maximum(surv, 0.5 / t.size), where="post",
                label=f"bottom/top coupling, {T.size} replicas")
        x = np.linspace(1, max(3.0, t.max()), 50)
        # 2^-x by the C library's pow per point: numpy's vector power differs in the last bit between
        # CPUs, which moves the antialiased pixels of the png
        ax.plot(x, [0.5 ** float(v) for v in x], "k--", lw=1, label="submultiplicative bound P(T > m)^(t/m)")
    Tu = result.tail_uncoupled.T[0]
    ax.axhline(float(np.mean(~np.isfinite(Tu) | (Tu > 0))), color="C3", ls=":",
               label="uncoupled chains: fraction not met by the cap")
    ax.set(yscale="log", xlabel="t / median(T_meet)", ylabel="P(T_meet > t)",
           title=f"(d) exponential decay past the mixing time (n = {int(result.tail.n[0])}, d = "
                 f"{int(result.tail.d[0])})")
    ax.title.set_fontsize(9)
    ax.legend(fontsize=7)
    return fig


def good_set_figure(result: MixingResult):
    """(e) Median first exit time from the good set N^eps, in relaxation times, against n; JSQ(2)
    judged against JSQ(d)'s good set leaves at once."""
    fig, ax = plt.subplots(figsize=(6.2, 4.0))
    horizon = result.parameters["good_set"]["horizon_taus"]
    for m, lab, c in ((result.exits, "JSQ(d) from the fluid point", "C0"),
                      (result.exits_jsq2, "JSQ(2), judged against JSQ(d)'s good set", "C3")):
        tau = np.array([relaxation_time(int(d), float(lam)) * steps_per_time(int(n), float(lam))
                        for n, d, lam in zip(result.exits.n, result.exits.d, result.exits.lam)])
        med = np.array([np.median(t) for t in m.T]) / tau
        shown = np.where(np.isfinite(med), med, horizon)
        ax.plot(m.n, shown, "o-", color=c, label=lab)
        never = ~np.isfinite(med)
        if never.any():
            ax.scatter(m.n[never], shown[never], marker="^", s=80, color=c, zorder=4,
                       label="more than half never left (at the horizon)")
    ax.axhline(horizon, color="grey", ls=":", lw=1)
    ax.set(xscale="log", yscale="log", xlabel="n (queues), the paper's family",
           ylabel="median first exit time / τ",
           title=f"(e) staying near equilibrium: N^ε, ε = {result.parameters['good_set']['eps']}")
    ax.legend(fontsize=7)
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


__all__ = ["regime_figure", "upper_bounds_figure", "d_scaling_figure", "lower_bound_figure", "tail_figure",
           "good_set_figure", "explore_figure"]


def regime_figure(result):
    """(f) Inside the regime (:class:`qlib.studies.mixing_regime.RegimeResult`): left, the good-start
    meeting time against d at fixed n and 1 - lam from certified starts, with d held fixed and JSQ(2)
    (at its cap when it never met) and the slope k - 1; middle, along family A, T_meet over the lower
    bound's scale n (lam d)^(k-1) and over the upper bound's k d^(k-1) n ln n; right, the integrated
    autocorrelation time of N and u_k against n d^(k-1) steps."""
    fig, axes = plt.subplots(1, 3, figsize=(13.5, 4.2))
    sw, fx, sj, fam = result.sweep, result.fixed, result.sweep_jsq2, result.family
    ax = axes[0]
    if sw.missing.any():
        ax.text(0.5, 0.5, f"not in results/long:\n{LONG_COMMAND}", ha="center", va="center",
                transform=ax.transAxes)
    else:
        for m, lab, fmt in ((sw, "JSQ(d), certified start", "o-"), (fx, "d held at its first value", "s--")):
            if np.all(np.isfinite(m.T)):
                mean, h = _mean_ci(m.T)
                ax.errorbar(sw.d, mean, yerr=h, fmt=fmt, capsize=3, label=lab)
        unmet = ~np.isfinite(sj.T).all(axis=1) & ~sj.missing
        if unmet.any():
            caps = np.array([np.nanmax(np.where(np.isfinite(t), t, np.nan), initial=0) for t in sw.T]) * \
                result.parameters["cf_cap"]
            ax.scatter(sw.d[unmet], caps[unmet], marker="v", color="C3", s=50, zorder=4,
                       label="JSQ(2): not met by the cap (at the cap)")
        if np.all(np.isfinite(sw.T)):
            k = int(sw.k.max())
            m0 = float(np.mean(sw.T[0]))
            ax.plot(sw.d, m0 * (sw.d / sw.d[0]) ** (k - 1), "k:", label=f"slope k - 1 = {k - 1}")
    ax.set(xscale="log", yscale="log", xlabel=f"d (n = {int(sw.n[0])}, 1-λ = {1 - float(sw.lam[0]):.2g})",
           ylabel="T_meet (steps)", title="(f1) T_meet against d at fixed n and 1-λ")
    ax.legend(fontsize=7)
    ax = axes[1]
    if fam.missing.any():
        ax.text(0.5, 0.5, f"not in results/long:\n{LONG_COMMAND}", ha="center", va="center",
                transform=ax.transAxes)
    else:
        for scale_fn, lab in ((lower_time, "T / (n (λd)^(k-1))  (lower bound)"),
                              (reference_time, "T / (k d^(k-1) n ln n)  (upper bound)")):
            ref = np.array([scale_fn(int(n), int(d), float(lam)) for n, d, lam in zip(fam.n, fam.d, fam.lam)])
            if np.all(np.isfinite(fam.T)):
                mean, h = _mean_ci(fam.T / ref[:, None])
                ax.errorbar(fam.n, mean, yerr=h, fmt="o-", capsize=3, label=lab)
    f = result.parameters["family"]
    ax.set(xscale="log", yscale="log", xlabel=f"n; λ = 1 - n^-{f['alpha']:g}, d = floor(n^{f['beta']:g})",
           ylabel="ratio", title="(f2) between the two bounds (family A)")
    ax.legend(fontsize=7)
    ax = axes[2]
    for m, lab, mk in ((sw, "d-sweep", "o"), (fam, "family A", "s")):
        if m.missing.any() or not np.all(np.isfinite(m.iact_N)):
            continue
        x = np.array([relaxation_scale(int(n), int(d), float(lam)) for n, d, lam in zip(m.n, m.d, m.lam)])
        for y, what, c in ((m.iact_N, "N", "C0"), (m.iact_uk, "u_k", "C2")):
            mean, h = _mean_ci(y)
            ax.errorbar(x, mean, yerr=h, fmt=mk, color=c, capsize=3, label=f"τ_int({what}), {lab}")
    lim = ax.get_xlim() if ax.has_data() else (1, 10)
    ax.plot(lim, lim, "k:", lw=1, label="τ_int = n d^(k-1)")
    ax.set(xscale="log", yscale="log", xlabel="n d^(k-1) (steps)", ylabel="integrated autocorrelation time "
           "(steps)", title="(f3) the relaxation of N")
    ax.legend(fontsize=7)
    for a in axes:
        plain_log_ticks(a)
    fig.tight_layout()
    return fig


def predicted_figure(result):
    """(h) The mixing time predicted (issue 42; :class:`qlib.studies.mixing_regime.RegimeResult`):
    left, the measured good-start meeting time against T_pred = tau_fluid ln SD(N) at every point of
    every set (the pilot d-sweep and family, the fresh family; k = 3: qlib.plots.k3), with the diagonal
    and the band [0.75, 1.33]; JSQ(d/2) from the fresh family's samples and the same times against the
    prediction with tau = 1/(1-lam) sit off it. Right, R = T_meet / T_pred along the fresh family
    with its 95% CI."""
    band = (result.parameters["claims"]["ratio_low"], result.parameters["claims"]["ratio_high"])
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11.0, 4.4))

    def pred(m, law=None):
        f = law or (lambda n, d, lam: predicted_meeting_time(n, d, lam).steps)
        return np.array([f(int(n), int(d), float(lam)) for n, d, lam in zip(m.n, m.d, m.lam)])

    def drain(n, d, lam):  # the same law with tau = 1/(1-lam): a wrong relaxation time
        t = predicted_meeting_time(n, d, lam)
        return steps_per_time(n, lam) / (1 - lam) * np.log(t.sd_N)

    sets = (
        (result.sweep, None, "d-sweep, k = 2 (pilot: suggested the law)", "o", "C0"),
        (result.family, None, "family A, k = 2 (pilot)", "s", "C0"),
        (result.predicted_family, None, "family A, fresh seeds", "D", "C2"),
        (result.predicted_family_half, "half", "JSQ(d/2) (wrong), against T_pred of JSQ(d)", "x", "C3"),
        (result.predicted_family, drain, "family A against τ = 1/(1-λ) (wrong)", "v", "C7"),
    )
    lo, hi = np.inf, 0.0
    missing = []
    for m, law, lab, mk, c in sets:
        if m is None or m.missing.any() or not np.all(np.isfinite(m.T)):
            missing.append(lab)
            continue
        # JSQ(d/2)'s entries carry d/2: it is judged against T_pred of the JSQ(d) it stands in for
        x = pred(result.predicted_family) if law == "half" else pred(m, law)
        mean, h = _mean_ci(m.T)
        ax.errorbar(x, mean, yerr=h, fmt=mk, color=c, capsize=3, label=lab, ls="none")
        lo, hi = min(lo, x.min(), mean.min()), max(hi, x.max(), mean.max())
    if hi > 0:
        lim = np.array([lo / 3, hi * 3])
        ax.plot(lim, lim, "k-", lw=1, label="T_meet = T_pred")
        ax.fill_between(lim, band[0] * lim, band[1] * lim, color="k", alpha=0.08,
                        label=f"R in [{band[0]:g}, {band[1]:g}]")
    if missing:
        ax.text(0.98, 0.02, "not in results/long: " + "; ".join(missing) + f"\n({LONG_COMMAND})",
                ha="right", va="bottom", fontsize=6, transform=ax.transAxes)
    ax.set(xscale="log", yscale="log", xlabel="T_pred = τ_fluid ln SD(N) (steps)", ylabel="T_meet (steps)",
           title="(h1) measured against predicted")
    ax.legend(fontsize=6.5, loc="upper left")
    m = result.predicted_family
    if m is not None and not m.missing.any() and np.all(np.isfinite(m.T)):
        mean, h = _mean_ci(m.T / pred(m)[:, None])
        bx.errorbar(m.n, mean, yerr=h, fmt="D-", color="C2", capsize=3, label="JSQ(d)")
        hm = result.predicted_family_half
        if hm is not None and not hm.missing.any() and np.all(np.isfinite(hm.T)):
            mh, hh = _mean_ci(hm.T / pred(m)[:, None])
            bx.errorbar(m.n, mh, yerr=hh, fmt="x--", color="C3", capsize=3, label="JSQ(d/2) (wrong)")
    else:
        bx.text(0.5, 0.5, f"not in results/long:\n{LONG_COMMAND}", ha="center", va="center",
                transform=bx.transAxes)
    bx.axhspan(band[0], band[1], color="k", alpha=0.08)
    bx.axhline(1, color="k", lw=1)
    f = result.parameters["predicted"]["family"]
    bx.set(xscale="log", xlabel=f"n; λ = 1 - n^-{f['alpha']:g}, d = floor(n^{f['beta']:g})",
           ylabel="R = T_meet / T_pred", title="(h2) R along family A (fresh seeds)")
    bx.legend(fontsize=7)
    for a in (ax, bx):
        plain_log_ticks(a)
    fig.tight_layout()
    return fig


from qlib.plots import style_figures  # noqa: E402

style_figures(globals())  # the house style inside every *_figure (no global rcParams)

