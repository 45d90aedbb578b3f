"""Soak: 20 clients for 5 minutes doing everything at once while a chaos loop breaks the service (issue 9).

`hinge serve` with 2 workers, in a terminal of its own (tests/serve_harness.py); only 127.0.0.1.
Clients (tests/soak.py): 6 predicting one row, 8 training every solver in turn on small data sets of
their own and polling each job, 2 canceling long jobs, 2 uploading and deleting data sets, 2 reading
lists and traces. A chaos loop kill -9s a random worker every 30 s and, once (half-way), the embedded
Redis. Afterwards every job must end; the report counts jobs submitted / succeeded / failed by design
/ lost (must be 0), predict p50/p99, and 5xx answers inside and outside the Redis restart window.

    python -m tests.benchmarks.bench_soak [--seconds 300] [--kill-every 30]

Writes tests/benchmarks/results/bench_soak.json.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from service.embedded_redis import free_port
from tests.benchmarks.environment import machine
from tests.serve_harness import ServeRun
from tests.soak import soak

RESULTS = Path(__file__).resolve().parent / "results"
CLIENTS = {"predict": 6, "train_all": 8, "cancel": 2, "upload": 2, "poll": 2}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--kill-every", type=float, default=30.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--api-processes", type=int, default=1)
    args = parser.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="hinge-bench-soak-"))
    extra = ("--api-processes", str(args.api_processes)) if args.api_processes > 1 else ()
    run = ServeRun(data_dir, free_port(), workers=args.workers, extra_args=extra)
    try:
        run.wait_ready(all_kernels=True)
        report = soak(
            run,
            seconds=args.seconds,
            clients=CLIENTS,
            kill_every_s=args.kill_every,
            redis_restart_at_s=args.seconds / 2,
        )
        run.snapshot()
        run.stop_by("ctrl_c")
        run.wait_gone(timeout=60)
    finally:
        run.close()
    predict = np.asarray(report.pop("predict_ms"))
    report["predict_one_row"] = {
        "count": int(predict.size),
        "p50_ms": float(np.percentile(predict, 50)),
        "p99_ms": float(np.percentile(predict, 99)),
        "max_ms": float(predict.max()),
    }
    report.update(
        machine=machine(),
        workers=args.workers,
        api_processes=args.api_processes,
        load_average=os.getloadavg(),
        supervisor_lines=run.supervisor_lines()[-40:],
    )
    print(
        json.dumps(
            {
                k: report[k]
                for k in ("requests", "statuses", "jobs", "predict_one_row", "server_errors", "redis_window_s")
            },
            indent=1,
        )
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "bench_soak.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
