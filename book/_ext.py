"""The book's own Sphinx extension (book/conf.py): the docstrings read as their authors wrote them,
and every cross-reference of the API pages resolved or deliberately plain.

- qlib's docstrings are plain text with reST roles and Google sections, not reST throughout:
  ``|x|`` is an absolute value, not a substitution; an attribute's ``#:`` comment and a
  "Returns:" section are prose ("The range excludes d/2: ...", "mean, standard error: ..."),
  where napoleon would read the words before a colon as a type (the types are the annotations').
- ``nitpicky``: a reference to another project's object (NumPy, JAX, the standard library...)
  cannot be linked offline (intersphinx fetches the inventories over the network), so it is
  plain text by design (:data:`EXTERNAL`). A short name (``:data:`CLAIMS```) resolves to the object
  of that name in the referring module or class, or else the unique documented one of that name.
  A reference to an object of qlib that exists but that the reference does not document (a
  private module, an internal one behind a package's public names) stays plain text. Anything
  else, a name that does not exist, is a warning, so an error under ``-W``.
"""

from __future__ import annotations

import importlib
import re

#: other projects' objects: not linkable without the network
EXTERNAL = r"(numpy|np|jax|jnp|pandas|pd|matplotlib|ipywidgets|IPython|scipy|collections|typing|pathlib|os|" \
           r"datetime|fractions|concurrent|contextlib|dataclasses|enum|io|subprocess|tqdm|nbformat|traitlets)(\..*)?"

_LITERAL = re.compile(r"(``.*?``|`[^`]*`)")
_BAR = re.compile(r"(?<!\\)\|")


def _escape_bars(line: str) -> str:
    """``|x|`` outside inline literals and roles is an absolute value: escape its bars."""
    parts = _LITERAL.split(line)
    return "".join(p if i % 2 else _BAR.sub(r"\\|", p) for i, p in enumerate(parts))


_SHORT_ROLE = re.compile(r":(func|class|data|attr|meth|obj|exc|const):`(~?)([A-Za-z_]\w*)`")


def _plain_text(app, what, name, obj, options, lines):
    # a short name is looked up where the object is defined (a function documented under its
    # package's name refers to its own module's CoupledPaths), then where it is documented
    homes = [getattr(obj, "__module__", None) or "", getattr(obj, "__qualname__", "")]
    homes = [".".join(h for h in homes if h)] if homes[0] else []
    homes += [name]
    scopes = [p for h in homes for p in _prefixes(h, None)]

    def qualify(m):
        for scope in scopes:
            if _exists(f"{scope}.{m.group(3)}"):
                return f":{m.group(1)}:`~{scope}.{m.group(3)}`"
        return m.group(0)

    for i, line in enumerate(lines):
        lines[i] = _SHORT_ROLE.sub(qualify, _escape_bars(line))


def _resolve(app, env, node, contnode):
    """A short or internal qlib name (see the module's docstring); None leaves it to Sphinx."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.")
    if re.fullmatch(EXTERNAL, target):
        return contnode
    domain = env.get_domain("py")
    module = node.get("py:module") or ""
    objects = domain.objects
    if "." not in target:
        prefixes = list(_prefixes(module, node.get("py:class")))
        for prefix in prefixes:
            if f"{prefix}.{target}" in objects:
                return _link(app, env, node, contnode, f"{prefix}.{target}")
        found = [k for k in objects if k.endswith("." + target)]
        if len(found) == 1:
            return _link(app, env, node, contnode, found[0])
        if any(_exists(f"{prefix}.{target}") for prefix in prefixes):
            return contnode
    elif target.startswith("qlib.") and _exists(target):
        return contnode
    return None


def _exists(dotted: str) -> bool:
    """Whether ``dotted`` names an object of qlib: a module, or an attribute reached from one."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for p in parts[i:]:
                obj = getattr(obj, p)
        except AttributeError:
            return False
        return True
    return False


def _prefixes(module: str, cls: str | None):
    if cls:
        yield f"{module}.{cls}"
    parts = module.split(".")
    while parts:
        yield ".".join(parts)
        parts.pop()


def _link(app, env, node, contnode, full):
    entry = env.get_domain("py").objects[full]
    return _make_refnode(app, node["refdoc"], entry.docname, entry.node_id, contnode, full)


def _make_refnode(app, fromdoc, todoc, anchor, contnode, title):
    from sphinx.util.nodes import make_refnode

    return make_refnode(app.builder, fromdoc, todoc, anchor, contnode, title)


def _returns_as_prose(self, preprocess_types=False):
    lines = self._dedent(self._consume_to_next_section())
    return [("", "", self.__class__(lines, self._config).lines())] if lines else []


def _attribute_as_prose(self):
    return self.__class__(self._dedent(self._consume_to_end()), self._config).lines()


def setup(app):
    from sphinx.ext.napoleon.docstring import GoogleDocstring  # here: the tests import this module

    # napoleon's readings of a leading "words:" as a type, turned off (see the module's docstring)
    GoogleDocstring._consume_returns_section = _returns_as_prose
    GoogleDocstring._parse_attribute_docstring = _attribute_as_prose
    # MathJax on every page, not only on those with math: the sidebar's titles have some ($k$)
    app.set_html_assets_policy("always")
    app.connect("autodoc-process-docstring", _plain_text, priority=100)  # before napoleon (500)
    app.connect("missing-reference", _resolve)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

