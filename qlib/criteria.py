"""When a claim's criterion was fixed, and whether it came after the data it judges (issue 47, item 1).

A claim's criterion is its thresholds: the values at its spec's paths under the study's
``PARAMETERS["full"]["claims"]`` (:class:`qlib.claims.ClaimSpec`). Its **criteria commit** is
the oldest commit of the unbroken line, walking back from HEAD, at which those values are today's:
the study's parameters file (:func:`qlib.results.pins.criteria_file`, which follows the file across
moves) is evaluated at each commit that touched the study. A version that cannot be evaluated (an
old module whose imports are gone) ends the walk there, so the criteria commit errs late, towards
"criterion after data", never early. A change of a criterion's logic that leaves its thresholds
alone is not seen here (the logic lives in the study's claims code, which also changes for
renames); a new clause comes with its threshold in this project (a template names no number,
tests/test_claim_specs.py), which is what is seen.

A row's data are the stored records its study read (:func:`qlib.results.cache.reading`). The
criterion came **after the data** when the criteria commit is not an ancestor of a record's code
commit. A record whose code commit is "unknown" (made before records were pinned) still has the
commit that was HEAD when it was written, which its code commit can only precede: a criteria
commit that is not an ancestor of that one came after the data too; one that is leaves the row
"unpinned" (nothing proven either way, said in the row).
"""

from __future__ import annotations

import ast
import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from qlib.results import pins

AFTER_DATA = "criterion after data"


@functools.lru_cache(maxsize=1024)
def _claims_at(commit: str, path: str) -> str | None:
    """JSON of ``PARAMETERS["full"]["claims"]`` of the file ``path`` at ``commit``; None when the file
    cannot be evaluated there."""
    raw = pins.git_out("show", f"{commit}:{path}")
    if raw is None:
        return None
    ns: dict[str, Any] = {"__name__": "qlib_criteria_at_" + commit[:12], "__file__": path}
    try:
        tree = ast.parse(raw.decode(), path)
    except SyntaxError:
        return None
    # The project's own file at one of its commits, evaluated statement by statement to read its
    # thresholds. An import that no longer resolves binds a placeholder: a threshold computed from
    # one differs from every real value, so it ends the walk rather than passing for today's.
    for stmt in tree.body:
        try:
            exec(compile(ast.Module([stmt], []), path, "exec"), ns)  # noqa: S102
        except Exception:  # noqa: BLE001 (an old version's statement that no longer runs)
            if isinstance(stmt, ast.Import | ast.ImportFrom):
                for a in stmt.names:
                    ns[(a.asname or a.name).split(".")[0]] = _Gone()
    try:
        return json.dumps(ns["PARAMETERS"]["full"]["claims"], sort_keys=True, default=repr)
    except Exception:  # noqa: BLE001 (no thresholds in this version: it cannot say)
        return None


class _Gone:
    """What a name imported by an old version stands for when it no longer exists."""

    def __getattr__(self, name):
        return self

    def __call__(self, *args, **kwargs):
        return self

    def __repr__(self):
        return "<an import that no longer resolves>"


def _at(claims_json: str | None, paths: Sequence[Sequence[str]]) -> tuple | None:
    if claims_json is None:
        return None
    c = json.loads(claims_json)
    out = []
    for path in paths:
        v: Any = c
        for p in path:
            if not isinstance(v, Mapping) or p not in v:
                v = "<absent>"
                break
            v = v[p]
        out.append(json.dumps(v, sort_keys=True))
    return tuple(out)


@functools.lru_cache(maxsize=8)
def _graph(head: str) -> dict[str, tuple[str, ...]]:
    """commit -> its parents, for every commit reachable from ``head``."""
    out = {}
    for line in (pins.git_text("rev-list", "--parents", head) or "").splitlines():
        c, *parents = line.split()
        out[c] = tuple(parents)
    return out


@functools.lru_cache(maxsize=64)
def _touching(head: str, name: str) -> frozenset[str]:
    log = pins.git_text("log", "--full-history", "--format=%H", head, "--", f"qlib/studies/{name}.py",
                     f"qlib/studies/{name}") or ""
    return frozenset(log.split())


def _values(study: str, name: str, commit: str, paths, head: str) -> tuple | None:
    graph, touching = _graph(head), _touching(head, name)
    c = commit
    # a commit that is no merge and leaves the study alone has its first parent's thresholds
    while c not in touching and len(graph.get(c, ())) == 1:
        c = graph[c][0]
    f = pins.criteria_file(study, c)
    return None if f is None else _at(_claims_at(c, f), paths)


@functools.lru_cache(maxsize=256)
def criteria_commit(study: str, paths: tuple[tuple[str, ...], ...]) -> str:
    """The criteria commit of the thresholds at ``paths`` of ``study`` (a module name under
    ``qlib.studies``): walking back from HEAD through a parent with today's values (the first
    parent first) to the commit none of whose parents has them. "unknown" without git, a
    parameters file, or thresholds that can be evaluated at HEAD."""
    head = pins.git_text("rev-parse", "HEAD")
    name = study.split(".")[2] if study.startswith("qlib.studies.") else None
    if not head or name is None:
        return pins.UNKNOWN
    now = _values(study, name, head, paths, head)
    if now is None:
        return pins.UNKNOWN
    graph, c = _graph(head), head
    while True:
        same = [p for p in graph.get(c, ()) if _values(study, name, p, paths, head) == now]
        if not same:
            return c
        c = same[0]


def judge(criteria: str, records: Iterable[Mapping]) -> tuple[str, list[str], list[str]]:
    """("pinned" | "unpinned" | AFTER_DATA | "unknown", the records' code commits, the write-time
    commits of those whose code commit is unknown) of a row whose criteria commit is ``criteria``
    and which reads ``records``."""
    recs = list(records)
    short = sorted({str(r.get("code_commit", pins.UNKNOWN)) for r in recs})
    bounds = sorted({str(r.get("commit", "")) for r in recs
                     if r.get("code_commit", pins.UNKNOWN) == pins.UNKNOWN})
    if criteria == pins.UNKNOWN:
        return pins.UNKNOWN, short, bounds
    state = "pinned"
    for r in recs:
        code = r.get("code_commit", pins.UNKNOWN)
        if code != pins.UNKNOWN:
            if pins.is_ancestor(criteria, code) is not True:
                return AFTER_DATA, short, bounds
        else:
            # the code ran from HEAD at write time or before it: criteria after that are after the data
            if pins.is_ancestor(criteria, str(r.get("commit", ""))) is not True:
                return AFTER_DATA, short, bounds
            state = "unpinned"
    return state, short, bounds
