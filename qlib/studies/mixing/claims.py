"""The mixing study's claims as data: :data:`CLAIMS`, one :class:`qlib.claims.ClaimSpec` per claim,
and the functions that build each claim's rows from the study's result."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from qlib import stats
from qlib.claims import ClaimRow, ClaimSpec, Counterfactual, decide_band
from qlib.studies.mixing.compute import LowerBound, MeetingTimes, MixingResult
from qlib.studies.wrong_models import WRONG_MODELS, resolution
from qlib.supermarket.refined import relaxation_time
from qlib.supermarket.regime import failing, hypotheses, inside, lower_time, reference_time
from qlib.supermarket.theory import predicted_max_length, steps_per_time

#: the part of a criterion every mixing row shares (docs/models.md#hypotheses)
_HYPOTHESES = ("; a finding where some point is outside H0-H3 (c <= {c_max:g}, n (1-lam)^2 d^(k-1) >= "
               "{buffer_min:g})")
REF = "Brightwell & Luczak arXiv:1201.5523 (as summarised; docs/models.md#mixing-time)"


def _start_good(parameters: dict) -> str:
    return f"fluid point vs a stationary sample ({parameters['burn_taus']:g} τ burn-in)"


def _outside(P: dict, n, d, lam) -> list[str]:
    """The points (n, d, lam arrays) outside H0-H3 (PARAMETERS[mode]["claims"]["hypotheses"]), each as
    "n=300 (H1, H3)"."""
    out = []
    for nn, dd, ll in zip(n, d, lam):
        h = hypotheses(int(nn), int(dd), float(ll), **P["claims"]["hypotheses"])
        if not inside(h):
            bad = ", ".join(failing(h))
            out.append(f"n={int(nn)}, d={int(dd)} ({bad})")
    return out


def _in_hypotheses(row: ClaimRow, P: dict, n, d, lam) -> ClaimRow:
    """``row`` as a finding when some point of it is outside H0-H3 (docs/models.md#hypotheses): the
    theorem says nothing there, so no verdict is drawn."""
    out = _outside(P, n, d, lam)
    if not out:
        return row
    fields = {f: getattr(row, f) for f in row.__dataclass_fields__}
    return ClaimRow(**{**fields, "claim": row.claim + " — a finding: outside H0-H3 at " + "; ".join(out),
                       "passed": False, "outcome": "finding"})


def all_met(T: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(T)))


def _ratio_exponent(m: MeetingTimes) -> tuple[stats.PowerFit | None, str]:
    """Exponent of mean T / (k d^(k-1) n ln n) in n, with a bootstrap CI (None if some replica never met)."""
    ref = np.array([reference_time(int(n), int(d), float(lam)) for n, d, lam in zip(m.n, m.d, m.lam)])
    if not all_met(m.T):
        unmet = int(np.sum(~np.isfinite(m.T)))
        return None, (f"{unmet} of {m.T.size} replica-runs never met within "
                      f"{m.cap.min():.2g}..{m.cap.max():.2g} steps")
    fit = stats.fit_power_law(m.n.astype(float), m.T / ref[:, None])
    ratio = m.T.mean(axis=1) / ref
    return fit, f"T/(k d^(k-1) n ln n) = {', '.join(f'{r:.2f}' for r in ratio)}; exponent in n {fit}"


def _bounded_verdict(m: MeetingTimes, growth: float) -> tuple[str, str, float | None]:
    """PASS when the exponent's 95% CI is <= growth, FAIL when its lower end is above, else
    INCONCLUSIVE; FAIL when some replica never met."""
    fit, text = _ratio_exponent(m)
    if fit is None:
        return "FAIL", text, None
    v = "PASS" if fit.ci[1] <= growth else ("FAIL" if fit.ci[0] > growth else "INCONCLUSIVE")
    return v, text, fit.exponent


def _family_text(P: dict, key: str, ns) -> str:
    f = P[key]
    k = math.ceil(f["alpha"] / f["beta"] - 1e-12)
    g = 1 - 2 * f["alpha"] + (k - 1) * f["beta"]
    return (f"lam = 1 - n^-{f['alpha']:g}, d = floor(n^{f['beta']:g}) (k = {k}, gamma = {g:+.2f}; (1-lam) "
            f"d^(k-1) = n^{(k - 1) * f['beta'] - f['alpha']:+.2f}, (1-lam) d^k = "
            f"n^{k * f['beta'] - f['alpha']:+.2f}), n = "
            + ", ".join(str(int(x)) for x in ns))


def _good_row(result: MixingResult, spec: ClaimSpec, good: MeetingTimes, cfs: Sequence[Counterfactual],
              family_key: str) -> ClaimRow:
    P = result.parameters
    growth = spec.values(P)["growth"]
    v, text, _ = _bounded_verdict(good, growth)
    return _in_hypotheses(ClaimRow(
        claim=spec.claim, parameters=_family_text(P, family_key, good.n) + f"; {good.T.shape[1]} replicas",
        theory="bounded ratio: it does not grow with n", measured=text, passed=v == "PASS", outcome=v,
        criterion=spec.criterion_text(P), threshold=spec.threshold_text(P),
        taus=float(P["burn_taus"]), start=_start_good(P), reference=spec.reference,
        counterfactuals=tuple(cfs), resolution=resolution(cfs)), P, good.n, good.d, good.lam)


def good_rows(result: MixingResult, spec: ClaimSpec) -> list[ClaimRow]:
    """Row 10: the good-start upper bound, along the gamma = 0 family and along the gamma > 0 one."""
    P = result.parameters
    growth = spec.values(P)["growth"]

    def cf(m, label):
        v, text, b = _bounded_verdict(m, growth)
        return Counterfactual(label, text, v != "FAIL", b)

    small = ", ".join(str(int(x)) for x in result.good_jsq2.n)
    cfs = [cf(result.good_jsq2,
              f"JSQ(2) in place of JSQ(d), same protocol at n = {small}, capped at {P['cap']:g}x "
                                "the JSQ(d) time"),
           cf(result.uncoupled,
              f"uncoupled chains (independent random numbers), same protocol at n = {small}")]
    small_p = ", ".join(str(int(x)) for x in result.good_pos_jsq2.n)
    cfs_p = [cf(result.good_pos_jsq2, f"JSQ(2) in place of JSQ(d), same protocol at n = {small_p}, capped at "
                                      f"{P['cap']:g}x the JSQ(d) time")]
    for near, out in ((result.good_near, cfs), (result.good_pos_near, cfs_p)):
        for wm, m in [(w, near[w]) for w in spec.wrong_models if w in near]:
            v, text, b = _bounded_verdict(m, growth)
            ns = ", ".join(str(int(x)) for x in m.n)
            out.append(Counterfactual(f"{WRONG_MODELS[wm].label} (d = "
                                      f"{', '.join(str(int(x)) for x in m.d)}), same protocol at n = {ns}, "
                                      f"capped at {P['cap']:g}x the JSQ(d) time",
                                      f"{text} [{v}]", v != "FAIL", b, near=True))
    return [_good_row(result, spec, result.good, cfs, "family"),
            _good_row(result, spec, result.good_pos, cfs_p, "family_pos")]


def bad_start_rows(result: MixingResult, spec: ClaimSpec) -> list[ClaimRow]:
    """Row 11: from a bad start. A finding wherever the drain term is of the order of the bound."""
    P = result.parameters
    C = spec.values(P)
    v, text, _ = _bounded_verdict(result.top, C["growth"])
    top = result.top
    drain = np.array([(1 + lam) * n / (1 - lam) / reference_time(int(n), int(d), float(lam))
                      for n, d, lam in zip(top.n, top.d, top.lam)])
    finding = bool(np.any(drain >= C["drain_finding"]))
    small = ", ".join(str(int(x)) for x in result.top_jsq2.n)
    vj, tj, bj = _bounded_verdict(result.top_jsq2, C["growth"])
    return [ClaimRow(
        claim=spec.claim
        + (" — a finding: the drain term is of the order of the bound here" if finding else ""),
        parameters=_family_text(P, "family", top.n) + f"; {top.T.shape[1]} replicas",
        theory="bounded ratio; the drain term (1+lam) n/(1-lam) is " + ", ".join(f"{x:.2f}" for x in drain)
               + " x k d^(k-1) n ln n here (it grows like n^0.25/ln n: asymptotically the drain dominates)",
        measured=text + f" (read as a bound: {v})", passed=(v == "PASS") and not finding,
        outcome="finding" if finding else v, criterion=spec.criterion_text(P),
        threshold=spec.threshold_text(P),
        taus=None, start="all empty and all queues at k+1", reference=spec.reference,
        counterfactuals=(Counterfactual(f"JSQ(2) in place of JSQ(d) at n = {small}, capped at {P['cap']:g}x "
                                        "the JSQ(d) time", tj, vj != "FAIL", bj),))]


def d_exponent(m: MeetingTimes, d_axis: np.ndarray | None, tol: float) -> tuple[str, str, float | None, int]:
    """Two-sided: PASS when the 95% CI of the exponent of T_meet in d lies within k - 1 +- tol,
    FAIL when it is disjoint from that band, INCONCLUSIVE otherwise."""
    d = (m.d if d_axis is None else d_axis).astype(float)
    k = int(predicted_max_length(int(d[-1]), float(m.lam[0])))
    if not all_met(m.T):
        return "FAIL", f"{int(np.sum(~np.isfinite(m.T)))} replica-runs never met", None, k
    fit = stats.fit_power_law(d, m.T)
    v = decide_band(fit.ci[0], fit.ci[1], k - 1 - tol, k - 1 + tol)
    return v, f"exponent of T_meet in d: {fit}", fit.exponent, k


def tau_d_exponent(n: int, lam: float, ds: Sequence[int]) -> float:
    """The exponent in d of the fluid relaxation time tau over ``ds`` at fixed lam (least squares
    on log-log): what the linearised dynamics predicts for the d-scaling over that window."""
    taus = [relaxation_time(int(d), float(lam)) for d in ds]
    return float(np.polyfit(np.log(np.asarray(ds, dtype=float)), np.log(taus), 1)[0])


def d_scaling_rows(result: MixingResult, spec: ClaimSpec) -> list[ClaimRow]:
    """Row 12: the exponent of T_meet in d at fixed 1 - lam, judged two-sided against k - 1."""
    P = result.parameters
    tol = spec.values(P)["d_exponent_tol"]
    ds = result.d_sweep
    dsp = P["d_sweep"]
    v, textd, _, kk = d_exponent(ds, None, tol)
    vf, textf, bf, _ = d_exponent(result.d_fixed, ds.d, tol)
    td = tau_d_exponent(int(ds.n[0]), float(ds.lam[0]), [int(x) for x in ds.d])
    return [_in_hypotheses(ClaimRow(
        claim=spec.claim.format(k_minus_1=kk - 1),
        parameters=f"n = {int(ds.n[0])}, 1-lam = {dsp['one_minus_lam']:g} fixed, d = "
                   f"{', '.join(str(int(x)) for x in ds.d)} ((1-lam) d = "
                   + ", ".join(f"{dsp['one_minus_lam'] * x:.2g}" for x in ds.d)
        + f"); {dsp['replicas']} replicas",
        theory=f"exponent of T_meet in d = k-1 = {kk - 1} (0 if the time were set by 1/(1-lam), fixed here); "
               f"the fluid relaxation time's exponent in d over this window is {td:.2f}",
        measured=textd, passed=v == "PASS", outcome=v, criterion=spec.criterion_text(P),
        threshold=spec.threshold_text(P), taus=float(P["burn_taus"]), start=_start_good(P),
        reference=spec.reference,
        counterfactuals=(Counterfactual(f"d held at {int(ds.d[0])} whatever d is asked for (d-independent "
                                        "dynamics)", textf, vf != "FAIL", bf),)), P, ds.n, ds.d, ds.lam)]


def _lower_row(result: MixingResult, spec: ClaimSpec, lo: LowerBound, family_key: str) -> ClaimRow:
    P = result.parameters
    lp = P["lower"]
    m = spec.values(P)["lower_min"]
    ref = np.array([lower_time(int(n), int(d), float(lam)) for n, d, lam in zip(lo.n, lo.d, lo.lam)])
    ratio_g, ratio_s = lo.crossing_good / ref, lo.crossing_stationary / ref
    okl = bool(np.all(np.isfinite(ratio_g)) and ratio_g.min() >= m)
    okls = bool(np.all(np.isfinite(ratio_s)) and ratio_s.min() >= m)
    return _in_hypotheses(ClaimRow(
        claim=spec.claim,
        parameters=_family_text(P, family_key, lo.n)
        + f"; {lp['replicas']} replicas from a good state whose number "
                   "of customers N is at the stationary 97.5% point; A = {N > stationary median}",
        theory=f"t(P_t(A) - pi(A) <= 1/4) / (n (lam d)^(k-1)) >= {m:g} at every n (d_TV >= |P_t(A) - pi(A)|)",
        measured="ratio " + ", ".join(f"{x:.2f}" for x in ratio_g), passed=okl,
        criterion=spec.criterion_text(P), threshold=spec.threshold_text(P),
        taus=float(lp["horizon_taus"]), start="a stationary-typical state displaced to N's 97.5% point",
        reference=spec.reference, counterfactuals=(Counterfactual(
            "each chain started from a stationary sample (a run started at the answer)",
            "ratio " + ", ".join(f"{x:.2f}" for x in ratio_s), okls),)), P, lo.n, lo.d, lo.lam)


def lower_rows(result: MixingResult, spec: ClaimSpec) -> list[ClaimRow]:
    """Row 13 on both families."""
    return [_lower_row(result, spec, result.lower, "family"),
            _lower_row(result, spec, result.lower_pos, "family_pos")]


def tail_rows(result: MixingResult, spec: ClaimSpec) -> list[ClaimRow]:
    """Row 14: exponential decay past the median meeting time."""
    tl = result.tail
    P = result.parameters
    t = spec.values(P)
    okt, textt = tail_verdict(tl.T[0], t["tail_bounds"], t["tail_z"])
    oktu, texttu = tail_verdict(result.tail_uncoupled.T[0], t["tail_bounds"], t["tail_z"])
    b2, b3 = (str(Fraction(b).limit_denominator(1000)) for b in t["tail_bounds"])
    return [ClaimRow(
        claim=spec.claim,
        parameters=f"the family at n = {int(tl.n[0])} (d = {int(tl.d[0])}); {tl.T.shape[1]} replicas, "
                   "bottom/top coupling",
        theory="P(T > 2m) <= P(T > m)^2 and P(T > 3m) <= P(T > m)^3 (submultiplicative) at the median m; "
               "log P(T > t) linear beyond m",
        measured=textt, passed=okt, criterion=spec.criterion_text(P, b2=b2, b3=b3), kind="check",
        threshold=spec.threshold_text(P, b2=b2, b3=b3),
        taus=None, start="all empty and all queues at k+1", reference=spec.reference,
        counterfactuals=(Counterfactual("uncoupled chains (independent random numbers)", texttu, oktu),))]


def _exit_row(result: MixingResult, spec: ClaimSpec, ex: MeetingTimes, exj: MeetingTimes,
              family_key: str) -> ClaimRow:
    P = result.parameters
    gs = P["good_set"]
    oke, texte = exit_verdict(ex, ex)
    okej, textej = exit_verdict(exj, ex)
    return ClaimRow(
        claim=spec.claim,
        parameters=_family_text(P, family_key, ex.n)
        + f"; N^eps with eps = {gs['eps']} (sup distance of u/n to the "
                   f"fluid fixed point); {gs['replicas']} replicas, {gs['horizon_taus']:g} τ",
        theory="first exit time grows with n (exponentially, at fixed eps)", measured=texte, passed=oke,
        kind="check",
        criterion=spec.criterion_text(P), threshold=spec.threshold_text(P),
        taus=float(gs["horizon_taus"]), start="the fluid point", reference=spec.reference,
        counterfactuals=(Counterfactual("JSQ(2) in place of JSQ(d), judged against JSQ(d)'s good set", textej,
                                        okej),))


def good_set_rows(result: MixingResult, spec: ClaimSpec) -> list[ClaimRow]:
    """Row 15 on both families."""
    return [_exit_row(result, spec, result.exits, result.exits_jsq2, "family"),
            _exit_row(result, spec, result.exits_pos, result.exits_pos_jsq2, "family_pos")]


#: The study's claims as data, in table order: thresholds (paths under PARAMETERS[mode]["claims"]),
#: the criterion and threshold text rendered from them, wrong models (keys of WRONG_MODELS; the near
#: ones a mode runs are PARAMETERS[mode]["near"]) and controls, the rows.
CLAIMS: dict[str, ClaimSpec] = {
    "good_start": ClaimSpec(
        key="good_start",
        claim="from a good start the mixing time is O(k d^(k-1) n log n): T_meet/(k d^(k-1) n ln n) stays "
              "bounded",
        criterion="upper end of the 95% bootstrap CI of the exponent of the ratio in n <= growth (PASS), "
                  "lower end above (FAIL), else INCONCLUSIVE; T_meet = meeting time of the chain from the "
                  "fluid point with one from a stationary sample (d_TV <= P(T > t))" + _HYPOTHESES,
        thresholds=(("growth",), ("hypotheses", "c_max"), ("hypotheses", "buffer_min")),
        threshold="exponent upper 95% end <= {growth:g} (claims.growth)",
        wrong_models=("jsq2", "d-1"), controls=("uncoupled",), rows=good_rows, reference=REF),
    "bad_start": ClaimSpec(
        key="bad_start",
        claim="even from a bad start (all queues at k+1) the bound holds up to a constant over this range of "
              "n",
        criterion="a finding wherever the drain term (1+lam) n/(1-lam) >= drain_finding x k d^(k-1) n ln n "
                  "(the time to shed n excess customers, true for every routing rule, is then of the order "
                  "of the bound); else as the good-start row on the meeting time of the chains from "
                  "all-empty and all-at-(k+1)",
        thresholds=(("growth",), ("drain_finding",)),
        threshold="a finding where drain/(k d^(k-1) n ln n) >= {drain_finding:g} (claims.drain_finding); "
                  "else exponent upper 95% end <= {growth:g}",
        wrong_models=("jsq2",), rows=bad_start_rows, reference=REF + "; docs/models.md#bad-starts"),
    "d_scaling": ClaimSpec(
        key="d_scaling",
        claim="the mixing time scales with d^(k-1), not with 1/(1-lam): at fixed 1-lam its exponent in d is "
              "k-1 = {k_minus_1}",
        criterion="two-sided: the 95% bootstrap CI of the exponent of T_meet (good start) in d within "
                  "k - 1 +- d_exponent_tol (PASS), disjoint from that band (FAIL), else INCONCLUSIVE"
                  + _HYPOTHESES,
        thresholds=(("d_exponent_tol",), ("hypotheses", "c_max"), ("hypotheses", "buffer_min")),
        threshold="CI within k-1 +- {d_exponent_tol:g} (claims.d_exponent_tol), "
                                                     "two-sided",
        controls=("d_fixed",), rows=d_scaling_rows, reference=REF),
    "lower": ClaimSpec(
        key="lower",
        claim="lower bound from a good start: the mixing time is at least a constant times n (lam d)^(k-1)",
        criterion="the first time P_t(A) - pi(A) <= 1/4 + 2 SE (conservatively early), over n (lam d)^(k-1), "
                  "is >= lower_min at every n: a lower bound on the time to d_TV <= 1/4 from that good start"
                  + _HYPOTHESES,
        thresholds=(("lower_min",), ("hypotheses", "c_max"), ("hypotheses", "buffer_min")),
        threshold="ratio >= {lower_min:g} at every n (claims.lower_min)",
        controls=("stationary_start",), rows=lower_rows, reference=REF),
    "tail": ClaimSpec(
        key="tail",
        claim="past the mixing time the distance to equilibrium decays exponentially: P(T_meet > t) does",
        criterion="empirical P(T > 2m) and P(T > 3m) within their 95% bounds of {b2} and {b3}, and every "
                  "replica met",
        thresholds=(("tail_bounds",), ("tail_z",)), threshold="{b2} and {b3} + {tail_z:g} binomial SE",
        controls=("uncoupled",), rows=tail_rows, reference=REF),
    "good_set": ClaimSpec(
        key="good_set", claim="the chain stays in the good set for a long time, and longer as n grows",
        criterion="the median first exit time in relaxation times (censored at the horizon) rises with n at "
                  "every step",
        threshold="strict rise at every step of n", wrong_models=("jsq2",), rows=good_set_rows,
        reference=REF + "; docs/models.md#good-set"),
}


def claim_rows(result: MixingResult) -> list[ClaimRow]:
    """The rows of every spec of :data:`CLAIMS`, in order: upper bounds from good starts (both
    families) and bad starts, the d^(k-1) scaling, the lower bound (both families), exponential
    decay, the good set (both families)."""
    return [r for rs in claim_rows_by_key(result).values() for r in rs]


def claim_rows_by_key(result: MixingResult) -> dict[str, list[ClaimRow]]:
    """The rows of each spec of :data:`CLAIMS`, by key (the notebook prints them beside the figures)."""
    return {key: spec.rows(result, spec) for key, spec in CLAIMS.items()}


def tail_verdict(T: np.ndarray, bounds=(0.25, 0.125), z: float = 1.96) -> tuple[bool, str]:
    """P(T > 2m) and P(T > 3m) at the median m within ``bounds`` plus ``z`` binomial SE."""
    if not all_met(T):
        return False, f"{int(np.sum(~np.isfinite(T)))} of {T.size} never met (no decay to measure)"
    m = float(np.median(T))
    N = T.size
    out = []
    ok = True
    for j, bound in zip((2, 3), bounds):
        p = float(np.mean(T > j * m))
        slack = z * math.sqrt(bound * (1 - bound) / N)
        ok &= p <= bound + slack
        out.append(f"P(T > {j}m) = {p:.3f} (bound {bound} + {slack:.3f})")
    return ok, f"median m = {m:.3g} steps; " + "; ".join(out)


def exit_verdict(m: MeetingTimes, clock: MeetingTimes) -> tuple[bool, str]:
    """Median first exit time in relaxation times of ``clock``'s points: it must rise at every
    step of n (a median that never happens within the horizon counts as the largest)."""
    tau = np.array([relaxation_time(int(d), float(lam)) * steps_per_time(int(n), float(lam))
                    for n, d, lam in zip(clock.n, clock.d, clock.lam)])
    med = np.array([np.median(t) for t in m.T]) / tau  # inf when more than half never left
    big = np.where(np.isinf(med), np.finfo(float).max, med)
    ok = bool(np.all(np.diff(big) > 0))
    parts = [f"n={int(n)}: median {'never' if np.isinf(x) else f'{x:.3g} τ'} "
             f"({100 * np.mean(np.isinf(t)):.0f}% never leave)" for n, x, t in zip(m.n, med, m.T)]
    return ok, "; ".join(parts)
