"""Figures of the scaling-families section of notebook 01 (:mod:`qlib.studies.families`).

Each ``*_figure`` takes the :class:`qlib.studies.families.FamiliesResult` and returns a
matplotlib Figure; error bars are 95% confidence intervals of the equilibrium estimates.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from qlib.plots import plain_log_ticks
from qlib.studies.families import FamiliesResult

_MARKERS = "osD^vP<>X*"


def _err(y, lo, hi):
    return np.vstack([np.maximum(y - lo, 0.0), np.maximum(hi - y, 0.0)])


def _label(f) -> str:
    return f"{f.name}: $\\alpha$={f.alpha:g}, $\\beta$={f.beta:g} ($k$={f.k}, $\\gamma$={f.gamma:+.2f})"


def concentration_families_figure(result: FamiliesResult):
    """(f1) P(max = k) against n, one line per family, with 95% CIs (filled markers where the
    point is inside the hypotheses H0-H3, open outside); dashed: the 0.95 threshold."""
    fig, ax = plt.subplots(figsize=(8.4, 4.4))
    for i, f in enumerate(result.families):
        p = np.array([f.p_k(j) for j in range(f.ns.size)])
        line = ax.errorbar(f.ns, p[:, 0], yerr=_err(p[:, 0], p[:, 1], p[:, 2]), marker=_MARKERS[i % 10],
                           capsize=3, ls="-" if f.gamma > 0 else "--", label=_label(f))
        out = [j for j in range(f.ns.size) if not f.inside(j)]
        if out:
            ax.scatter(f.ns[out], p[out, 0], s=90, facecolors="white", edgecolors=line[0].get_color(),
                       zorder=4, marker=_MARKERS[i % 10])
    p_min = result.parameters["claims"]["p_min"]
    ax.axhline(p_min, color="k", ls=":", lw=1, label=f"pre-set threshold {p_min:g}")
    ax.set(xscale="log", xlabel="$n$", ylabel=r"$P(\max = k)$", ylim=(-0.02, 1.02),
           title="$\\lambda = 1 - n^{-\\alpha}$, $d = \\lfloor n^\\beta \\rfloor$: fraction of time the "
                 "longest queue is $k$\n(open markers: outside the hypotheses H0–H3)")
    ax.title.set_fontsize(9.5)
    plain_log_ticks(ax)
    ax.legend(fontsize=7.5, loc="center left", bbox_to_anchor=(1.01, 0.5))  # beside the data, never on it
    fig.tight_layout()
    return fig


def family_map_figure(result: FamiliesResult):
    """(f2) The (α, β) plane: lines α/β = j (k jumps; (k−1)β = α is the line j = k − 1), the lines
    γ = 0 (α = (1 + (k−1)β)/2) for k = 2, 3, and each family's marker coloured by P(max = k) at its
    largest n."""
    fig, ax = plt.subplots(figsize=(6.4, 5.2))
    b = np.linspace(0.05, 1.0, 200)
    for j in (1, 2, 3):
        ax.plot(b, j * b, "k-", lw=0.8, alpha=0.6)
        bl = min(0.95 / j, 0.70)
        ax.text(bl + 0.01, j * bl - 0.02, f"$\\alpha/\\beta = {j}$", fontsize=7.5, ha="left", va="top")
    for k in (2, 3):
        lo, hi = (k - 1) * b, k * b  # the band where ceil(alpha/beta) = k
        a = (1 + (k - 1) * b) / 2
        ok = (a >= lo) & (a <= hi) & (a <= 1)
        ax.plot(b[ok], a[ok], "r--", lw=1.2, label=r"$\gamma = 0$ ($k$ = 2, 3)" if k == 2 else None)
    sc = None
    for i, f in enumerate(result.families):
        pk = f.p_k(f.ns.size - 1)[0]
        sc = ax.scatter([f.beta], [f.alpha], c=[pk], cmap="RdYlGn", vmin=0, vmax=1, s=110, edgecolors="k",
                        marker=_MARKERS[i % 10], zorder=3)
        ax.annotate(f"{f.name} (n={int(f.ns[-1]):.0e})".replace("e+0", "e"), (f.beta, f.alpha),
                    textcoords="offset points", xytext=(6, 4), fontsize=8)
    fig.colorbar(sc, ax=ax).set_label(r"$P(\max = k)$ at the family's largest $n$")
    ax.set(xlim=(0.2, 0.75), ylim=(0.35, 1.0), xlabel=r"$\beta$ ($d = \lfloor n^\beta \rfloor$)",
           ylabel=r"$\alpha$ ($1 - \lambda = n^{-\alpha}$)",
           title=r"families over $(\alpha, \beta)$: $\gamma = 1 - 2\alpha + (k-1)\beta > 0$ below the red "
                 r"line")
    ax.title.set_fontsize(9.5)
    ax.legend(fontsize=8, loc="lower right")
    return fig


def buffer_figure(result: FamiliesResult):
    """(f3) Left: P(max ≠ k) against buffer/excursion sqrt(n (1−λ)² d^(k−1)) = n^(γ/2); right: the
    measured standard deviation of N over the excursion scale sqrt(n d^(k−1)), with the pre-set band."""
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10.5, 4.2))
    for i, f in enumerate(result.families):
        x = np.array([h["buffer_over_excursion"] for h in f.hyp])
        p = np.array([f.p_k(j) for j in range(f.ns.size)])
        q, qlo, qhi = 1 - p[:, 0], 1 - p[:, 2], 1 - p[:, 1]
        floor = 1e-4
        ax.errorbar(x, np.maximum(q, floor), yerr=_err(np.maximum(q, floor), np.maximum(qlo, floor),
                                                         np.maximum(qhi, floor)),
                    marker=_MARKERS[i % 10], capsize=3, ls="-", label=_label(f))
        sd = f.sd.sd.mean(axis=1) / np.array([f.excursion(j) for j in range(f.ns.size)])
        ax2.plot(x, sd, marker=_MARKERS[i % 10], ls="-", label=f.name)
    xlabel = r"buffer / excursion $= \sqrt{n (1-\lambda)^2 d^{k-1}}$"
    ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=r"$P(\max \neq k)$",
           title="the maximum leaves $k$ less often as the buffer grows")
    ax.legend(fontsize=7)
    band = result.parameters["claims"]["sd_band"]
    for y in (band["low"], band["high"]):
        ax2.axhline(y, color="k", ls=":", lw=1)
    ax2.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=r"SD$(N) / \sqrt{n d^{k-1}}$",
            title=r"SD of $N$ over $\sqrt{n d^{k-1}}$ (dotted: pre-set band)")
    ax2.legend(fontsize=8, loc="upper right", bbox_to_anchor=(1.0, 0.92))
    for a in (ax, ax2):
        plain_log_ticks(a)
    fig.tight_layout()
    return fig


__all__ = ["concentration_families_figure", "family_map_figure", "buffer_figure"]


from qlib.plots import style_figures  # noqa: E402

style_figures(globals())  # the house style inside every *_figure (no global rcParams)
