"""Figures of the fluctuations study (issue 40): SD(N) and the autocorrelation of N, measured against
the linear-noise prediction. Error bars are 95% Student-t intervals over independent replicas. Each
``*_figure`` takes the :class:`qlib.studies.fluctuations.FluctuationsResult`."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from qlib import stats
from qlib.supermarket.regime import fluctuation_view


def _ci(values, pred):
    e = stats.replica_mean(np.asarray(values, float) / pred)
    return float(e.mean), float(e.halfwidth())


def sd_figure(result):
    """SD(N) measured against predicted (sqrt(n 1^T W 1 + 1^T covariance2 1)) at every point that has
    a measurement, as ratio measured/predicted against the predicted SD(N): inside H0-H3 (filled),
    outside (open), the pre-set band 1 +- sd_tol, and the same measurements against the wrong
    predictions JSQ(d/2) and sqrt(n lam)/(1-lam) (grey), which lie off the line."""
    tol = result.parameters["claims"]["sd_tol"]
    fig, ax = plt.subplots(figsize=(6.8, 4.4))
    for p in result.points:
        if p.sd is None:
            continue
        m, h = _ci(p.sd, p.pred["sd"])
        ax.errorbar(p.pred["sd"], m, yerr=h, fmt="o", color="C0" if p.inside else "C1",
                    mfc="C0" if p.inside else "none", ms=5, capsize=2)
        for key, mk in (("sd_half_d", "v"), ("scale", "x")):
            ax.plot(p.pred["sd"], float(np.mean(p.sd)) / p.pred[key], mk, color="0.55", ms=5)
    ax.axhline(1.0, color="k", lw=1)
    ax.axhspan(1 - tol, 1 + tol, color="C2", alpha=0.12, label=f"criterion 1 ± {tol:g}")
    ax.plot([], [], "o", color="C0", label="inside H0-H3")
    ax.plot([], [], "o", color="C1", mfc="none", label="outside (D, E, K3, small n)")
    ax.plot([], [], "v", color="0.55", label="against JSQ(d/2)'s prediction")
    ax.plot([], [], "x", color="0.55", label=r"against $\sqrt{n\lambda}/(1-\lambda)$")
    ax.set(xscale="log", yscale="log", xlabel="predicted SD(N) (linear noise, with its 1/n term)",
           ylabel="measured SD(N) / predicted")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


def acf_figure(result):
    """The autocorrelation of N measured (tau design, averaged over replicas) against the linear-noise
    n 1^T e^(At) W 1 / n 1^T W 1, lags in units of the predicted tau_int(N); JSQ(d/2)'s prediction
    dashed. A point without a tau-design measurement is drawn as theory only."""
    fig, ax = plt.subplots(figsize=(6.8, 4.4))
    drawn = 0
    for j, p in enumerate(q for q in result.points if q.acf is not None):
        ln = fluctuation_view(p.n, p.d, p.lam)
        lag = np.arange(p.acf.size) * p.acf_every
        x = lag / p.pred["tau"]
        c = f"C{j % 10}"
        ax.plot(x, p.acf, ".", color=c, ms=2, label=f"{p.where} n={p.n} d={p.d}")
        ax.plot(x, ln.autocorrelation_steps(lag), "-", color=c, lw=1)
        wrong = fluctuation_view(p.n, max(2, p.d // 2), p.lam)
        ax.plot(x, wrong.autocorrelation_steps(lag), "--", color=c, lw=0.8)
        drawn += 1
    ax.set(xlabel="lag / predicted τ_int(N)", ylabel="autocorrelation of N", xlim=(0, 3), ylim=(-0.05, 1.02))
    ax.plot([], [], "-", color="k", lw=1, label=r"linear noise $1^T e^{At} W 1 / 1^T W 1$")
    ax.plot([], [], "--", color="k", lw=0.8, label="JSQ(d/2)'s prediction")
    ax.legend(fontsize=6, loc="upper right", ncol=1 + drawn // 6)
    fig.tight_layout()
    return fig


__all__ = ["sd_figure", "acf_figure"]
