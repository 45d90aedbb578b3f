"""smo's nu-SVC and nu-SVR (``svm_type: nu_svc`` / ``nu_svr``) against LIBSVM's svm-train -s 1 and -s 4 (built by
../shared/tools/build-anchors.sh, no OpenMP), 1 thread, equal precision.

Issue 33, item 2: the same objective to 1e-4 relative at the same stopping precision, and time at most 1.0x the C
program's. Both stop at the nu duals' largest KKT violation below ``--tol`` (LIBSVM's -e; ours with ``tol_rel`` null,
the same rule alone), rbf kernel at LIBSVM's default gamma 1 / n_features, nu 0.5 (nu-SVC: at most 0.9 of the
largest feasible), C 1 (nu-SVR), the same kernel cache (``--cache-mb``, LIBSVM's -m). Optima compared: the nu duals'
value D = -f(alpha) at the returned alpha, ours from the solver, LIBSVM's from its printed obj (nu-SVC: obj x
printed C^2, the 1 / r scaling undone). Interleaved ``--repeats`` runs, medians; solver seconds for ours
(``solve_smo``, trace points excluded), for LIBSVM from closing its input to opening its model file
(``anchors.svm_train``). (libsvm-official's pip build is no reference for time: run beside another benchmark it
measured 5-17x these seconds.)

Data (../shared/data): nu-SVC on svmguide1, the first ``--rows`` rows of a9a and of ijcnn1; nu-SVR on
abalone_scale. Writes tests/benchmarks/results/bench_nu.json.

    .venv/bin/python -m tests.benchmarks.bench_nu --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import numpy as np
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from core.schemas.solver_params import SmoParams
from tests.benchmarks import anchors
from tests.benchmarks.environment import DATA_DIR
from worker.solvers.smo.solve import solve_smo

RESULTS = Path(__file__).resolve().parent / "results"


def case(name: str, X, y, svm_type: str, args) -> dict:
    """Both programs on one data set: seconds, optimum values, support vectors."""
    X.sort_indices()
    gamma = 1.0 / X.shape[1]
    kernel = {"type": "rbf", "gamma": gamma}
    regression = svm_type == "nu_svr"
    labels = y if regression else np.where(y == y.max(), 1.0, -1.0)
    nu = args.nu
    if not regression:  # at most 0.9 of the largest feasible nu, 2 min(n+, n-) / n (ijcnn1: 10% positive)
        nu = min(nu, round(float(0.9 * 2 * min(np.mean(labels > 0), np.mean(labels < 0))), 3))
    params = SmoParams(
        svm_type=svm_type, nu=nu, kernel=kernel, tol=args.tol, tol_rel=None, cache_mb=args.cache_mb,
        trace_every=10**9,
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "data.svm")
        dump_svmlight_file(X, labels, path, zero_based=False)
        ours_s, theirs_s = [], []
        for _ in range(args.repeats):
            result = solve_smo(
                X.indptr.astype(np.int64), X.indices, X.data, labels, n_features=X.shape[1], params=params, n_threads=1
            )
            ours_s.append(result.solver_seconds)
            run = anchors.svm_train(
                path, 1.0, gamma, args.tol, int(args.cache_mb), svm_type=4 if regression else 1, nu=nu
            )
            theirs_s.append(run["seconds"])
    theirs = run["dual_objective"] * (1.0 if regression else run["printed_C"] ** -2)
    ours = float(result.extra["dual_objective"])  # the dual value D = -f(alpha): the optimum at convergence
    out = {
        "data": name,
        "kind": svm_type,
        "rows": int(X.shape[0]),
        "nu": nu,
        "ours": {"seconds": statistics.median(ours_s), "optimum": ours, "n_sv": int(result.extra["n_sv"]),
                 "steps": int(result.n_iter)},
        "libsvm": {"seconds": statistics.median(theirs_s), "optimum": theirs, "n_sv": run["n_sv"]},
    }  # fmt: skip
    out["ratio"] = out["ours"]["seconds"] / out["libsvm"]["seconds"]
    out["optimum_rel_diff"] = (ours - theirs) / abs(theirs)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--nu", type=float, default=0.5)
    parser.add_argument("--tol", type=float, default=1e-3)
    parser.add_argument("--cache-mb", type=float, default=200.0)
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--out", type=Path, default=RESULTS / "bench_nu.json")
    args = parser.parse_args()
    cases = []
    for name, svm_type, rows in (
        ("svmguide1", "nu_svc", None),
        ("a9a", "nu_svc", args.rows),
        ("ijcnn1", "nu_svc", args.rows),
        ("abalone_scale", "nu_svr", None),
    ):
        X, y = load_svmlight_file(str(Path(DATA_DIR) / f"{name}.svm.gz"))
        X = X.tocsr()[:rows]
        cases.append(case(name if rows is None else f"{name}_{rows}", X, y[:rows], svm_type, args))
        print(json.dumps(cases[-1]), flush=True)
    args.out.write_text(json.dumps({"cases": cases}, indent=2) + "\n")


if __name__ == "__main__":
    main()
