"""The one progress bar of qlib: tqdm.auto over steps, points or cells, or nothing.

Every long loop (simulation chunks, sweeps over points, notebook cells) reports through
:func:`progress_bar`, so bars look the same everywhere and a disabled bar costs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


class _NoBar:
    """Stands in for a tqdm bar when progress is off: every call is a no-op."""

    def update(self, n: float = 1) -> None:
        pass

    def set_postfix(self, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def progress_bar(total: float | None, *, show: bool, desc: str, unit: str = "step") -> Any:
    """A tqdm.auto bar (transient: it disappears when closed), or a no-op bar if not ``show``.

    Use it as a context manager or call ``close()``; ``update(k)`` advances it by k units.
    """
    if not show:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, leave=False)


def progress_iter(items: Iterable[T], *, show: bool, desc: str, unit: str = "point",
                  total: int | None = None) -> Iterator[T]:
    """Iterate over ``items`` with a bar (one unit per item) when ``show``."""
    if not show:
        yield from items
        return
    if total is None:
        try:
            total = len(items)  # type: ignore[arg-type]
        except TypeError:
            total = None
    with progress_bar(total, show=True, desc=desc, unit=unit) as bar:
        for x in items:
            yield x
            bar.update(1)
