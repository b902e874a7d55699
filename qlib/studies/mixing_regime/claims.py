"""The in-regime mixing study's claims as data (:data:`CLAIMS`) and the functions that build their rows."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from qlib import stats
from qlib.claims import ClaimRow, ClaimSpec, Counterfactual, combine, decide, decide_band
from qlib.studies.mixing_regime.compute import LONG_COMMAND, RegimePoints, RegimeResult, costs
from qlib.studies.mixing_regime.parameters import design_holds
from qlib.supermarket.mixing_law import predicted_meeting_time
from qlib.supermarket.regime import inside, lower_time, reference_time
from qlib.supermarket.theory import predicted_max_length

REF = (
    "Brightwell & Luczak arXiv:1201.5523 (as summarised; docs/models.md#mixing-time, "
    "docs/models.md#hypotheses)"
)
START = "certified: the fluid point burned in for {burn_factor:g}x the largest bottom/top meeting time"


def _ratio(m: RegimePoints, scale) -> tuple[np.ndarray, np.ndarray]:
    """Mean of T / scale(point) per point and its 95% t half-width over replicas."""
    ref = np.array([scale(int(n), int(d), float(lam)) for n, d, lam in zip(m.n, m.d, m.lam)])
    r = m.T / ref[:, None]
    est = stats.replica_mean(r, axis=1)
    return est.mean, est.halfwidth()


def _hyp_text(hyp: list, m: RegimePoints) -> str:
    parts = []
    for h, n, d in zip(hyp, m.n, m.d):
        bad = [x for x in ("H0", "H1", "H2", "H3") if not h[x]]
        parts.append(
            f"n={int(n)}, d={int(d)}: c = {h['c']:.2f}, buffer/excursion = "
            f"{h['buffer_over_excursion']:.1f}" + (f" [outside: {', '.join(bad)}]" if bad else "")
        )
    return "; ".join(parts)


def _missing(m: RegimePoints) -> str | None:
    if m.missing.any():
        return f"{int(m.missing.sum())} of {m.n.size} points not in results/long: run `{LONG_COMMAND}`"
    return None


def _exponent(x: np.ndarray, T: np.ndarray) -> stats.PowerFit | None:
    return stats.fit_power_law(x.astype(float), T) if np.all(np.isfinite(T)) else None


def _band_verdict(fit: stats.PowerFit | None, lo: float, hi: float) -> str:
    """PASS when the CI lies within [lo, hi], FAIL when disjoint (or never met), else INCONCLUSIVE."""
    return "FAIL" if fit is None else decide_band(fit.ci[0], fit.ci[1], lo, hi)


def _unmet(T: np.ndarray) -> str:
    return f"{int(np.sum(~np.isfinite(T)))} of {T.size} replica-runs never met within their caps"


def d_sweep_rows(result: RegimeResult, spec: ClaimSpec) -> list[ClaimRow]:
    """The exponent of T_meet in d at fixed n and 1 - lam, inside the regime, from certified starts."""
    P = result.parameters
    C = spec.values(P)
    tol = C["d_exponent_tol"]
    m, dsp = result.sweep, P["d_sweep"]
    k = int(m.k.max())
    params = (
        f"n = {dsp['n']}, 1-lam = {dsp['one_minus_lam']:g}, d = {', '.join(str(x) for x in dsp['ds'])}; "
        f"{P['replicas']} replicas; per point: " + _hyp_text(result.hyp_sweep, m)
    )
    base = dict(
        claim=spec.claim.format(k_minus_1=k - 1),
        parameters=params,
        criterion=spec.criterion_text(P),
        threshold=spec.threshold_text(P),
        start=START.format(**P),
        reference=spec.reference,
        taus=None,
    )
    miss = _missing(m)
    if miss:
        return [
            ClaimRow(**base, theory="exponent k - 1", measured=miss, passed=False, outcome="INCONCLUSIVE")
        ]
    # issue 42: the exponent T_pred has at the design's own points (finite c: not k - 1)
    ptol = C["predicted_exponent_tol"]
    pe = float(np.polyfit(np.log(m.d.astype(float)), np.log(_pred(m)), 1)[0])
    fit = _exponent(m.d, m.T)
    v = _band_verdict(fit, pe - ptol, pe + ptol)
    v_old = _band_verdict(fit, k - 1 - tol, k - 1 + tol)
    lo, lo_hw = _ratio(m, lower_time)
    up, up_hw = _ratio(m, reference_time)
    measured = (
        (f"exponent of T_meet in d: {fit}" if fit else _unmet(m.T))
        + "; T/(n (lam d)^(k-1)) = "
        + ", ".join(f"{a:.2f} ± {b:.2f}" for a, b in zip(lo, lo_hw))
        + "; T/(k d^(k-1) n ln n) = "
        + ", ".join(f"{a:.3f} ± {b:.3f}" for a, b in zip(up, up_hw))
    )
    if v == "INCONCLUSIVE" and fit is not None:
        hw = (fit.ci[1] - fit.ci[0]) / 2
        gap = max(1e-9, min(abs(fit.exponent - (k - 1 - tol)), abs(fit.exponent - (k - 1 + tol))))
        measured += (
            f" (undecided: a CI half-width below {gap:.2f} needs about "
            f"{int(np.ceil(P['replicas'] * (hw / gap) ** 2))} replicas at these points)"
        )
    ok_design = all(
        design_holds(int(n), int(d), float(lam), **P["claims"]["design"])
        for n, d, lam in zip(m.n, m.d, m.lam)
    )
    outside = not (all(inside(h) for h in result.hyp_sweep) and ok_design and bool(m.certified.all()))
    fixed = result.fixed
    ff = _exponent(m.d, fixed.T)
    vf = _band_verdict(ff, pe - ptol, pe + ptol)
    contains0 = ff is not None and ff.ci[0] <= 0 <= ff.ci[1]
    jt = result.sweep_jsq2.T
    fj = _exponent(m.d, jt)
    vj = _band_verdict(fj, pe - ptol, pe + ptol)
    measured += f"; against k - 1 +- {tol:g} (the criterion before issue 42): {v_old}"
    cfs = (
        Counterfactual(
            f"d held at {int(m.d[0])} whatever d is asked for (a routing whose drain does not "
            "depend on d), same certified protocol",
            (f"exponent {ff}" if ff else _unmet(fixed.T)) + f"; CI contains 0: {contains0} [{vf}]",
            vf != "FAIL",
            ff.exponent if ff else None,
        ),
        Counterfactual(
            f"JSQ(2) in place of JSQ(d), from the same certified samples, capped at "
            f"{P['cf_cap']:g}x the JSQ(d) time",
            (f"exponent {fj}" if fj else _unmet(jt)) + f" [{vj}]",
            vj != "FAIL",
            fj.exponent if fj else None,
        ),
    )
    theory = (f"exponent of T_pred in d at these points = {pe:.3f} (asymptotically k - 1 = {k - 1}; 0 if "
              "the time were set by 1/(1-lam), fixed here)")
    # These meeting times are the pilot whose fit suggested T_pred (issue 42): judged by a criterion
    # fixed after them, the row is a finding until a fresh-seed sweep is run.
    why = "outside H0-H3, the design or uncertified" if outside else \
        f"the criterion was fixed after these data (the pilot of T_pred; it reads {v} against it)"
    return [
        ClaimRow(
            **{**base, "claim": base["claim"] + f" — a finding: {why}"},
            theory=theory,
            measured=measured,
            passed=False,
            outcome="finding",
            counterfactuals=cfs,
        )
    ]


def _pred(m: RegimePoints, law=None) -> np.ndarray:
    """T_pred at each point of ``m`` (``law``(n, d, lam) in place of it: a wrong prediction)."""
    f = law or (lambda n, d, lam: predicted_meeting_time(n, d, lam).steps)
    return np.array([f(int(n), int(d), float(lam)) for n, d, lam in zip(m.n, m.d, m.lam)])


def _ratio_judge(m: RegimePoints, T: np.ndarray, pred: np.ndarray, C: dict, *, exponent: bool):
    """(verdict, text, value) of "every point's 95% CI of R = T/pred within [ratio_low, ratio_high]" and, with
    ``exponent``, "the CI of R's exponent in n within 0 +- ratio_exponent_tol"; unmet replicas FAIL."""
    lo_b, hi_b = C["ratio_low"], C["ratio_high"]
    if not np.all(np.isfinite(T)):
        return "FAIL", _unmet(T), None
    est = stats.replica_mean(T / pred[:, None], axis=1)
    hw = est.halfwidth()
    parts = [decide_band(a - h, a + h, lo_b, hi_b) for a, h in zip(est.mean, hw)]
    text = "R = " + ", ".join(f"{a:.2f} ± {h:.2f}" for a, h in zip(est.mean, hw))
    if exponent:
        fit = stats.fit_power_law(m.n.astype(float), T / pred[:, None])
        tol = C["ratio_exponent_tol"]
        parts.append(decide_band(fit.ci[0], fit.ci[1], -tol, tol))
        text += f"; exponent of R in n {fit}"
    worst = float(est.mean[np.argmax(np.abs(np.log(est.mean)))])
    return combine(parts), text, worst


def _laws(m: RegimePoints) -> dict[str, tuple[bool, object]]:
    """The wrong and near predictions judged against the same meeting times: label -> (near, law)."""
    d0 = int(m.d[0])

    def with_tau(tau):  # the same law with another relaxation time (model time), SD(N) kept
        def law(n, d, lam):
            return n * (1 + lam) * tau(n, d, lam) * math.log(predicted_meeting_time(n, d, lam).sd_N)

        return law

    k = lambda d, lam: int(predicted_max_length(d, lam))  # noqa: E731
    return {
        f"d held at {d0}: T_pred(n, {d0}, lam)": (
            False, lambda n, d, lam: predicted_meeting_time(n, d0, lam).steps),
        "the scale 1/(1-lam): tau = 1/(1-lam) in place of tau_fluid": (
            False, with_tau(lambda n, d, lam: 1 / (1 - lam))),
        "T_pred of JSQ(d-1)": (True, lambda n, d, lam: predicted_meeting_time(n, d - 1, lam).steps),
        "T_pred of JSQ(d+1)": (True, lambda n, d, lam: predicted_meeting_time(n, d + 1, lam).steps),
        "the asymptotic scale tau = d^(k-1), no finite-c correction": (
            True, with_tau(lambda n, d, lam: float(d) ** (k(d, lam) - 1))),
    }


def predicted_rows(result: RegimeResult, spec: ClaimSpec) -> list[ClaimRow]:
    """R = T_meet / T_pred along family A at issue 42's points (fresh seeds); k = 3: qlib.studies.k3."""
    P = result.parameters
    C = spec.values(P)
    m = result.predicted_family
    hyp = result.hyp_predicted_family
    Q = P["predicted"]
    R = Q["replicas"]
    base = dict(
        claim=spec.claim,
        criterion=spec.criterion_text(P),
        threshold=spec.threshold_text(P),
        start=(f"certified: one chain per point from the fluid point, burned in for {P['burn_factor']:g}x "
               f"the largest of {Q['cert_replicas']} bottom/top meeting times, sampled "
               f"{Q['spacing_tau_int']:g} predicted tau_int(N) apart"),
        reference=spec.reference,
        taus=None,
        parameters=(", ".join(f"n={int(n)}, d={int(d)}, 1-lam={1 - lam:.3g}"
                              for n, d, lam in zip(m.n, m.d, m.lam))
                    + f"; {R} replicas; per point: " + _hyp_text(hyp, m)),
        theory="R = 1: T_pred = tau_fluid (ln SD(N) + C), C = 0, from the linear-noise view (no free "
        "constant)",
    )
    miss = _missing(m)
    if miss:
        cost = sum(v for (name, _), v in costs(result.mode).items() if name == "02p_family")
        return [ClaimRow(**base, measured=f"{miss} (about {cost:.1e} replica-steps)", passed=False,
                         outcome="INCONCLUSIVE")]
    pred = _pred(m)
    v, text, _ = _ratio_judge(m, m.T, pred, C, exponent=True)
    lag = "; lag-one correlation of N between samples: " + ", ".join(f"{x:.2f}" for x in m.lag1_N)
    measured = (text + "; T_pred = " + ", ".join(f"{x:.3g}" for x in pred) + " steps" + lag)
    cfs = []
    h = result.predicted_family_half
    if not h.missing.any():
        vh, th, xh = _ratio_judge(h, h.T, pred, C, exponent=True)
        cfs.append(Counterfactual("JSQ(d/2) in place of JSQ(d), from the same certified samples, against "
                                  "T_pred of JSQ(d)", f"{th} [{vh}]", vh == "PASS", xh))
    for label, (near, law) in _laws(m).items():
        vl, tl, xl = _ratio_judge(m, m.T, _pred(m, law), C, exponent=True)
        cfs.append(Counterfactual(label, f"{tl} [{vl}]", vl == "PASS", xl, near=near))
    inside_all = all(inside(x) for x in hyp) and bool(m.certified.all())
    if not inside_all:
        return [ClaimRow(**{**base, "claim": base["claim"] + " — a finding: outside H0-H3 or uncertified"},
                         measured=measured, passed=False, outcome="finding", counterfactuals=tuple(cfs))]
    return [ClaimRow(**base, measured=measured, passed=v == "PASS", outcome=v, counterfactuals=tuple(cfs))]


def optimal_rows(result: RegimeResult, spec: ClaimSpec) -> list[ClaimRow]:
    """Nearly optimal along the gamma > 0 family: T_meet against both bounds, as exponents in n."""
    P = result.parameters
    band = spec.values(P)["bound_band"]
    m, f = result.family, P["family"]
    base = dict(
        claim=spec.claim,
        kind="check",  # issue 42: chains mixing as n/(1-lam), n d or n d ln^2 n pass it too
        criterion=spec.criterion_text(P),
        threshold=spec.threshold_text(P),
        start=START.format(**P),
        reference=spec.reference,
        taus=None,
        parameters=(
            f"lam = 1 - n^-{f['alpha']:g}, d = floor(n^{f['beta']:g}) (k = 2, gamma = "
            f"{1 - 2 * f['alpha'] + f['beta']:+.2f}); {P['replicas']} replicas; per point: "
            + _hyp_text(result.hyp_family, m)
        ),
    )
    miss = _missing(m)
    if miss:
        return [
            ClaimRow(
                **base, theory="both exponents near 0", measured=miss, passed=False, outcome="INCONCLUSIVE"
            )
        ]
    use = np.array([inside(h) and bool(c) for h, c in zip(result.hyp_family, m.certified)])
    theory = (
        "T/(n (lam d)^(k-1)) does not fall with n (bounded below) and T/(k d^(k-1) n ln n) does not "
        "grow (bounded above); their quotient is k ln n / lam^(k-1)"
    )

    def judge(T, sel):
        fl = _exponent(
            m.n[sel],
            T[sel]
            / np.array(
                [lower_time(int(n), int(d), float(lam)) for n, d, lam in zip(m.n[sel], m.d[sel], m.lam[sel])]
            )[:, None],
        )
        fu = _exponent(
            m.n[sel],
            T[sel]
            / np.array(
                [
                    reference_time(int(n), int(d), float(lam))
                    for n, d, lam in zip(m.n[sel], m.d[sel], m.lam[sel])
                ]
            )[:, None],
        )
        if fl is None or fu is None:
            return "FAIL", _unmet(T[sel]), None
        v = combine(
            [decide(fl.ci[0], fl.ci[1], -band, above=True), decide(fu.ci[0], fu.ci[1], band, above=False)]
        )
        return v, f"exponent in n of T/lower {fl}; of T/upper {fu}", fu.exponent

    lo, lo_hw = _ratio(m, lower_time)
    up, up_hw = _ratio(m, reference_time)
    per = "; ".join(
        f"n={int(n)}: T/lower {a:.2f} ± {b:.2f}, T/upper {c:.3f} ± {e:.3f}"
        for n, a, b, c, e in zip(m.n, lo, lo_hw, up, up_hw)
    )
    sel = use
    if sel.sum() < 3:
        v, text, _ = judge(m.T, np.ones_like(use))
        return [
            ClaimRow(
                **{**base, "claim": base["claim"] + " — a finding: fewer than 3 points inside H0-H3"},
                theory=theory,
                measured=f"{per}; {text}",
                passed=False,
                outcome="finding",
            )
        ]
    v, text, _ = judge(m.T, sel)
    jm = result.family_jsq2
    vj, tj, bj = judge(jm.T, sel & ~jm.missing)
    return [
        ClaimRow(
            **base,
            theory=theory,
            measured=f"{per}; at the points inside H0-H3: {text}",
            passed=v == "PASS",
            outcome=v,
            counterfactuals=(
                Counterfactual(
                    f"JSQ(2) in place of JSQ(d), from the same certified samples, "
                    f"capped at {P['cf_cap']:g}x the JSQ(d) time",
                    f"{tj} [{vj}]",
                    vj != "FAIL",
                    bj,
                ),
            ),
        )
    ]


#: The study's claims as data (thresholds under PARAMETERS[mode]["claims"], committed before the run).
#: The two autocorrelation rows ("iact": tau_int(N) against n d^(k-1) along the d-sweep and the family)
#: are withdrawn (issue 40): their runs of 10 n d^(k-1) steps held about three tau_int(N), where Sokal's
#: estimator returns about a quarter of the truth, so their exponents measured the run length. The
#: autocorrelation of N is judged in qlib.studies.fluctuations against the linear-noise prediction.
CLAIMS: dict[str, ClaimSpec] = {
    "d_scaling_regime": ClaimSpec(
        key="d_scaling_regime",
        claim="inside the regime, the mixing time scales with d^(k-1): at fixed n and 1-lam its exponent in "
        "d "
        "is k-1 = {k_minus_1}",
        criterion="two-sided: the 95% bootstrap CI of the exponent of T_meet (fluid point vs a certified "
        "stationary sample) in d within the exponent of T_pred = tau_fluid ln SD(N) in d at the design's "
        "own points +- predicted_exponent_tol (PASS), disjoint (FAIL), else INCONCLUSIVE (before T_pred: "
        "k - 1 +- {d_exponent_tol:g}, also shown); a finding while judged on the pilot data "
        "that suggested T_pred, and unless every point is inside H0-H3 (c <= {c_max:g}, "
        "buffer/excursion >= sqrt({buffer_min:g})), meets the design ((1-lam) d^(k-1) <= {c_design:g}, "
        "(1-lam) d^k >= ln n + {log_margin:g}) and is certified",
        thresholds=(
            ("predicted_exponent_tol",),
            ("d_exponent_tol",),
            ("hypotheses", "c_max"),
            ("hypotheses", "buffer_min"),
            ("design", "c_design"),
            ("design", "log_margin"),
        ),
        threshold="CI within T_pred's exponent +- {predicted_exponent_tol:g} "
        "(claims.predicted_exponent_tol), two-sided",
        wrong_models=("jsq2",),
        controls=("d_fixed",),
        rows=d_sweep_rows,
        reference=REF,
    ),
    "predicted_family": ClaimSpec(
        key="predicted_family",
        claim="the mixing time predicted: T_meet = tau_fluid ln SD(N) along family A (k = 2), fresh seeds",
        criterion="every point's 95% CI of R = T_meet / T_pred within [ratio_low, ratio_high], and the 95% "
        "bootstrap CI of R's exponent in n within +- ratio_exponent_tol of zero (PASS); any part disjoint "
        "(FAIL); else INCONCLUSIVE; a finding unless every point is inside H0-H3 and certified",
        thresholds=(("ratio_low",), ("ratio_high",), ("ratio_exponent_tol",)),
        threshold="R in [{ratio_low:g}, {ratio_high:g}] (claims.ratio_low, ratio_high); |exponent| <= "
        "{ratio_exponent_tol:g} (claims.ratio_exponent_tol)",
        wrong_models=("half_d",),
        controls=("d_fixed", "scale_1/(1-lam)", "T_pred(d-1)", "T_pred(d+1)", "asymptotic_d^(k-1)"),
        rows=predicted_rows,
        reference=REF + "; T_pred: docs/models.md#mixing-time-predicted (issue 42)",
    ),
    "nearly_optimal": ClaimSpec(
        key="nearly_optimal",
        claim="the mixing time is nearly optimal: between n (lam d)^(k-1) and k d^(k-1) n ln n up to "
        "constants "
        "along a gamma > 0 family",
        criterion="at the points inside H0-H3 (a finding if fewer than three): the 95% bootstrap CI of the "
        "exponent in n of "
        "T_meet/(n (lam d)^(k-1)) lies above -bound_band and that of T_meet/(k d^(k-1) n ln n) below "
        "+bound_band (PASS), either wholly on the other side (FAIL), else INCONCLUSIVE",
        thresholds=(("bound_band",),),
        threshold="exponents >= -{bound_band:g} and <= +{bound_band:g} (claims.bound_band)",
        wrong_models=("jsq2",),
        rows=optimal_rows,
        reference=REF,
    ),
}


def claim_rows(result: RegimeResult) -> list[ClaimRow]:
    """The rows of every spec of :data:`CLAIMS`, in order, each naming the stored entries it was read from."""
    rows = [r for spec in CLAIMS.values() for r in spec.rows(result, spec)]
    if not result.provenance:
        return rows
    return [dataclasses.replace(r, parameters=f"{r.parameters}; {result.provenance}") for r in rows]
