"""Model selection's parameters: the grid, the folds and the metric of a cross-validated search (any solver's
``params.search``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictBool

from core.schemas.base import StrictModel


class SearchParams(StrictModel):
    """Model selection by cross-validation: every setting of the grid is scored, the best refit on all the data."""

    C: list[Annotated[float, Field(gt=0, allow_inf_nan=False)]] | None = Field(
        default=None, min_length=1, max_length=100, description="Values of C to try (default: the job's C only)."
    )
    gamma: list[Annotated[float, Field(gt=0, allow_inf_nan=False)]] | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="Kernel solvers: values of the kernel's gamma to try (default: the job's kernel gamma only).",
    )
    nu: list[Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]] | None = Field(
        default=None,
        min_length=1,
        max_length=20,
        description=(
            "The nu formulations (smo's `nu_svc`, `nu_svr` and `one_class`, dcd's `one_class`): values of nu to try "
            "(default: the job's nu only). Each value is a search of its own over the C and gamma grid, on the same "
            "folds; the table lists every setting with its nu, and the best over all is refit. With `distribute`, each "
            "(nu, fold, gamma) is a setting of its own."
        ),
    )
    epsilon: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]] | None = Field(
        default=None,
        min_length=1,
        max_length=20,
        description=(
            "The epsilon-SVRs (dcd's epsilon-insensitive losses, smo's `epsilon_svr`): values of epsilon to try "
            "(default: the job's epsilon only), as `nu` does (with `distribute` too)."
        ),
    )
    cv_folds: int = Field(
        default=5,
        ge=2,
        le=50,
        description=(
            "Number of cross-validation folds (stratified by label; grouped by qid for ranking; rows shuffled and "
            "dealt round robin for regression)."
        ),
    )
    metric: (
        Literal["accuracy", "roc_auc", "f1", "neg_log_loss", "pairwise_accuracy", "r2", "neg_mean_squared_error"] | None
    ) = Field(
        default=None,
        description=(
            "What the folds are scored by (higher is better). Default: accuracy for classification, "
            "pairwise_accuracy for cpa's pairwise objectives, r2 for regression. roc_auc and f1 are macro averages "
            "over classes when there are more than two. neg_log_loss (dcd's `loss: logistic` only, whose scores are "
            "log-odds): minus the mean log-loss of the held-out rows' probabilities, as scikit-learn's scoring of "
            "that name. Regression: r2 (R² of the held-out predictions) or neg_mean_squared_error (minus their "
            "mean squared error), scikit-learn's scorings of those names."
        ),
    )
    seed: int = Field(default=0, ge=0, le=2**63 - 1, description="Seed of the fold assignment.")
    warm_start: StrictBool = Field(
        default=True,
        description=(
            "dcd, ocas and smo: each fold walks the C grid upward, every fit starting from the previous one's "
            "solution (the table reports warm-started fits, iterations and stop reasons per setting); dcd's and "
            "ocas's refit walks the path up to the best C, smo's fits the best C alone."
        ),
    )
    measure_cold: StrictBool = Field(
        default=False,
        description=(
            "With warm_start: also fit fold 0 of every setting from a cold start, so that the table reports the "
            "iterations warm starts saved (measured). Costs those cold fits."
        ),
    )
    distribute: StrictBool = Field(
        default=False,
        description="Run each setting as its own RQ job, so that every worker of the deployment takes part; a final job refits the best.",
    )
    trace_fits: StrictBool = Field(
        default=False,
        description=(
            "Record the trace points of every fit of the search (the refit's included) as the solver's `trace_every` "
            "(and dcd's `trace_budget`) say. Off (the default): each fit records its last point only (cross-validation "
            "fits tagged `stage: search`, the refit's `stage: refit`), because a point of dcd or smo costs a pass over "
            "the data: on a9a, 7 values of C x 5 folds took 1.03 s with dcd's default budget (297 points) and 0.95 s "
            "without (36 points); 3.1 s with a point per pass (6,400 points)."
        ),
    )
