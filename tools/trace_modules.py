"""Which qlib modules a study's entry point passes through, in order (issue 50).

A profiler hook (:func:`sys.setprofile`) follows every Python call and return while
``max_length.run("full")`` runs in default mode (full parameters, every array read from the stored
results, nothing computed when they are all there; ``--mode smoke`` with no results and an empty
cache computes everything, down to the kernel), and records the qlib module the innermost qlib
frame belongs to each time it changes. It prints:

- the modules crossed (distinct qlib modules entered);
- the returns to a module already left (a module entered again, by a call or a return, after the
  trace had moved to another one), and how many distinct (from, to) moves they are;
- the climbs (a call from a module into a module of a higher layer, ``LAYERS`` of
  ``tests/test_import_graph.py``: a callback up through the layers);
- the calls into the store (``qlib.results``) from outside it;
- with ``--modules``, each module's entries and the whole sequence.

Run it on this checkout, or with ``--code`` on another one's ``qlib/`` (the editable install's
finder is set aside so that the other code is imported; the imports happen before the hook is set,
so only the run is traced)::

    QLIB_CACHE=$(mktemp -d) python tools/trace_modules.py                       # this checkout
    git archive main qlib | tar -x -C /tmp/main-code
    QLIB_CACHE=$(mktemp -d) QLIB_RESULTS_DIR=$PWD/results \\
        python tools/trace_modules.py --code /tmp/main-code                    # main's code

An empty ``QLIB_CACHE`` makes every read go to the stored results, as on a fresh clone.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from pathlib import Path


def _layers() -> tuple[tuple[str, ...], ...]:
    """``LAYERS`` as ``tests/test_import_graph.py`` of this checkout writes it (read, not imported)."""
    test = Path(__file__).resolve().parents[1] / "tests" / "test_import_graph.py"
    for node in ast.parse(test.read_text()).body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
            if isinstance(target, ast.Name) and target.id == "LAYERS":
                return ast.literal_eval(node.value)
    raise LookupError(f"no LAYERS in {test}")


def layer_of(mod: str, layers) -> int:
    """The index of the layer ``mod`` lies in (top first; the most specific prefix wins)."""
    best, at = -1, len(layers) - 1
    for i, prefixes in enumerate(layers):
        for p in prefixes:
            if (mod == p or (p != "qlib" and mod.startswith(p + "."))) and len(p) > best:
                best, at = len(p), i
    return at


def _qlib_module(frame) -> str | None:
    """The module of the innermost qlib frame at or above ``frame`` (None outside qlib)."""
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name == "qlib" or name.startswith("qlib."):
            return name
        frame = frame.f_back
    return None


def trace(fn) -> list[tuple[str, str]]:
    """Run ``fn()`` under the hook. Returns the sequence of (how, module): ``how`` is "call" or
    "return", the event that moved the trace into ``module``."""
    seq: list[tuple[str, str]] = []

    def hook(frame, event, arg):
        if event == "call":
            mod = _qlib_module(frame)
        elif event == "return":
            mod = _qlib_module(frame.f_back)
        else:  # C calls: they stay in the module that made them
            return
        if mod is not None and (not seq or seq[-1][1] != mod):
            seq.append((event, mod))

    sys.setprofile(hook)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return seq


def counts(seq: list[tuple[str, str]], layers, store: str = "qlib.results") -> dict:
    """Modules crossed; returns to a module already left (every one, and the distinct (from, to)
    moves among them); calls up to a higher layer; calls into the store (``store``) from outside it.
    """
    seen: set[str] = set()
    again, again_moves, climbs, into_store = 0, set(), 0, 0
    for i, (how, mod) in enumerate(seq):
        prev = seq[i - 1][1] if i else None
        if mod in seen:
            again += 1
            again_moves.add((prev, mod))
        seen.add(mod)
        if how == "call" and prev is not None and layer_of(mod, layers) < layer_of(prev, layers):
            climbs += 1
        inside = lambda m: m == store or m.startswith(store + ".")  # noqa: E731
        if how == "call" and inside(mod) and prev is not None and not inside(prev):
            into_store += 1
    return {"modules": len(seen), "returns": again, "return_moves": len(again_moves), "climbs": climbs,
            "store_calls": into_store, "transitions": len(seq)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modules", action="store_true",
                    help="also print each module's entries and the sequence")
    ap.add_argument("--mode", default="full", choices=("full", "smoke"),
                    help="full (default mode: read from the stored results) or smoke (with "
                         "QLIB_RESULTS_DIR=off and an empty QLIB_CACHE: computed, down to the kernel)")
    ap.add_argument("--study", default="max_length", help="the study traced (a module of qlib.studies)")
    ap.add_argument("--code", help="a folder holding another checkout's qlib/ to trace instead of this one")
    a = ap.parse_args(argv)
    if a.code:
        sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
        sys.path.insert(0, str(Path(a.code).resolve()))
    from qlib import configure_xla

    configure_xla()
    import importlib

    # imported before the hook: only the run is traced
    study = importlib.import_module(f"qlib.studies.{a.study}")
    try:  # the entry point: the runner's where the checkout has one (issue 50), else the study's own
        from qlib.runner import run

        entry, call = "qlib.runner.run", lambda: run(study, a.mode, progress=False)
    except ImportError:
        entry, call = f"{a.study}.run", lambda: study.run(a.mode, progress=False)
    print(f"[trace] {Path(importlib.import_module('qlib').__file__).parent}: {entry}", flush=True)
    seq = trace(call)
    c = counts(seq, _layers())
    print(f"{a.study} ({a.mode}): {c['modules']} modules crossed; {c['returns']} returns to a module "
          f"already left ({c['return_moves']} distinct moves); {c['climbs']} calls up to a higher layer; "
          f"{c['store_calls']} calls into qlib.results from outside it ({c['transitions']} transitions)")
    if a.modules:
        for mod, k in Counter(m for _, m in seq).most_common():
            print(f"  {k:5d}  {mod}")
        print(" -> ".join(m.removeprefix("qlib.") for _, m in seq))
    return 0


if __name__ == "__main__":
    sys.exit(main())
