"""What the OpenAPI document says beyond the routes' own declarations, so that it is true to the service
and serves generated clients (TypeScript, Python, ...) and stateful fuzzers well.

``finish_document`` runs once on FastAPI's generated document:

- optional query and header parameters are absent, not null (their schemas offer no `null`);
- security: every /v1 operation accepts a bearer key *or* nothing (``[{"HTTPBearer": []}, {}]``):
  an open deployment (no keys configured) needs none, a keyed one answers 401 without a valid key;
- honest response lists: 500 on every operation; 503 (Redis unavailable, with ``Retry-After``) on
  every operation that reads Redis; 401 on every /v1 operation; 404 only where an id is named (in the
  path, or ``dataset_id`` in the body); 413 where there is a body; no 422 where nothing can be invalid;
- response headers: ``Location`` on 201/202 answers that create something, ``Retry-After`` on 429 and
  503, ``WWW-Authenticate`` on 401;
- an example on every request body (schemathesis sends them first; readers copy them);
- links between operations (upload -> data set, job; job -> trace, cancel, model; model -> predict,
  evaluate, export, ...; a list's first item -> the same), so that stateful testing and generated
  clients can follow ids from answer to request.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

ERROR_REF = {"$ref": "#/components/schemas/ErrorResponse"}

RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before trying again.",
        "required": True,
        "schema": {"type": "integer", "minimum": 0},
    }
}
LOCATION = {"Location": {"description": "URL of the created resource.", "required": True, "schema": {"type": "string"}}}

DEFAULT_DESCRIPTIONS = {
    401: "Missing or invalid API key (only when the server has keys configured).",
    404: "No such resource (or not yours).",
    409: "The request conflicts with the resource's state.",
    413: "Over a size limit; `details` names the limit.",
    415: "Not a multipart/form-data body.",
    422: "Invalid request: the message and details name the field.",
    429: "Too many requests of this tenant; retry after `Retry-After` seconds.",
    500: "Internal error; the message gives the request id to quote.",
    503: "A backing service (Redis, the parser process) is unavailable; retry after `Retry-After` seconds.",
}
HEADERS = {
    401: {"WWW-Authenticate": {"description": "`Bearer`.", "required": True, "schema": {"type": "string"}}},
    429: RETRY_AFTER,
    503: RETRY_AFTER,
}


def error_responses(*statuses: int, descriptions: dict[int, str] | None = None) -> dict:
    """FastAPI ``responses`` entries for error statuses, each with the JSON error shape."""
    descriptions = descriptions or {}
    out = {}
    for status in statuses:
        entry = {
            "description": descriptions.get(status, DEFAULT_DESCRIPTIONS[status]),
            "content": {"application/json": {"schema": ERROR_REF}},
        }
        if status in HEADERS:
            entry["headers"] = deepcopy(HEADERS[status])
        out[status] = entry
    return out


def model_links(id_expression: str = "$response.body#/id") -> dict:
    """Links from an answer that names a model to the operations on it."""
    parameters = {"model_id": id_expression}
    return {
        "GetModel": {"operationId": "get_model", "parameters": parameters, "description": "The model."},
        "GetModelTrace": {
            "operationId": "get_model_trace",
            "parameters": parameters,
            "description": "Its convergence trace.",
        },
        "ExportModel": {"operationId": "export_model", "parameters": parameters, "description": "Export it."},
        "Predict": {"operationId": "predict", "parameters": parameters, "description": "Score rows with it."},
        "DeleteModel": {"operationId": "delete_model", "parameters": parameters, "description": "Delete it."},
    }


DATASET_LINKS = {
    "GetDataset": {
        "operationId": "get_dataset",
        "parameters": {"dataset_id": "$response.body#/id"},
        "description": "The data set.",
    },
    "SubmitJob": {
        "operationId": "submit_job",
        "requestBody": {"dataset_id": "$response.body#/id", "solver": "dcd"},
        "description": "Train a linear SVM on it.",
    },
    "DeleteDataset": {
        "operationId": "delete_dataset",
        "parameters": {"dataset_id": "$response.body#/id"},
        "description": "Delete it.",
    },
}
JOB_LINKS = {
    "GetJob": {
        "operationId": "get_job",
        "parameters": {"job_id": "$response.body#/id"},
        "description": "The job's state.",
    },
    "GetTrace": {
        "operationId": "get_trace",
        "parameters": {"job_id": "$response.body#/id"},
        "description": "Its convergence trace.",
    },
    "CancelJob": {
        "operationId": "cancel_job",
        "parameters": {"job_id": "$response.body#/id"},
        "description": "Cancel it.",
    },
}
JOB_MODEL_LINKS = {
    **model_links("$response.body#/model_id"),
    "Evaluate": {
        "operationId": "evaluate",
        "parameters": {"model_id": "$response.body#/model_id"},
        "requestBody": {"dataset_id": "$response.body#/dataset_id"},
        "description": "Evaluate the job's model on its training data.",
    },
}


def first_item(links: dict) -> dict:
    """The same links taken from the first item of a page (`items/0`)."""
    out = deepcopy(links)
    for link in out.values():
        link["parameters"] = {
            k: v.replace("$response.body#/", "$response.body#/items/0/") for k, v in link.get("parameters", {}).items()
        }
        if "requestBody" in link:
            link["requestBody"] = {
                k: v.replace("$response.body#/", "$response.body#/items/0/") if isinstance(v, str) else v
                for k, v in link["requestBody"].items()
            }
    return out


# operationId -> {status: {"links": ..., "headers": ...}} for answers that create or name resources
RESPONSE_EXTRAS: dict[str, dict[str, dict[str, Any]]] = {
    "upload_dataset": {"201": {"links": DATASET_LINKS, "headers": LOCATION}},
    "list_datasets": {"200": {"links": first_item(DATASET_LINKS)}},
    "list_jobs": {"200": {"links": first_item({**JOB_LINKS, **JOB_MODEL_LINKS})}},
    "list_models": {"200": {"links": first_item(model_links())}},
    "get_dataset": {"200": {"links": {"SubmitJob": DATASET_LINKS["SubmitJob"]}}},
    "submit_job": {"202": {"links": JOB_LINKS, "headers": LOCATION}},
    "get_job": {"200": {"links": JOB_MODEL_LINKS}},
    "cancel_job": {"202": {"links": {"GetJob": JOB_LINKS["GetJob"]}}},
    "get_model": {"200": {"links": model_links()}},
    "import_model": {"201": {"links": model_links(), "headers": LOCATION}},
}

UPLOAD_EXAMPLE = "+1 1:0.5 3:1.25\n-1 2:-0.75 3:0.5\n+1 1:1.5 2:0.25\n-1 1:-1 3:-0.5\n"
REQUEST_EXAMPLES: dict[str, dict[str, Any]] = {
    "upload_dataset": {"multipart/form-data": {"file": UPLOAD_EXAMPLE}},
    "submit_job": {
        "application/json": {
            "dataset_id": "ds_0123456789abcdef",
            "solver": "dcd",
            "params": {"C": 1.0, "tol": 0.01, "probability": False},
        }
    },
    "predict": {"application/json": {"instances": [[1.0, 0.5, -1.0], {"1": -2.0, "3": 1.5}], "probabilities": False}},
    "evaluate": {"application/json": {"dataset_id": "ds_0123456789abcdef"}},
}

NO_REDIS = ("/healthz",)


def _has_id(operation: dict, path: str) -> bool:
    if "{" in path:
        return True
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    return bool(body)  # JSON bodies of this API that name a resource: POST /v1/jobs (dataset_id)


def _no_null(parameter: dict) -> None:
    """An optional query or header parameter is null by being absent: its schema does not offer `null`
    (a client would send the text "null", which the route rightly refuses)."""
    schema = parameter.get("schema", {})
    options = schema.get("anyOf")
    if parameter.get("required") or parameter.get("in") not in ("query", "header") or not options:
        return
    kept = [option for option in options if option != {"type": "null"}]
    if len(kept) == len(options):
        return
    del schema["anyOf"]
    if len(kept) == 1:
        schema.update(kept[0])
    else:
        schema["anyOf"] = kept
    if schema.get("default", 0) is None:
        del schema["default"]


def finish_document(schema: dict) -> dict:
    """Apply the rules of the module docstring to a generated document (in place); returns it."""
    components = schema.setdefault("components", {})
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            for parameter in operation.get("parameters", []):
                _no_null(parameter)
            responses = operation.setdefault("responses", {})
            versioned = path.startswith("/v1/")
            if versioned:
                operation["security"] = [{"HTTPBearer": []}, {}]
                responses.setdefault("401", error_responses(401)[401])
            if "404" in responses and not _has_id(operation, path):
                del responses["404"]
            if "requestBody" in operation and versioned:
                responses.setdefault("413", error_responses(413)[413])
            responses.setdefault("500", error_responses(500)[500])
            if path not in NO_REDIS and "503" not in responses:
                responses["503"] = error_responses(503)[503]
            for status, entry in responses.items():
                if status.startswith(("4", "5")) and int(status) in HEADERS and "headers" not in entry:
                    if path == "/readyz" and status == "503":
                        continue  # not ready: no Retry-After (a readiness probe polls on its own schedule)
                    entry["headers"] = deepcopy(HEADERS[int(status)])
            for status, extra in RESPONSE_EXTRAS.get(operation.get("operationId"), {}).items():
                if status in responses:
                    for key, value in extra.items():
                        responses[status].setdefault(key, deepcopy(value))
            for media, example in REQUEST_EXAMPLES.get(operation.get("operationId"), {}).items():
                content = operation.get("requestBody", {}).get("content", {}).get(media)
                if content is not None:
                    content.setdefault("example", example)
    upload = (
        schema.get("paths", {})
        .get("/v1/datasets", {})
        .get("post", {})
        .get("requestBody", {})
        .get("content", {})
        .get("multipart/form-data")
    )
    if upload is not None:
        upload.setdefault(
            "encoding", {"file": {"contentType": "application/octet-stream, text/plain, application/gzip"}}
        )
        file_schema = upload.get("schema", {}).get("properties", {}).get("file")
        if file_schema is not None:
            file_schema.setdefault("contentMediaType", "application/octet-stream")
    bearer = components.get("securitySchemes", {}).get("HTTPBearer")
    if bearer is not None:
        bearer["description"] = (
            "API key (`hinge_<key id>_<secret>`), needed only when the server has keys configured "
            "(HINGE_API_KEYS or `hinge keys create`); an open deployment takes requests without it."
        )
    return schema
