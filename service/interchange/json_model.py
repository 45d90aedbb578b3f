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
from core.schemas.model_files import ModelDocument
from service.interchange.common import ExportRefused, ModelFileError

NUMBERS_PER_PIECE = 8192
STRUCTURAL = (
    "kind",
    "task",
    "multiclass",
    "labels",
    "ovo_labels",
    "nr_sv",
    "n_features",
    "zero_based",
    "kernel",
    "ranks",
    "thresholds",
    "probability",
)
HIDDEN = ("tenant", "arrays")
TRAINING_FIELDS = (
    "solver",
    "params",
    "n_iter",
    "converged",
    "stop_reason",
    "training_seconds",
    "objective",
    "train_accuracy",
    "created_at",
)


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


def multiclass_of(meta: dict) -> str | None:
    """`ovo`, `ovr` or None (two labels, or a model that only scores)."""
    if meta.get("multiclass") == Multiclass.ovo:
        return "ovo"
    labels = meta.get("labels")
    if meta.get("task", Task.classification) == Task.classification and labels is not None and len(labels) > 2:
        return "ovr"
    return None


def write_json(meta: dict, arrays: dict) -> Iterator[str]:
    """The model as a JSON document, in pieces."""
    kind = meta.get("kind", "linear")
    if kind not in (ModelKind.linear, ModelKind.kernel, ModelKind.ranking):
        raise ExportRefused(f"unknown model kind {kind!r}")
    head = {
        "format": "hinge-model",
        "format_version": 1,
        "kind": kind,
        "task": meta.get("task", "classification"),
        "multiclass": multiclass_of(meta),
        "labels": meta.get("labels"),
    }
    if head["multiclass"] == Multiclass.ovo:
        head.update(ovo_labels=meta["ovo_labels"], nr_sv=meta["nr_sv"])
    head.update(n_features=int(meta["n_features"]), zero_based=bool(meta.get("zero_based", False)))
    yield json.dumps(head)[:-1]
    if kind in (ModelKind.linear, ModelKind.ranking):
        yield ', "weights": '
        yield from _rows(arrays["weights"])
    yield ', "offsets": '
    yield from _numbers(np.asarray(arrays["offsets"], dtype=np.float64))
    if kind == ModelKind.kernel:
        yield ', "kernel": ' + json.dumps(meta["kernel"])
        yield ', "support_vectors": {"indptr": '
        yield from _numbers(np.asarray(arrays["sv_indptr"], dtype=np.int64))
        yield ', "indices": '
        yield from _numbers(np.asarray(arrays["sv_indices"], dtype=np.int64))
        yield ', "data": '
        yield from _numbers(np.asarray(arrays["sv_data"], dtype=np.float64))
        yield '}, "coef": '
        yield from _rows(arrays["coef"])
    tail = {name: meta.get(name) for name in ("ranks", "thresholds", "probability")}
    training = {key: value for key, value in meta.items() if key not in STRUCTURAL and key not in HIDDEN}
    tail["training"] = training
    yield ", " + json.dumps(tail)[1:]


def read_json(raw: bytes) -> tuple[dict, dict]:
    """(metadata, arrays) of a JSON model document; ModelFileError names the line (syntax) or the field (schema)."""
    try:
        document = ModelDocument.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "document"
        if first.get("type") == "json_invalid":
            raise ModelFileError(_line_of(raw, first), f"not valid JSON: {first.get('msg', '')}") from None
        raise ModelFileError(None, f"{where}: {first.get('msg', '')}") from None
    meta: dict = {
        "kind": document.kind.value,
        "task": document.task.value,
        "labels": document.labels,
        "n_features": document.n_features,
        "zero_based": document.zero_based,
    }
    if document.multiclass is not None and document.multiclass == Multiclass.ovo:
        meta.update(multiclass="ovo", ovo_labels=document.ovo_labels, nr_sv=document.nr_sv)
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
        meta["kernel"] = document.kernel.model_dump(exclude_none=True)
        meta["n_support"] = len(sv.indptr) - 1
    if document.ranks is not None:
        meta["ranks"] = document.ranks
        meta["thresholds"] = document.thresholds
    if document.probability is not None:
        meta["probability"] = document.probability.model_dump(exclude_none=True)
    if document.training is not None:
        training = document.training
        for name in TRAINING_FIELDS:
            value = getattr(training, name)
            if value is not None:
                meta[name] = value.value if hasattr(value, "value") else value
    meta.setdefault("params", {})
    return meta, arrays


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
