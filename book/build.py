#!/usr/bin/env python
"""Build the book (``make book``): stage what the repository stores, then Sphinx, warnings as errors.

The pages are the files themselves, copied into ``build/book/src`` with the same relative layout
(``docs/``, ``notebooks/``, ``figures/``, ``benchmarks/README.md``, ``README.md`` beside the book's
own ``index.md`` and ``reference.md``), so every relative link of theirs resolves in the site as it
does on GitHub. Copies rather than symbolic links: Sphinx and MyST resolve a link from a linked
file's real path, outside the source folder. Nothing is executed (book/conf.py). The site is
``build/book/html`` (ignored by git); ``--check`` also runs nothing else, it only builds.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

BOOK = Path(__file__).resolve().parent
ROOT = BOOK.parent
OUT = ROOT / "build" / "book"

#: what the book publishes, as globs relative to the repository root
PAGES = ["README.md", "docs/*.md", "notebooks/[0-9][0-9]_*.ipynb", "figures/claims.md", "figures/*.png",
         "benchmarks/README.md"]


def stage(src: Path) -> None:
    shutil.rmtree(src, ignore_errors=True)
    for pattern in PAGES:
        for f in sorted(ROOT.glob(pattern)):
            (src / f.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, src / f.relative_to(ROOT))
    for f in ("index.md", "reference.md"):
        shutil.copy2(BOOK / f, src / f)


def main(argv: list[str]) -> int:
    from sphinx.cmd.build import build_main

    t0 = time.perf_counter()
    src = OUT / "src"
    stage(src)
    # -W: a warning fails the build; -n: nitpicky (every cross-reference of the API pages resolves);
    # --keep-going: every warning is reported, not only the first; -E: no stale environment
    code = build_main(["-b", "html", "-W", "-n", "--keep-going", "-E", "-q", "-c", str(BOOK),
                       "-d", str(OUT / "doctrees"), str(src), str(OUT / "html"), *argv])
    print(f"[book] {'built' if code == 0 else 'FAILED'}: {OUT / 'html' / 'index.html'} "
          f"({time.perf_counter() - t0:.0f} s)", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
