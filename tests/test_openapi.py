"""The OpenAPI document: current, fully described, and good enough to generate a working client."""

from __future__ import annotations

import importlib
import subprocess
import sys

import numpy as np
import pytest

from service.cli import OPENAPI_PATH, openapi_document, openapi_text
from tests.helpers import sparse_problem, to_svmlight


def test_openapi_file_is_current():
    assert OPENAPI_PATH.exists(), "run `hinge openapi`"
    assert OPENAPI_PATH.read_text() == openapi_text(), "openapi/openapi.json is stale: run `hinge openapi`"


def _walk_properties(schema: dict, where: str, missing: list) -> None:
    for name, prop in schema.get("properties", {}).items():
        if not prop.get("description"):
            missing.append(f"{where}.{name}")


def test_every_schema_field_and_parameter_is_described():
    document = openapi_document()
    missing: list[str] = []
    for name, schema in document["components"]["schemas"].items():
        _walk_properties(schema, name, missing)
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                if not parameter.get("description"):
                    missing.append(f"{method.upper()} {path} parameter {parameter['name']}")
            body = operation.get("requestBody", {}).get("content", {})
            for media in body.values():
                _walk_properties(media.get("schema", {}), f"{method.upper()} {path} body", missing)
    assert not missing, f"fields without a description: {missing}"


def test_every_error_answer_has_the_error_shape():
    document = openapi_document()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if status.startswith(("4", "5")):
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/ErrorResponse"}, (path, method, status)


def test_job_request_is_a_union_discriminated_on_solver():
    document = openapi_document()
    body = document["paths"]["/v1/jobs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["discriminator"]["propertyName"] == "solver"
    assert "dcd" in body["discriminator"]["mapping"]


@pytest.fixture(scope="module")
def generated_client(tmp_path_factory):
    """A client package generated from openapi/openapi.json by openapi-python-client."""
    out = tmp_path_factory.mktemp("generated")
    config = out / "config.yaml"
    # named apart from this repository's own hinge_client package
    config.write_text(
        "post_hooks: []\nproject_name_override: hinge_generated\npackage_name_override: hinge_generated\n"
    )
    target = out / "hinge_generated"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "openapi_python_client",
            "generate",
            "--path",
            str(OPENAPI_PATH),
            "--meta",
            "none",
            "--output-path",
            str(target),
            "--config",
            str(config),
            "--fail-on-warning",
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module("hinge_generated")
    finally:
        sys.path.remove(str(out))


NOT_DRIVEN: dict[str, str] = {}
"""Operations the generated-client test may leave out, each with the reason (none: every route is driven)."""


def app_routes(routes) -> list:
    """Every APIRoute of the application, through the included routers (FastAPI keeps those as routes of their own)."""
    from fastapi.routing import APIRoute

    found = []
    for route in routes:
        if isinstance(route, APIRoute):
            found.append(route)
        inner = getattr(route, "original_router", None)
        if inner is not None:
            found.extend(app_routes(inner.routes))
    return found


def schema_operations() -> set[str]:
    """The application's routes as operations of the OpenAPI document (their names are the operation ids); the
    routes left out of the document are the pages for people (the dashboard, the API docs), never a /v1 route."""
    from core.config import Settings
    from service.api.app import create_app

    routes = app_routes(create_app(Settings(redis_url=None)).routes)
    hidden = {route.path for route in routes if not route.include_in_schema}
    assert not {path for path in hidden if path.startswith("/v1")}, hidden
    operations = {route.name for route in routes if route.include_in_schema}
    document = {op["operationId"] for ops in openapi_document()["paths"].values() for op in ops.values()}
    assert operations == document, operations ^ document  # the walk saw every route the document has
    return operations


def sse_events(text: str) -> list[tuple[str, str]]:
    """(event, data) of each event of a text/event-stream body (comments and retry lines skipped)."""
    events = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(":"))
        if "data" in fields:
            events.append((fields.get("event", "message"), fields["data"]))
    return events


def test_generated_client_drives_every_route(service, generated_client):
    """A client generated by openapi-python-client (a tool nobody on the project wrote) calls every operation of
    the API and reads each answer as its declared type: JSON as models, text as str, files as bytes."""
    import io
    import json

    from hinge_generated import Client, models
    from hinge_generated.api.datasets import delete_dataset, get_dataset, list_datasets, upload_dataset
    from hinge_generated.api.health import healthz, metrics, queue_stats, readyz
    from hinge_generated.api.jobs import cancel_job, delete_job, get_job, get_trace, job_events, list_jobs, submit_job
    from hinge_generated.api.models import (
        delete_model,
        evaluate,
        export_model,
        export_model_json,
        export_model_liblinear,
        export_model_libsvm,
        export_model_onnx,
        get_model,
        get_model_trace,
        import_model,
        list_models,
        predict,
    )
    from hinge_generated.api.plots import (
        job_search_svg,
        job_trace_png,
        job_trace_svg,
        model_search_png,
        model_search_svg,
    )
    from hinge_generated.types import File

    from tests.helpers import wait_for

    driven: set[str] = set()

    def call(operation, *args, status: int = 200, **kwargs):
        """One operation through the generated client; its parsed answer (the right status asserted)."""
        answer = operation.sync_detailed(*args, client=client, **kwargs)
        assert answer.status_code == status, (operation.__name__, answer.status_code, answer.content[:500])
        driven.add(operation.__name__.rsplit(".", 1)[-1])
        return answer

    def upload_body(operation) -> type:
        module = importlib.import_module(operation.__name__)
        return next(getattr(module, name) for name in dir(module) if name.endswith("Upload"))

    def file(content: bytes, name: str):
        return File(payload=io.BytesIO(content), file_name=name)

    client = Client(base_url=service.base_url, raise_on_unexpected_status=True, timeout=120)

    # health
    assert call(healthz).parsed.status == "ok"
    assert call(readyz).parsed.workers >= 1
    assert call(queue_stats).parsed.workers >= 1
    assert "# TYPE" in call(metrics).parsed

    # data sets
    indptr, indices, data, y = sparse_problem(300, 12, 4, seed=11)
    dataset = call(
        upload_dataset,
        body=upload_body(upload_dataset)(file=file(to_svmlight(indptr, indices, data, y), "d.svm")),
        status=201,
    ).parsed
    assert dataset.n_samples == 300, dataset
    assert call(get_dataset, dataset.id).parsed.id == dataset.id
    assert dataset.id in [item.id for item in call(list_datasets).parsed.items]

    # a search job, followed to its end: status, trace, events and pictures
    request = models.DcdJobRequest.from_dict(
        {
            "dataset_id": dataset.id,
            "solver": "dcd",
            "params": {"C": 0.5, "tol": 0.01, "search": {"C": [0.1, 1.0], "cv_folds": 2}},
        }
    )
    job = call(submit_job, body=request, status=202).parsed
    done = wait_for(
        lambda: (lambda j: j if j.status.value in ("succeeded", "failed") else None)(call(get_job, job.id).parsed),
        timeout=300,
    )
    assert done.status.value == "succeeded", done
    assert job.id in [item.id for item in call(list_jobs).parsed.items]
    trace = call(get_trace, job.id).parsed
    assert len(trace.points) >= 1
    events = sse_events(call(job_events, job.id).parsed)  # text/event-stream: the whole stream as text
    assert events[-1][0] == "end" and json.loads(events[-1][1])["status"] == "succeeded", events[-3:]
    assert sum(kind == "trace" for kind, _ in events) == len(trace.points)
    for picture, start in ((job_trace_svg, b"<svg"), (job_trace_png, b"\x89PNG"), (job_search_svg, b"<svg")):
        content = call(picture, job.id).content  # pictures are for people: declared without a content type
        assert start in content[:400], (picture.__name__, content[:100])

    # the model: read, predict, evaluate, pictures
    model_id = done.model_id
    model = call(get_model, model_id).parsed
    assert model.id == model_id
    assert model_id in [item.id for item in call(list_models).parsed.items]
    assert len(call(get_model_trace, model_id).parsed.points) >= 1
    rows = [[0.0] * 12, [1.0] * 12, [0.5, -1.0] * 6]
    answer = call(predict, model_id, body=models.PredictRequest(instances=rows)).parsed
    assert len(answer.labels) == 3 and all(label in (-1, 1) for label in answer.labels)
    assert np.all(np.isfinite(answer.scores))
    evaluation = call(evaluate, model_id, body=models.EvaluateRequest(dataset_id=dataset.id)).parsed
    assert 0.5 <= evaluation.accuracy <= 1.0
    for picture, start in ((model_search_svg, b"<svg"), (model_search_png, b"\x89PNG")):
        assert start in call(picture, model_id).content[:400], picture.__name__

    # export in each format, each read as its declared type
    document = call(export_model_json, model_id).parsed  # a ModelDocument
    assert document.n_features == 12 and sorted(document.labels) == [-1, 1]
    liblinear_text = call(export_model_liblinear, model_id).parsed  # text
    assert liblinear_text.startswith("solver_type ") and "\nw\n" in liblinear_text
    libsvm_text = call(export_model_libsvm, model_id).parsed  # text
    assert libsvm_text.startswith("svm_type c_svc") and "\nSV\n" in libsvm_text
    onnx_bytes = call(export_model_onnx, model_id).parsed.payload.read()  # bytes
    assert onnx_bytes[:1] == b"\x08", onnx_bytes[:16]  # a ModelProto opens with ir_version (field 1, varint)
    try:
        import onnxruntime
    except ImportError:
        pass
    else:
        session = onnxruntime.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
        onnx_labels = session.run(["label"], {"X": np.asarray(rows, dtype=np.float32)})[0]
        assert np.ravel(onnx_labels).tolist() == answer.labels
    try:
        from libsvm import svmutil
    except ImportError:
        pass
    else:
        import tempfile

        with tempfile.NamedTemporaryFile("w", suffix=".libsvm") as handle:
            handle.write(libsvm_text)
            handle.flush()
            assert svmutil.svm_load_model(handle.name).get_nr_class() == 2
    # the export by parameter: every format as bytes, the same files
    by_format = {"json": json.dumps(document.to_dict()), "liblinear": liblinear_text, "libsvm": libsvm_text}
    for format in ("json", "liblinear", "libsvm", "onnx"):
        content = call(export_model, model_id, format_=models.ExportFormat(format)).parsed.payload.read()
        if format == "onnx":
            assert content == onnx_bytes
        elif format == "json":
            assert json.loads(content) == json.loads(by_format["json"])
        else:
            assert content.decode() == by_format[format]

    # import what was exported: the copies predict as the model
    copies = []
    for format, content in (
        ("json", json.dumps(document.to_dict())),
        ("liblinear", liblinear_text),
        ("libsvm", libsvm_text),
    ):
        copy = call(
            import_model,
            body=upload_body(import_model)(file=file(content.encode(), f"model.{format}")),
            format_=models.ImportFormat(format),
            status=201,
        ).parsed
        assert call(predict, copy.id, body=models.PredictRequest(instances=rows)).parsed.labels == answer.labels
        copies.append(copy.id)

    # cancel a job that would run for long
    slow_data = to_svmlight(*sparse_problem(3000, 60, 12, seed=5, random_labels=True))
    slow_set = call(
        upload_dataset, body=upload_body(upload_dataset)(file=file(slow_data, "slow.svm")), status=201
    ).parsed
    slow = models.DcdJobRequest.from_dict(
        {
            "dataset_id": slow_set.id,
            "solver": "dcd",
            "params": {"C": 1000.0, "tol": 1e-12, "max_iter": 10_000_000, "shrinking": False},
        }
    )
    slow_job = call(submit_job, body=slow, status=202).parsed
    assert call(cancel_job, slow_job.id, status=202).parsed.id == slow_job.id
    ended = wait_for(
        lambda: (lambda j: j if j.status.value not in ("queued", "running") else None)(
            call(get_job, slow_job.id).parsed
        ),
        timeout=120,
    )
    assert ended.status.value == "canceled", ended

    # delete: jobs, models, data sets
    for job_id in (job.id, slow_job.id):
        call(delete_job, job_id, status=204)
    for ident in (model_id, *copies, *([ended.model_id] if ended.model_id else [])):
        call(delete_model, ident, status=204)
    for ident in (dataset.id, slow_set.id):
        call(delete_dataset, ident, status=204)
    assert call(get_dataset, dataset.id, status=404).parsed.error.code == "dataset_not_found"

    missing = schema_operations() - driven - set(NOT_DRIVEN)
    assert not missing, (
        f"routes no generated-client call drove (drive them above, or list them in NOT_DRIVEN): {missing}"
    )
