"""`hinge compile`: the state of this machine's kernel caches (core/compile_cache.py), and their build, for a person
or as JSON."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

from core.compile_cache import CompileUnits, target_key


def describe(sets: dict[str, CompileUnits]) -> dict:
    """The state of the kernel sets in this machine's cache: compile target, cache folders, units."""
    state: dict = {"target": json.loads(target_key()), "caches": {}, "units": {}}
    for package, kernel_set in sets.items():
        state["caches"][package] = str(kernel_set.units[0].cache_dir())
        state["units"].update(zip((unit.name for unit in kernel_set.units), kernel_set.status().values()))
    return state


def show(state: dict) -> None:
    """Print a state of ``describe`` (plus ``solvers_ready``) for a person."""
    target = state["target"]
    print(f"compile target: numba {target[0]}, Python {'.'.join(map(str, target[1]))}, CPU {target[2][1]}")
    for package, folder in state["caches"].items():
        print(f"cache of {package}: {folder}")
    for name, info in state["units"].items():
        how = f"{info['seconds']:.1f} s to compile" if info["seconds"] is not None else ""
        print(f"  {name:<14} {'built' if info['built'] else 'missing':<8} {how}")
    if "solvers_ready" in state:
        print(f"solvers ready: {', '.join(state['solvers_ready']) or 'none'}")


def run_command(sets: dict[str, CompileUnits], build: bool, extra: Callable[[], dict] | None = None) -> dict:
    """The body of `hinge compile` for these sets: seed and compile what is missing when ``build``, then the
    state (with ``extra()`` merged in)."""
    if build:
        for kernel_set in sets.values():
            kernel_set.seed()
            kernel_set.build_missing(
                on_built=lambda unit, seconds: print(f"compiled {unit.name} in {seconds:.1f} s", file=sys.stderr)
            )
    state = describe(sets)
    if extra is not None:
        state.update(extra())
    return state
