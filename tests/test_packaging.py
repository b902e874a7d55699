"""The project's set-up files agree with each other."""

import re
from pathlib import Path

import tomllib
import yaml

ROOT = Path(__file__).resolve().parent.parent


def _names(reqs):
    return {re.split(r"[<>=!~ \[]", r, maxsplit=1)[0].strip().lower() for r in reqs}


def test_environment_yml_matches_pyproject():
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = _names(py["dependencies"]) | _names(py["optional-dependencies"]["test"]) \
        | _names(py["optional-dependencies"]["bench"])
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "conda-forge" in env["channels"]
    conda = {d for d in env["dependencies"] if isinstance(d, str)}
    have = _names(conda) - {"python", "pip"}
    assert have == wanted, (sorted(have - wanted), sorted(wanted - have))
    pip = [d for d in env["dependencies"] if isinstance(d, dict)][0]["pip"]
    assert "-e ." in pip


def test_readme_gives_the_two_commands():
    text = (ROOT / "README.md").read_text()
    head = text[: text.find("\n## ", 200)]
    assert "make figures" in head and "make test" in head


def test_ci_runs_make_test():
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_every_function_the_readme_names_exists():
    """The README's examples and API list name functions as sm.X / het.X / qlib.<module>.X: each
    must exist (a renamed or unexported function would break a new user's first call)."""
    import importlib

    text = (ROOT / "README.md").read_text()
    alias = {"sm": "qlib.supermarket", "het": "qlib.heterogeneous"}
    names = {(alias[a], f) for a, f in re.findall(r"\b(sm|het)\.([A-Za-z_]\w*)\(", text)}
    names |= set(re.findall(r"`(qlib(?:\.[a-z_]+)+)\.([A-Za-z_]\w*)\(", text))
    assert len(names) >= 10
    missing = [f"{m}.{f}" for m, f in sorted(names) if not hasattr(importlib.import_module(m), f)]
    assert not missing, missing
