"""Who hears of each simulation run: the model layer says what it ran, the layers above listen.

The simulators (:func:`qlib.supermarket.simulate` and ``simulate_many``,
:func:`qlib.heterogeneous.simulate`) announce each finished run here with what a record of it
needs: the plans (point, steps, burn-in, seed, start counts and random state) and the results
(final counts and random state). They know nothing of caches or stores. The provenance of stored
results (:func:`qlib.results.recorder.recording`) is such a listener, set from above the kernel
for the length of one computation.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Sequence
from typing import Any, Protocol


class Listener(Protocol):
    """What hears of the simulations run while it listens (see :func:`listening`)."""

    def supermarket(self, plans: Sequence, results: Sequence, variant: Any, capacity: int | None) -> None:
        """Each point's plan (point, steps, burn_in, seed, u0, rng0) and result (counts, state)."""

    def heterogeneous(self, result: Any, start: Any, routing_exponent: float | None, seeded: bool) -> None:
        """The heterogeneous simulator's result and start state."""


_LISTENER: contextvars.ContextVar[Listener | None] = contextvars.ContextVar("qlib_simulation_listener",
                                                                            default=None)


def listener() -> Listener | None:
    """The listener of the simulations run now, if any."""
    return _LISTENER.get()


@contextlib.contextmanager
def listening(who: Listener | None):
    """Announce the simulations run inside to ``who``; None: to nobody (the checkpoints a record's
    check recomputes are no part of what it records)."""
    token = _LISTENER.set(who)
    try:
        yield who
    finally:
        _LISTENER.reset(token)


def ran_supermarket(plans: Sequence, results: Sequence, variant: Any = None,
                    capacity: int | None = None) -> None:
    """The supermarket simulation driver's announcement (nothing happens when no one listens)."""
    who = _LISTENER.get()
    if who is not None:
        who.supermarket(plans, results, variant, capacity)


def ran_heterogeneous(result: Any, start: Any, routing_exponent: float | None = None, *,
                      seeded: bool) -> None:
    """The heterogeneous simulator's announcement (nothing happens when no one listens)."""
    who = _LISTENER.get()
    if who is not None:
        who.heterogeneous(result, start, routing_exponent, seeded)
