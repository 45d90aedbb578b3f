"""Schemas of model evaluation."""

from __future__ import annotations

from pydantic import Field

from core.schemas.base import ResponseModel, StrictModel
from core.scoring.metrics import HISTOGRAM_BINS, REGRESSION_POINTS, ROC_POINTS


class EvaluateRequest(StrictModel):
    """Which data set to evaluate the model on."""

    dataset_id: str = Field(
        description="Id of a data set of yours with the same feature numbering as the training data.", max_length=100
    )


class ClassMetrics(ResponseModel):
    """Precision, recall and F1 of one class."""

    label: float = Field(description="The class label.")
    precision: float = Field(description="Of the rows predicted as this class, the fraction that are.")
    recall: float = Field(description="Of the rows of this class, the fraction predicted as it.")
    f1: float = Field(description="Harmonic mean of precision and recall.")
    support: int = Field(description="Rows of this class in the data set.")


class ConfusionMatrix(ResponseModel):
    """Counts of (true label, predicted label)."""

    labels: list[float] = Field(
        description="Row and column labels: the model's labels and any other label found in the data."
    )
    matrix: list[list[int]] = Field(description="matrix[i][j]: rows with true label labels[i] predicted as labels[j].")


class RocCurve(ResponseModel):
    """Points of a ROC curve, from (0, 0) to (1, 1), by decreasing score threshold."""

    fpr: list[float] = Field(
        description="False positive rate of each point: negatives scored at or above it / negatives."
    )
    tpr: list[float] = Field(
        description="True positive rate of each point: positives scored at or above it / positives."
    )


class ScoreHistogram(ResponseModel):
    """How a one-class model's scores spread over the rows (the dashboard's histogram)."""

    edges: list[float] = Field(description="Bin edges, ascending, equal widths over the scores' range (0 inside).")
    counts: list[int] = Field(description="Rows per bin.")
    counts_outliers: list[int] | None = Field(
        default=None, description="With labels -1 / 1 in the data set: rows labelled -1 per bin."
    )
    counts_inliers: list[int] | None = Field(
        default=None, description="With labels -1 / 1 in the data set: rows labelled 1 per bin."
    )


class PredictedVsTrue(ResponseModel):
    """A regression's predictions beside the targets, for a scatter plot."""

    y_true: list[float] = Field(description="The targets of the rows shown.")
    y_pred: list[float] = Field(description="The model's predictions for the same rows, in the same order.")
    n_rows: int = Field(
        description=f"Rows evaluated; past {REGRESSION_POINTS} a seeded sample of that many is shown, in row order."
    )


class EvaluationOut(ResponseModel):
    """Metrics of a model on a data set. Fields that do not apply to the model's task are null."""

    model_id: str = Field(description="The model.")
    dataset_id: str = Field(description="The data set.")
    n_samples: int = Field(description="Rows evaluated.")
    task: str = Field(description="`classification`, `ordinal`, `roc_area`, `ranking`, `regression` or `one_class`.")
    outlier_fraction: float | None = Field(
        default=None,
        description="One-class models: the fraction of rows predicted -1 (outliers). With labels -1 (outlier) and "
        "1 (inlier) in the data set, the classification metrics are given too: those of two classes (precision, "
        "recall, F1 of the larger label, 1), with the outliers' in per_class.",
    )
    accuracy: float | None = Field(
        default=None, description="Fraction of rows whose predicted label (or rank) is right."
    )
    error_rate: float | None = Field(default=None, description="1 - accuracy.")
    precision: float | None = Field(
        default=None, description="Two classes: of the positive class (the larger label); more: macro average."
    )
    recall: float | None = Field(default=None, description="Two classes: of the positive class; more: macro average.")
    f1: float | None = Field(default=None, description="Two classes: of the positive class; more: macro average.")
    prbep: float | None = Field(
        default=None,
        description="Precision/recall break-even point (two classes, or roc_area): precision among the k highest scores, k = number of positives.",
    )
    roc_auc: float | None = Field(
        default=None, description="Area under the ROC curve (two classes; more: macro average of one-vs-rest AUCs)."
    )
    roc_curve: RocCurve | None = Field(
        default=None,
        description="Two classes (and roc_area): the ROC curve, one point per distinct score with collinear points "
        f"dropped (as scikit-learn's roc_curve), at most {ROC_POINTS} of them (evenly spaced over a longer curve).",
    )
    confusion_matrix: ConfusionMatrix | None = Field(
        default=None, description="Counts of true versus predicted labels."
    )
    per_class: list[ClassMetrics] | None = Field(
        default=None, description="Precision, recall and F1 per class of the model."
    )
    log_loss: float | None = Field(
        default=None,
        description="Models with probabilities (calibrated, or logistic regression): mean of -log P(true label), P "
        "clipped to [1e-15, 1] (scikit-learn's log_loss). Labels the model does not know count as P = 1e-15.",
    )
    brier: float | None = Field(
        default=None,
        description="Models with probabilities: mean over rows of the squared distance between the probability "
        "vector and the true label's indicator (summed over labels; 0 is perfect, 2 the worst).",
    )
    mse: float | None = Field(
        default=None, description="Regression: mean squared error of the predicted values (scikit-learn's)."
    )
    mae: float | None = Field(default=None, description="Regression: mean absolute error of the predicted values.")
    r2: float | None = Field(
        default=None,
        description="Regression: R² = 1 - SSE / SST (scikit-learn's r2_score; constant targets: 1 if predicted "
        "exactly, else 0).",
    )
    score_histogram: ScoreHistogram | None = Field(
        default=None,
        description=f"One-class models: a histogram of the scores in {HISTOGRAM_BINS} bins (negative: outliers).",
    )
    predicted_vs_true: PredictedVsTrue | None = Field(
        default=None, description="Regression: predictions beside the targets (the dashboard's scatter plot)."
    )
    pairwise_accuracy: float | None = Field(
        default=None,
        description="Pairwise tasks: fraction of pairs with y_i > y_j (same qid for ranking) scored s_i > s_j; ties count one half.",
    )
    kendall_tau: float | None = Field(
        default=None,
        description="Pairwise tasks: Kendall's tau-b between scores and labels (ranking: mean over queries).",
    )
