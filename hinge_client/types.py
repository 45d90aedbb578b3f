"""Types of the service's answers, as the OpenAPI document declares them (openapi/openapi.json).

These mirror the document's schemas by hand (``tests/test_client.py`` checks that every key named
here is a property of the schema it mirrors); answers are plain dicts at run time.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

Solver = Literal["dcd", "cpa", "ocas", "smo", "sampled_cuts"]
JobStatus = Literal["queued", "running", "succeeded", "failed", "canceled"]
ExportFormat = Literal["json", "liblinear", "libsvm", "onnx"]
ImportFormat = Literal["json", "liblinear", "libsvm"]


class TargetSummary(TypedDict):
    """TargetSummary: a data set's labels read as numbers (what a regression trains on)."""

    min: float
    max: float
    mean: float | None
    std: float | None
    integral: bool
    n_distinct: int | None


class Dataset(TypedDict):
    """DatasetOut: a stored data set."""

    id: str
    name: str
    format: Literal["svmlight", "csv"]
    n_samples: int
    n_features: int
    nnz: int
    labels: dict[str, int]
    targets: TargetSummary | None
    has_qid: bool
    zero_based: bool
    zero_based_guessed: bool | None
    created_at: str


class JobError(TypedDict):
    """JobError: why a job failed."""

    code: str
    message: str


class JobCores(TypedDict):
    """JobCores: the cores a job got from its machine's budget, and why."""

    cores: int
    wanted: int
    machine_cores: int
    reason: str


class WarningItem(TypedDict):
    """ResultWarning (the schema): why a succeeded job's model deserves a second look (a code and a sentence)."""

    code: Literal["max_iter", "not_converged", "no_better_than_majority", "search_incomplete", "parameter_out_of_range"]
    message: str


class Job(TypedDict):
    """JobOut: a training job."""

    id: str
    status: JobStatus
    dataset_id: str
    solver: Solver
    params: dict[str, Any]
    created_at: str
    started_at: str | None
    finished_at: str | None
    progress: dict[str, Any]
    model_id: str | None
    stop_reason: str | None
    error: JobError | None
    search_results: dict[str, Any] | None
    cores: JobCores | None
    warnings: list[WarningItem]


class Calibration(TypedDict, total=False):
    """Calibration: the sigmoids or the softmax behind class probabilities."""

    method: Literal["platt_ovr", "multinomial", "pairwise_coupling"]
    A: list[float] | None
    B: list[float] | None
    weights: list[list[float]] | None
    intercepts: list[float] | None
    ridge: float | None
    cv_folds: int | None
    seed: int | None


class Model(TypedDict):
    """ModelOut: a trained or imported model."""

    id: str
    source: Literal["trained", "imported"]
    import_format: ImportFormat | None
    job_id: str | None
    dataset_id: str | None
    solver: Solver | None
    params: dict[str, Any]
    kind: Literal["linear", "kernel", "ranking"]
    task: Literal["classification", "ordinal", "roc_area", "ranking", "regression", "one_class"]
    labels: list[float] | None
    n_features: int
    zero_based: bool
    zero_based_guessed: bool | None
    multiclass: Literal["ovr", "ovo"] | None
    probability: Calibration | None
    n_iter: int | None
    converged: bool | None
    stop_reason: str | None
    objective: float | None
    train_accuracy: float | None
    train_mse: float | None
    train_r2: float | None
    train_outlier_fraction: float | None
    warnings: list[WarningItem]
    created_at: str


class Prediction(TypedDict):
    """PredictOut: labels, scores and (when asked) probabilities."""

    labels: list[float] | None
    scores: list[float] | list[list[float]]
    probabilities: list[list[float]] | None


class TracePage(TypedDict):
    """TraceOut: convergence points from `since` on."""

    job_id: str | None
    status: JobStatus | None
    points: list[dict[str, Any]]
    next: int


class RocCurve(TypedDict):
    """RocCurve: the points of a two-class ROC curve, by decreasing score threshold."""

    fpr: list[float]
    tpr: list[float]


class ScoreHistogram(TypedDict, total=False):
    """ScoreHistogram: a one-class model's scores over the rows (bins of equal width; with labels -1 / 1, split)."""

    edges: list[float]
    counts: list[int]
    counts_outliers: list[int] | None
    counts_inliers: list[int] | None


class Evaluation(TypedDict, total=False):
    """EvaluationOut: metrics of a model on a data set (those that apply to its task)."""

    model_id: str
    dataset_id: str
    n_samples: int
    task: str
    accuracy: float | None
    error_rate: float | None
    f1: float | None
    roc_auc: float | None
    roc_curve: RocCurve | None
    mse: float | None
    mae: float | None
    r2: float | None
    outlier_fraction: float | None
    score_histogram: ScoreHistogram | None
    pairwise_accuracy: float | None
    kendall_tau: float | None


class Page(TypedDict):
    """A page of a list: items, total, offset, limit."""

    items: list[dict[str, Any]]
    total: int
    offset: int
    limit: int


SCHEMA_OF = {
    TargetSummary: "TargetSummary",
    Dataset: "DatasetOut",
    JobError: "JobError",
    Job: "JobOut",
    Calibration: "Calibration",
    Model: "ModelOut",
    Prediction: "PredictOut",
    TracePage: "TraceOut",
    ScoreHistogram: "ScoreHistogram",
    Evaluation: "EvaluationOut",
    Page: "DatasetList",
}
"""Which OpenAPI schema each type mirrors."""
