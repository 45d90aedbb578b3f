"""A data directory written by an earlier version loads (issue 21: old data after the changes).

tests/data/hinge-data-cfa9d22/ holds the append-only file that `hinge serve` at commit cfa9d22 left
(a data set, a dcd and a calibrated smo model, their jobs) and what those models predicted then; see
tests/data/README.md. `hinge serve` started on a copy of it must list them all, predict the same
labels, scores and probabilities with the old models, and run a new job on the old data set.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import numpy as np
import pytest

from service.embedded_redis import free_port
from tests.helpers import wait_job
from tests.serve_harness import ServeRun

pytestmark = pytest.mark.service  # the kinds of tests: tests/conftest.py, TEST_KINDS

OLD = Path(__file__).resolve().parent / "data" / "hinge-data-cfa9d22"


@pytest.fixture(scope="module")
def old_service(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("old-data")
    shutil.copytree(OLD / "redis", data_dir / "redis")
    run = ServeRun(data_dir, free_port(), workers=1, preload_kernels=False)
    try:
        run.wait_ready()
        with httpx.Client(base_url=run.base_url, timeout=60) as http:
            yield http
    finally:
        run.ctrl_c()
        try:
            run.proc.wait(60)
        finally:
            run.close()


@pytest.fixture(scope="module")
def expected():
    return json.loads((OLD / "expected.json").read_text())


def listed(http: httpx.Client, resource: str) -> set[str]:
    return {
        item["id"] for item in http.get(f"/v1/{resource}", params={"limit": 1000}).raise_for_status().json()["items"]
    }


def test_old_data_sets_jobs_and_models_are_listed(old_service, expected):
    assert expected["dataset_id"] in listed(old_service, "datasets")
    assert {m["job_id"] for m in expected["models"].values()} <= listed(old_service, "jobs")
    assert {m["model_id"] for m in expected["models"].values()} <= listed(old_service, "models")
    for solver, old in expected["models"].items():
        job = old_service.get(f"/v1/jobs/{old['job_id']}").raise_for_status().json()
        assert (job["status"], job["solver"], job["model_id"]) == ("succeeded", solver, old["model_id"])
        assert old_service.get(f"/v1/jobs/{old['job_id']}/trace").raise_for_status().json()["points"]
        model = old_service.get(f"/v1/models/{old['model_id']}").raise_for_status().json()
        assert model["dataset_id"] == expected["dataset_id"]


@pytest.mark.parametrize("solver", ["dcd", "smo"])
def test_an_old_model_predicts_what_it_predicted(old_service, expected, solver):
    old = expected["models"][solver]
    body = {"instances": expected["rows"], "probabilities": old["predict"]["probabilities"] is not None}
    now = old_service.post(f"/v1/models/{old['model_id']}/predict", json=body).raise_for_status().json()
    assert now["labels"] == old["predict"]["labels"]
    np.testing.assert_allclose(now["scores"], old["predict"]["scores"], rtol=1e-12, atol=1e-12)
    if old["predict"]["probabilities"] is not None:
        np.testing.assert_allclose(now["probabilities"], old["predict"]["probabilities"], rtol=1e-12, atol=1e-12)


def test_a_new_job_trains_on_the_old_data_set(old_service, expected):
    job = old_service.post(
        "/v1/jobs", json={"dataset_id": expected["dataset_id"], "solver": "dcd", "params": {"C": 1.0}}
    ).raise_for_status()
    done = wait_job(old_service, job.json()["id"], timeout=300)
    assert done["status"] == "succeeded", done
    answer = old_service.post(f"/v1/models/{done['model_id']}/predict", json={"instances": expected["rows"]})
    assert len(answer.raise_for_status().json()["labels"]) == len(expected["rows"])
