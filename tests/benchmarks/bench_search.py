"""Model-selection benchmarks (issues 5 and 10).

    python -m tests.benchmarks.bench_search [--sections speedup,warm,table3] [--repeats 3]
        [--speedup-data a9a,sector]

- speedup: wall time of an 8-setting C search (5 folds, dcd with the schema's defaults) through
  ``worker.training.search.run_search`` with 1 and with 2 processes, on a9a (two labels: 5 paths, so every fit
  is a task) and on sector.scale (105 classes: 525 (fold, class) paths, one task each); runs
  interleaved (search 1, search 2, calibration 1, calibration 2, ...), paired ratios and medians, the
  load average before and after every run; the tables of both process counts must be identical. The
  calibration (16 identical independent dcd fits on a9a through the subtask runner) says what the
  machine gives 2 processes in the same minutes. Target: >= 1.7x.
- warm: iterations along a C path (8 values) on a9a for dcd and ocas, warm start vs cold; and the
  search table's measured savings (``measure_cold``) for dcd on a9a.
- table3: paper 000's "time to perform a full model selection": train on the training file for every C
  of a grid, score auROC on the test file (used as the validation set), keep the best; for dcd, ocas and
  cpa on a9a and ijcnn1; reference liblinear-official's `-C` search (-s 2: LIBLINEAR's -C does not
  support the hinge-loss dual -s 3) timed in the same run.

Writes tests/benchmarks/results/bench_search.json (sections not run keep their previous entry).
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

from core.schemas.solver_params import SolverParams  # noqa: E402
from core.scoring import metrics  # noqa: E402
from core.solvers import solver_params  # noqa: E402
from tests.benchmarks.environment import DATA_DIR as SHARED_DATA  # noqa: E402
from tests.benchmarks.environment import machine
from tests.helpers import NullSink  # noqa: E402
from worker.solvers.common import SolverControl  # noqa: E402
from worker.training import registry  # noqa: E402
from worker.training.context import FitContext
from worker.training.search import run_search  # noqa: E402

DATA = SHARED_DATA
RESULTS = Path(__file__).resolve().parent / "results"
GRID = [0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0]


def load(name: str, n_features: int | None = None):
    X, y = load_svmlight_file(str(DATA / name), n_features=n_features)
    X = X.tocsr()
    arrays = {
        "indptr": X.indptr.astype(np.int64),
        "indices": X.indices.astype(np.int32),
        "data": X.data.astype(np.float64),
        "y": y.astype(np.float64),
    }
    return arrays, X.shape[1], X, y


def dcd_params(**overrides):
    """The dcd parameters of these runs, as the solver's schema reads them (what the adapters take)."""
    params = {
        "C": 1.0,
        "loss": "hinge",
        "bias": 1.0,
        "class_weight": None,
        "tol": 0.1,
        "max_iter": 1000,
        "shrinking": True,
        "trace_every": 1000,
        "seed": 0,
        "max_seconds": None,
        "n_processes": None,
    }
    params.update(overrides)
    return solver_params("dcd", params)


def ocas_params(**overrides):
    """The ocas parameters of these runs, as the solver's schema reads them (what the adapters take)."""
    params = {
        "C": 1.0,
        "bias": 1.0,
        "tol_rel": 0.01,
        "tol_abs": 0.0,
        "lambda": 0.1,
        "max_iter": 100000,
        "max_inactive": 50,
        "seed": 0,
        "max_seconds": None,
        "n_processes": 1,
    }
    params.update(overrides)
    return solver_params("ocas", params)


def cpa_params(**overrides):
    """The cpa parameters of these runs, as the solver's schema reads them (what the adapters take)."""
    params = {
        "C": 1.0,
        "bias": 1.0,
        "tol": 0.001,
        "max_iter": 10000,
        "max_inactive": 50,
        "objective": "classification",
        "seed": 0,
        "max_seconds": None,
        "n_processes": 1,
    }
    params.update(overrides)
    return solver_params("cpa", params)


SPEEDUP_DATA = {"a9a": ("a9a.svm.gz", None), "sector": ("sector.scale.svm.gz", 55197)}


def _search_params(processes: int, measure_cold: bool = False) -> SolverParams:
    """dcd with the schema's defaults (what a job gets), an 8-value C grid, 5 folds."""
    from core.schemas.solver_params import DcdParams

    search = {
        "C": GRID,
        "gamma": None,
        "cv_folds": 5,
        "metric": "accuracy",
        "seed": 0,
        "warm_start": True,
        "distribute": False,
        "measure_cold": measure_cold,
    }
    return solver_params("dcd", dict(DcdParams().model_dump(), n_processes=processes, search=search))


def _load_average() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def speedup(repeats: int, datasets: list[str]) -> dict:
    """1 and 2 processes, runs interleaved (1, 2, 1, 2, ...) so that a noisy minute hits both alike."""
    calibration_arrays, calibration_features, _, _ = load("a9a.svm.gz")
    out = {}
    for name in datasets:
        file_name, n_features = SPEEDUP_DATA[name]
        arrays, n_features, _, _ = load(file_name, n_features)
        runs: list[dict] = []
        tables = {}
        for repeat in range(repeats):
            run = {"repeat": repeat}
            for processes in (1, 2):
                load_before = _load_average()
                start = time.perf_counter()
                outcome = run_search(
                    "dcd",
                    _search_params(processes),
                    arrays,
                    n_features,
                    context=FitContext(NullSink()),
                    publish=lambda table, subtasks: None,
                )
                run[f"search_{processes}_s"] = time.perf_counter() - start
                run[f"search_{processes}_load"] = [load_before, _load_average()]
                tables[processes] = [
                    {k: v for k, v in row.items() if k != "seconds"} for row in outcome.model.search_results["settings"]
                ]
                if processes == 1:
                    run["refit_path"] = outcome.model.refit_path
                    run["best"] = outcome.model.search_results["best"]
            for processes in (1, 2):
                run[f"calibration_{processes}_s"] = calibration_run(calibration_arrays, calibration_features, processes)
            run["search_ratio"] = run["search_1_s"] / run["search_2_s"]
            run["calibration_ratio"] = run["calibration_1_s"] / run["calibration_2_s"]
            runs.append(run)
            print(
                name,
                {
                    k: (round(v, 3) if isinstance(v, float) else v)
                    for k, v in run.items()
                    if not isinstance(v, (dict, list))
                },
                flush=True,
            )
        median = statistics.median
        out[name] = {
            "data": file_name,
            "settings": len(GRID),
            "cv_folds": 5,
            "paths": 5 * (1 if len(np.unique(arrays["y"])) == 2 else len(np.unique(arrays["y"]))),
            "runs": runs,
            "search_1_median_s": median(r["search_1_s"] for r in runs),
            "search_2_median_s": median(r["search_2_s"] for r in runs),
            "speedup_of_medians": median(r["search_1_s"] for r in runs) / median(r["search_2_s"] for r in runs),
            "paired_speedup_median": median(r["search_ratio"] for r in runs),
            "paired_speedups": [r["search_ratio"] for r in runs],
            "calibration_paired_median": median(r["calibration_ratio"] for r in runs),
            "calibration_paired": [r["calibration_ratio"] for r in runs],
            "tables_identical": tables[1] == tables[2],
            "table": tables[1],
        }
        print(
            name,
            "paired speedup",
            round(out[name]["paired_speedup_median"], 3),
            "calibration",
            round(out[name]["calibration_paired_median"], 3),
            "identical",
            out[name]["tables_identical"],
            flush=True,
        )
    return out


def calibration_run(arrays: dict, n_features: int, processes: int, fits: int = 16) -> float:
    """Seconds for ``fits`` identical, independent dcd fits on a9a through the subtask runner."""
    from worker.runtime.subtasks import run_subtasks

    y = np.where(arrays["y"] > 0, 1.0, -1.0)
    fit = registry.adapter("dcd")

    def one_fit(task, context):
        fit(
            arrays["indptr"],
            arrays["indices"],
            arrays["data"],
            y,
            n_features=n_features,
            params=dcd_params(C=1.0, tol=0.01, seed=task % 2),
            class_weight=(1.0, 1.0),
            control=SolverControl(),
        )

    start = time.perf_counter()
    run_subtasks(
        one_fit,
        list(range(fits)),
        n_processes=processes,
        deadline=None,
        cancel_requested=lambda: False,
        on_point=lambda index, point: None,
    )
    return time.perf_counter() - start


def measured_savings() -> dict:
    """The search table's own measurement of what warm starts save (fold 0 refitted cold), dcd on a9a."""
    arrays, n_features, _, _ = load("a9a.svm.gz")
    outcome = run_search(
        "dcd",
        _search_params(2, measure_cold=True),
        arrays,
        n_features,
        context=FitContext(NullSink()),
        publish=lambda table, subtasks: None,
    )
    keys = (
        "C",
        "n_iter",
        "warm_started_fits",
        "stop_reasons",
        "cold_n_iter",
        "iterations_saved",
        "iterations_saved_basis",
    )
    return {"settings": [{k: row[k] for k in keys} for row in outcome.model.search_results["settings"]]}


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
                    start_args = (
                        registry.warm_start_arguments(solver, previous, params, previous_C) if mode == "warm" else {}
                    )
                    result = fit(
                        indptr,
                        indices,
                        data,
                        y,
                        n_features=n_features,
                        params=params,
                        class_weight=(1.0, 1.0),
                        control=SolverControl(),
                        **start_args,
                    )
                    total_iter += result.n_iter
                    previous, previous_C = result, C
                seconds.append(time.perf_counter() - start)
                iterations.append(total_iter)
            row[mode] = {"iterations": iterations[0], "median_s": statistics.median(seconds)}
        row["iterations_saved"] = row["cold"]["iterations"] - row["warm"]["iterations"]
        out[solver] = row
        print("warm", solver, row, flush=True)
    out["search_table_dcd_a9a"] = measured_savings()
    print("warm search table", out["search_table_dcd_a9a"], flush=True)
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
                    result = fit(
                        arrays["indptr"],
                        arrays["indices"],
                        arrays["data"],
                        y,
                        n_features=n_features,
                        params=params,
                        class_weight=(1.0, 1.0),
                        control=SolverControl(),
                        **start_args,
                    )
                    previous, previous_C = result, C
                    auc = metrics.roc_auc(Xt @ result.w + result.bias, positive)
                    if best is None or auc > best[1]:
                        best = (C, auc)
                runs.append((time.perf_counter() - start, best))
            rows[solver] = {
                "median_s": statistics.median(r[0] for r in runs),
                "best_C": runs[0][1][0],
                "test_auroc": runs[0][1][1],
            }
            print("table3", name, solver, rows[solver], flush=True)
        from liblinear import liblinearutil

        problem = liblinearutil.problem(y, X)
        seconds = []
        for _ in range(repeats):
            start = time.perf_counter()
            best_C, _, best_accuracy = liblinearutil.train(problem, "-s 2 -C -v 5 -B 1 -q")
            seconds.append(time.perf_counter() - start)
        rows["liblinear_-C_-s2"] = {
            "median_s": statistics.median(seconds),
            "best_C": best_C,
            "cv_accuracy": best_accuracy,
            "note": "5-fold CV over LIBLINEAR's own C grid",
        }
        print("table3", name, "liblinear", rows["liblinear_-C_-s2"], flush=True)
        out[name] = rows
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sections", default="speedup,warm,table3")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--speedup-data", default="a9a,sector")
    args = parser.parse_args()
    registry.warm_up_all()
    path = RESULTS / "bench_search.json"
    result = json.loads(path.read_text()) if path.exists() else {}
    result = {k: v for k, v in result.items() if k not in ("machine", "repeats", "speedup_repeats", "speedup_machine")}
    result.update({"benchmark": "bench_search", "grid_C": GRID})
    for section in args.sections.split(","):
        started = _load_average()
        if section == "speedup":
            entry = speedup(args.repeats, args.speedup_data.split(","))
        else:
            entry = {"warm": warm, "table3": table3}[section](args.repeats)
        result[section] = {
            "machine": machine(),
            "repeats": args.repeats,
            "load_average_before_after": [started, _load_average()],
            **entry,
        }
    RESULTS.mkdir(exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=float) + "\n")


if __name__ == "__main__":
    main()
