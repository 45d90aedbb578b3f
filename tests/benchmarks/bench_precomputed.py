"""smo with a precomputed kernel (LIBSVM's -t 4) against svm-train -t 4 (build-anchors.sh, no OpenMP), 1 thread.

The rbf kernel (LIBSVM's default gamma 1 / n_features) of the first ``--rows`` rows of a9a and of ijcnn1 is written
as LIBSVM's -t 4 file (0:i, then K against every training row); both train C = 1 at -e 1e-3 (ours: tol 1e-3,
tol_rel null, the same rule), 200 MB of cache. Seconds: ours the solver's, LIBSVM's from closing its input to opening
its model file (``anchors._strace_solver_seconds``); their dual objectives (LIBSVM's printed obj). Interleaved
``--repeats`` runs, medians. Writes tests/benchmarks/results/bench_precomputed.json.

    .venv/bin/python -m tests.benchmarks.bench_precomputed --rows 3000 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file
from sklearn.metrics.pairwise import rbf_kernel

from core.schemas.solver_params import SmoParams
from tests.benchmarks import anchors
from tests.benchmarks.environment import DATA_DIR
from worker.solvers.smo.solve import solve_smo

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="a9a,ijcnn1")
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "bench_precomputed.json")
    args = parser.parse_args()
    cases = []
    params = SmoParams(kernel={"type": "precomputed"}, tol=1e-3, tol_rel=None, cache_mb=200, trace_every=10**9)
    for name in args.data.split(","):
        X, y = load_svmlight_file(str(Path(DATA_DIR) / f"{name}.svm.gz"))
        X, y = X[: args.rows], np.where(y[: args.rows] == y.max(), 1.0, -1.0)
        n = X.shape[0]
        rows = np.hstack([np.arange(1, n + 1)[:, None], rbf_kernel(X, X, gamma=1.0 / X.shape[1])])
        matrix = sp.csr_matrix(rows)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "kernel.svm")
            with open(path, "w") as handle:
                for label, row in zip(y, rows):
                    handle.write(
                        f"{int(label)} 0:{int(row[0])} "
                        + " ".join(f"{j}:{v:.17g}" for j, v in enumerate(row) if j)
                        + "\n"
                    )
            ours, theirs = [], []
            for _ in range(args.repeats):
                result = solve_smo(
                    matrix.indptr.astype(np.int64), matrix.indices, matrix.data, y, n_features=n + 1, params=params
                )
                ours.append((result.solver_seconds, -float(result.extra["dual_objective"]), int(result.extra["n_sv"])))
                model = os.path.join(tmp, "model")
                run, seconds = anchors._strace_solver_seconds(
                    [str(anchors.BIN / "svm-train"), "-t", "4", "-c", "1", "-e", "1e-3", "-m", "200", path, model],
                    model,
                )
                obj = float(re.search(r"obj = ([0-9.e+-]+)", run.stdout).group(1))
                n_sv = int(re.search(r"nSV = (\d+)", run.stdout).group(1))
                theirs.append((seconds, obj, n_sv))
        case = {
            "data": f"{name}_{n}",
            "ours": {"seconds": statistics.median(o[0] for o in ours), "objective": ours[0][1], "n_sv": ours[0][2]},
            "libsvm": {
                "seconds": statistics.median(t[0] for t in theirs),
                "objective": theirs[0][1],
                "n_sv": theirs[0][2],
            },
        }
        case["ratio"] = case["ours"]["seconds"] / case["libsvm"]["seconds"]
        case["objective_rel_diff"] = (case["ours"]["objective"] - case["libsvm"]["objective"]) / abs(
            case["libsvm"]["objective"]
        )
        cases.append(case)
        print(json.dumps(case), flush=True)
    args.out.write_text(json.dumps({"cases": cases}, indent=2) + "\n")


if __name__ == "__main__":
    main()
