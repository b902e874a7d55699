"""Initial states of the count chain: counts from queue lengths, the fluid start, the level cap.

The counts u_i = #queues with length >= i (u_0 = n, non-increasing) are the chain's state; a
start is given as "empty", "fluid", counts, or queue lengths (docs/models.md, "count chain").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from qlib import _validate as V
from qlib.supermarket.point import MAX_N, Point, as_point
from qlib.supermarket.theory import fluid_fixed_point, predicted_max_length

__all__ = ["initial_counts", "counts_from_lengths", "counts_all_at", "default_levels"]


def counts_from_lengths(lengths: Any) -> np.ndarray:
    """Counts u_i = #queues with length >= i, i = 0..max, from queue lengths.

    Args:
        lengths: (n,) non-negative integer queue lengths.

    Returns:
        (max + 1,) int64 counts.

    Raises:
        ValueError: naming the parameter out of its range.
    """
    q = V.array("lengths", lengths)
    if q.ndim != 1 or q.size < 1:
        raise ValueError(f"lengths must be a non-empty 1-D array of queue lengths; got shape {q.shape}")
    if q.dtype.kind not in "iuf" or np.any(~np.isfinite(q)) or np.any(q < 0) \
            or np.any(q != np.floor(q)):
        raise ValueError("lengths must hold non-negative integers")
    V.memory(
        "lengths",
        16.0 * (float(q.max()) + 1),
        f"counts up to the longest queue, {float(q.max()):.3g}, x 16 bytes",
    )
    q = q.astype(np.int64)
    hist = np.bincount(q)
    return np.cumsum(hist[::-1])[::-1].astype(np.int64)


def counts_all_at(n: int, length: int) -> np.ndarray:
    """Counts of the state where every one of the n queues has the given length.

    Args:
        n: number of queues, in [1, 2^32 - 1].
        length: the common length, >= 0.

    Returns:
        (length + 1,) int64 counts, all n.

    Raises:
        ValueError: naming the parameter out of its range.
    """
    n = V.integer("n", n, low=1, high=MAX_N)
    length = V.integer("length", length, low=0)
    V.memory("length", 8.0 * (length + 1), f"{length + 1} levels x 8 bytes")
    return np.full(length + 1, n, dtype=np.int64)


def _valid_counts(u: np.ndarray, n: int) -> bool:
    return (u.ndim >= 1 and u.shape[-1] >= 1 and np.all(u[..., 0] == n) and np.all(u >= 0)
            and np.all(np.diff(u, axis=-1) <= 0))


def initial_counts(n: int, d: int, lam: float | None, initial: Any, replacement: bool = True, *,
                   one_minus_lam: float | None = None) -> np.ndarray:
    """Resolve ``initial`` to counts.

    At d = 1 the fluid profile is geometric, n lam^i, with about log(2n)/(1 - lam) levels: its memory
    is checked before it is built.

    Args:
        n, d, lam, replacement, one_minus_lam: the point, checked as in
            :func:`qlib.supermarket.simulate`.
        initial: "empty", "fluid" (integer counts nearest n times the fluid fixed point),
            ``{"counts": u}``, ``{"lengths": q}``, or a bare array: counts u (u_0 = n,
            non-increasing; 1-D, or 2-D with one row per replica) or a length-n vector of queue
            lengths.

    Returns:
        Counts of shape (levels + 1,) or (replicas, levels + 1).

    Raises:
        ValueError: naming the parameter, or ``initial`` when it is none of the above or its
            fluid profile would not fit in memory.
    """
    return start_counts(as_point(n, d, lam, one_minus_lam=one_minus_lam, replacement=replacement,
                                    simulation=True), initial)


def start_counts(point: Point, initial: Any) -> np.ndarray:
    """:func:`initial_counts` of a validated point."""
    n, d, one_minus_lam, replacement = point.n, point.d, point.one_minus_lam, point.replacement
    if isinstance(initial, str):
        V.choice("initial", initial, ("empty", "fluid"))
        if initial == "empty":
            return np.array([n, 0], dtype=np.int64)
        kw = point.rate
        fp = lambda L: fluid_fixed_point(d, levels=L, replacement=replacement,  # noqa: E731
                                         n=None if replacement else n, **kw)
        if d == 1:  # u_i = rint(n lam^i) > 0 up to i = log(2n)/log(1/lam)
            levels = int(math.floor(math.log(2 * n) / -math.log1p(-one_minus_lam))) + 2
            V.memory(
                "initial",
                (levels + 1) * 8.0 * 4,
                f"initial='fluid' at d = 1 and 1 - lam = {one_minus_lam:.3g}: "
                f"{levels + 1} levels x 8 bytes x 4 copies",
            )
        else:
            k = predicted_max_length(d, **kw)
            levels = int(min(k, 60)) + 4
        s = fp(levels)
        u = np.rint(n * s).astype(np.int64)
        while u[-1] > 0:  # extend until the rounded profile ends
            levels *= 2
            u = np.rint(n * fp(levels)).astype(np.int64)
        last = int(np.nonzero(u)[0][-1])
        return u[: last + 2]
    if isinstance(initial, Mapping):
        if set(initial) == {"lengths"}:
            q = V.array("initial['lengths']", initial["lengths"])
            if q.ndim != 1 or q.size != n:
                raise ValueError(
                    f"initial['lengths'] must be a 1-D array of n = {n} queue lengths; got shape {q.shape}"
                )
            return counts_from_lengths(q)
        if set(initial) == {"counts"}:
            u = V.int_array("initial['counts']", initial["counts"])
            if not _valid_counts(u, n) or u.ndim > 2:
                raise ValueError(
                    f"initial['counts'] must have u_0 = n = {n}, be non-negative and non-increasing "
                    "(1-D, or 2-D with one row per replica)"
                )
            return u
        raise ValueError(
            f"initial as a mapping must be {{'counts': u}} or {{'lengths': q}}; got keys {sorted(initial)}"
        )
    a = V.array("initial", initial)
    if a.dtype == object or a.ndim == 0:
        raise ValueError(
            f"initial must be 'empty', 'fluid', an array of counts or of queue lengths; got {initial!r}"
        )
    u = V.int_array("initial", a)
    as_counts = _valid_counts(u, n) and u.ndim <= 2
    as_lengths = u.ndim == 1 and u.size == n and np.all(u >= 0)
    if as_counts and as_lengths and not np.array_equal(counts_from_lengths(u), u):
        raise ValueError("initial is ambiguous (valid both as counts and as n queue lengths); "
                         "pass {'counts': u} or {'lengths': q}")
    if as_counts:
        return u
    if as_lengths:
        return counts_from_lengths(u)
    raise ValueError(f"initial must be counts (u_0 = n = {n}, non-increasing, non-negative) or a vector of "
                     f"n = {n} non-negative queue lengths; got shape {u.shape}")


def default_levels(d: int, lam: float | None, u0: np.ndarray, steps: int | None = None, *,
                   one_minus_lam: float | None = None) -> int:
    """The initial level cap of a run of ``steps`` steps (burn-in included) from counts ``u0``.

    k + 3 (k the predicted maximum); at d = 1 the level a queue exceeds with probability 1e-3,
    log(1e-3)/log(lam) + 4; but never more than the run can reach: the longest queue grows by at
    most one per step (the cap then grows on demand).

    Args:
        d, lam, one_minus_lam: the point's choices and arrival rate.
        u0: the start counts, (levels + 1,) or (replicas, levels + 1).
        steps: the run's steps (None: no bound from the run length).

    Returns:
        The level cap.
    """
    return default_level_cap(Point(None, d, lam, one_minus_lam=one_minus_lam), u0, steps)


def default_level_cap(point: Point, u0: np.ndarray, steps: int | None = None) -> int:
    """:func:`default_levels` of a validated point."""
    k = predicted_max_length(point)
    if math.isfinite(k):
        guess = int(k) + 3
    else:
        guess = int(math.ceil(math.log(1e-3) / math.log1p(-point.one_minus_lam))) + 4
    if steps is not None:
        guess = min(guess, u0.shape[-1] + int(steps))
    return max(guess, u0.shape[-1] + 1, 4)
