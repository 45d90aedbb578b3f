"""smo on 1 thread and on 2 threads (the row team, ``worker.solvers.smo.team``) at several shortest split
rows: what the team gains on a9a and ijcnn1, and where ``TEAM_MIN_ROW`` sits.

    python -m tests.benchmarks.bench_smo_team [--rounds 3] [--min-rows 2048,8192,32768]

a9a (all rows, rbf gamma 0.0081) and ijcnn1 (49,990 rows, gamma 2), C = 1, defaults otherwise; runs
interleaved (1 thread, then 2 threads at each shortest split row), round by round; solver seconds and
the speedup of each 2-thread run over the 1-thread run of its round. Writes
tests/benchmarks/results/bench_smo_team.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np

from core.schemas.solver_params import SmoParams
from tests.benchmarks.bench_kernel_svm import _load
from tests.benchmarks.environment import machine

RESULTS = Path(__file__).resolve().parent / "results" / "bench_smo_team.json"


def main() -> None:
    """Run the rounds and write the JSON."""
    from worker.solvers.smo import run as smo_run
    from worker.solvers.smo import solve as smo

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--min-rows", default="2048,8192,32768")
    args = parser.parse_args()
    default = smo_run.TEAM_MIN_ROW
    runs = {"1 thread": (1, default)} | {
        f"2 threads, rows split from {m}": (2, m) for m in (int(v) for v in args.min_rows.split(","))
    }
    report: dict = {"machine": machine(), "team_min_row": default, "data": {}}
    for name, n_features, gamma in (("ijcnn1", 22, 2.0), ("a9a", 123, 0.0081)):
        X, y = _load(name, n_features)
        csr = (X.indptr.astype(np.int64), X.indices.astype(np.int32), X.data.astype(np.float64), y)
        kernel = {"type": "rbf", "gamma": gamma}
        smo.solve_smo(
            *csr, n_features=n_features, params=SmoParams(C=1.0, kernel=kernel, max_iter=10), n_threads=2
        )  # warm
        seconds: dict[str, list[float]] = {label: [] for label in runs}
        speedups: dict[str, list[float]] = {label: [] for label in runs if label != "1 thread"}
        try:
            for _ in range(args.rounds):
                for label, (threads, min_row) in runs.items():
                    smo_run.TEAM_MIN_ROW = min_row
                    result = smo.solve_smo(
                        *csr, n_features=n_features, params=SmoParams(C=1.0, kernel=kernel), n_threads=threads
                    )
                    seconds[label].append(result.solver_seconds)
                    if threads > 1:
                        speedups[label].append(seconds["1 thread"][-1] / result.solver_seconds)
        finally:
            smo_run.TEAM_MIN_ROW = default
        report["data"][name] = {
            "seconds": seconds,
            "median_seconds": {k: statistics.median(v) for k, v in seconds.items()},
            "paired_median_speedup": {k: statistics.median(v) for k, v in speedups.items()},
        }
        print(name, {k: round(statistics.median(v), 2) for k, v in seconds.items()}, flush=True)
        print(name, "speedup", {k: round(statistics.median(v), 2) for k, v in speedups.items()}, flush=True)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
