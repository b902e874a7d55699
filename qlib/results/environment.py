"""The locked environment: what ``requirements.lock`` pins, its hash, and how the running
environment differs from it.

A stored record names the hash of the lock it was computed under (``"lock"``). Bits reproduce
where the environment is the lock's; where it is not (another JAX, NumPy, SciPy...), a recomputed
number may differ in its last bits without the code having changed, and the results check says
"different environment", not "stale" (docs/running.md).
"""

from __future__ import annotations

import hashlib
import re
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

from qlib.config import ROOT

LOCK = ROOT / "requirements.lock"

#: ``name==version`` at the start of a line of the lock, with an optional environment marker.
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?\s*$")


class Difference(NamedTuple):
    """A locked package whose installed version is another (``installed`` None: not installed)."""

    name: str
    locked: str
    installed: str | None

    def __str__(self) -> str:
        return f"{self.name} {self.installed or 'missing'} (locked {self.locked})"


def normalize(name: str) -> str:
    """A distribution's name in PEP 503 form (``Jupyter_Server`` and ``jupyter-server`` are one)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_versions(path: Path = LOCK) -> dict[str, str]:
    """{normalized name: version} of every package the lock pins for this interpreter and platform
    (a pin whose environment marker does not hold here is left out). Empty if there is no lock
    (qlib installed from a wheel, away from its repository)."""
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        m = _PIN.match(line)
        if not m:
            continue
        name, version, marker = m.groups()
        if marker and not _marker_holds(marker):
            continue
        out[normalize(name)] = version
    return out


def _marker_holds(marker: str) -> bool:
    from packaging.markers import Marker  # packaging comes with the lock (pytest, jupyter)

    return Marker(marker).evaluate()


def lock_hash(path: Path = LOCK) -> str | None:
    """sha256 (16 hex digits) of the lock's bytes, or None where there is no lock."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.is_file() else None


def differences(path: Path = LOCK) -> list[Difference]:
    """The locked packages whose installed version (importlib.metadata) is not the locked one."""
    out = []
    for name, version in sorted(locked_versions(path).items()):
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            have = None
        if have != version:
            out.append(Difference(name, version, have))
    return out


def warning_line(path: Path = LOCK) -> str | None:
    """One line naming the packages whose installed version differs from the lock (None: the
    environment is the lock's, or there is no lock)."""
    diff = differences(path)
    if not diff:
        return None
    shown = ", ".join(map(str, diff[:8])) + (f" and {len(diff) - 8} more" if len(diff) > 8 else "")
    return (f"warning: this environment is not requirements.lock's: {shown}; stored results may "
            "not reproduce bit for bit (`make setup` installs the lock; docs/running.md)")


def environment_reasons(record_lock: str | None, path: Path = LOCK) -> list[str]:
    """Why a recomputed number may differ from a record's without the code having changed: the
    record was made under another lock, or the installed packages are not the lock's."""
    out = []
    now = lock_hash(path)
    if record_lock is not None and now is not None and record_lock != now:
        out.append(f"the record was made under lock {record_lock}, the repository's lock is {now}")
    diff = differences(path)
    if diff:
        out.append("installed " + ", ".join(map(str, diff[:5])) + (" ..." if len(diff) > 5 else ""))
    return out
