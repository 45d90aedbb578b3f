"""Cancel latency of every solver: how long after a cancel request a job's outcome is ready.

In process, through the worker's own dispatcher (``worker.runtime.jobs.train_job``: the solver, then the
model assembled as a job stores it). The cancel flag turns true at a chosen instant (a clock test,
not a thread: a numba kernel holds the GIL, so a thread could not even set a flag while it runs),
``--after`` seconds into training; the latency is from that instant until the solver returned
(``solver_s``) and until the outcome with its model was ready (``outcome_s``). A job stopped by a
SIGTERM of its worker (``interrupted``) takes the same path.

Data: a9a (32,561 rows, 123 features) for every solver, and for the linear solvers also a
text-like synthetic set (``--big-rows`` rows, 50 non-zeros over 10^6 features,
tests/benchmarks/synthetic.py), where a single pass over the data is long.

    python -m tests.benchmarks.bench_cancel [--after 3] [--repeats 3] [--big-rows 400000]

Writes tests/benchmarks/results/bench_cancel.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

from tests.benchmarks.environment import DATA_DIR, machine
from worker.training.context import FitContext

RESULTS = Path(__file__).resolve().parent / "results"

# Long-running settings: each job runs far longer than --after unless canceled.
JOBS = {
    "dcd": {"C": 1000.0, "tol": 1e-12, "max_iter": 10_000_000, "shrinking": False},
    "cpa": {"C": 1000.0, "tol": 1e-9, "max_iter": 10_000_000, "max_inactive": 1_000_000},
    "ocas": {"C": 1000.0, "tol_rel": 1e-12, "max_iter": 10_000_000, "max_inactive": 1_000_000},
    "smo": {"C": 1.0, "kernel": {"type": "rbf", "gamma": "scale"}, "tol": 1e-6},
    "sampled_cuts": {
        "C": 1.0,
        "kernel": {"type": "rbf", "gamma": "scale"},
        "tol": 1e-9,
        "max_inactive": 1_000_000,
        "sample_size": 1000,
    },
}
PARAMS = {
    "dcd": "DcdParams",
    "cpa": "CpaParams",
    "ocas": "OcasParams",
    "smo": "SmoParams",
    "sampled_cuts": "SampledCutsParams",
}


def full_params(solver: str, overrides: dict) -> dict:
    """The job's params as the API stores them (schema defaults filled in)."""
    from core.schemas import solver_params

    schema = getattr(solver_params, PARAMS[solver])
    return schema.model_validate(overrides).model_dump(mode="json", by_alias=True)


def a9a() -> tuple[dict, int]:
    from service.ingest.parser import ParseLimits, parse_upload

    big = 1 << 40
    parsed = parse_upload(
        str(DATA_DIR / "a9a.svm.gz"),
        format="svmlight",
        zero_based="auto",
        label_column="label",
        limits=ParseLimits(big, big, 2**31 - 1, big),
    )
    arrays = {"indptr": parsed.indptr, "indices": parsed.indices, "data": parsed.data, "y": parsed.y}
    return arrays, int(parsed.n_features)


def synthetic(n_rows: int) -> tuple[dict, int]:
    from tests.benchmarks import synthetic as gen

    indptr, indices, data, y = gen.csr(0, n_rows)
    arrays = {
        "indptr": np.asarray(indptr, np.int64),
        "indices": np.asarray(indices, np.int32),
        "data": np.asarray(data, np.float64),
        "y": np.asarray(y, np.float64),
    }
    return arrays, int(arrays["indices"].max()) + 1


class Sink:
    """Trace sink that keeps only the last point."""

    class _Jobs:
        def update(self, job_id, **fields):
            pass

    jobs, job_id, subproblem = _Jobs(), "bench", 0

    def __init__(self):
        self.last = None
        self.estimator = None
        self.phase = None

    def set_phase(self, phase):
        self.phase = phase

    def add(self, point):
        self.last = point

    def flush(self):
        pass


def measure(solver: str, params: dict, arrays: dict, n_features: int, after: float) -> dict:
    from core.solvers import solver_params
    from worker.runtime.jobs import train_job

    state = {"at": None, "solver_done": None}
    begin = time.monotonic()
    cancel_at = begin + after

    def cancel_requested() -> bool:
        now = time.monotonic()
        if now >= cancel_at:
            if state["at"] is None:
                state["at"] = cancel_at
            return True
        return False

    sink = Sink()
    typed = solver_params(solver, params)
    outcome = train_job(solver, typed, arrays, n_features, context=FitContext(sink, cancel_requested=cancel_requested))
    done = time.monotonic()
    last_elapsed = (sink.last or {}).get("elapsed_s")
    return {
        "stop_reason": outcome.stop_reason.value,
        "model": outcome.arrays is not None,
        "outcome_s": done - cancel_at if done >= cancel_at else None,
        "ran_s": done - begin,
        "solver_seconds": outcome.model.training_seconds,
        "last_point_elapsed_s": last_elapsed,
        "n_iter": outcome.model.n_iter,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--after", type=float, default=3.0, help="Seconds of training before the cancel.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--big-rows", type=int, default=400_000, help="Rows of the synthetic set (0: skip it).")
    parser.add_argument("--solvers", default=",".join(JOBS))
    args = parser.parse_args()

    from worker.training.registry import warm_up_all

    warm_up_all()
    sets = {"a9a": a9a()}
    if args.big_rows:
        sets[f"synthetic_{args.big_rows}x50"] = synthetic(args.big_rows)
    rows = []
    for name, (arrays, n_features) in sets.items():
        for solver in args.solvers.split(","):
            if name != "a9a" and solver in ("smo", "sampled_cuts"):
                continue
            params = full_params(solver, dict(JOBS[solver], n_processes=1))
            runs = [measure(solver, params, arrays, n_features, args.after) for _ in range(args.repeats)]
            latencies = [r["outcome_s"] for r in runs if r["outcome_s"] is not None]
            row = {
                "data": name,
                "solver": solver,
                "params": JOBS[solver],
                "runs": runs,
                "median_outcome_s": statistics.median(latencies) if latencies else None,
                "max_outcome_s": max(latencies) if latencies else None,
            }
            rows.append(row)
            print(
                f"{name:24s} {solver:13s} cancel -> outcome median {row['median_outcome_s']} max {row['max_outcome_s']}"
                f"  ({[r['stop_reason'] for r in runs]})",
                flush=True,
            )
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "bench_cancel.json"
    out.write_text(json.dumps({"machine": machine(), "after_s": args.after, "results": rows}, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
