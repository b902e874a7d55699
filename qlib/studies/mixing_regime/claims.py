"""The in-regime mixing study's claims as data (:data:`CLAIMS`) and the functions that build their rows."""

from __future__ import annotations

import dataclasses

import numpy as np

from qlib import stats
from qlib.claims import ClaimRow, ClaimSpec, Counterfactual, combine, decide, decide_band
from qlib.studies.mixing_regime.compute import LONG_COMMAND, RegimePoints, RegimeResult
from qlib.studies.mixing_regime.parameters import design_holds, relaxation_scale
from qlib.supermarket.regime import inside, lower_time, reference_time

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
    fit = _exponent(m.d, m.T)
    v = _band_verdict(fit, k - 1 - tol, k - 1 + tol)
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
    vf = _band_verdict(ff, k - 1 - tol, k - 1 + tol)
    contains0 = ff is not None and ff.ci[0] <= 0 <= ff.ci[1]
    jt = result.sweep_jsq2.T
    fj = _exponent(m.d, jt)
    vj = _band_verdict(fj, k - 1 - tol, k - 1 + tol)
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
    if outside:
        return [
            ClaimRow(
                **{**base, "claim": base["claim"] + " — a finding: outside H0-H3, the design or uncertified"},
                theory=f"exponent k - 1 = {k - 1}",
                measured=measured,
                passed=False,
                outcome="finding",
                counterfactuals=cfs,
            )
        ]
    return [
        ClaimRow(
            **base,
            theory=f"exponent k - 1 = {k - 1} (0 if the time were set by 1/(1-lam), fixed here)",
            measured=measured,
            passed=v == "PASS",
            outcome=v,
            counterfactuals=cfs,
        )
    ]


def optimal_rows(result: RegimeResult, spec: ClaimSpec) -> list[ClaimRow]:
    """Nearly optimal along the gamma > 0 family: T_meet against both bounds, as exponents in n."""
    P = result.parameters
    band = spec.values(P)["bound_band"]
    m, f = result.family, P["family"]
    base = dict(
        claim=spec.claim,
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


def iact_rows(result: RegimeResult, spec: ClaimSpec) -> list[ClaimRow]:
    """The integrated autocorrelation time of N and u_k in equilibrium against n d^(k-1) steps."""
    P = result.parameters
    hw_max = spec.values(P)["iact_halfwidth"]
    out = []
    for label, m in (("the d-sweep", result.sweep), ("the family", result.family)):
        miss = _missing(m)
        x = m.d if label == "the d-sweep" else m.n
        base = dict(
            claim=spec.claim.format(where=label),
            kind="measurement",
            criterion=spec.criterion_text(P),
            threshold=spec.threshold_text(P),
            start=START.format(**P),
            reference=spec.reference,
            taus=None,
            theory="tau_int(N) of order n d^(k-1) steps: exponent in "
            + ("d: k - 1" if label == "the d-sweep" else "n: 1 + (k-1) beta"),
            parameters=", ".join(f"n={int(n)}, d={int(d)}" for n, d in zip(m.n, m.d))
            + f"; {P['replicas']} replicas, {P['iact_length']:g} x n d^(k-1) steps each",
        )
        if miss:
            out.append(ClaimRow(**base, measured=miss, passed=False, outcome="INCONCLUSIVE"))
            continue
        scale = np.array([relaxation_scale(int(n), int(d), float(lam)) for n, d, lam in zip(m.n, m.d, m.lam)])
        rN = stats.replica_mean(m.iact_N / scale[:, None], axis=1)
        rk = stats.replica_mean(m.iact_uk / scale[:, None], axis=1)
        fit = stats.fit_power_law(x.astype(float), m.iact_N)
        ok = (fit.ci[1] - fit.ci[0]) / 2 <= hw_max
        out.append(
            ClaimRow(
                **base,
                passed=ok,
                measured=(
                    "tau_int(N)/(n d^(k-1)) = "
                    + ", ".join(f"{a:.2f} ± {b:.2f}" for a, b in zip(rN.mean, rN.halfwidth()))
                    + "; tau_int(u_k)/(n d^(k-1)) = "
                    + ", ".join(f"{a:.2f} ± {b:.2f}" for a, b in zip(rk.mean, rk.halfwidth()))
                    + f"; exponent of tau_int(N) in {'d' if label == 'the d-sweep' else 'n'}: {fit}"
                ),
            )
        )
    return out


#: The study's claims as data (thresholds under PARAMETERS[mode]["claims"], committed before the run).
CLAIMS: dict[str, ClaimSpec] = {
    "d_scaling_regime": ClaimSpec(
        key="d_scaling_regime",
        claim="inside the regime, the mixing time scales with d^(k-1): at fixed n and 1-lam its exponent in "
        "d "
        "is k-1 = {k_minus_1}",
        criterion="two-sided: the 95% bootstrap CI of the exponent of T_meet (fluid point vs a certified "
        "stationary sample) in d within k - 1 +- d_exponent_tol (PASS), disjoint (FAIL), else "
        "INCONCLUSIVE; a finding unless every point is inside H0-H3 (c <= {c_max:g}, buffer/excursion "
        ">= sqrt({buffer_min:g})), meets the design ((1-lam) d^(k-1) <= {c_design:g}, (1-lam) d^k >= "
        "ln n + {log_margin:g}) and is certified",
        thresholds=(
            ("d_exponent_tol",),
            ("hypotheses", "c_max"),
            ("hypotheses", "buffer_min"),
            ("design", "c_design"),
            ("design", "log_margin"),
        ),
        threshold="CI within k-1 +- {d_exponent_tol:g} (claims.d_exponent_tol), two-sided",
        wrong_models=("jsq2",),
        controls=("d_fixed",),
        rows=d_sweep_rows,
        reference=REF,
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
    "iact": ClaimSpec(
        key="iact",
        claim="the integrated autocorrelation time of N in equilibrium, against n d^(k-1) steps, "
        "along {where}",
        criterion="a measurement: reached when the 95% CI half-width of the exponent of tau_int(N) is <= "
        "iact_halfwidth (Sokal's automatic window, per replica)",
        thresholds=(("iact_halfwidth",),),
        threshold="half-width <= {iact_halfwidth:g} (claims.iact_halfwidth)",
        rows=iact_rows,
        reference=REF,
    ),
}


def claim_rows(result: RegimeResult) -> list[ClaimRow]:
    """The rows of every spec of :data:`CLAIMS`, in order, each naming the stored entries it was read from."""
    rows = [r for spec in CLAIMS.values() for r in spec.rows(result, spec)]
    if not result.provenance:
        return rows
    return [dataclasses.replace(r, parameters=f"{r.parameters}; {result.provenance}") for r in rows]
