"""What to cite: this software and the papers whose claims it reproduces (``python -m qlib cite``).

One source for the bibliographic data: the README's bibtex block, ``CITATION.cff`` (which GitHub
and Zenodo read) and ``python -m qlib cite`` must agree with :data:`SOFTWARE` and :data:`PAPERS`,
and ``tests/test_citation.py`` checks that they do. The papers' data are those of docs/models.md's
sources ([BL12], [BFL18], Cabral).
"""

from __future__ import annotations

from qlib import __version__

#: the software, as CITATION.cff describes it (version and licence as pyproject.toml gives them)
SOFTWARE = {
    "key": "qlib_queues",
    "type": "software",
    "title": "qlib: queueing claims you can rerun (the qlib-queues distribution)",
    "author": "{The qlib-queues contributors}",
    "version": __version__,
    "year": "2026",
    "date": "2026-12-07",
    "license": "MIT",
    "note": "JAX library and notebooks reproducing Brightwell \\& Luczak and Cabral",
}

#: the papers, in the README's order: Brightwell & Luczak (and the journal version with
#: Fairthorne, whose bound the claims table checks), then Cabral
PAPERS = [
    {"key": "brightwell2012supermarket", "type": "misc",
     "author": "Brightwell, Graham and Luczak, Malwina",
     "title": "The supermarket model with arrival rate tending to one",
     "year": "2012", "eprint": "1201.5523", "archivePrefix": "arXiv"},
    {"key": "brightwell2018bounded", "type": "article",
     "author": "Brightwell, Graham and Fairthorne, M. and Luczak, Malwina J.",
     "title": "The supermarket model with bounded queue lengths in equilibrium",
     "journal": "Journal of Statistical Physics", "year": "2018", "doi": "10.1007/s10955-018-2044-7"},
    {"key": "cabral2007heterogeneous", "type": "misc",
     "author": "Cabral, F. B.",
     "title": "Queues with heterogeneous servers and uninformed customers: who works the most?",
     "year": "2007", "eprint": "0706.0560", "archivePrefix": "arXiv"},
]

def _entry(fields: dict) -> str:
    """One bibtex entry, compact: author and title on lines of their own, the rest on one line
    (and the software's note on its own: it is long)."""
    rest = [k for k in ("journal", "year", "doi", "eprint", "archivePrefix", "version", "license")
            if k in fields]
    lines = [f"  author = {{{fields['author']}}}", f"  title  = {{{fields['title']}}}",
             "  " + ", ".join(f"{k} = {{{fields[k]}}}" for k in rest)]
    if "note" in fields:
        lines.append(f"  note   = {{{fields['note']}}}")
    return f"@{fields['type']}{{{fields['key']},\n" + ",\n".join(lines) + "}"


def bibtex() -> str:
    """The bibtex of the software and of the papers, software first, one entry after another."""
    return "\n".join(_entry(e) for e in [SOFTWARE, *PAPERS]) + "\n"
