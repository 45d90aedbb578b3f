"""GET /v1/jobs/{id}?wait_s=N, the long poll: the answer comes when the job ends (or after N seconds), and the
Python client's ``wait_job`` waits that way, against the real service."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from hinge_client import Client
from tests.conftest import Database, database_url
from tests.helpers import assert_error, sparse_problem, to_svmlight, upload, wait_job

RUNS_UNTIL_STOPPED = {"C": 1000.0, "tol": 1e-12, "max_iter": 10_000_000}
"""dcd parameters that keep a job running until its deadline or a cancel (random labels, a huge C)."""


@pytest.fixture(scope="module")
def stubborn_dataset(service):
    with service.client() as http:
        response = upload(
            http, to_svmlight(*sparse_problem(3000, 200, 10, seed=3, random_labels=True)), name="stubborn"
        )
        assert response.status_code == 201, response.text
        return response.json()


def _running(http, dataset_id: str, **params) -> dict:
    job = http.post("/v1/jobs", json={"dataset_id": dataset_id, "solver": "dcd", "params": params}).json()
    return wait_job(http, job["id"], statuses=("running",), timeout=120)


def test_a_waiting_get_answers_with_the_job_ended(http, stubborn_dataset):
    job = _running(http, stubborn_dataset["id"], **RUNS_UNTIL_STOPPED, max_seconds=1.0)
    began = time.monotonic()
    answer = http.get(f"/v1/jobs/{job['id']}", params={"wait_s": 60})
    waited = time.monotonic() - began
    assert answer.status_code == 200, answer.text
    ended = answer.json()
    assert ended["status"] == "succeeded" and ended["stop_reason"] == "deadline" and ended["model_id"]
    assert waited < 60  # it answered when the job ended, not when the wait ran out


def test_a_waiting_get_answers_after_wait_s_with_the_job_as_it_is(http, stubborn_dataset):
    job = _running(http, stubborn_dataset["id"], **RUNS_UNTIL_STOPPED, max_seconds=60.0)
    try:
        began = time.monotonic()
        answer = http.get(f"/v1/jobs/{job['id']}", params={"wait_s": 0.3})
        assert answer.status_code == 200 and answer.json()["status"] == "running"
        assert time.monotonic() - began >= 0.3  # it did wait
    finally:
        http.post(f"/v1/jobs/{job['id']}/cancel")
        wait_job(http, job["id"], timeout=60)


def test_a_cancel_ends_the_wait_of_another_request(service, http, stubborn_dataset):
    job = _running(http, stubborn_dataset["id"], **RUNS_UNTIL_STOPPED, max_seconds=60.0)
    answers: list[httpx.Response] = []

    def wait() -> None:
        with service.client() as other:
            answers.append(other.get(f"/v1/jobs/{job['id']}", params={"wait_s": 60}))

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.2)
    assert http.post(f"/v1/jobs/{job['id']}/cancel").status_code == 202  # a running job: canceled with a model
    waiter.join(timeout=60)
    assert not waiter.is_alive() and answers[0].status_code == 200
    assert answers[0].json()["status"] == "canceled"


def test_a_finished_job_is_answered_at_once_and_wait_s_out_of_range_is_refused(http, stubborn_dataset):
    job = http.post(
        "/v1/jobs", json={"dataset_id": stubborn_dataset["id"], "solver": "dcd", "params": {"C": 1.0}}
    ).json()
    ended = wait_job(http, job["id"])
    assert http.get(f"/v1/jobs/{job['id']}", params={"wait_s": 60}).json() == ended
    for bad in ("61", "-1", "soon"):
        answer = http.get(f"/v1/jobs/{job['id']}", params={"wait_s": bad})
        assert_error(answer, 422, "validation_error")
        assert "wait_s" in answer.text
    assert_error(http.get("/v1/jobs/job_missing", params={"wait_s": 1}), 404, "job_not_found")


def test_the_client_waits_with_long_polls(service, stubborn_dataset):
    requests: list[httpx.Request] = []
    with Client(service.base_url, timeout=60.0) as client:
        client.http.event_hooks["request"].append(requests.append)
        job = client.submit_job(stubborn_dataset["id"], "dcd", dict(RUNS_UNTIL_STOPPED, max_seconds=1.5))
        ended = client.wait_job(job["id"])
    assert ended["status"] == "succeeded" and ended["stop_reason"] == "deadline"
    gets = [r for r in requests if r.method == "GET"]
    # a 0.2 s polling loop would have sent about 8; each of these waited on the service's side
    assert 1 <= len(gets) <= 2 and all(r.url.params["wait_s"] == "20.0" for r in gets), [str(r.url) for r in gets]


def test_long_polls_are_timed_apart_from_plain_reads(http, stubborn_dataset):
    job = _running(http, stubborn_dataset["id"], **RUNS_UNTIL_STOPPED, max_seconds=60.0)
    try:
        assert http.get(f"/v1/jobs/{job['id']}", params={"wait_s": 0.05}).json()["status"] == "running"
        assert http.get(f"/v1/jobs/{job['id']}", params={"wait_s": 0}).status_code == 200
    finally:
        http.post(f"/v1/jobs/{job['id']}/cancel")
        wait_job(http, job["id"], timeout=60)
    text = http.get("/metrics").text
    waited = 'hinge_http_request_duration_seconds_count{method="GET",route="/v1/jobs/{job_id}?wait_s",status="200"}'
    plain = 'hinge_http_request_duration_seconds_count{method="GET",route="/v1/jobs/{job_id}",status="200"}'
    assert waited in text and plain in text


def test_many_requests_wait_at_once_and_each_learns_its_own_end(service, http, stubborn_dataset):
    """One watcher looks at every waited-for job: 12 requests on 3 jobs that end at different times."""
    jobs = [
        http.post(
            "/v1/jobs",
            json={
                "dataset_id": stubborn_dataset["id"],
                "solver": "dcd",
                "params": dict(RUNS_UNTIL_STOPPED, max_seconds=seconds),
            },
        ).json()
        for seconds in (0.5, 1.0, 1.5)
    ]
    answers: dict[int, list] = {i: [] for i in range(len(jobs))}

    def wait(i: int) -> None:
        with service.client() as other:
            answers[i].append(other.get(f"/v1/jobs/{jobs[i]['id']}", params={"wait_s": 60}).json())

    waiters = [threading.Thread(target=wait, args=(i % len(jobs),)) for i in range(12)]
    for waiter in waiters:
        waiter.start()
    for waiter in waiters:
        waiter.join(timeout=120)
    assert not any(waiter.is_alive() for waiter in waiters)
    for i, job in enumerate(jobs):
        assert len(answers[i]) == 4
        assert all(answer["id"] == job["id"] and answer["status"] == "succeeded" for answer in answers[i]), answers[i]


@pytest.fixture()
def job_store(redis_server):
    import redis

    from core.storage.jobs import JobStore

    connection = redis.Redis.from_url(database_url(redis_server.url, Database.JOB_WAIT))  # (pub/sub is shared by all)
    connection.flushdb()
    yield JobStore(connection)
    connection.flushdb()
    connection.close()


def _running_record(jobs, job_id: str) -> None:
    from core.schemas.jobs import JobStatus
    from core.storage.job_record import JobRecord

    record = JobRecord(
        id=job_id, tenant="t", status=JobStatus.queued, dataset_id="ds_x", solver="dcd", params={}, created_at="now"
    )
    assert jobs.create(record)
    assert jobs.transition(job_id, (JobStatus.queued,), JobStatus.running)


DEADLINE_S = 20.0


class _Connected:
    """A stand-in for the waiting request: its client stays."""

    async def is_disconnected(self) -> bool:
        return False


def test_the_watcher_hears_a_jobs_end_published_and_remembers_it(job_store, monkeypatch):
    """The end comes through the channel the transition publishes on (the statuses read as a safety net are
    pushed out of the way here), a request that registers after it answers without waiting, and a deletion
    wakes too."""
    import asyncio

    from core.schemas.jobs import JobStatus
    from service.api import job_wait

    monkeypatch.setattr(job_wait, "CHECK_S", 3600.0)
    _running_record(job_store, "job_a")
    _running_record(job_store, "job_b")
    watcher = job_wait.JobEndWatcher(job_store)

    async def scenario() -> dict:
        timings = {}
        # the listener subscribes with the first wait: give it a moment before anything is published
        await watcher.wait(_Connected(), "job_none", time.monotonic() + 0.3)
        waiting = asyncio.ensure_future(watcher.wait(_Connected(), "job_a", time.monotonic() + DEADLINE_S))
        await asyncio.sleep(0.2)
        ended_at = time.monotonic()
        await asyncio.to_thread(
            job_store.transition, "job_a", (JobStatus.running,), JobStatus.succeeded, finished_at="now"
        )
        await waiting
        timings["end"] = time.monotonic() - ended_at
        began = time.monotonic()
        await watcher.wait(_Connected(), "job_a", time.monotonic() + DEADLINE_S)
        timings["after"] = time.monotonic() - began
        await asyncio.to_thread(job_store.transition, "job_b", (JobStatus.running,), JobStatus.failed, finished_at="n")
        await asyncio.sleep(0.1)
        watcher._recent.clear()  # forget the end: only the deletion's message can wake the next wait
        waiting = asyncio.ensure_future(watcher.wait(_Connected(), "job_b", time.monotonic() + DEADLINE_S))
        await asyncio.sleep(0.1)
        began = time.monotonic()
        await asyncio.to_thread(job_store.delete, "job_b")
        await waiting
        timings["deleted"] = time.monotonic() - began
        return timings

    timings = asyncio.run(scenario())
    # each wait ended long before its deadline (and the statuses are read hourly here): a message woke it, or
    # the memory of one
    assert all(seconds < DEADLINE_S / 4 for seconds in timings.values()), timings
