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
  changed its study's parameters file, the one file that holds the study's thresholds
  (``qlib/studies/<study>/parameters.py``, or the study's module where it is one file:
  :func:`criteria_file`). A criteria file changed but not committed when the run started gives
  ``"uncommitted"``, which ``python -m qlib results --verify`` rejects: a threshold is committed
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
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from qlib import config

#: The paths whose uncommitted changes change the numbers (see the module's text).
CODE_PATHS = ("qlib", "requirements.lock", "pyproject.toml")
CODE_ENV = "QLIB_RESULTS_CODE"  # the code state captured when the run started (JSON), for its kernels
ALLOW_DIRTY_ENV = "QLIB_ALLOW_DIRTY"  # "1": a run with uncommitted code proceeds (and records the diff)
UNKNOWN = "unknown"
UNCOMMITTED = "uncommitted"


def _root() -> Path:
    return config.ROOT


def _git(*args: str, root: Path | None = None, binary: bool = False) -> bytes | None:
    """stdout of ``git -C root args``, or None when git fails or is absent."""
    try:
        out = subprocess.run(["git", "-C", str(root or _root()), *args], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _text(*args: str, root: Path | None = None) -> str | None:
    out = _git(*args, root=root)
    return None if out is None else out.decode().strip()


def code_state(root: Path | None = None) -> dict:
    """{"commit": HEAD or "unknown", "diff": None (clean) | {"sha256", "paths"} | "unknown"} of the
    code (:data:`CODE_PATHS`) in the repository at ``root`` (default: qlib's)."""
    head = _text("rev-parse", "HEAD", root=root)
    if not head:
        return {"commit": UNKNOWN, "diff": UNKNOWN}
    status = _git("status", "--porcelain", "--untracked-files=all", "-z", "--", *CODE_PATHS, root=root)
    if status is None:
        return {"commit": head, "diff": UNKNOWN}
    # -z: "XY path\0" (a rename adds its old path as one more field)
    fields = [f for f in status.decode().split("\0") if f]
    paths = sorted({f[3:] for f in fields if len(f) > 3 and f[2] == " "})
    if not paths:
        return {"commit": head, "diff": None}
    h = hashlib.sha256(_git("diff", "HEAD", "--binary", "--", *CODE_PATHS, root=root) or b"")
    untracked = _git("ls-files", "--others", "--exclude-standard", "-z", "--", *CODE_PATHS, root=root) or b""
    base = root or _root()
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
    raw = os.environ.get(CODE_ENV)
    if raw:
        return json.loads(raw)
    return code_state()


def start_run(allow_dirty: bool = False) -> dict:
    """Capture the code state at the start of a run that writes a tier, and hand it to the
    processes the run starts (``$QLIB_RESULTS_CODE``). A run started by another (a notebook kernel
    of ``make figures``) keeps the state its parent captured. Raises RuntimeError when the code
    has uncommitted changes and neither ``allow_dirty`` nor ``$QLIB_ALLOW_DIRTY`` allows them."""
    raw = os.environ.get(CODE_ENV)
    if raw:
        return json.loads(raw)
    state = code_state()
    allowed = allow_dirty or os.environ.get(ALLOW_DIRTY_ENV, "").strip() in ("1", "true", "yes")
    diff = state["diff"]
    if isinstance(diff, Mapping) and not allowed:
        more = len(diff["paths"]) - 6
        shown = ", ".join(diff["paths"][:6]) + (f" and {more} more" if more > 0 else "")
        raise RuntimeError(
            f"the code has uncommitted changes ({shown}): commit them first, so that the stored results "
            "name the code they came from, or pass --allow-dirty (the records then name the diff's hash)")
    os.environ[CODE_ENV] = json.dumps(state, sort_keys=True)
    return state


def criteria_file(study: str | None, root: Path | None = None) -> str | None:
    """The file holding a study's thresholds (relative to the repository), from the module name a
    record gives (``qlib.studies.max_length.compute`` -> ``qlib/studies/max_length/parameters.py``);
    None where the study is no module of ``qlib.studies``."""
    parts = (study or "").split(".")
    if len(parts) < 3 or parts[:2] != ["qlib", "studies"] or not parts[2].isidentifier():
        return None
    base = root or _root()
    for rel in (f"qlib/studies/{parts[2]}/parameters.py", f"qlib/studies/{parts[2]}.py"):
        if (base / rel).is_file():
            return rel
    return None


@functools.lru_cache(maxsize=256)
def _last_change(commit: str, path: str, root: str) -> str:
    out = _text("log", "-1", "--format=%H", commit, "--", path, root=Path(root))
    return out or UNKNOWN


def criteria_commit(study: str | None, state: Mapping | None = None) -> str:
    """The criteria commit of an entry of ``study`` computed from the code ``state`` (default: this
    run's): the last commit at or before its code commit that changed the study's criteria file;
    "uncommitted" when that file was among the uncommitted changes; "unknown" where it cannot say."""
    state = current() if state is None else state
    path = criteria_file(study)
    if path is None or state.get("commit", UNKNOWN) == UNKNOWN:
        return UNKNOWN
    diff = state.get("diff")
    if diff == UNKNOWN:
        return UNKNOWN
    if isinstance(diff, Mapping) and path in diff.get("paths", []):
        return UNCOMMITTED
    return _last_change(state["commit"], path, str(_root()))


def record_fields(study: str | None) -> dict:
    """The fields a new record gains: ``code_commit``, ``code_diff``, ``criteria_file``,
    ``criteria_commit``."""
    state = current()
    return {"code_commit": state["commit"], "code_diff": state["diff"],
            "criteria_file": criteria_file(study) or UNKNOWN,
            "criteria_commit": criteria_commit(study, state)}


def is_ancestor(older: str, newer: str) -> bool | None:
    """Whether commit ``older`` is an ancestor of (or is) ``newer``; None when either is not a
    commit of this repository."""
    return _is_ancestor(older, newer, str(_root()))


@functools.lru_cache(maxsize=4096)
def _is_ancestor(older: str, newer: str, root: str) -> bool | None:
    for c in (older, newer):
        if _git("cat-file", "-e", f"{c}^{{commit}}", root=Path(root)) is None:
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
    """The commit, if any, that changed the record's criteria file after its code commit (the
    criteria at HEAD then came after its data): None when they did not or it cannot say."""
    path = study_file or rec.get("criteria_file")
    code = rec.get("code_commit", UNKNOWN)
    if not path or path == UNKNOWN or code == UNKNOWN:
        return None
    head = _text("rev-parse", "HEAD")  # a hash, not "HEAD": _last_change is cached
    now = _last_change(head, path, str(_root())) if head else UNKNOWN
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
