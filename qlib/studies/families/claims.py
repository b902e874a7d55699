"""The families study's claims as data: :data:`CLAIMS`, one :class:`qlib.claims.ClaimSpec` per claim,
and the functions that build each claim's rows from the study's result."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from qlib import stats
from qlib._rng import named_seed
from qlib.claims import ClaimRow, ClaimSpec, Counterfactual, combine, decide, se_distance
from qlib.power import at_level, d_pass, refined_fraction, within
from qlib.studies.families.compute import FamiliesResult, Family, not_k, slope_ci
from qlib.studies.families.parameters import LONG_COMMAND
from qlib.studies.max_length import Estimates
from qlib.studies.wrong_models import WRONG_MODELS, resolution

REF = ("Brightwell, Fairthorne & Luczak 2018 (abstract); Brightwell & Luczak arXiv:1201.5523; "
       "docs/models.md#scaling-families")


def _start(parameters: dict) -> str:
    """How the runs began, from the burn-in in PARAMETERS (the one place it is set)."""
    return f"empty; {parameters['burn_taus']:g} τ burn-in"


def _fam_text(f: Family) -> str:
    ns = ", ".join(f"{int(n):.0e}".replace("e+0", "e") for n in f.ns)
    return (f"family {f.name}: lam = 1 - n^-{f.alpha:g}, d = floor(n^{f.beta:g}), k = {f.k}, "
            f"gamma = {f.gamma:+.2f}; n = {ns}" + (f" ({f.provenance})" if f.provenance else ""))


def _missing_text(f: Family) -> str:
    """What the long tier lacks of the family's design ("" if nothing)."""
    return "; ".join(f"n = {n}: {why}" for n, why in f.missing)


def _budget_text(parameters: dict, f: Family) -> str:
    L = parameters["long"]
    text = f"{parameters['batches']} x {parameters['batch_taus']:g} τ"
    if L["ns"].get(f.name):
        text += f" ({L['batches']} x {parameters['batch_taus']:g} τ at the long tier's n)"
    return text


def deciding_n(ns, q, p_min: float) -> float:
    """The n where the straight line of log P(max != k) against log n fitted through the points
    reaches (1 - p_min)/2, where a run of the same length would decide P(max = k) >= p_min (an
    extrapolation, printed as one; nan if P(max != k) does not fall)."""
    ns, q = np.asarray(ns, dtype=float), np.maximum(np.asarray(q, dtype=float), 1e-6)
    if ns.size < 2:
        return float("nan")
    b, c = np.polyfit(np.log(ns), np.log(q), 1)
    if b >= -1e-9:  # flat (to round-off) or rising
        return float("nan")
    return float(np.exp((math.log((1 - p_min) / 2) - c) / b))


def _hyp_text(f: Family) -> str:
    """H0-H3 per point: the numbers at each point outside them, and at the largest n (where the
    rows are judged); the points where they hold are listed by n."""

    def one(j, h):
        bad = [x for x in ("H0", "H1", "H2", "H3") if not h[x]]
        where = f" [outside: {', '.join(bad)}]" if bad else " [H0-H3 hold]"
        return (f"n={int(f.ns[j])}: c = {h['c']:.2f}, (1-lam) d^k = {h['eps_dk']:.1f} (log n = "
                f"{h['log_n']:.1f}), fluid max {h['fluid_max']}, buffer/excursion "
                f"{h['buffer_over_excursion']:.2g}" + where)

    last = len(f.hyp) - 1
    hold = [j for j, h in enumerate(f.hyp) if all(h[x] for x in ("H0", "H1", "H2", "H3"))]
    parts = [one(j, h) for j, h in enumerate(f.hyp) if j not in hold or j == last]
    held = [int(f.ns[j]) for j in hold if j != last]
    if held:
        parts.insert(0, "H0-H3 hold at n = " + ", ".join(str(n) for n in held))
    return "; ".join(parts)


def _measured_max(f: Family) -> str:
    return "; ".join(f"n={int(f.ns[j])}: P(max = {f.k}) = {f.p_k(j)[0]:.3f} ({f.p_k(j)[1]:.3f} to "
                     f"{f.p_k(j)[2]:.3f}), P(max = {f.k + 1}) = {f.p_k1(j)[0]:.3f}" for j in range(f.ns.size))


def _wrong_rows(f: Family, judge: Callable[[Estimates, int], tuple[str, str, float | None]]) -> tuple:
    cfs = []
    for wm, e in f.wrong.items():
        far, label = WRONG_MODELS[wm].far, WRONG_MODELS[wm].label
        v, text, se = judge(e, 0)
        # a wrong model is rejected only when the criterion FAILs on it: an INCONCLUSIVE one is not
        # told apart (so it counts as passing: conservative for soundness and resolution)
        cfs.append(Counterfactual(f"{label} (d = {int(e.d[0])}) at n = {int(e.n[0])}, "
                                  f"{int(e.replicas[0])} replicas x {float(e.taus[0]):.0f} tau",
                                  f"{text} [{v}]", v != "FAIL",
                                  near=not far, se_distance=se))
    return tuple(cfs)



def concentration_rows(result: FamiliesResult, spec: ClaimSpec) -> list[ClaimRow]:
    """Per family: P(max != k) falls with n (slope CI below ``slope_max``) and P(max = k) >= p_min
    at the largest n (lower CI end); a finding outside the hypotheses."""
    C = result.parameters["claims"]
    thr = spec.threshold_text(result.parameters)
    rows = []
    for f in result.families:
        q, qlo, qhi = not_k(f)
        b, blo, bhi = slope_ci(f.ns, q, qlo, qhi, boot=C["boot"],
                               seed=named_seed(result.parameters["stream"], f.name,
                                                                                   "slope"))
        p, plo, phi = f.p_k(f.ns.size - 1)
        v_p = decide(plo, phi, C["p_min"])
        v_s = decide(blo, bhi, C["slope_max"], above=False) if math.isfinite(blo) else "INCONCLUSIVE"
        inside = f.inside()
        outcome = ("INCONCLUSIVE" if f.missing else combine([v_p, v_s])) if inside else "finding"
        if inside and outcome != "PASS" and not f.missing:
            n_dec = deciding_n(f.ns, q, C["p_min"])
            decide_text = ("; at the fitted slope P(max != k) falls to (1 - p_min)/2 near n ≈ "
                           f"{n_dec:.1e} (an extrapolation: a run there would decide)" if math.isfinite(n_dec)
                           else "; P(max != k) does not fall: no n would decide it")
        else:
            decide_text = ""

        def judge(e, j, k=f.k):
            lo, hi, m = float(e.max_low[j, k]), float(e.max_high[j, k]), float(e.max_dist[j, k])
            return (decide(lo, hi, C["p_min"]), f"P(max = {k}) = {m:.3f} ({lo:.3f} to {hi:.3f})",
                    se_distance(m, lo, hi, C["p_min"]))

        cfs = _wrong_rows(f, judge)
        rows.append(ClaimRow(
            claim=spec.claim.format(k=f.k) + ("" if inside else " — outside the hypotheses: a finding"),
            parameters=f"{_fam_text(f)}; {int(f.est.replicas[0])} replicas. Hypotheses: {_hyp_text(f)}",
            theory=f"P(max = k) -> 1 as n -> oo (k = ceil(alpha/beta) = {f.k}) for suitable pairs",
            measured=f"{_measured_max(f)}; slope of log P(max != k) in log n: {b:.2f} (95% CI {blo:.2f} to "
                     f"{bhi:.2f}); half-width of P(max = k) at the largest n {(phi - plo) / 2:.3f} (target "
                     f"{C['p_halfwidth_target']:g}: "
                     f"{'reached' if (phi - plo) / 2 <= C['p_halfwidth_target'] else 'not reached'} within "
                     f"the step budget of {_budget_text(result.parameters, f)})" + decide_text
                     + (f"; not judged: the long tier lacks {_missing_text(f)}" if f.missing else ""),
            passed=outcome == "PASS", outcome=outcome, criterion=spec.criterion_text(result.parameters),
            threshold=thr,
            taus=float(f.est.taus.min()), start=_start(result.parameters), reference=spec.reference,
            counterfactuals=cfs, resolution=resolution(cfs)))
    return rows


def most_at_k_rows(result: FamiliesResult, spec: ClaimSpec) -> list[ClaimRow]:
    """Per family: the fraction of queues at k >= 1 - slack (1-lam) d^(k-1) at every point inside H0-H3,
    and at the largest n within model_error + its CI half-width of the refined mean field (a finding
    where H0-H3 hold at no point)."""
    C = result.parameters["claims"]
    tol = C["model_error"]
    # the levels judged at the largest n: k and k + each neighbour level (issue 47)
    offsets = sorted({0, *C.get("neighbour_levels", [])})
    rows = []
    for f in result.families:
        k = f.k
        levels = [k + o for o in offsets if k + o >= 0]
        # issue 47: judged on the family's fresh stream once results/long holds it; until then on the
        # stored seeds, which came before the criterion (the claims table flags the row)
        E = f.fresh if f.fresh is not None else f.est
        vs, parts = [], []
        judged = [j for j, h in enumerate(f.hyp) if h["H0"] and h["H1"] and h["H2"] and h["H3"]]
        top = f.ns.size - 1
        n_t, d_t, e_t = int(f.ns[top]), int(f.est.d[top]), float(1 - f.est.lam[top])
        # the prediction at the largest n: the refined mean field (order 1/n) of JSQ(d), for every model
        ref = refined_fraction(n_t, d_t, e_t)
        preds = [at_level(ref, i) for i in levels]
        for j in range(f.ns.size):
            bound = 1 - C["slack"] * f.c(j)
            lo, hi, m = float(E.p_low[j, k]), float(E.p_high[j, k]), float(E.p[j, k])
            if j in judged:
                vs.append(decide(lo, hi, bound))
            parts.append(f"n={int(f.ns[j])}: {m:.3f} ({lo:.3f} to {hi:.3f}) vs {bound:.3f}"
                         + (", refined mean field " + ", ".join(
                             f"at {i}: {float(E.p[j, i]):.4f} vs {p:.4f}" for i, p in zip(levels, preds))
                            if j == top else "")
                         + ("" if j in judged else " (outside H0-H3: not judged)"))
        halves = [float(E.p_high[top, i] - E.p_low[top, i]) / 2 for i in levels]
        half_t = halves[levels.index(k)]
        if top in judged:
            vs.append("PASS" if all(within(float(E.p[top, i]), h, p, tol)
                                    for i, h, p in zip(levels, halves, preds)) else "FAIL")
        inside = bool(judged)
        outcome = ("INCONCLUSIVE" if f.missing and f.inside() else combine(vs)) if inside else "finding"
        if f.missing:
            parts.append(f"not judged: the long tier lacks {_missing_text(f)}")
        parts.append("on the fresh stream (issue 47)" if f.fresh is not None else
                     ("on the stored seeds; the fresh stream's points are not stored yet (`"
                      + LONG_COMMAND + "`)" if f.fresh_missing else "on the stored seeds"))

        def judge(e, j, kk=k, f=f, preds=preds, levels=levels):  # bound now (called within this iteration)
            bound = 1 - C["slack"] * f.c(f.ns.size - 1)
            lo, hi, m = float(e.p_low[j, kk]), float(e.p_high[j, kk]), float(e.p[j, kk])
            half = (hi - lo) / 2
            near = [within(float(e.p[j, i]), float(e.p_high[j, i] - e.p_low[j, i]) / 2, p, tol)
                    for i, p in zip(levels, preds)]
            v = combine([decide(lo, hi, bound), "PASS" if all(near) else "FAIL"])
            p_k = preds[levels.index(kk)]
            se = (abs(m - p_k) - tol) / (half / 1.96) if half > 0 else None
            text = (f"{m:.3f} ({lo:.3f} to {hi:.3f}) vs bound {bound:.3f}, refined mean field "
                    + ", ".join(f"at {i}: {float(e.p[j, i]):.4f} vs {p:.4f}" for i, p in zip(levels, preds)))
            return v, text, se

        cfs = _wrong_rows(f, judge)
        inputs = dict(d=d_t, n=n_t, one_minus_lam=e_t, k=k, half=half_t, halves=halves, c=f.c(top))
        power = (d_pass("families.most_at_k", C, inputs, at=f"n={n_t}, 1-lam={e_t:.3g}")
                 if inside and top in judged else None)
        rows.append(ClaimRow(
            claim=spec.claim.format(k=k) + ("" if inside else " — outside the hypotheses: a finding"),
            parameters=f"{_fam_text(f)}; {int(f.est.replicas[0])} replicas",
            theory="fraction at k >= 1 - 2 n^(-alpha+(k-1)beta) ~ 1 - 2 (1-lam) d^(k-1) (BFL18), fluid 1 - "
                   "(1-lam) d^(k-1); its value at the largest n: the refined mean field (order 1/n) of "
                   "JSQ(d)",
            measured="; ".join(parts), passed=outcome == "PASS", outcome=outcome,
            criterion=spec.criterion_text(result.parameters),
            threshold=spec.threshold_text(result.parameters),
            taus=float(f.est.taus.min()), start=_start(result.parameters), reference=spec.reference,
            counterfactuals=cfs, resolution=resolution(cfs), power=power,
            # the data this row is judged on (qlib.claims.with_criteria): the fresh stream once stored
            criteria={"data": ["families_fresh_"]} if f.fresh is not None else None))
    return rows


def buffer_rows(result: FamiliesResult, spec: ClaimSpec) -> list[ClaimRow]:
    """The excursion scale of H3, judged: SD(N)/sqrt(n d^(k-1)) at every point of every family inside a
    pre-set band (a measurement of the heuristic, not a paper claim), with P(max != k) beside
    buffer/excursion and, for contrast, SD(N) (1-lam) (the scale 1/(1-lam) it replaces)."""
    v = spec.values(result.parameters)
    lo_b, hi_b = v["low"], v["high"]
    parts, inside_band, old = [], [], []
    for f in result.families:
        pts = []
        for j in range(f.ns.size):
            sd = f.sd.sd[j]
            est = stats.replica_mean(sd / f.excursion(j), axis=0)
            lo, hi = (float(x) for x in est.interval())
            inside_band.append(lo_b <= lo and hi <= hi_b)
            old.append(sd.mean() * (1 - f.est.lam[j]))
            n = f"{int(f.ns[j]):.0e}".replace("e+0", "e")
            pts.append(f"n={n} {float(est.mean):.2f} ({lo:.2f} to {hi:.2f})")
        parts.append(f"{f.name}: " + ", ".join(pts))
    ok = all(inside_band)
    return [ClaimRow(
        claim=spec.claim, kind="measurement", parameters="every point of every family; SD(N) from "
        f"{int(result.parameters['sd']['replicas'])} replicas x {result.parameters['sd']['samples']} records "
        f"over {result.parameters['sd']['taus']:g} τ after 20 τ from empty",
        theory="heuristic: SD(N) ~ sqrt(n d^(k-1)); buffer n (1-lam) d^(k-1); buffer/excursion = "
               f"n^(gamma/2); the old scale 1/(1-lam) would give SD(N) (1-lam) = {min(old):.2g} to "
               f"{max(old):.2g} here",
        measured="SD(N)/sqrt(n d^(k-1)) with its 95% CI at each n (buffer/SD(N) and P(max != k) beside it: "
                 "notebook 01, figure 01h): " + "; ".join(parts),
        passed=ok, criterion=spec.criterion_text(result.parameters),
        threshold=spec.threshold_text(result.parameters),
        taus=float(min(f.sd.taus.min() for f in result.families)),
        start=_start(result.parameters), reference=spec.reference)]


#: The study's claims, as data: one spec per claim (criterion, PARAMETERS keys of its
#: thresholds, wrong models, the function that makes its rows).
CLAIMS: dict[str, ClaimSpec] = {
    "concentration": ClaimSpec(
        key="concentration", claim="the maximum queue length concentrates on k = {k}",
        criterion="inside H0-H3 at the largest n: the lower end of the 95% CI of P(max = k) at the largest n "
                  ">= p_min, and the upper end of the 95% bootstrap CI of the slope of log P(max != k) in "
                  "log n < slope_max (PASS: both decided; FAIL: either decided against; INCONCLUSIVE: a CI "
                  "straddles); outside: a finding",
        thresholds=(("p_min",), ("slope_max",), ("p_halfwidth_target",), ("hypotheses", "c_max"),
                    ("hypotheses", "gamma_min")),
        threshold="P(max = k) lower 95% end >= {p_min:g} at the largest n; slope upper 95% end < "
                  "{slope_max:g}",
        wrong_models=("jsq2", "half_d", "d-1", "d*0.9", "other_sampling"), rows=concentration_rows,
        reference=REF),
    "most_at_k": ClaimSpec(
        key="most_at_k", claim="most queues have length exactly k = {k}: a fraction >= 1 - 2(1-lam) d^(k-1), "
                               "at the value the mean field predicts",
        criterion="at every point inside H0-H3 (a finding if there is none): the lower end of the 95% CI of "
                  "the fraction at k >= 1 - slack (1-lam) d^(k-1) (FAIL: an upper end below; INCONCLUSIVE: a "
                  "CI straddles); and at the largest n, inside H0-H3, at k and at k + each of "
                  "{neighbour_levels}: |fraction - refined mean field of JSQ(d)| <= {model_error:g} + its "
                  "95% CI half-width (else FAIL); outside: a finding",
        thresholds=(("slack",), ("model_error",), ("neighbour_levels",), ("hypotheses", "c_max"),
                    ("hypotheses", "gamma_min")),
        threshold="bound 1 - {slack:g} (1-lam) d^(k-1) at every point (lower 95% end); at the largest n "
                  "within {model_error:g} (model error) + CI half-width of the refined mean field",
        wrong_models=("jsq2", "half_d", "d-1", "d*0.9", "other_sampling"), rows=most_at_k_rows,
        reference=REF),
    "buffer": ClaimSpec(
        key="buffer",
        claim="the excursion scale of H3: SD(N) is of order sqrt(n d^(k-1)) at every point of every family",
        criterion="a measurement: the 95% CI (over replicas) of SD(N)/sqrt(n d^(k-1)) lies within "
                  "[low, high] at every point of every family (reached), else not",
        thresholds=(("sd_band", "low"), ("sd_band", "high")),
        threshold="within [{low:.3g}, {high:g}] at every point (claims.sd_band)",
        rows=buffer_rows, reference="docs/models.md#hypotheses"),
}


def claim_rows(result: FamiliesResult) -> list[ClaimRow]:
    """The rows of every spec of :data:`CLAIMS`, in order."""
    rows: list[ClaimRow] = []
    for spec in CLAIMS.values():
        rows.extend(spec.rows(result, spec))
    return rows
