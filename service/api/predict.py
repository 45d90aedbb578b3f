"""Predict requests in the API process: JSON rows to a sparse matrix, and the cache of loaded models.

No numba here: models are scored by ``core.scoring`` with numpy and scipy.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from threading import Lock

import numpy as np
import scipy.sparse as sp

from core.scoring.models import Scorer
from core.storage.documents import ModelRecord
from service.api.errors import unprocessable


def rows_to_matrix(
    instances: list, n_features: int, zero_based: bool, ignore_unknown: bool = False, *, reupload: str = ""
):
    """A dense array when every row is dense (lists), else a CSR matrix; 422 names the bad row.

    ``reupload`` (see ``reupload_hint``) ends the message of a row that looks zero-based where the model's
    data set was guessed one-based: a dense row one value too long, or a sparse row with index 0."""
    if instances and all(isinstance(row, list) for row in instances):
        return dense_rows(instances, n_features, reupload=reupload)
    return rows_to_csr(instances, n_features, zero_based, ignore_unknown, reupload=reupload)


def reupload_hint(record: ModelRecord) -> str:
    """How to re-upload the model's data set zero-based, when its one-based reading was a guess; else ""."""
    if record.zero_based or not record.zero_based_guessed:
        return ""
    dataset = f"data set {record.dataset_id}" if record.dataset_id else "training data set"
    return (
        f". The model's {dataset} was read as one-based because no feature index 0 appears in it (zero_based=auto "
        "guessed); if that file is zero-based (scikit-learn's dump_svmlight_file writes zero-based indices), "
        f"upload it again with zero_based=true and train again: the model then has {record.n_features + 1} features"
    )


def rows_to_csr(
    instances: list, n_features: int, zero_based: bool, ignore_unknown: bool = False, *, reupload: str = ""
) -> sp.csr_matrix:
    """Build a CSR matrix from dense rows (lists) and sparse rows ({"index": value}); 422 names the bad row.

    A sparse index beyond the model's features is a 422 naming the row and the index, or (with
    ``ignore_unknown``) a value the model gives no weight.
    """
    indptr = [0]
    indices: list[int] = []
    values: list[float] = []
    base = 0 if zero_based else 1
    for row_number, row in enumerate(instances):
        if isinstance(row, dict):
            for key, value in row.items():
                try:
                    index = int(key)
                except ValueError:
                    raise unprocessable(
                        f"instances[{row_number}]: feature index {key!r} is not an integer",
                        ["body", "instances", row_number, key],
                    ) from None
                if index < base:
                    raise unprocessable(
                        f"instances[{row_number}]: feature index {index} is below {base} "
                        f"(the training data was {'zero' if zero_based else 'one'}-based)"
                        + (reupload if index == 0 else ""),
                        ["body", "instances", row_number, key],
                    )
                if not np.isfinite(value):
                    raise unprocessable(
                        f"instances[{row_number}][{key!r}] is {JSON_SPELLING[str(float(value))]}: every value must be "
                        f"a finite number (row {row_number}, feature {index})",
                        ["body", "instances", row_number, key],
                    )
                if index - base < n_features:
                    indices.append(index - base)
                    values.append(value)
                elif not ignore_unknown:
                    last = n_features - 1 + base
                    raise unprocessable(
                        f"instances[{row_number}]: feature index {index} is beyond the model's {n_features} features "
                        f'(highest index {last}); send "ignore_unknown_features": true to score such rows anyway',
                        ["body", "instances", row_number, key],
                    )
        else:
            if len(row) != n_features:
                raise unprocessable(
                    f"instances[{row_number}] has {len(row)} values; the model has {n_features} features"
                    + (reupload if len(row) == n_features + 1 else ""),
                    ["body", "instances", row_number],
                )
            check_finite(np.asarray(row, dtype=np.float64).reshape(1, -1), row_number)
            indices.extend(range(n_features))
            values.extend(row)
        indptr.append(len(indices))
    data = np.asarray(values, dtype=np.float64)
    matrix = sp.csr_matrix(
        (data, np.asarray(indices, dtype=np.int64), np.asarray(indptr, dtype=np.int64)),
        shape=(len(instances), n_features),
    )
    matrix.sum_duplicates()
    return matrix


def dense_rows(instances: list, n_features: int, *, reupload: str = "") -> np.ndarray:
    """The fast path when every row is dense: one numpy conversion, then the width and finiteness checks."""
    for row_number, row in enumerate(instances):
        if len(row) != n_features:
            raise unprocessable(
                f"instances[{row_number}] has {len(row)} values; the model has {n_features} features"
                + (reupload if len(row) == n_features + 1 else ""),
                ["body", "instances", row_number],
            )
    dense = np.asarray(instances, dtype=np.float64).reshape(len(instances), n_features)
    check_finite(dense)
    return dense


JSON_SPELLING = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
"""How a non-finite number is written in the JSON a client sent (what pydantic's parser reads as one)."""


def check_finite(dense: np.ndarray, first_row: int = 0) -> None:
    """422 naming the row and the column (both from 0, as the JSON's indices) of the first value of ``dense`` that
    is NaN or infinite (a dense row's column is its feature)."""
    finite = np.isfinite(dense)
    if finite.all():
        return
    row, column = (int(i) for i in np.argwhere(~finite)[0])
    value = JSON_SPELLING[str(dense[row, column])]
    row += first_row
    raise unprocessable(
        f"instances[{row}][{column}] is {value}: every value must be a finite number "
        f"(row {row}, column {column}, counting from 0)",
        ["body", "instances", row, column],
    )


@dataclass
class LoadedModel:
    """A stored model ready to score rows: its record, its scorer (arrays loaded) and when the API last saw
    it still stored (monotonic seconds)."""

    record: ModelRecord
    scorer: Scorer
    checked_at: float


class ModelCache:
    """The most recently used models, kept in memory (models never change once stored)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._items: OrderedDict[str, LoadedModel] = OrderedDict()
        self._lock = Lock()

    def get(self, model_id: str) -> LoadedModel | None:
        """The cached model, marked most recently used, or None."""
        with self._lock:
            model = self._items.get(model_id)
            if model is not None:
                self._items.move_to_end(model_id)
            return model

    def put(self, model_id: str, model: LoadedModel) -> None:
        """Keep a model, evicting the least recently used beyond capacity."""
        with self._lock:
            self._items[model_id] = model
            self._items.move_to_end(model_id)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def drop(self, model_id: str) -> None:
        """Forget a model (after it was deleted)."""
        with self._lock:
            self._items.pop(model_id, None)
