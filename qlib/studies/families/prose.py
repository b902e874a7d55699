"""The families study's prose: notebook 01's methods paragraph and findings, rendered from PARAMETERS
and the result, and :func:`summary`, the numbers as a table."""

from __future__ import annotations

from typing import Any

from qlib.studies import check_mode
from qlib.studies.families.claims import claim_rows
from qlib.studies.families.compute import FamiliesResult
from qlib.studies.families.parameters import PARAMETERS
from qlib.supermarket import fluid_fixed_point


def methods_markdown(mode: str) -> str:
    """Notebook 01's scaling-families paragraph, its numbers read from PARAMETERS[mode] (the
    thresholds fixed before the run, the run lengths)."""
    P = PARAMETERS[check_mode(mode)]
    H, C, sd = P["claims"]["hypotheses"], P["claims"], P["sd"]
    d0 = [f for f in P["families"].values() if abs(1 - 2 * f["alpha"] + f["beta"]) < 1e-12]
    zero = (f"The family α = {d0[0]['alpha']:g}, β = {d0[0]['beta']:g} of (c) has γ = 0. " if d0 else "")
    return ("Brightwell, Fairthorne & Luczak state the concentration for λ = 1 − n^(−α), d = ⌊n^β⌋ and "
            "\"suitable pairs\" (α, β) (`docs/models.md#scaling-families`). The pairs are not spelled out in "
            "what this project could read, so `qlib.studies.families` states working hypotheses and checks "
            f"them at every point (`docs/models.md#hypotheses`): H0 k = ⌈α/β⌉ away from the boundary; H1 c = "
            f"(1−λ)d^(k−1) ≤ {H['c_max']:g}; H2 the fluid maximum is k at this n; H3 γ = 1 − 2α + (k−1)β > "
            f"{H['gamma_min']:g}. H3 is a heuristic: the number of customers N makes excursions of order "
            "√(n d^(k−1)) above its mean (it relaxes over about d^(k−1) time units), absorbed by the "
            "n(1−λ)d^(k−1) queues shorter than k; buffer over excursion is n^(γ/2). " + zero +
            "Rows inside H0–H3 are decided against thresholds fixed in `families.PARAMETERS` before the run "
            f"(P(max = k) ≥ {C['p_min']:g} at the largest n and a falling P(max ≠ k); the fraction at k ≥ 1 "
            f"− {C['slack']:g}(1−λ)d^(k−1)); rows outside are findings. Every point: `estimate_equilibrium` "
            f"from empty, {P['burn_taus']:g} τ of burn-in, {P['batches']} batch(es) of {P['batch_taus']:g} "
            f"τ, {P['replicas']} replicas; the standard deviation of N from {sd['replicas']} more replicas "
            f"recorded over {sd['taus']:g} τ ({mode} mode).")


def long_points_markdown(result: FamiliesResult) -> str:
    """Where the long tier's points of the families come from (results/long, with provenance), or
    which are missing and the command that computes them ("" when the mode has none)."""
    L = result.parameters["long"]["ns"]
    if not L:
        return ""
    ns = sorted({n for v in L.values() for n in v})
    parts = []
    for f in result.families:
        if f.name in L:
            parts.append(f"{f.name}: " + (f"**missing** {'; '.join(f'n = {n}: {w}' for n, w in f.missing)}"
                                          if f.missing else f.provenance))
    return (f"The long tier's points (n = {', '.join(f'{n:,}' for n in ns)} for families "
            f"{', '.join(L)}) are read from `results/long/`, never computed here: " + "; ".join(parts) + ".")


def summary_table(result: FamiliesResult) -> list[dict[str, Any]]:
    """One dict per (family, n): the numbers the notebook and the report quote."""
    out = []
    for f in result.families:
        for j in range(f.ns.size):
            p, lo, hi = f.p_k(j)
            p1 = f.p_k1(j)
            s = fluid_fixed_point(int(f.est.d[j]), float(f.est.lam[j]), f.k + 2)
            out.append(dict(family=f.name, alpha=f.alpha, beta=f.beta, k=f.k, gamma=f.gamma, n=int(f.ns[j]),
                            d=int(f.est.d[j]), p_k=p, p_k_low=lo, p_k_high=hi, p_k1=p1[0], p_k1_low=p1[1],
                            p_k1_high=p1[2], frac_k=float(f.est.p[j, f.k]),
                            frac_k_low=float(f.est.p_low[j, f.k]),
                            frac_k_high=float(f.est.p_high[j, f.k]), c=f.c(j),
                            tail_k1=float(f.est.tail[j, f.k + 1]), fluid_k1=float(s[f.k + 1]),
                            sd_n=float(f.sd.sd[j].mean()), excursion=f.excursion(j), buffer=f.buffer(j),
                            inside=bool(f.inside(j)), taus=float(f.est.taus[j])))
    return out


def findings_markdown(result: FamiliesResult) -> str:
    """The notebook's "what the families show", rendered from the result (no number typed by hand)."""
    rows = summary_table(result)
    lines = ["| family | alpha, beta | k | gamma | n | d | P(max = k) (95% CI) | P(max = k+1) | fraction at "
             "k | 1 - 2c | E[u_(k+1)]/n / fluid s_(k+1) | SD(N)/√(n d^(k-1)) | buffer/SD(N) | H0-H3 |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = r["tail_k1"] / r["fluid_k1"] if r["fluid_k1"] > 0 else float("inf")
        lines.append(f"| {r['family']} | {r['alpha']:g}, {r['beta']:g} | {r['k']} | {r['gamma']:+.2f} | "
                     f"{r['n']} | {r['d']} | {r['p_k']:.3f} ({r['p_k_low']:.3f} to {r['p_k_high']:.3f}) | "
                     f"{r['p_k1']:.3f} | {r['frac_k']:.3f} | {1 - 2 * r['c']:.3f} | {ratio:.3g} | "
                     f"{r['sd_n'] / r['excursion']:.2f} | {r['buffer'] / r['sd_n']:.2g} | "
                     f"{'yes' if r['inside'] else 'no'} |")
    rws = claim_rows(result)
    conc = [r for r in rws if r.claim.startswith("the maximum")]
    lines += ["", "Verdicts of the concentration rows, fixed criteria (see the claims table): "
              + "; ".join(f"{f.name}: **{r.verdict}**" for f, r in zip(result.families, conc)) + "."]
    return "\n".join(lines)


def summary(result: FamiliesResult):
    """:func:`summary_table` as a pandas DataFrame: one row per (family, n).

    Args:
        result: a :class:`FamiliesResult`.

    Returns:
        A DataFrame whose columns are the keys of :func:`summary_table` (P(max = k) and P(max = k + 1)
        with CIs, the fraction at k, c, the tail at k + 1 against the fluid value, SD(N), buffer,
        excursion, whether the hypotheses hold, the relaxation times measured).
    """
    import pandas as pd

    return pd.DataFrame(summary_table(result))
