"""The JSON model document (export ``format=json``, import ``format=json``) and the calibration of a model.

A model document holds everything needed to score rows without Hinge:

- ``linear`` and ``ranking``: score_c(x) = sum_j weights[c][j] * x_j + offsets[c].
- ``kernel``: score_c(x) = sum_s coef[c][s] * K(sv_s, x) + offsets[c], sv_s the rows of ``support_vectors``.
- Two labels: one score, positive for labels[1] (the larger). More labels, ``multiclass: "ovr"``: one
  score per label, the label of the largest wins. ``"ovo"`` (LIBSVM imports): one score per pair of
  ``ovo_labels`` (0,1), (0,2), ..., (1,2), ..., positive for the first of the pair; the class with most
  pair wins is predicted, ties going to the one listed first.
- ``ordinal``: the predicted rank is ranks[number of thresholds below the score].
- ``probability``: P = 1 / (1 + exp(A * score + B)) per score, or a softmax over the scores; see ``Calibration``.

Feature columns count from 0 in ``weights`` and ``support_vectors.indices``; ``zero_based`` says how
the sparse rows of a predict request are numbered (as the training upload was).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.schemas.base import StrictModel
from core.schemas.enums import ModelKind, Multiclass, StopReason, Task
from core.solvers import SolverName


class Calibration(BaseModel):
    """Probabilities of a calibrated model: sigmoids of its scores, or one softmax over them (``multinomial``)."""

    model_config = ConfigDict(extra="forbid")

    method: Literal["platt_ovr", "multinomial", "pairwise_coupling"] = Field(
        description=(
            "`platt_ovr`: two labels: P(larger label) = 1 / (1 + exp(A[0] * score + B[0])); more labels (imports): each "
            "label's sigmoid of its one-vs-rest score, divided by their sum. `multinomial` (multi-class models trained "
            "here): P = softmax(weights @ scores + intercepts) over the one-vs-rest scores. `pairwise_coupling` (LIBSVM "
            "one-vs-one imports): the pairs' sigmoids coupled by Wu, Lin and Weng's second method, as LIBSVM's `-b 1`."
        )
    )
    A: list[float] | None = Field(
        default=None,
        description="`platt_ovr` and `pairwise_coupling`: slope per score column (negative when larger scores mean the positive class).",
    )
    B: list[float] | None = Field(
        default=None, description="`platt_ovr` and `pairwise_coupling`: offset per score column."
    )
    weights: list[list[float]] | None = Field(
        default=None,
        description="`multinomial`: K x K matrix, one row per label (in the order of `labels`), one column per score.",
    )
    intercepts: list[float] | None = Field(default=None, description="`multinomial`: one intercept per label.")
    ridge: float | None = Field(
        default=None,
        description="`multinomial` models trained here: the ridge on the off-diagonal weights (standardized scores) of the fit.",
    )
    cv_folds: int | None = Field(
        default=None, description="Cross-validation folds the decision values were taken from (models trained here)."
    )
    seed: int | None = Field(default=None, description="Seed of the fold assignment (models trained here).")
    seconds: float | None = Field(
        default=None, description="Seconds the cross-validation fits took (models trained here)."
    )
    source: str | None = Field(
        default=None, description="Where the sigmoids come from when imported (e.g. LIBSVM's probA/probB)."
    )


class ModelKernel(BaseModel):
    """A kernel with its parameters resolved to numbers."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["linear", "poly", "rbf", "sigmoid", "precomputed"] = Field(
        description="K(x, z): <x,z>; (gamma <x,z> + coef0)^degree; exp(-gamma |x-z|^2); tanh(gamma <x,z> + coef0); "
        "precomputed: x's value at the column of z's serial number (z's column 0), LIBSVM's -t 4."
    )
    gamma: float | None = Field(default=None, gt=0, allow_inf_nan=False, description="Scale (poly, rbf, sigmoid).")
    coef0: float | None = Field(default=None, allow_inf_nan=False, description="Constant term (poly, sigmoid).")
    degree: int | None = Field(default=None, ge=1, le=20, description="Degree (poly).")


class SupportVectors(BaseModel):
    """Stored rows of a kernel expansion, as a compressed sparse row matrix."""

    model_config = ConfigDict(extra="forbid")

    indptr: list[int] = Field(
        description="Row s holds the entries indptr[s] to indptr[s+1] - 1 (length: rows + 1, from 0)."
    )
    indices: list[int] = Field(description="Feature column of each entry, from 0, ascending within a row.")
    data: list[float] = Field(description="Value of each entry.")


class TrainingInfo(BaseModel):
    """How the model was trained (informational; kept on import when it fits these fields)."""

    model_config = ConfigDict(extra="allow")

    solver: SolverName | None = Field(default=None, description="The solver that trained it.")
    params: dict[str, Any] = Field(default_factory=dict, description="Its parameters.")
    n_iter: int | None = Field(default=None, description="Outer iterations, summed over the binary problems.")
    converged: bool | None = Field(default=None, description="Whether every binary problem met its stopping rule.")
    stop_reason: StopReason | None = Field(default=None, description="Why training stopped.")
    training_seconds: float | None = Field(default=None, description="Solver seconds.")
    objective: float | None = Field(
        default=None, description="Primal objective of the model (summed over one-vs-rest problems)."
    )
    train_accuracy: float | None = Field(default=None, description="Accuracy on the training data.")
    created_at: str | None = Field(default=None, description="When the model was stored (ISO 8601 UTC).")


class ModelDocument(StrictModel):
    """A model as a JSON document: `GET /v1/models/{id}/export?format=json`, and `POST /v1/models?format=json`."""

    format: Literal["hinge-model"] = Field(description="Always `hinge-model`.")
    format_version: Literal[1] = Field(description="Version of this layout: 1.")
    kind: ModelKind = Field(
        description="`linear` (weights), `kernel` (support vectors and coefficients) or `ranking` (one weight vector that scores rows)."
    )
    task: Task = Field(
        description="`classification`, a pairwise objective (`ordinal`, `roc_area`, `ranking`), or `regression`."
    )
    multiclass: Multiclass | None = Field(
        default=None, description="More than two labels: `ovr` (one score per label) or `ovo` (one per pair of labels)."
    )
    labels: list[float] | None = Field(
        description="Class labels ascending (ordinal: the ranks); null for models that only score."
    )
    ovo_labels: list[float] | None = Field(
        default=None,
        description="`ovo` models: the labels in the order their pairs are numbered (and ties are broken).",
    )
    nr_sv: list[int] | None = Field(
        default=None,
        description="`ovo` models: support vectors per class of `ovo_labels` (they are stored grouped in that order).",
    )
    n_features: int = Field(ge=1, description="Number of feature columns the model reads.")
    zero_based: bool = Field(description="Whether sparse predict rows number features from 0 (else from 1).")
    weights: list[list[float]] | None = Field(
        default=None, description="`linear` and `ranking`: one row of n_features weights per score."
    )
    offsets: list[float] = Field(description="The constant added to each score.")
    kernel: ModelKernel | None = Field(default=None, description="`kernel` models: the kernel.")
    support_vectors: SupportVectors | None = Field(
        default=None, description="`kernel` models: the stored rows of the expansion."
    )
    coef: list[list[float]] | None = Field(
        default=None, description="`kernel` models: one row of coefficients per score, one per support vector."
    )
    ranks: list[float] | None = Field(default=None, description="`ordinal` models: the ranks, ascending.")
    thresholds: list[float] | None = Field(
        default=None, description="`ordinal` models: score thresholds between adjacent ranks, ascending."
    )
    probability: Calibration | None = Field(
        default=None, description="Calibrated models: the sigmoids or the softmax that give class probabilities."
    )
    training: TrainingInfo | None = Field(default=None, description="How the model was trained.")

    @model_validator(mode="after")
    def _consistent(self) -> ModelDocument:
        n_scores = len(self.offsets)
        if self.kind in (ModelKind.linear, ModelKind.ranking):
            if self.weights is None:
                raise ValueError(f"a {self.kind.value} model needs `weights`")
            if len(self.weights) != n_scores:
                raise ValueError(f"weights has {len(self.weights)} rows but offsets has {n_scores} entries")
            for row, weights in enumerate(self.weights):
                if len(weights) != self.n_features:
                    raise ValueError(f"weights[{row}] has {len(weights)} entries; n_features is {self.n_features}")
        else:
            if self.kernel is None or self.support_vectors is None or self.coef is None:
                raise ValueError("a kernel model needs `kernel`, `support_vectors` and `coef`")
            if self.kernel.type != "linear" and self.kernel.gamma is None:
                raise ValueError(f"kernel.gamma is needed by the {self.kernel.type} kernel")
            sv = self.support_vectors
            m = len(sv.indptr) - 1
            if m < 0 or sv.indptr[0] != 0 or sv.indptr[-1] != len(sv.indices) or len(sv.indices) != len(sv.data):
                raise ValueError("support_vectors: indptr must start at 0 and end at len(indices) = len(data)")
            if any(b < a for a, b in zip(sv.indptr, sv.indptr[1:])):
                raise ValueError("support_vectors.indptr must not decrease")
            if any(not 0 <= j < self.n_features for j in sv.indices):
                raise ValueError(f"support_vectors.indices must lie in [0, n_features = {self.n_features})")
            if len(self.coef) != n_scores or any(len(row) != m for row in self.coef):
                raise ValueError(
                    f"coef must have {n_scores} rows (one per offset) of {m} entries (one per support vector)"
                )
        n_labels = len(self.labels) if self.labels is not None else 0
        if self.task == Task.classification:
            if n_labels < 2:
                raise ValueError("a classification model needs at least two labels")
            if self.labels is None or self.labels != sorted(set(self.labels)):
                raise ValueError("labels must be distinct and ascending")
            if self.multiclass == Multiclass.ovo:
                if self.ovo_labels is None or sorted(self.ovo_labels) != self.labels or self.kind != ModelKind.kernel:
                    raise ValueError(
                        "an ovo model is a kernel model whose ovo_labels are its labels in the file's order"
                    )
                expected = n_labels * (n_labels - 1) // 2
            else:
                expected = 1 if n_labels == 2 else n_labels
            if n_scores != expected:
                raise ValueError(
                    f"{n_labels} labels need {expected} score{'s' if expected > 1 else ''}, found {n_scores} offsets"
                )
        elif n_scores != 1:
            raise ValueError(f"a {self.task.value} model has one score, found {n_scores} offsets")
        if self.task == Task.regression and (self.labels is not None or self.kind == ModelKind.ranking):
            raise ValueError("a regression model is linear or kernel and has no labels (labels: null)")
        if self.task == Task.one_class and (self.labels != [-1.0, 1.0] or self.kind == ModelKind.ranking):
            raise ValueError("a one-class model is linear or kernel with labels [-1, 1] (outlier, inlier)")
        if self.task == Task.ordinal and (
            self.ranks is None or self.thresholds is None or len(self.thresholds) != len(self.ranks) - 1
        ):
            raise ValueError("an ordinal model needs ranks and thresholds (one fewer than ranks)")
        if self.probability is not None:
            if self.task != Task.classification:
                raise ValueError("probability applies to classification models only")
            calibration = self.probability
            if (calibration.method == "pairwise_coupling") != (self.multiclass == Multiclass.ovo):
                raise ValueError("pairwise_coupling goes with ovo models, platt_ovr or multinomial with the others")
            if calibration.method == "multinomial":
                if n_labels < 3:
                    raise ValueError("multinomial calibration needs more than two labels (two labels use platt_ovr)")
                if (
                    calibration.weights is None
                    or len(calibration.weights) != n_scores
                    or any(len(row) != n_scores for row in calibration.weights)
                    or calibration.intercepts is None
                    or len(calibration.intercepts) != n_scores
                ):
                    raise ValueError(
                        f"multinomial calibration needs weights of {n_scores} x {n_scores} and {n_scores} intercepts"
                    )
            elif (
                calibration.A is None
                or calibration.B is None
                or len(calibration.A) != n_scores
                or len(calibration.B) != n_scores
            ):
                raise ValueError(f"probability.A and probability.B need one entry per score ({n_scores})")
        return self
