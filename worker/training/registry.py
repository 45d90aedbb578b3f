"""How a worker calls a solver: its spec (``core.solvers``) names the function, and the job's params go to
it as the schema's model.

``fit(solver, indptr, indices, data, y, *, n_features, params, class_weight, control, parallel, ...)``
calls the spec's solve function with the binary problem (CSR arrays, labels in {-1, +1}) and the job's
params as validated by the solver's schema (``params=``): the solver reads its fields there, so their
defaults and checks are the schema's alone. What is not a field of the schema, or is one the dispatcher
turns into something else, goes as a keyword: ``class_weight`` as the (negative, positive) factors of the
problem, the spec's ``threads`` keyword gets the threads one problem may use, and a solver whose spec
``streams`` (or is ``memory_bound``) gets ``memory_bytes``, what the data may take in memory (out of core past it;
or refused). The fields the
dispatcher itself uses (``SERVICE_FIELDS``) are not the solver's to read; tests/test_params_contract.py
checks that every other field is. Solver modules are imported lazily, so importing the registry is cheap.
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Callable

import numpy as np

from core.schemas.solver_params import SolverParams
from core.solvers import SolverSpec, spec_of
from worker.runtime.subtasks import available_cores

log = logging.getLogger("hinge.worker")

SERVICE_FIELDS = frozenset(
    {"search", "n_processes", "max_seconds", "probability", "retries", "multiclass", "distributed"}
)
"""Schema fields the dispatcher uses itself (subtasks, deadline, calibration, retries, one-vs-one, split over nodes): the solve
functions do not read them; every other field is theirs."""
KEYWORD_FIELDS = frozenset({"class_weight", "n_processes"})
"""Schema fields that reach the solve function as keywords of their own (``solve_arguments``): class_weight (a
dict of labels) as the problem's (negative, positive) factors on C, n_processes as the threads of its passes."""


@functools.cache
def solve_function(solver: str) -> Callable:
    """The solve function of a solver (its spec's ``module:function``)."""
    module, name = spec_of(solver).solve.split(":")
    return getattr(importlib.import_module(module), name)


def solve_arguments(
    spec: SolverSpec, params: SolverParams, *, class_weight, parallel: int | None, memory_bytes: int | None = None
) -> dict:
    """The keyword arguments the solve function gets besides the data (see the module docstring)."""
    arguments: dict = {"params": params}
    if (spec.streams or spec.memory_bound) and memory_bytes is not None:
        arguments["memory_bytes"] = memory_bytes
    if "class_weight" in type(params).model_fields:
        arguments["class_weight"] = class_weight
    if spec.threads == "n_processes":
        arguments["n_processes"] = parallel or params.n_processes or available_cores()
    elif spec.threads == "n_threads":
        arguments["n_threads"] = parallel or params.n_processes
    return arguments


def fit(
    solver: str,
    indptr,
    indices,
    data,
    y,
    *,
    n_features: int,
    params: SolverParams,
    class_weight,
    control,
    parallel: int | None = None,
    memory_bytes: int | None = None,
    **extra,
):
    """Train one binary problem (or cpa's pairwise problem) with ``solver``; ``memory_bytes``: what the data may
    take in memory (solvers that stream); ``extra``: warm starts, qid."""
    arguments = solve_arguments(
        spec_of(solver), params, class_weight=class_weight, parallel=parallel, memory_bytes=memory_bytes
    )
    return solve_function(solver)(
        indptr, indices, data, y, n_features=n_features, control=control, **arguments, **extra
    )


def adapter(solver: str):
    """``fit`` for one solver (KeyError names the known solvers)."""
    spec_of(solver)
    return functools.partial(fit, solver)


def warm_start_arguments(solver: str, previous, params: SolverParams, previous_C: float | None = None) -> dict:
    """Keyword arguments that start a solver from a previous result at a smaller C (the spec's ``warm_start``).

    `dual` (dcd): the previous dual variables scaled by C_new / C_previous (the variables at their upper
    bound stay there, and the rest keep their share of the box; on a9a this halves the passes of an
    8-value C path at tol 0.1, where unscaled variables save 10%). `dual_gradient` (smo): the previous dual
    variables with their G = Q alpha - 1 and G_bar, so that the start computes no kernel row: toward a larger
    C scaled as dcd's when most support vectors were at their bound (they likely stay there), else as they
    are (still feasible, and a separable problem's solution hardly moves: on digits' one-vs-one pairs, C 1 ->
    10, 30-75% fewer steps than a cold start, where scaled ones took 10-20% more); toward a smaller C scaled.
    Scaling alpha by s scales G + 1 and G_bar by s; unscaled toward a larger C, no variable is at its new
    bound (G_bar = 0). `weights` (ocas): the previous weights, with the bias as the last one.
    """
    if previous is None:
        return {}
    kind = spec_of(solver).warm_start
    scale = params.C / previous_C if previous_C else 1.0
    if kind == "dual" and "alpha" in previous.extra:
        return {"alpha0": np.asarray(previous.extra["alpha"]) * scale}
    if kind == "dual_gradient" and "alpha" in previous.extra:
        extra = previous.extra
        as_they_are = scale > 1.0 and int(extra.get("n_bounded_sv") or 0) <= 0.5 * int(extra.get("n_sv") or 0)
        if as_they_are:
            scale = 1.0
        alpha = np.asarray(extra["alpha"])
        start = {"alpha0": alpha * scale}
        if extra.get("gradient") is not None and extra.get("gradient_bar") is not None:
            start["gradient0"] = scale * (np.asarray(extra["gradient"]) + 1.0) - 1.0
            start["gradient_bar0"] = np.zeros_like(alpha) if as_they_are else scale * np.asarray(extra["gradient_bar"])
        return start
    if kind == "weights" and previous.w is not None:
        bias = getattr(params, "bias", None)
        return {"w0": np.append(previous.w, previous.bias / bias) if bias else np.asarray(previous.w)}
    return {}


def data_for(solver: str, data: np.ndarray) -> np.ndarray:
    """The feature values as ``solver`` takes them.

    Data sets store values as float64 or float32 (``value_dtype``). Solvers whose spec reads float32 input
    (the linear ones) get the stored array itself, float32 or float64 (the worker cache's memory map: no
    copy; they accumulate in float64). The others get float64: a float32 data set is widened into a copy
    holding exactly float64(float32(v)), 8 bytes per stored value, for the time of the fit. Indices (int32)
    and indptr (int64) go to every solver as stored.
    """
    if spec_of(solver).float32_input or data.dtype == np.float64:
        return data
    return np.asarray(data, dtype=np.float64)


def warm_up_all() -> dict[str, float]:
    """Make every solver's kernels warm in this process, compiling what the machine's cache lacks
    (``worker.runtime.warmup``); returns seconds per solver."""
    from worker.runtime.warmup import warm_up_all as warm_all

    return warm_all()
