"""Which solver function trains each `solver` name of a job, and how job params map onto it.

Each adapter takes the binary problem (CSR arrays, labels in {-1, +1}), the job's parameters as its
solver's schema reads them (``core.schemas.solver_params``: the API's own models, so the worker
reads typed attributes with the API's defaults), the (negative, positive) class-weight factors, a
SolverControl and, for the parallel solvers, how many processes or threads one problem may use;
it returns the solver's SolverResult. Solver modules are imported lazily so that
importing the registry is cheap; ``warm_up_all`` makes every solver's kernels warm (``worker.warmup``).
"""

from __future__ import annotations

import logging

import numpy as np

from core.schemas.solver_params import CpaParams, DcdParams, OcasParams, SampledCutsParams, SmoParams, SolverParams
from worker.subtasks import available_cores

log = logging.getLogger("hinge.worker")


def _dcd(indptr, indices, data, y, *, n_features, params: DcdParams, class_weight, control, parallel=None, alpha0=None):
    from worker.solvers.dcd import solve_dcd

    return solve_dcd(
        indptr,
        indices,
        data,
        y,
        n_features=n_features,
        C=params.C,
        loss=params.loss,
        bias=params.bias,
        class_weight=class_weight,
        tol=params.tol,
        tol_rel=params.tol_rel,
        max_iter=params.max_iter,
        shrinking=params.shrinking,
        seed=params.seed,
        trace_every=params.trace_every,
        control=control,
        alpha0=alpha0,
    )


def _cpa(indptr, indices, data, y, *, n_features, params: CpaParams, class_weight, control, parallel=None, qid=None):
    from worker.solvers.cpa import solve_cpa

    return solve_cpa(
        indptr,
        indices,
        data,
        y,
        n_features=n_features,
        C=params.C,
        bias=params.bias,
        tol_rel=params.tol_rel,
        tol=params.tol,
        max_iter=params.max_iter,
        max_inactive=params.max_inactive,
        objective=params.objective,
        qid=qid,
        n_processes=params.n_processes or available_cores(),
        seed=params.seed,
        control=control,
    )


def _ocas(indptr, indices, data, y, *, n_features, params: OcasParams, class_weight, control, parallel=None, w0=None):
    from worker.solvers.ocas import solve_ocas

    processes = parallel or params.n_processes or available_cores()
    return solve_ocas(
        indptr,
        indices,
        data,
        y,
        n_features=n_features,
        C=params.C,
        bias=params.bias,
        tol_rel=params.tol_rel,
        tol_abs=params.tol_abs,
        lam=params.lam,
        max_iter=params.max_iter,
        max_inactive=params.max_inactive,
        n_processes=processes,
        seed=params.seed,
        control=control,
        w0=w0,
    )


def _smo(indptr, indices, data, y, *, n_features, params: SmoParams, class_weight, control, parallel=None):
    from worker.solvers.smo import solve_smo

    return solve_smo(
        indptr,
        indices,
        data,
        y,
        n_features=n_features,
        C=params.C,
        kernel=params.kernel.model_dump(),
        working_set=params.working_set,
        tol=params.tol,
        tol_rel=params.tol_rel,
        cache_mb=params.cache_mb,
        shrinking=params.shrinking,
        class_weight=class_weight,
        max_iter=params.max_iter,
        trace_every=params.trace_every,
        seed=params.seed,
        n_threads=parallel or params.n_processes,
        control=control,
    )


def _sampled_cuts(
    indptr, indices, data, y, *, n_features, params: SampledCutsParams, class_weight, control, parallel=None
):
    from worker.solvers.sampled_cuts import solve_sampled_cuts

    return solve_sampled_cuts(
        indptr,
        indices,
        data,
        y,
        n_features=n_features,
        C=params.C,
        kernel=params.kernel.model_dump(),
        variant=params.variant,
        sample_size=params.sample_size,
        p=params.p,
        tol=params.tol,
        max_inactive=params.max_inactive,
        max_iter=params.max_iter,
        bias=params.bias,
        seed=params.seed,
        n_threads=parallel or params.n_processes,
        control=control,
    )


ADAPTERS = {"dcd": _dcd, "cpa": _cpa, "ocas": _ocas, "smo": _smo, "sampled_cuts": _sampled_cuts}


def warm_start_arguments(solver: str, previous, params: SolverParams, previous_C: float | None = None) -> dict:
    """Keyword arguments that start a solver from a previous result at a smaller C.

    dcd: the previous dual variables scaled by C_new / C_previous (the variables at their upper bound
    stay there, and the rest keep their share of the box; on a9a this halves the passes of an
    8-value C path at tol 0.1, where unscaled variables save 10%). ocas: the previous weights.
    """
    if previous is None:
        return {}
    if solver == "dcd" and "alpha" in previous.extra:
        scale = params.C / previous_C if previous_C else 1.0
        return {"alpha0": np.asarray(previous.extra["alpha"]) * scale}
    if isinstance(params, OcasParams) and previous.w is not None:
        bias = params.bias
        return {"w0": np.append(previous.w, previous.bias / bias) if bias else np.asarray(previous.w)}
    return {}


FLOAT32_SOLVERS = ("dcd", "cpa", "ocas")
"""Solvers whose kernels read float32 values directly (their warm-up compiles both value types)."""


def data_for(solver: str, data: np.ndarray) -> np.ndarray:
    """The feature values as ``solver`` takes them.

    Data sets store values as float64 or float32 (``value_dtype``). The linear solvers (FLOAT32_SOLVERS)
    get the stored array itself, float32 or float64 (the worker cache's memory map: no copy; they
    accumulate in float64). smo and sampled_cuts get float64: a float32 data set is widened into a
    copy holding exactly float64(float32(v)), 8 bytes per stored value, for the time of the fit.
    Indices (int32) and indptr (int64) go to every solver as stored.
    """
    if solver in FLOAT32_SOLVERS or data.dtype == np.float64:
        return data
    return np.asarray(data, dtype=np.float64)


def adapter(solver: str):
    """The adapter for a solver name (KeyError names the solver)."""
    try:
        return ADAPTERS[solver]
    except KeyError:
        raise KeyError(f"unknown solver {solver!r}; known: {', '.join(sorted(ADAPTERS))}") from None


def warm_up_all() -> dict[str, float]:
    """Make every solver's kernels warm in this process, compiling what the machine's cache lacks
    (``worker.warmup``); returns seconds per solver."""
    from worker.warmup import warm_up_all as warm_all

    return warm_all()
