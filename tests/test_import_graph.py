"""The house's import graph, read from the source with ``ast``: no circle, and no module imports a
layer above its own (docs: CONTRIBUTING.md, "Where things are").

Every import counts, at module level or inside a function, and so does a dynamic one
(``importlib.import_module("qlib...")``, ``__import__("qlib...")``): a function-local or dynamic
import hides an arrow from a reader but not from this test. A dynamic import whose name is not a
literal cannot be checked, so only the layers above the studies (the runner and the entry points)
may make one.
"""

from __future__ import annotations

import ast
from pathlib import Path

QLIB = Path(__file__).resolve().parents[1] / "qlib"

#: The layers, top first: a module may import its own layer and those below, never one above.
LAYERS: tuple[tuple[str, ...], ...] = (
    # the entry points: the command line, the cluster launcher, the notebook runner
    ("qlib.__main__", "qlib.distributed", "qlib.notebooks"),
    # what runs the studies: the registry, the claims table's collection, the long tier
    ("qlib.runner",),
    # what draws the studies' results
    ("qlib.plots", "qlib.explorers"),
    ("qlib.studies",),
    # a claim as data, its rows, their rendering and their power: what a study hands up
    ("qlib.claims", "qlib.claims_table", "qlib.power", "qlib.criteria"),
    # storage: the stored results, their records and the sweep cache
    ("qlib.results",),
    # the model layer: the two models and the shared base modules they stand on
    ("qlib.supermarket", "qlib.heterogeneous", "qlib", "qlib._validate", "qlib._rng", "qlib._sharding",
     "qlib._progress", "qlib._xla", "qlib.stats", "qlib.config", "qlib.simulations", "qlib.citation"),
)
#: The layers that may import a module named at run time (``importlib.import_module(name)``).
DYNAMIC_OK = LAYERS[0] + LAYERS[1]
MODEL_PACKAGES = ("qlib.supermarket", "qlib.heterogeneous")
#: The shared base modules, below everything but standing on nothing above them.
BASE_MODULES = LAYERS[-1][2:]


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


def _dynamic_name(node: ast.AST) -> str | None:
    """``"qlib.x"`` for ``importlib.import_module("qlib.x")``, ``import_module("qlib.x")`` or
    ``__import__("qlib.x")``; ``"?"`` for such a call whose name is not a literal; None otherwise."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    f = node.func
    called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    if called not in ("import_module", "__import__"):
        return None
    arg = node.args[0]
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else "?"


def _imports_of(tree: ast.AST, mod: str, is_package: bool, modules) -> tuple[set[str], bool]:
    """The qlib modules ``tree`` (module ``mod``) imports, statically or dynamically, and whether
    it makes a dynamic import whose name is not a literal."""
    out: set[str] = set()
    unresolved = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node.module or "", node.level, mod, is_package)
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        elif (name := _dynamic_name(node)) is not None:
            unresolved |= name == "?"
            names = [] if name == "?" else [name]
        else:
            continue
        for n in names:
            # the deepest qlib module the name lies in (``qlib.supermarket.chain.X`` -> its module)
            while n and n not in modules:
                n = n.rpartition(".")[0]
            if n.startswith("qlib") and n != mod:
                out.add(n)
    return out, unresolved


def _read(modules: dict[str, Path]) -> tuple[dict[str, set[str]], set[str]]:
    graph, unresolved = {}, set()
    for mod, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        graph[mod], dyn = _imports_of(tree, mod, path.name == "__init__.py", modules)
        if dyn:
            unresolved.add(mod)
    return graph, unresolved


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the qlib modules it imports (anywhere in its body, statically or by a literal
    dynamic import). ``from a import b`` imports the module ``a.b`` when there is one, else ``a``."""
    return _read(modules)[0]


def _under(mod: str, prefix: str) -> bool:
    """``mod`` is ``prefix`` or lies inside it (``"qlib"``, the package's ``__init__``, holds only itself)."""
    return mod == prefix or (prefix != "qlib" and mod.startswith(prefix + "."))


def _layer(mod: str) -> int:
    """The index in :data:`LAYERS` of the layer ``mod`` lies in (the most specific prefix wins; a
    module in none is placed at the bottom, where it may import nothing above the model). A
    package's ``__main__`` (``python -m qlib.studies.k3``) is an entry point: the top layer."""
    if mod.endswith(".__main__"):
        return 0
    best, at = -1, len(LAYERS) - 1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if _under(mod, p) and len(p) > best:
                best, at = len(p), i
    return at


def _upward(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} (layer {_layer(m)}) imports {t} (layer {_layer(t)})"
                  for m, ts in graph.items() for t in ts if _layer(t) < _layer(m))


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
    assert "qlib.studies.max_length" in graph["qlib.runner.registry"]
    assert len(graph) > 50


def test_every_module_lies_in_a_named_layer():
    """A new top-level module must be placed in :data:`LAYERS` (else it falls to the bottom)."""
    unplaced = [m for m in _modules() if not any(_under(m, p) for ps in LAYERS for p in ps)]
    assert not unplaced, unplaced
    assert not _under("qlib.newthing", "qlib") and _under("qlib", "qlib")  # the package holds only itself


def test_dynamic_imports_are_read(tmp_path):
    """The reader sees the arrows a dynamic import draws, so the layer rule below can fail on them."""
    src = ("import importlib\nfrom importlib import import_module\n"
           "def f(name):\n    importlib.import_module('qlib.studies.perfect')\n"
           "    import_module('qlib.runner.long')\n    __import__('qlib.claims')\n"
           "    return importlib.import_module(name)\n")
    modules = _modules()
    got, unresolved = _imports_of(ast.parse(src), "qlib.results.demo", False, modules)
    assert got == {"qlib.studies.perfect", "qlib.runner.long", "qlib.claims"} and unresolved
    assert len(_upward({"qlib.results.demo": got})) == 3  # all three reach above storage


def test_no_import_circle():
    cycles = _cycles(_imports(_modules()))
    assert not cycles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_module_imports_a_layer_above_its_own():
    """Statically or dynamically: storage, the claims and the studies never reach up into what runs
    or draws them, and the model layer knows nothing of caches, stores, studies or claims."""
    bad = _upward(_imports(_modules()))
    assert not bad, "imports that reach up:\n" + "\n".join(bad)


def test_only_the_runner_imports_a_module_named_at_run_time():
    _, unresolved = _read(_modules())
    bad = sorted(m for m in unresolved if not any(_under(m, p) for p in DYNAMIC_OK))
    assert not bad, "dynamic imports of a name not in the source, below the runner:\n" + "\n".join(bad)


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


def _defines(path: Path, names: set[str]) -> bool:
    tree = ast.parse(path.read_text(), filename=str(path))
    return names <= {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def test_a_study_of_plain_functions_imports_nothing_from_the_store():
    """A study that gives ``plan`` and ``assemble`` leaves the cache and the stored results to the
    runner (issue 50): it imports nothing from ``qlib.results`` (``qlib/studies/__init__.py`` still
    does, for ``long_point`` of the studies not yet converted)."""
    modules = _modules()
    graph = _imports(modules)
    plain = [m for m, p in modules.items() if _in(m, ("qlib.studies",)) and _defines(p, {"plan", "assemble"})]
    assert "qlib.studies.perfect" in plain
    bad = sorted(f"{m} imports {t}" for m in plain for t in graph[m] if _in(t, ("qlib.results",)))
    assert not bad, "a plain-function study reaches into the store:\n" + "\n".join(bad)
