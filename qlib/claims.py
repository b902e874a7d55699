"""The claims table: one row per paper claim, theory against measurement, PASS or FAIL.

Each study of :mod:`qlib.studies` (listed in :data:`qlib.runner.STUDIES`, which runs them)
computes its numbers with ``run(mode)`` and turns that same result into rows with
``claim_rows(result)``. The notebooks
call the same two functions, so the table printed by ``python -m qlib reproduce`` and written
to ``figures/claims.md`` by ``make figures`` shows the numbers the figures show.

A row is one of three kinds (docs/models.md#claims-and-evidence):

- ``"claim"``: a paper claim. It counts as evidence only if a deliberately wrong model would
  have failed it, so it carries ``counterfactuals``: the same criterion, computed the same way,
  on wrong models (JSQ(1) in place of JSQ(d), d off by 25%, uncoupled chains, another routing
  rule, a run that had no time to relax...), each recorded with its measured value and verdict.
  Simulation rows also record ``taus`` (relaxation times covered) and ``start`` (how the runs
  began).
- ``"identity"``: exact bookkeeping that holds for every routing rule (E[u_1] = lam n,
  sum_j mu_j P_j = lam, closed-form identities): a check of the code, not of the paper.
- ``"check"``: a sanity check that holds for any chain (submultiplicative decay of a meeting
  time, a law-of-large-numbers exit time): it shows the code runs as designed, counted apart.
- ``"measurement"``: a number the papers do not predict sharply (the finite-n tail), measured
  to a stated precision beside the theory that approximates it. It passes when the precision is
  reached; no wrong model is required to fail, so it is reported, not counted as evidence.

A claim row is *sound* when it passes, has at least one far counterfactual, every far
counterfactual fails, (for simulations) its runs cover at least :data:`MIN_TAUS` relaxation
times, and its ``power`` (:mod:`qlib.power`: the range of d′ for which JSQ(d′) at the same point
would pass the criterion), where the theory gives it, excludes d/2 and 2d (issue 41: a row that
JSQ(d/2) would pass is no evidence for d). Near counterfactuals (``near=True``: d - 1, d x 0.9,
the other sampling rule...) are plausible bugs the row may or may not resolve: what it does is
its ``resolution``, rendered beside it, not a condition of soundness.

Verdicts (:data:`VERDICTS`): a criterion is decided against a threshold fixed in the study's
``PARAMETERS`` before the run (:func:`decide`): PASS when the whole 95% CI is on the claimed
side, FAIL when it is wholly on the other side, INCONCLUSIVE when it straddles the threshold once
the pre-set budget is spent. A row outside the theorem's hypotheses is a *finding* (what is
seen, with its numbers), never a PASS. ``python -m qlib reproduce`` exits 1 when any row FAILs;
INCONCLUSIVE rows and findings do not change the exit status (they are counted in the summary
line, which is what to read).

Studies declare their claims as data (:class:`ClaimSpec`, one per claim, gathered in a
``CLAIMS`` table per study): the criterion and threshold text as templates rendered from the
threshold values under ``PARAMETERS[mode]["claims"]``, the wrong models it is run on (by registry
key), and the function that turns the result into rows.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from qlib import criteria
from qlib.power import NOT_COMPUTED, DPass, not_computed

KINDS = ("claim", "identity", "measurement", "check")
#: A row's verdict. PASS/FAIL: the criterion decided against a threshold fixed before the run.
#: INCONCLUSIVE: the CI still straddles the threshold when the pre-set budget is spent.
#: finding: a row outside the theorem's hypotheses (or a number with no sharp prediction): what
#: is seen, never counted as a PASS.
#: "criterion after data": a row that would PASS under a criterion committed after the data it
#: judges (issue 47, item 1; :mod:`qlib.criteria`): not counted PASS until fresh seeds judge it.
VERDICTS = ("PASS", "FAIL", "INCONCLUSIVE", "finding", "criterion after data")
MIN_TAUS = 10.0


def decide(low: float, high: float, threshold: float, *, above: bool = True) -> str:
    """The verdict of "the quantity is above (``above``) / below ``threshold``" from its 95% CI
    [low, high]: PASS if the whole interval is on the claimed side, FAIL if it is wholly on the
    other side, INCONCLUSIVE if it straddles (or touches) the threshold."""
    if not (low <= high):
        raise ValueError(f"the CI must have low <= high; got [{low}, {high}]")
    if above:
        return "PASS" if low >= threshold else ("FAIL" if high < threshold else "INCONCLUSIVE")
    return "PASS" if high < threshold else ("FAIL" if low >= threshold else "INCONCLUSIVE")


#: below this a residual of an exact identity is round-off, and its digits depend on the CPU
ROUNDOFF = 1e-12


def residual_text(x: float) -> str:
    """A residual as the table prints it: "< 1e-12" at round-off level (its digits differ from one
    CPU or BLAS to another, and the published table must not), else two significant digits."""
    return f"< {ROUNDOFF:g}" if abs(x) < ROUNDOFF else f"{x:.1e}"


def decide_band(low: float, high: float, band_low: float, band_high: float) -> str:
    """The verdict of "the quantity lies in [band_low, band_high]" (two-sided) from its 95% CI
    [low, high]: PASS if the interval lies within the band, FAIL if it is disjoint from it,
    INCONCLUSIVE if it straddles an edge."""
    if band_low <= low and high <= band_high:
        return "PASS"
    return "FAIL" if high < band_low or low > band_high else "INCONCLUSIVE"


def se_distance(value: float, low: float, high: float, threshold: float) -> float | None:
    """How far ``value`` sits from ``threshold``, in standard errors read off its 95% CI [low,
    high] (SE = width / (2 x 1.96)); None when the CI has no width (no SE to count in)."""
    se = (high - low) / (2 * 1.96)
    return (value - threshold) / se if se > 0 else None


def combine(verdicts: Iterable[str]) -> str:
    """All parts of a criterion must hold: FAIL if any part fails, else INCONCLUSIVE if any part
    is undecided, else PASS (findings are never combined into a PASS: a finding wins)."""
    v = list(verdicts)
    for out in ("finding", "FAIL", "INCONCLUSIVE"):
        if out in v:
            return out
    return "PASS"


@dataclass(frozen=True)
class ClaimSpec:
    """One claim as data, from which its rows are built.

    Args:
        key: its name in the study's ``CLAIMS`` table.
        claim: the statement (a ``str.format`` template where a row fills in its point, e.g. ``{k}``).
        criterion: how it is decided, a ``str.format`` template over the threshold values
            (:meth:`values`) and the row's own fields; rendered once by :meth:`criterion_text`.
        thresholds: the paths under the study's ``PARAMETERS[mode]["claims"]`` of every threshold
            the criterion uses, fixed before the run; a value is named by its path's last element.
        threshold: the row's "threshold (pre-set)" text, a template like ``criterion``.
        wrong_models: the wrong models the criterion is run on, by their key in the study's registry
            (:data:`qlib.supermarket.variants.WRONG_MODELS` for the supermarket studies, ``WRONG_RULES``
            for the heterogeneous one): far ones must fail it, near ones make its resolution.
        controls: counterfactuals that are not routing models (a control point, a short run, the
            fluid limit): named here so the table lists every counterfactual a row carries.
        rows: ``rows(result, spec) -> list[ClaimRow]``.
        reference: docs/models.md and the paper.
    """

    key: str
    claim: str
    criterion: str
    thresholds: tuple[tuple[str, ...], ...] = ()
    threshold: str = ""
    wrong_models: tuple[str, ...] = ()
    controls: tuple[str, ...] = ()
    rows: Callable[..., list] | None = None
    reference: str = ""

    def values(self, parameters: dict) -> dict[str, object]:
        """Each threshold's value, read from ``parameters["claims"]`` (a study's PARAMETERS[mode]) and
        named by the last element of its path. KeyError if a path does not resolve."""
        out = {}
        for path in self.thresholds:
            v = parameters["claims"]
            for p in path:
                v = v[p]
            out[path[-1]] = v
        return out

    def threshold_values(self, parameters: dict) -> dict[str, object]:
        """Each threshold's value by its dotted path under ``claims`` (what the tests walk)."""
        return {".".join(path): v for path, v in zip(self.thresholds, self.values(parameters).values())}

    def criterion_text(self, parameters: dict, **fields) -> str:
        """The criterion rendered from the threshold values of ``parameters`` (and a row's ``fields``)."""
        return self.criterion.format(**self.values(parameters), **fields)

    def threshold_text(self, parameters: dict, **fields) -> str:
        """The row's pre-set threshold text rendered from the threshold values (and ``fields``)."""
        return self.threshold.format(**self.values(parameters), **fields)


@dataclass(frozen=True)
class Counterfactual:
    """A claim's criterion evaluated on a deliberately wrong model: ``model`` says which,
    ``measured`` what the criterion saw (display string), ``value`` the number it judged,
    ``passed`` its verdict (it should be False)."""

    model: str
    measured: str
    passed: bool
    value: float | None = None
    #: a near wrong model (a plausible bug: d - 1, the other sampling rule, an off-by-one,
    #: eta-greedy routing) rather than a far one (JSQ(2) for JSQ(500))
    near: bool = False
    #: how far the criterion's statistic sits from its threshold, in standard errors (None if
    #: not a statistical criterion)
    se_distance: float | None = None


@dataclass(frozen=True)
class ClaimRow:
    """One line of the claims table.

    ``theory`` and ``measured`` are display strings (measured carries its ± CI); ``passed`` is
    the verdict of an explicit, stated test (``criterion``), never of eyeballing. ``kind`` is
    "claim" or "identity"; ``counterfactuals`` the criterion on wrong models; ``taus`` the
    relaxation times covered by the runs (None where no run is involved); ``start`` how they
    began; ``reference`` the section of docs/models.md and the paper the claim comes from.
    """

    claim: str
    parameters: str
    theory: str
    measured: str
    passed: bool
    criterion: str = ""
    source: str = ""
    kind: str = "claim"
    counterfactuals: tuple[Counterfactual, ...] = ()
    taus: float | None = None
    start: str | None = None
    reference: str = ""
    #: the threshold the criterion compares with, as fixed in the study's PARAMETERS before the run
    threshold: str = ""
    #: an explicit verdict from VERDICTS; None means PASS or FAIL from ``passed``
    outcome: str | None = None
    #: how near a wrong model can come before this row stops telling it apart
    resolution: str = ""
    #: the range of d′ for which JSQ(d′) at the row's point would pass its criterion (:mod:`qlib.power`),
    #: or why it is not computed; None where the row has no d (identities, measurements, checks)
    power: DPass | None = None
    #: when its criterion was fixed and whether its data came after (:func:`with_criteria`):
    #: spec, commit, data ("pinned" / "unpinned" / "criterion after data" / "unknown"), the records'
    #: code_commits, and written_at: HEAD when those with an unknown code commit were written
    criteria: dict | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}; got {self.kind!r}")
        if self.outcome is not None and self.outcome not in VERDICTS:
            raise ValueError(f"outcome must be one of {VERDICTS} or None; got {self.outcome!r}")
        object.__setattr__(self, "passed", bool(self.passed))
        object.__setattr__(self, "counterfactuals", tuple(self.counterfactuals))

    @property
    def verdict(self) -> str:
        """PASS / FAIL / INCONCLUSIVE / finding (see :data:`VERDICTS`)."""
        if self.outcome is not None:
            return self.outcome
        return "PASS" if self.passed else "FAIL"

    @property
    def sound(self) -> bool:
        """Evidence a referee accepts: a passing claim whose every far counterfactual fails (and there
        is one), run for at least MIN_TAUS relaxation times, whose d′ range (where computed) excludes
        d/2 and 2d. Identities, measurements and checks are sound when they pass."""
        if self.kind != "claim":
            return self.verdict == "PASS"
        far = [c for c in self.counterfactuals if not c.near]
        return (self.verdict == "PASS" and len(far) > 0 and not any(c.passed for c in far)
                and (self.taus is None or self.taus >= MIN_TAUS)
                and (self.power is None or self.power.excludes_far))


@contextlib.contextmanager
def tagging(study):
    """While a study builds its rows, each spec of its ``CLAIMS`` names itself on the rows it
    builds (``criteria["spec"]``): the thresholds a row is judged by."""
    table = getattr(study, "CLAIMS", None)
    if not isinstance(table, dict):
        yield
        return
    saved = dict(table)

    def tagged(spec):
        def rows(result, s, _orig=spec.rows, _key=spec.key):
            return [dataclasses.replace(r, criteria={**(r.criteria or {}), "spec": _key})
                    for r in _orig(result, s)]
        return dataclasses.replace(spec, rows=rows) if spec.rows is not None else spec

    table.update({k: tagged(s) for k, s in saved.items()})
    try:
        yield
    finally:
        table.clear()
        table.update(saved)


def with_criteria(row: ClaimRow, study, records: list[dict]) -> ClaimRow:
    """The row with its criteria commit and the code commits of the stored records its study read
    (:mod:`qlib.criteria`); a PASS whose criterion came after those data reads "criterion after
    data". A row no spec named (built outside ``spec.rows``) is judged by every threshold of its
    study's specs. A row that names its data (``criteria["data"]``: cache-name prefixes, e.g. a
    fresh stream's) is judged against those records only."""
    table = getattr(study, "CLAIMS", {}) or {}
    key = (row.criteria or {}).get("spec")
    names = (row.criteria or {}).get("data")
    specs = [table[key]] if key in table else list(table.values())
    paths = tuple(sorted({tuple(p) for s in specs for p in s.thresholds}))
    stored = [r for r in records if r.get("stored", True)
              and (not names or any(str(r.get("name", "")).startswith(n) for n in names))]
    if not stored:
        return row
    commit = criteria.criteria_commit(study.__name__, paths)
    state, codes, bounds = criteria.judge(commit, stored)
    info = {"spec": key or "", "commit": commit, "data": state, "code_commits": codes,
            "written_at": bounds, "records": len(stored), **({"names": names} if names else {})}
    fix: dict = {"criteria": info}
    if state == criteria.AFTER_DATA and row.verdict == "PASS":
        fix["outcome"] = criteria.AFTER_DATA
    return dataclasses.replace(row, **fix)


#: The resolution of a supermarket claim row that runs no near wrong model (a finding, a
#: measurement of the fluid formula, a control): what its evidence on the routing rule rests on.
NO_NEAR = ("no near wrong model run on this row: its evidence that the chain is JSQ(d) and nothing next to "
           "it rests on the level-flow identity rows")


def with_source(row: ClaimRow, title: str) -> ClaimRow:
    """The row as the table shows it under section ``title``: its source, and where it has none,
    the resolution of a supermarket claim that runs no near wrong model and why it has no d′ range.

    Args:
        row: a study's row.
        title: the table section (a key of :data:`qlib.runner.STUDIES`).

    Returns:
        The row, or a copy with those fields filled in.
    """
    fix = {}
    if not row.source:
        fix["source"] = title
    if (row.kind == "claim" and not row.resolution and title.startswith("supermarket")
            and not any(c.near for c in row.counterfactuals)):
        fix["resolution"] = NO_NEAR
    if row.kind == "claim" and row.power is None:  # say why no d′ range is computed
        why = ("a finding: not judged, so no d′ range" if row.verdict == "finding"
               else NOT_COMPUTED.get(title, "the criterion is not a function of the stationary law"))
        fix["power"] = not_computed(None, why)
    if not fix:
        return row
    return ClaimRow(**{**{f: getattr(row, f) for f in row.__dataclass_fields__}, **fix})


def counts(rows: list[ClaimRow]) -> dict[str, dict[str, int]]:
    """kind -> verdict -> number of rows (every kind of :data:`KINDS`, every verdict)."""
    return {k: {v: sum(1 for r in rows if r.kind == k and r.verdict == v) for v in VERDICTS} for k in KINDS}


def exit_failed(rows: list[ClaimRow]) -> bool:
    """True when some row FAILs (``python -m qlib reproduce`` then exits 1). INCONCLUSIVE rows and
    findings do not fail the run: they are reported in the summary."""
    return any(r.verdict == "FAIL" for r in rows)


__all__ = [
    "ClaimRow", "ClaimSpec", "Counterfactual", "decide_band", "KINDS", "VERDICTS", "MIN_TAUS",
    "with_source", "se_distance", "combine", "counts", "decide", "exit_failed",
]
