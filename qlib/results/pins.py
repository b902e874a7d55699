"""What pins a stored entry to its code (issue 47, item 3): the commit its code ran from, the hash
of uncommitted changes to the code where a run was allowed to proceed with them, and the criteria
commit that judges it.

- **The code commit** is HEAD when the run starts (:func:`start_run`, called by
  :func:`qlib.results.tier.writing`), not when an entry is written: a run of hours may outlive
  several commits. The notebook kernels a run starts inherit it through ``$QLIB_RESULTS_CODE``.
- **The code** is what the numbers depend on: the tracked and untracked files under ``qlib/``, and
  ``requirements.lock`` and ``pyproject.toml`` (:data:`CODE_PATHS`). The notebooks only call a
  study's ``run`` and draw; ``results/``, ``figures/`` and ``docs/`` are outputs. A change to the
  code that is not committed makes a run that writes a tier refuse, unless ``--allow-dirty`` is
  given; then the record names the sha256 of the diff (``code_diff``) and the paths it touches.
- **The criteria commit** of an entry is the last commit, at or before its code commit, that
  changed its study's parameters file, the one file of the study that defines ``PARAMETERS``
  (whose ``"claims"`` are the thresholds): ``qlib/studies/<study>/parameters.py``, or the study's
  module where it is one file, as it was at the code commit (:func:`criteria_file`). The file
  also changes for other reasons (a new point, a move), which only makes the criteria commit
  later: a check that it is an ancestor of the code commit errs towards failing. A criteria
  file changed but not committed when the run started gives ``"uncommitted"``, which
  ``python -m qlib results --verify`` rejects: a threshold is committed
  before the run it judges. A record that cannot say (no git, a study that is no module of
  ``qlib.studies``, an old record whose code commit history does not determine) says
  ``"unknown"``, never a guess.

:func:`pin_problems` is the check of ``results --verify``: the criteria commit is an ancestor of
(or is) the code commit.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from qlib import config

#: The paths whose uncommitted changes change the numbers (see the module's text).
CODE_PATHS = ("qlib", "requirements.lock", "pyproject.toml")
#: the code state captured when the run started (JSON), for its kernels
CODE_ENV = config.RunConfig.ENV["code"]
#: "1": a run on uncommitted code proceeds (and records the diff)
ALLOW_DIRTY_ENV = config.RunConfig.ENV["allow_dirty"]
UNKNOWN = "unknown"
UNCOMMITTED = "uncommitted"


def repo_root() -> Path:
    return config.ROOT


def git_out(*args: str, root: Path | None = None, binary: bool = False) -> bytes | None:
    """stdout of ``git -C root args``, or None when git fails or is absent."""
    try:
        out = subprocess.run(["git", "-C", str(root or repo_root()), *args], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def git_text(*args: str, root: Path | None = None) -> str | None:
    out = git_out(*args, root=root)
    return None if out is None else out.decode().strip()


def code_state(root: Path | None = None) -> dict:
    """{"commit": HEAD or "unknown", "diff": None (clean) | {"sha256", "paths"} | "unknown"} of the
    code (:data:`CODE_PATHS`) in the repository at ``root`` (default: qlib's)."""
    head = git_text("rev-parse", "HEAD", root=root)
    if not head:
        return {"commit": UNKNOWN, "diff": UNKNOWN}
    status = git_out("status", "--porcelain", "--untracked-files=all", "-z", "--", *CODE_PATHS, root=root)
    if status is None:
        return {"commit": head, "diff": UNKNOWN}
    # -z: "XY path\0" (a rename adds its old path as one more field)
    fields = [f for f in status.decode().split("\0") if f]
    paths = sorted({f[3:] for f in fields if len(f) > 3 and f[2] == " "})
    if not paths:
        return {"commit": head, "diff": None}
    h = hashlib.sha256(git_out("diff", "HEAD", "--binary", "--", *CODE_PATHS, root=root) or b"")
    untracked = git_out("ls-files", "--others", "--exclude-standard", "-z", "--", *CODE_PATHS,
                        root=root) or b""
    base = root or repo_root()
    for p in sorted(u for u in untracked.decode().split("\0") if u):
        h.update(b"\0untracked\0" + p.encode() + b"\0")
        try:
            h.update((base / p).read_bytes())
        except OSError:
            h.update(b"<unreadable>")
    return {"commit": head, "diff": {"sha256": h.hexdigest()[:16], "paths": paths}}


def current() -> dict:
    """The code state of this run: the one :func:`start_run` captured (in this process or the one
    that started it), else the repository's now (a computation outside a run that writes a tier)."""
    raw = config.current().code
    if raw:
        return json.loads(raw)
    return code_state()


def start_run(allow_dirty: bool = False) -> dict:
    """Capture the code state at the start of a run that writes a tier, and hand it to the
    processes the run starts: :func:`qlib.results.writing` puts the state it returns in force (the
    run's ``RunConfig.code``; ``$QLIB_RESULTS_CODE`` for its kernels). A run started by another (a
    notebook kernel of ``make figures``) keeps the state its parent captured. Raises RuntimeError
    when the code has uncommitted changes and neither ``allow_dirty`` nor ``$QLIB_ALLOW_DIRTY``
    allows them."""
    raw = config.current().code
    if raw:
        return json.loads(raw)
    state = code_state()
    allowed = allow_dirty or config.current().allow_dirty
    diff = state["diff"]
    if isinstance(diff, Mapping) and not allowed:
        more = len(diff["paths"]) - 6
        shown = ", ".join(diff["paths"][:6]) + (f" and {more} more" if more > 0 else "")
        raise RuntimeError(
            f"the code has uncommitted changes ({shown}): commit them first, so that the stored results "
            "name the code they came from, or pass --allow-dirty (the records then name the diff's hash)")
    return state


def criteria_file(study: str | None, commit: str | None = None) -> str | None:
    """The file holding a study's thresholds (relative to the repository): the one of the study's
    module or package that defines ``PARAMETERS`` (with ``"claims"``, the thresholds), at ``commit``
    (default: the working tree; ``parameters.py`` first). From the module name a record gives
    (``qlib.studies.max_length.compute`` -> ``qlib/studies/max_length/parameters.py``); None where
    the study is no module of ``qlib.studies`` or none of its files defines ``PARAMETERS``."""
    parts = (study or "").split(".")
    if len(parts) < 3 or parts[:2] != ["qlib", "studies"] or not parts[2].isidentifier():
        return None
    return _criteria_file(parts[2], commit, str(repo_root()))


_DEFINES = re.compile(r"^PARAMETERS\b", re.M)


@functools.lru_cache(maxsize=256)
def _criteria_file(name: str, commit: str | None, root: str) -> str | None:
    base = Path(root)
    if commit is None:
        listed = [f"qlib/studies/{name}.py"] + sorted(
            str(p.relative_to(base)) for p in (base / "qlib/studies" / name).glob("*.py"))
        read = lambda rel: (base / rel).read_text() if (base / rel).is_file() else ""  # noqa: E731
    else:
        out = git_text("ls-tree", "-r", "--name-only", commit, "--", f"qlib/studies/{name}.py",
                    f"qlib/studies/{name}/", root=base) or ""
        listed = [p for p in out.splitlines() if p.endswith(".py")]
        read = lambda rel: (git_out("show", f"{commit}:{rel}", root=base) or b"").decode()  # noqa: E731
    listed.sort(key=lambda rel: not rel.endswith("/parameters.py"))
    for rel in listed:
        if _DEFINES.search(read(rel)):
            return rel
    return None


def last_change(commit: str, path: str) -> str:
    """The last commit at or before ``commit`` that changed ``path`` ("unknown" if none)."""
    return _last_change(commit, path, str(repo_root()))


@functools.lru_cache(maxsize=256)
def _last_change(commit: str, path: str, root: str) -> str:
    out = git_text("log", "-1", "--format=%H", commit, "--", path, root=Path(root))
    return out or UNKNOWN


def criteria_commit(study: str | None, state: Mapping | None = None) -> str:
    """The criteria commit of an entry of ``study`` computed from the code ``state`` (default: this
    run's): the last commit at or before its code commit that changed the study's criteria file;
    "uncommitted" when that file was among the uncommitted changes; "unknown" where it cannot say."""
    state = current() if state is None else state
    if state.get("commit", UNKNOWN) == UNKNOWN:
        return UNKNOWN
    diff = state.get("diff")
    dirty = diff.get("paths", []) if isinstance(diff, Mapping) else []
    path = criteria_file(study, state["commit"])
    if path is None:  # a study that is not in the commit at all: uncommitted if its file is dirty
        return UNCOMMITTED if criteria_file(study) in dirty and dirty else UNKNOWN
    if diff == UNKNOWN:
        return UNKNOWN
    if path in dirty:
        return UNCOMMITTED
    return _last_change(state["commit"], path, str(repo_root()))


def record_fields(study: str | None) -> dict:
    """The fields a new record gains: ``code_commit``, ``code_diff``, ``criteria_file``,
    ``criteria_commit``."""
    state = current()
    at = None if state["commit"] == UNKNOWN else state["commit"]
    return {"code_commit": state["commit"], "code_diff": state["diff"],
            "criteria_file": criteria_file(study, at) or criteria_file(study) or UNKNOWN,
            "criteria_commit": criteria_commit(study, state)}


def is_ancestor(older: str, newer: str) -> bool | None:
    """Whether commit ``older`` is an ancestor of (or is) ``newer``; None when either is not a
    commit of this repository."""
    return _is_ancestor(older, newer, str(repo_root()))


@functools.lru_cache(maxsize=4096)
def _is_ancestor(older: str, newer: str, root: str) -> bool | None:
    for c in (older, newer):
        if git_out("cat-file", "-e", f"{c}^{{commit}}", root=Path(root)) is None:
            return None
    try:
        out = subprocess.run(["git", "-C", root, "merge-base", "--is-ancestor", older, newer],
                             capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return {0: True, 1: False}.get(out.returncode)


PIN_FIELDS = ("code_commit", "code_diff", "criteria_file", "criteria_commit")


def pin_problems(rec: Mapping) -> tuple[list[str], list[str]]:
    """(problems, unknowns) of a record's pins: an uncommitted criteria file, a commit that is not
    in this repository, a criteria commit that is not an ancestor of the code commit (problems);
    a pin the record says is "unknown", or a record without the fields (unknowns, reported apart:
    nothing can be checked, nothing is claimed)."""
    missing = [f for f in PIN_FIELDS if f not in rec]
    if missing:  # nothing claimed, nothing to check (tests/test_results.py requires them of results/)
        return [], [f"no {', '.join(missing)}: the record predates pinned records"]
    code, crit = rec["code_commit"], rec["criteria_commit"]
    if crit == UNCOMMITTED:
        return [f"its criteria ({rec['criteria_file']}) were not committed when it was computed"], []
    unknown = [f"{f} unknown" for f, v in (("code commit", code), ("criteria commit", crit)) if v == UNKNOWN]
    if rec["code_diff"] == UNKNOWN:
        unknown.append("code diff unknown")
    if code == UNKNOWN or crit == UNKNOWN:
        return [], unknown
    anc = is_ancestor(crit, code)
    if anc is None:
        return [f"code commit {code[:9]} or criteria commit {crit[:9]} is not a commit of this "
                "repository"], unknown
    if not anc:
        return [f"its criteria commit {crit[:9]} is not an ancestor of its code commit {code[:9]}"], unknown
    return [], unknown


def criteria_after(rec: Mapping, study_file: str | None = None) -> str | None:
    """The commit, if any, that changed its study's criteria file (at HEAD: the file may have
    moved since) after the record's code commit (the criteria at HEAD then came after its data,
    as far as the file says: it also changes for other reasons); None when it did not or it
    cannot say."""
    code = rec.get("code_commit", UNKNOWN)
    head = git_text("rev-parse", "HEAD")  # a hash, not "HEAD": _last_change is cached
    path = study_file or criteria_file(rec.get("study"), head) or rec.get("criteria_file")
    if not path or path == UNKNOWN or code == UNKNOWN or not head:
        return None
    now = _last_change(head, path, str(repo_root()))
    if now == UNKNOWN:
        return None
    return None if is_ancestor(now, code) else now


def summary_counts(recs: Sequence[Mapping]) -> dict[str, int]:
    """How many records are pinned (both commits known), unknown, or fail :func:`pin_problems`."""
    out = {"pinned": 0, "unknown": 0, "failing": 0}
    for r in recs:
        p, u = pin_problems(r)
        out["failing" if p else "unknown" if u else "pinned"] += 1
    return out


# --------------------------------------------------------------------------- records made before the pins

#: Two records of one tier and command belong to one run when the second began computing (its date
#: minus its wall time) within this many seconds of the first's date: a run writes its entries one
#: after another. Merging too much only makes a run start earlier, so more pins say "unknown".
RUN_GAP_S = 1800
#: A run's start-up before its first entry begins computing (imports, a notebook kernel's start,
#: reading the stored entries it skips), bounded generously: a commit made less than this before
#: a run's first computation may have come after the run started, so the run's HEAD is unknown.
START_UP_S = 300


def _time(iso: str) -> float:
    import datetime

    return datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def historical_pins(records: Mapping[str, Mapping]) -> dict[str, dict]:
    """The pins git history determines for records made before they existed ({name: record} ->
    {name: fields}). A record's ``commit`` is HEAD when it was written. Its records are grouped into
    runs (one tier and command, each beginning within :data:`RUN_GAP_S` of the previous one's end);
    the code commit is that ``commit`` where every record of the run names the same one and it was
    committed before the run began (:data:`START_UP_S` before its first entry began computing:
    the earliest date minus wall time), so HEAD could not move during the run; otherwise
    "unknown". Whether the tree was clean was not recorded: ``code_diff``
    is "unknown". The criteria commit follows from a known code commit as for a new record."""
    by_run: dict[tuple, list[tuple[float, float, str]]] = {}
    for name, r in records.items():
        end = _time(r["date"])
        run = by_run.setdefault((r.get("tier"), r.get("command")), [])
        run.append((end - float(r.get("wall_s", 0)), end, name))
    out = {}
    for group in by_run.values():
        group.sort(key=lambda x: x[1])
        runs, cur, cur_end = [], [], None
        for start, end, name in group:
            if cur and start > cur_end + RUN_GAP_S:
                runs.append(cur)
                cur = []
            cur.append((start, end, name))
            cur_end = end if cur_end is None or len(cur) == 1 else max(cur_end, end)
        runs.append(cur)
        for run in runs:
            commits = {records[n]["commit"] for _, _, n in run}
            begin = min(s for s, _, _ in run)
            code = UNKNOWN
            if len(commits) == 1:
                (c,) = commits
                when = git_text("show", "-s", "--format=%cI", c)
                if when and _time(when) <= begin - START_UP_S:
                    code = c
            for _, _, n in run:
                study = records[n].get("study")
                state = {"commit": code, "diff": None}  # the criteria as of the code commit
                where = criteria_file(study, code) if code != UNKNOWN else None
                out[n] = {"code_commit": code, "code_diff": UNKNOWN, "criteria_file": where or UNKNOWN,
                          "criteria_commit": criteria_commit(study, state) if code != UNKNOWN else UNKNOWN}
    return out
