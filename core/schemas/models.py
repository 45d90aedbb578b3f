"""Schemas of the model routes: model metadata, predict request and answer."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, StringConstraints, WithJsonSchema

from core.schemas.base import Page, ResponseModel, StrictModel
from core.schemas.enums import ImportFormat, ModelKind, ModelSource, Multiclass, StopReason, Task
from core.schemas.model_files import Calibration
from core.schemas.result_warnings import ResultWarning
from core.schemas.stopping_rule import DataAccess, StoppingRule
from core.solvers import SolverName


class ModelOut(ResponseModel):
    """A trained model (its weights stay in binary in Redis)."""

    id: str = Field(description="Model id (`mdl_…`).")
    source: ModelSource = Field(
        default=ModelSource.trained, description="`trained` by a job here, or `imported` (POST /v1/models)."
    )
    import_format: ImportFormat | None = Field(default=None, description="Imported models: the format of the file.")
    job_id: str | None = Field(description="The job that trained it (null for imported models).")
    dataset_id: str | None = Field(description="The training data set (null for imported models).")
    solver: SolverName | None = Field(description="Solver name (null for models imported from LIBLINEAR or LIBSVM).")
    params: dict[str, Any] = Field(
        description="Solver parameters used (imported models: what the file states, e.g. the bias or kernel)."
    )
    kind: ModelKind = Field(
        description=(
            "`linear` (a weight vector per binary problem), `kernel` (an expansion over stored training rows) or "
            "`ranking` (cpa's pairwise objectives: one weight vector that scores rows)."
        )
    )
    labels: list[float] | None = Field(
        description="The class labels, ascending (two labels: scores are positive for the larger one); for ordinal models the ranks; null for models that only score."
    )
    n_features: int = Field(description="Number of features the model was trained on.")
    zero_based: bool = Field(
        description="Whether sparse predict rows use zero-based indices (as the training upload did)."
    )
    zero_based_guessed: bool | None = Field(
        default=None,
        description="Whether the training data set's index base was guessed at upload (`zero_based=auto`) rather than "
        "given; null for imported models, CSV data and models trained before this was recorded.",
    )
    multiclass: Multiclass | None = Field(
        default=None,
        description="More than two labels: `ovr` (one score per label, argmax) or `ovo` (LIBSVM imports: one decision per pair of labels, vote).",
    )
    probability: Calibration | None = Field(
        default=None,
        description="Calibrated models (trained with `probability: true`, or imported with probabilities): the sigmoids or the softmax behind `predict` with `probabilities: true`.",
    )
    n_iter: int | None = Field(
        description="Outer iterations, summed over the binary problems (null for imported models)."
    )
    n_iter_per_problem: list[int] = Field(default_factory=list, description="Outer iterations of each binary problem.")
    converged: bool | None = Field(
        description="Whether every binary problem met its stopping rule (null for imported models)."
    )
    stop_reason: StopReason | None = Field(
        description="converged, max_iter, deadline, canceled or interrupted (the first non-converged reason over the binary problems); null for imported models."
    )
    stopping_rule: StoppingRule | None = Field(
        default=None,
        description="The rule behind stop_reason, with its values (null for imported models and models trained "
        "before this field existed).",
    )
    data_access: DataAccess | None = Field(
        default=None,
        description="Trained out of core (the data set larger than the job's memory, ocas and cpa): what was held "
        "in memory and what was read from disk; split over nodes (`distributed`): how many held rows; null when "
        "the data was in the job's memory.",
    )
    training_seconds: float | None = Field(
        description="Solver seconds only (no data loading, no trace evaluation); null for imported models."
    )
    objective: float | None = Field(
        description="Primal objective 0.5|w|^2 + C*sum loss of the returned model (summed over one-vs-rest problems)."
    )
    objectives: list[float | None] = Field(
        default_factory=list,
        description="Primal objective per binary problem (one entry for two classes); null where it was not computed (smo stopped by a deadline while shrunk, on a large problem).",
    )
    trace_seconds: float | None = Field(
        default=None, description="Seconds spent evaluating trace points (not in training_seconds)."
    )
    gap_rel: float | None = Field(
        default=None,
        description=(
            "Certified relative gap: (objective - lower bound) / objective, the largest over the binary problems. The "
            "model's objective is at most this fraction above the optimum. Null where the solver has no bound "
            "(see gap_rel_note)."
        ),
    )
    gap_rel_per_problem: list[float | None] | None = Field(
        default=None, description="Certified relative gap of each binary problem (null where unknown)."
    )
    gap_rel_note: str | None = Field(default=None, description="How gap_rel was certified, or why it is unknown.")
    train_accuracy: float | None = Field(
        description="Accuracy on the training data (kernel models, and models stopped by a cancel, a shutdown or their deadline: on a seeded sample of train_accuracy_rows rows when larger); null for score-only models."
    )
    train_accuracy_rows: int | None = Field(
        default=None, description="Rows the training accuracy was measured on, when a sample."
    )
    task: Task = Field(
        default=Task.classification,
        description="`classification`, cpa's pairwise objective (`ordinal`, `roc_area`, `ranking`), `regression` "
        "(dcd's epsilon-insensitive losses, smo's epsilon_svr: the model predicts values), or `one_class` (smo's "
        "one-class SVM: +1 inlier, -1 outlier).",
    )
    kernel: dict | None = Field(default=None, description="Kernel models: the kernel with gamma resolved to a number.")
    n_support: int | None = Field(
        default=None, description="Kernel models: stored expansion rows (union over the binary problems)."
    )
    n_support_per_problem: list[int] | None = Field(
        default=None, description="Kernel models: support vectors (or basis rows) per binary problem."
    )
    n_bounded_support_per_problem: list[int | None] | None = Field(
        default=None, description="Kernel models: support vectors at the upper bound C per binary problem (smo)."
    )
    ranks: list[float] | None = Field(default=None, description="Ordinal models: the rank values, ascending.")
    thresholds: list[float] | None = Field(
        default=None,
        description="Ordinal models: score thresholds between adjacent ranks (a score above thresholds[k] ranks above ranks[k]).",
    )
    n_pairs: int | None = Field(
        default=None, description="Pairwise objectives: number of ordered pairs in the training loss."
    )
    train_pairwise_accuracy: float | None = Field(
        default=None,
        description="Pairwise objectives: fraction of training pairs ordered correctly (ties count one half).",
    )
    train_roc_auc: float | None = Field(
        default=None, description="roc_area models: area under the ROC curve on the training data."
    )
    train_mse: float | None = Field(
        default=None, description="Regression models: mean squared error on the training data."
    )
    train_r2: float | None = Field(
        default=None,
        description="Regression models: coefficient of determination R² = 1 - SSE / SST on the training data.",
    )
    train_outlier_fraction: float | None = Field(
        default=None,
        description="One-class models: the fraction of training rows predicted -1 (outliers); nu bounds it (up to "
        "the rows on the boundary).",
    )
    search_results: dict[str, Any] | None = Field(
        default=None,
        description="Model selection: the cross-validation table and the best setting (see the job's search_results).",
    )
    refit_params: dict[str, Any] | None = Field(
        default=None,
        description="Model selection: the C (and gamma, nu, epsilon when searched) of the best setting, refit on all "
        "the data (the job's `params` are those it was submitted with).",
    )
    warnings: list[ResultWarning] = Field(
        default_factory=list,
        description="Why this model deserves a second look before it is trusted (stopped at max_iter, a large "
        "certified gap, no better than the majority label on its training data, settings its search could not "
        "evaluate); empty when none.",
    )
    created_at: str = Field(description="Creation time, ISO 8601 UTC.")


class ModelList(Page):
    """A page of models, newest first."""

    items: list[ModelOut] = Field(description="The models of this page.")


FeatureIndex = Annotated[str, StringConstraints(pattern=r"^[0-9]{1,10}$")]
"""A sparse row's key: a feature index as the training upload numbered it, in decimal digits."""
SparseRow = Annotated[
    dict[FeatureIndex, float],
    WithJsonSchema(
        {
            "type": "object",
            "propertyNames": {"pattern": "^[0-9]{1,10}$"},
            "additionalProperties": {"type": "number"},
            "description": 'A sparse row: {"feature index": value}.',
        }
    ),
]


class PredictRequest(StrictModel):
    """Rows to score."""

    instances: list[list[float] | SparseRow] = Field(
        description=(
            "Rows to predict: dense rows (lists of n_features numbers) or sparse rows "
            '({"index": value} maps, indices numbered as in the training upload). A sparse index beyond '
            "the model's features is refused (422 naming the row and the index) unless "
            "`ignore_unknown_features` is true."
        )
    )
    ignore_unknown_features: StrictBool = Field(
        default=False,
        description=(
            "Score sparse rows that name features the model never saw (index beyond its n_features) as if those "
            "values were 0, instead of refusing the request."
        ),
    )
    probabilities: StrictBool = Field(
        default=False,
        description="Also answer class probabilities (the model must be calibrated: trained with `probability: true`); 409 otherwise.",
    )
    decision_function_shape: Literal["ovr", "ovo"] = Field(
        default="ovr",
        description=(
            "The shape of `scores` for more than two labels, as scikit-learn's SVC names it. `ovr`: one score per "
            "label (a one-vs-one model's votes plus its squashed summed pairwise values). `ovo`: a one-vs-one "
            "model's decision value of every pair of labels (a, b), a before b in the order of the model's "
            "`labels`, pairs ordered (0,1), (0,2), ..., (1,2), ..., positive for a; 409 for a one-vs-rest model "
            "with more than two labels (it has no pairwise values). Two labels: one score per row either way."
        ),
    )


class PredictOut(ResponseModel):
    """Predicted labels and decision values."""

    labels: list[float] | None = Field(
        description="Predicted label per row (ordinal models: the rank; regression models: the predicted value, "
        "equal to its score); null for models that only score (roc_area, ranking)."
    )
    scores: list[float] | list[list[float]] = Field(
        description=(
            "Two classes: one score per row, positive meaning the larger label. More: one score per class per row "
            "(one-vs-rest shape), or with `decision_function_shape: ovo` one per pair of labels."
        )
    )
    probabilities: list[list[float]] | None = Field(
        default=None,
        description="With `probabilities: true`: per row, the probability of each label (in the order of the model's `labels`), summing to 1; else null.",
    )
