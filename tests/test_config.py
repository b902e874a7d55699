"""qlib.config: the run's configuration, built once, read from the environment in one place."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from qlib import config, results
from qlib.config import RunConfig, current, using

QLIB = Path(__file__).resolve().parents[1] / "qlib"
#: the modules that may name qlib's variables: the reader, and the XLA switches read before JAX starts
READERS = {"config.py", "_xla.py"}
#: the modules that may touch os.environ: those, and the notebook runner (it writes a kernel's)
ENVIRON = READERS | {"notebooks.py"}


def test_the_environment_round_trips_through_a_config():
    env = {"QLIB_SMOKE": " yes", "QLIB_SCALE": "2.5", "QLIB_RESULTS_WRITE": "long", "QLIB_REFRESH": "1",
           "QLIB_CACHE": "/tmp/c", "QLIB_RESULTS_STUDY": "qlib.studies.perfect", "OTHER": "x"}
    c = RunConfig.from_environ(env)
    assert (c.smoke, c.scale, c.write_tier, c.refresh, c.cache, c.study) == (
        True, "2.5", "long", True, "/tmp/c", "qlib.studies.perfect")
    assert c.figures is None and not c.publish and c.results_dir == ""
    child = {k: v for k, v in c.to_environ().items() if v is not None}
    assert RunConfig.from_environ(child) == c
    assert c.to_environ()["QLIB_FIGURES"] is None  # a default is unset in the child, not inherited


def test_a_config_in_force_wins_over_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("QLIB_SCALE", "3")
    assert config.scale() == 3.0  # nothing in force: the environment, read now
    with using(RunConfig(scale="2", cache=str(tmp_path))):
        assert config.scale() == 2.0 and config.cache_dir() == tmp_path
        assert config.child_environ()["QLIB_SCALE"] == "2"
    assert config.scale() == 3.0


def test_writing_a_tier_puts_it_in_force_and_gives_it_back(tiers):
    assert results.write_tier() is None
    with results.writing("default", "a test", out=lambda *a, **k: None):
        assert results.write_tier() == "default" and current().command == "a test" and results.run_id()
        assert config.child_environ()["QLIB_RESULTS_WRITE"] == "default"  # what a notebook kernel gets
    assert results.write_tier() is None and current().run_id is None


def _qlib_variables(tree: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and re.fullmatch(r"QLIB_[A-Z_]+", n.value)}


def _touches_environ(tree: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr in ("environ", "getenv")
               and isinstance(n.value, ast.Name) and n.value.id == "os" for n in ast.walk(tree))


def test_the_environment_is_read_in_one_place():
    """qlib's variables are named in qlib/config.py only (RunConfig.ENV; _xla's XLA switches apart),
    and os.environ is touched there and by the notebook runner only: no study, store or runner reads
    it."""
    named, touching = [], []
    for p in sorted(QLIB.rglob("*.py")):
        tree = ast.parse(p.read_text())
        rel = str(p.relative_to(QLIB))
        if rel not in READERS and (v := _qlib_variables(tree)):
            named.append(f"{rel}: {sorted(v)}")
        if rel not in ENVIRON and _touches_environ(tree):
            touching.append(rel)
    assert not named, "qlib variables named outside qlib/config.py:\n" + "\n".join(named)
    assert not touching, "os.environ touched outside qlib/config.py:\n" + "\n".join(touching)
    # the checks can fail: a study that reads QLIB_RESULTS_WRITE itself
    bad = ast.parse("import os\nw = os.environ.get('QLIB_RESULTS_WRITE')\n")
    assert _qlib_variables(bad) == {"QLIB_RESULTS_WRITE"} and _touches_environ(bad)
