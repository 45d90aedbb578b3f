"""Stopping `hinge serve` the ways people and process managers do, with a long smo job running on a9a.

Each scenario starts `hinge serve` (2 workers) in a pseudo-terminal of its own, as a shell in a
terminal window would (``tests/serve_harness.py``), submits smo (rbf kernel, C = 1) on a9a, waits
until the job has trained for ``--train-s`` seconds, then stops the service:

* ``ctrl_c``: ^C typed in the terminal (SIGINT to the foreground process group)
* ``sigint_group``, ``sigterm_group``: ``kill -INT|-TERM -- -PGID`` of hinge serve's group
* ``sigterm_supervisor``: SIGTERM to the supervisor alone
* ``sighup``: the terminal closed (the kernel hangs up the pty: SIGHUP)
* ``ctrl_c_twice``: ^C, then ^C again 0.3 s later (forced stop)
* ``requeue_policy``: ^C with HINGE_SHUTDOWN_POLICY=requeue
* ``idle_ctrl_c``: ^C with no job running

For each: seconds until every process of the service was gone (and per role: workers, API,
Redis), whether Redis went last, the job as stored (status, stop_reason, model stored), Redis's
own check of the append-only file, and the supervisor's log lines. At the end the service is
started once more on the same data and the data set and every model trained before are checked.

    python -m tests.benchmarks.bench_shutdown [--scenarios ctrl_c,sighup] [--train-s 3]

Writes tests/benchmarks/results/bench_shutdown.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import httpx

from service.embedded_redis import free_port
from tests.benchmarks.environment import DATA_DIR, machine
from tests.serve_harness import ServeRun, aof_check, stored_job

RESULTS = Path(__file__).resolve().parent / "results"
SCENARIOS = (
    "ctrl_c",
    "sigint_group",
    "sigterm_group",
    "sigterm_supervisor",
    "sighup",
    "ctrl_c_twice",
    "requeue_policy",
    "idle_ctrl_c",
)
JOB = {"solver": "smo", "params": {"C": 1.0, "kernel": {"type": "rbf", "gamma": "scale"}}}


def find_or_upload(http: httpx.Client, path: Path) -> dict:
    for item in http.get("/v1/datasets", params={"limit": 1000}).json()["items"]:
        if item["name"] == path.name:
            return item
    with open(path, "rb") as handle:
        response = http.post("/v1/datasets", params={"name": path.name}, files={"file": (path.name, handle)})
    response.raise_for_status()
    return response.json()


def stop(run: ServeRun, scenario: str) -> None:
    run.stop_by({"requeue_policy": "ctrl_c", "idle_ctrl_c": "ctrl_c"}.get(scenario, scenario))


def one(scenario: str, data_dir: Path, dataset_path: Path, train_s: float, workers: int) -> dict:
    port = free_port()
    env = {"HINGE_SHUTDOWN_POLICY": "requeue"} if scenario == "requeue_policy" else {}
    run = ServeRun(data_dir, port, workers=workers, env_extra=env)
    try:
        run.wait_ready()
        with httpx.Client(base_url=run.base_url, timeout=600) as http:
            dataset = find_or_upload(http, dataset_path)
            job = None
            if scenario != "idle_ctrl_c":
                job = http.post("/v1/jobs", json={"dataset_id": dataset["id"], **JOB}).json()
                end = time.monotonic() + 600
                while http.get(f"/v1/jobs/{job['id']}").json()["status"] != "running" and time.monotonic() < end:
                    time.sleep(0.05)
                time.sleep(train_s)
        family = run.snapshot()
        begin = time.monotonic()
        stop(run, scenario)
        gone = run.wait_gone(timeout=120, since=begin)
    finally:
        run.close()
    by_role: dict[str, float] = {}
    for pid, name in family.items():
        key = name.replace(" (child)", "")
        by_role[key] = max(by_role.get(key, 0.0), gone.get(pid, float("inf")))
    left = [f"{pid} {name}" for pid, name in family.items() if pid not in gone]
    others = [t for name, t in by_role.items() if name not in ("redis", "supervisor")]
    valid, check = aof_check(data_dir / "redis")
    result = {
        "scenario": scenario,
        "all_gone_s": max(gone.values()) if not left else None,
        "gone_s_by_role": by_role,
        "left_alive": left,
        "redis_last": by_role.get("redis", 0.0) >= max(others, default=0.0),
        "aof_valid": valid,
        "aof_check": check.splitlines()[-1] if check else "",
        "supervisor_lines": run.supervisor_lines(),
    }
    if job is not None:
        record = stored_job(data_dir / "redis", job["id"])
        result["job"] = {
            key: record.get(key) for key in ("status", "stop_reason", "model_id", "model_stored", "lost", "error")
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--train-s", type=float, default=3.0, help="Seconds the job trains before the stop.")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--data", default=str(DATA_DIR / "a9a.svm.gz"))
    args = parser.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="hinge-bench-shutdown-"))
    rows = []
    for scenario in args.scenarios.split(","):
        row = one(scenario, data_dir, Path(args.data), args.train_s, args.workers)
        rows.append(row)
        job = row.get("job") or {}
        print(
            f"{scenario:20s} all gone {row['all_gone_s']} s  roles {row['gone_s_by_role']}  redis last "
            f"{row['redis_last']}  aof {row['aof_valid']}  job {job.get('status')} {job.get('stop_reason')} "
            f"model {job.get('model_stored')}",
            flush=True,
        )

    # Restart once on the same data: the data set and every model trained above are there.
    run = ServeRun(data_dir, free_port(), workers=1)
    try:
        run.wait_ready()
        with httpx.Client(base_url=run.base_url, timeout=60) as http:
            datasets = http.get("/v1/datasets").json()["items"]
            models = http.get("/v1/models", params={"limit": 1000}).json()["items"]
            expected = {row["job"]["model_id"] for row in rows if (row.get("job") or {}).get("model_id")}
            found = {m["id"] for m in models}
            restart = {
                "datasets": len(datasets),
                "models_expected": len(expected),
                "models_found": len(expected & found),
            }
        run.snapshot()
        run.ctrl_c()
        run.wait_gone(timeout=60)
    finally:
        run.close()
    print("restart:", restart)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "bench_shutdown.json"
    out.write_text(
        json.dumps(
            {
                "machine": machine(),
                "job": JOB,
                "data": Path(args.data).name,
                "workers": args.workers,
                "train_s_before_stop": args.train_s,
                "scenarios": rows,
                "restart": restart,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
