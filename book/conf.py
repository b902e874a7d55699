"""Sphinx configuration of the book (``make book``; docs/running.md#the-book).

The book is built from what the repository stores, executing nothing: the executed notebooks
(``notebooks/NN_*.ipynb``, written by ``make figures``), the figures and ``figures/claims.md``,
``docs/``, the README's pitch and example (``index.md``) and an API reference generated from the
docstrings (``reference.md``). ``book/build.py`` copies them into the source folder it builds.
Everything it needs is in requirements-book.lock, MathJax included (sphinx-mathjax-offline): the
build and the site work without a network.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

BOOK = Path(__file__).resolve().parent
sys.path.insert(0, str(BOOK))  # _ext.py, the book's own checks

project = "qlib"
author = "The qlib-queues contributors"
copyright = "2026, the qlib-queues contributors"  # noqa: A001 (Sphinx's name)
from qlib import __version__  # noqa: E402

release = __version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx-mathjax-offline",
    "_ext",
]

root_doc = "index"
# only what the book publishes; everything else under the links (the .md sources of the notebooks,
# the results) stays out
include_patterns = ["index.md", "reference.md", "_autosummary/*.rst", "docs/*.md",
                    "notebooks/[0-9][0-9]_*.ipynb", "figures/claims.md", "benchmarks/README.md"]

# the stored outputs as they are: the book never runs a kernel
nb_execution_mode = "off"
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "html_image"]
myst_heading_anchors = 4  # the docs' links to #sections (docs/models.md#hypotheses)
suppress_warnings = ["mystnb.unknown_mime_type"]  # widget views: none are stored (qlib/notebooks.py)

autosummary_generate = True
templates_path = ["_templates"]  # a module's page is its automodule, without autosummary's tables
autodoc_default_options = {"members": True, "undoc-members": True, "show-inheritance": False}
autodoc_typehints = "description"
autodoc_member_order = "bysource"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
nitpicky = True  # book/build.py passes -n too; the exceptions are in _ext.py, with their reasons

html_theme = "sphinx_book_theme"
html_title = "qlib: queueing claims you can rerun"
html_theme_options = {
    "show_toc_level": 2,
    "use_download_button": False,  # a download of the .ipynb needs no button: it is in the repository
    "home_page_in_toc": True,
}
html_last_updated_fmt = None
# the build is the same bytes for the same commit: no build date in the pages
html_show_sphinx = False
os.environ.setdefault("QLIB_AUTO_XLA", "0")  # importing qlib for autodoc starts no XLA backend
