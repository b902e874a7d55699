"""The project's set-up files agree with each other."""

import re
from pathlib import Path

import pytest
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
    """Near the top (what it reproduces, then the two commands), in a shell block of their own:
    `make test` is the command CI runs (test_ci_runs_make_test)."""
    text = (ROOT / "README.md").read_text()
    head = "\n".join(text.splitlines()[:50])
    block = re.search(r"```sh\n(.*?)```", head, re.S)
    assert block, "a ```sh block in the README's first 50 lines"
    commands = block.group(1)
    assert re.search(r"^make figures\b", commands, re.M) and re.search(r"^make test\b", commands, re.M)


def test_ci_runs_make_test():
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def _named_functions(text):
    alias = {"sm": "qlib.supermarket", "het": "qlib.heterogeneous"}
    names = {(alias[a], f) for a, f in re.findall(r"\b(sm|het)\.([A-Za-z_]\w*)\(", text)}
    return names | set(re.findall(r"`(qlib(?:\.[a-z_]+)+)\.([A-Za-z_]\w*)\(", text))


def test_every_function_the_readme_names_exists():
    """The README's example and the API tour (docs/api.md) name functions as sm.X / het.X /
    qlib.<module>.X: each must exist (a renamed or unexported function would break a new user's
    first call)."""
    import importlib

    readme = _named_functions((ROOT / "README.md").read_text())
    names = readme | _named_functions((ROOT / "docs" / "api.md").read_text())
    assert len(readme) >= 4 and len(names) >= 10
    missing = [f"{m}.{f}" for m, f in sorted(names) if not hasattr(importlib.import_module(m), f)]
    assert not missing, missing


def test_the_distribution_has_a_free_name_and_the_readme_says_what_it_cannot_share():
    """`qlib` on PyPI is another (2018) package and Microsoft's `pyqlib` installs a module `qlib`
    too: the distribution has its own name, the import name stays `qlib`, and the README says
    that the two cannot share an environment."""
    toml = tomllib.loads((ROOT / "pyproject.toml").read_text())
    name = toml["project"]["name"]
    assert name not in ("qlib", "pyqlib") and "qlib" in name
    assert toml["tool"]["setuptools"]["packages"]["find"]["include"] == ["qlib*"]  # the import name
    text = " ".join((ROOT / "README.md").read_text().split())
    assert f"**`{name}`**" in text and "pyqlib" in text and "cannot share an environment" in text


def test_readme_stays_short_and_shows_the_summary_not_the_table():
    """issue 31, item 5: a README a reader can take in (about 150-200 lines); the claims table
    itself is figures/claims.md."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 220
    inside = text[text.index("<!-- claims:start -->"):text.index("<!-- claims:end -->")]
    assert "<details>" not in inside and "\n### " not in inside
    for doc in ("docs/api.md", "docs/testing.md", "docs/models.md", "figures/claims.md"):
        assert f"]({doc}" in text and (ROOT / doc).exists(), doc


@pytest.mark.slow
def test_the_readme_example_runs_and_shows_what_its_comments_say():
    """The README's example, run as printed in a fresh process: k = 2, the longest queue has length
    k, and the exact busy probabilities of Cabral's example (the fastest server busy least often)."""
    import subprocess
    import sys

    text = (ROOT / "README.md").read_text()
    code = re.search(r"## Example\n\n```python\n(.*?)```", text, re.S).group(1)
    assert len([line for line in code.splitlines() if line.strip() and not line.startswith("#")]) <= 10
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0] == "2" and lines[1].startswith("[0. 0. 1. 0.")
    busy = [float(x) for x in lines[-1].strip("[]").split()]
    assert busy == sorted(busy) and abs(busy[0] - 0.44285714) < 1e-6
