"""The project's set-up files agree with each other."""

import re
from pathlib import Path

import pytest
import tomllib
import yaml

from qlib.results import environment

ROOT = Path(__file__).resolve().parent.parent


def _names(reqs):
    return {re.split(r"[<>=!~ \[]", r, maxsplit=1)[0].strip().lower() for r in reqs}


def _pyproject_names(*extras):
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return _names(py["dependencies"]).union(*(_names(py["optional-dependencies"][e]) for e in extras))


def test_the_lock_pins_every_dependency_with_hashes():
    """requirements.lock pins (==, with a sha256 per file) every dependency of pyproject.toml and of
    its test, bench and browser extras, and uv, which installs it."""
    locked = environment.locked_versions()
    wanted = {environment.normalize(n) for n in _pyproject_names("test", "bench", "browser")} | {"uv"}
    assert wanted <= set(locked), sorted(wanted - set(locked))
    blocks = re.split(r"\n(?=[A-Za-z0-9])", (ROOT / "requirements.lock").read_text())
    pins = [b for b in blocks if "==" in b.split("\n")[0]]
    assert len(pins) == len(locked) and all("--hash=sha256:" in b for b in pins)


def test_installed_versions_are_the_locks():
    """Every locked package is installed at its locked version (importlib.metadata): `make setup`
    installs exactly the lock, and a stored result reproduces bit for bit in that environment."""
    assert environment.locked_versions(), "no requirements.lock at the repository root"
    assert environment.differences() == []


def test_a_difference_from_the_lock_is_named(tmp_path):
    """The check can fail: a lock naming another numpy gives that one difference and a warning line."""
    import numpy

    text = (ROOT / "requirements.lock").read_text()
    other = re.sub(r"^numpy==\S+", "numpy==0.0.1", text, flags=re.M)
    assert other != text
    (tmp_path / "requirements.lock").write_text(other)
    diff = environment.differences(tmp_path / "requirements.lock")
    assert diff == [environment.Difference("numpy", "0.0.1", numpy.__version__)]
    line = environment.warning_line(tmp_path / "requirements.lock")
    assert f"numpy {numpy.__version__} (locked 0.0.1)" in line
    assert environment.lock_hash(tmp_path / "requirements.lock") != environment.lock_hash()


def test_environment_yml_installs_the_lock():
    """conda users get the lock's Python and the lock itself (conda-forge's builds of JAX and NumPy
    are other binaries, so the stored bits are promised for the lock only)."""
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "conda-forge" in env["channels"]
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    assert "python=3.11" in conda and "pip" in conda
    assert "--python-version 3.11" in (ROOT / "Makefile").read_text()
    pip = [d for d in env["dependencies"] if isinstance(d, dict)][0]["pip"]
    assert pip == ["-r requirements.lock"]


def test_every_stored_record_names_the_lock():
    """Each stored record names the hash of the lock it reproduces under (issue 38)."""
    import json

    from qlib.results import store

    records = [json.loads(p.read_text()) for t in store.TIERS for p in (ROOT / "results" / t).glob("*.json")]
    assert records and all(r.get("lock") for r in records)


def test_jupyterlab_fetches_no_news():
    """The project's JupyterLab settings turn the news popup off (it covers the notebook)."""
    import json

    o = json.loads((ROOT / ".jupyter" / "lab" / "settings" / "overrides.json").read_text())
    news = o["@jupyterlab/apputils-extension:notification"]
    assert news == {"fetchNews": "false", "checkForUpdates": False}


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
