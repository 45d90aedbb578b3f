"""The JSON model document (schema: ``core.schemas.model_files.ModelDocument``): written in pieces, read back.

Numbers are written with 17 significant digits at most (the shortest text that reads back as the
same double), so export then import gives the same model bit for bit.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping

import numpy as np
from pydantic import ValidationError

from core.schemas.enums import ModelKind, Multiclass, Task
from core.schemas.model_files import ModelDocument, TrainingInfo
from core.storage.documents import ModelDescription, ModelRecord
from service.interchange.common import ExportRefused, ModelFileError

NUMBERS_PER_PIECE = 8192
STRUCTURAL = tuple(name for name in ModelDocument.model_fields if name in ModelRecord.field_names())
"""Fields of a stored model that the document has at its top level (the others go to its ``training`` part)."""
HIDDEN = ("tenant", "arrays")
TRAINING_FIELDS = tuple(TrainingInfo.model_fields)
"""What an import keeps of the document's ``training`` part."""


def _numbers(values) -> Iterator[str]:
    """A JSON array of numbers, in pieces."""
    flat = np.asarray(values).reshape(-1).tolist()
    yield "["
    for start in range(0, len(flat), NUMBERS_PER_PIECE):
        yield ("," if start else "") + ",".join(map(repr, flat[start : start + NUMBERS_PER_PIECE]))
    yield "]"


def _rows(matrix) -> Iterator[str]:
    """A JSON array of arrays of numbers (one per row), in pieces."""
    matrix = np.asarray(matrix, dtype=np.float64)
    yield "["
    for index, row in enumerate(matrix):
        if index:
            yield ","
        yield from _numbers(row)
    yield "]"


def multiclass_of(model: ModelDescription) -> str | None:
    """`ovo`, `ovr` or None (two labels, or a model that only scores)."""
    if model.one_vs_one:
        return Multiclass.ovo.value
    labels = model.labels
    if (model.task or Task.classification) == Task.classification and labels is not None and len(labels) > 2:
        return Multiclass.ovr.value
    return None


def write_json(model: ModelRecord, arrays: dict) -> Iterator[str]:
    """The model as a JSON document, in pieces."""
    kind = model.kind
    if kind not in (ModelKind.linear, ModelKind.kernel, ModelKind.ranking):
        raise ExportRefused(f"unknown model kind {kind!r}")
    multiclass = multiclass_of(model)
    head = dict(
        format="hinge-model",
        format_version=1,
        kind=kind,
        task=model.task or Task.classification.value,
        multiclass=multiclass,
        labels=model.labels,
    )
    if multiclass == Multiclass.ovo:
        head.update(ovo_labels=model.ovo_labels, nr_sv=model.nr_sv)
    head.update(n_features=int(model.n_features), zero_based=bool(model.zero_based))
    yield json.dumps(head)[:-1]
    if kind in (ModelKind.linear, ModelKind.ranking):
        yield ', "weights": '
        yield from _rows(arrays["weights"])
    yield ', "offsets": '
    yield from _numbers(np.asarray(arrays["offsets"], dtype=np.float64))
    if kind == ModelKind.kernel:
        yield ', "kernel": ' + json.dumps(model.kernel)
        yield ', "support_vectors": {"indptr": '
        yield from _numbers(np.asarray(arrays["sv_indptr"], dtype=np.int64))
        yield ', "indices": '
        yield from _numbers(np.asarray(arrays["sv_indices"], dtype=np.int64))
        yield ', "data": '
        yield from _numbers(np.asarray(arrays["sv_data"], dtype=np.float64))
        yield '}, "coef": '
        yield from _rows(arrays["coef"])
    stored = model.to_document()  # the training part: the rest, in the stored order
    training = {key: value for key, value in stored.items() if key not in STRUCTURAL and key not in HIDDEN}
    tail = dict(ranks=model.ranks, thresholds=model.thresholds, probability=model.probability, training=training)
    yield ", " + json.dumps(tail)[1:]


def read_json(raw: bytes) -> tuple[ModelDescription, dict]:
    """(description, arrays) of a JSON model document; ModelFileError names the line (syntax) or the field (schema)."""
    try:
        document = ModelDocument.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "document"
        if first.get("type") == "json_invalid":
            raise ModelFileError(_line_of(raw, first), f"not valid JSON: {first.get('msg', '')}") from None
        raise ModelFileError(None, f"{where}: {first.get('msg', '')}") from None
    model = ModelDescription()  # its fields set in the order the stored document lists them
    model.kind = document.kind.value
    model.task = document.task.value
    model.labels = document.labels
    model.n_features = document.n_features
    model.zero_based = document.zero_based
    if document.multiclass is not None and document.multiclass == Multiclass.ovo:
        model.multiclass = Multiclass.ovo.value
        model.ovo_labels = document.ovo_labels
        model.nr_sv = document.nr_sv
    arrays: dict = {"offsets": _finite(document.offsets, "offsets")}
    if document.kind in (ModelKind.linear, ModelKind.ranking):
        arrays["weights"] = _finite(document.weights, "weights").reshape(len(document.offsets), document.n_features)
    else:
        sv = document.support_vectors
        if sv is None or document.kernel is None:
            raise ModelFileError(None, "support_vectors and kernel: a kernel model needs both")
        arrays.update(
            sv_indptr=np.asarray(sv.indptr, dtype=np.int64),
            sv_indices=np.asarray(sv.indices, dtype=np.int32),
            sv_data=_finite(sv.data, "support_vectors.data"),
            coef=_finite(document.coef, "coef").reshape(len(document.offsets), len(sv.indptr) - 1),
        )
        model.kernel = document.kernel.model_dump(exclude_none=True)
        model.n_support = len(sv.indptr) - 1
    if document.ranks is not None:
        model.ranks = document.ranks
        model.thresholds = document.thresholds
    if document.probability is not None:
        model.probability = document.probability.model_dump(exclude_none=True)
    if document.training is not None:
        training = document.training
        for name in TRAINING_FIELDS:  # by name: the fields TrainingInfo and the stored model share
            value = getattr(training, name)
            if value is not None:
                model.put(name, value.value if hasattr(value, "value") else value)
    else:
        model.params = {}
    return model, arrays


def _finite(values, where: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(array)):
        raise ModelFileError(None, f"{where}: every number must be finite")
    return array


def _line_of(raw: bytes, error: Mapping) -> int | None:
    """The line of a JSON syntax error (pydantic reports it in the message as 'line N column M')."""
    message = error.get("msg", "")
    marker = message.rfind("line ")
    if marker >= 0:
        digits = message[marker + 5 :].split(" ", 1)[0]
        if digits.isdigit():
            return int(digits)
    return None
