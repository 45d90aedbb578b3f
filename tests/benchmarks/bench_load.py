"""Predict latency while the service is busy: the load of issue 9, measured from outside.

`hinge serve` with 2 workers (in a terminal of its own, tests/serve_harness.py), then for
``--seconds`` (default 60) at once: ``--predictors`` clients (12) each predicting one row of
heart_scale in a loop, ``--trainers`` clients (3) each submitting dcd on heart_scale and polling it
to the end, ``--uploaders`` clients (1) each uploading heart_scale (and deleting it). The clients are
asyncio tasks, the predictors in a process of their own, all on the same cores as the service; the
predictors speak HTTP/1.1 on asyncio streams (``--predict-client lean``: 0.06 ms of CPU a request against
httpx's 0.8, so that the load generator measures the service rather than its own share of the cores;
``--predict-client httpx`` as before), the others use httpx. Reports requests, errors, jobs finished,
and one-row predict latency (p50, p90, p99, max).

    python -m tests.benchmarks.bench_load [--seconds 60] [--api-processes 1] [--label NAME]
        [--predictors 12 --trainers 3 --uploaders 1 --pollers 0] [--predict-client lean|httpx] [--predict-rate N]
        [--mix uploads]     # issue 22's mix: 12 predictors, 1 trainer, 1 poller (lists and traces, as a
                            # dashboard), 2 uploaders: 16 clients, twice the uploads of the default mix

Appends its figures to tests/benchmarks/results/bench_load.json (one entry per run and label).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from service.embedded_redis import free_port
from tests.benchmarks.environment import DATA_DIR, machine
from tests.load_clients import FINAL, client_process
from tests.serve_harness import ServeRun

RESULTS = Path(__file__).resolve().parent / "results"


def percentiles(values: list[float]) -> dict:
    if not values:
        return {}
    array = np.asarray(values)
    return {
        "count": len(values),
        "p50_ms": float(np.percentile(array, 50)),
        "p90_ms": float(np.percentile(array, 90)),
        "p99_ms": float(np.percentile(array, 99)),
        "max_ms": float(array.max()),
        "mean_ms": float(statistics.fmean(values)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--predictors", type=int, default=12)
    parser.add_argument("--trainers", type=int, default=3)
    parser.add_argument("--uploaders", type=int, default=1)
    parser.add_argument("--pollers", type=int, default=0)
    parser.add_argument("--mix", choices=["uploads"], default=None, help="A preset mix (overrides the counts).")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--api-processes", type=int, default=1)
    parser.add_argument(
        "--predictor-nice",
        type=int,
        default=None,
        help="A diagnostic: the predicting clients' process in a session of its own at this autogroup niceness "
        "(-10: the load generator's predictions get the cores first, as clients on other machines would).",
    )
    parser.add_argument(
        "--trainer-wait",
        choices=["poll", "long"],
        default="poll",
        help="How the trainers wait for their jobs: `poll` (a GET every 50 ms, as the issue's mix) or `long` "
        "(GET ?wait_s=30, as the Python client's wait_job and the dashboard do).",
    )
    parser.add_argument(
        "--predict-client",
        choices=["lean", "httpx"],
        default="lean",
        help="The predicting clients' HTTP client: a minimal HTTP/1.1 client on asyncio streams (the default; "
        "tests/load_clients.py, lean_predictor: 0.06 ms of the load generator's CPU a request) or httpx (0.8 ms, "
        "more than three times the API's own 0.22 ms; the client of every run until stop 59).",
    )
    parser.add_argument(
        "--predict-rate",
        type=float,
        default=0.0,
        help="With the lean client: the predictors together start at most this many requests a second, each on a "
        "fixed schedule (0, the default: each asks again as soon as it is answered, as the issue's clients).",
    )
    parser.add_argument("--label", default="")
    parser.add_argument("--root", default=None, help="Run the service from this checkout (compare a former version).")
    parser.add_argument(
        "--log-level", default="warning", help="hinge serve's --log-level (info: every request logged)."
    )
    args = parser.parse_args()
    if args.predict_rate and args.predict_client != "lean":
        parser.error(
            "--predict-rate paces the lean client only; with --predict-client httpx each predictor asks again as "
            "soon as it is answered"
        )
    if args.mix == "uploads":
        args.predictors, args.trainers, args.pollers, args.uploaders = 12, 1, 1, 2

    content = (DATA_DIR / "heart_scale.svm.gz").read_bytes()
    data_dir = Path(tempfile.mkdtemp(prefix="hinge-bench-load-"))
    extra = ("--log-level", args.log_level) + (
        ("--api-processes", str(args.api_processes)) if args.api_processes > 1 else ()
    )
    run = ServeRun(
        data_dir,
        free_port(),
        workers=args.workers,
        extra_args=extra,
        **({"root": Path(args.root)} if args.root else {}),
    )
    try:
        run.wait_ready(all_kernels=True)
        with httpx.Client(base_url=run.base_url, timeout=120) as http:
            dataset = http.post("/v1/datasets", files={"file": ("heart_scale.svm.gz", content)}).json()
            job = http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd"}).json()
            while (state := http.get(f"/v1/jobs/{job['id']}").json())["status"] not in FINAL:
                time.sleep(0.05)
            row = [0.5] * dataset["n_features"]
            for _ in range(50):  # warm the model cache of every API process
                http.post(f"/v1/models/{state['model_id']}/predict", json={"instances": [row]})
        memory = service_memory(run)
        setup = {"model_id": state["model_id"], "row": row, "dataset_id": dataset["id"], "content": content}
        setup["predictor_nice"] = args.predictor_nice
        setup["long_poll"] = args.trainer_wait == "long"
        setup["predict_client"] = args.predict_client
        setup["predict_rate"] = args.predict_rate
        ctx = multiprocessing.get_context("spawn")
        out = ctx.Queue()
        start_at = time.time() + 3.0
        procs = [
            ctx.Process(target=client_process, args=(role, n, run.base_url, setup, args.seconds, start_at, out))
            for role, n in (
                ("predict", args.predictors),
                ("train", args.trainers),
                ("upload", args.uploaders),
                ("poll", args.pollers),
            )
            if n
        ]
        for proc in procs:
            proc.start()
        tallies = dict(out.get(timeout=args.seconds + 600) for _ in procs)
        for proc in procs:
            proc.join(60)
        server_side = predict_server_side(httpx.get(f"{run.base_url}/metrics", timeout=30).text)
        run.snapshot()
        run.stop_by("sigterm_supervisor")  # (a version from before issue 9 stops cleanly only this way)
        run.wait_gone(timeout=60)
    finally:
        run.close()

    requests = sum(t["requests"] for t in tallies.values())
    statuses: dict[str, int] = {}
    jobs: dict[str, int] = {}
    for tally in tallies.values():
        for key, value in tally["status"].items():
            statuses[key] = statuses.get(key, 0) + value
        for key, value in tally["jobs"].items():
            jobs[key] = jobs.get(key, 0) + value
    result = {
        "label": args.label,
        "machine": machine(),
        "load": {
            "seconds": args.seconds,
            "predictors": args.predictors,
            "trainers": args.trainers,
            "trainer_wait": args.trainer_wait,
            "predict_client": args.predict_client,
            "predict_rate": args.predict_rate,
            "uploaders": args.uploaders,
            "pollers": args.pollers,
            "mix": args.mix,
            "workers": args.workers,
            "api_processes": args.api_processes,
            "log_level": args.log_level,
            "code": args.root or "this checkout",
        },
        "requests": requests,
        "requests_by_role": {role: tally["requests"] for role, tally in tallies.items()},
        "client_cpu_s_by_role": {role: round(tally["cpu_s"], 1) for role, tally in tallies.items()},
        "statuses": statuses,
        "jobs": jobs,
        "predict_one_row": percentiles(tallies.get("predict", {}).get("predict_ms", [])),
        "predict_server_side": server_side,
        "service_memory_mib": memory,
        "errors": [e for t in tallies.values() for e in t["errors"]][:20],
        "load_average": os.getloadavg(),
    }
    print(
        json.dumps(
            {
                k: result[k]
                for k in (
                    "label",
                    "requests",
                    "requests_by_role",
                    "client_cpu_s_by_role",
                    "statuses",
                    "jobs",
                    "predict_one_row",
                    "service_memory_mib",
                )
            },
            indent=1,
        )
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "bench_load.json"
    runs = json.loads(path.read_text())["runs"] if path.exists() else []
    runs.append(result)
    path.write_text(json.dumps({"runs": runs}, indent=2) + "\n")
    print(f"wrote {path}")


def predict_server_side(metrics: str) -> dict:
    """The API's own timing of its successful predictions (its ``/metrics`` histogram, every API process's alike
    behind one port: the one that answered): the share answered within each bucket's bound, in ms, and the
    smallest bound holding 99% of them. It starts when the request has reached the application and ends with
    its answer; the rest of what a client measures is the sockets and the client's own process waiting for a
    core."""
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            labels = sample.labels
            if (
                sample.name == "hinge_http_request_duration_seconds_bucket"
                and labels.get("route") == "/v1/models/{model_id}/predict"
                and labels.get("status") == "200"
            ):
                counts[labels["le"]] = counts.get(labels["le"], 0.0) + sample.value
    total = counts.pop("+Inf", 0.0)
    if not total:
        return {}
    within = {f"{float(bound) * 1000:g}": round(count / total, 4) for bound, count in counts.items()}
    p99 = min((float(bound) for bound, share in within.items() if share >= 0.99), default=None)
    return {"count": int(total), "share_within_ms": within, "p99_at_most_ms": p99}


def service_memory(run: ServeRun) -> dict:
    """Resident memory (MiB) of the service's processes by role (supervisor, redis, api, worker and their children)."""
    by_role: dict[str, float] = {}
    for pid, role in run.snapshot().items():
        try:
            pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
        by_role[role] = by_role.get(role, 0.0) + pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    return {role: round(mib, 1) for role, mib in sorted(by_role.items())}


if __name__ == "__main__":
    main()
