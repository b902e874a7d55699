"""The who-works-the-most study's claims as data: :data:`CLAIMS`, one :class:`qlib.claims.ClaimSpec`
per kind of row, its wrong routing rules (:data:`WRONG_RULES`), and the functions that build the
rows from the study's result."""

from __future__ import annotations

import numpy as np

from qlib.claims import ClaimRow, ClaimSpec, Counterfactual, residual_text
from qlib.heterogeneous import SimulationResult
from qlib.stats import replica_mean
from qlib.studies.who_works_the_most.compute import (
    SimulatedCase,
    WhoWorksTheMostResult,
    gamma_key,
    geometric_rates,
    swap_residual,
)
from qlib.studies.who_works_the_most.parameters import INFORMED_MAX_N


def adjacent_pairs(mus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    o = np.argsort(-mus, kind="stable")
    return o[:-1], o[1:]


def _sim_margins(r: SimulationResult, claim: int) -> np.ndarray:
    """(replicas, pairs) simulated margin of claim 1, 2 or 3 (3: the band position minus 0 and
    1 minus it, the tighter side) for adjacent pairs."""
    L, M = adjacent_pairs(r.mus)
    B, T = r.busy_fraction, r.throughput
    if claim == 1:
        return B[:, M] - B[:, L]
    if claim == 2:
        return T[:, L] - T[:, M]
    low = r.mus[M] / r.mus[L]
    pos = (B[:, L] - low * B[:, M]) / (B[:, M] - low * B[:, M])
    return np.minimum(pos, 1.0 - pos)


def _exact_margins(mus: np.ndarray, P: np.ndarray, claim: int) -> np.ndarray:
    L, M = adjacent_pairs(mus)
    if claim == 1:
        return P[M] - P[L]
    if claim == 2:
        return mus[L] * P[L] - mus[M] * P[M]
    low = mus[M] / mus[L]
    pos = (P[L] - low * P[M]) / (P[M] - low * P[M])
    return np.minimum(pos, 1.0 - pos)


def _sim_verdict(r: SimulationResult, claim: int, exact: np.ndarray | None,
                 z_max: float = 5.0) -> tuple[bool, str, float]:
    """Every adjacent pair's 95% CI above 0 (and, given ``exact``, within ``z_max`` SE of it)."""
    est = replica_mean(_sim_margins(r, claim))
    lo, _ = est.interval()
    ok = bool(np.all(lo > 0))
    if exact is not None:
        ok = ok and bool(np.all(np.abs(est.mean - exact) < z_max * est.stderr))
    worst = int(np.argmin(lo))
    return ok, (f"{int(np.sum(lo <= 0))} of {lo.size} pairs with CI not above 0 "
                f"(worst {est.mean[worst]:.4f} ± {est.halfwidth()[worst]:.4f})"), float(lo.min())


#: The wrong routing rules (policies of :func:`qlib.heterogeneous.simulate`) a row runs, by key.
WRONG_RULES = {"fastest": "informed customers (fastest idle server) in place of a uniformly random idle "
                          "server",
               "slowest": "slowest idle server first in place of a uniformly random idle server",
               "mu_power": "routing proportional to mu^gamma (near: the gammas of PARAMETERS[mode]['sims'])",
               "proportional": "routing proportional to mu (exact solve)"}
_GRID = (" — evaluation of the closed form over a grid (checks the numerics, not the claim: every product "
         "form whose weights depend only on |S| has these signs)")
_C1 = "1. the faster server is busy less often: P_l < P_m (= the upper half of claim 3)"
_C2 = "2. yet it does more work: mu_l P_l > mu_m P_m (= the lower half of claim 3, (mu_m/mu_l) P_m < P_l)"
_SIM = "at every load, every adjacent pair: 95% CI over replicas above 0 and |sim - exact| < {z_max:g} SE"
_REF = "Cabral arXiv:0706.0560; docs/models.md#cabral-claims"
_IDS = "docs/models.md#cabral-identities"


def _e(x: float) -> str:
    """1e-9 as the table writes it (no zero-padded exponent)."""
    return f"{x:.0e}".replace("e-0", "e-").replace("e+0", "e+")


#: The study's claims as data, by key. Claim 3 of the paper is claims 1 and 2 together (upper half 1,
#: lower half 2 divided by mu_l): it has no row of its own. ``claim_rows`` builds the rows in table
#: order (the exact grid, then per number of servers the simulations, then the exact identities).
CLAIMS: dict[str, ClaimSpec] = {
    "busy_less_grid": ClaimSpec("busy_less_grid", _C1 + _GRID, "every adjacent pair's margin (from the exact "
                                "identities, sign-exact) > 0", wrong_models=("fastest",), reference=_REF),
    "more_work_grid": ClaimSpec("more_work_grid", _C2 + _GRID, "every adjacent pair's margin (from the exact "
                                "identities, sign-exact) > 0", wrong_models=("slowest",), reference=_REF),
    "busy_less": ClaimSpec("busy_less", _C1 + " (simulation)", _SIM, thresholds=(("z_max",),),
                           wrong_models=("fastest", "mu_power"), reference=_REF),
    "more_work": ClaimSpec("more_work", _C2 + " (simulation)", _SIM, thresholds=(("z_max",),),
                           wrong_models=("slowest", "mu_power"), reference=_REF),
    "same_law": ClaimSpec("same_law",
                          "longest-idle-first routing has the same P_j as uniform routing (Doroudi & "
                          "Gopalakrishnan)", "at every load, every server |sim - exact| < {z_max:g} SE",
                          thresholds=(("z_max",),), wrong_models=("fastest",),
                          reference="Doroudi & Gopalakrishnan, Operations Research 64(4) 2016 "
                                    "(arXiv:1402.3606); docs/models.md#longest-idle"),
    "throughput": ClaimSpec("throughput", "identity: sum_j mu_j P_j = lam (flow balance, any routing rule)",
                            "|sim - lam| < {z_max:g} SE at every load", thresholds=(("z_max",),),
                            reference=_IDS),
    "symmetric_routing": ClaimSpec(
        "symmetric_routing", "identity of symmetric routing: mu_l P(l busy, m idle) = mu_m P(m busy, l idle) "
        "(behind claims 1-3)", "residual < {residual}; routing proportional to mu must exceed it",
        thresholds=(("residual_max",),), wrong_models=("proportional",), reference=_IDS),
    "deflation": ClaimSpec(
        "deflation", "identity: mu_l P_l - mu_m P_m = (mu_l - mu_m) P(l and m busy) (exact, over the grid)",
        "residual < {residual}", thresholds=(("residual_max",),), reference=_IDS),
}
#: claim number -> (grid spec, simulation spec)
_BY_CLAIM = {1: ("busy_less_grid", "busy_less"), 2: ("more_work_grid", "more_work")}


def _grid_row(result: WhoWorksTheMostResult, claim: int, grid_par: str) -> ClaimRow:
    """Claim 1 or 2 over the exact grid (an identity of the closed form), with its wrong rule."""
    g = result.grid
    spec = CLAIMS[_BY_CLAIM[claim][0]]
    viol = getattr(g, f"violations{claim}")
    rule = spec.wrong_models[0]
    sel = g.informed_rule == (0 if rule == "fastest" else 1)
    iv = getattr(g, f"informed_violations{claim}")[sel]
    return ClaimRow(
        claim=spec.claim, parameters=grid_par, theory="margin > 0 for every pair with mu_l > mu_m",
        measured=f"{int(viol.sum())} violations in {int(g.pairs.sum())} pairs; smallest relative margin "
                 f"{float(getattr(g, f'min_rel{claim}').min()):.2e}",
        passed=bool(viol.sum() == 0 and g.pairs.sum() > 0), criterion=spec.criterion_text(result.parameters),
        kind="identity", reference=spec.reference,
        counterfactuals=(Counterfactual(
            model=f"{WRONG_RULES[rule]} (exact generator solve, the {int(sel.sum())} grid points with n <= "
                  f"{INFORMED_MAX_N})",
            measured=f"{int(iv.sum())} violations in {int(g.informed_pairs[sel].sum())} pairs",
            passed=bool(iv.sum() == 0), value=float(iv.sum())),))


def _sim_row(result: WhoWorksTheMostResult, group: list, claim: int, par: str, taus: float) -> ClaimRow:
    """Claim 1 or 2 by simulation at every load of ``group``, with its wrong rule and the near ones."""
    spec = CLAIMS[_BY_CLAIM[claim][1]]
    P = result.parameters
    z_max = spec.values(P)["z_max"]
    verdicts = [_sim_verdict(c.runs["random"], claim, _exact_margins(c.mus, c.exact, claim), z_max)
                for c in group]
    rule = spec.wrong_models[0]
    wrong = [_sim_verdict(c.runs[rule], claim, None) for c in group]
    return ClaimRow(
        claim=spec.claim, parameters=par,
        theory="exact margins: smallest " + ", ".join(
            f"{float(_exact_margins(c.mus, c.exact, claim).min()):.4f}" for c in group)
        + f" over {group[0].n - 1} adjacent pairs",
        measured="; ".join(f"rho={c.rho:g}: {v[1]}" for c, v in zip(group, verdicts)),
        passed=all(v[0] for v in verdicts), criterion=spec.criterion_text(P),
        kind="claim", taus=taus, start="empty, burn-in 5% of the run", reference=spec.reference,
        counterfactuals=(Counterfactual(
            model=f"{WRONG_RULES[rule]} (simulated the same way)",
            measured="; ".join(f"rho={c.rho:g}: {w[1]}" for c, w in zip(group, wrong)),
            passed=all(w[0] for w in wrong), value=min(w[2] for w in wrong)),)
        + _near_counterfactuals(group, claim, z_max),
        resolution=_resolution(group, claim, z_max))


def _throughput_row(result: WhoWorksTheMostResult, group: list, par: str, taus: float) -> ClaimRow:
    """Identity: total throughput equals the arrival rate, for every routing rule."""
    spec = CLAIMS["throughput"]
    z_max = spec.values(result.parameters)["z_max"]
    zs, parts = [], []
    for c in group:
        est = replica_mean(c.runs["random"].throughput.sum(axis=1))
        zs.append(abs(float(est.mean) - c.lam) / float(est.stderr))
        parts.append(f"rho={c.rho:g}: {float(est.mean):.4f} ± {float(est.halfwidth()):.4f} (lam {c.lam:.4f})")
    return ClaimRow(
        claim=spec.claim, parameters=par, theory="sum of throughputs = lam", measured="; ".join(parts),
        passed=bool(max(zs) < z_max), criterion=spec.criterion_text(result.parameters), kind="identity",
        taus=taus, start="empty", reference=spec.reference)


def _group_par(group: list) -> str:
    c0 = group[0]
    return (f"n = {c0.n} servers, mu geometric {c0.spread:g}..1, rho = "
            f"{', '.join(f'{c.rho:g}' for c in group)}; {c0.runs['random'].replicas} replicas x "
            f"{c0.runs['random'].steps:.0e} steps each; tau = "
            + ", ".join(f"{c.relaxation_time:.3g}" for c in group)
            + f" ({'exact spectral gap' if c0.exact_tau else 'estimate max(1/queue gap, 1/min mu)'})")


def claim_rows(result: WhoWorksTheMostResult) -> list[ClaimRow]:
    """The claims exactly over the grid and by simulation, longest-idle = random, and the
    identities; every claim row with the same criterion on a wrong routing rule."""
    g = result.grid
    G = result.parameters["grid"]
    grid_par = (f"n = {min(G['ns'])}..{max(G['ns'])} servers, loads {min(G['loads'])}..{max(G['loads'])}, "
                f"rates: geometric {G['spread']:g}..1, nearly equal (adjacent gap {G['gap']:g}), one fast "
                f"({G['spread']:g}) among nearly equal slow; {g.n.size} points, {int(g.pairs.sum())} "
                "adjacent pairs")
    rows = [_grid_row(result, claim, grid_par) for claim in _BY_CLAIM]
    for n in sorted({c.n for c in result.cases}):
        group = [c for c in result.cases if c.n == n]
        taus = min(c.taus for c in group)
        par = _group_par(group)
        rows += [_sim_row(result, group, claim, par, taus) for claim in _BY_CLAIM]
        rows += [_same_law_row(result, group, par, taus), _throughput_row(result, group, par, taus)]
    spec = CLAIMS["deflation"]
    res_max = spec.values(result.parameters)["residual_max"]
    rows.append(_symmetric_routing_row(result))
    rows.append(ClaimRow(
        claim=spec.claim, parameters=grid_par, theory="0 residual",
        measured=f"largest residual {residual_text(float(g.identity_residual.max()))} (P's from the O(n^2) "
                 "product form, joint probabilities from deflation)",
        passed=bool(g.identity_residual.max() < res_max),
        criterion=spec.criterion_text(result.parameters, residual=_e(res_max)), kind="identity",
        reference=spec.reference))
    return rows


def near_z(c: SimulatedCase, key: str, claim: int) -> float:
    """Largest |sim - exact uniform-routing margin| / SE over the adjacent pairs of run ``key``."""
    est = replica_mean(_sim_margins(c.runs[key], claim))
    return float(np.max(np.abs(est.mean - _exact_margins(c.mus, c.exact, claim)) / est.stderr))


def pair_gammas(group: list) -> list[float]:
    return [float(k[len("mu_power("):-1]) for k in group[0].runs if k.startswith("mu_power(")]


def _near_counterfactuals(group: list, claim: int, z_max: float = 5.0) -> tuple:
    """The row's criterion on routing proportional to mu^gamma (near wrong models), at every load."""
    out = []
    for gm in pair_gammas(group):
        key = gamma_key(gm)
        vs = [_sim_verdict(c.runs[key], claim, _exact_margins(c.mus, c.exact, claim), z_max) for c in group]
        zs = [near_z(c, key, claim) for c in group]
        out.append(Counterfactual(
            model=f"routing proportional to mu^{gm:g} (near: simulated the same way)",
            measured="|sim - exact|/SE by load: "
            + ", ".join(f"rho={c.rho:g}: {z:.1f}" for c, z in zip(group, zs)),
            passed=all(v[0] for v in vs), value=max(zs), near=True, se_distance=max(zs)))
    return tuple(out)


def _resolution(group: list, claim: int, z_max: float = 5.0) -> str:
    parts = []
    for gm in pair_gammas(group):
        zs = [near_z(c, gamma_key(gm), claim) for c in group]
        told = [c.rho for c, z in zip(group, zs) if z >= z_max]
        parts.append(f"mu^{gm:g}: told apart at rho = {', '.join(f'{r:g}' for r in told) or 'none'}")
    return f"|sim - exact| >= {z_max:g} SE: " + "; ".join(parts)


def _symmetric_routing_row(result: WhoWorksTheMostResult) -> ClaimRow:
    """The swap identity mu_l A_l = mu_m A_m is a property of symmetric routing: exact under
    uniform routing, violated by routing proportional to mu (exact solve at the figures' points)."""
    f = result.parameters["figures"]
    spec = CLAIMS["symmetric_routing"]
    res_max = spec.values(result.parameters)["residual_max"]
    mus = geometric_rates(f["n"], f["spread"])
    uni = [swap_residual(rho * mus.sum(), mus, 0.0) for rho in f["loads"]]
    prop = [swap_residual(rho * mus.sum(), mus, 1.0) for rho in f["loads"]]
    return ClaimRow(
        claim=spec.claim,
        parameters=f"n = {f['n']} servers, mu geometric {f['spread']:g}..1, rho = "
                   + ", ".join(f"{r:g}" for r in f["loads"]) + "; exact generator solve over the busy sets",
        theory="0 residual for uniform routing",
        measured="largest |residual|: uniform " + ", ".join(residual_text(x) for x in uni)
                 + "; routing proportional to mu (same solve): " + ", ".join(f"{x:.3f}" for x in prop),
        passed=bool(max(uni) < res_max),
        criterion=spec.criterion_text(result.parameters, residual=_e(res_max)),
        kind="identity", reference=spec.reference,
        counterfactuals=(Counterfactual(model="routing proportional to mu", measured=f"{max(prop):.3f}",
                                        passed=bool(max(prop) < res_max), value=max(prop)),))


def _same_law_row(result: WhoWorksTheMostResult, group: list, par: str, taus: float) -> ClaimRow:
    """Longest-idle-first routing has uniform routing's P_j (informed routing does not)."""
    spec = CLAIMS["same_law"]
    z_max = spec.values(result.parameters)["z_max"]

    def z(c: SimulatedCase, policy: str) -> float:
        est = c.runs[policy].estimate("busy_fraction")
        return float(np.max(np.abs(est.mean - c.exact) / est.stderr))

    zl = [z(c, "longest_idle") for c in group]
    zf = [z(c, "fastest") for c in group]
    return ClaimRow(
        claim=spec.claim, parameters=par, theory="the product-form P_j of uniform routing",
        measured="largest |sim - exact| / SE over servers: " + ", ".join(f"{x:.2f}" for x in zl),
        passed=bool(max(zl) < z_max), criterion=spec.criterion_text(result.parameters), kind="claim",
        taus=taus, start="empty", reference=spec.reference,
        counterfactuals=(Counterfactual(model=WRONG_RULES[spec.wrong_models[0]] + " (simulated the same way)",
                                        measured="largest |sim - exact| / SE: "
                                        + ", ".join(f"{x:.1f}" for x in zf),
                                        passed=bool(max(zf) < z_max), value=max(zf)),))
