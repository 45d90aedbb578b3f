"""Schemas of the job routes: the training request (one schema per solver) and the job state."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import Field, create_model

from core.schemas.base import Page, ResponseModel, StrictModel
from core.schemas.common_params import CommonParams
from core.schemas.enums import StopReason
from core.schemas.result_warnings import ResultWarning
from core.solvers import SOLVERS, SolverName, SolverSpec

DATASET_ID = Field(description="Id of the uploaded training data set.", max_length=100)


class JobRequestBase(StrictModel):
    """What every solver's request holds (each schema of ``REQUESTS`` narrows `solver` and `params`)."""

    dataset_id: str = DATASET_ID
    solver: str = Field(description="The solver.")
    params: CommonParams = Field(description="Parameters of the solver.")


def _request_schema(spec: SolverSpec) -> type[JobRequestBase]:
    """The body of POST /v1/jobs for one solver: data set, `solver` (its literal name) and its params."""
    solver: Any = Literal[spec.name]
    return create_model(
        f"{spec.camel()}JobRequest",
        __base__=JobRequestBase,
        __doc__=spec.summary,
        __module__=__name__,
        solver=(solver, Field(description=f"The solver: `{spec.name}`.")),
        params=(spec.params, Field(default_factory=spec.params, description=f"Parameters of the {spec.name} solver.")),
    )


REQUESTS = {name: _request_schema(spec) for name, spec in SOLVERS.items()}
"""The request schema of each solver (`DcdJobRequest`, ...), from its spec."""

if TYPE_CHECKING:
    JobRequest = JobRequestBase
else:
    JobRequest = Annotated[Union[tuple(REQUESTS.values())], Field(discriminator="solver")]  # noqa: UP007
"""The body of POST /v1/jobs: a union discriminated by `solver`."""


class JobStatus(str, Enum):
    """Life cycle of a job."""

    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    canceled = "canceled"


WAITING_FOR_COMPILATION = "waiting for compilation"
"""The phase of a job whose solver's code is being compiled (the first run on a machine)."""


class JobProgress(ResponseModel):
    """How far a job has come: its phase, the fraction done with an estimate of the time left, and its
    latest convergence point.

    `fraction` per solver, for one binary problem: the log-scale distance its stopping measure has
    covered from its first value to the tolerance, log(first / now) / log(first / tol), where the
    measure is the one its stopping rule compares with its tolerance: the largest projected-gradient
    or KKT violation, the cut violation (for the kernel cutting planes: cut value minus slack), or the
    gap (against max(`tol_abs`, `tol_rel` x primal)); iterations over `max_iter` are a floor. One-vs-rest: the mean over the classes
    (finished classes count 1). A search: cross-validation subtasks finished over all, scaled so that
    the refit of the best setting takes the share of one fit, then the refit's own fraction.
    """

    phase: str | None = Field(
        default=None,
        description="What the job is doing: `waiting for compilation` (its solver's code is being compiled: the "
        "first run on a machine; it read `waiting for kernels` before), `loading data`, `waiting for a core` (every core of its machine is in use by other "
        "jobs: it starts on the first one freed), `training`, `cross-validating`, "
        "`refitting the best setting`, `scoring training data`, `calibrating probabilities`, `storing model`, or `done` once the job succeeded.",
    )
    compiling: str | None = Field(
        default=None,
        description="While `phase` is `waiting for compilation`: the unit of compiled code being built (a solver's "
        "name, or a part that several solvers share, such as `data_passes`); null otherwise.",
    )
    kernels: str | None = Field(
        default=None, description="Deprecated: the same as `compiling`, its earlier name, kept for one more version."
    )
    fraction: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Fraction done, 0 to 1 (see the schema's description); it never goes back.",
    )
    eta_s: float | None = Field(
        default=None,
        description="Estimated seconds left, from how fast `fraction` grew over the recent past (the last third of "
        "the run, at least 3 s); null until it is stable (3 estimates over 1.5 s predicting ends within a quarter of "
        "the time left of each other).",
    )
    iteration: int | None = Field(
        default=None, description="Outer iterations done (of the binary problem being solved)."
    )
    elapsed_s: float | None = Field(default=None, description="Solver seconds so far.")
    primal: float | None = Field(default=None, description="Latest primal objective.")
    dual: float | None = Field(default=None, description="Latest dual objective or lower bound.")
    gap: float | None = Field(default=None, description="Latest duality gap (primal minus dual or lower bound).")
    gap_rel: float | None = Field(
        default=None, description="Latest relative gap, gap / |primal|: what the solvers' `tol_rel` is compared with."
    )
    subproblem: int | None = Field(
        default=None, description="Index of the binary problem being solved (one-vs-rest), from 0."
    )
    subproblems: int | None = Field(default=None, description="Number of binary problems of the job.")
    subtasks_done: int | None = Field(
        default=None, description="Subtasks finished (one-vs-rest classes, or folds and settings of a search)."
    )
    subtasks_total: int | None = Field(default=None, description="Subtasks of the job.")


class JobError(ResponseModel):
    """Why a job failed, or why a canceled job has no model."""

    code: str = Field(
        description="Machine-readable cause, e.g. `dataset_not_found`, `solver_error`, `worker_lost`; `canceled` on a "
        "canceled job without a model (a multi-class job canceled before every binary problem was done)."
    )
    message: str = Field(description="What went wrong, in a sentence.")


class JobCores(ResponseModel):
    """The cores a running job may use: its share of the machine's cores, which the workers' jobs lease."""

    cores: int = Field(
        description="Cores the job may use now: its processes x threads (it follows its share as other jobs come and go)."
    )
    wanted: int = Field(
        description="Cores it can use: 1 for one binary problem of a solver without threads; the machine's for a "
        "search, one-vs-rest, probability or one problem of a solver that splits its work over threads; at most "
        "`n_processes` and `HINGE_WORKER_CORES` when set."
    )
    machine_cores: int = Field(description="Cores of the machine its worker runs on, shared by the jobs running there.")
    reason: str = Field(description="Why it got that many, in a sentence: what it wanted and who else holds or waits.")


class JobDataLoad(ResponseModel):
    """How the job's data set reached its worker: from the machine's cache, or fetched from the object store."""

    seconds: float = Field(description="Seconds from asking for the data set to its arrays mapped, checks included.")
    fetched_bytes: int = Field(
        description="Bytes fetched from the object store (0: the machine's cache had a whole, intact copy)."
    )
    cached: bool = Field(description="True when the machine's cache had the data set (nothing fetched).")


class JobOut(ResponseModel):
    """A training job."""

    id: str = Field(description="Job id (`job_…`).")
    status: JobStatus = Field(description="queued, running, succeeded, failed or canceled.")
    dataset_id: str = Field(description="Id of the training data set.")
    solver: SolverName = Field(description="Solver name.")
    params: dict[str, Any] = Field(description="The solver parameters, with defaults filled in.")
    created_at: str = Field(description="When the job was submitted (ISO 8601 UTC).")
    started_at: str | None = Field(default=None, description="When a worker started it.")
    finished_at: str | None = Field(default=None, description="When it ended.")
    progress: JobProgress = Field(default_factory=JobProgress, description="Latest progress.")
    model_id: str | None = Field(
        default=None, description="Id of the trained model (also set for a canceled job that had a model to return)."
    )
    stop_reason: StopReason | None = Field(
        default=None,
        description="Why the solver stopped: converged, max_iter, deadline, canceled, or interrupted (the worker was stopped and kept the best model so far).",
    )
    error: JobError | None = Field(
        default=None, description="Set when the job failed, or when it was canceled before a model was complete."
    )
    search_results: dict[str, Any] | None = Field(
        default=None,
        description=(
            "Model selection: {metric, cv_folds, warm_start, settings: [{C, gamma, (nu, epsilon when searched), mean, "
            "std, fold_scores, folds_done, "
            "n_iter, seconds, warm_started_fits, stop_reason (the worst of its fits: max_iter, canceled, deadline, "
            "converged), stop_reasons (fits per reason), cold_n_iter, iterations_saved, iterations_saved_basis}], "
            "best: {C, gamma, mean, std}}; fills while the search runs."
        ),
    )
    cores: JobCores | None = Field(
        default=None,
        description="The cores the job got from its machine's budget (a lone job gets every core it can use; jobs "
        "running side by side share them), and why; set once it started. Kept after it ends: the last share it had.",
    )
    data_load: JobDataLoad | None = Field(
        default=None,
        description="How its data set reached the worker (from the machine's cache or fetched, and how long it "
        "took); set once loaded.",
    )
    warnings: list[ResultWarning] = Field(
        default_factory=list,
        description="Why a succeeded job's result deserves a second look (stopped at max_iter, a large certified gap, "
        "no better than the majority label, settings a search could not evaluate); empty when none. The model "
        "carries the same list.",
    )


class JobList(Page):
    """A page of jobs, newest first."""

    items: list[JobOut] = Field(description="The jobs of this page.")


class TracePoint(ResponseModel):
    """One convergence point. Solvers add their own fields (e.g. `max_violation`, `active_size`, `n_cuts`)."""

    model_config = {"extra": "allow"}

    iteration: int = Field(description="Outer iteration number, from 1.")
    elapsed_s: float = Field(description="Solver seconds when the point was taken.")
    primal: float | None = Field(default=None, description="Primal objective 0.5|w|^2 + C*sum loss at this point.")
    dual: float | None = Field(default=None, description="Dual objective (or lower bound) at this point.")
    gap: float | None = Field(default=None, description="primal - dual.")
    subproblem: int | None = Field(
        default=None, description="Binary problem (one-vs-rest class index) the point belongs to."
    )


class TraceOut(ResponseModel):
    """The convergence points recorded so far (while the job runs, the list grows)."""

    job_id: str | None = Field(description="The job (null for an imported model, which has no trace).")
    status: JobStatus | None = Field(
        description="The job's status when the trace was read (null for an imported model)."
    )
    points: list[TracePoint] = Field(description="Points from index `since` on, in the order recorded.")
    next: int = Field(description="Pass this as `since` to get only the points recorded after these.")
