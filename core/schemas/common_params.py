"""What every solver's parameters share: the fields of ``CommonParams`` and the helpers the solver schemas
(``core.schemas.solver_params``) describe and validate their own fields with."""

from __future__ import annotations

from pydantic import Field, StrictBool, field_validator

from core.schemas.base import StrictModel
from core.schemas.enums import Task
from core.schemas.search_params import SearchParams

RELATIVE_GAP = "tol_rel means the same for every solver: a certified relative gap in (0, 1), or null for off (0 reads as null, as earlier versions wrote it)."
"""The sentence every tol_rel's description ends with."""


def n_processes_field(inside_a_problem: str):
    """The `n_processes` field of one solver: what it means for that solver, said in its schema."""
    return Field(
        default=None,
        ge=1,
        le=256,
        description="Processes for the job's independent subtasks (one-vs-rest classes, settings and folds of a "
        f"search), sharing the data set; {inside_a_problem} Null: the worker's cores (HINGE_WORKER_CORES); "
        "processes x threads <= cores.",
    )


class CommonParams(StrictModel):
    """Parameters every solver accepts."""

    @field_validator("tol_rel", mode="before", check_fields=False)
    @classmethod
    def _zero_tol_rel_is_off(cls, value):
        """Earlier versions stored 0 for 'off' (dcd, cpa): read it as null, so their jobs still load."""
        return None if value == 0 else value

    @property
    def task(self) -> Task:
        """What the model is trained for: `classification`, or cpa's pairwise objective."""
        return Task.classification

    search: SearchParams | None = Field(
        default=None,
        description="Model selection: cross-validate a grid of C (and gamma) values and keep the best, refit on all the data.",
    )
    n_processes: int | None = Field(
        default=None,
        ge=1,
        le=256,
        description=(
            "Processes for the job's independent subtasks (one-vs-rest classes, settings and folds of a search), "
            "sharing the data set. Null: the worker's cores. A single binary problem of ocas or cpa uses this "
            "many threads for its passes over the data instead; the kernel solvers use them as threads inside "
            "a single binary problem (processes x threads <= cores)."
        ),
    )

    max_seconds: float | None = Field(
        default=None,
        gt=0,
        description=(
            "Wall-clock budget of the solver in seconds. At the deadline the solver stops at its next "
            "iteration check and the job succeeds with the best model so far (`stop_reason: deadline`). "
            "Null: no deadline (the server's ceiling still applies)."
        ),
    )
    seed: int = Field(
        default=0,
        ge=0,
        le=2**63 - 1,
        description="Seed of every random choice of the solver: the same seed gives the same model.",
    )
    probability: StrictBool = Field(
        default=False,
        description=(
            "Classification: after training, fit a calibration to decision values from a 5-fold cross-validation "
            "(folds stratified by label and drawn with `seed`, as LIBSVM's -b 1), so that predict with "
            "`probabilities: true` answers class probabilities. Two labels: Platt's sigmoid. More labels: one "
            "softmax over the one-vs-rest scores (multinomial logistic regression on them), or, for smo with "
            "`multiclass: ovo`, one sigmoid per pair coupled as LIBSVM does. Costs five more trainings on 4/5 of the data."
        ),
    )
    retries: int = Field(
        default=1,
        ge=0,
        le=10,
        description=(
            "How many times the job is started again on another worker when its worker dies while "
            "running it (crash, kill -9, lost machine). After that the job fails with error code `worker_lost`."
        ),
    )


def tol_alone_when_named(params):
    """A `tol` the user gave rules alone when they did not give `tol_rel` too: the default tol_rel would
    otherwise stop the solver earlier (cpa) or make it go on past that tol (dcd, smo) without a word."""
    if "tol" in params.model_fields_set and "tol_rel" not in params.model_fields_set:
        params.tol_rel = None
    return params
