"""Schemas of the model routes: model metadata, predict request and answer."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from service.schemas.base import Page, StrictModel


class ModelOut(BaseModel):
    """A trained model (its weights stay in binary in Redis)."""

    id: str = Field(description="Model id (`mdl_…`).")
    job_id: str = Field(description="The job that trained it.")
    dataset_id: str = Field(description="The training data set.")
    solver: str = Field(description="Solver name.")
    params: dict[str, Any] = Field(description="Solver parameters used.")
    kind: str = Field(
        description=(
            "`linear` (a weight vector per binary problem), `kernel` (an expansion over stored training rows) or "
            "`ranking` (cpa's pairwise objectives: one weight vector that scores rows)."
        )
    )
    labels: list[float] | None = Field(
        description="The class labels, ascending (two labels: scores are positive for the larger one); for ordinal models the ranks; null for models that only score."
    )
    n_features: int = Field(description="Number of features the model was trained on.")
    zero_based: bool = Field(description="Whether sparse predict rows use zero-based indices (as the training upload did).")
    n_iter: int = Field(description="Outer iterations, summed over the binary problems.")
    n_iter_per_problem: list[int] = Field(default_factory=list, description="Outer iterations of each binary problem.")
    converged: bool = Field(description="Whether every binary problem met its stopping rule.")
    stop_reason: str = Field(description="converged, max_iter, deadline, canceled or interrupted (the first non-converged reason over the binary problems).")
    training_seconds: float = Field(description="Solver seconds only (no data loading, no trace evaluation).")
    objective: float | None = Field(description="Primal objective 0.5|w|^2 + C*sum loss of the returned model (summed over one-vs-rest problems).")
    objectives: list[float | None] = Field(
        description="Primal objective per binary problem (one entry for two classes); null where it was not computed (smo stopped by a deadline while shrunk, on a large problem)."
    )
    trace_seconds: float | None = Field(default=None, description="Seconds spent evaluating trace points (not in training_seconds).")
    gap_rel: float | None = Field(
        default=None,
        description=(
            "Certified relative gap: (objective - lower bound) / objective, the largest over the binary problems. The "
            "model's objective is at most this fraction above the optimum. Null where the solver has no bound "
            "(see gap_rel_note)."
        ),
    )
    gap_rel_per_problem: list[float | None] | None = Field(default=None, description="Certified relative gap of each binary problem (null where unknown).")
    gap_rel_note: str | None = Field(default=None, description="How gap_rel was certified, or why it is unknown.")
    train_accuracy: float | None = Field(
        description="Accuracy on the training data (kernel models: on a seeded sample of train_accuracy_rows rows when larger); null for score-only models."
    )
    train_accuracy_rows: int | None = Field(default=None, description="Rows the training accuracy was measured on, when a sample.")
    task: str = Field(default="classification", description="`classification`, or cpa's pairwise objective: `ordinal`, `roc_area`, `ranking`.")
    kernel: dict | None = Field(default=None, description="Kernel models: the kernel with gamma resolved to a number.")
    n_support: int | None = Field(default=None, description="Kernel models: stored expansion rows (union over the binary problems).")
    n_support_per_problem: list[int] | None = Field(default=None, description="Kernel models: support vectors (or basis rows) per binary problem.")
    n_bounded_support_per_problem: list[int | None] | None = Field(default=None, description="Kernel models: support vectors at the upper bound C per binary problem (smo).")
    ranks: list[float] | None = Field(default=None, description="Ordinal models: the rank values, ascending.")
    thresholds: list[float] | None = Field(default=None, description="Ordinal models: score thresholds between adjacent ranks (a score above thresholds[k] ranks above ranks[k]).")
    n_pairs: int | None = Field(default=None, description="Pairwise objectives: number of ordered pairs in the training loss.")
    train_pairwise_accuracy: float | None = Field(default=None, description="Pairwise objectives: fraction of training pairs ordered correctly (ties count one half).")
    train_roc_auc: float | None = Field(default=None, description="roc_area models: area under the ROC curve on the training data.")
    search_results: dict[str, Any] | None = Field(default=None, description="Model selection: the cross-validation table and the best setting (see the job's search_results).")
    refit_params: dict[str, Any] | None = Field(default=None, description="Model selection: the C (and gamma) of the best setting, refit on all the data.")
    created_at: str = Field(description="Creation time, ISO 8601 UTC.")


class ModelList(Page):
    """A page of models, newest first."""

    items: list[ModelOut] = Field(description="The models of this page.")


class PredictRequest(StrictModel):
    """Rows to score."""

    instances: list[list[float] | dict[str, float]] = Field(
        description=(
            "Rows to predict: dense rows (lists of n_features numbers) or sparse rows "
            "({\"index\": value} maps, indices numbered as in the training upload). Features the model "
            "never saw (index beyond n_features) have weight 0."
        ),
    )


class PredictOut(BaseModel):
    """Predicted labels and decision values."""

    labels: list[float] | None = Field(description="Predicted label per row (ordinal models: the rank); null for models that only score (roc_area, ranking).")
    scores: list[float] | list[list[float]] = Field(
        description="Two classes: one score per row, positive meaning the larger label. More: one score per class per row (one-vs-rest)."
    )
