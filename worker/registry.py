"""Which solver function trains each `solver` name of a job, and how job params map onto it.

Each adapter takes the binary problem (CSR arrays, labels in {-1, +1}), the job's params (already
validated by the service's schema), the (negative, positive) class-weight factors and a
SolverControl, and returns the solver's SolverResult. Solver modules are imported lazily so that
importing the registry is cheap; ``warm_up_all`` compiles every kernel before a worker takes jobs.
"""

from __future__ import annotations

import importlib
import logging
import time

log = logging.getLogger("hinge.worker")

SOLVER_MODULES = {
    "dcd": "worker.solvers.dcd",
}


def _dcd(indptr, indices, data, y, *, n_features, params, class_weight, control):
    from worker.solvers.dcd import solve_dcd

    return solve_dcd(
        indptr, indices, data, y,
        n_features=n_features,
        C=params["C"],
        loss=params["loss"],
        bias=params["bias"],
        class_weight=class_weight,
        tol=params["tol"],
        max_iter=params["max_iter"],
        shrinking=params["shrinking"],
        seed=params["seed"],
        trace_every=params["trace_every"],
        control=control,
    )


ADAPTERS = {"dcd": _dcd}


def adapter(solver: str):
    """The adapter for a solver name (KeyError names the solver)."""
    try:
        return ADAPTERS[solver]
    except KeyError:
        raise KeyError(f"unknown solver {solver!r}; known: {', '.join(sorted(ADAPTERS))}") from None


def warm_up_all() -> dict[str, float]:
    """Compile (or load from numba's cache) every solver's kernels; returns seconds per solver."""
    seconds = {}
    for name, module_name in SOLVER_MODULES.items():
        start = time.perf_counter()
        module = importlib.import_module(module_name)
        module.warm_up()
        seconds[name] = time.perf_counter() - start
        log.info("warmed %s in %.2f s", name, seconds[name])
    return seconds
