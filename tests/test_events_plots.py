"""The live stream (server-sent events, resumable) and the pictures (trace and search, SVG and PNG)."""

from __future__ import annotations

import json
import struct
import xml.etree.ElementTree as ET

import pytest
from httpx_sse import connect_sse

from tests.helpers import sparse_problem, to_svmlight, upload, wait_job

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def busy_dataset(service):
    """Random labels and a huge C: dcd runs until its deadline, recording a point per pass."""
    with service.client() as http:
        response = upload(http, to_svmlight(*sparse_problem(3000, 200, 10, seed=11, random_labels=True)), name="busy")
        assert response.status_code == 201, response.text
        return response.json()


@pytest.fixture(scope="module")
def three_classes(service):
    with service.client() as http:
        response = upload(http, to_svmlight(*sparse_problem(900, 20, 6, seed=12, n_classes=3)), name="three")
        assert response.status_code == 201, response.text
        return response.json()


def busy_job(http, dataset_id: str, seconds: float = 2.0) -> dict:
    params = {"C": 1000.0, "tol": 1e-12, "max_iter": 10_000_000, "shrinking": False, "max_seconds": seconds}
    response = http.post("/v1/jobs", json={"dataset_id": dataset_id, "solver": "dcd", "params": params})
    assert response.status_code == 202, response.text
    return response.json()


def follow(http, job_id: str, headers: dict | None = None, stop_after_traces: int | None = None) -> list:
    """The events of a job's stream (all of them, or until ``stop_after_traces`` trace events)."""
    events = []
    with connect_sse(http, "GET", f"/v1/jobs/{job_id}/events", headers=headers or {}, timeout=60.0) as source:
        assert source.response.headers["content-type"].startswith("text/event-stream")
        for event in source.iter_sse():
            events.append(event)
            if event.event == "end":
                break
            if stop_after_traces is not None and sum(e.event == "trace" for e in events) >= stop_after_traces:
                break
    return events


def test_event_stream_sees_every_trace_point_once_in_order(http, busy_dataset):
    job = busy_job(http, busy_dataset["id"])
    events = follow(http, job["id"])
    kinds = [e.event for e in events]
    assert kinds[0] == "status" and kinds[-1] == "end"
    assert "progress" in kinds
    end = json.loads(events[-1].data)
    assert end["status"] == "succeeded" and end["stop_reason"] == "deadline"
    streamed = [json.loads(e.data) for e in events if e.event == "trace"]
    stored = http.get(f"/v1/jobs/{job['id']}/trace").json()["points"]
    assert len(stored) >= 5
    assert [p.pop("index") for p in streamed] == list(range(len(stored)))
    assert streamed == [{k: v for k, v in p.items() if v is not None or k in streamed[0]} for p in stored]
    # every event's id counts the trace points sent before it (and with it)
    assert [int(e.id) for e in events if e.event == "trace"] == list(range(1, len(stored) + 1))
    statuses = [json.loads(e.data)["status"] for e in events if e.event == "status"]
    assert statuses[-1] == "running"
    progress = [json.loads(e.data) for e in events if e.event == "progress"]
    assert all(0.0 <= p["fraction"] <= 1.0 and p["phase"] for p in progress if p.get("fraction") is not None)


def test_event_stream_resumes_after_last_event_id(http, busy_dataset):
    job = busy_job(http, busy_dataset["id"], seconds=2.5)
    first = follow(http, job["id"], stop_after_traces=3)
    last_id = first[-1].id
    rest = follow(http, job["id"], headers={"Last-Event-ID": last_id})
    seen = [json.loads(e.data)["index"] for e in first + rest if e.event == "trace"]
    stored = http.get(f"/v1/jobs/{job['id']}/trace").json()["points"]
    assert seen == list(range(len(stored)))
    # a finished job's stream replays its trace and ends
    replay = follow(http, job["id"], headers={"Last-Event-ID": str(len(stored) - 2)})
    assert [e.event for e in replay] == ["trace", "trace", "end"]
    assert http.get(f"/v1/jobs/{job['id']}/events", headers={"Last-Event-ID": "abc"}).status_code == 422
    assert http.get("/v1/jobs/job_nope/events").status_code == 404


def svg_ids(body: bytes) -> set[str]:
    root = ET.fromstring(body)
    assert root.tag == f"{SVG}svg"
    return {element.get("id") for element in root.iter() if element.get("id")}


def line_points(body: bytes, gid: str) -> int:
    """How many vertices the path of the line with this id has."""
    root = ET.fromstring(body)
    group = next(element for element in root.iter() if element.get("id") == gid)
    path = next(element for element in group.iter(f"{SVG}path"))
    return sum(token in ("L", "M") for token in path.get("d").split())


def png_size(body: bytes) -> tuple[int, int]:
    assert body[:8] == b"\x89PNG\r\n\x1a\n" and body[12:16] == b"IHDR"
    return struct.unpack(">II", body[16:24])


def test_trace_pictures_show_primal_dual_and_gap(http, busy_dataset):
    job = busy_job(http, busy_dataset["id"], seconds=1.0)
    wait_job(http, job["id"])
    points = http.get(f"/v1/jobs/{job['id']}/trace").json()["points"]
    svg = http.get(f"/v1/jobs/{job['id']}/trace.svg")
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
    ids = svg_ids(svg.content)
    assert {"primal-0", "dual-0", "gap-0"} <= ids
    assert not any(i.startswith("primal-1") for i in ids)
    # matplotlib drops vertices that would not show; the line still follows the trace
    assert 10 <= line_points(svg.content, "primal-0") <= min(len(points), 2000)
    png = http.get(f"/v1/jobs/{job['id']}/trace.png")
    assert png.status_code == 200 and png.headers["content-type"] == "image/png"
    assert png_size(png.content) == (800, 550)


def test_one_vs_rest_trace_picture_has_a_line_per_class(http, three_classes):
    job = http.post("/v1/jobs", json={"dataset_id": three_classes["id"], "solver": "dcd", "params": {"C": 1.0}}).json()
    wait_job(http, job["id"])
    ids = svg_ids(http.get(f"/v1/jobs/{job['id']}/trace.svg").content)
    assert {f"{series}-{k}" for series in ("primal", "dual", "gap") for k in range(3)} <= ids


def test_search_picture_shows_scores_against_C(http, three_classes):
    params = {"search": {"C": [0.01, 0.1, 1.0], "cv_folds": 3}}
    job = http.post("/v1/jobs", json={"dataset_id": three_classes["id"], "solver": "dcd", "params": params}).json()
    done = wait_job(http, job["id"])
    assert done["status"] == "succeeded", done
    svg = http.get(f"/v1/models/{done['model_id']}/search.svg")
    assert svg.status_code == 200
    ids = svg_ids(svg.content)
    assert {"search-C", "search-best"} <= ids
    assert line_points(svg.content, "search-C") == 3
    assert png_size(http.get(f"/v1/models/{done['model_id']}/search.png").content)[0] == 700
    assert http.get(f"/v1/jobs/{job['id']}/search.svg").status_code == 200
    # the job's trace has every fold's points, tagged; its picture shows the refit
    points = http.get(f"/v1/jobs/{job['id']}/trace").json()["points"]
    assert {p["fold"] for p in points if p.get("stage") == "search"} == {0, 1, 2}
    assert "primal-0" in svg_ids(http.get(f"/v1/jobs/{job['id']}/trace.svg").content)
    # a model without a search has no search picture
    plain = http.post("/v1/jobs", json={"dataset_id": three_classes["id"], "solver": "dcd", "params": {}}).json()
    plain_model = wait_job(http, plain["id"])["model_id"]
    missing = http.get(f"/v1/models/{plain_model}/search.svg")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "search_not_found"


def test_progress_of_a_running_job_has_phase_fraction_and_eta(http, busy_dataset):
    job = busy_job(http, busy_dataset["id"], seconds=3.0)
    seen = []
    for event in follow(http, job["id"]):
        if event.event == "progress":
            seen.append(json.loads(event.data))
    training = [p for p in seen if p.get("phase") == "training"]
    assert training, seen
    assert all(p["fraction"] is not None for p in training)
    final = http.get(f"/v1/jobs/{job['id']}").json()["progress"]
    assert final["phase"] == "done" and final["fraction"] == 1.0


def test_unknown_plot_targets_answer_404(http):
    for path in ("/v1/jobs/job_nope/trace.svg", "/v1/jobs/job_nope/trace.png", "/v1/models/mdl_nope/search.svg"):
        response = http.get(path)
        assert response.status_code == 404, path
        assert response.json()["error"]["code"].endswith("_not_found")
