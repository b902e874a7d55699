"""The book's set-up (issue 49): its pins keep requirements.lock's versions, its deploy recipe runs
``make book`` itself, and its docstring reading keeps ``|x|`` an absolute value. The build and the
site are checked by ``make book`` (-W, nitpicky) and ``make book-test`` (Chromium), which need the
book's packages (requirements-book.lock), not installed by ``make setup``."""

import importlib.util
import re

import yaml

from qlib.config import ROOT
from qlib.results import environment


def _pins(path):
    return dict(re.findall(r"(?m)^([A-Za-z0-9_.-]+)==(\S+)", path.read_text()))


def test_the_book_lock_keeps_every_version_of_requirements_lock():
    """Installing the book on top of make setup changes no package that the stored results name
    (their lock hash is requirements.lock's, which the book leaves alone)."""
    book, main = _pins(ROOT / "requirements-book.lock"), environment.locked_versions()
    shared = set(book) & set(main)
    assert shared, "the book lock shares qlib's dependencies with requirements.lock"
    assert {k: (book[k], main[k]) for k in shared if book[k] != main[k]} == {}
    assert {"sphinx", "myst-nb", "sphinx-book-theme", "sphinx-mathjax-offline"} <= set(book) - set(main)
    blocks = re.split(r"\n(?=[A-Za-z0-9])", (ROOT / "requirements-book.lock").read_text())
    assert all("--hash=sha256:" in b for b in blocks if "==" in b.split("\n")[0])


def test_the_lock_comparison_can_fail(tmp_path):
    other = (ROOT / "requirements-book.lock").read_text()
    numpy = environment.locked_versions()["numpy"]
    (tmp_path / "book.lock").write_text(other.replace(f"numpy=={numpy}", "numpy==0.0.1"))
    assert _pins(tmp_path / "book.lock")["numpy"] != numpy


def test_the_deploy_recipe_runs_make_book():
    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "book.yml").read_text())
    runs = [s["run"] for job in flow["jobs"].values() for s in job["steps"] if "run" in s]
    assert runs == ["make book"]
    uploads = [s for job in flow["jobs"].values() for s in job["steps"]
               if "upload-pages-artifact" in s.get("uses", "")]
    assert [u["with"]["path"] for u in uploads] == ["build/book/html"]


def test_the_book_publishes_every_notebook_and_ignores_its_build():
    spec = importlib.util.spec_from_file_location("book_build", ROOT / "book" / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    staged = {p.relative_to(ROOT).as_posix() for pattern in build.PAGES for p in ROOT.glob(pattern)}
    notebooks = {p.relative_to(ROOT).as_posix() for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    assert len(notebooks) == 4 and notebooks <= staged and "figures/claims.md" in staged
    index = (ROOT / "book" / "index.md").read_text()
    assert all(f"notebooks/{n.split('/')[1][:-6]}" in index for n in notebooks)
    assert build.OUT.relative_to(ROOT).parts[0] == "build"
    assert "build/" in (ROOT / ".gitignore").read_text().split()


def test_absolute_values_in_docstrings_are_not_substitutions():
    spec = importlib.util.spec_from_file_location("book_ext", ROOT / "book" / "_ext.py")
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    assert ext._escape_bars("the largest |sim - exact| / SE") == r"the largest \|sim - exact\| / SE"
    assert ext._escape_bars("``a | b`` and |x|") == r"``a | b`` and \|x\|"
