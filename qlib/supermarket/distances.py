"""Distances between states and laws of the count chain: L1 between count vectors, total
variation between empirical laws, and the sampling noise floor of the latter."""

from __future__ import annotations

from typing import Any

import numpy as np

from qlib import _validate as V

__all__ = ["l1_distance", "tv_distance", "tv_noise_floor"]


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False; got {value!r}")
    return bool(value)


def l1_distance(counts_a: Any, counts_b: Any) -> np.ndarray:
    """L1 distance sum_{i>=1} |u_i - u'_i| between two count vectors (last axis = levels).

    It equals sum_j |q_(j) - q'_(j)| for the two vectors of queue lengths sorted in the same
    order (the cheapest way to move customers from one state to the other); for ordered
    coupled chains it is the excess number of customers D of the upper one. The shorter
    vector is padded with zeros.

    Args:
        counts_a, counts_b: count vectors, levels on the last axis, the other axes equal.

    Returns:
        The distances, over the leading axes.

    Raises:
        ValueError: naming the argument that is not a count array.
    """
    a, b = V.int_array("counts_a", counts_a), V.int_array("counts_b", counts_b)
    if a.ndim < 1 or b.ndim < 1 or a.shape[:-1] != b.shape[:-1]:
        raise ValueError(f"counts_a and counts_b must agree except in their last (level) axis; got "
                         f"{a.shape} and {b.shape}")
    m = max(a.shape[-1], b.shape[-1])
    pad = lambda x: np.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, m - x.shape[-1])])  # noqa: E731
    return np.abs(pad(a).astype(np.int64) - pad(b).astype(np.int64))[..., 1:].sum(axis=-1)


def _law(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    idx = np.searchsorted(edges, values, side="right") - 1
    return np.bincount(idx.ravel(), minlength=edges.size - 1)[: edges.size - 1] / values.size


def tv_distance(samples: Any, reference: Any, *, reference_is_pmf: bool = False,
                bins: int | None = None) -> np.ndarray:
    """Total-variation distance between the empirical law of integer ``samples`` and a reference.

    ``samples`` has the replicas on its LAST axis (e.g. u_k(t) over replicas, shape
    (times, replicas)); one distance is returned per leading index. ``reference`` is either a
    sample of the reference law (e.g. u_k in equilibrium, any shape) or, with
    ``reference_is_pmf``, its probability mass function on 0, 1, 2, ....

    ``bins``: group the values into that many cells of (nearly) equal reference mass (cut at
    reference quantiles) before comparing: the TV of grouped laws is a LOWER bound on the TV
    of the laws themselves, and grouping keeps the sampling noise (see :func:`tv_noise_floor`)
    small when the values are spread over many integers (u_k at large n).

    Args:
        samples: integer values, replicas on the last axis.
        reference: a sample of the reference law, or its pmf.
        reference_is_pmf: ``reference`` is a pmf on 0, 1, 2, ....
        bins: group the values into that many cells of equal reference mass (None: no grouping).

    Returns:
        One distance per leading index of ``samples``.

    Raises:
        ValueError: naming the argument that is malformed.
    """
    x = V.array("samples", samples)
    if x.ndim < 1 or x.shape[-1] < 1 or x.dtype.kind not in "iuf" or np.any(~np.isfinite(x)):
        raise ValueError("samples must be a finite real array with replicas on the last axis")
    try:
        ref = np.asarray(reference, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"reference must be a real array; got {type(reference).__name__}") from None
    reference_is_pmf = _bool("reference_is_pmf", reference_is_pmf)

    def cells(count: float) -> None:  # the histogram's cells, before they are allocated
        V.memory("samples", 32.0 * count, f"{count:.3g} histogram cells (one per integer value) x 32 bytes")

    if reference_is_pmf:
        if ref.ndim != 1 or np.any(~np.isfinite(ref)) or np.any(ref < 0) or abs(ref.sum() - 1) > 1e-8:
            raise ValueError(
                "reference must be a 1-D probability vector (non-negative, sum 1) when reference_is_pmf"
            )
        if bins is not None:
            raise ValueError("bins is only supported with a reference sample, not a pmf; got bins="
                             f"{bins}")
        if np.any(x < 0):
            raise ValueError("samples must be >= 0 when reference_is_pmf (the pmf is on 0, 1, 2, ...)")
        cells(max(ref.size, float(x.max()) + 1) + 1)
        edges = np.arange(max(ref.size, int(x.max()) + 1) + 1) - 0.5
        p_ref = np.pad(ref, (0, edges.size - 1 - ref.size))
    else:
        if ref.size < 1 or np.any(~np.isfinite(ref)):
            raise ValueError("reference must be a non-empty finite sample")
        if bins is None:
            lo, hi = min(x.min(), ref.min()), max(x.max(), ref.max())
            cells(float(np.floor(hi)) - float(np.floor(lo)) + 2)
            edges = np.arange(np.floor(lo), np.floor(hi) + 2) - 0.5
        else:
            bins = V.integer("bins", bins, low=1)
            V.memory("bins", 32.0 * (bins + 1), f"{bins + 1} bin edges x 32 bytes")
            qs = np.unique(np.quantile(ref, np.linspace(0, 1, bins + 1)[1:-1], method="higher"))
            edges = np.concatenate([[-np.inf], qs - 0.5, [np.inf]])
        p_ref = _law(ref.ravel(), edges)
    flat = x.reshape(-1, x.shape[-1])
    out = np.array([0.5 * np.abs(_law(row, edges) - p_ref).sum() for row in flat])
    return out.reshape(x.shape[:-1])


def tv_noise_floor(pmf: Any, size: int, reference_size: int | None = None) -> float:
    """Upper bound on the expected upward bias of :func:`tv_distance` from finite samples.

    With ``size`` samples of a law p, E|p_hat_j - p_j| <= sqrt(p_j (1 - p_j)/size), so the
    empirical TV exceeds the true one by at most 0.5 sum_j sqrt(p_j(1 - p_j)/size) on average
    (plus the same term for a reference sample of ``reference_size``). Deviations beyond that
    are sub-Gaussian: one sample moves the TV by at most 1/size (McDiarmid).

    Args:
        pmf: the law p.
        size: samples behind the empirical law.
        reference_size: samples behind a reference sample (None: the reference is exact).

    Returns:
        The bound on the expected bias.

    Raises:
        ValueError: naming the argument that is malformed.
    """
    try:
        p = np.asarray(pmf, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(
            f"pmf must be an array of probabilities in [0, 1]; got {type(pmf).__name__}"
        ) from None
    if np.any(~np.isfinite(p)) or np.any(p < 0) or np.any(p > 1):
        raise ValueError("pmf must hold probabilities in [0, 1]")
    size = V.integer("size", size, low=1)
    f = 0.5 * np.sqrt(p * (1 - p) / size).sum()
    if reference_size is not None:
        f += 0.5 * np.sqrt(p * (1 - p) / V.integer("reference_size", reference_size, low=1)).sum()
    return float(f)
