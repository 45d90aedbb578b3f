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


def test_generated_client_uploads_trains_polls_predicts(service, generated_client):
    from hinge_generated import Client
    from hinge_generated.api.datasets import upload_dataset
    from hinge_generated.api.jobs import get_job, get_trace, submit_job
    from hinge_generated.api.models import predict
    from hinge_generated.models import DcdJobRequest, DcdParams, PredictRequest
    from hinge_generated.types import File

    upload_body = next(
        getattr(importlib.import_module("hinge_generated.models"), name)
        for name in dir(importlib.import_module("hinge_generated.models"))
        if "DatasetUpload" in name
    )
    indptr, indices, data, y = sparse_problem(300, 12, 4, seed=11)
    text = to_svmlight(indptr, indices, data, y)
    client = Client(base_url=service.base_url, raise_on_unexpected_status=True, timeout=60)
    import io

    dataset = upload_dataset.sync(
        client=client, body=upload_body(file=File(payload=io.BytesIO(text), file_name="d.svm"))
    )
    assert dataset.n_samples == 300, dataset
    job = submit_job.sync(
        client=client, body=DcdJobRequest(dataset_id=dataset.id, solver="dcd", params=DcdParams(c=0.5, tol=0.01))
    )
    from tests.helpers import wait_for

    done = wait_for(
        lambda: (lambda j: j if j.status.value in ("succeeded", "failed") else None)(
            get_job.sync(job.id, client=client)
        ),
        timeout=120,
    )
    assert done.status.value == "succeeded"
    trace = get_trace.sync(job.id, client=client)
    assert len(trace.points) >= 1
    answer = predict.sync(done.model_id, client=client, body=PredictRequest(instances=[[0.0] * 12, [1.0] * 12]))
    assert len(answer.labels) == 2 and all(label in (-1, 1) for label in answer.labels)
    assert np.all(np.isfinite(answer.scores))
