"""Schemas of the data-set routes."""

from __future__ import annotations

from enum import Enum

from pydantic import Field

from core.schemas.base import Page, ResponseModel


class DatasetFormat(str, Enum):
    """Text format of an upload."""

    svmlight = "svmlight"
    csv = "csv"


class ZeroBased(str, Enum):
    """How feature indices of an svmlight upload are numbered."""

    auto = "auto"
    true = "true"
    false = "false"


class DatasetLabels(str, Enum):
    """Whether the rows of an upload carry labels."""

    given = "given"
    none = "none"


class ValueDtype(str, Enum):
    """How the feature values of an upload are stored."""

    auto = "auto"
    float32 = "float32"
    float64 = "float64"


class StoredValueDtype(str, Enum):
    """How a stored data set's feature values are held."""

    float32 = "float32"
    float64 = "float64"


class TargetSummary(ResponseModel):
    """The label column of a data set read as numbers."""

    min: float = Field(description="The smallest label.")
    max: float = Field(description="The largest label.")
    mean: float | None = Field(description="The labels' mean (null when it overflows a double).")
    std: float | None = Field(
        description="The labels' standard deviation (population: divided by the number of rows; null when it "
        "overflows a double)."
    )
    integral: bool = Field(
        description="Whether every label is an integer (class labels); real-valued labels are regression targets."
    )
    n_distinct: int | None = Field(description="How many distinct label values; null: more than 1000.")


class DatasetOut(ResponseModel):
    """A stored data set."""

    id: str = Field(description="Data set id (`ds_…`).")
    name: str = Field(description="Name given at upload, or the uploaded file's name.")
    format: DatasetFormat = Field(description="Text format the upload was parsed as.")
    n_samples: int = Field(description="Number of rows (instances).")
    n_features: int = Field(description="Number of features (largest index, after the index base is applied).")
    nnz: int = Field(description="Number of stored (index, value) pairs.")
    labels: dict[str, int] = Field(
        description="Count of rows per label value, keyed by the label as text (`-1`, `1`, `2.5`); empty when the "
        "labels take more than 1000 distinct values (real-valued regression targets: see `targets`)."
    )
    targets: TargetSummary | None = Field(
        default=None,
        description="The labels as numbers, what a regression trains on (null for data sets stored before it was kept).",
    )
    labelled: bool = Field(
        default=True,
        description="False when uploaded with `labels=none`: the rows carried no label (every row's is 1), which only a "
        "one-class SVM trains on (smo's `svm_type: one_class`).",
    )
    has_qid: bool = Field(description="Whether rows carry `qid:` query ids (ranking data).")
    zero_based: bool = Field(description="Whether feature indices were read as zero-based (`auto` resolved).")
    zero_based_guessed: bool | None = Field(
        default=None,
        description="Whether `zero_based` was guessed (`zero_based=auto`: zero-based iff some feature index is 0, so "
        "a zero-based file that never uses index 0 is read as one-based with one feature fewer) rather than given "
        "(`true` or `false`). Null for CSV (no indices) and for data sets stored before this was recorded.",
    )
    compressed: bool = Field(description="Whether the upload was gzip-compressed.")
    bytes: int = Field(description="Size of the uploaded file in bytes, as sent.")
    text_bytes: int = Field(description="Size of the text after decompression.")
    sha256: str = Field(description="SHA-256 of the uploaded file, as sent (hex).")
    feature_names: list[str] | None = Field(
        default=None, description="CSV header names of the feature columns; null for svmlight."
    )
    value_dtype: StoredValueDtype = Field(
        default=StoredValueDtype.float64,
        description="How feature values are stored: `float32` (each value is the float32 nearest to its text; "
        "training sees that float32 widened to float64) or `float64` (each value is the double nearest to its "
        "text). Indices are always int32.",
    )
    max_row_norm_sq: float | None = Field(
        default=None,
        description="The largest squared Euclidean norm of a row, max_i |x_i|^2: the scale by which the largest "
        "usable C is judged (null for data sets stored before it was measured).",
    )
    created_at: str = Field(description="Creation time, ISO 8601 UTC.")


class DatasetList(Page):
    """A page of data sets, newest first."""

    items: list[DatasetOut] = Field(description="The data sets of this page.")
