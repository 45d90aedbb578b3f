"""How soon a waiting client learns that its job ended: the long poll and the event stream.

    python -m tests.benchmarks.bench_job_wait [--jobs 30] [--out results/bench_job_wait.json]

Starts ``hinge serve --workers 1`` (embedded Redis), uploads 2,000 generated rows of 10 features, then
submits ``--jobs`` small dcd jobs one after another. Each is waited for as a client does, alternately with
``GET /v1/jobs/{id}?wait_s=30`` (the long poll) and by reading ``GET /v1/jobs/{id}/events`` until its ``end``
event. For each job it records, on the one machine clock: the submit request's seconds, submit to the job's
``started_at``, the job's own seconds, and the job's ``finished_at`` to the answer (or the ``end`` event)
arriving. Medians per way of waiting go to tests/benchmarks/results/bench_job_wait.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

import httpx
import numpy as np

from tests.benchmarks.bench_scale import start_serve, stop_serve, wait_ready
from tests.benchmarks.environment import machine

RESULTS = Path(__file__).resolve().parent / "results" / "bench_job_wait.json"


def _timestamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _rows(n_rows: int = 2000, n_features: int = 10) -> bytes:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n_rows, n_features))
    y = np.where(X[:, 0] > 0, 1, -1)
    lines = (f"{y[i]} " + " ".join(f"{j + 1}:{X[i, j]:.4f}" for j in range(n_features)) for i in range(n_rows))
    return "\n".join(lines).encode()


def _wait_long_poll(http: httpx.Client, job_id: str) -> tuple[dict, float]:
    state = http.get(f"/v1/jobs/{job_id}", params={"wait_s": 30}).json()
    return state, time.time()


def _wait_events(http: httpx.Client, job_id: str) -> tuple[dict, float]:
    with http.stream("GET", f"/v1/jobs/{job_id}/events") as stream:
        event = None
        for line in stream.iter_lines():
            if line.startswith("event: "):
                event = line[len("event: ") :]
            elif line.startswith("data: ") and event == "end":
                return json.loads(line[len("data: ") :]), time.time()
    raise SystemExit(f"the event stream of {job_id} closed without an end event")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=30, help="jobs per way of waiting")
    parser.add_argument("--port", type=int, default=8533)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--data-dir", default="/tmp/hinge-bench-job-wait")
    args = parser.parse_args(argv)
    data_dir = Path(args.data_dir)
    serve = start_serve(args.port, 1, data_dir)
    base = f"http://127.0.0.1:{args.port}"
    ways = {"long_poll": _wait_long_poll, "events": _wait_events}
    runs: dict[str, list[dict]] = {way: [] for way in ways}
    try:
        wait_ready(base)
        http = httpx.Client(base_url=base, timeout=60)
        dataset = http.post("/v1/datasets", files={"file": ("rows.svm", _rows())}, data={"name": "rows"}).json()
        warm = http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd", "params": {"C": 1.0}}).json()
        _wait_long_poll(http, warm["id"])  # the worker's copy of the data set, before the measured jobs
        for _ in range(args.jobs):
            for way, wait in ways.items():
                sent = time.time()
                job = http.post(
                    "/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd", "params": {"C": 1.0}}
                ).json()
                accepted = time.time()
                state, answered = wait(http, job["id"])
                if state["status"] != "succeeded":
                    raise SystemExit(f"job {job['id']} ended {state['status']}: {state.get('error')}")
                started, finished = _timestamp(state["started_at"]), _timestamp(state["finished_at"])
                runs[way].append(
                    {
                        "submit_ms": (accepted - sent) * 1e3,
                        "submit_to_start_ms": (started - sent) * 1e3,
                        "job_ms": (finished - started) * 1e3,
                        "end_to_answer_ms": (answered - finished) * 1e3,
                        "total_ms": (answered - sent) * 1e3,
                    }
                )
                time.sleep(0.05)
    finally:
        stop_serve(serve)
        shutil.rmtree(data_dir, ignore_errors=True)
    medians = {
        way: {field: round(statistics.median(run[field] for run in entries), 2) for field in entries[0]}
        for way, entries in runs.items()
    }
    for way, values in medians.items():
        print(way, values, flush=True)
    args.out.write_text(
        json.dumps({"machine": machine(), "jobs": args.jobs, "medians": medians, "runs": runs}, indent=1) + "\n"
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
