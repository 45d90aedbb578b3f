"""Benchmark of the kernel solvers (smo, sampled_cuts) against LIBSVM's C program and its OpenMP binding.

Run on purpose: ``python -m tests.benchmarks.bench_kernel_svm [--sections threads,trend,cache]
[--threads-data a9a,ijcnn1] [--repeats 3] [--sizes 5000,10000,20000,49990,100000,141691]
[--trend-repeats 3] [--linear-max 20000]``.
Writes tests/benchmarks/results/bench_kernel_svm.json (sections not run keep their previous entry).

Sections
--------
* ``threads`` (a9a, all 32,561 rows, gamma 0.0081; ijcnn1, 49,990 rows, gamma 2; rbf, C = 1, tol 1e-3,
  cache 200 MB, shrinking): rounds of smo on 1 thread, smo on 2 threads, LIBSVM's ``svm-train`` (the C
  program built without OpenMP by ../shared/tools/build-anchors.sh; solver seconds from strace, from
  closing the input file to opening the model file) and libsvm-official with ``OMP_NUM_THREADS=2`` (a
  child process; the ``svm_train`` call on a prebuilt problem), interleaved round by round; paired
  ratios smo(1) / svm-train (target <= 0.5) and smo(2) / libsvm OpenMP 2 (target <= 0.6), medians; the
  load average before and after every run; dual objectives, iterations and SVs for equal precision.
* ``trend``: ijcnn1 (rbf gamma 2, C = 1) from 5,000 rows up to all 141,691 train + test rows:
  sampled_cuts constant (r = 400, p = 4, tol 1e-3) and smo, each on 1 and 2 threads (the linear
  variant up to ``--linear-max`` rows), error on 20,000 held-out rows where any are left; at the sizes
  of ``--trend-repeats`` several interleaved rounds and paired ratios (target at 49,990 rows: constant
  >= 3x faster than smo, error within 0.5 points; paper 003, Table 1 and Figure 1).
* ``cache``: smo on the first 8,000 rows of a9a with and without shrinking and cache, and libsvm-official
  (one OpenMP thread) with -h 1 / -h 0; medians of ``--repeats`` runs.

JIT: the compile time of every kernel (fresh numba cache, in a subprocess) is reported apart; each
solver is warmed up before any timed run. Seconds are wall-clock solver seconds (``solver_seconds``
for ours).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # the in-process binding (cache section) runs one thread

import numpy as np
import scipy.sparse as sp
from libsvm import svmutil
from sklearn.datasets import load_svmlight_file

from core.schemas.solver_params import SampledCutsParams, SmoParams
from tests import naive
from tests.benchmarks.bench_sampled_cuts_accuracy import error_percent
from tests.benchmarks.environment import DATA_DIR as SHARED_DATA
from tests.benchmarks.environment import machine
from worker.solvers.sampled_cuts import solve as sampled_cuts
from worker.solvers.smo import solve as smo

DATA_DIR = SHARED_DATA
RESULTS = Path(__file__).resolve().parent / "results" / "bench_kernel_svm.json"


def _load(name, n_features):
    X, y = load_svmlight_file(str(DATA_DIR / f"{name}.svm.gz"), n_features=n_features)
    X = sp.csr_matrix(X)
    X.sort_indices()
    return X, y.astype(np.float64)


_csr = naive.csr_parts


def _compile_seconds() -> float:
    """Seconds to compile every kernel of kernels/smo/sampled_cuts from scratch (fresh cache, subprocess)."""
    code = (
        "import time; t = time.perf_counter()\n"
        "from worker.solvers import kernels, smo, sampled_cuts\n"
        "kernels.warm_up(); smo.warm_up(); sampled_cuts.warm_up()\n"
        "print(time.perf_counter() - t)"
    )
    with tempfile.TemporaryDirectory() as cache_dir:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
        out = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=str(Path(__file__).resolve().parents[2]),
        )
    return float(out.stdout.strip().splitlines()[-1])


def _libsvm_problem(X, y):
    rows = []
    for i in range(X.shape[0]):
        start, stop = X.indptr[i], X.indptr[i + 1]
        rows.append(dict(zip((X.indices[start:stop] + 1).tolist(), X.data[start:stop].tolist())))
    return svmutil.svm_problem(y.tolist(), rows)


def _libsvm_train(problem, options):
    """(model, seconds, cpu seconds, printed lines) with libsvm's stdout captured at the descriptor level."""
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 1)
        try:
            cpu = time.process_time()
            start = time.perf_counter()
            model = svmutil.svm_train(problem, options)
            seconds = time.perf_counter() - start
            cpu = time.process_time() - cpu
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        sink.seek(0)
        lines = sink.read().decode(errors="replace").splitlines()
    return model, seconds, cpu, lines


def _libsvm_summary(model, lines):
    summary = {"n_sv": int(model.get_nr_sv())}
    for line in lines:
        if line.startswith("optimization finished"):
            summary["iterations"] = int(line.split("=")[1])
        if line.startswith("obj ="):
            parts = dict(part.strip().split(" = ") for part in line.split(","))
            summary["dual_objective"] = -float(parts["obj"])
    return summary


def _libsvm_error(model, X_test, y_test):
    rows = [
        dict(
            zip(
                (X_test.indices[X_test.indptr[i] : X_test.indptr[i + 1]] + 1).tolist(),
                X_test.data[X_test.indptr[i] : X_test.indptr[i + 1]].tolist(),
            )
        )
        for i in range(X_test.shape[0])
    ]
    sys.stdout.flush()
    labels, _, _ = svmutil.svm_predict(y_test.tolist(), rows, model, "-q")
    return 100.0 * float(np.mean(np.asarray(labels) != y_test))


def _our_error(result, X, X_test, y_test, kernel):
    return error_percent(result, X, X_test, y_test, kernel)


def _timed(fn):
    cpu = time.process_time()
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start, time.process_time() - cpu


def _median(values):
    return float(np.median(values)) if values else None


def _load_avg():
    return list(os.getloadavg())


THREADS_DATA = {
    "a9a": {"file": "a9a", "n_features": 123, "gamma": 0.0081, "test": "a9a.t"},
    "ijcnn1": {"file": "ijcnn1", "n_features": 22, "gamma": 2.0, "test": "ijcnn1.t"},
}


def _plain_file(name: str, X, y) -> Path:
    """The data as a plain svmlight file in a temporary folder (what the C program reads)."""
    from sklearn.datasets import dump_svmlight_file

    path = Path(tempfile.gettempdir()) / "hinge-bench-kernel" / f"{name}.svm"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        dump_svmlight_file(X, y, str(path), zero_based=False)
    return path


def _libsvm_openmp(name: str, rows: int, gamma: float, C: float, threads: int) -> dict:
    """libsvm-official with OMP_NUM_THREADS=threads, in a child process (OpenMP reads it when loaded)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.bench_kernel_svm", "--libsvm-child", f"{name},{rows},{gamma!r},{C!r}"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=str(Path(__file__).resolve().parents[2]),
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def libsvm_child(spec: str) -> None:
    """The child of _libsvm_openmp: build the problem, train once (timed), print JSON."""
    name, rows, gamma, C = spec.split(",")
    X, y = _load(name, THREADS_DATA[name]["n_features"] if name in THREADS_DATA else None)
    X, y = X[: int(rows)], y[: int(rows)]
    problem = _libsvm_problem(X, y)
    model, seconds, cpu, lines = _libsvm_train(
        problem, f"-s 0 -t 2 -c {float(C)!r} -g {float(gamma)!r} -e 0.001 -h 1 -m 200"
    )
    print(
        json.dumps(
            {
                "seconds": seconds,
                "cpu": cpu,
                "omp_threads": os.environ.get("OMP_NUM_THREADS"),
                **_libsvm_summary(model, lines),
            }
        )
    )


def section_threads(names: list[str], repeats: int) -> dict:
    """smo on 1 and 2 threads against svm-train (one thread) and libsvm-official with OpenMP on 2 threads."""
    from tests.benchmarks import anchors

    out = {}
    for name in names:
        spec = THREADS_DATA[name]
        X, y = _load(spec["file"], spec["n_features"])
        X_test, y_test = _load(spec["test"], spec["n_features"])
        path = _plain_file(spec["file"], X, y)
        kernel = {"type": "rbf", "gamma": spec["gamma"]}
        indptr, indices, data = _csr(X)
        rounds = []
        for repeat in range(repeats):
            entry = {"repeat": repeat}
            for threads in (1, 2):
                load = _load_avg()
                result = smo.solve_smo(
                    indptr,
                    indices,
                    data,
                    y,
                    n_features=spec["n_features"],
                    params=SmoParams(C=1.0, kernel=kernel, cache_mb=200),
                    n_threads=threads,
                )
                entry[f"smo_{threads}"] = {
                    "seconds": result.solver_seconds,
                    "iterations": result.n_iter,
                    "dual_objective": result.extra["dual_objective"],
                    "n_sv": result.extra["n_sv"],
                    "load": [load, _load_avg()],
                }
                if repeat == 0 and threads == 1:
                    entry["smo_test_error_pct"] = _our_error(result, X, X_test, y_test, kernel)
            load = _load_avg()
            entry["svm_train"] = dict(anchors.svm_train(str(path), 1.0, spec["gamma"]), load=[load, _load_avg()])
            load = _load_avg()
            entry["libsvm_omp2"] = dict(
                _libsvm_openmp(spec["file"], X.shape[0], spec["gamma"], 1.0, 2), load=[load, _load_avg()]
            )
            entry["ratio_smo1_over_svm_train"] = entry["smo_1"]["seconds"] / entry["svm_train"]["seconds"]
            entry["ratio_smo2_over_libsvm_omp2"] = entry["smo_2"]["seconds"] / entry["libsvm_omp2"]["seconds"]
            entry["smo_thread_speedup"] = entry["smo_1"]["seconds"] / entry["smo_2"]["seconds"]
            entry["libsvm_openmp_vs_svm_train"] = entry["svm_train"]["seconds"] / entry["libsvm_omp2"]["seconds"]
            rounds.append(entry)
            print(
                name,
                {k: (round(v, 3) if isinstance(v, float) else v) for k, v in entry.items() if not isinstance(v, dict)},
                {k: round(v["seconds"], 2) for k, v in entry.items() if isinstance(v, dict)},
                flush=True,
            )
        med = lambda key: _median([r[key] for r in rounds])  # noqa: E731
        out[name] = {
            "data": f"{spec['file']} ({X.shape[0]:,} rows), rbf gamma {spec['gamma']}, C = 1, tol 1e-3, cache 200 MB",
            "rounds": rounds,
            "median_seconds": {
                k: _median([r[k]["seconds"] for r in rounds]) for k in ("smo_1", "smo_2", "svm_train", "libsvm_omp2")
            },
            "paired_median_smo1_over_svm_train": med("ratio_smo1_over_svm_train"),
            "paired_median_smo2_over_libsvm_omp2": med("ratio_smo2_over_libsvm_omp2"),
            "paired_median_smo_thread_speedup": med("smo_thread_speedup"),
            "paired_median_libsvm_openmp_speedup": med("libsvm_openmp_vs_svm_train"),
            "targets": {"smo1_over_svm_train": 0.5, "smo2_over_libsvm_omp2": 0.6},
            "identical_1_and_2_threads": all(
                r["smo_1"]["iterations"] == r["smo_2"]["iterations"]
                and r["smo_1"]["dual_objective"] == r["smo_2"]["dual_objective"]
                for r in rounds
            ),
        }
    return out


def _ijcnn1_union():
    """ijcnn1's training rows (in file order) followed by a seeded permutation of its test rows."""
    X_train, y_train = _load("ijcnn1", 22)
    X_test, y_test = _load("ijcnn1.t", 22)
    order = np.random.default_rng(1).permutation(X_test.shape[0])
    return X_train, y_train, X_test[order], y_test[order]


def section_trend(sizes: list[int], repeats_at: dict[int, int], linear_max: int) -> dict:
    """sampled_cuts (constant, linear) against smo along n, up to ijcnn1's train + test rows (141,691)."""
    X_train, y_train, X_rest, y_rest = _ijcnn1_union()
    n_train = X_train.shape[0]
    kernel = {"type": "rbf", "gamma": 2.0}
    order = np.random.default_rng(0).permutation(n_train)
    rows = []
    for size in sizes:
        if size <= n_train:
            pick = np.sort(order[:size])
            X, y = X_train[pick], y_train[pick]
            X_eval, y_eval, eval_kind = X_rest[:20000], y_rest[:20000], "test: 20,000 rows of ijcnn1.t"
        else:
            extra = size - n_train
            X, y = sp.vstack([X_train, X_rest[:extra]]).tocsr(), np.concatenate([y_train, y_rest[:extra]])
            left = X_rest.shape[0] - extra
            if left >= 20000:
                X_eval, y_eval, eval_kind = (
                    X_rest[extra : extra + 20000],
                    y_rest[extra : extra + 20000],
                    "test: 20,000 unused rows of ijcnn1.t",
                )
            else:
                sample = np.sort(np.random.default_rng(2).choice(size, 20000, replace=False))
                X_eval, y_eval, eval_kind = (
                    X[sample],
                    y[sample],
                    "training error on 20,000 of its rows (no test rows left)",
                )
        indptr, indices, data = _csr(X)
        csr = (indptr, indices, data, y)
        entry = {
            "n": int(size),
            "error_on": eval_kind,
            "measured_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
            "runs": [],
        }
        solvers = {
            "sampled_cuts_constant_1": lambda: sampled_cuts.solve_sampled_cuts(
                *csr,
                n_features=22,
                params=SampledCutsParams(C=1.0, kernel=kernel, variant="constant", sample_size=400),
                n_threads=1,
            ),
            "smo_1": lambda: smo.solve_smo(*csr, n_features=22, params=SmoParams(C=1.0, kernel=kernel), n_threads=1),
            "sampled_cuts_constant_2": lambda: sampled_cuts.solve_sampled_cuts(
                *csr,
                n_features=22,
                params=SampledCutsParams(C=1.0, kernel=kernel, variant="constant", sample_size=400),
                n_threads=2,
            ),
            "smo_2": lambda: smo.solve_smo(*csr, n_features=22, params=SmoParams(C=1.0, kernel=kernel), n_threads=2),
        }
        if size <= linear_max:
            solvers["sampled_cuts_linear_2"] = lambda: sampled_cuts.solve_sampled_cuts(
                *csr,
                n_features=22,
                params=SampledCutsParams(C=1.0, kernel=kernel, variant="linear", sample_size=400),
                n_threads=2,
            )
        for repeat in range(repeats_at.get(size, 1)):
            run = {}
            for name, fit in solvers.items():
                load = _load_avg()
                result = fit()
                run[name] = {
                    "seconds": result.solver_seconds,
                    "iterations": result.n_iter,
                    "n_sv": result.extra["n_sv"],
                    "objective": result.objective,
                    "load": [load, _load_avg()],
                }
                for key in ("n_cuts", "master_smo_fallbacks", "kernel_values_computed"):
                    if key in result.extra:
                        run[name][key] = result.extra[key]
                if repeat == 0:
                    run[name]["error_pct"] = _our_error(result, X, X_eval, y_eval, kernel)
            for threads in (1, 2):
                run[f"smo_over_constant_{threads}"] = (
                    run[f"smo_{threads}"]["seconds"] / run[f"sampled_cuts_constant_{threads}"]["seconds"]
                )
            entry["runs"].append(run)
            print(
                f"n={size}",
                {
                    k: (round(v["seconds"], 2), v.get("error_pct")) if isinstance(v, dict) else round(v, 2)
                    for k, v in run.items()
                },
                flush=True,
            )
        entry["median_seconds"] = {name: _median([r[name]["seconds"] for r in entry["runs"]]) for name in solvers}
        entry["error_pct"] = {name: entry["runs"][0][name]["error_pct"] for name in solvers}
        for threads in (1, 2):
            entry[f"paired_median_smo_over_constant_{threads}"] = _median(
                [r[f"smo_over_constant_{threads}"] for r in entry["runs"]]
            )
        rows.append(entry)
    return {
        "data": "ijcnn1: nested random subsets (seed 0) of the 49,990 training rows, then those rows plus ijcnn1.t's "
        "rows in a seeded order (seed 1) up to all 141,691",
        "parameters": {
            "kernel": kernel,
            "C": 1.0,
            "sample_size": 400,
            "tol_sampled_cuts": 1e-3,
            "p": 4,
            "tol_smo": 1e-3,
            "cache_mb_smo": 200,
        },
        "sizes": rows,
    }


def section_cache(repeats: int) -> dict:
    X, y = _load("a9a", 123)
    X, y = X[:8000], y[:8000]
    kernel = {"type": "rbf", "gamma": 0.0081}
    indptr, indices, data = _csr(X)
    problem = _libsvm_problem(X, y)
    settings = [(True, 200.0), (False, 200.0), (True, 0.0), (False, 0.0)]
    runs = {f"smo shrinking={s} cache_mb={c:g}": [] for s, c in settings}
    lib_runs = {"libsvm -h 1 -m 200": [], "libsvm -h 0 -m 200": []}
    load_before = _load_avg()
    for _ in range(repeats):
        for shrinking, cache_mb in settings:
            result = smo.solve_smo(
                indptr,
                indices,
                data,
                y,
                n_features=123,
                params=SmoParams(C=1.0, kernel=kernel, shrinking=shrinking, cache_mb=cache_mb),
            )
            runs[f"smo shrinking={shrinking} cache_mb={cache_mb:g}"].append(
                {
                    "seconds": result.solver_seconds,
                    "iterations": result.n_iter,
                    "dual_objective": result.extra["dual_objective"],
                    "cache_hit_rate": result.extra["cache_hit_rate"],
                    "kernel_values_computed": result.extra["kernel_values_computed"],
                    "min_active_size": result.extra["min_active_size"],
                }
            )
            print(f"  smo shrinking={shrinking} cache={cache_mb:g}: {result.solver_seconds:.2f} s", flush=True)
        for name, opts in (("libsvm -h 1 -m 200", "-h 1"), ("libsvm -h 0 -m 200", "-h 0")):
            model, seconds, cpu, lines = _libsvm_train(problem, f"-s 0 -t 2 -c 1 -g 0.0081 -e 0.001 -m 200 {opts}")
            lib_runs[name].append({"seconds": seconds, "cpu": cpu, **_libsvm_summary(model, lines)})
            print(f"  {name}: {seconds:.2f} s", flush=True)
    table = {
        name: {"median_seconds": _median([r["seconds"] for r in rs]), "runs": rs}
        for name, rs in {**runs, **lib_runs}.items()
    }
    return {
        "data": "a9a, first 8,000 rows",
        "parameters": {"kernel": kernel, "C": 1.0, "tol": 1e-3},
        "repeats": repeats,
        "results": table,
        "load_average_before_after": [load_before, _load_avg()],
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default="threads,trend,cache")
    parser.add_argument("--threads-data", default="a9a,ijcnn1")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", default="5000,10000,20000,49990,100000,141691")
    parser.add_argument("--trend-repeats", default="49990:3", help="size:rounds,... (other sizes: one round)")
    parser.add_argument("--linear-max", type=int, default=20000)
    parser.add_argument("--skip-compile", action="store_true", help="do not measure the cold compile time")
    parser.add_argument("--libsvm-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.libsvm_child:
        libsvm_child(args.libsvm_child)
        return
    sections = [s for s in args.sections.split(",") if s]
    report = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    for stale in ("a9a", "ijcnn1"):  # superseded by smo_threads and trend
        report.pop(stale, None)
    report["machine"] = machine()
    report["threads"] = {
        "OMP_NUM_THREADS (in-process libsvm)": os.environ.get("OMP_NUM_THREADS"),
        "ours": "n_threads per run (numba prange, workqueue layer)",
    }
    if not args.skip_compile:
        report["jit_compile_seconds"] = _compile_seconds()
        print(f"compile (fresh cache): {report['jit_compile_seconds']:.1f} s", flush=True)
    start = time.perf_counter()
    smo.warm_up()
    sampled_cuts.warm_up()
    report["jit_cache_load_seconds"] = time.perf_counter() - start
    if "threads" in sections:
        print("threads", flush=True)
        report["smo_threads"] = section_threads(args.threads_data.split(","), args.repeats)
    if "trend" in sections:
        print("trend", flush=True)
        repeats_at = {int(k): int(v) for k, v in (item.split(":") for item in args.trend_repeats.split(",") if item)}
        trend = section_trend([int(v) for v in args.sizes.split(",")], repeats_at, args.linear_max)
        measured = {entry["n"] for entry in trend["sizes"]}
        kept = [entry for entry in report.get("trend", {}).get("sizes", []) if entry["n"] not in measured]
        trend["sizes"] = sorted(kept + trend["sizes"], key=lambda entry: entry["n"])  # sizes not run keep their entry
        report["trend"] = trend
    if "cache" in sections:
        print("cache", flush=True)
        report["cache"] = section_cache(args.repeats)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2, default=float) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
