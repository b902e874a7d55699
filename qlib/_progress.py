"""The one progress bar of qlib: tqdm.auto over steps, points or cells, or nothing.

Every long loop (simulation chunks, sweeps over points, notebook cells) reports through
:func:`progress_bar`, so bars look the same everywhere and a disabled bar costs nothing.

Inside :func:`study_progress` (a notebook's compute cell, a study's run) there is one bar for
the whole block: every bar opened inside it is not shown, and its work is added to the study's
bar instead (its total when it opens, its updates as they come), so a study of 32 simulations
shows one bar whose rate and ETA cover all of them, not 32 bars. With ``total`` given (e.g. the
number of points), each inner bar advances it by its fraction of one unit.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

_STUDY: list[_StudyBar] = []  # the open study bar (at most one is shown; nested ones join it)


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


class _StudyBar:
    """The one bar of a :func:`study_progress` block; inner bars report to it (:class:`_Child`)."""

    def __init__(self, desc: str, total: float | None, unit: str, show: bool):
        self.fixed = total is not None
        self.bar = progress_bar(total if self.fixed else 0, show=show, desc=desc, unit=unit, _own=True)

    def child(self, total: float | None) -> _Child:
        if not self.fixed and total:
            self.bar.total = (self.bar.total or 0) + total
            if hasattr(self.bar, "refresh"):
                self.bar.refresh()
        return _Child(self, total)


class _Child(_NoBar):
    """A bar opened inside a study block: not shown; its updates go to the study's bar (in its
    own units, or as a fraction of one unit when the study counts points)."""

    def __init__(self, parent: _StudyBar, total: float | None):
        self.parent, self.total = parent, total

    def update(self, n: float = 1) -> None:
        if self.parent.fixed:
            if self.total:
                self.parent.bar.update(n / self.total)
        else:
            self.parent.bar.update(n)


def progress_bar(
    total: float | None, *, show: bool, desc: str, unit: str = "step", _own: bool = False
) -> Any:
    """A tqdm.auto bar (transient: it disappears when closed), or a no-op bar if not ``show``.

    Inside :func:`study_progress` the bar is not shown: its work goes to the study's bar.
    Use it as a context manager or call ``close()``; ``update(k)`` advances it by k units.
    """
    if _STUDY and not _own:
        return _STUDY[-1].child(total)
    if not show:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, leave=False)


@contextmanager
def study_progress(
    desc: str, *, total: float | None = None, unit: str = "step", show: bool = True
) -> Iterator[Any]:
    """One bar with one ETA for everything run inside the block.

    Args:
        desc: the bar's label (e.g. the study's name).
        total: the block's units of work if known (e.g. its number of points; inner bars then
            advance it by fractions); None adds up the inner bars' totals as they open.
        unit: the bar's unit ("step" when adding inner bars' steps, else e.g. "point").
        show: False opens no bar (inner bars are silenced all the same).
    Yields:
        The bar (``update(k)`` advances it directly).
    """
    if _STUDY:  # nested: the outer block's bar counts this one's work
        yield _STUDY[-1].bar
        return
    study = _StudyBar(desc, total, unit, show)
    _STUDY.append(study)
    try:
        yield study.bar
    finally:
        _STUDY.pop()
        study.bar.close()


def progress_iter(
    items: Iterable[T], *, show: bool, desc: str, unit: str = "point", total: int | None = None
) -> Iterator[T]:
    """Iterate over ``items`` with a bar (one unit per item) when ``show``."""
    if total is None:
        try:
            total = len(items)  # type: ignore[arg-type]
        except TypeError:
            total = None
    if not show and not _STUDY:
        yield from items
        return
    with progress_bar(total, show=show, desc=desc, unit=unit) as bar:
        for x in items:
            yield x
            bar.update(1)
