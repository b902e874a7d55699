"""The project's set-up files agree with each other."""

import re
import tomllib
from pathlib import Path

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
