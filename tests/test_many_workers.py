"""Several workers on one queue: every job runs exactly once and every worker takes part."""

from __future__ import annotations

import time

import pytest

from tests.cluster import Cluster
from tests.helpers import sparse_problem, to_svmlight, upload, wait_job

pytestmark = pytest.mark.service  # the kinds of tests: tests/conftest.py, TEST_KINDS


@pytest.fixture(scope="module")
def three_workers(tmp_path_factory):
    cluster = Cluster(tmp_path_factory.mktemp("many")).start(workers=3)
    try:
        yield cluster
    finally:
        cluster.stop()


def test_thirty_jobs_three_workers_each_job_once(three_workers):
    with three_workers.http() as http:
        dataset = upload(http, to_svmlight(*sparse_problem(3000, 100, 10, seed=4))).json()
        ids = [
            http.post(
                "/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd", "params": {"C": 10.0, "tol": 0.001}}
            ).json()["id"]
            for _ in range(30)
        ]

        end = time.monotonic() + 300
        states = [wait_job(http, job_id, timeout=max(1.0, end - time.monotonic())) for job_id in ids]
    assert all(s["status"] == "succeeded" for s in states), [s for s in states if s["status"] != "succeeded"]
    records = [three_workers.job_record(job_id) for job_id in ids]
    assert all(int(r.get("attempts", 0)) == 1 for r in records), "each job ran exactly once"
    workers = {r["worker"] for r in records}
    assert len(workers) == 3, workers
    models = {s["model_id"] for s in states}
    assert len(models) == 30, "one model per job"
