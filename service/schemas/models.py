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
    kind: str = Field(description="`linear` (a weight vector per binary problem).")
    labels: list[float] = Field(description="The class labels, ascending. Two labels: scores are positive for the larger one.")
    n_features: int = Field(description="Number of features the model was trained on.")
    zero_based: bool = Field(description="Whether sparse predict rows use zero-based indices (as the training upload did).")
    n_iter: int = Field(description="Outer iterations, summed over the binary problems.")
    converged: bool = Field(description="Whether every binary problem met its stopping rule.")
    stop_reason: str = Field(description="converged, max_iter, deadline or canceled (the first non-converged reason over the binary problems).")
    training_seconds: float = Field(description="Solver seconds only (no data loading, no trace evaluation).")
    objective: float = Field(description="Primal objective 0.5|w|^2 + C*sum loss of the returned model (summed over one-vs-rest problems).")
    objectives: list[float] = Field(description="Primal objective per binary problem (one entry for two classes).")
    train_accuracy: float = Field(description="Accuracy of the model on its training data.")
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

    labels: list[float] = Field(description="Predicted label per row.")
    scores: list[float] | list[list[float]] = Field(
        description="Two classes: one score per row, positive meaning the larger label. More: one score per class per row (one-vs-rest)."
    )
