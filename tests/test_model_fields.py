"""One model family ("One fact, one place", item 3): a model's fields are declared once, by
``core.storage.documents.ModelDescription`` and ``ModelRecord``. The API's ``ModelOut`` shows them (all but
``NOT_SHOWN``, and requires those every stored model has), the JSON document (``ModelDocument``) and its
training part (``TrainingInfo``) are made of them, and no code reads a model's fields by key. A record keeps
the order and the presence of its keys as the dict it replaced did, so that what is stored does not change.
"""

from __future__ import annotations

import ast
import json
from dataclasses import replace
from pathlib import Path

import pytest

from core.schemas.model_files import ModelDocument, TrainingInfo
from core.schemas.models import ModelOut
from core.storage.documents import NOT_SHOWN, ModelDescription, ModelRecord
from service.interchange.json_model import STRUCTURAL, TRAINING_FIELDS

ROOT = Path(__file__).resolve().parents[1]

PROVENANCE = dict(id="mdl_x", tenant="t", job_id="job_x", dataset_id="ds_x", created_at="now")


# -- what derives from the declaration ----------------------------------------------------------------------


def test_the_api_shows_every_field_of_a_stored_model_but_those_it_hides():
    assert set(ModelOut.model_fields) == set(ModelRecord.field_names()) - NOT_SHOWN
    assert NOT_SHOWN <= set(ModelRecord.field_names())


def test_the_api_requires_the_fields_every_stored_model_has():
    required = {name for name, spec in ModelOut.model_fields.items() if spec.is_required()}
    assert required == set(ModelRecord.required_field_names()) - NOT_SHOWN


def test_the_json_document_is_made_of_the_fields_of_the_record():
    arrays = {"weights", "offsets", "support_vectors", "coef"}  # the model's arrays, not its record
    envelope = {"format", "format_version", "training"}
    assert set(ModelDocument.model_fields) - arrays - envelope == set(STRUCTURAL)
    assert set(TRAINING_FIELDS) <= set(ModelRecord.field_names())
    assert TRAINING_FIELDS == tuple(TrainingInfo.model_fields)


MODEL_CODE = (
    "core/scoring",
    "service/interchange",
    "service/api/predict.py",
    "service/api/routes/models.py",
    "service/api/routes/model_files.py",
    "worker/runtime/model_staging.py",
    "worker/runtime/runs.py",
    "worker/training",
)
"""Where models are made, stored, scored and written."""


def _model_reads_by_key() -> list[str]:
    """``meta["..."]`` and ``meta.get("...")``: how the code read a model's fields before they were typed."""
    found = []
    for place in MODEL_CODE:
        paths = [ROOT / place] if place.endswith(".py") else sorted((ROOT / place).rglob("*.py"))
        for path in paths:
            for node in ast.walk(ast.parse(path.read_text())):
                subscript = isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                target = node.value if subscript else getattr(getattr(node, "func", None), "value", None)
                by_get = isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "get"
                name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", None)
                if (subscript or by_get) and name in ("meta", "model", "record", "calibration"):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_model_is_read_by_key():
    assert _model_reads_by_key() == []


# -- order and presence, as the dict had them ----------------------------------------------------------------


def test_a_model_built_field_by_field_is_written_in_the_order_it_was_built():
    model = ModelDescription()
    model.n_iter = 3
    model.gap_rel = None  # set to null: written as null (a solver with no bound)
    model.kind = "linear"  # set to its default: written where it was set
    model.labels = [-1.0, 1.0]
    model.n_iter = 4  # set again: stays where it was
    assert json.dumps(model.to_document()) == '{"n_iter": 4, "gap_rel": null, "kind": "linear", "labels": [-1.0, 1.0]}'


def test_a_field_nobody_set_is_not_written_and_an_optional_one_not_when_none():
    model = ModelDescription(kind="kernel", n_support=3)
    model.task = None  # optional: absent when None, set or not
    model.search_results = None
    assert model.to_document() == {"kind": "kernel", "n_support": 3}


def test_a_stored_model_keeps_its_keys_where_they_were_and_a_new_one_goes_last():
    document = dict(
        n_iter=1,
        converged=True,
        stop_reason="canceled",
        training_seconds=0.5,
        objective=None,
        gap_rel=None,
        kind="linear",
        labels=[0.0, 1.0],
        n_features=2,
        train_accuracy=0.5,
        solver="dcd",
        params={},
        zero_based=False,
        **PROVENANCE,
        arrays={},
        later_key="a field of a later version",
    )
    record = ModelRecord.from_document(document)
    assert record.to_document() == document and list(record.to_document()) == list(document)
    assert record.extra == {"later_key": "a field of a later version"}
    record.stop_reason = "interrupted"
    record.warnings = []
    assert list(record.to_document()) == [*document, "warnings"]
    assert record.to_document()["stop_reason"] == "interrupted"
    moved = replace(record, probability={"method": "platt_ovr", "A": [1.0], "B": [0.0]})
    assert list(moved.to_document()) == [*document, "warnings", "probability"]


def test_a_stored_model_lacking_a_field_every_model_has_is_refused():
    document = dict(kind="linear", labels=None, n_features=2, zero_based=False, solver=None, params={}, **PROVENANCE)
    with pytest.raises(TypeError, match="n_iter"):
        ModelRecord.from_document(document)


def test_a_key_this_version_does_not_name_is_put_in_order():
    model = ModelDescription()
    model.kind = "linear"
    model.put("created_at", "then")  # the JSON import's training part: a field of the record, not of the model
    model.put("solver", "dcd")
    assert list(model.to_document()) == ["kind", "created_at", "solver"] and model.extra == {"created_at": "then"}
    document = dict(model.to_document(), created_at="now", id="mdl_y", tenant="t", job_id=None, dataset_id=None)
    record = ModelRecord.from_document(
        dict(document, labels=None, n_features=1, zero_based=False, params={}, n_iter=None, converged=None)
        | dict(stop_reason=None, training_seconds=None, objective=None, train_accuracy=None)
    )
    assert record.created_at == "now" and record.extra == {}
    assert list(record.to_document())[:3] == ["kind", "created_at", "solver"], "where the document had it"
