"""The mixing time predicted: the time the slowest fluid mode needs to absorb a typical excursion.

Two copies of the count chain driven by the same draws, one from the fluid fixed point and one
from a stationary sample, differ at first by a typical excursion of the number of customers N,
of size SD(N). Inside the regime (H0-H3: the excursion is small against the buffer, so the
linear-noise view holds) the coupled difference decays like the fluid's slowest linear mode,
exp(-t / tau_fluid), and the chains meet once it is down to about one customer:

    T_pred(n, d, lam) = tau_fluid * (ln SD(N) + C),

with tau_fluid = 1/min|Re eig A| in jump steps (n (1 + lam) steps per unit of model time) and
SD(N) = sqrt(n 1^T W 1), both from the linear-noise view (docs/models.md#mixing-time-predicted).
C = 0 from the derivation: the prediction carries no free constant.

What it assumes: the difference is carried by the slowest mode (faster modes are gone after a few
of their own times, a lower-order term), the coupling contracts it at the fluid rate until it is
O(1) (a last customer's coalescence costs O(tau_fluid), a term of lower order than ln SD(N)), and
the excursion stays in the linear regime. It says nothing outside H0-H3.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from qlib.supermarket.point import Point
from qlib.supermarket.refined import refined_mean_field
from qlib.supermarket.theory import predicted_max_length, steps_per_time

#: C of T_pred = tau_fluid (ln SD(N) + C), fixed by the derivation before any run that judges it.
CONSTANT = 0.0


class MeetingTimePrediction(NamedTuple):
    """T_pred at one point: ``steps`` = ``tau_fluid_steps`` * (ln ``sd_N`` + ``constant``); ``k`` the
    predicted maximum queue length."""

    n: int
    d: int
    lam: float
    k: int
    tau_fluid_steps: float
    sd_N: float
    constant: float
    steps: float


def meeting_time_law(tau_fluid_steps: float, sd_N: float, constant: float = CONSTANT) -> float:
    """The law itself, tau_fluid (ln SD(N) + C), from a relaxation time in steps and an SD(N): what
    :func:`predicted_meeting_time` and the sliders (from the NumPy linear-noise view) evaluate."""
    return float(tau_fluid_steps * (math.log(sd_N) + constant))


def predicted_meeting_time(
    n: int, d: int, lam: float, *, constant: float = CONSTANT
) -> MeetingTimePrediction:
    """T_pred(n, d, lam) = tau_fluid (ln SD(N) + C): the steps for the coupled chains from the fluid
    point and from a stationary sample to meet (module docstring).

    Args:
        n: queues, >= 2.
        d: choices per arrival, >= 2.
        lam: arrival rate per queue, in (0, 1).
        constant: C (default :data:`CONSTANT`, fixed by the derivation).

    Returns:
        A :class:`MeetingTimePrediction`.

    Raises:
        ValueError: naming the parameter out of its range.
    """
    if not (isinstance(constant, (int, float)) and math.isfinite(constant)):
        raise ValueError(f"constant must be a finite number; got {constant!r}")
    p = Point(n, d, lam)
    # the leading-order quantities of qlib.supermarket.linear_noise (tau_fluid and sd_N_lna), read off
    # the order-1 refined mean field: no order-2 solve, so a slider can call it (~0.1 s, not seconds)
    r = refined_mean_field(p.d, p.lam)
    tau_steps = steps_per_time(p.n, p.lam) * r.relaxation_time
    sd = math.sqrt(p.n * float(np.sum(r.covariance)))
    k = int(predicted_max_length(p.d, p.lam))
    steps = meeting_time_law(tau_steps, sd, constant)
    return MeetingTimePrediction(int(p.n), int(p.d), float(p.lam), k, float(tau_steps), sd, float(constant),
                                 steps)
