"""The OpenAPI document is true to the service: schemathesis with every check and every phase (examples,
coverage, fuzzing, stateful) finds nothing, and generated clients in other languages work with it.

The service under test runs without API keys (the default deployment; the document declares the
bearer key optional so that both modes are true to it). A data set, a job and a model exist before
the run, so that stateful sequences that start from a list (links from `items/0`) reach jobs and
models. tests/schemathesis.toml says which operations may also answer 422 to schema-valid data and why.

The TypeScript test installs openapi-typescript and typescript with npm into tests/.cache (skipped,
saying so, only when npm is missing), generates types from openapi/openapi.json and type-checks a
small program that uploads, trains, polls and predicts, and must not compile when it gets a field wrong.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import npm_install, sparse_problem, to_svmlight, upload, wait_job

pytestmark = pytest.mark.service  # the kinds of tests: tests/conftest.py, TEST_KINDS

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(__file__).resolve().parent / ".cache"
EXAMPLES = 12


@pytest.fixture(scope="module")
def seeded(service):
    """A data set, a finished job with a model (a model selection, so that its plots exist), a kernel model."""
    indptr, indices, data, y = sparse_problem(200, 3, 3, seed=2)
    with service.client() as http:
        dataset = upload(http, to_svmlight(indptr, indices, data, y)).json()
        kernel = http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "smo", "params": {"C": 1.0}}).json()
        assert wait_job(http, kernel["id"])["status"] == "succeeded"
        job = http.post(
            "/v1/jobs",
            json={
                "dataset_id": dataset["id"],
                "solver": "dcd",
                "params": {"C": 1.0, "search": {"C": [0.1, 1.0], "cv_folds": 2}},
            },
        ).json()
        job = wait_job(http, job["id"])
    assert job["status"] == "succeeded"
    return dataset, job


def test_schemathesis_all_checks_all_phases_find_nothing(service, seeded, tmp_path):
    report = tmp_path / "report.json"
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(ROOT / "tests" / "schemathesis.toml"),
        "run",
        f"{service.base_url}/openapi.json",
        "--checks",
        "all",
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--max-examples",
        str(EXAMPLES),
        "--seed",
        "1",
        "--workers",
        "1",
        "--generation-database",
        "none",
        "--no-color",
        "--report",
        "json",
        "--report-json-path",
        str(report),
    ]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=1800,
        env=dict(os.environ, HYPOTHESIS_STORAGE_DIRECTORY=str(tmp_path / "hypothesis")),
    )
    summary = json.loads(report.read_text())
    (ROOT / "tests" / ".cache").mkdir(exist_ok=True)
    (ROOT / "tests" / ".cache" / "schemathesis.log").write_text(result.stdout)  # the whole report, for a failure
    tail = result.stdout[-6000:]
    assert summary["phases"]["stateful"]["status"] in ("success", "failure"), summary["phases"]
    assert summary["failures"] == [] and summary["errors"] == [], tail
    assert result.returncode == 0, tail
    assert summary["operations"]["tested"] == summary["operations"]["total"]
    # stateful testing reached jobs and models: no operation only ever saw 404, except cancel (the fuzzing
    # phases cannot know a job id, and the jobs the stateful phase reaches have ended: cancel answers 409) and
    # the search pictures (only a search job has one, and whether the job at `items/0` of a list is the seeded
    # search or one the run created depends on how fast those jobs end; tests/test_events_plots.py draws them)
    unreached = {"POST /v1/jobs/{job_id}/cancel"} | {
        f"GET /v1/{kind}/{{{kind[:-1]}_id}}/search.{fmt}" for kind in ("jobs", "models") for fmt in ("svg", "png")
    }
    assert set(summary["warnings"]["missing_test_data"]) <= unreached, summary["warnings"]


def test_options_allow_lists_every_documented_method(http, seeded):
    document = http.get("/openapi.json").json()
    dataset, job = seeded
    for template, operations in document["paths"].items():
        path = (
            template.replace("{dataset_id}", dataset["id"])
            .replace("{job_id}", job["id"])
            .replace("{model_id}", job["model_id"])
        )
        answer = http.request("OPTIONS", path)
        assert answer.status_code == 405, (path, answer.status_code)
        allowed = {m.strip().lower() for m in answer.headers["allow"].split(",")}
        assert set(operations) <= allowed, (path, allowed)


def test_validation_errors_name_fields_without_union_tags(http, seeded):
    dataset, _ = seeded
    answer = http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd", "params": {"C": -1}})
    error = answer.json()["error"]
    assert answer.status_code == 422 and error["message"].startswith("params.C: ")
    assert error["details"][0]["loc"] == ["body", "params", "C"]
    answer = http.post(
        "/v1/jobs",
        json={"dataset_id": dataset["id"], "solver": "smo", "params": {"kernel": {"type": "rbf", "gamma": -2}}},
    )
    assert answer.json()["error"]["message"].startswith("params.kernel.gamma: "), answer.json()
    answer = http.post(
        "/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd", "params": {"class_weight": {"1": 0}}}
    )
    assert answer.status_code == 422 and answer.json()["error"]["message"].startswith("params.class_weight[1]: ")


def test_document_declares_what_generated_clients_need():
    from service.cli import openapi_document

    document = openapi_document()
    schemas = document["components"]["schemas"]
    upload_body = document["paths"]["/v1/datasets"]["post"]["requestBody"]["content"]["multipart/form-data"]
    assert upload_body["schema"]["properties"]["file"]["contentMediaType"] == "application/octet-stream"
    assert document["paths"]["/v1/jobs"]["post"]["responses"]["202"]["headers"]["Location"]["required"] is True
    assert "Retry-After" in document["paths"]["/v1/jobs"]["post"]["responses"]["429"]["headers"]
    assert (
        schemas["DcdParams"]["properties"]["class_weight"]["anyOf"][0]["additionalProperties"]["exclusiveMinimum"] == 0
    )
    for name, field in (("JobOut", "solver"), ("ModelOut", "kind"), ("ModelOut", "task"), ("JobOut", "stop_reason")):
        text = json.dumps(schemas[name]["properties"][field])
        assert "$ref" in text, (name, field, text)  # an enum component, not a plain string
    details = json.dumps(schemas["ErrorBody"]["properties"]["details"])
    assert "ValidationIssue" in details and "ParseErrorDetails" in details and "LimitDetails" in details
    assert set(schemas["ModelOut"]["required"]) == set(
        schemas["ModelOut"]["properties"]
    )  # answers always carry every field
    assert "probability" not in schemas["DcdParams"].get("required", [])  # request fields with defaults stay optional
    # a generated client reads an answer as its first declared content type: one per export format, the events as text
    for format, media in (
        ("json", "application/json"),
        ("liblinear", "text/plain"),
        ("libsvm", "text/plain"),
        ("onnx", "application/octet-stream"),
    ):
        content = document["paths"][f"/v1/models/{{model_id}}/export/{format}"]["get"]["responses"]["200"]["content"]
        assert list(content) == [media], (format, content)
    any_format = document["paths"]["/v1/models/{model_id}/export"]["get"]["responses"]["200"]["content"]
    assert next(iter(any_format)) == "application/octet-stream"  # every format's file as bytes
    events = document["paths"]["/v1/jobs/{job_id}/events"]["get"]["responses"]["200"]["content"]
    assert events == {"text/event-stream": {"schema": events["text/event-stream"]["schema"]}}
    assert not {"type", "properties"} & set(events["text/event-stream"]["schema"])  # no JSON object to parse
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if "requestBody" in operation:
                content = operation["requestBody"]["content"]
                assert all("example" in media or "examples" in media for media in content.values()), (method, path)
            if path.startswith("/v1/"):
                assert operation["security"] == [{"HTTPBearer": []}, {}], (method, path)
                assert {"401", "500", "503"} <= set(operation["responses"]), (method, path)
            if "{" not in path and "requestBody" not in operation:
                assert "404" not in operation["responses"], (method, path)


TYPESCRIPT_PROGRAM = """
import type { paths, components } from "./hinge";

type Job = components["schemas"]["JobOut"];
type Model = components["schemas"]["ModelOut"];
type JobRequest = paths["/v1/jobs"]["post"]["requestBody"]["content"]["application/json"];
type Upload = paths["/v1/datasets"]["post"]["requestBody"]["content"]["multipart/form-data"];

const base = process.env.HINGE_URL ?? "http://127.0.0.1:8000";

async function main(): Promise<void> {
  const upload: Upload = { file: new Blob(["1 1:0.5\\n-1 2:0.5\\n"]) };
  const form = new FormData();
  form.append("file", upload.file);
  const dataset: components["schemas"]["DatasetOut"] = await (await fetch(`${base}/v1/datasets`, { method: "POST", body: form })).json();
  const request: JobRequest = { dataset_id: dataset.id, solver: "dcd", params: { C: 0.5 } };  // defaults stay optional
  const submitted = await fetch(`${base}/v1/jobs`, { method: "POST", body: JSON.stringify(request),
                                                    headers: { "content-type": "application/json" } });
  const location: string | null = submitted.headers.get("Location");
  let job: Job = await submitted.json();
  while (job.status === "queued" || job.status === "running") {
    job = await (await fetch(`${base}${location}`)).json();
  }
  const solver: "dcd" | "cpa" | "ocas" | "smo" | "sampled_cuts" = job.solver;  // an enum, not a string
  if (job.model_id) {
    const model: Model = await (await fetch(`${base}/v1/models/${job.model_id}`)).json();
    const kind: "linear" | "kernel" | "ranking" = model.kind;
    const body: components["schemas"]["PredictRequest"] = { instances: [[1.0, 0.0], { "1": 2.0 }] };
    const answer: components["schemas"]["PredictOut"] = await (await fetch(`${base}/v1/models/${model.id}/predict`,
      { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } })).json();
    console.log(solver, kind, answer.labels, answer.probabilities);
    type Exported<F extends "json" | "liblinear" | "libsvm" | "onnx"> =
      paths[`/v1/models/{model_id}/export/${F}`]["get"]["responses"][200]["content"];
    const document: Exported<"json">["application/json"] = await (await fetch(`${base}/v1/models/${model.id}/export/json`)).json();
    const text: Exported<"libsvm">["text/plain"] = await (await fetch(`${base}/v1/models/${model.id}/export/libsvm`)).text();
    const onnx: Exported<"onnx">["application/octet-stream"] = await (await fetch(`${base}/v1/models/${model.id}/export/onnx`)).blob();
    const events: string = await (await fetch(`${base}/v1/jobs/${job.id}/events`)).text();
    const stream: paths["/v1/jobs/{job_id}/events"]["get"]["responses"][200]["content"]["text/event-stream"] = events;
    console.log(document.n_features, document.labels, text.length, onnx.size, events.length, stream);
  }
  const failure: components["schemas"]["ErrorResponse"] = await (await fetch(`${base}/v1/models/none`)).json();
  const details = failure.error.details;
  if (Array.isArray(details)) {
    console.log(details[0].loc, details[0].msg);
  } else if (details && "line" in details) {
    console.log(details.line, details.reason);
  }
}

main();
"""

WRONG_PROGRAM = """
import type { components } from "./hinge";
const job: components["schemas"]["JobOut"] = {} as components["schemas"]["JobOut"];
const solver: "dcd" = job.solver;
const typo: number = job.n_iterations;
"""

TRANSFORM = """
import fs from "node:fs";
import ts from "typescript";
import openapiTS, { astToString } from "openapi-typescript";

const BLOB = ts.factory.createTypeReferenceNode(ts.factory.createIdentifier("Blob"));
const schema = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const ast = await openapiTS(schema, {
  defaultNonNullable: false,
  transform(schemaObject) {
    if (schemaObject.format === "binary") return BLOB;  // file fields: Blob (openapi-typescript's documented transform)
  },
});
fs.writeFileSync(process.argv[3], astToString(ast));
"""


def test_typescript_client_generated_with_openapi_typescript_type_checks(tmp_path):
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip(
            "npm and node are needed to install openapi-typescript and typescript; they are not on this machine"
        )
    tools = CACHE / "typescript"
    npm_install(tools, "hinge-ts-check", ["openapi-typescript@7", "typescript@5", "@types/node@20"])
    work = tools / "work"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir()
    (tools / "generate.mjs").write_text(TRANSFORM)
    subprocess.run(
        ["node", str(tools / "generate.mjs"), str(ROOT / "openapi" / "openapi.json"), str(work / "hinge.ts")],
        cwd=tools,
        check=True,
        capture_output=True,
        timeout=300,
    )
    generated = (work / "hinge.ts").read_text()
    assert "file: Blob" in generated
    (work / "program.ts").write_text(TYPESCRIPT_PROGRAM)
    (work / "wrong.ts").write_text(WRONG_PROGRAM)
    tsc = [
        str(tools / "node_modules" / ".bin" / "tsc"),
        "--noEmit",
        "--strict",
        "--target",
        "es2022",
        "--module",
        "es2022",
        "--moduleResolution",
        "bundler",
        "--lib",
        "es2022,dom",
        "--types",
        "node",
        "--typeRoots",
        str(tools / "node_modules" / "@types"),
    ]
    ok = subprocess.run([*tsc, str(work / "program.ts")], cwd=work, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    wrong = subprocess.run([*tsc, str(work / "wrong.ts")], cwd=work, capture_output=True, text=True, timeout=300)
    assert wrong.returncode != 0 and "n_iterations" in wrong.stdout, wrong.stdout
    assert "'\"dcd\"'" in wrong.stdout or "dcd" in wrong.stdout  # a solver union is not assignable to "dcd" alone
