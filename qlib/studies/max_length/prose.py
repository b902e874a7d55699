"""The maximum-length study's prose: notebook 01's methods and findings, rendered from PARAMETERS and
the result (no number typed in the notebook), and :func:`summary`, the numbers as a table."""

from __future__ import annotations

import math

import numpy as np

from qlib.studies import check_mode
from qlib.studies.max_length.claims import CLAIMS, max_verdict, profile_verdict
from qlib.studies.max_length.compute import LONG_COMMAND, MaxLengthResult
from qlib.studies.max_length.parameters import INDEPENDENT_BAND, INDEPENDENT_TAUS, PARAMETERS
from qlib.studies.wrong_models import WRONG_MODELS, short_label
from qlib.supermarket.regime import exact_lengths
from qlib.supermarket.theory import fluid_fixed_point


def _within(traj: np.ndarray, target: float, t: np.ndarray, rel: float = 0.05) -> float:
    """The first time after which traj stays within rel of target (nan if never)."""
    ok = np.abs(traj - target) <= rel * abs(target)
    bad = np.nonzero(~ok)[0]
    if bad.size == 0:
        return float(t[0])
    return float(t[bad[-1] + 1]) if bad[-1] + 1 < t.size else float("nan")


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def sci(x: float, digits: int = 2) -> str:
    """``x`` in the notebooks' notation: 4.1·10⁻⁵, 3·10³, 100 (powers of ten from 10^3 on)."""
    x = float(x)
    if x == 0 or 1e-2 <= abs(x) < 1e3:  # enough digits that 100 stays 100
        t = f"{x:.{max(digits, math.floor(math.log10(abs(x))) + 1) if x else digits}g}"
        if "e" not in t:
            return t
    e = math.floor(math.log10(abs(float(f"{x:.{digits}g}"))))
    m = f"{x / 10**e:.{digits}g}"
    return ("" if m == "1" else m + "·") + "10" + str(e).translate(_SUPERSCRIPT)


def methods_markdown(mode: str) -> str:
    """Notebook 01's "how every number here is measured", from PARAMETERS[mode] (no number typed
    in the notebook's prose)."""
    P = PARAMETERS[check_mode(mode)]
    near = [wm for wm in WRONG_MODELS if any(wm in P["near"][key] for key in ("max", "profile", "sweep"))]
    return (f"**How every number here is measured** (`qlib.supermarket.estimate_equilibrium`): every run "
            f"starts with all queues **empty** — away from the answer — burns in for **{P['burn_taus']:g} "
            f"relaxation times** τ of the fluid ODE (τ = 1/min|Re eig Df(s*)|, "
            f"`docs/models.md#relaxation-time`), then measures in batches of {P['batch_taus']:g} τ; error "
            f"bars are 95% intervals from the batch means of {P['max']['replicas']} independent replicas "
            f"({mode} mode). Each claim row is also computed, the same way and for as many steps, on "
            f"deliberately wrong models: far ones (JSQ(2) or JSQ(1) in place of JSQ(d), d off by 25%), which "
            "must fail its criterion, and near ones, plausible bugs "
            f"({', '.join(short_label(w) for w in near)}; {P['near']['replicas']} replicas, "
            f"{P['near']['batches']} batch), whose outcome is the row's *resolution*; the table records "
            "them all.")


def finite_n_markdown(mode: str) -> str:
    """Notebook 01's section (d) text, from PARAMETERS[mode] and the fluid fixed point."""
    P = PARAMETERS[check_mode(mode)]
    fn = P["finite_n"]
    lv = fn["level"]
    s_lv = float(fluid_fixed_point(fn["d"], fn["lam"], lv + 1)[lv])
    ns = " and ".join(sci(n) for n in fn["ns"])
    mid = (f" and, from the long tier (`{LONG_COMMAND}`, stored in `results/long/`), n = "
           f"{', '.join(sci(n) for n in fn['long_ns'])}" if fn["long_ns"] else "")
    far = (f"At n = {sci(fn['long_ns'][-1])} two independent count-chain codes measured "
           f"{INDEPENDENT_BAND[0]:g}–{INDEPENDENT_BAND[1]:g} times the fluid value over "
           f"~{INDEPENDENT_TAUS:g} τ (the grey band): converging that point needs about as many τ, so it "
           "is computed once on the long tier and read from there."
           ) if fn["long_ns"] else ""
    return (f"No theorem predicts this number at finite n: the fluid value s_{lv} = {sci(s_lv)} is the n → ∞ "
            "limit, and the refined mean field is an expansion in 1/n whose first terms need not have "
            "converged. So the table reports it as a *measurement*: `estimate_equilibrium` runs sequentially "
            f"(batches of {fn['batch_taus']:g} τ, at least {fn['min_batches'] * fn['batch_taus']:g} τ, at "
            f"most {fn['max_batches'] * fn['batch_taus']:g} τ) until the 95% interval of E[u_{lv}]/n is "
            f"within ±{fn['rel_error']:.0%}, at n = {ns}{mid}. " + far)


def findings_markdown(result: MaxLengthResult) -> str:
    """Notebook 01's "what the figures show", rendered from the result: every number below is
    computed here, none typed by hand, so a rerun cannot leave the prose behind its figures."""
    P = result.parameters
    out = []
    mx = result.max
    p_min = CLAIMS["max"].values(P)["p_min"]
    vals = []
    for j in range(mx.n.size):
        k = int(mx.k[j])
        v, _, m = max_verdict(mx, j, k, p_min)
        c = (1 - float(mx.lam[j])) * float(mx.d[j]) ** (k - 1)
        vals.append(f"k = {k}: {m:.3f} ({float(mx.max_low[j, k]):.3f} to {float(mx.max_high[j, k]):.3f}; "
                    f"(1-λ)d^(k-1) = {c:.2g}; {v})")
    sw = result.sweep
    jl = int(np.argmin((1 - sw.lam) * sw.d ** (sw.k - 1)))
    kl = int(sw.k[jl])
    out.append(f"- **(a) Where (1−λ)d^k ≫ log n, the maximum is k most of the time** (n = {int(mx.n[0])}; "
               f"against the threshold {p_min:g} fixed before the run), P(max = k) at " + "; ".join(vals)
               + f". At the sweep point deepest in the profile regime (n = {int(sw.n[jl])}, "
                 f"d = {int(sw.d[jl])}, (1−λ)d^(k−1) = "
                 f"{(1 - float(sw.lam[jl])) * float(sw.d[jl]) ** (kl - 1):.2g}) the maximum is "
                 f"k + 1 {100 * float(sw.max_dist[jl, kl + 1]):.0f}% of the time: the finite-n tail of (d). "
                 "The families below show where P(max = k) does rise with n.")
    c = (1 - sw.lam) * sw.d ** (sw.k - 1)
    fr = "; ".join(f"{float(sw.p[j, int(sw.k[j])]):.3f} at c = {c[j]:.2g} (bound "
                   f"{max(0.5, 1 - 2 * c[j]):.2f})"
                   for j in range(sw.n.size))
    pr = result.profile
    kp = int(pr.k[0])
    fp = exact_lengths(fluid_fixed_point(int(pr.d[0]), float(pr.lam[0]), kp + 1))
    prof = "; ".join(f"{float(pr.p[0, i]):.4f} against {fp[i]:.4f} at length {i}" for i in range(1, kp))
    tol = CLAIMS["profile"].values(P)["tolerance"]
    worst_w = max(profile_verdict(e, 0, int(pr.d[0]), float(pr.lam[0]), kp, tol)[2]
                  for e in (result.profile_low_d, result.profile_high_d))
    out.append(f"- **(b) Most queues have length exactly k**: the fraction at k is {fr}. Below k the fluid "
               f"fixed point predicts the k = {kp} profile ({prof}), while d off by 25% is up to "
               f"{100 * worst_w:.0f}% off.")
    fm = result.family
    out.append("- **(c) Along the γ = 0 family** (α = {a:g}, β = {b:g}, k = 2): P(max = k) = {p} at n = "
               "{ns}; the fraction of queues at k is {f}. The families section below puts this family beside "
               "families with γ > 0.".format(a=P["family"]["alpha"], b=P["family"]["beta"],
                                p=", ".join(f"{float(fm.max_dist[j, int(fm.k[j])]):.2f}"
                                            for j in range(fm.n.size)),
                                ns=", ".join(str(int(x)) for x in fm.n),
                                f=", ".join(f"{float(fm.p[j, int(fm.k[j])]):.2f}" for j in range(fm.n.size))))
    fn, fl, lv = result.finite_n, float(result.refined[0, 0]), P["finite_n"]["level"]
    ratio = fn.tail[:, lv] / fl
    sh = result.finite_n_short
    shm = float(np.mean(sh["tail"])) / fl
    j4 = [int(x) for x in fn.n].index(int(sh["n"]))
    out.append("- **(d) The finite-n tail** E[u_3]/n is " + ", ".join(f"{x:.0f}" for x in ratio)
               + " times the fluid value at n = " + ", ".join(str(int(x)) for x in fn.n)
               + f" ({'each converged' if bool(np.all(fn.converged)) else 'NOT all converged'} to ±"
               f"{P['finite_n']['rel_error']:.0%}); the refined mean field of order 1/n gives "
               + ", ".join(f"{x / fl:.0f}" for x in result.refined[:, 1]) + " and of order 1/n² "
               + ", ".join(f"{x / fl:.0f}" for x in result.refined[:, 2])
               + " (clipped at E[u_3]/n = 1). The old protocol (start at the fluid point, "
                 f"{P['short_taus']:g} τ) "
               f"reads {shm:.0f}× at n = {int(sh['n'])}, {shm / ratio[j4]:.2f} of the converged value.")
    fe = result.from_empty
    tt = fe.t / float(fe.tau)
    times = [_within(fe.sim[:, i], float(fe.fixed_point[i]), tt) for i in (1, 2, 3) if i < fe.sim.shape[1]]
    horizon = float(tt[-1])
    txt = ", ".join(f"{x:.2g} τ" if np.isfinite(x) else f"more than the {horizon:.2g} τ shown" for x in times)
    if times and all(np.isfinite(times)):
        tail = (f": the {P['burn_taus']:g} τ burn-in is {P['burn_taus'] / max(times):.0f} times the slowest "
                "of them.")
    else:
        tail = " (a level not settled within the run is not timed)."
    out.append("- **(e) From empty**, " + ", ".join(f"u_{i + 1}/n" for i in range(len(times)))
               + f" stay within 5% of their fixed-point values after {txt} (τ = {float(fe.tau):.3g})" + tail)
    return "\n".join(out)


#: the columns of :func:`summary` (NaN where a set does not have the number)
SUMMARY_COLUMNS = ("set", "n", "d", "one_minus_lam", "k", "p_max_k", "p_max_k_low", "p_max_k_high",
                   "p_max_k_plus_1",
                   "fraction_at_k", "taus", "converged", "tail_over_fluid", "tail_over_fluid_low",
                   "tail_over_fluid_high", "refined_order_1", "refined_order_2")


def summary(result: MaxLengthResult):
    """The numbers notebook 01 shows beside its figures, one row per point.

    Args:
        result: a :class:`MaxLengthResult`.

    Returns:
        A pandas DataFrame with :data:`SUMMARY_COLUMNS`: ``set`` "max" (section (a): P(max = k) and its
        95% CI), "family" (section (c): P(max = k), P(max = k + 1), the fraction of queues at k) and
        "finite_n" (section (d): E[u_level]/n over the fluid value with its CI, converged, the refined
        mean field of order 1 and 2 over the fluid value).
    """
    import pandas as pd

    out = []
    for name, e in (("max", result.max), ("family", result.family)):
        for j in range(e.n.size):
            k = int(e.k[j])
            out.append(dict(set=name, n=int(e.n[j]), d=int(e.d[j]), one_minus_lam=1 - float(e.lam[j]), k=k,
                            p_max_k=float(e.max_dist[j, k]), p_max_k_low=float(e.max_low[j, k]),
                            p_max_k_high=float(e.max_high[j, k]), p_max_k_plus_1=float(e.max_dist[j, k + 1]),
                            fraction_at_k=float(e.p[j, k]), taus=float(e.taus[j]),
                            converged=bool(e.converged[j])))
    fn, fl, lv = result.finite_n, float(result.refined[0, 0]), result.parameters["finite_n"]["level"]
    for j in range(fn.n.size):
        out.append(dict(set="finite_n", n=int(fn.n[j]), d=int(fn.d[j]), one_minus_lam=1 - float(fn.lam[j]),
                        k=int(fn.k[j]), taus=float(fn.taus[j]), converged=bool(fn.converged[j]),
                        tail_over_fluid=float(fn.tail[j, lv]) / fl,
                        tail_over_fluid_low=float(fn.tail_low[j, lv]) / fl,
                        tail_over_fluid_high=float(fn.tail_high[j, lv]) / fl,
                        refined_order_1=float(result.refined[j, 1]) / fl,
                        refined_order_2=float(result.refined[j, 2]) / fl))
    return pd.DataFrame(out, columns=list(SUMMARY_COLUMNS))
