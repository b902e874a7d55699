"""The who-works-the-most study's run: exact profiles, the exact claims grid and the simulated
cases (every routing rule at each point); its parameters are in
:mod:`qlib.studies.who_works_the_most.parameters`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qlib import _validate
from qlib._rng import named_seed
from qlib.config import scale
from qlib.heterogeneous import (
    SimulationResult,
    busy_probabilities,
    fastest_busy_probabilities,
    generator_solve,
    marginals_from_sets,
    mean_queue_length,
    pair_margins,
    queue_gap,
    relaxation_time,
    simulate,
    wait_probability,
)
from qlib.results import cache
from qlib.studies import check_mode
from qlib.studies.who_works_the_most.parameters import FAMILIES, INFORMED_MAX_N, PARAMETERS


def geometric_rates(n: int, spread: float) -> np.ndarray:
    """n service rates from ``spread`` down to 1, geometrically spaced (fastest first)."""
    n = _validate.integer("n", n, low=1)
    spread = _validate.real("spread", spread, low=1.0, low_open=False)
    # spread^((n-1-j)/(n-1)) by the C library's pow, one Python float at a time: numpy's vector power
    # takes other code paths on other CPUs (AVX2 / AVX-512), and these rates enter the cache keys
    return np.array([spread ** ((n - 1 - j) / (n - 1)) for j in range(n)]) if n > 1 else np.array([1.0])


def family_rates(family: str, n: int, *, spread: float = 10.0, gap: float = 1e-6) -> np.ndarray:
    """The grid's rate families, fastest first: "geometric" (``spread`` down to 1), "nearly
    equal" (1 + gap (n-1-j): adjacent rates differ by ``gap``), "one fast" (``spread`` and n-1
    nearly equal slow servers)."""
    _validate.choice("family", family, FAMILIES)
    n = _validate.integer("n", n, low=2)
    gap = _validate.real("gap", gap, low=0.0, high=0.01, high_open=False)
    near = 1.0 + gap * np.arange(n - 1, -1, -1, dtype=float)
    if family == "geometric":
        return geometric_rates(n, spread)
    if family == "nearly equal":
        return near
    return np.concatenate([[float(spread)], near[1:]])


@dataclass(frozen=True)
class Profile:
    """Exact stationary quantities for one (n, spread, rho); servers fastest first. Arrays (n,):
    ``mus``, ``busy`` (P_j, uninformed), ``work`` (mu_j P_j), ``informed_busy`` (P_j when
    customers join the fastest idle server; None for n > 10)."""

    n: int
    spread: float
    rho: float
    lam: float
    mus: np.ndarray
    busy: np.ndarray
    work: np.ndarray
    wait: float
    mean_queue: float
    informed_busy: np.ndarray | None

    @property
    def informed_work(self) -> np.ndarray | None:
        return None if self.informed_busy is None else self.mus * self.informed_busy

    def band_ok(self) -> bool:
        """(mu_m/mu_l) P_m <= P_l <= P_m for every pair with mu_l > mu_m."""
        P, m = self.busy, self.mus
        L, M = np.triu_indices(self.n, 1)  # l before m, so mu_l >= mu_m
        strict = m[L] > m[M]
        return bool(np.all((P[L] <= P[M])[strict]) and np.all((m[M] / m[L] * P[M] <= P[L])[strict]))


def profile(n: int, spread: float, rho: float, *, informed: bool = True) -> Profile:
    """Exact profile for ``n`` servers with rates ``geometric_rates(n, spread)`` at load ``rho``."""
    mus = geometric_rates(n, spread)
    rho = _validate.real("rho", rho, low=0.0, high=1.0)
    lam = rho * float(mus.sum())
    P = busy_probabilities(lam, mus)
    inf = fastest_busy_probabilities(lam, mus) if informed and mus.size <= INFORMED_MAX_N else None
    return Profile(n=mus.size, spread=float(spread), rho=rho, lam=lam, mus=mus, busy=P, work=mus * P,
                   wait=wait_probability(lam, mus), mean_queue=mean_queue_length(lam, mus),
                   informed_busy=inf)


# --------------------------------------------------------------------------- the exact grid

@dataclass(frozen=True)
class ClaimsGrid:
    """Cabral's margins over the grid. Arrays (points,): ``family`` (index into FAMILIES), ``n``,
    ``rho``, ``pairs`` (adjacent pairs checked), and per claim the number of pairs whose margin is
    <= 0 (``violations1..3``) and the smallest margin relative to its scale (``min_rel1..3``:
    margin / P_m for claims 1 and 3, margin / (mu_l P_l) for claim 2); ``identity_residual`` the
    largest |(mu_l P_l - mu_m P_m) - (mu_l - mu_m) P(l, m busy)| over the point's pairs, from
    P's computed by the O(n^2) product form. The ``informed`` arrays are the same counts for the
    counterfactual rules at the points with n <= 10: ``informed_rule`` (0 fastest, 1 slowest),
    ``informed_n``, ``informed_rho``, ``informed_family``, ``informed_pairs``,
    ``informed_violations1..3``."""

    family: np.ndarray
    n: np.ndarray
    rho: np.ndarray
    pairs: np.ndarray
    violations1: np.ndarray
    violations2: np.ndarray
    violations3: np.ndarray
    min_rel1: np.ndarray
    min_rel2: np.ndarray
    min_rel3: np.ndarray
    identity_residual: np.ndarray
    informed_rule: np.ndarray
    informed_family: np.ndarray
    informed_n: np.ndarray
    informed_rho: np.ndarray
    informed_pairs: np.ndarray
    informed_violations1: np.ndarray
    informed_violations2: np.ndarray
    informed_violations3: np.ndarray


def _margins_from_P(mus: np.ndarray, P: np.ndarray) -> tuple[int, int, int, int]:
    """(pairs, violations of claims 1, 2, 3) from busy probabilities, adjacent pairs in rate order."""
    o = np.argsort(-mus, kind="stable")
    L, M = o[:-1], o[1:]
    keep = mus[L] > mus[M]
    L, M = L[keep], M[keep]
    v1 = int(np.sum(P[M] - P[L] <= 0))
    v2 = int(np.sum(mus[L] * P[L] - mus[M] * P[M] <= 0))
    v3 = int(np.sum((P[L] - mus[M] / mus[L] * P[M] <= 0) | (P[M] - P[L] <= 0)))
    return int(L.size), v1, v2, v3


def claims_grid(ns, loads, *, spread: float = 10.0, gap: float = 1e-6) -> ClaimsGrid:
    """Cabral's three claims exactly at every (family, n, load) of the grid (see :class:`ClaimsGrid`)."""
    rows, inf = [], []
    for f, family in enumerate(FAMILIES):
        for n in ns:
            mus = family_rates(family, n, spread=spread, gap=gap)
            for rho in loads:
                lam = float(rho) * float(mus.sum())
                pm = pair_margins(lam, mus)
                P = busy_probabilities(lam, mus)
                L, M = pm.fast, pm.slow
                resid = np.abs((mus[L] * P[L] - mus[M] * P[M]) - (mus[L] - mus[M]) * pm.both_busy)
                rows.append((f, n, rho, pm.pairs, int(np.sum(pm.busy_margin <= 0)),
                             int(np.sum(pm.effective_rate_margin <= 0)),
                             int(np.sum((pm.band_margin <= 0) | (pm.busy_margin <= 0))),
                             float(np.min(pm.busy_margin / P[M])),
                             float(np.min(pm.effective_rate_margin / (mus[L] * P[L]))),
                             float(np.min(np.minimum(pm.band_margin, pm.busy_margin) / P[M])),
                             float(resid.max())))
                if n <= INFORMED_MAX_N:
                    for rule, policy in enumerate(("fastest", "slowest")):
                        sets, ps, _ = generator_solve(lam, mus, policy=policy)
                        Pi = marginals_from_sets(sets, ps)
                        inf.append((rule, f, n, rho, *_margins_from_P(mus, Pi)))
    a = np.array(rows, dtype=float)
    b = np.array(inf, dtype=float).reshape(-1, 8)
    return ClaimsGrid(family=a[:, 0].astype(int), n=a[:, 1].astype(int), rho=a[:, 2],
                      pairs=a[:, 3].astype(int),
                      violations1=a[:, 4].astype(int), violations2=a[:, 5].astype(int),
                      violations3=a[:, 6].astype(int),
                      min_rel1=a[:, 7], min_rel2=a[:, 8], min_rel3=a[:, 9], identity_residual=a[:, 10],
                      informed_rule=b[:, 0].astype(int), informed_family=b[:, 1].astype(int),
                      informed_n=b[:, 2].astype(int), informed_rho=b[:, 3],
                      informed_pairs=b[:, 4].astype(int),
                      informed_violations1=b[:, 5].astype(int), informed_violations2=b[:, 6].astype(int),
                      informed_violations3=b[:, 7].astype(int))


# --------------------------------------------------------------------------- simulations

@dataclass(frozen=True)
class SimulatedCase:
    """One simulated point: ``n`` servers, geometric rates ``spread``..1, load ``rho``; one
    :class:`~qlib.heterogeneous.SimulationResult` per routing rule in ``runs`` ("random",
    "longest_idle", "fastest", "slowest"); ``exact`` (n,) the product-form P_j;
    ``relaxation_time`` of the uniform-routing chain (model time; ``exact_tau`` says whether it
    is the exact spectral gap or the estimate of :func:`chain_relaxation_time`) and ``taus`` covered."""

    n: int
    spread: float
    rho: float
    lam: float
    mus: np.ndarray
    exact: np.ndarray
    runs: dict
    relaxation_time: float
    taus: float
    exact_tau: bool


def chain_relaxation_time(lam: float, mus: np.ndarray) -> tuple[float, bool]:
    """(tau, exact): the relaxation time of the uniform-routing chain, exact (spectral gap,
    :func:`qlib.heterogeneous.relaxation_time`) up to 12 servers; beyond, the estimate
    max(1/queue gap, 1/min mu): the slowest of the queue (an M/M/1 with rates lam and sum mu, which
    sets tau at heavy load) and the slowest server's own busy/idle cycle (which sets it at light
    load). Not a bound; the rows say which they used."""
    if mus.size <= 12:
        return float(relaxation_time(lam, mus)), True
    return float(max(1.0 / queue_gap(lam, mus), 1.0 / mus.min())), False


#: The near wrong routing rules: idle server j with probability proportional to mu_j^gamma.
def gamma_key(gamma: float) -> str:
    """The ``runs`` key of the mu^gamma routing rule."""
    return f"mu_power({gamma:g})"


def _simulation(lam: float, mus: np.ndarray, *, steps: int, replicas: int, seed: int, policy: str,
                routing_exponent: float | None, progress: bool) -> SimulationResult:
    """One routing rule's run (burn-in steps/20), through the sweep cache (entry "03_simulation":
    the run's parameters and its seed beside the arrays)."""
    burn_in = int(steps) // 20
    params = dict(lam=float(lam), mus=[float(m) for m in mus], steps=int(steps), burn_in=burn_in,
                  replicas=int(replicas), policy=policy, routing_exponent=routing_exponent)
    arrays = cache.cached("03_simulation", params, seed,
                          lambda: simulate(lam, mus, steps=steps, replicas=replicas, seed=seed,
                                           burn_in=burn_in, policy=policy, routing_exponent=routing_exponent,
                                           progress=progress).arrays())
    return SimulationResult.from_arrays(arrays)


def _simulate_case(n: int, spread: float, rho: float, *, steps: int, replicas: int, seed: int,
                   progress: bool, gammas=()) -> SimulatedCase:
    """Every routing rule at one point, each from its own named stream (seed, rule, n, spread, rho)."""
    mus = geometric_rates(n, spread)
    lam = rho * float(mus.sum())
    name = lambda rule: named_seed("who_works_the_most", seed, rule, n, spread, rho)  # noqa: E731

    def run(rule: str, policy: str, g: float | None = None) -> SimulationResult:
        return _simulation(lam, mus, steps=steps, replicas=replicas, seed=name(rule), policy=policy,
                           routing_exponent=g, progress=progress)

    runs = {policy: run(policy, policy) for policy in ("random", "longest_idle", "fastest", "slowest")}
    for g in gammas:
        runs[gamma_key(g)] = run(gamma_key(g), "mu_power", g)
    tau, exact_tau = chain_relaxation_time(lam, mus)
    return SimulatedCase(n=n, spread=spread, rho=rho, lam=lam, mus=mus, exact=busy_probabilities(lam, mus),
                         runs=runs, relaxation_time=tau, taus=float(runs["random"].time[0] / tau),
                         exact_tau=exact_tau)


@dataclass(frozen=True)
class WhoWorksTheMostResult:
    """Everything notebook 03 and its claim rows show, for one ``mode``: one exact
    :class:`Profile` per load of the figures, the exact :class:`ClaimsGrid` and the
    :class:`SimulatedCase` s (every routing rule at each)."""

    mode: str
    parameters: dict
    profiles: list
    grid: ClaimsGrid
    cases: list

    def case(self, n: int, rho: float) -> SimulatedCase:
        """The simulated case with ``n`` servers at load ``rho``."""
        return next(c for c in self.cases if c.n == n and abs(c.rho - rho) < 1e-12)

    @property
    def sims(self) -> list:
        """The uniform-routing simulations at the figures' loads (one per profile)."""
        f = self.parameters["figures"]
        return [self.case(f["n"], rho).runs["random"] for rho in f["loads"]]

    @property
    def informed_sim(self) -> SimulationResult:
        """Informed customers (fastest idle server) at the figures' highest load."""
        f = self.parameters["figures"]
        return self.case(f["n"], max(f["loads"])).runs["fastest"]


def run(mode: str = "full", *, progress: bool = True) -> WhoWorksTheMostResult:
    """Exact profiles, their simulations, the exact grid and the simulated cases for ``mode``.
    Full-mode run lengths are multiplied by :func:`qlib.config.scale`."""
    mode = check_mode(mode)
    P = PARAMETERS[mode]
    f, g, c = P["figures"], P["grid"], P["sims"]
    k = scale() if mode == "full" else 1.0
    profs = [profile(f["n"], f["spread"], rho) for rho in f["loads"]]
    cases = [_simulate_case(n, spread, rho, steps=int(c["steps"] * k), replicas=c["replicas"],
                            seed=c["seed"], progress=progress, gammas=c.get("gammas", ()))
             for n, spread, rho in c["cases"]]
    return WhoWorksTheMostResult(mode=mode, parameters=P, profiles=profs,
                                 grid=claims_grid(g["ns"], g["loads"], spread=g["spread"], gap=g["gap"]),
                                 cases=cases)


def simulate_profile(n: int, spread: float, rho: float, *, steps: int = 200_000,
                     replicas: int = 16, seed: int = 0) -> SimulationResult:
    """The notebook's "simulate" button: a simulation at the sliders' parameters."""
    mus = geometric_rates(n, spread)
    return simulate(rho * mus.sum(), mus, steps=steps, replicas=replicas, seed=seed, burn_in=steps // 20)


def routed_stationary(lam: float, mus: np.ndarray, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact stationary law of busy sets when an arrival picks idle server j with probability
    proportional to mu_j^gamma (gamma = 0: uniform), by a dense generator solve over the 2^n
    busy sets with the all-busy block aggregated (as :func:`qlib.heterogeneous.generator_solve`).
    Returns (sets (2^n, n) bool, probabilities (2^n,)); n <= 10."""
    m = np.asarray(mus, float)
    n = m.size
    if n > INFORMED_MAX_N:
        raise ValueError(f"mus must have at most {INFORMED_MAX_N} servers; got {n}")
    rho = lam / m.sum()
    w = m**gamma
    S = 1 << n
    full = S - 1
    sets = ((np.arange(S)[:, None] >> np.arange(n)[None]) & 1).astype(bool)
    Q = np.zeros((S, S))
    for s in range(S):
        busy = sets[s]
        if s != full:
            idle_w = w[~busy].sum()
            for j in np.nonzero(~busy)[0]:
                Q[s, s | (1 << j)] += lam * w[j] / idle_w
        for j in np.nonzero(busy)[0]:
            Q[s, s & ~(1 << j)] += m[j] * ((1.0 - rho) if s == full else 1.0)
    Q -= np.diag(Q.sum(axis=1))
    A = Q.T.copy()
    A[0, :] = 1.0
    b = np.zeros(S)
    b[0] = 1.0
    return sets, np.linalg.solve(A, b)


def swap_residual(lam: float, mus: np.ndarray, gamma: float) -> float:
    """max over pairs l != m of |mu_l P(l busy, m idle) - mu_m P(m busy, l idle)| under mu^gamma
    routing: 0 for symmetric (uniform, gamma = 0) routing (docs/models.md#cabral-identities)."""
    sets, p = routed_stationary(lam, mus, gamma)
    out = 0.0
    for l in range(len(mus)):
        for m_ in range(l + 1, len(mus)):
            a_l = p[sets[:, l] & ~sets[:, m_]].sum()
            a_m = p[sets[:, m_] & ~sets[:, l]].sum()
            out = max(out, abs(mus[l] * a_l - mus[m_] * a_m))
    return float(out)
