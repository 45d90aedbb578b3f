"""The solvers, one spec each: everything the API and the workers need to know about a solver is here.

A ``SolverSpec`` holds a solver's name, its parameter schema (``core.schemas.solver_params``), the function
the workers call (a dotted path: core imports no worker code) and its traits: the model it trains, whether
it reads float32 values, how it starts warm, what ``n_processes`` means for it, its progress measure, how
its stopping rule is told, what its models export to, whether it calibrates and searches. The rest of the
code derives from ``SOLVERS``:

* the API: ``SolverName``, the request union of POST /v1/jobs (one schema per solver, discriminated by
  `solver`), the kernel solvers named in hints;
* the workers: the call of the solve function (``worker/training/registry.py``: the job's params go to it as the
  schema's model, ``params=``, and the solver reads every field that is not the service's there), the value
  types handed over, warm starts, threads, the progress fraction (``progress``), the model's
  ``stopping_rule`` (``stopping``), calibration and search support, the kernel warm-up units (``worker.runtime.warmup``);
* the exporters: which formats a solver's models go to.

Adding a solver is its module (worker/solvers), its params schema and one ``SolverSpec``. A deployment
(or a test) adds one without touching these files: ``HINGE_SOLVER_PLUGINS`` names modules that define a
module-level ``SPEC`` (a SolverSpec); they are imported when this module is.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, cast

from core.schemas.enums import ModelKind
from core.schemas.solver_params import (
    CommonParams,
    CpaParams,
    DcdParams,
    OcasParams,
    SampledCutsParams,
    SmoParams,
    SolverParams,
)
from core.schemas.stopping_rule import StoppingRule

FLOOR = 1e-300
PLUGINS_ENV = "HINGE_SOLVER_PLUGINS"
"""Environment variable: comma-separated modules, each with a module-level ``SPEC``, registered at import."""

Measure = Callable[[Any, dict], "tuple[float | None, float | None]"]
"""(params, trace point) -> (measure, target) of the stopping rule at that point (None: the point lacks it)."""
Stopping = Callable[[Any, dict], StoppingRule]
"""(params, the converged result's ``extra``) -> the StoppingRule that stopped it, in words."""


@dataclass(frozen=True)
class SolverSpec:
    """One solver: what the API accepts and shows, and what the workers call (see the module docstring)."""

    name: str
    """The `solver` of a job request."""
    summary: str
    """What it trains, in one sentence (the request schema's description)."""
    params: type[CommonParams]
    """The schema of its parameters: validation, defaults and documentation in one place."""
    solve: str
    """``module:function`` the workers call: solve(indptr, indices, data, y, *, n_features, params, control, ...),
    ``params`` the model of ``params`` (the fields' values and defaults live there only); the keywords besides
    are what the schema does not hold (``worker.training.registry.solve_arguments``)."""
    progress: Measure
    """The measure of its stopping rule at a trace point and its target (the progress fraction's basis)."""
    stopping: Stopping
    """How a converged model tells the rule that stopped it."""
    model_kind: str = "linear"
    """`linear` (a weight vector per problem) or `kernel` (an expansion over training rows)."""
    compile_units: tuple[str, ...] = ()
    """The shared numba warm-up units (``worker.runtime.warmup.SHARED_UNITS``) its kernels call, compiled before its own."""
    compile_s: float | None = None
    """None: no numba kernels. Else its kernels are a warm-up unit of its own (worker/runtime/warmup.py), named after it:
    the ``warm_up`` of its solve function's module, under ``worker.solvers``; the number is that unit's cold
    compile seconds on a quiet 2-core machine (the estimate before this machine has measured one)."""
    formulation_units: tuple[str, ...] = ()
    """Warm-up units of the formulations few of its jobs use (``worker.runtime.warmup.SHARED_UNITS``), compiled after
    its own unit: a worker takes its other jobs meanwhile (dcd's first C-SVC model on a machine's first run does not
    wait for the kernels of logistic regression, SVR, one-class and L1). The solver counts as ready once they are
    built too."""
    uses_formulation_units: Callable[[Any], bool] | None = None
    """Whether a job with these params (the model of ``params``) needs ``formulation_units``."""
    formulation_names: str = "other formulations"
    """What ``formulation_units`` train, as readiness names them while they compile (`hinge serve`'s lines, /readyz's
    ``formulations_compiling``, the dashboard): the jobs that wait for them."""
    float32_input: bool = False
    """Reads float32 data sets as they are stored (else a float64 copy for the fit)."""
    warm_start: str | None = None
    """How a search starts a fit from the previous C: `dual` (dual variables scaled by C'/C, keyword
    alpha0), `dual_gradient` (dual variables and their gradient, keywords alpha0 and gradient0; see
    ``worker.training.registry.warm_start_arguments``), `weights` (keyword w0), or None."""
    threads: str | None = None
    """What `n_processes` means inside one binary problem, and the keyword that gets it: `n_processes`
    (threads for the passes over the data, all of them when the job is one problem; ocas, cpa) or
    `n_threads` (the kernel row team: all when one problem, else what its process may use; smo,
    sampled_cuts). None: one thread; `n_processes` only runs subtasks in processes (dcd)."""
    streams: bool = False
    """Trains data larger than the job's memory (``HINGE_JOB_MEMORY``) by reading it from the worker cache's files
    in passes (keyword ``memory_bytes``; ``worker.solvers.streamed_data``); the others need the data in memory and
    fail such a job with `data_exceeds_memory`."""
    memory_bound: bool = False
    """Keeps memory that grows with the data besides the data itself (sampled_cuts' subspace variant: every row
    projected on its basis; dcd: a copy of wide data with its features renumbered) and gets ``memory_bytes``, what the
    training may hold (``HINGE_JOB_MEMORY``), to refuse a setting that would not fit (or do without the copy)
    before it allocates."""
    split_solve: str | None = None
    """``module:function`` that trains one binary problem with its rows split over the nodes of a Dask cluster
    (``params.distributed``; ``worker.training.split``): solve(nodes, *, n_features, params, control). None: the
    solver trains on one machine only."""
    crammer_singer: str | None = None
    """``module:function`` that trains Crammer and Singer's multi-class problem (``multiclass: crammer_singer``, one
    problem over every label; ``worker.training.crammer_singer``): solve(indptr, indices, data, classes, *, n_classes,
    n_features, params, control), with ``memory_bytes`` when it streams or is memory-bound and ``n_threads`` when that
    is its threads' keyword. None: one-vs-rest only."""
    exports: tuple[str, ...] = ("json", "liblinear", "libsvm", "onnx")
    """Formats its models export to (a format also refuses models it cannot hold, e.g. kernels in liblinear)."""
    calibration: bool = True
    """`probability: true` is supported (calibration on cross-validated scores)."""
    search: bool = True
    """`search` (cross-validated model selection) is supported."""

    def camel(self) -> str:
        """The name in CamelCase (`sampled_cuts` -> `SampledCuts`), for schema names."""
        return "".join(part.capitalize() for part in self.name.split("_"))


# -- progress measures and stopping rules of the built-in solvers --------------------------------------


def _positive(value) -> float | None:
    return None if value is None else max(float(value), FLOOR)


def violation_measure(params, point: dict) -> tuple[float | None, float | None]:
    """dcd, smo: the largest projected-gradient (KKT) violation against tol."""
    return _positive(point.get("max_violation")), getattr(params, "tol", None)


def gap_measure(params, point: dict) -> tuple[float | None, float | None]:
    """ocas (and cpa without tol): the gap against max(tol_abs, tol_rel x |primal|)."""
    primal = point.get("primal")
    if primal is None:
        return None, None
    tol_abs, tol_rel = getattr(params, "tol_abs", 0.0), getattr(params, "tol_rel", 0.0)
    target = max(float(tol_abs or 0.0), float(tol_rel or 0.0) * abs(float(primal)))
    return _positive(point.get("gap")), target


def cpa_measure(params, point: dict) -> tuple[float | None, float | None]:
    """cpa: the paper's violation against tol when tol is set, else the relative gap."""
    if getattr(params, "tol", None) is not None:
        return _positive(point.get("violation")), params.tol
    return gap_measure(params, point)


def cut_measure(params, point: dict) -> tuple[float | None, float | None]:
    """sampled_cuts: the new cut's value minus the slack, against tol (the subspace variant: its duality gap per
    example and C, against tol)."""
    if point.get("gap_per_example") is not None:
        return max(float(point["gap_per_example"]), FLOOR), getattr(params, "tol", None)
    value, xi = point.get("cut_value"), point.get("xi")
    if value is None or xi is None:
        return None, None
    return max(float(value) - float(xi), FLOOR), getattr(params, "tol", None)


def fmt_value(value) -> str:
    """A parameter or measured value as the stopping texts write it."""
    return "null" if value is None else f"{value:.3g}" if isinstance(value, float) else str(value)


def _gap_text(extra: dict) -> str:
    gap = extra.get("gap_rel")
    return f"certified gap {fmt_value(gap)}" if gap is not None else "gap not certified"


def _dcd_uses_formulations(params: Any) -> bool:
    """dcd's C-SVC (the hinge or squared hinge with the L2 penalty) is its own unit; every other loss or the L1
    penalty needs ``dcd_formulations``."""
    return params.loss not in ("hinge", "squared_hinge") or params.penalty != "l2"


def _tol_then_gap(measure: str) -> Stopping:
    """dcd and smo: the violation below tol, and the certified gap below tol_rel when it is set."""

    def stopping(params, extra: dict) -> StoppingRule:
        tol, tol_rel = params.tol, getattr(params, "tol_rel", None)
        used = extra.get("tol_used", tol)
        tightened = f" (tightened to {fmt_value(used)})" if used is not None and tol and used < tol else ""
        if tol_rel:
            return StoppingRule(
                rule="tol_rel",
                values={"tol": tol, "tol_rel": tol_rel},
                text=f"{measure} below tol {fmt_value(tol)}{tightened} and {_gap_text(extra)} <= tol_rel {fmt_value(tol_rel)}",
            )
        return StoppingRule(
            rule="tol", values={"tol": tol}, text=f"{measure} below tol {fmt_value(tol)} ({_gap_text(extra)})"
        )

    return stopping


def cpa_stopping(params, extra: dict) -> StoppingRule:
    """cpa: whichever of its two rules held first."""
    gap = extra.get("gap_rel")
    if params.tol_rel and gap is not None and gap <= params.tol_rel:
        return StoppingRule(
            rule="tol_rel",
            values={"tol_rel": params.tol_rel, "tol": params.tol},
            text=f"{_gap_text(extra)} <= tol_rel {fmt_value(params.tol_rel)}",
        )
    return StoppingRule(
        rule="tol",
        values={"tol": params.tol, "tol_rel": params.tol_rel},
        text=f"most violated constraint within tol {fmt_value(params.tol)} per example of the working set's slack "
        f"({_gap_text(extra)})",
    )


def ocas_stopping(params, extra: dict) -> StoppingRule:
    """ocas: the absolute or the relative part of rule (9)."""
    absolute = extra.get("gap")
    if params.tol_abs and absolute is not None and absolute <= params.tol_abs:
        return StoppingRule(
            rule="tol_abs",
            values={"tol_abs": params.tol_abs, "tol_rel": params.tol_rel},
            text=f"gap {fmt_value(absolute)} <= tol_abs {fmt_value(params.tol_abs)}",
        )
    return StoppingRule(
        rule="tol_rel",
        values={"tol_rel": params.tol_rel, "tol_abs": params.tol_abs},
        text=f"{_gap_text(extra)} <= tol_rel {fmt_value(params.tol_rel)}",
    )


def cut_stopping(params, extra: dict) -> StoppingRule:
    """sampled_cuts: no sampled cut violated by more than tol (the subspace variant: its duality gap)."""
    if getattr(params, "variant", None) == "subspace":
        return StoppingRule(
            rule="tol",
            values={"tol": params.tol},
            text=f"the duality gap of the model restricted to its basis rows <= tol {fmt_value(params.tol)} x C x "
            f"rows ({_gap_text(extra)})",
        )
    if getattr(params, "multiclass", None) == "crammer_singer" and params.variant == "linear":
        return StoppingRule(
            rule="tol",
            values={"tol": params.tol},
            text=f"the best point's objective within tol {fmt_value(params.tol)} x C x rows of the master problem's "
            f"value ({_gap_text(extra)})",
        )
    return StoppingRule(
        rule="tol",
        values={"tol": params.tol},
        text=f"no cut violated by more than tol {fmt_value(params.tol)} ({_gap_text(extra)})",
    )


# -- the registry ---------------------------------------------------------------------------------------

BUILT_IN = (
    SolverSpec(
        name="dcd",
        summary="Train a linear SVM with dual coordinate descent (`dcd`).",
        params=DcdParams,
        solve="worker.solvers.dcd:solve_dcd",
        progress=violation_measure,
        stopping=_tol_then_gap("projected-gradient spread"),
        compile_units=("common",),
        compile_s=3.2,
        formulation_units=("dcd_formulations",),
        uses_formulation_units=_dcd_uses_formulations,
        formulation_names="logistic regression, SVR, one-class and L1",
        float32_input=True,
        warm_start="dual",
        memory_bound=True,
    ),
    SolverSpec(
        name="cpa",
        summary="Train a linear SVM, ordinal regression, ROC-area or ranking model with SVMperf's cutting planes (`cpa`).",
        params=CpaParams,
        solve="worker.solvers.cpa:solve_cpa",
        progress=cpa_measure,
        stopping=cpa_stopping,
        compile_units=("reduced_qp", "data_passes", "cut_store", "ranking"),
        compile_s=14.8,
        float32_input=True,
        threads="n_processes",
        streams=True,
        split_solve="worker.solvers.distributed_cpa:solve_cpa_split",
    ),
    SolverSpec(
        name="ocas",
        summary="Train a linear SVM with the optimized cutting plane algorithm (`ocas`).",
        params=OcasParams,
        solve="worker.solvers.ocas:solve_ocas",
        progress=gap_measure,
        stopping=ocas_stopping,
        compile_units=("reduced_qp", "data_passes", "line_search", "cut_store", "ocas_multiclass"),
        compile_s=1.5,
        float32_input=True,
        warm_start="weights",
        threads="n_processes",
        streams=True,
        split_solve="worker.solvers.distributed_ocas:solve_ocas_split",
        crammer_singer="worker.solvers.ocas_multiclass:solve_crammer_singer",
    ),
    SolverSpec(
        name="smo",
        summary="Train a kernel SVM with sequential minimal optimization (`smo`).",
        params=SmoParams,
        solve="worker.solvers.smo.solve:solve_smo",
        progress=violation_measure,
        stopping=_tol_then_gap("largest KKT violation"),
        model_kind="kernel",
        warm_start="dual_gradient",
        compile_units=("common", "kernels"),
        compile_s=37.6,
        threads="n_threads",
    ),
    SolverSpec(
        name="sampled_cuts",
        summary="Train a kernel SVM with the sampled-cut cutting-plane algorithm (`sampled_cuts`).",
        params=SampledCutsParams,
        solve="worker.solvers.sampled_cuts.solve:solve_sampled_cuts",
        crammer_singer="worker.solvers.sampled_cuts.multiclass:solve_sampled_cuts_crammer_singer",
        progress=cut_measure,
        stopping=cut_stopping,
        model_kind="kernel",
        compile_units=("common", "kernels", "line_search", "ocas_multiclass"),
        compile_s=19.8,
        threads="n_threads",
        memory_bound=True,
    ),
)


def _plugins() -> list[SolverSpec]:
    names = [name.strip() for name in os.environ.get(PLUGINS_ENV, "").split(",") if name.strip()]
    return [importlib.import_module(name).SPEC for name in names]


SOLVERS: dict[str, SolverSpec] = {spec.name: spec for spec in (*BUILT_IN, *_plugins())}
"""Every solver by name: the built-in ones, then those of HINGE_SOLVER_PLUGINS."""

SolverName = Enum("SolverName", [(name, name) for name in SOLVERS], type=str, module=__name__)  # type: ignore[misc]
SolverName.__doc__ = "A training algorithm."

KERNEL_SOLVERS = tuple(name for name, spec in SOLVERS.items() if spec.model_kind == ModelKind.kernel)
"""Solvers that take a `kernel` (their models are expansions over training rows)."""


def spec_of(solver: str) -> SolverSpec:
    """The spec of a solver name (KeyError names the known ones)."""
    try:
        return SOLVERS[solver]
    except KeyError:
        raise KeyError(f"unknown solver {solver!r}; known: {', '.join(SOLVERS)}") from None


def solver_params(solver: str, params: Mapping[str, Any] | CommonParams) -> SolverParams:
    """A job's parameters validated by its solver's schema, defaults filled in (the API's checks, the worker's reading).

    Takes the stored JSON form (`lambda` for ocas) or the field names; a model of the right schema
    is returned as it is. Raises pydantic's ValidationError, KeyError for an unknown solver.
    """
    schema = spec_of(solver).params
    if isinstance(params, schema):
        return cast(SolverParams, params)  # a plugin's schema is not in the static union: typing only
    if isinstance(params, CommonParams):
        raise TypeError(f"parameters of {type(params).__name__} given for solver {solver}")
    return cast(SolverParams, schema.model_validate(params))
