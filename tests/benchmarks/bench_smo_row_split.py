"""smo on 1 and 2 threads with kernel rows split over the threads (the old threshold, 16,384 values) and
unsplit (the current ``PAR_MIN_ROW``): why rows of a9a's and ijcnn1's size are no longer split.

    python -m tests.benchmarks.bench_smo_row_split [--rounds 3]

a9a (all rows, rbf gamma 0.0081) and ijcnn1 (49,990 rows, gamma 2), C = 1, defaults otherwise; runs
interleaved (1 thread, 2 threads split, 2 threads at the current threshold), round by round; solver
seconds. Writes tests/benchmarks/results/bench_smo_row_split.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

from tests.benchmarks.bench_kernel_svm import _load
from tests.benchmarks.environment import machine

RESULTS = Path(__file__).resolve().parent / "results" / "bench_smo_row_split.json"
OLD_PAR_MIN_ROW = 16384


def main() -> None:
    """Run the rounds and write the JSON."""
    from worker.solvers import smo

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    current = smo.PAR_MIN_ROW
    runs = {
        "1 thread": (1, current),
        f"2 threads, rows split from {OLD_PAR_MIN_ROW}": (2, OLD_PAR_MIN_ROW),
        f"2 threads, rows split from {current}": (2, current),
    }
    report = {"machine": machine(), "par_min_row": current, "data": {}}
    for name, n_features, gamma in (("ijcnn1", 22, 2.0), ("a9a", 123, 0.0081)):
        X, y = _load(name, n_features)
        csr = (X.indptr.astype(np.int64), X.indices.astype(np.int32), X.data.astype(np.float64), y)
        kernel = {"type": "rbf", "gamma": gamma}
        smo.solve_smo(*csr, n_features=n_features, C=1.0, kernel=kernel, n_threads=2, max_iter=10)  # warm
        seconds: dict[str, list[float]] = {label: [] for label in runs}
        for _ in range(args.rounds):
            for label, (threads, par_min_row) in runs.items():
                smo.PAR_MIN_ROW = par_min_row
                start = time.perf_counter()
                smo.solve_smo(*csr, n_features=n_features, C=1.0, kernel=kernel, n_threads=threads)
                seconds[label].append(time.perf_counter() - start)
        smo.PAR_MIN_ROW = current
        report["data"][name] = {
            "seconds": seconds,
            "median_seconds": {k: statistics.median(v) for k, v in seconds.items()},
        }
        print(name, {k: round(statistics.median(v), 2) for k, v in seconds.items()}, flush=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
