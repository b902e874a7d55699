"""The house's import graph, read from the source with ``ast``: no circle, and the model layer
never imports what sits above it (docs: CONTRIBUTING.md, "Where things are").

Every import counts, at module level or inside a function: a function-local import hides an
arrow from a reader but not from this test.
"""

from __future__ import annotations

import ast
from pathlib import Path

QLIB = Path(__file__).resolve().parents[1] / "qlib"

# The layers above the model: what stores, judges, draws or explains the simulations.
ABOVE = ("qlib.cache", "qlib.results", "qlib.studies", "qlib.claims", "qlib.claims_table", "qlib.plots",
         "qlib.explorers", "qlib.notebooks")
# The model layer: the two models and the shared base modules they stand on.
MODEL_PACKAGES = ("qlib.supermarket", "qlib.heterogeneous")
BASE_MODULES = ("qlib._validate", "qlib._rng", "qlib._sharding", "qlib._progress", "qlib._xla", "qlib.stats",
                "qlib.config", "qlib.distributed", "qlib.simulations")


def _module_name(path: Path) -> str:
    parts = path.relative_to(QLIB.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(QLIB.rglob("*.py"))}


def _resolve(name: str, level: int, here: str, is_package: bool) -> str:
    """The absolute name of a (possibly relative) import in module ``here``."""
    if level == 0:
        return name
    base = here.split(".") if is_package else here.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the qlib modules it imports (anywhere in its body). ``from a import b`` imports
    the module ``a.b`` when there is one, else ``a``."""
    graph: dict[str, set[str]] = {}
    for mod, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        out: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(node.module or "", node.level, mod, path.name == "__init__.py")
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            for n in names:
                # the deepest qlib module the name lies in (``qlib.supermarket.chain.X`` -> its module)
                while n and n not in modules:
                    n = n.rpartition(".")[0]
                if n.startswith("qlib") and n != mod:
                    out.add(n)
        graph[mod] = out
    return graph


def _in(mod: str, prefixes: tuple[str, ...]) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in prefixes)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_graph_is_read():
    graph = _imports(_modules())
    assert "qlib.supermarket.chain" in graph["qlib.supermarket.simulation"]
    assert len(graph) > 50


def test_no_import_circle():
    cycles = _cycles(_imports(_modules()))
    assert not cycles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_model_layer_imports_nothing_above_it():
    graph = _imports(_modules())
    bad = sorted(f"{m} imports {t}" for m, ts in graph.items()
                 if _in(m, MODEL_PACKAGES + BASE_MODULES) for t in ts if _in(t, ABOVE))
    assert not bad, "the model layer reaches up:\n" + "\n".join(bad)
