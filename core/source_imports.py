"""Which modules of a package each of its modules imports, read from the sources and remembered by content.

``core.compile_cache`` stamps a module's kernels with the sources of every sibling it imports, transitively, so
every process that loads or compiles kernels (each worker, upload parser and builder) needs that graph. Parsing
the solvers' fifty modules took 0.2 CPU-s of each such process's start (``ast.parse`` builds every expression's
node). What a source imports is therefore remembered in a small JSON file beside the kernels, keyed by the
module's name and the SHA-256 of its source: a source that changes is parsed again; a memo that is missing,
unreadable or not writable only costs the parse.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

MEMO_FORMAT = 1
"""The memo file's layout version: a file of another version is ignored (and rewritten)."""


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


def _read_memo(path: Path) -> dict[str, list[str]]:
    with contextlib.suppress(OSError, ValueError):
        memo = json.loads(path.read_text())
        if isinstance(memo, dict) and memo.get("format") == MEMO_FORMAT and isinstance(memo.get("imports"), dict):
            return memo["imports"]
    return {}


def _write_memo(path: Path, imports: dict[str, list[str]]) -> None:
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
        with os.fdopen(fd, "w") as out:
            json.dump({"format": MEMO_FORMAT, "imports": imports}, out, sort_keys=True)
        os.replace(tmp, path)  # atomic: a reader sees the old or the new memo; concurrent writers: the last wins


def sibling_imports(package: str, sources: dict[str, bytes], memo: Path | None = None) -> dict[str, set[str]]:
    """Module name -> the modules of ``package`` it imports (names relative to the package), for the modules
    whose sources are given; ``memo``: the file that remembers each source's imported names by its content."""
    remembered = _read_memo(memo) if memo is not None else {}
    keys = {module: f"{module}:{hashlib.sha256(source).hexdigest()}" for module, source in sources.items()}
    current: dict[str, list[str]] = {}
    for module, key in keys.items():
        names = remembered.get(key)
        current[key] = names if isinstance(names, list) else imported_names(package, module, sources[module])
    if memo is not None and current != remembered:
        _write_memo(memo, current)  # only the current sources' entries: the file does not grow with old ones
    return {module: siblings_named(current[key], set(sources)) for module, key in keys.items()}
