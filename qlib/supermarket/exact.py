"""Exact stationary law of the supermarket model for small n: the test oracle.

The chain on sorted queue-length vectors (docs/models.md, "oracles") is solved on a truncated box
(:mod:`qlib.supermarket.box`) whose caps grow until the stationary mass of its boundary is below
``tol``; the balance equations are solved by :mod:`qlib.supermarket.balance`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from qlib import _validate as V
from qlib.supermarket.balance import balance_residual, solve_direct, solve_iterative  # noqa: F401  (import path)
from qlib.supermarket.box import Box, box_states
from qlib.supermarket.point import Point
from qlib.supermarket.theory import all_sampled_at_least

#: Largest n accepted by the exact solve: the box grows like C(n + cap, n), so larger n only
#: fit at light load, where simulation is cheap anyway.
MAX_N = 24
#: Default bound on the states of one truncated box, about 0.55 kB of memory each (the
#: n = 10, lam = 0.9, tol = 1e-7 case needs 17.6 million states, 9.6 GB); the memory actually
#: available is checked before each box is built.
MAX_STATES = 20_000_000
#: Default bound on the iterations of one iterative solve.
MAX_ITER = 3_000
#: ``solver="auto"`` uses the sparse LU up to this many states (or for n <= 2, where the
#: aggregation of the iterative solver is already the whole chain), the iterative solve above.
DIRECT_MAX_STATES = 5_000
#: ``solver="direct"`` is refused beyond this many states for n >= 3: the LU fills in
#: (n = 10: 2e8 nonzeros and 70 s already at 78,000 states).
DIRECT_LIMIT = 50_000
#: ``tol`` must lie in [TOL_MIN, TOL_MAX]: below TOL_MIN the boundary mass is at the level of
#: float64 round-off in the solve, above TOL_MAX the result is no oracle.
TOL_MIN, TOL_MAX = 1e-15, 1e-2
_BYTES_PER_STATE = 460  # + 8n: measured peak memory per state, 544 B at n = 10 (17.6M states)
_INITIAL_STATES = 50_000  # the first box is at most this big (its spread cap is lowered to fit)
_TRACE: list | None = None  # benchmarks may set a list: one dict per box solved


@dataclass(frozen=True)
class ExactEquilibrium:
    """Stationary law of the supermarket model for small n, from :func:`exact_equilibrium`.

    Arrays: ``tail_fraction[i]`` = E[u_i]/n, i = 0..L (L = ``levels``, or ``length_cap``);
    ``queue_length_distribution[l]`` = P(a given queue has length l) and
    ``max_length_distribution[l]`` = P(longest queue = l), both for l = 0..length_cap.
    """

    n: int
    d: int
    lam: float
    replacement: bool
    tail_fraction: np.ndarray
    queue_length_distribution: np.ndarray
    max_length_distribution: np.ndarray
    residual: float          # ||pi Q||_1 / sum pi q of the final solve (see the module docstring)
    truncation_mass: float   # stationary probability of the states with a dropped transition
    length_cap: int          # longest queue allowed
    spread_cap: int          # longest minus shortest queue allowed (= length_cap: no spread cap)
    states: int              # states of the final box
    solver: str              # "direct" (sparse LU) or "iterative" (aggregation + Gauss-Seidel)
    iterations: int          # iterations of the final solve (1 for the LU)
    identity_error: float    # E[u_1]/n - lam in the truncated chain; |.| <= truncation_mass
    cap_change: float        # max_i |tail_fraction change| from the previous caps (nan: none)
    rounds: int              # boxes solved
    capacity: int | None = None   # the bounded model's capacity L (None: the unbounded model)
    loss_probability: float = 0.0  # bounded model: stationary P(an arrival is lost)


# --------------------------------------------------------------------------- state space

# --------------------------------------------------------------------------- the oracle

def _check(n, d, lam, replacement, tol, max_states, max_iter, solver):
    n = V.integer("n", n, low=1, high=MAX_N)
    p = Point(n, d, lam, replacement=replacement)
    n, d, lam, replacement = p.n, p.d, p.lam, p.replacement
    tol = V.real("tol", tol, low=TOL_MIN, high=TOL_MAX, low_open=False, high_open=False)
    max_states = V.integer("max_states", max_states, low=1, high=10**9)
    max_iter = V.integer("max_iter", max_iter, low=1, high=10**6)
    solver = V.choice("solver", solver, ("auto", "direct", "iterative"))
    return n, d, lam, replacement, tol, max_states, max_iter, solver


def _fit(name: str, n: int, C: int, W: int, max_states: int, why: str) -> None:
    s = box_states(n, C, W)
    if s > max_states:
        raise ValueError(f"{name}: {why} needs length cap {C} and spread cap {min(W, C)}, a box of {s} "
                         f"states, more than max_states = {max_states}; raise max_states (about "
                         f"{_BYTES_PER_STATE + 8 * n} bytes a state) or tol")
    V.memory("max_states", s * (_BYTES_PER_STATE + 8 * n), f"{s} states x ~{_BYTES_PER_STATE + 8 * n} bytes")


def _grow(cap: int, law: np.ndarray, goal: float) -> tuple[int, bool]:
    """Next cap: where the law (of the maximum, or of the spread) extrapolated past ``cap``
    falls below ``goal``, within cap + 1 .. 4 cap; and whether that is an extrapolation.

    log law is extrapolated from its last two steps, with their slope and (non-positive)
    curvature: the laws of the maximum and of the spread decay geometrically or faster. Where
    the law does not decay yet at the cap (the box is far too small), the cap doubles.
    """
    lo, hi = cap + 1, 4 * max(cap, 1)
    if cap < 2 or not np.all(law[cap - 2: cap + 1] > 0):
        return min(hi, max(lo, 2 * cap)), False
    d1 = math.log(law[cap] / law[cap - 1])
    d0 = math.log(law[cap - 1] / law[cap - 2])
    if d1 > -1e-4:
        return min(hi, max(lo, 2 * cap)), False
    c = min(d1 - d0, 0.0)
    need, drop, k = math.log(goal / law[cap]), 0.0, 0
    while drop > need and k < 1000 * cap:
        k += 1
        drop += d1 + c * k
    return cap + k, True


def exact_equilibrium(n: int, d: int, lam: float, *, levels: int | None = None,
                      replacement: bool = True, tol: float = 1e-10, max_states: int = MAX_STATES,
                      max_iter: int = MAX_ITER, solver: str = "auto",
                      capacity: int | None = None) -> ExactEquilibrium:
    """Exact stationary law of the supermarket model with n queues (``docs/models.md``, "oracles").

    Solves the CTMC on sorted queue-length vectors, truncated to the box of longest queue <=
    length_cap and spread (longest - shortest) <= spread_cap, with transitions out of the box
    dropped (self-loops: again a CTMC). The caps grow until ``truncation_mass``, the stationary
    mass of the states with a dropped transition, is below ``tol``: each round extrapolates the
    decay of the laws of the maximum and of the spread past the caps to where they fall below
    tol/3 (at least one level, at most 4x per cap, at most 64x the last box). Two checks come with
    the result: ``cap_change`` (the tail fractions' change from the previous caps) and
    ``identity_error`` = E[u_1]/n - lam, with |identity_error| <= truncation_mass (the flux
    balance of the total number of customers). Each solve runs to the normalised residual
    max(1e-13, min(1e-10, 1e-3 tol)) (:mod:`qlib.supermarket.balance`).

    Args:
        n: number of queues, in [1, MAX_N].
        d: choices per arrival (:class:`qlib.supermarket.point.Point`).
        lam: arrival rate per queue, in (0, 1).
        levels: >= 0; the first length cap is levels + 2, and ``tail_fraction`` has levels + 1
            entries (length_cap + 1 when None).
        replacement: sample the d queues with replacement (default) or without.
        tol: in [1e-15, 1e-2], the bound on the truncation mass.
        max_states: bound on the states of each box, checked before the box is built.
        max_iter: bound on the iterations of each iterative solve.
        solver: "auto" (sparse LU up to DIRECT_MAX_STATES states or for n <= 2, else
            iterative), "direct" or "iterative".
        capacity: L for the bounded model (docs/models.md#bounded-model): queues hold at most L
            customers and an arrival at a full queue is lost; solved once on the box of lengths
            <= L (``truncation_mass`` 0, ``loss_probability`` the stationary P(an arrival is
            lost), ``identity_error`` = E[u_1]/n - lam (1 - loss_probability)).

    Returns:
        An :class:`ExactEquilibrium`.

    Raises:
        ValueError: naming the parameter out of its range, ``max_states`` when a box needed for
            ``tol`` would exceed it (before it is built), ``max_iter`` when a solve does not
            converge, ``solver`` when "direct" is asked for a box beyond DIRECT_LIMIT states.
    """
    n, d, lam, replacement, tol, max_states, max_iter, solver = _check(
        n, d, lam, replacement, tol, max_states, max_iter, solver)
    if levels is not None:
        levels = V.integer("levels", levels, low=0, high=10**9)
    if capacity is not None:
        return _bounded_equilibrium(
            n,
            d,
            lam,
            replacement,
            V.integer("capacity", capacity, low=1, high=10**9),
            levels,
            max_states,
            max_iter,
            solver,
        )
    C = max((levels if levels is not None else 0) + 2, 2)
    _fit("levels" if levels is not None else "n", n, C, 1, max_states, f"levels = {levels}")
    W = _first_spread_cap(n, C, max_states)
    goal = tol / 3  # aim below tol, so that one more round is rarely needed
    target = max(1e-13, min(1e-10, 1e-3 * tol))  # residual of each solve
    prev_tail = prev_A = prev_x = None
    rounds = 0
    while True:
        box = Box(n, d, lam, replacement, C, W)
        W = box.W
        rounds += 1
        use = _solver_for(solver, box, n)
        x0 = _warm_start(box, prev_A, prev_x) if use == "iterative" else None
        prev_A = prev_x = None  # free them before the solve
        x, res, its = solve_direct(box) if use == "direct" else solve_iterative(box, x0, target, max_iter)
        del x0
        laws = _Laws.of(box, x, n, C)
        change = math.nan
        if prev_tail is not None:
            k = min(len(prev_tail), len(laws.tail))
            change = float(np.abs(laws.tail[:k] - prev_tail[:k]).max())
        if _TRACE is not None:
            _TRACE.append(dict(C=C, W=W, S=box.S, mass=laws.mass, mass_len=laws.mass_len,
                               mass_spread=laws.mass_spread, solver=use, iterations=its, residual=res,
                               change=change, max_law=laws.max_law, spread_law=laws.spread_law))
        if laws.mass < tol:
            break
        C2, W2 = _next_caps(n, C, W, box.S, laws, tol, goal, max_states)
        _fit("max_states", n, C2, W2, max_states, f"tol = {tol:g}")
        prev_tail, prev_A, prev_x = laws.tail, box.A, x
        C, W = C2, W2
        del box
    L = levels if levels is not None else C
    out = np.zeros(L + 1)
    m = min(L, C) + 1
    out[:m] = laws.tail[:m]
    return ExactEquilibrium(
        n=n, d=d, lam=lam, replacement=replacement, tail_fraction=out,
        queue_length_distribution=laws.occ[: C + 1] / n, max_length_distribution=laws.max_law,
        residual=res, truncation_mass=laws.mass, length_cap=C, spread_cap=W, states=box.S,
        solver=use, iterations=its, identity_error=float(laws.tail[1] - lam), cap_change=change,
        rounds=rounds)


def _first_spread_cap(n: int, C: int, max_states: int) -> int:
    """The first spread cap: the largest that keeps the first box small."""
    lo, hi = 1, C
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if box_states(n, C, mid) <= min(max_states, _INITIAL_STATES) else (lo, mid - 1)
    return lo


def _solver_for(solver: str, box: Box, n: int) -> str:
    """The solver a box gets ("direct" or "iterative"); ValueError for a direct solve too big."""
    use = solver if solver != "auto" else (
        "direct" if box.S <= DIRECT_MAX_STATES or n <= 2 else "iterative")
    if use == "direct" and n > 2 and box.S > DIRECT_LIMIT:
        raise ValueError(f"solver: the direct solve is limited to {DIRECT_LIMIT} states for n >= 3 "
                         f"(the LU fills in); this box has {box.S}: use solver='iterative' or 'auto'")
    return use


def _warm_start(box: Box, prev_A: np.ndarray | None, prev_x: np.ndarray | None) -> np.ndarray | None:
    """The previous box's law placed in this one (the previous box lies inside it), or None."""
    if prev_A is None:
        return None
    x0 = np.zeros(box.S)
    x0[box.index(prev_A)] = prev_x
    return x0


class _Laws(NamedTuple):
    """What one box's stationary law x says: occupation, tails, the laws of the maximum and of
    the spread, and the mass at the boundary (all of it, at the length cap, at the spread cap)."""

    occ: np.ndarray  # E[#queues with length l], l = 0..C+1
    tail: np.ndarray  # E[u_l]/n, l = 0..C+1
    max_law: np.ndarray
    spread_law: np.ndarray
    mass: float
    mass_len: float
    mass_spread: float

    @classmethod
    def of(cls, box: Box, x: np.ndarray, n: int, C: int) -> _Laws:
        occ = np.zeros(C + 2)
        for j in range(n):
            occ += np.bincount(box.A[:, j], weights=x, minlength=C + 2)[: C + 2]
        tail = np.minimum(np.cumsum(occ[::-1])[::-1] / n, 1.0)
        tail[0] = 1.0  # u_0 = n in every state (x sums to 1 only to round-off)
        max_law = np.bincount(box.M, weights=x, minlength=C + 1)[: C + 1]
        spread_law = np.bincount(box.M - box.A[:, 0], weights=x, minlength=C + 1)[: C + 1]
        return cls(occ, tail, max_law, spread_law, float(x[box.boundary].sum()), float(x[box.at_len].sum()),
                   float(x[box.at_spread].sum()))


def _next_caps(n: int, C: int, W: int, S: int, laws: _Laws, tol: float, goal: float,
               max_states: int) -> tuple[int, int]:
    """The caps of the next box, extrapolated from the laws at this one's caps (C, W; S states);
    ValueError naming max_states when the box they need would not fit."""
    mass, mass_len, mass_spread = laws.mass, laws.mass_len, laws.mass_spread
    # without a spread cap yet (W = C), the spread law at W says whether one must be set
    at_w = mass_spread if W < C else float(laws.spread_law[W])
    grow_w = at_w >= tol / 2
    # the law of the maximum is distorted while the spread cap dominates the boundary:
    # then the spread cap grows first
    grow_c = mass_len >= tol / 2 and not (grow_w and mass_spread > 10 * mass_len)
    (Ce, sure_c), (We, sure_w) = _grow(C, laws.max_law, goal), _grow(W, laws.spread_law, goal)
    Ce = Ce if grow_c else C
    We = min(We if grow_w else W, Ce)
    sure = (sure_c or not grow_c) and (sure_w or not grow_w)
    per_state = _BYTES_PER_STATE + 8 * n
    if sure and box_states(n, Ce, We) > 4 * max_states:
        # the decay of the laws at the caps says where they must go: stop now, not after
        # ever larger boxes (the factor 4 allows for an extrapolation that overshoots)
        raise ValueError(
            f"max_states: truncation mass {mass:.2e} >= tol = {tol:g} at length cap {C}, spread "
            f"cap {W} ({S} states); the laws of the maximum and of the spread extrapolate to "
            f"caps about ({Ce}, {We}) for tol: {box_states(n, Ce, We)} states, more than "
            f"max_states = {max_states} (~{per_state} bytes a state); raise "
            f"max_states or tol")
    C2 = min(Ce, 4 * C)
    W2 = min(We, 4 * W, C2)
    # a box beyond max_states, or 64 times the last one (an extrapolation from a box far
    # too small), falls back to the largest box that fits, down to one more level of each
    # cap that must grow
    limit = min(max_states, 64 * S)
    while box_states(n, C2, W2) > limit and (C2 > C + grow_c or W2 > W + grow_w):
        if (C2 - C) * W >= (W2 - W) * C and C2 > C + grow_c:
            C2 -= 1
            W2 = min(W2, C2)
        else:
            W2 -= 1
    if box_states(n, C2, W2) > max_states:
        raise ValueError(
            f"max_states: truncation mass {mass:.2e} >= tol = {tol:g} at length cap {C}, spread "
            f"cap {W} ({S} states); the next box (caps {C2}, {W2}) has "
            f"{box_states(n, C2, W2)} states, more than max_states = {max_states}, and the caps "
            f"extrapolated for tol are about ({Ce}, {We}): {box_states(n, Ce, We)} states "
            f"(~{per_state} bytes each); raise max_states or tol")
    return C2, W2


def _bounded_equilibrium(n, d, lam, replacement, L, levels, max_states, max_iter, solver) -> ExactEquilibrium:
    """The exact stationary law of the bounded model (capacity L): one solve on the box of lengths <= L."""
    _fit("capacity", n, L, L, max_states, f"capacity = {L}")
    box = Box(n, d, lam, replacement, L, L)
    use = solver if solver != "auto" else ("direct" if box.S <= DIRECT_MAX_STATES or n <= 2 else "iterative")
    x, res, its = solve_direct(box) if use == "direct" else solve_iterative(box, None, 1e-13, max_iter)
    occ = np.zeros(L + 1)
    for j in range(n):
        occ += np.bincount(box.A[:, j], weights=x, minlength=L + 1)[: L + 1]
    tail = np.minimum(np.cumsum(occ[::-1])[::-1] / n, 1.0)
    tail[0] = 1.0
    full = (box.A == L).sum(axis=1)  # u_L of each state
    g = all_sampled_at_least(np.arange(n + 1) / n, d, replacement=replacement, n=n)
    loss = float(np.dot(x, g[full]))
    out = np.zeros((levels if levels is not None else L) + 1)
    m = min(out.size, L + 1)
    out[:m] = tail[:m]
    return ExactEquilibrium(
        n=n, d=d, lam=lam, replacement=replacement, tail_fraction=out, queue_length_distribution=occ / n,
        max_length_distribution=np.bincount(box.M, weights=x, minlength=L + 1)[: L + 1], residual=res,
        truncation_mass=0.0, length_cap=L, spread_cap=L, states=box.S, solver=use, iterations=its,
        identity_error=float(tail[1] - lam * (1 - loss)), cap_change=math.nan, rounds=1,
        capacity=L, loss_probability=loss)


def exact_tail_fraction(n: int, d: int, lam: float, levels: int, *, replacement: bool = True,
                        tol: float = 1e-10) -> np.ndarray:
    """Exact stationary E[u_i]/n for i = 0..levels, for small n (the test oracle).

    The caps grow until the stationary mass of the truncation boundary is below ``tol``
    (1e-10: far below any simulation error bar); see :func:`exact_equilibrium`.

    Args:
        n, d, lam, replacement, tol: as in :func:`exact_equilibrium`.
        levels: the last level, >= 0.

    Returns:
        (levels + 1,) E[u_i]/n.

    Raises:
        ValueError: as :func:`exact_equilibrium`.
    """
    levels = V.integer("levels", levels, low=0, high=10**9)
    return exact_equilibrium(n, d, lam, levels=levels, replacement=replacement, tol=tol).tail_fraction


def exact_stationary(n: int, d: int, lam: float, cap: int, *, replacement: bool = True):
    """Stationary distribution on the box of lengths <= ``cap`` (no spread cap, no cap growth).

    Arrivals that would make a queue longer than ``cap`` are lost.

    Args:
        n, d, lam, replacement: as in :func:`exact_equilibrium`.
        cap: the longest queue, >= 1.

    Returns:
        (counts, pi): counts[s, i] = u_i in state s for i = 0..cap, shape (S, cap + 1), and
        pi[s], shape (S,).

    Raises:
        ValueError: naming the parameter out of its range, or ``cap`` when the box would not fit.
    """
    n, d, lam, replacement, *_ = _check(n, d, lam, replacement, 1e-10, MAX_STATES, MAX_ITER, "auto")
    cap = V.integer("cap", cap, low=1, high=10**9)
    _fit("cap", n, cap, cap, MAX_STATES, f"cap = {cap}")
    box = Box(n, d, lam, replacement, cap, cap)
    if box.S <= DIRECT_MAX_STATES or n <= 2:
        x, _, _ = solve_direct(box)
    else:
        x, _, _ = solve_iterative(box, None, 1e-13, MAX_ITER)
    counts = np.stack([(box.A >= i).sum(axis=1) for i in range(cap + 1)], axis=1)
    return counts, x
