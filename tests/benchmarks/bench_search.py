"""Model-selection benchmarks (issue 5).

    python -m tests.benchmarks.bench_search [--sections speedup,warm,table3] [--repeats 3]

- speedup: wall time of an 8-setting C search (5 folds) on a9a through ``worker.search.run_search``,
  with 1 and with 2 processes (target: >= 1.7x on 2 cores); the two tables must be identical.
- warm: iterations along a C path (8 values) on a9a for dcd and ocas, warm start vs cold.
- table3: paper 000's "time to perform a full model selection": train on the training file for every C
  of a grid, score auROC on the test file (used as the validation set), keep the best; for dcd, ocas and
  cpa on a9a and ijcnn1; reference liblinear-official's `-C` search (-s 2: LIBLINEAR's -C does not
  support the hinge-loss dual -s 3) timed in the same run.

Writes tests/benchmarks/results/bench_search.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")

import numpy as np  # noqa: E402
from sklearn.datasets import load_svmlight_file  # noqa: E402

from service.scoring import metrics  # noqa: E402
from tests.benchmarks.environment import DATA_DIR as SHARED_DATA, machine  # noqa: E402
from tests.helpers import NullSink  # noqa: E402
from worker import registry  # noqa: E402
from worker.search import run_search  # noqa: E402
from worker.solvers.common import SolverControl  # noqa: E402

DATA = SHARED_DATA
RESULTS = Path(__file__).resolve().parent / "results"
GRID = [0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0]


def load(name: str, n_features: int | None = None):
    X, y = load_svmlight_file(str(DATA / name), n_features=n_features)
    X = X.tocsr()
    arrays = {"indptr": X.indptr.astype(np.int64), "indices": X.indices.astype(np.int32),
              "data": X.data.astype(np.float64), "y": y.astype(np.float64)}
    return arrays, X.shape[1], X, y


def dcd_params(**overrides) -> dict:
    params = {"C": 1.0, "loss": "hinge", "bias": 1.0, "class_weight": None, "tol": 0.1, "max_iter": 1000,
              "shrinking": True, "trace_every": 1000, "seed": 0, "max_seconds": None, "n_processes": None}
    params.update(overrides)
    return params


def ocas_params(**overrides) -> dict:
    params = {"C": 1.0, "bias": 1.0, "tol_rel": 0.01, "tol_abs": 0.0, "lambda": 0.1, "max_iter": 100000,
              "max_inactive": 50, "seed": 0, "max_seconds": None, "n_processes": 1}
    params.update(overrides)
    return params


def cpa_params(**overrides) -> dict:
    params = {"C": 1.0, "bias": 1.0, "tol": 0.001, "max_iter": 10000, "max_inactive": 50, "objective": "classification",
              "seed": 0, "max_seconds": None, "n_processes": 1}
    params.update(overrides)
    return params


def speedup(repeats: int) -> dict:
    """1 and 2 processes, runs interleaved (1, 2, 1, 2, ...) so that a noisy minute hits both alike."""
    arrays, n_features, _, _ = load("a9a.svm.gz")
    seconds: dict[int, list[float]] = {1: [], 2: []}
    tables = {}
    for _ in range(repeats):
        for processes in (1, 2):
            params = dcd_params(n_processes=processes, search={"C": GRID, "gamma": None, "cv_folds": 5, "metric": "accuracy",
                                                               "seed": 0, "warm_start": True, "distribute": False})
            start = time.perf_counter()
            outcome = run_search("dcd", params, arrays, n_features, deadline=None, cancel_requested=lambda: False,
                                 sink=NullSink(), publish=lambda table, subtasks: None)
            seconds[processes].append(time.perf_counter() - start)
            tables[processes] = [{k: v for k, v in row.items() if k != "seconds"}
                                 for row in outcome.meta["search_results"]["settings"]]
    out = {}
    for processes in (1, 2):
        out[f"{processes}_process"] = {"median_s": statistics.median(seconds[processes]), "runs_s": seconds[processes]}
        print("search", processes, "processes", [round(s, 2) for s in seconds[processes]], flush=True)
    out["speedup"] = out["1_process"]["median_s"] / out["2_process"]["median_s"]
    out["paired_speedups"] = [a / b for a, b in zip(seconds[1], seconds[2])]
    out["calibration"] = calibration(arrays, n_features, repeats)
    out["tables_identical"] = tables[1] == tables[2]
    out["settings"] = len(GRID)
    out["cv_folds"] = 5
    return out


def calibration(arrays: dict, n_features: int, repeats: int) -> dict:
    """What the machine gives: eight identical, independent dcd fits on a9a with 1 and 2 processes."""
    from worker.subtasks import run_subtasks

    y = np.where(arrays["y"] > 0, 1.0, -1.0)
    fit = registry.adapter("dcd")

    def one_fit(task, context):
        fit(arrays["indptr"], arrays["indices"], arrays["data"], y, n_features=n_features,
            params=dcd_params(C=1.0, tol=0.01, seed=task), class_weight=(1.0, 1.0), control=SolverControl())

    out = {}
    for processes in (1, 2):
        seconds = []
        for _ in range(repeats):
            start = time.perf_counter()
            run_subtasks(one_fit, list(range(8)), n_processes=processes, deadline=None, cancel_requested=lambda: False,
                         on_point=lambda index, point: None)
            seconds.append(time.perf_counter() - start)
        out[f"{processes}_process_median_s"] = statistics.median(seconds)
    out["speedup"] = out["1_process_median_s"] / out["2_process_median_s"]
    print("calibration", out, flush=True)
    return out


def warm(repeats: int) -> dict:
    arrays, n_features, _, _ = load("a9a.svm.gz")
    indptr, indices, data = arrays["indptr"], arrays["indices"], arrays["data"]
    y = np.where(arrays["y"] > 0, 1.0, -1.0)
    out = {}
    for solver, make in (("dcd", dcd_params), ("ocas", ocas_params)):
        fit = registry.adapter(solver)
        row = {}
        for mode in ("cold", "warm"):
            iterations, seconds = [], []
            for _ in range(repeats):
                previous, previous_C, total_iter, start = None, None, 0, time.perf_counter()
                for C in GRID:
                    params = make(C=C)
                    start_args = registry.warm_start_arguments(solver, previous, params, previous_C) if mode == "warm" else {}
                    result = fit(indptr, indices, data, y, n_features=n_features, params=params, class_weight=(1.0, 1.0),
                                 control=SolverControl(), **start_args)
                    total_iter += result.n_iter
                    previous, previous_C = result, C
                seconds.append(time.perf_counter() - start)
                iterations.append(total_iter)
            row[mode] = {"iterations": iterations[0], "median_s": statistics.median(seconds)}
        row["iterations_saved"] = row["cold"]["iterations"] - row["warm"]["iterations"]
        out[solver] = row
        print("warm", solver, row, flush=True)
    return out


def table3(repeats: int) -> dict:
    out = {}
    for name, n_features in (("a9a", 123), ("ijcnn1", 22)):
        arrays, _, X, y = load(f"{name}.svm.gz", n_features)
        _, _, Xt, yt = load(f"{name}.t.svm.gz", n_features)
        y = np.where(y > 0, 1.0, -1.0)
        positive = yt > 0
        rows = {}
        for solver, make in (("dcd", dcd_params), ("ocas", ocas_params), ("cpa", cpa_params)):
            fit = registry.adapter(solver)
            runs = []
            for _ in range(repeats):
                start, best, previous, previous_C = time.perf_counter(), None, None, None
                for C in GRID:
                    params = make(C=C)
                    start_args = registry.warm_start_arguments(solver, previous, params, previous_C)
                    result = fit(arrays["indptr"], arrays["indices"], arrays["data"], y, n_features=n_features,
                                 params=params, class_weight=(1.0, 1.0), control=SolverControl(), **start_args)
                    previous, previous_C = result, C
                    auc = metrics.roc_auc(Xt @ result.w + result.bias, positive)
                    if best is None or auc > best[1]:
                        best = (C, auc)
                runs.append((time.perf_counter() - start, best))
            rows[solver] = {"median_s": statistics.median(r[0] for r in runs), "best_C": runs[0][1][0],
                            "test_auroc": runs[0][1][1]}
            print("table3", name, solver, rows[solver], flush=True)
        from liblinear import liblinearutil

        problem = liblinearutil.problem(y, X)
        seconds = []
        for _ in range(repeats):
            start = time.perf_counter()
            best_C, _, best_accuracy = liblinearutil.train(problem, "-s 2 -C -v 5 -B 1 -q")
            seconds.append(time.perf_counter() - start)
        rows["liblinear_-C_-s2"] = {"median_s": statistics.median(seconds), "best_C": best_C,
                                    "cv_accuracy": best_accuracy, "note": "5-fold CV over LIBLINEAR's own C grid"}
        print("table3", name, "liblinear", rows["liblinear_-C_-s2"], flush=True)
        out[name] = rows
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sections", default="speedup,warm,table3")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    registry.warm_up_all()
    result = {"benchmark": "bench_search", "machine": machine(), "grid_C": GRID, "repeats": args.repeats}
    for section in args.sections.split(","):
        result[section] = {"speedup": speedup, "warm": warm, "table3": table3}[section](args.repeats)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_search.json").write_text(json.dumps(result, indent=2, default=float) + "\n")


if __name__ == "__main__":
    main()
