"""Study: the level-flow identity at every claim point, and the near wrong models it rejects.

In equilibrium, for every n and every level j >= 1 (docs/models.md#level-flow),

    E[u_j] = lam n E[g(u_{j-1})],   g(u) = (u/n)^d (with replacement; C(u, d)/C(n, d) without),

because the arrival flow into level j, lam n (g(u_{j-1}) - g(u_j)), balances the departure flow
u_j - u_{j+1} level by level. It holds only for JSQ(d) with that sampling rule, so it is the
sharpest test the simulator can pass: its rows check the simulated chain against the model at
every level j = 1..k+1 of every point where a claim row of the supermarket studies simulates
(:func:`claim_points`; :func:`run` takes any list of points as well).

Each point is simulated with the level-flow sums of the kernel (``flows=True``) from the fluid
fixed point, burnt in ``burn_taus`` relaxation times, then measured ``taus`` tau; the paired
residual Z_j = u_j/n - lam g(u_{j-1}) (time averages) has its standard error over replicas. The
row PASSes when |Z_j| <= ``threshold`` (5) SE at every level. The same criterion, computed the
same way at the same point (the model's tau, fewer replicas), runs on every near wrong model of
:mod:`qlib.supermarket.variants`: each is recorded as a near counterfactual with its largest
|Z_j|/SE (``se_distance``), and FAILs the identity when that exceeds the threshold; where it does
not, the row says the variant cannot be told apart there. eta-greedy runs at the smallest eta of
``eta_ladder`` whose predicted residual (first order in eta, from the model's own run:
lam eta E[u_{j-1}/n - g(u_{j-1})]) is ``eta_margin`` x the threshold in SE at some level.

Every set of runs draws from its own named stream (:func:`qlib._rng.named_seed`).

The study's shape (see :mod:`qlib.studies`): :data:`PARAMETERS`, :data:`CLAIMS`, :func:`run`,
:func:`claim_rows`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from qlib._rng import named_seed
from qlib.claims import ClaimRow, ClaimSpec, Counterfactual
from qlib.config import scale
from qlib.studies import check_mode
from qlib.studies import families as fs
from qlib.studies import max_length as ml
from qlib.studies import mixing as mx
from qlib.supermarket import predicted_max_length, relaxation_time, simulate_many
from qlib.supermarket.point import PointTuple
from qlib.supermarket.regime import family_point
from qlib.supermarket.simulation import SupermarketResult
from qlib.supermarket.theory import steps_per_time
from qlib.supermarket.variants import NEAR, NEAR_MODELS, name_of

#: The threshold of the identity rows, fixed before the run (both modes): |Z_j| within this many
#: standard errors at every level (and a near wrong model told apart beyond it).
CLAIM_THRESHOLDS: dict[str, float] = dict(threshold=5.0)

#: Every parameter of the study, per mode. ``points``: which studies' claim points to take
#: (:func:`claim_points`), at most ``max_points`` of them (None: all). Run lengths in tau of the
#: point (full mode times --scale); the variants run ``variant_replicas`` replicas over
#: ``variant_taus`` tau.
PARAMETERS: dict[str, dict[str, Any]] = {
    "smoke": dict(points=("max_length",), max_points=1, replicas=4, burn_taus=0.5, taus=1.0,
                  variant_replicas=4, variant_taus=1.0, claims=CLAIM_THRESHOLDS,
                  eta_ladder=(0.3, 0.1, 0.03, 0.01), eta_margin=2.0, max_steps=4_000_000),
    # The make-figures budget binds (about 32 min of a quiet 2-core machine): JSQ(d) at every claim point of
    # max_length, mixing and families (the families' 16 points cost ~4e8 replica-steps in a kernel
    # of their own); the near wrong models at the five points ``variant_at`` (n, d, 1-lam),
    # where the development run (all 19 points) saw each of them resolved (d -+ 1 at the
    # boundary, the other sampling rule at d = 500, the departure rank at the profile point and on
    # the family at n = 1e3, eta-greedy at the finite-n point); the variants at every point from
    # --scale 2 (``scaled_from``).
    "full": dict(points=("max_length", "mixing", "families"), max_points=None, replicas=8, burn_taus=2.0,
                 taus=4.0, variant_replicas=4, variant_taus=1.0, claims=CLAIM_THRESHOLDS,
                 eta_ladder=(0.3, 0.1, 0.03, 0.01, 0.003, 0.001, 3e-4, 1e-4), eta_margin=2.0,
                 max_steps=60_000_000,
                 variant_at=[(10_000, 20, 2e-3), (1_000, 31, 1_000 ** -0.75), (10_000, 500, 1e-3),
                             (10_000, 10, 1e-2), (3_000, 100, 1e-3)],
                 scaled_from=2.0, scaled_points=("max_length", "mixing", "families")),
}


def _variant_mask(pts: list[PointTuple], P: dict) -> list[bool]:
    """Which points run the near wrong models: all, or those of ``variant_at`` (below --scale
    ``scaled_from``), matched on (n, d) and 1 - lam to 1e-9 relative."""
    at = P.get("variant_at")
    if at is None or scale() >= P.get("scaled_from", math.inf):
        return [True] * len(pts)
    return [any(n == a[0] and d == a[1] and abs((1 - lam) - a[2]) <= 1e-9 * a[2] for a in at)
            for n, d, lam in pts]


def claim_points(mode: str, studies: Sequence[str] = ("max_length", "mixing", "families")
                 ) -> list[tuple[str, PointTuple]]:
    """(label, (n, d, lam)) of every point where a claim row of the supermarket studies simulates,
    read from their PARAMETERS[mode] (each point once, in study order)."""
    mode = check_mode(mode)
    out: list[tuple[str, PointTuple]] = []

    def add(label: str, p) -> None:
        p = (int(p[0]), int(p[1]), float(p[2]))
        if all(abs(q[2] - p[2]) > 1e-15 or q[:2] != p[:2] for _, q in out):
            out.append((label, p))

    if "max_length" in studies:
        P = ml.PARAMETERS[mode]
        for p in P["max"]["points"]:
            add("max_length: maximum", p)
        add("max_length: profile", P["profile"]["point"])
        sw = P["sweep"]
        for n, e in zip(sw["ns"], sw["one_minus_lam"]):
            add("max_length: sweep", (n, sw["d"], 1.0 - e))
        bd = P["boundary"]
        for e in bd["one_minus_lam"]:
            add("max_length: boundary", (bd["n"], bd["d"], 1.0 - e))
        fn = P["finite_n"]
        for n in fn["ns"]:
            add("max_length: finite n", (n, fn["d"], fn["lam"]))
        fm = P["family"]
        for n in fm["ns"]:
            add("max_length: family", family_point(n, fm["alpha"], fm["beta"]))
        fe = P["from_empty"]
        add("max_length: from empty", (fe["n"], fe["d"], fe["lam"]))
    if "mixing" in studies:
        P = mx.PARAMETERS[mode]
        fam = P["family"]
        ns = list(fam["ns"]) + list(P["lower"]["ns"]) + [P["tail"]["n"]] + list(P["good_set"]["ns"])
        for n in ns:
            add("mixing: family", family_point(n, fam["alpha"], fam["beta"]))
        ds = P["d_sweep"]
        for d in ds["ds"]:
            add("mixing: d sweep", (ds["n"], d, 1.0 - ds["one_minus_lam"]))
    if "families" in studies:
        for name, f in fs.PARAMETERS[mode]["families"].items():
            for n in f["ns"]:
                add(f"families: {name}", family_point(n, f["alpha"], f["beta"]))
    return out


@dataclass(frozen=True)
class LevelFlowResult:
    """``points`` (label, (n, d, lam)); ``levels[p]`` = k + 1 of point p (the identity is checked
    at j = 1..k+1); ``tau[p]``; ``model[p]`` the JSQ(d) :class:`SupermarketResult` (flows kept);
    ``variants[name][p]`` the same for each near wrong model (None where it does not apply);
    ``eta[p]`` the eta of the eta-greedy run at point p."""

    mode: str
    parameters: dict
    points: list
    levels: list
    tau: list
    model: list
    variants: dict
    eta: list

    def z(self, res: SupermarketResult, p: int) -> np.ndarray:
        """Z_j / SE at j = 1..levels[p] (0 where both are 0; +-inf where only the SE is 0)."""
        est = res.level_flow_residual()
        L = self.levels[p]
        m = np.zeros(L)
        s = np.zeros(L)
        k = min(L, est.mean.size)
        m[:k], s[:k] = est.mean[:k], est.stderr[:k]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(s > 0, m / np.where(s > 0, s, 1.0), np.where(m == 0, 0.0, np.sign(m) * np.inf))


def _runs(points: list[PointTuple], taus: list[float], *, replicas: int, burn_taus: float, meas_taus: float,
          max_steps: int, variant, name: str) -> list[SupermarketResult]:
    per = [steps_per_time(n, lam) * t for (n, _, lam), t in zip(points, taus)]
    steps = [max(1000, min(max_steps, int(math.ceil(meas_taus * s)))) for s in per]
    burn = [min(max_steps, int(math.ceil(burn_taus * s))) for s in per]
    seeds = [named_seed("level_flow", name, *p) for p in points]
    return simulate_many(points, steps=steps, burn_in=burn, replicas=replicas, seeds=seeds, initial="fluid",
                         flows=True, variant=variant, progress=False)


def _eta_for(res: SupermarketResult, L: int, threshold: float, margin: float, ladder,
             se_factor: float = 1.0) -> float:
    """The smallest eta of ``ladder`` whose first-order residual lam eta E[u_{j-1}/n - g(u_{j-1})]
    reaches margin x threshold SE at some level j <= L (the largest eta if none). ``se_factor``
    scales the model run's SE to the variant run's (fewer replicas, shorter: sqrt of the ratio of
    replica-taus)."""
    est = res.level_flow_residual()
    t, f = res.tail_fraction.mean(0), res.flow_fraction.mean(0)
    k = min(L, est.stderr.size, t.size)
    gap = res.lam * (t[:k] - f[:k])  # per unit eta, level j = 1..k at index j-1
    se = est.stderr[:k] * se_factor
    for eta in sorted(ladder):
        if np.any(eta * gap >= margin * threshold * np.where(se > 0, se, np.inf)):
            return float(eta)
    return float(max(ladder))


def run(mode: str = "full", *, points: Sequence[PointTuple] | None = None,
        progress: bool = True) -> LevelFlowResult:
    """Simulate every point (default: :func:`claim_points` of ``mode``) under JSQ(d) and every near
    wrong model, with the level-flow sums. ``points``: any list of (n, d, lam) instead."""
    mode = check_mode(mode)
    P = PARAMETERS[mode]
    k_scale = scale() if mode == "full" else 1.0
    if points is None:
        big = mode == "full" and scale() >= P.get("scaled_from", math.inf)
        labelled = claim_points(mode, P["scaled_points"] if big else P["points"])
        if P["max_points"] is not None:
            labelled = labelled[: P["max_points"]]
    else:
        labelled = [("given", (int(p[0]), int(p[1]), float(p[2]))) for p in points]
    pts = [p for _, p in labelled]
    levels = [int(predicted_max_length(d, lam)) + 1 for _, d, lam in pts]
    tau = [relaxation_time(d, lam) for _, d, lam in pts]
    cap = int(P["max_steps"] * k_scale)
    # one kernel per study's points: lanes of one kernel run as long as its longest lane, and the
    # seeds are named per point, so the grouping changes no number
    model: list = [None] * len(pts)
    for group in sorted({lab.split(":")[0] for lab, _ in labelled}):
        idx = [i for i, (lab, _) in enumerate(labelled) if lab.split(":")[0] == group]
        got = _runs([pts[i] for i in idx], [tau[i] for i in idx], replicas=P["replicas"],
                    burn_taus=P["burn_taus"],
                    meas_taus=P["taus"] * k_scale, max_steps=cap, variant=None, name="model")
        for i, r in zip(idx, got):
            model[i] = r
    se_factor = math.sqrt(P["replicas"] * P["taus"] / (P["variant_replicas"] * P["variant_taus"]))
    eta = [_eta_for(r, L, P["claims"]["threshold"], P["eta_margin"], P["eta_ladder"], se_factor)
           for r, L in zip(model, levels)]
    variants: dict[str, list] = {}
    vkw = dict(replicas=P["variant_replicas"], burn_taus=P["burn_taus"],
               meas_taus=P["variant_taus"] * k_scale, max_steps=cap)
    sel = [i for i, on in enumerate(_variant_mask(pts, P)) if on]
    for v in NEAR:
        out: list = [None] * len(pts)
        if v == "eta_greedy":
            for e in sorted({eta[i] for i in sel}):
                idx = [i for i in sel if eta[i] == e]
                got = _runs([pts[i] for i in idx], [tau[i] for i in idx], variant=("eta_greedy", e),
                            name=f"eta_greedy({e:g})", **vkw)
                for i, r in zip(idx, got):
                    out[i] = r
        elif sel:
            for i, r in zip(sel,
                            _runs([pts[i] for i in sel], [tau[i] for i in sel], variant=v, name=v, **vkw)):
                out[i] = r
        variants[v] = out
    return LevelFlowResult(mode=mode, parameters=P, points=labelled, levels=levels, tau=tau, model=model,
                           variants=variants, eta=eta)


def _fmt(z: np.ndarray) -> str:
    return ", ".join(f"{x:+.1f}" for x in z)


def claim_rows(result: LevelFlowResult) -> list[ClaimRow]:
    """One identity row per point: JSQ(d) within ``threshold`` SE at every level j = 1..k+1; the
    near wrong models as near counterfactuals (their largest |Z_j|/SE, FAIL beyond the threshold)."""
    P = result.parameters
    spec = CLAIMS["level_flow"]
    thr = spec.values(P)["threshold"]
    rows = []
    for p, (label, (n, d, lam)) in enumerate(result.points):
        m = result.model[p]
        z = result.z(m, p)
        L = result.levels[p]
        passed = bool(np.all(np.abs(z) <= thr))
        cfs, texts = [], []
        for v in NEAR:
            r = result.variants[v][p]
            if r is None:
                continue
            zv = result.z(r, p)
            worst = float(np.max(np.abs(zv)))
            j = int(np.argmax(np.abs(zv))) + 1
            fails = worst > thr
            vname = name_of(("eta_greedy", result.eta[p])) if v == "eta_greedy" else v
            meas = f"|Z_j|/SE by level: {_fmt(zv)}; largest {worst:.1f} at j = {j}"
            if not fails:
                meas += " (cannot be told apart at this point)"
            cfs.append(Counterfactual(model=vname, measured=meas, passed=not fails, value=worst, near=True,
                                      se_distance=worst))
            texts.append(f"{vname}: {worst:.1f} SE {'FAIL' if fails else 'not told apart'}")
        rel = float(np.min([result.model[p].steps / (steps_per_time(n, lam) * result.tau[p])]))
        rows.append(ClaimRow(
            claim=spec.claim.format(L=L),
            parameters=f"{label}: n = {n}, d = {d}, 1-lam = {1 - lam:.3g}; {m.replicas} replicas, from the "
                       f"fluid point, burn-in {P['burn_taus']:g} tau, {rel:.1f} tau measured",
            theory="residual 0 at every level",
            measured=f"JSQ(d): Z_j/SE = {_fmt(z)}. " + (
                f"Near wrong models (same criterion, {result.variants[NEAR[0]][p].replicas} replicas): "
                + "; ".join(texts) if texts else
                "Near wrong models: not run at this point (full mode runs them at the points of "
                "PARAMETERS['full']['variant_at'], every point from --scale 2)"),
            passed=passed, kind="identity", threshold=spec.threshold_text(P),
            criterion=spec.criterion_text(P), counterfactuals=tuple(cfs), taus=rel, start="fluid fixed point",
            resolution=("; ".join(t for t in texts if "not told apart" in t)
                        or "every near wrong model FAILs")
            if texts else "no near wrong model run here",
            reference=spec.reference))
    return rows


def summary(result: LevelFlowResult):
    """The identity's numbers, one row per point.

    Args:
        result: a :class:`LevelFlowResult`.

    Returns:
        A pandas DataFrame: ``point`` (its label), ``n``, ``d``, ``one_minus_lam``, ``levels`` (k + 1),
        ``eta`` (the eta-greedy run's), ``model`` the largest |Z_j|/SE of JSQ(d), and one column per
        near wrong model of :data:`qlib.supermarket.variants.NEAR` with its largest |Z_j|/SE (NaN
        where it was not run at that point).
    """
    import pandas as pd

    out = []
    for p, (label, (n, d, lam)) in enumerate(result.points):
        row = dict(point=label, n=n, d=d, one_minus_lam=1 - lam, levels=result.levels[p], eta=result.eta[p],
                   model=float(np.max(np.abs(result.z(result.model[p], p)))))
        for v in NEAR:
            r = result.variants[v][p]
            row[v] = float("nan") if r is None else float(np.max(np.abs(result.z(r, p))))
        out.append(row)
    return pd.DataFrame(out)


#: The study's claim as data: the level-flow identity at each point, its threshold (a path under
#: PARAMETERS[mode]["claims"]) and the near wrong models it runs (keys of WRONG_MODELS).
CLAIMS: dict[str, ClaimSpec] = {
    "level_flow": ClaimSpec(
        "level_flow",
        "level flow E[u_j] = lam n E[(u_(j-1)/n)^d], j = 1..{L} (JSQ(d) with the model's sampling rule)",
        "paired residual Z_j = mean(u_j/n) - lam mean(g(u_(j-1))) within {threshold:g} SE (over replicas) at "
        "every level; each near wrong model must exceed it at some level",
        thresholds=(("threshold",),), threshold="|Z_j| <= {threshold:g} SE at every level",
        wrong_models=NEAR_MODELS, rows=lambda result, spec: claim_rows(result),
        reference="docs/models.md#level-flow, docs/models.md#near-wrong-models"),
}


__all__ = ["PARAMETERS", "CLAIMS", "CLAIM_THRESHOLDS", "LevelFlowResult", "claim_points", "run", "claim_rows",
           "summary"]
