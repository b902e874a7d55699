"""The fluctuations study's claims as data (:data:`CLAIMS`) and the functions that build their rows.

Each row compares a measured ratio with its linear-noise prediction point by point; the wrong models
are wrong *predictions* set against the same measurements (JSQ(d/2) and JSQ(d - 1): the linear-noise
view at the model's d; the scale 1/(1-lam): SD(N) = sqrt(n lam)/(1-lam), n independent M/M/1
queues; for tau_int, the old estimator on the old design: the same series cut into pieces of
10 n d^(k-1) steps, each with its own mean, Sokal's window c = 5)."""

from __future__ import annotations

import dataclasses

import numpy as np

from qlib import stats
from qlib.claims import ClaimRow, ClaimSpec, Counterfactual, combine, decide_band
from qlib.studies.fluctuations.compute import FluctPoint, FluctuationsResult
from qlib.studies.wrong_models import WRONG_MODELS, resolution

REF = "docs/models.md#linear-noise (issue 40; the refined mean field of Gast & Van Houdt 2017)"


def _where(p: FluctPoint) -> str:
    n = f"{p.n:.0e}".replace("e+0", "e")
    return f"{p.where} n={n} d={p.d}"


def _ratio_ci(values: np.ndarray, pred: float) -> tuple[float, float, float]:
    """(mean, low, high) of values/pred, the 95% Student-t interval over replicas (or pieces)."""
    e = stats.replica_mean(np.asarray(values, float) / pred)
    lo, hi = e.interval(0.95)
    return float(e.mean), float(lo), float(hi)


def _band(points: list, values, preds, tol: float) -> tuple[str, list[str], list[float]]:
    """Per point: the band verdict of values/pred within 1 +- tol; (combined verdict, texts, means)."""
    verdicts, texts, means = [], [], []
    for p, v, pr in zip(points, values, preds):
        m, lo, hi = _ratio_ci(v, pr)
        verdicts.append(decide_band(lo, hi, 1 - tol, 1 + tol))
        texts.append(f"{_where(p)}: {m:.3f} ({lo:.3f} to {hi:.3f})")
        means.append(m)
    return (combine(verdicts) if verdicts else "INCONCLUSIVE"), texts, means


def _missing(points: list) -> str:
    """The points results/long lacks, with the command once (each point's text names it)."""
    miss = [p for p in points if p.missing]
    if not miss:
        return ""
    return ", ".join(_where(p) for p in miss) + f" ({miss[0].missing})"


def _cf(model: str, label: str, verdict: str, means: list[float], near: bool) -> Counterfactual:
    """The criterion on a wrong model: it counts as told apart only where it FAILS (an INCONCLUSIVE
    wrong model is not told apart), as in the other studies."""
    return Counterfactual(model=label, measured=f"{verdict}: ratios " + ", ".join(f"{m:.2f}" for m in means),
                          passed=verdict != "FAIL", value=float(np.mean(means)) if means else None, near=near)


def _sd_rows(result: FluctuationsResult, spec: ClaimSpec) -> list[ClaimRow]:
    """SD(N)/SD_pred(N) at every in-regime point, within 1 +- sd_tol; wrong predictions on the same data."""
    P = result.parameters
    tol = spec.values(P)["sd_tol"]
    pts = result.inside()
    S = P["sd"]
    base = dict(claim=spec.claim, kind="claim", criterion=spec.criterion_text(P),
                threshold=spec.threshold_text(P), reference=spec.reference,
                start=f"the fluid point, {P['burn_tau']:g} fluid relaxation times of burn-in",
                theory="SD(N) = sqrt(n 1^T W 1 + 1^T covariance2 1) (linear noise with its 1/n term): "
                       + ", ".join(f"{_where(p)}: {p.pred['sd']:.1f}" for p in pts),
                parameters=f"{len(pts)} in-regime points (families A-C, the in-regime sweep; the mixing "
                           f"family is family A); {S['replicas']} replicas x {S['tau_per_replica']:g} "
                           "predicted tau_int(N) each"
                           + (f"; {result.provenance}" if result.provenance else ""))
    miss = _missing(pts)
    pts = [p for p in pts if p.sd is not None]
    if not pts:
        return [ClaimRow(**base, measured=miss or "no in-regime point", passed=False, outcome="INCONCLUSIVE")]
    # a point results/long lacks leaves the row undecided, unless a measured point already FAILS it
    verdict, texts, _ = _band(pts, [p.sd for p in pts], [p.pred["sd"] for p in pts], tol)
    verdict = combine([verdict] + (["INCONCLUSIVE"] if miss else []))
    cfs = []
    for key in ("half_d", "d-1"):
        v, _, m = _band(pts, [p.sd for p in pts], [p.pred[f"sd_{key}"] for p in pts], tol)
        cfs.append(_cf(key, WRONG_MODELS[key].label, v, m, near=not WRONG_MODELS[key].far))
    v, _, m = _band(pts, [p.sd for p in pts], [p.pred["scale"] for p in pts], tol)
    cfs.append(_cf("scale", "the scale 1/(1-lam): SD(N) = sqrt(n lam)/(1-lam)", v, m, near=False))
    lna = ", ".join(f"{float(np.mean(p.sd)) / p.pred['sd_lna']:.3f}" for p in pts)
    return [ClaimRow(**base, measured="SD(N)/SD_pred(N), 95% CI: " + "; ".join(texts)
                     + f". Against sqrt(n 1^T W 1) alone: {lna}"
                     + (f". Not yet measured: {miss}" if miss else ""),
                     passed=verdict == "PASS", outcome=verdict, counterfactuals=tuple(cfs),
                     taus=min(p.sd_taus for p in pts), resolution=resolution(cfs))]


def _tau_rows(result: FluctuationsResult, spec: ClaimSpec) -> list[ClaimRow]:
    """tau_int(N)/tau_int,LNA(N) at the in-regime points of the tau design, within 1 +- tau_tol."""
    P = result.parameters
    tol = spec.values(P)["tau_tol"]
    T = P["tau"]
    pts = [p for p in result.inside() if p.n <= T["n_max"]]
    base = dict(claim=spec.claim, kind="claim", criterion=spec.criterion_text(P),
                threshold=spec.threshold_text(P), reference=spec.reference,
                start=f"the fluid point, {P['burn_tau']:g} fluid relaxation times of burn-in",
                theory="tau_int(N) = 2 n (1+lam) 1^T (-A)^-1 W 1 / 1^T W 1 steps: "
                       + ", ".join(f"{_where(p)}: {p.pred['tau']:.3g}" for p in pts),
                parameters=f"the {len(pts)} in-regime points with n <= {T['n_max']}; "
                           f"{T['replicas']} replicas x {T['tau_per_replica']:g} predicted tau_int(N), "
                           f"Sokal's window c = {T['window']:g}"
                           + (f"; {result.provenance}" if result.provenance else ""))
    miss = _missing(pts)
    pts = [p for p in pts if p.tau is not None]
    if not pts:
        return [ClaimRow(**base, measured=miss or "no in-regime point", passed=False, outcome="INCONCLUSIVE")]
    verdict, texts, _ = _band(pts, [p.tau for p in pts], [p.pred["tau"] for p in pts], tol)
    verdict = combine([verdict] + (["INCONCLUSIVE"] if miss else []))
    cfs = []
    for key in ("half_d", "d-1"):
        v, _, m = _band(pts, [p.tau for p in pts], [p.pred[f"tau_{key}"] for p in pts], tol)
        cfs.append(_cf(key, WRONG_MODELS[key].label, v, m, near=not WRONG_MODELS[key].far))
    O = P["old_design"]
    v, otexts, m = _band(pts, [p.tau_old for p in pts], [p.pred["tau"] for p in pts], tol)
    cfs.append(_cf("old_design", f"the old estimator on the old design ({O['length']:g} n d^(k-1) steps per "
                   f"series, own mean, c = {O['window']:g})", v, m, near=False))
    return [ClaimRow(**base, measured="tau_int(N)/tau_int,LNA(N), 95% CI: " + "; ".join(texts)
                     + (f". Not yet measured: {miss}" if miss else ""),
                     passed=verdict == "PASS", outcome=verdict, counterfactuals=tuple(cfs),
                     taus=float(T["tau_per_replica"]), resolution=resolution(cfs))]


def _finding_rows(result: FluctuationsResult, spec: ClaimSpec) -> list[ClaimRow]:
    """The same ratios outside H0-H3 (D, E, K3 and any family point outside): findings."""
    P = result.parameters
    pts = result.outside()
    base = dict(claim=spec.claim, kind="measurement", criterion=spec.criterion_text(P),
                threshold=spec.threshold_text(P), reference=spec.reference, outcome="finding",
                theory="the linear-noise view; its own convergence check |1^T covariance2 1|/(n 1^T W 1): "
                       + ", ".join(f"{_where(p)}: {p.pred['order2_ratio']:.2f}" for p in pts),
                parameters=f"{len(pts)} points outside H0-H3; the SD design"
                           + (f"; {result.provenance}" if result.provenance else ""))
    miss = _missing(pts)
    pts = [p for p in pts if p.sd is not None]
    if not pts:
        return [ClaimRow(**base, measured=miss or "no point outside", passed=False)]
    parts = []
    for p in pts:
        s, slo, shi = _ratio_ci(p.sd, p.pred["sd_lna"])
        t, tlo, thi = _ratio_ci(p.tau_sd, p.pred["tau"])
        bad = ",".join(x for x in ("H0", "H1", "H2", "H3") if not p.hyp[x])
        parts.append(f"{_where(p)} [outside {bad}]: SD(N)/sqrt(n 1^T W 1) {s:.3f} ({slo:.3f} to {shi:.3f}), "
                     f"tau_int/tau_LNA {t:.2f} ({tlo:.2f} to {thi:.2f})")
    return [ClaimRow(**base, measured="; ".join(parts) + (f". Not yet measured: {miss}" if miss else ""),
                     passed=False, taus=min(p.sd_taus for p in pts))]


#: The study's claims as data (thresholds under PARAMETERS[mode]["claims"], committed before the run).
CLAIMS: dict[str, ClaimSpec] = {
    "sd_lna": ClaimSpec(
        key="sd_lna",
        claim="SD(N) in equilibrium is the linear-noise prediction sqrt(n 1^T W 1) (with its 1/n term) at "
              "every point inside H0-H3",
        criterion="at every in-regime point the 95% CI (over replicas) of SD(N)/SD_pred(N) lies within "
                  "1 +- {sd_tol:g} (PASS); one CI wholly outside (FAIL); else INCONCLUSIVE. Points inside "
                  "H0-H3: c = (1-lam) d^(k-1) <= {c_max:g}, gamma > {gamma_min:g} on a family, buffer "
                  "n (1-lam)^2 d^(k-1) >= {buffer_min:g} on the sweep",
        thresholds=(("sd_tol",), ("hypotheses", "c_max"), ("hypotheses", "gamma_min"),
                    ("hypotheses", "buffer_min")),
        threshold="every CI within 1 +- {sd_tol:g} (claims.sd_tol)",
        wrong_models=("half_d", "d-1"),
        controls=("scale",),
        rows=_sd_rows,
        reference=REF,
    ),
    "tau_lna": ClaimSpec(
        key="tau_lna",
        claim="the integrated autocorrelation time of N is the linear-noise 2 n (1+lam) 1^T (-A)^-1 W 1 / "
              "1^T W 1 steps at the points inside H0-H3",
        criterion="at every in-regime point of the tau design the 95% CI (over replicas) of "
                  "tau_int(N)/tau_int,LNA(N) (Sokal's 1 + 2 sum rho) lies within 1 +- {tau_tol:g} "
                  "(PASS); one CI wholly outside (FAIL); else INCONCLUSIVE",
        thresholds=(("tau_tol",),),
        threshold="every CI within 1 +- {tau_tol:g} (claims.tau_tol)",
        wrong_models=("half_d", "d-1"),
        controls=("old_design",),
        rows=_tau_rows,
        reference=REF,
    ),
    "outside": ClaimSpec(
        key="outside",
        claim="SD(N) and tau_int(N) against the linear-noise view outside H0-H3 (families D, E, K3)",
        criterion="a finding: the ratios with their 95% CIs, beside the band 1 +- {sd_tol:g} of the "
                  "in-regime row",
        thresholds=(("sd_tol",),),
        threshold="none (a finding); the in-regime band is 1 +- {sd_tol:g}",
        rows=_finding_rows,
        reference=REF,
    ),
}


def claim_rows(result: FluctuationsResult) -> list[ClaimRow]:
    """The rows of every spec of :data:`CLAIMS`, in order."""
    rows = [r for spec in CLAIMS.values() for r in spec.rows(result, spec)]
    return [dataclasses.replace(r) for r in rows]
