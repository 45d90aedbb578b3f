"""What dcd's trace points cost, and what ``trace_budget`` saves (issue 22).

    python -m tests.benchmarks.bench_trace_budget [--repeats 3]

A dcd trace point computes the primal objective, a pass over every row. For a9a (C = 1 and 10, one binary
problem) and sector.scale (its 105 classes one-vs-rest, C = 1, one process), ``worker.training.fit.fit_problems``
runs with ``trace_budget`` null (a point at every pass, as before the budget existed), 0.1 (the default)
and a last point only; wall seconds (best of the repeats, interleaved), solver and trace seconds as the
results report them, and the points recorded. Writes results/bench_trace_budget.json.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")

from core.schemas.solver_params import DcdParams  # noqa: E402
from core.solvers import solver_params  # noqa: E402
from tests.benchmarks.bench_search import SPEEDUP_DATA, load  # noqa: E402
from tests.benchmarks.environment import machine  # noqa: E402
from worker.training.fit import fit_problems  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "bench_trace_budget.json"
CASES = (("a9a", 1.0), ("a9a", 10.0), ("sector", 1.0))
ARMS = {"every pass": {"trace_budget": None}, "budget 0.1": {"trace_budget": 0.1}, "last only": {"trace_every": 2**62}}


def run(arrays, n_features: int, C: float, overrides: dict) -> dict:
    """One fit of every binary problem on one process: wall, solver and trace seconds, points."""
    params = solver_params("dcd", dict(DcdParams().model_dump(), C=C, **overrides))
    points: list = []
    started = time.perf_counter()
    _, results = fit_problems(
        "dcd",
        params,
        arrays,
        n_features,
        deadline=None,
        cancel_requested=lambda: False,
        on_point=lambda k, point: points.append(point),
        n_processes=1,
    )
    return {
        "wall_s": time.perf_counter() - started,
        "solver_s": sum(r.solver_seconds for r in results),
        "trace_s": sum(r.trace_seconds for r in results),
        "points": len(points),
        "passes": sum(r.n_iter for r in results),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    out: dict = {"machine": machine(), "load_before": os.getloadavg(), "cases": []}
    loaded = {name: load(*SPEEDUP_DATA[name]) for name in {name for name, _ in CASES}}
    for name, C in CASES:
        arrays, n_features, _, _ = loaded[name]
        runs: dict[str, list[dict]] = {arm: [] for arm in ARMS}
        for _ in range(args.repeats):
            for arm, overrides in ARMS.items():
                runs[arm].append(run(arrays, n_features, C, overrides))
        best = {arm: min(entries, key=lambda entry: entry["wall_s"]) for arm, entries in runs.items()}
        case = {"data": name, "C": C, "best": {arm: {k: round(v, 4) for k, v in e.items()} for arm, e in best.items()}}
        out["cases"].append(case)
        print(name, C, json.dumps(case["best"]), flush=True)
    out["load_after"] = os.getloadavg()
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
