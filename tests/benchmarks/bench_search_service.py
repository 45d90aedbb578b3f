"""A search through the service, 1 process against 2: what a user of `hinge serve` gets (issue 22, item 1).

    python -m tests.benchmarks.bench_search_service [--workers 1] [--rounds 3] [--sets a9a,sector]

Starts `hinge serve --workers N` on a fresh data directory and uploads the sets from ../shared/data:

* ``a9a``: dcd, ``search: {C: [0.03, 0.1, 0.3, 1, 3, 10, 30], cv_folds: 5}``;
* ``sector``: sector.scale's 105 classes one-vs-rest, dcd, C = 1.

Each round submits the job with ``n_processes`` 1 and then 2, interleaved. It polls every 50 ms (a
client polling every 0.5 s, as the README's walkthrough does, rounds both times up to its step). For each
job it records:

* the wall seconds from the submit to ``succeeded``;
* the job's own seconds (``finished_at - started_at``);
* the CPU seconds of the worker's own process (the coordinator) and of its children (the subtask
  processes, counted when they are reaped). These come from /proc; the coordinator's share is its CPU
  over the job's own seconds.

Medians over the rounds and the ratio 1-process / 2-process go to
tests/benchmarks/results/bench_search_service.json. Targets (issue 22): >= 1.7x on a9a, >= 1.8x on
sector, and a coordinator at <= 5% of a core.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import httpx

from tests.benchmarks.bench_scale import process_tree, stop_serve, upload, wait_ready
from tests.benchmarks.environment import DATA_DIR, machine

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results" / "bench_search_service.json"
POLL_S = 0.05
JOBS = {
    "a9a": ("a9a.svm.gz", {"C": 1.0, "search": {"C": [0.03, 0.1, 0.3, 1, 3, 10, 30], "cv_folds": 5}}),
    "sector": ("sector.scale.svm.gz", {"C": 1.0}),
}


def _ticks(pid: int) -> tuple[float, float]:
    """(own CPU seconds, reaped children's CPU seconds) of a process, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    hz = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / hz, (int(fields[13]) + int(fields[14])) / hz


def _worker_pids(root: int) -> list[int]:
    pids = []
    for pid in process_tree(root):
        try:
            if b"-m\x00worker" in Path(f"/proc/{pid}/cmdline").read_bytes():
                pids.append(pid)
        except OSError:
            pass
    return pids


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def run_job(http: httpx.Client, workers: list[int], dataset_id: str, params: dict) -> dict:
    """One dcd job to its end: wall seconds, the job's own seconds, the workers' CPU (own and children's)."""
    before = {pid: _ticks(pid) for pid in workers}
    started = time.perf_counter()
    job = http.post("/v1/jobs", json={"dataset_id": dataset_id, "solver": "dcd", "params": params}).json()
    while True:
        state = http.get(f"/v1/jobs/{job['id']}").json()
        if state["status"] not in ("queued", "running"):
            break
        time.sleep(POLL_S)
    wall = time.perf_counter() - started
    if state["status"] != "succeeded":
        raise SystemExit(f"job {job['id']} ended {state['status']}: {state.get('error')}")
    after = {pid: _ticks(pid) for pid in workers}
    own = sum(after[pid][0] - before[pid][0] for pid in workers)
    children = sum(after[pid][1] - before[pid][1] for pid in workers)
    job_s = _seconds(state["finished_at"]) - _seconds(state["started_at"])
    return {
        "wall_s": round(wall, 3),
        "job_s": round(job_s, 3),
        "coordinator_cpu_s": round(own, 2),
        "subtask_cpu_s": round(children, 2),
        "coordinator_core_share": round(own / job_s, 3) if job_s > 0 else None,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sets", default="a9a,sector")
    parser.add_argument("--port", type=int, default=8480)
    parser.add_argument("--data-dir", default="/tmp/hinge-bench-search")
    args = parser.parse_args(argv)

    data_dir = Path(args.data_dir)
    shutil.rmtree(data_dir, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("REDIS_URL", None)
    command = [sys.executable, "-m", "service.cli", "serve", "--port", str(args.port), "--workers", str(args.workers)]
    serve = subprocess.Popen(
        [*command, "--data-dir", str(data_dir), "--log-level", "warning"], cwd=ROOT, env=env, start_new_session=True
    )
    base = f"http://127.0.0.1:{args.port}"
    out: dict = {"machine": machine(), "workers": args.workers, "poll_s": POLL_S, "load_before": os.getloadavg()}
    try:
        wait_ready(base)
        http = httpx.Client(base_url=base, timeout=120)
        workers = _worker_pids(serve.pid)
        for name in args.sets.split(","):
            file, params = JOBS[name]
            dataset, _ = upload(base, DATA_DIR / file, name, None)
            runs: dict[str, list[dict]] = {"1": [], "2": []}
            for _round in range(args.rounds):
                for processes in ("1", "2"):
                    entry = run_job(http, workers, dataset["id"], dict(params, n_processes=int(processes)))
                    runs[processes].append(entry)
                    print(name, processes, entry, flush=True)
            medians = {
                key: {field: statistics.median(run[field] for run in runs[key]) for field in runs[key][0]}
                for key in runs
            }
            out[name] = {
                "params": params,
                "runs": runs,
                "medians": medians,
                "ratio_wall": round(medians["1"]["wall_s"] / medians["2"]["wall_s"], 3),
                "ratio_job": round(medians["1"]["job_s"] / medians["2"]["job_s"], 3),
            }
            print(name, "ratio wall", out[name]["ratio_wall"], "job", out[name]["ratio_job"], flush=True)
    finally:
        stop_serve(serve)
        shutil.rmtree(data_dir, ignore_errors=True)
    out["load_after"] = os.getloadavg()
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
