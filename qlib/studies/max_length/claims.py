"""The maximum-length study's claims as data: :data:`CLAIMS`, one :class:`qlib.claims.ClaimSpec` per
claim, and the functions that build each claim's rows from the study's result. Every threshold is
read from ``PARAMETERS[mode]["claims"]`` through its spec; every wrong model is named by its key
in :data:`qlib.studies.wrong_models.WRONG_MODELS`."""

from __future__ import annotations

import math

import numpy as np

from qlib import stats
from qlib.claims import ClaimRow, ClaimSpec, Counterfactual, decide, se_distance
from qlib.power import at_level, d_pass, refined_fraction, within
from qlib.studies.max_length.compute import Estimates, MaxLengthResult
from qlib.studies.wrong_models import WRONG_MODELS, resolution
from qlib.supermarket.regime import exact_lengths
from qlib.supermarket.theory import fluid_fixed_point

REF_MAX = ("Brightwell & Luczak arXiv:1201.5523; Brightwell, Fairthorne & Luczak 2018; "
           "docs/models.md#maximum-length")
REF_PROFILE = "Brightwell, Fairthorne & Luczak 2018 (abstract); docs/models.md#profile"


def _start(parameters: dict) -> str:
    """How the runs began, from the burn-in in PARAMETERS (the one place it is set)."""
    return f"empty; {parameters['burn_taus']:g} τ burn-in"


def _pt(e: Estimates, j: int) -> str:
    return f"n={int(e.n[j])}, d={int(e.d[j])}, 1-lam={1 - float(e.lam[j]):.3g}"


def _max_ci(e: Estimates, j: int, k: int) -> tuple[float, float, float]:
    """P(max = k) at point j and its 95% CI (0 above the levels reported)."""
    return tuple(float(a[j, k]) if k < a.shape[1] else 0.0 for a in (e.max_dist, e.max_low, e.max_high))


def max_verdict(e: Estimates, j: int, k: int, p_min: float) -> tuple[str, str, float]:
    """PASS / FAIL / INCONCLUSIVE of "P(max = k) >= p_min" from its 95% CI, the text, the value."""
    m, lo, hi = _max_ci(e, j, k)
    return decide(lo, hi, p_min), f"P(max = {k}) = {m:.3f} (95% CI {lo:.3f} to {hi:.3f})", m


def profile_verdict(e: Estimates, j: int, d: int, lam: float, k: int,
                     tolerance: float) -> tuple[bool, str, float]:
    """Whether lengths 1..k-1 at point j are within ``tolerance`` of the fluid value of (d, lam) plus
    the CI half-width; the text; the worst relative error."""
    fp = exact_lengths(fluid_fixed_point(d, lam, k + 1))
    worst, parts, ok = 0.0, [], True
    for i in range(1, k):
        half = (e.p_high[j, i] - e.p_low[j, i]) / 2
        err = abs(e.p[j, i] - fp[i])
        ok &= bool(err <= tolerance * fp[i] + half)
        worst = max(worst, err / fp[i])
        parts.append(f"length {i}: {e.p[j, i]:.4f} ± {half:.4f} vs fluid {fp[i]:.4f} "
                     f"({100 * err / fp[i]:.1f}% off)")
    return ok, "; ".join(parts), worst


def _near_label(wm: str, e: Estimates, j: int | None) -> str:
    """A near wrong model's label at point j (None: every point of the set), with its d."""
    ds = sorted({int(x) for x in (e.d if j is None else e.d[[j]])})
    return (f"{WRONG_MODELS[wm].label} (d = {', '.join(map(str, ds))}), same steps, {int(e.replicas[0])} "
            f"replicas, {int(round(float(e.taus[0] if j is None else e.taus[j])))} τ")


def _max_rows(result: MaxLengthResult, spec: ClaimSpec) -> list[ClaimRow]:
    """Rows 1-3: the maximum concentrates on k = 1, 2, 3 (threshold max.p_min)."""
    rows: list[ClaimRow] = []
    mx = result.max
    P = result.parameters
    t = spec.values(P)
    p_min = t["p_min"]
    for j in range(mx.n.size):
        n, d, lam, k = int(mx.n[j]), int(mx.d[j]), float(mx.lam[j]), int(mx.k[j])
        verdict, text, _ = max_verdict(mx, j, k, p_min)
        cfs = []
        wrong = result.max_wrong
        first = sum(len(w) for w in result.parameters["max"]["wrong_d"][:j])
        for i, wd in enumerate(result.parameters["max"]["wrong_d"][j]):
            vw, textw, mw = max_verdict(wrong, first + i, k, p_min)
            cfs.append(Counterfactual(f"JSQ({wd}) in place of JSQ({d}), same steps, "
                                      f"{int(wrong.replicas[first + i])} replicas", f"{textw} [{vw}]",
                                      vw != "FAIL", mw))
        for wm, e in _near_runs(spec, result.max_near):
            vw, textw, mw = max_verdict(e, j, k, p_min)
            cfs.append(Counterfactual(_near_label(wm, e, j), f"{textw} [{vw}]", vw != "FAIL", mw, near=True,
                                      se_distance=se_distance(*_max_ci(e, j, k), p_min)))
        eps = 1 - lam
        regime = ("in the regime" if eps * d ** (k - 1) <= t["regime_c_max"] else
                  f"outside the profile regime: (1-lam) d^(k-1) = {eps * d ** (k - 1):.2g}")
        if k >= 2 and eps * d ** (k - 1) > H1_C_MAX * (1 + 1e-9):
            # outside H1 a row cannot be a PASS or a FAIL of the theorem: it is a finding (issue 46: row 3,
            # k = 3 with c = 0.9; k = 3 is decided inside H0-H3 by qlib.studies.k3)
            verdict = "finding"
            regime += f"; outside H1 (c = (1-lam) d^(k-1) > {H1_C_MAX:g}): a finding"
        rows.append(ClaimRow(
            claim=spec.claim.format(k=k),
            parameters=f"{_pt(mx, j)}: (1-lam) d^k = {eps * d ** k:.3g} >> log n = {math.log(n):.1f}; "
                       f"{regime}; {int(mx.replicas[j])} replicas",
            theory=f"k = ceil(log(1/(1-lam))/log d) = {k}", measured=text, passed=verdict == "PASS",
            outcome=verdict, threshold=spec.threshold_text(P), criterion=spec.criterion_text(P),
            taus=float(mx.taus[j]), start=_start(P), reference=spec.reference, counterfactuals=tuple(cfs),
            resolution=resolution(cfs)))

    return rows


#: H1 of the hypotheses (docs/models.md#hypotheses): c = (1-lam) d^(k-1) <= this
H1_C_MAX = 0.5


def _profile_rows(result: MaxLengthResult, spec: ClaimSpec) -> list[ClaimRow]:
    """Row 4: the profile below k against the fluid fixed point."""
    rows: list[ClaimRow] = []
    pr = result.profile
    P = result.parameters
    tol = spec.values(P)["tolerance"]
    d, lam, k = int(pr.d[0]), float(pr.lam[0]), int(pr.k[0])
    ok, text, _ = profile_verdict(pr, 0, d, lam, k, tol)
    cfs = []
    for tag, e in (("x 0.75", result.profile_low_d), ("x 1.25", result.profile_high_d)):
        okw, textw, worst = profile_verdict(e, 0, d, lam, k, tol)
        cfs.append(Counterfactual(f"JSQ({int(e.d[0])}) in place of JSQ({d}) (d {tag}), same steps, judged "
                                  f"against the fluid values of d = {d}", textw, okw, worst))
    for wm, e in _near_runs(spec, result.profile_near):
        okw, textw, worst = profile_verdict(e, 0, d, lam, k, tol)
        cfs.append(Counterfactual(_near_label(wm, e, 0) + f", judged against the fluid values of d = {d}",
                                  f"{textw} [{'PASS' if okw else 'FAIL'}]", okw, worst, near=True))
    halves = [float(pr.p_high[0, i] - pr.p_low[0, i]) / 2 for i in range(1, k)]
    power = d_pass("max_length.profile", P["claims"], dict(d=d, one_minus_lam=1 - lam, k=k, halves=halves),
                   at=f"n={int(pr.n[0])}, 1-lam={1 - lam:.3g}")
    rows.append(ClaimRow(
        claim=spec.claim.format(k=k),
        parameters=f"{_pt(pr, 0)}; (1-lam) d^(k-1) = {(1 - lam) * d ** (k - 1):.2g} (outside the regime "
                   "where the asymptotic formulas hold; the fluid values are exact as n -> oo); "
                   f"{int(pr.replicas[0])} replicas",
        theory="fluid fixed point s_i - s_(i+1), s_i = lam^((d^i - 1)/(d - 1))", measured=text, passed=ok,
        criterion=spec.criterion_text(P),
        taus=float(pr.taus[0]), start=_start(P), reference=spec.reference,
        counterfactuals=tuple(cfs), resolution=resolution(cfs), power=power))

    return rows


def _most_at_k_rows(result: MaxLengthResult, spec: ClaimSpec) -> list[ClaimRow]:
    """Row 5: most queues at k, along the sweep: the paper's bound and the refined mean field's value."""
    rows: list[ClaimRow] = []
    # issue 47: judged on the fresh stream once results/long holds it (the stored seeds came before the
    # model_error clause; the claims table flags the row until then)
    fresh = result.fresh.get("sweep")
    sw = fresh if fresh is not None else result.sweep
    eps_ = 1 - sw.lam
    c = eps_ * sw.d ** (sw.k - 1)
    P = result.parameters
    t = spec.values(P)
    min_idle, tol = t["min_idle"], t["model_error"]
    ok_pts = [j for j in range(sw.n.size) if eps_[j] * sw.n[j] >= min_idle]  # enough idle queues on average
    d0 = int(sw.d[0])
    # the prediction: the refined mean field (order 1/n) of JSQ(d) at the point, for every model
    pred = {j: at_level(refined_fraction(int(sw.n[j]), d0, float(eps_[j])), int(sw.k[j])) for j in ok_pts}

    def at_k(e):
        """Per point: (passes, fraction at k, lower CI end, bound, CI half-width), the same criterion for
        every model: lower CI end >= the bound, and within model_error + half-width of the prediction."""
        out = []
        for j in ok_pts:
            kk, bound = int(sw.k[j]), max(0.5, 1 - 2 * c[j])
            v, lo, hi = float(e.p[j, kk]), float(e.p_low[j, kk]), float(e.p_high[j, kk])
            half = (hi - lo) / 2
            out.append((bool(lo >= bound and within(v, half, pred[j], tol)), v, lo, bound, half))
        return out

    model = at_k(sw)
    ok = bool(ok_pts) and all(r[0] for r in model)
    parts = [f"c={c[j]:.2g}: {v:.3f} ± {half:.3f} (CI from {low:.3f}) >= {bound:.2f}; refined mean field "
             f"{pred[j]:.3f} ({v - pred[j]:+.3f})" for j, (_, v, low, bound, half) in zip(ok_pts, model)]
    wrong = at_k(result.sweep_jsq2)
    okw, textw = all(r[0] for r in wrong), "; ".join(f"{r[1]:.3f}" for r in wrong)
    cfs = [Counterfactual("JSQ(2) in place of JSQ(d), same steps", f"fraction at k: {textw}", okw)]
    for wm, e in _near_runs(spec, result.sweep_near):
        got = at_k(e)
        okn = all(r[0] for r in got)  # as for JSQ(2): no point judged is no rejection
        # SE distance of the nearest point to its prediction band (SE = half-width / 1.96)
        se = min(((abs(v - pred[j]) - tol) / (h / 1.96) for j, (_, v, _, _, h) in zip(ok_pts, got) if h > 0),
                 default=None)
        cfs.append(Counterfactual(_near_label(wm, e, None), "fraction at k: " + "; ".join(
            f"{v:.3f} ± {h:.3f} vs {pred[j]:.3f}" for j, (_, v, _, _, h) in zip(ok_pts, got))
            + f" [{'PASS' if okn else 'FAIL'}]", okn, near=True, se_distance=se))
    at = ", ".join(f"n={int(sw.n[j])}, 1-lam={float(eps_[j]):.3g}" for j in ok_pts)
    power = d_pass("max_length.most_at_k", P["claims"], dict(d=d0, points=[
        dict(n=int(sw.n[j]), one_minus_lam=float(eps_[j]), k=int(sw.k[j]), c=float(c[j]), half=r[4])
        for j, r in zip(ok_pts, model)]), at=at) if ok_pts else None
    rows.append(ClaimRow(
        claim=spec.claim,
        parameters=f"n = {', '.join(str(int(x)) for x in sw.n)} ((1-lam) n = "
                   f"{', '.join(f'{x:.0f}' for x in eps_ * sw.n)}), d={d0}, k=2, c = (1-lam) "
                   f"d^(k-1) in {', '.join(f'{c[j]:.2g}' for j in ok_pts)} (points with (1-lam) n >= "
                   f"{min_idle:g}); {int(sw.replicas[0])} replicas",
        theory="fraction at k >= max(1/2, 1 - 2c) (Brightwell, Fairthorne & Luczak: w.h.p. as n -> oo); its "
               "value: the refined mean field (order 1/n) of JSQ(d) at the point",
        measured="; ".join(parts) + ("; on the fresh stream (issue 47)" if fresh is not None else ""),
        passed=ok,
        criterion=spec.criterion_text(P), threshold=spec.threshold_text(P),
        taus=float(sw.taus[ok_pts].min()) if ok_pts else None, start=_start(P), reference=spec.reference,
        counterfactuals=tuple(cfs), resolution=resolution(cfs), power=power,
        # the data it is judged on (qlib.claims.with_criteria): the fresh stream once stored
        criteria={"data": ["01_fresh_sweep"]} if fresh is not None else None))

    return rows


def _asymptotic_rows(result: MaxLengthResult, spec: ClaimSpec) -> list[ClaimRow]:
    """Row 6: the asymptotic formula sharpens as c -> 0 (judged on the fluid fixed point)."""
    rows: list[ClaimRow] = []
    sw = result.sweep
    P = result.parameters
    factor = spec.values(P)["error_factor"]
    eps_ = 1 - sw.lam
    c = eps_ * sw.d ** (sw.k - 1)
    # The asymptotic formulas (1-lam) d^i (i < k) are statements about n -> oo, whose equilibrium is
    # the fluid fixed point: their error is judged there, for k = 2 (length 1, the sweep's points)
    # and k = 3 (lengths 1 and 2). The simulation at (1-lam) n = 40 is reported beside it: at
    # d = 100 its finite-n shift is as large as the formula's error (the finite_n measurement).
    # the sweep's own c = (1-lam) d^(k-1) (k = 2), and the same c at k = 3: 1-lam = c / d^2
    d0 = int(sw.d[0])
    sweeps = {2: [float(x) for x in eps_], 3: [float(x) / d0**2 for x in c]}

    def formula_errors(d_model: int) -> dict[int, np.ndarray]:
        """(points, lengths 1..k-1) relative error of (1-lam) d0^i against the fluid of d_model."""
        out = {}
        for kk, epss in sweeps.items():
            rows_ = []
            for e_ in epss:
                fp = fluid_fixed_point(d_model, one_minus_lam=e_, levels=kk + 1)
                rows_.append([abs(exact_lengths(fp)[i] - e_ * d0**i) / (e_ * d0**i) for i in range(1, kk)])
            out[kk] = np.array(rows_)
        return out

    def sharpens(errs: dict[int, np.ndarray]) -> bool:  # c falls along the sweep
        return all(bool(np.all(np.diff(v, axis=0) < 0) and np.all(v <= factor * c[:, None]))
                   for v in errs.values())

    def show(errs: dict[int, np.ndarray]) -> str:
        return "; ".join(f"k={kk}: " + ", ".join("/".join(f"{100 * x:.1f}%" for x in row) for row in v)
                         for kk, v in errs.items())

    errs = formula_errors(d0)
    errw = formula_errors(round(1.25 * d0))
    sim_err = [abs(sw.p[j, 1] - eps_[j] * sw.d[j]) / (eps_[j] * sw.d[j]) for j in range(sw.n.size)]
    rows.append(ClaimRow(
        claim=spec.claim,
        parameters=f"d={d0}; k=2: 1-lam = {', '.join(f'{x:.3g}' for x in sweeps[2])} (length 1); k=3: 1-lam "
                   f"= {', '.join(f'{x:.3g}' for x in sweeps[3])} (lengths 1 and 2); c = "
                   f"{', '.join(f'{x:.2g}' for x in c)}",
        theory=f"relative error O(c): <= {factor:g}c, and shrinking at every step as c falls",
        measured="fluid fixed point (the n -> oo equilibrium), relative error at c = "
                 f"{', '.join(f'{x:.2g}' for x in c)}: {show(errs)}. Simulated at (1-lam) n = 40 (n = "
                 f"{', '.join(str(int(x)) for x in sw.n)}), length 1: "
                 + ", ".join(f"{100 * x:.1f}%" for x in sim_err)
                 + ("; the simulated error exceeds the fluid formula's error at c = "
                    + ", ".join(f"{c[j]:.2g}" for j in range(sw.n.size) if sim_err[j] > errs[2][j].max())
                    + " (the finite-n shift: much larger n would be needed there)"
                    if any(sim_err[j] > errs[2][j].max() for j in range(sw.n.size)) else ""),
        passed=sharpens(errs), kind="identity",
        criterion=spec.criterion_text(P),
        taus=None, start=None, reference=spec.reference,
        counterfactuals=(Counterfactual(
            f"JSQ({round(1.25 * d0)}) in place of JSQ({d0}) (d x 1.25): its fluid fixed point judged by the "
            f"formula with d = {d0}", show(errw), sharpens(errw)),)))

    return rows


def _boundary_rows(result: MaxLengthResult, spec: ClaimSpec) -> list[ClaimRow]:
    """Row 7: on a boundary two levels share the mass, in the proportions of the mean field."""
    rows: list[ClaimRow] = []
    fresh = result.fresh.get("boundary")  # issue 47, as for row 5
    bd = fresh if fresh is not None else result.boundary
    P = result.parameters
    t = spec.values(P)
    m, tol = t["min_share"], t["model_error"]
    n0, d0, e0, k0 = int(bd.n[0]), int(bd.d[0]), 1 - float(bd.lam[0]), int(bd.k[0])
    # the prediction: the refined mean field (order 1/n) of JSQ(d) on the boundary, for the control too
    pred = refined_fraction(n0, d0, e0)

    def shares(e, j):
        """Both fractions (at k and k+1 of the boundary point) have lower CI ends >= min_share and are
        within model_error + half-width of the prediction; the text; the half-widths."""
        ok, parts, halves = True, [], []
        for i in (k0, k0 + 1):
            v, lo, hi = float(e.p[j, i]), float(e.p_low[j, i]), float(e.p_high[j, i])
            half = (hi - lo) / 2
            ok &= bool(lo >= m and within(v, half, at_level(pred, i), tol))
            parts.append(f"at {'k' if i == k0 else 'k+1'}: {v:.3f} ± {half:.3f} (CI from {lo:.3f}) vs "
                         f"{at_level(pred, i):.3f}")
            halves.append(half)
        return ok, "; ".join(parts), halves

    ok, text, halves = shares(bd, 0)
    okc, textc, _ = shares(bd, 1)
    xb = [math.log(1 / (1 - float(bd.lam[j]))) / math.log(float(bd.d[j])) for j in range(2)]
    fl = exact_lengths(fluid_fixed_point(d0, float(bd.lam[0]), 4))
    power = d_pass("max_length.boundary", P["claims"],
                   dict(d=d0, n=n0, one_minus_lam=e0, k=k0, halves=halves), at=f"n={n0}, 1-lam={e0:.3g}")
    rows.append(ClaimRow(
        claim=spec.claim,
        parameters=f"{_pt(bd, 0)} (log(1/(1-lam))/log d = {xb[0]:.2f}); {int(bd.replicas[0])} replicas",
        theory=(f"fluid: {fl[2]:.3f} at k, {fl[3]:.3f} at k+1; refined mean field (order 1/n): "
                f"{at_level(pred, k0):.3f} at k, {at_level(pred, k0 + 1):.3f} at k+1"),
        measured=text + ("; on the fresh stream (issue 47)" if fresh is not None else ""), passed=ok,
        criterion=spec.criterion_text(P), threshold=spec.threshold_text(P),
        criteria={"data": ["01_fresh_boundary"]} if fresh is not None else None,
        taus=float(bd.taus[0]), start=_start(P), reference=spec.reference,
        counterfactuals=(Counterfactual(f"the same d off the boundary (1-lam = {1 - float(bd.lam[1]):.3g}, "
                                        f"log(1/(1-lam))/log d = {xb[1]:.2f}), judged against the boundary's "
                                        "prediction: a control, not a model", textc, okc),), power=power))

    return rows


def _finite_n_rows(result: MaxLengthResult, spec: ClaimSpec) -> list[ClaimRow]:
    """Row 8: the finite-n tail (a measurement)."""
    rows: list[ClaimRow] = []
    # the finite-n tail: a measurement (no sharp theory at these n), converged, beside the
    # refined mean field; the size at n = 1e5 (the long tier) is judged against independent codes
    P = result.parameters
    t = spec.values(P)
    fnp = P["finite_n"]
    fn = result.finite_n
    lv = fnp["level"]
    fl = float(result.refined[0, 0])
    ratio = fn.tail[:, lv] / fl
    lo, hi = fn.tail_low[:, lv] / fl, fn.tail_high[:, lv] / fl
    ref_lo, ref_hi = t["independent_band"]
    min_taus = fnp["min_batches"] * fnp["batch_taus"]
    conv = bool(np.all(fn.converged) and np.all(fn.taus >= min_taus - 1e-6))
    falls = bool(np.all(hi[1:] < lo[:-1]))
    far = bool(lo[-1] >= t["fluid_multiple"])
    at5 = [j for j in range(fn.n.size) if int(fn.n[j]) == 100_000]
    ref_ok = all(lo[j] <= ref_hi and hi[j] >= ref_lo for j in at5)
    ok = conv and falls and far and ref_ok and not result.finite_n_missing
    sh = result.finite_n_short
    st = stats.replica_mean(sh["tail"] / fl)
    slo, shi = st.interval()
    j4 = [int(x) for x in fn.n].index(int(sh["n"]))
    okw = bool(slo <= hi[j4] and shi >= lo[j4] and float(st.halfwidth()) <= fnp["rel_error"] * float(st.mean))
    rows.append(ClaimRow(
        claim=spec.claim,
        parameters=f"lam={float(fn.lam[0])}, d={int(fn.d[0])}, n = {', '.join(str(int(x)) for x in fn.n)}"
                   + (f" ({result.finite_n_provenance})" if result.finite_n_provenance else "") + "; "
                   f"{int(fn.replicas[0])} replicas, batches of {fnp['batch_taus']:g} τ, sequential until "
                   f"the 95% CI is within ±{fnp['rel_error']:.0%} (at least {min_taus:g} τ)",
        theory=f"fluid s_3 = {fl:.2e}; refined mean field: order 1/n "
               + ", ".join(f"{x / fl:.0f}x" for x in result.refined[:, 1]) + "; order 1/n^2 "
               + ", ".join(f"{x / fl:.0f}x" for x in result.refined[:, 2])
               + " (the expansion has not converged at these n)",
        measured="; ".join(f"n={int(fn.n[j])}: {ratio[j]:.0f}x fluid (95% CI {lo[j]:.0f} to {hi[j]:.0f}; "
                           f"{'converged' if fn.converged[j] else 'NOT converged'}, {fn.taus[j]:.0f} τ)"
                           for j in range(fn.n.size))
                 + "".join(f"; n = {n}: {why}" for n, why in result.finite_n_missing),
        passed=ok, kind="measurement",
        criterion=spec.criterion_text(P, rel_error=fnp["rel_error"], min_taus=min_taus)
                  + (f"; at n = 1e5 the CI overlaps the independent measurement {ref_lo:g}-{ref_hi:g}x "
                     "(docs/models.md#finite-n-effects)" if at5 else ""),
        taus=float(fn.taus.min()), start=_start(P), reference=spec.reference,
        counterfactuals=(
            Counterfactual("the old protocol at n = " + f"{int(fn.n[j4])}: start at the fluid fixed point, "
                             "1 τ burn-in, "
                             f"{result.parameters['short_taus']:g} τ measured (must reproduce the converged "
                             "value to the same precision)",
                           f"{float(st.mean):.0f}x fluid (95% CI {float(slo):.0f} to {float(shi):.0f})", okw,
                           float(st.mean)),
            Counterfactual("the fluid limit (n = infinity, no finite-n effect)", "1x fluid at every n", False,
                           1.0))))

    return rows


def _identity_rows(result: MaxLengthResult, spec: ClaimSpec) -> list[ClaimRow]:
    """Row 9: the idle fraction is 1 - lam (an identity)."""
    rows: list[ClaimRow] = []
    # identity: the idle fraction is exactly 1 - lam (E[u_1] = lam n for every routing rule)
    e = result.sweep
    P = result.parameters
    f = spec.values(P)["ci_factor"]
    z = [(float(e.tail[j, 1]), float((e.tail_high[j, 1] - e.tail_low[j, 1]) / 2), float(e.lam[j]))
         for j in range(e.n.size)]
    rows.append(ClaimRow(
        claim=spec.claim,
        parameters=f"the sweep points (n = {', '.join(str(int(x)) for x in e.n)}, d={int(e.d[0])})",
        theory="E[u_1]/n = lam",
        measured="; ".join(f"1-lam={1 - lm:.3g}: {1 - t:.5f} ± {h:.5f}" for t, h, lm in z),
        passed=all(abs(t - lm) <= max(f * h, 1e-12) for t, h, lm in z),
        criterion=spec.criterion_text(P, times={2.0: "twice"}.get(float(f), f"{f:g} times")),
        kind="identity",
        taus=float(e.taus.min()), start=_start(P), reference=spec.reference))
    return rows


def _near_runs(spec: ClaimSpec, runs: dict) -> list:
    """(key, Estimates) of the spec's near wrong models that this mode ran, in the spec's order."""
    return [(wm, runs[wm]) for wm in spec.wrong_models if wm in runs]


#: The study's claims as data, in table order: each spec's thresholds (paths under
#: PARAMETERS[mode]["claims"]), the criterion text rendered from them, its wrong models (keys of
#: WRONG_MODELS; the near ones a mode runs are PARAMETERS[mode]["near"]) and controls.
CLAIMS: dict[str, ClaimSpec] = {
    "max": ClaimSpec(
        "max", "the maximum queue length concentrates on k = {k}",
        "the 95% CI of P(max = k) wholly at or above the threshold (PASS), wholly below (FAIL), else "
        "INCONCLUSIVE", thresholds=(("max", "p_min"), ("max", "regime_c_max")),
        threshold="P(max = k) >= {p_min:g} (the threshold first stated; PARAMETERS max.p_min)",
        wrong_models=("jsq1", "jsq2", "d-1", "d*1.1", "other_sampling", "eta=0.01", "eta=0.001"),
        rows=_max_rows, reference=REF_MAX),
    "profile": ClaimSpec(
        "profile", "the numbers of queues at lengths 1..k-1 are predictable: the fluid fixed point (k = {k})",
        "at every length 1..k-1: |measured - fluid| <= {tolerance:.0%} of fluid + 95% CI half-width",
        thresholds=(("profile", "tolerance"),),
        wrong_models=("d*0.75", "d*1.25", "d*0.9", "d*1.1", "other_sampling"), rows=_profile_rows,
        reference=REF_PROFILE),
    "most_at_k": ClaimSpec(
        "most_at_k", "most queues have length exactly k: a fraction >= 1 - 2(1-lam) d^(k-1), at the value "
        "the mean field predicts",
        "at every point with (1-lam) n >= {min_idle:g}: the lower end of the 95% CI of the fraction at k >= "
        "max(1/2, 1 - 2c), and |fraction at k - refined mean field of JSQ(d)| <= {model_error:g} + its 95% "
        "CI half-width (PASS: both at every point; else FAIL)",
        thresholds=(("most_at_k", "min_idle"), ("most_at_k", "model_error")),
        threshold="lower 95% end >= max(1/2, 1 - 2c); within {model_error:g} (model error) + CI half-width "
                  "of the refined mean field",
        wrong_models=("jsq2", "d-1", "d*0.9", "eta=0.01"), rows=_most_at_k_rows, reference=REF_PROFILE),
    "asymptotic": ClaimSpec(
        "asymptotic",
        "identity (algebra of the fluid fixed point, issue 41: at k = 2 the relative error is about c/2, "
        "below 2c for every c): the asymptotic formula (1-lam) d^i for lengths i < k gets sharp as c = "
        "(1-lam) d^(k-1) -> 0 (n -> oo)",
        "against the fluid fixed point: the error at every length below k falls at every step of both sweeps "
        "and is <= {error_factor:g}c",
        thresholds=(("asymptotic", "error_factor"),), wrong_models=("d*1.25",), rows=_asymptotic_rows,
        reference="docs/models.md#asymptotic-profile"),
    "boundary": ClaimSpec(
        "boundary",
        "on a boundary (1-lam) d^k = 1 the mass is shared by lengths k and k+1 (the asymptotics are not "
        "sharp), in the proportions the mean field predicts",
        "the lower ends of the 95% CIs of the fractions at k and at k+1 both >= {min_share:g}, and each "
        "within {model_error:g} + its 95% CI half-width of the refined mean field of JSQ(d) at the point",
        thresholds=(("boundary", "min_share"), ("boundary", "model_error")),
        threshold="both lower 95% ends >= {min_share:g}; each within {model_error:g} (model error) + CI "
                  "half-width of the refined mean field", controls=("off_boundary",), rows=_boundary_rows,
        reference="docs/models.md#boundary-case"),
    "finite_n": ClaimSpec(
        "finite_n",
        "finite-n tail at length 3: E[u_3]/n is hundreds to thousands of times the fluid value at n = "
        "1e3..1e4 and falls toward it as n grows (the refined mean field of order 1/n and 1/n^2 beside it)",
        "converged (CI within ±{rel_error:.0%}, >= {min_taus:g} τ) at every n; the 95% CIs fall with n "
        "without overlapping; the lower end at the largest n >= {fluid_multiple:g}x fluid",
        thresholds=(("finite_n", "fluid_multiple"), ("finite_n", "independent_band")),
        controls=("short_fluid_run", "fluid_limit"), rows=_finite_n_rows,
        reference="docs/models.md#finite-n-effects"),
    "identity": ClaimSpec(
        "identity",
        "identity: the fraction of idle queues is exactly 1 - lam (E[u_1] = lam n, any routing rule)",
        "|E[u_1]/n - lam| <= {times} the 95% CI half-width (about 5 standard errors) at every point",
        thresholds=(("identity", "ci_factor"),), rows=_identity_rows,
        reference="docs/models.md#level-balance"),
}


def claim_rows(result: MaxLengthResult) -> list[ClaimRow]:
    """The rows of every spec of :data:`CLAIMS`, in order: the maximum (k = 1, 2, 3), the profile
    below k, most queues at k, the asymptotic sweep, the boundary, the finite-n tail, the idle
    fraction (an identity)."""
    return [r for spec in CLAIMS.values() for r in spec.rows(result, spec)]
