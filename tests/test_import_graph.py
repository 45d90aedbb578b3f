"""Imports run one way (the house style): no cycle among the modules of core/, service/ and worker/;
core/ imports neither service/ nor worker/; service/ (the HTTP front end) never imports worker/ and
worker/ never imports service/ (what both use is in core/); nothing the workers import pulls in FastAPI.

The graph is read from the source with ``ast`` (every import statement, those inside functions
included: a lazy import is still a dependency), so the test runs nothing of the code it checks.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.service  # the kinds of tests: tests/conftest.py, TEST_KINDS

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "service", "worker")
WEB_FRAMEWORKS = ("fastapi", "starlette", "uvicorn")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """Every module ``path`` imports: modules of the tree by their full name, others by their top package."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([base] if base else []))
            # ``from package import module`` imports the module; ``from module import name`` the module
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target not in known and "." in target:
                target = target.rsplit(".", 1)[0]
            found.add(target if target in known else target.split(".")[0])
    found.discard(name)
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the modules of core/, service/ and worker/ it imports (and the outside top-level packages)."""
    modules = _modules()
    return {name: _imports(path, name, set(modules)) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in graph.get(node, ()):
            if successor not in graph:
                continue
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def _reachable(graph: dict[str, set[str]], starts: set[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(starts)
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        todo.extend(graph.get(node, ()))
    return seen


def test_the_graph_is_read():
    graph = import_graph()
    assert "worker.runtime.jobs" in graph and "service.api.app" in graph
    assert "core.config" in graph["worker.runtime.jobs"]
    assert "fastapi" in graph["service.api.app"]


def test_no_import_cycle():
    assert _cycles(import_graph()) == []


def test_service_never_imports_worker():
    assert _imports_between(import_graph(), ("service",), ("worker",)) == []


def _imports_between(graph: dict, source: tuple[str, ...], target: tuple[str, ...]) -> list[str]:
    def inside(name: str, packages: tuple[str, ...]) -> bool:
        return any(name == package or name.startswith(package + ".") for package in packages)

    return sorted(
        f"{module} -> {imported}"
        for module, imported_set in graph.items()
        if inside(module, source)
        for imported in imported_set
        if inside(imported, target)
    )


def test_worker_never_imports_service_and_core_imports_neither():
    graph = import_graph()
    assert _imports_between(graph, ("worker",), ("service",)) == []
    assert _imports_between(graph, ("core",), ("service", "worker")) == []
    assert "core.schemas.solver_params" in graph and "core.storage.jobs" in graph, "core/ is read"


def test_what_the_workers_import_has_no_web_framework():
    graph = import_graph()
    from_worker = _reachable(graph, {module for module in graph if module.startswith("worker")})
    assert not from_worker & set(WEB_FRAMEWORKS), sorted(
        module for module in from_worker if set(graph.get(module, ())) & set(WEB_FRAMEWORKS)
    )


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


SOLVER_IMPORTS = {"numpy", "scipy", "numba", "llvmlite", "core.stop_reason"}
"""What worker/solvers/ may import besides the standard library and each other (the house style: numpy,
scipy and numba; llvmlite is numba's code generator; core.stop_reason the one enum they share with the schemas).
The package's __init__ also installs the kernel cache's locator (core.compile_cache)."""


def test_the_solvers_import_only_numpy_scipy_numba():
    import sys

    graph = import_graph()
    outside = sorted(
        f"{module} -> {imported}"
        for module, imported_set in graph.items()
        if module.startswith("worker.solvers")
        for imported in imported_set
        if not imported.startswith("worker.solvers")
        and imported not in SOLVER_IMPORTS
        and imported not in sys.stdlib_module_names
        and (module, imported) != ("worker.solvers", "core.compile_cache")
    )
    assert outside == []
    reached = _reachable(graph, {module for module in graph if module.startswith("worker.solvers")})
    assert not reached & {"pydantic", "redis", "httpx", "rq"}
