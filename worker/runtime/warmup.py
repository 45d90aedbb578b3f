"""The solvers' kernels, in units, and how a worker gets them: dcd first, the rest in the background.

Compiling every solver's kernels cold takes about 90 s of one core (smo alone about 40 s); loading
them from the cache takes under a second. So a worker does not wait for all of them:

1. It compiles (or loads) ``dcd``'s own unit, C-SVC, what most jobs use (``first_units``), then takes jobs;
   dcd's other formulations (logistic regression, SVR, one-class, L1: three quarters of its compile) are the
   unit ``dcd_formulations``, built in the background like the other solvers' (``SolverSpec.formulation_units``).
2. A builder process (``run_builder``, at the lowest CPU priority, so jobs and requests go first)
   compiles the units the machine's cache lacks, sharing them with the other workers' builders through
   the cache's unit locks (``core.compile_cache``): two workers on two cores compile two units at a
   time and never the same one.
3. A job whose solver (or formulation) is not warm in the worker yet makes it warm before training
   (``ensure_solver``, with the job's params): loaded from the cache if it was built, compiled there if nobody has started it
   (the job's solver goes first: the order follows what the queue holds), or waited for while another
   process compiles it; the job says ``waiting for compilation`` in ``progress.phase`` meanwhile.
4. An idle worker loads every solver the cache holds (``load_built``), so a job rarely waits at all.

The heartbeat (``worker.runtime.heartbeat``) reads the units' markers through ``kernel_plan`` to tell
``/readyz`` and ``hinge serve`` which solvers are ready and how long the rest should take.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
from collections.abc import Callable

from core.compile_cache import CompileUnit, CompileUnits, UnitsStopped, read_marker
from core.processes import die_with_parent
from core.solvers import SOLVERS as SOLVER_SPECS

log = logging.getLogger("hinge.worker")

PACKAGE = "worker.solvers"


def _unit(name: str, requires: tuple[str, ...], reference_s: float) -> CompileUnit:
    return CompileUnit(name, PACKAGE, name, f"{PACKAGE}.{name}:warm_up", requires, reference_s)


SHARED_UNITS = (
    _unit("common", (), 0.5),
    _unit("kernels", (), 2.4),
    _unit("reduced_qp", (), 0.8),
    _unit("data_passes", (), 14.8),
    _unit("cut_store", (), 6.8),
    _unit("ranking", (), 0.7),
    _unit("line_search", ("data_passes",), 2.3),
    _unit("ocas_multiclass", ("reduced_qp", "line_search", "cut_store"), 1.6),
    CompileUnit("dcd_formulations", PACKAGE, "dcd", f"{PACKAGE}.dcd:warm_up_formulations", ("dcd",), 16.0),
)
"""The units of modules several solvers call; ``requires`` names the units whose kernels a unit's warm-up also
compiles. reference_s: cold compile seconds measured on a quiet 2-core machine (the estimate before any is
measured; last measured 2026-11-30, one builder, 128 s for every unit: `python -m worker.runtime.warmup --build` on an
empty `HINGE_KERNEL_CACHE_DIR`; dcd's two scaled by 2026-12-01's cut of their array variants, 0.53x and 0.76x)."""

WARM_UP_ORDER = tuple(SOLVER_SPECS)
"""Solver names (``core.solvers``), in the order a worker makes them warm."""
FIRST = "dcd"
"""The solver a worker makes warm before it takes any job."""


def _solver_unit(spec) -> CompileUnit:
    """A solver's own unit (its spec's ``compile_s`` and ``compile_units``): its solve module's ``warm_up``."""
    module = spec.solve.split(":")[0]
    return CompileUnit(
        spec.name, PACKAGE, module.removeprefix(PACKAGE + "."), f"{module}:warm_up", spec.compile_units, spec.compile_s
    )


def _build_order() -> tuple[CompileUnit, ...]:
    """Every unit, in build order: dcd's own first (most jobs use it), then the solvers' units and their
    formulations' (``SolverSpec.formulation_units``) by their compile seconds, longest first, each after the units
    it requires. smo, the longest (30% of the whole compile), started early on one builder while the others take
    the rest: every solver is ready sooner."""
    solvers = [SOLVER_SPECS[name] for name in WARM_UP_ORDER if SOLVER_SPECS[name].compile_s is not None]
    every = CompileUnits((*SHARED_UNITS, *(_solver_unit(spec) for spec in solvers)))
    largest = [every.unit(spec.name) for spec in solvers]
    largest += [every.unit(name) for spec in solvers for name in spec.formulation_units]
    largest.sort(key=lambda unit: (unit.name != FIRST, -unit.reference_s))
    return tuple(every.closure([unit.name for unit in largest] + [unit.name for unit in SHARED_UNITS]))


UNITS = _build_order()
"""Every unit, in build order (``_build_order``)."""

KERNELS = CompileUnits(UNITS)
"""This process's view of the units (what it has loaded)."""


def _own(solver: str) -> list[str]:
    """The solver's own unit, as a list: none for a solver without numba kernels."""
    return [solver] if SOLVER_SPECS[solver].compile_s is not None else []


def _needed(solver: str, params=None) -> list[str]:
    """The units a job of ``solver`` with ``params`` (the model of its params schema) needs beyond the shared
    ones: its own, and its formulations' when the spec says the job uses them; ``params`` None: every one."""
    spec = SOLVER_SPECS[solver]
    uses = params is None or (spec.uses_formulation_units is not None and spec.uses_formulation_units(params))
    return _own(solver) + (list(spec.formulation_units) if uses else [])


def solver_units(solver: str) -> list[CompileUnit]:
    """Every unit a solver's jobs may need (its own, its spec's ``compile_units`` and ``formulation_units``),
    requirements first: the solver is ready once they are all built."""
    return KERNELS.closure(_needed(solver))


def first_units() -> list[CompileUnit]:
    """The units a worker makes warm before it takes jobs: ``FIRST``'s own (dcd's C-SVC), not its formulations."""
    return KERNELS.closure(_own(FIRST))


def ensure_solver(
    solver: str,
    params=None,
    *,
    should_stop: Callable[[], bool] | None = None,
    on_wait: Callable[[CompileUnit], None] | None = None,
) -> dict[str, float]:
    """Make the kernels of ``solver`` warm in this process (see the module docstring): those a job with ``params``
    (the model of the solver's params schema) needs, every formulation's when None; returns the units compiled
    here and their seconds. Raises UnitsStopped when ``should_stop()`` turns true while waiting."""
    return _ensure(_needed(solver, params), should_stop=should_stop, on_wait=on_wait)


def ensure_first() -> dict[str, float]:
    """Make ``first_units`` warm in this process (a worker, before it takes jobs); as ``ensure_solver``."""
    return _ensure([unit.name for unit in first_units()])


def _ensure(names: list[str], **waiting) -> dict[str, float]:
    """``KERNELS.ensure`` of the units ``names`` (``waiting``: its should_stop and on_wait), each compile logged."""
    compiled = KERNELS.ensure(names, **waiting)
    for name, seconds in compiled.items():
        log.info("compiled %s in %.1f s", name, seconds)
    return compiled


def loaded_solvers() -> list[str]:
    """Solvers whose kernels are warm in this process."""
    return [solver for solver in WARM_UP_ORDER if all(unit.name in KERNELS.loaded for unit in solver_units(solver))]


def built_solvers() -> list[str]:
    """Solvers whose kernels this machine's cache holds."""
    return [solver for solver in WARM_UP_ORDER if all(KERNELS.built(unit) for unit in solver_units(solver))]


def load_built() -> list[str]:
    """Load every solver the cache holds and this process has not loaded (an idle worker's chore);
    returns the solvers loaded."""
    loaded = []
    for solver in WARM_UP_ORDER:
        units = solver_units(solver)
        if all(unit.name in KERNELS.loaded for unit in units) or not all(KERNELS.built(unit) for unit in units):
            continue
        try:
            ensure_solver(solver, should_stop=lambda: True)  # never waits: a unit being rebuilt is left for later
        except UnitsStopped:
            continue
        loaded.append(solver)
    return loaded


def warm_up_all() -> dict[str, float]:
    """Make every solver warm in this process (compiling what the cache lacks); returns seconds per solver."""
    seconds = {}
    for solver in WARM_UP_ORDER:
        start = time.perf_counter()
        ensure_solver(solver)
        seconds[solver] = time.perf_counter() - start
    return seconds


# -- what the heartbeat reports --------------------------------------------------------------------


def kernel_plan() -> dict:
    """What the heartbeat needs to tell, without numba, which solvers this machine has built and how long the
    rest should take: ``{"units": {unit: {"marker", "building", "reference_s"}}, "solvers": {solver: [units]},
    "own": {solver: [units of its default formulation]}, "past_slowdown"}``. ``past_slowdown``: measured over
    reference compile seconds of the units this machine
    compiled for an earlier version of the code (None if it never compiled any)."""
    past = [(seconds, unit.reference_s) for unit in UNITS if (seconds := unit.measured_s())]
    return {
        "units": {
            unit.name: {
                "marker": str(unit.marker()),
                "building": str(unit.building_path()),
                "failed": str(unit.failed_path()),
                "reference_s": unit.reference_s,
            }
            for unit in UNITS
        },
        "solvers": {solver: [unit.name for unit in solver_units(solver)] for solver in WARM_UP_ORDER},
        "own": {solver: [unit.name for unit in KERNELS.closure(_own(solver))] for solver in WARM_UP_ORDER},
        "past_slowdown": sum(s for s, _ in past) / sum(r for _, r in past) if past else None,
    }


PRIOR_REFERENCE_S = 20.0
"""The weight, in reference compile seconds, of the prior slowdown against those measured (``kernel_state``). A first
run printed "about 64 s", then 128, 256 and 32 s as small units (common, 0.5 reference seconds, compiled in 2-3 s
while the API and the workers started) set the slowdown alone; with this weight the first large unit (dcd, 24 s)
moves the estimate most of the way to what it measures."""


def kernel_state(plan: dict, cores: int, builders: int, since: float) -> dict:
    """From the markers: ``{"ready": [solvers], "left": [solvers], "partly": [solvers], "failed": [solvers], "done":
    {unit: seconds}, "eta_s"}``; ``failed``: solvers a unit of which a builder failed to compile (for this code),
    nobody compiling it now (they are not ``left``, nor in the estimate); ``partly``: solvers ``left`` whose default
    formulation is built (the plan's ``own`` units: dcd's C-SVC while its other formulations compile), whose jobs of
    it start at once.

    The estimate: each unit left takes its reference compile seconds times this machine's slowdown, which
    is measured over reference seconds of the units compiled since ``since`` (a time.time() instant: when
    the worker started; they ran beside each other, so the slowdown includes the load and the sharing of
    the cores), weighed against a prior (that of an earlier compile on this machine, else the load per core,
    at least 1) counted as ``PRIOR_REFERENCE_S`` seconds of units.
    The units left are laid out on as many lanes as compiles run at once (those running now, at least the
    builders the cores can run): those being compiled first, less the time they have been at it, then the
    others in build order, each on the lane free first; the estimate is when the last lane ends."""
    now = time.time()
    done: dict[str, float] = {}
    measured: list[tuple[float, float]] = []
    for name, unit in plan["units"].items():
        record = read_marker(unit["marker"])
        if record is not None:
            done[name] = float(record.get("seconds") or 0.0)
            if float(record.get("built_at") or 0.0) >= since and done[name] > 0.5:
                measured.append((done[name], unit["reference_s"]))
    ready = [solver for solver, units in plan["solvers"].items() if all(name in done for name in units)]
    broken = {  # a builder failed to compile it, and nobody compiles it again now
        name
        for name, unit in plan["units"].items()
        if name not in done and read_marker(unit.get("failed", "")) and not read_marker(unit.get("building", ""))
    }
    failed = [solver for solver, units in plan["solvers"].items() if solver not in ready and broken.intersection(units)]
    left = [solver for solver in plan["solvers"] if solver not in ready and solver not in failed]
    own = plan.get("own", plan["solvers"])
    partly = [solver for solver in left if all(name in done for name in own[solver])]
    if plan.get("past_slowdown"):
        prior = float(plan["past_slowdown"])
    else:
        try:
            prior = max(1.0, os.getloadavg()[0] / max(1, cores))
        except OSError:
            prior = 1.0
    # the units measured since the start, with the prior counted as PRIOR_REFERENCE_S of them: the first units
    # built are small ones, compiled while every process starts, and alone they made the estimate jump fourfold
    measured_s, reference_s = sum(s for s, _ in measured), sum(r for _, r in measured)
    slowdown = (measured_s + PRIOR_REFERENCE_S * prior) / (reference_s + PRIOR_REFERENCE_S)
    running, pending = [], []
    for name, unit in plan["units"].items():
        if name in done:
            continue
        expected = unit["reference_s"] * slowdown
        started = (read_marker(unit["building"]) or {}).get("started_at") if unit.get("building") else None
        if name in broken:
            continue  # a job of its solver will try again, and say why if it fails again
        if started is not None:
            running.append(max(0.1 * expected, expected - (now - float(started))))
        else:
            pending.append(expected)
    # the slowdown was measured with as many compiles at once as run now (workers compiling for their jobs
    # beside the builders included): that many lanes, at least the builders the cores can run
    lanes = [0.0] * max(1, min(builders, cores), len(running))
    for index, remaining in enumerate(running):
        lanes[index] = remaining
    for expected in pending:
        lanes.sort()
        lanes[0] += expected
    eta = max(lanes) if left or pending else 0.0
    return {"ready": ready, "left": left, "partly": partly, "failed": failed, "done": done, "eta_s": round(eta, 1)}


# -- the builder process -------------------------------------------------------------------------------


def start_builder() -> multiprocessing.process.BaseProcess | None:
    """Start the background builder when the cache lacks a unit; None when it has them all."""
    if not KERNELS.missing():
        return None
    process = multiprocessing.get_context("spawn").Process(
        target=run_builder, name="hinge-kernel-builder", args=(os.getpid(),), daemon=True
    )
    process.start()
    return process


def run_builder(parent_pid: int) -> None:
    """Body of the builder process: once the first solver is built (by the workers themselves, so that
    nothing slows it down), compile what the cache lacks at the worker's priority, then exit."""
    import signal

    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is for the worker, which stops this process
    from core.config import get_settings
    from core.logs import configure_logging

    configure_logging(os.environ.get("HINGE_LOG_LEVEL", "INFO"), get_settings().log_format)

    def orphaned() -> bool:
        return os.getppid() != parent_pid

    first = first_units()
    while not all(KERNELS.built(unit) for unit in first):
        if orphaned():
            return
        time.sleep(0.2)

    def built(unit: CompileUnit, seconds: float) -> None:
        log.info("background compile: %s in %.1f s", unit.name, seconds)

    KERNELS.build_missing(should_stop=orphaned, on_built=built)


# -- `hinge compile` (the solvers' part; service/cli.py adds the parser's) ------------------------------


def main(argv: list[str] | None = None) -> int:
    """`python -m worker.runtime.warmup [--build] [--json]`: the solvers' kernels in this machine's cache; --build
    compiles the missing ones (`hinge compile` runs this for the solvers and adds the upload parser)."""
    import argparse
    import json

    from core.compile_command import run_command, show

    parser = argparse.ArgumentParser(prog="python -m worker.runtime.warmup", description=main.__doc__)
    parser.add_argument("--build", action="store_true", help="Compile every missing unit, then show the cache.")
    parser.add_argument("--json", action="store_true", help="Print the state as JSON.")
    args = parser.parse_args(argv)
    state = run_command({PACKAGE: KERNELS}, args.build, lambda: {"solvers_ready": built_solvers()})
    if args.json:
        print(json.dumps(state, indent=2))
    else:
        show(state)
    missing = [name for name, info in state["units"].items() if not info["built"]]
    return 1 if args.build and missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
