"""What a generic CPU target costs: the solvers compiled for this CPU against ``NUMBA_CPU_NAME=generic``.

    python -m tests.benchmarks.bench_cpu_target [--rounds 5]

numba compiles for the CPU it runs on (its name and features, e.g. AVX-512), and a cached kernel is used
only on that CPU. A Docker image built on one machine and run on another can instead be compiled for the
generic x86-64 target (``NUMBA_CPU_NAME=generic``: SSE2 only), which every x86-64 runs, at a cost this
measures: dcd, ocas and cpa on a9a (C = 1, default tolerances) and smo on the first 10,000 rows of a9a
(rbf gamma 0.0081, C = 1), one thread each, in child processes with a kernel cache per target (built
first, so compile time is not timed), interleaved round by round (host, generic, host, ...). Reports the
median solver seconds per target and their ratio, and the cold compile seconds of each target.
Writes ``results/bench_cpu_target.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.benchmarks.environment import DATA_DIR, machine

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RESULTS = HERE / "results" / "bench_cpu_target.json"
TARGETS = {"host": {}, "generic": {"NUMBA_CPU_NAME": "generic"}}

CHILD = r"""
import json, sys, time
import numpy as np
from sklearn.datasets import load_svmlight_file
from worker.runtime import warmup
solver, path, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
X, y = load_svmlight_file(path)
X = X[:rows] if rows else X
y = np.where(y[: X.shape[0]] > 0, 1.0, -1.0)
indptr, indices, data = X.indptr.astype(np.int64), X.indices.astype(np.int32), X.data.astype(np.float64)
warmup.ensure_solver(solver)
from core.schemas.solver_params import CpaParams, DcdParams, OcasParams, SmoParams
from worker.solvers.dcd import solve_dcd
from worker.solvers.ocas import solve_ocas
from worker.solvers.cpa import solve_cpa
from worker.solvers.smo.solve import solve_smo
calls = {
    "dcd": lambda: solve_dcd(indptr, indices, data, y, n_features=X.shape[1], params=DcdParams(C=1.0)),
    "ocas": lambda: solve_ocas(indptr, indices, data, y, n_features=X.shape[1], params=OcasParams(C=1.0), n_processes=1),
    "cpa": lambda: solve_cpa(indptr, indices, data, y, n_features=X.shape[1], params=CpaParams(C=1.0), n_processes=1),
    "smo": lambda: solve_smo(indptr, indices, data, y, n_features=X.shape[1],
                             params=SmoParams(C=1.0, kernel={"type": "rbf", "gamma": 0.0081}), n_threads=1),
}
start = time.perf_counter()
result = calls[solver]()
print(json.dumps({"seconds": time.perf_counter() - start, "n_iter": int(result.n_iter)}))
"""

ROWS = {"dcd": 0, "ocas": 0, "cpa": 0, "smo": 10_000}


def child_env(target: str, cache: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_THREADING_LAYER="workqueue", OPENBLAS_NUM_THREADS="1")
    env["HINGE_KERNEL_CACHE_DIR"] = str(cache / target)
    env.pop("NUMBA_CPU_NAME", None)
    env.update(TARGETS[target])
    return env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--solvers", default="dcd,ocas,cpa,smo")
    args = parser.parse_args()
    data = str(DATA_DIR / "a9a.svm.gz")
    solvers = args.solvers.split(",")
    out: dict = {"environment": machine(), "data": "a9a", "rounds": args.rounds, "compile_s": {}, "solvers": {}}
    with tempfile.TemporaryDirectory(prefix="hinge-cpu-target-") as scratch:
        cache = Path(scratch)
        for target in TARGETS:
            begin = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "worker.runtime.warmup", "--build"],
                env=child_env(target, cache),
                check=True,
                capture_output=True,
            )
            out["compile_s"][target] = round(time.perf_counter() - begin, 1)
            print(f"compiled for {target} in {out['compile_s'][target]} s", flush=True)
        for solver in solvers:
            seconds: dict[str, list[float]] = {target: [] for target in TARGETS}
            for _ in range(args.rounds):
                for target in TARGETS:
                    answer = subprocess.run(
                        [sys.executable, "-c", CHILD, solver, data, str(ROWS[solver])],
                        env=child_env(target, cache),
                        check=True,
                        capture_output=True,
                        text=True,
                    )
                    seconds[target].append(json.loads(answer.stdout.strip().splitlines()[-1])["seconds"])
            medians = {target: statistics.median(values) for target, values in seconds.items()}
            out["solvers"][solver] = {
                "seconds": {target: [round(v, 4) for v in values] for target, values in seconds.items()},
                "median_s": {target: round(v, 4) for target, v in medians.items()},
                "generic_over_host": round(medians["generic"] / medians["host"], 3),
            }
            print(
                f"{solver}: host {medians['host']:.3f} s, generic {medians['generic']:.3f} s "
                f"(generic / host {out['solvers'][solver]['generic_over_host']})",
                flush=True,
            )
    out["load_after"] = round(os.getloadavg()[0], 2)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
