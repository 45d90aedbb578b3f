"""smo's kernel epsilon-SVR (``svm_type: epsilon_svr``) against libsvm-official -s 3, and its one-class SVM
(``one_class``) against -s 2, 1 thread, equal precision.

Issue 33, item 2: the same objective to 1e-4 relative at the same stopping precision, and time at most 1.0x the C
program's. Both stop at the largest KKT violation below ``--tol`` (LIBSVM's -e; ours with ``tol_rel`` null, the
same rule alone), rbf kernel with LIBSVM's default gamma 1 / n_features, epsilon 0.1, the same kernel cache
(``--cache-mb``, LIBSVM's -m). Both models' primal objectives, 0.5 beta' K beta + C sum_i max(0, |f(x_i) - y_i| -
epsilon), are computed here the same way (``core.scoring.kernel``). Interleaved ``--repeats`` runs, medians; the
solver seconds for ours (``solve_smo``, trace points excluded), ``svm_train`` for LIBSVM.

Data: abalone_scale (../shared/data) and the first ``--flights-rows`` rows of NYC's 2013 flights when
make_flights.py has written them. Writes tests/benchmarks/results/bench_kernel_svr.json.

    .venv/bin/python -m tests.benchmarks.bench_kernel_svr --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
from libsvm import svmutil
from sklearn.datasets import load_svmlight_file

from core.schemas.solver_params import SmoParams
from core.scoring.kernel import KernelExpansion
from tests.benchmarks.bench_svr import FLIGHTS
from tests.benchmarks.environment import DATA_DIR
from worker.solvers.smo.solve import solve_smo

RESULTS = Path(__file__).resolve().parent / "results"


def data_sets(flights_rows: int) -> dict:
    """name: (X csr, y)."""
    X, y = load_svmlight_file(str(Path(DATA_DIR) / "abalone_scale.svm.gz"))
    sets = {"abalone_scale": (X.tocsr(), y)}
    if FLIGHTS.exists() and flights_rows > 0:
        X, y = load_svmlight_file(str(FLIGHTS))
        sets[f"flights_{flights_rows}"] = (X.tocsr()[:flights_rows], y[:flights_rows])
    return sets


def primal(X, y, support, coef, b, kernel: dict, C: float, epsilon: float) -> float:
    """0.5 beta' K beta + C sum_i max(0, |f(x_i) - y_i| - epsilon) of an expansion over ``support`` rows of X."""
    rows = X[support]
    expansion = KernelExpansion(rows.indptr, rows.indices, rows.data, coef, b, kernel, n_features=X.shape[1])
    values = np.asarray(expansion.decision_function(X.indptr, X.indices, X.data)).reshape(-1)
    quad = float(np.asarray(coef) @ (values[support] - b))
    return 0.5 * quad + C * float(np.maximum(np.abs(values - y) - epsilon, 0.0).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--C", type=float, default=1.0)
    parser.add_argument("--tol", type=float, default=1e-3)
    parser.add_argument("--cache-mb", type=float, default=200.0)
    parser.add_argument("--flights-rows", type=int, default=20000)
    parser.add_argument("--out", type=Path, default=RESULTS / "bench_kernel_svr.json")
    args = parser.parse_args()
    cases = []
    for name, (X, y) in data_sets(args.flights_rows).items():
        X.sort_indices()
        gamma = 1.0 / X.shape[1]
        kernel = {"type": "rbf", "gamma": gamma}
        params = SmoParams(
            svm_type="epsilon_svr", C=args.C, epsilon=0.1, kernel=kernel, tol=args.tol, tol_rel=None,
            cache_mb=args.cache_mb, trace_every=10**9,
        )  # fmt: skip
        options = f"-s 3 -t 2 -g {gamma!r} -c {args.C} -p 0.1 -e {args.tol} -m {args.cache_mb} -q"
        problem = svmutil.svm_problem(list(y), X)
        ours_s, theirs_s = [], []
        for _ in range(args.repeats):
            result = solve_smo(X.indptr, X.indices, X.data, y, n_features=X.shape[1], params=params, n_threads=1)
            ours_s.append(result.solver_seconds)
            started = time.perf_counter()
            model = svmutil.svm_train(problem, svmutil.svm_parameter(options))
            theirs_s.append(time.perf_counter() - started)
        support = np.asarray(model.get_sv_indices(), dtype=np.int64) - 1
        coef = np.array([c[0] for c in model.get_sv_coef()])
        theirs_obj = primal(X, y, support, coef, -model.rho[0], kernel, args.C, 0.1)
        ours_obj = primal(
            X, y, result.extra["support_indices"], result.extra["dual_coef"], result.bias, kernel, args.C, 0.1
        )
        case = {
            "data": name,
            "rows": int(X.shape[0]),
            "C": args.C,
            "gamma": gamma,
            "tol": args.tol,
            "ours": {"seconds": statistics.median(ours_s), "objective": ours_obj, "n_sv": int(result.extra["n_sv"]),
                     "steps": int(result.n_iter)},
            "libsvm": {"seconds": statistics.median(theirs_s), "objective": theirs_obj, "n_sv": int(model.l)},
        }  # fmt: skip
        case["ratio"] = case["ours"]["seconds"] / case["libsvm"]["seconds"]
        case["objective_rel_diff"] = (ours_obj - theirs_obj) / theirs_obj
        cases.append(case)
        print(json.dumps(case), flush=True)
    for name, (X, _) in data_sets(args.flights_rows).items():  # the one-class SVM on the same rows (labels unused)
        cases.append(one_class_case(name, X, args))
        print(json.dumps(cases[-1]), flush=True)
    args.out.write_text(json.dumps({"cases": cases}, indent=2) + "\n")


def one_class_case(name: str, X, args) -> dict:
    """smo's one_class (nu 0.5, rbf at LIBSVM's default gamma) against LIBSVM -s 2 at equal tol: seconds and both
    dual objectives 0.5 alpha' K alpha (ours is its primal, minus that at the optimum)."""
    gamma = 1.0 / X.shape[1]
    kernel = {"type": "rbf", "gamma": gamma}
    params = SmoParams(
        svm_type="one_class", nu=0.5, kernel=kernel, tol=args.tol, tol_rel=None, cache_mb=args.cache_mb,
        trace_every=10**9,
    )  # fmt: skip
    options = f"-s 2 -t 2 -g {gamma!r} -n 0.5 -e {args.tol} -m {args.cache_mb} -q"
    problem = svmutil.svm_problem([1.0] * X.shape[0], X)
    ours_s, theirs_s = [], []
    for _ in range(args.repeats):
        result = solve_smo(
            X.indptr, X.indices, X.data, np.ones(X.shape[0]), n_features=X.shape[1], params=params, n_threads=1
        )
        ours_s.append(result.solver_seconds)
        started = time.perf_counter()
        model = svmutil.svm_train(problem, svmutil.svm_parameter(options))
        theirs_s.append(time.perf_counter() - started)
    support = np.asarray(model.get_sv_indices(), dtype=np.int64) - 1
    coef = np.array([c[0] for c in model.get_sv_coef()])
    rows = X[support]
    expansion = KernelExpansion(rows.indptr, rows.indices, rows.data, coef, 0.0, kernel, n_features=X.shape[1])
    theirs_dual = 0.5 * float(
        coef @ np.asarray(expansion.decision_function(rows.indptr, rows.indices, rows.data)).reshape(-1)
    )
    case = {
        "data": name,
        "kind": "one_class",
        "rows": int(X.shape[0]),
        "nu": 0.5,
        "ours": {"seconds": statistics.median(ours_s), "dual": -float(result.extra["dual_objective"]),
                 "n_sv": int(result.extra["n_sv"])},
        "libsvm": {"seconds": statistics.median(theirs_s), "dual": theirs_dual, "n_sv": int(model.l)},
    }  # fmt: skip
    case["ratio"] = case["ours"]["seconds"] / case["libsvm"]["seconds"]
    return case


if __name__ == "__main__":
    main()
