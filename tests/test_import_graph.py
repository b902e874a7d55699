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


# --------------------------------------------------------------------------- private stays private

#: Private names the kernel's modules still share among themselves: chain.py, loop.py, events.py
#: and observers.py are being reworked under issue 43, which renames them; nothing may join.
KERNEL_PRIVATE = {
    ("qlib.supermarket.chain", "_events"), ("qlib.supermarket.chain", "_with_norm"),
    ("qlib.supermarket.chain", "_local_advance"), ("qlib.supermarket.chain", "_LOOP_BYTES"),
    ("qlib.supermarket.loop", "_update_log_g"), ("qlib.supermarket.loop", "_with_norm"),
    ("qlib.supermarket.loop", "_observe"), ("qlib.supermarket.observers", "_log_reduced"),
    ("qlib.supermarket.observers", "_recompute_where_changed"),
}


def _private_imports(modules: dict[str, Path]) -> set[tuple[str, str]]:
    """(module, name) for every ``from qlib.x import _name`` whose ``_name`` is not a module."""
    out = set()
    for mod, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom):
                base = _resolve(node.module or "", node.level, mod, path.name == "__init__.py")
                if not base.startswith("qlib"):
                    continue
                for a in node.names:
                    private = a.name.startswith("_") and not a.name.startswith("__")
                    if private and f"{base}.{a.name}" not in modules:
                        out.add((mod, a.name))
    return out | _private_attributes(modules)


def _private_attributes(modules: dict[str, Path]) -> set[tuple[str, str]]:
    """(module, name) for every ``alias._name`` read through an imported qlib module
    (``from qlib.supermarket import simulation as S`` ... ``S._capacity``)."""
    out = set()
    for mod, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        aliases = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _resolve(node.module or "", node.level, mod, path.name == "__init__.py")
                aliases |= {a.asname or a.name for a in node.names if f"{base}.{a.name}" in modules}
            elif isinstance(node, ast.Import):
                aliases |= {a.asname for a in node.names if a.asname and a.name in modules}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and node.attr.startswith("_")
                    and not node.attr.startswith("__")):
                out.add((mod, node.attr))
    return out


def test_no_private_name_is_imported_from_another_module():
    bad = _private_imports(_modules()) - KERNEL_PRIVATE
    assert not bad, "private names imported from another module (rename what is shared):\n" + "\n".join(
        f"{m} imports {n}" for m, n in sorted(bad))


def _local_qlib_imports(modules: dict[str, Path]) -> list[tuple[str, int, str, bool]]:
    """(module, line, import, has a comment) for every import of a qlib module inside a function."""
    out = []
    for mod, path in modules.items():
        text = path.read_text()
        lines = text.splitlines()
        for f in ast.walk(ast.parse(text, filename=str(path))):
            if not isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(f):
                if isinstance(node, ast.ImportFrom):
                    name = _resolve(node.module or "", node.level, mod, path.name == "__init__.py")
                elif isinstance(node, ast.Import):
                    name = node.names[0].name
                else:
                    continue
                if name.startswith("qlib"):
                    here = lines[node.lineno - 1: node.end_lineno]
                    top = node.lineno - 2  # the line above this import and the imports right above it
                    while top >= 0 and lines[top].strip().startswith(("from ", "import ")):
                        top -= 1
                    above = lines[top] if top >= 0 else ""
                    why = any("#" in ln for ln in here) or above.strip().startswith("#")
                    out.append((mod, node.lineno, ast.unparse(node), why))
    return out


def test_every_function_local_import_of_qlib_says_why():
    """A function-local import hides an arrow: it stays only with a comment that says why (a heavy
    or optional dependency kept off ``import qlib``, the command line's lazy commands)."""
    bad = [f"{m}:{ln}: {imp}" for m, ln, imp, why in _local_qlib_imports(_modules()) if not why]
    assert not bad, "function-local imports without a comment:\n" + "\n".join(bad)
