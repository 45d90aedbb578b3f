"""Which modules of a package each of its modules imports, read from the sources, remembered by content.

``core.compile_cache`` stamps a module's kernels with the sources of every sibling it imports, transitively, so
every process that loads or compiles kernels (each worker, upload parser and builder) needs that graph. Parsing
the solvers' fifty modules took 0.2 CPU-s of each such process's start (``ast.parse`` builds every expression's
node). What a source imports is therefore remembered by the cache (a memo file beside the kernels) under the
module's name and the SHA-256 of its source: a source that changes is parsed again. This module only parses and
keys; the cache reads and writes the memo.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterator, Mapping

MEMO_FORMAT = 1
"""The layout version of the remembered entries (``sibling_imports``): a memo of another version is not used."""


def _import_nodes(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, at any depth: imports are statements, so only statement lists
    (bodies, else branches, handlers, match cases) are followed, not the expressions."""
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
            continue
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(node, name, None)
            if isinstance(inner, list):
                stack.extend(inner)


def imported_names(package: str, module: str, source: bytes) -> list[str]:
    """The dotted names, relative to ``package``, that ``module``'s source imports from the package, anywhere in
    the file (``from package.a import b`` gives ``a.b``: a module or a name in one; relative imports resolved
    against ``module``, a name relative to the package)."""
    names: list[str] = []
    prefix = package + "."
    for node in _import_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name[len(prefix) :] for alias in node.names if alias.name.startswith(prefix)]
            continue
        base = node.module or ""
        if node.level:  # relative: from . import x, from .x import y (``module`` is a module, not a package)
            anchor = module.split(".")[: -node.level] if node.level <= module.count(".") + 1 else []
            base = ".".join([*anchor, *([base] if base else [])])
        elif base == package:
            base = ""
        elif base.startswith(prefix):
            base = base[len(prefix) :]
        else:
            continue
        names += [f"{base}.{alias.name}" if base else alias.name for alias in node.names]
    return names


def siblings_named(names: list[str], siblings: set[str]) -> set[str]:
    """The package's modules that ``names`` (``imported_names``) are in: for each, the longest of its dotted
    prefixes that is a module (``smo.cache.Cache`` -> ``smo.cache``; a subpackage's ``__init__`` is its own
    name, ``smo``)."""
    found = set()
    for dotted in names:
        parts = dotted.split(".")
        while parts and ".".join(parts) not in siblings:
            parts.pop()
        if parts:
            found.add(".".join(parts))
    return found


def sibling_imports(
    package: str, sources: dict[str, bytes], remembered: Mapping[str, object] | None = None
) -> tuple[dict[str, set[str]], dict[str, list[str]]]:
    """Module name -> the modules of ``package`` it imports (names relative to the package), for the modules
    whose sources are given, and the entries to remember for them ({"module:sha256 of its source": imported
    names}); ``remembered``: such entries from before, used for the sources they match, the others parsed."""
    keys = {module: f"{module}:{hashlib.sha256(source).hexdigest()}" for module, source in sources.items()}
    current: dict[str, list[str]] = {}
    for module, key in keys.items():
        names = (remembered or {}).get(key)
        current[key] = names if isinstance(names, list) else imported_names(package, module, sources[module])
    return {module: siblings_named(current[key], set(sources)) for module, key in keys.items()}, current
