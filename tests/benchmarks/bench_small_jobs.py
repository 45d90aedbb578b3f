"""What a small job costs the service: fits of a few hundred rows through ``HingeClassifier``, as scikit-learn's
checks and a user's notebook make them.

    python -m tests.benchmarks.bench_small_jobs [--fits 50] [--out results/bench_small_jobs.json]

Starts ``hinge serve --workers 1`` (embedded Redis, warm kernels waited for), then fits ``--fits`` times each of two
estimators one after another: dcd on 30 rows of two blobs (one binary problem) and dcd on iris (150 rows, 3 classes:
one-vs-rest). Ten fits of each first, not counted. It records the wall seconds per fit and the CPU seconds per fit of
each of the service's processes (the worker, the API, Redis; from /proc, children included), and writes them to
tests/benchmarks/results/bench_small_jobs.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
import warnings
from pathlib import Path

from sklearn.datasets import load_iris, make_blobs

from hinge_client import HingeClassifier
from service.embedded_redis import free_port
from tests.benchmarks.bench_scale import CLOCK_TICKS, process_tree, role, start_serve, stop_serve, wait_ready
from tests.benchmarks.environment import machine

RESULTS = Path(__file__).resolve().parent / "results" / "bench_small_jobs.json"


def _cpu_by_role(root: int) -> dict[str, float]:
    """CPU seconds (user + system, waited-for children included: the subtask processes a job forked) of the
    service's processes, by ``bench_scale.role``."""
    roles: dict[int, str] = {}
    seconds: dict[str, float] = {}
    for pid in process_tree(root):  # parents before their children, as role() needs
        name = roles[pid] = role(pid, roles)
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds[name] = seconds.get(name, 0.0) + sum(int(value) for value in fields[11:15]) / CLOCK_TICKS
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fits", type=int, default=50, help="Fits of each estimator (after 10 not counted).")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    X_iris, y_iris = load_iris(return_X_y=True)
    X_blobs, y_blobs = make_blobs(n_samples=30, random_state=0, n_features=2, centers=2)
    port = free_port()
    data_dir = Path(f"/tmp/hinge-bench-small-jobs-{port}")
    serve = start_serve(port, 1, data_dir)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, all_kernels=True)

        def fits(count: int) -> None:
            for _ in range(count):
                HingeClassifier(solver="dcd", C=1.0, url=url).fit(X_blobs, y_blobs)
                HingeClassifier(solver="dcd", C=1.0, url=url).fit(X_iris, y_iris)

        fits(10)
        before, began = _cpu_by_role(serve.pid), time.perf_counter()
        fits(args.fits)
        seconds, after = time.perf_counter() - began, _cpu_by_role(serve.pid)
    finally:
        stop_serve(serve)
        shutil.rmtree(data_dir, ignore_errors=True)
    n = 2 * args.fits
    report = {
        "machine": machine(),
        "fits": n,
        "wall_ms_per_fit": round(1000 * seconds / n, 2),
        "cpu_ms_per_fit": {name: round(1000 * (after[name] - before.get(name, 0.0)) / n, 2) for name in sorted(after)},
    }
    print(json.dumps(report, indent=1))
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
