"""Benchmark of the kernel SVM solvers (smo, sampled_cuts) against libsvm-official.

Run on purpose: ``python -m tests.benchmarks.bench_kernel_svm [--sections a9a,cache,ijcnn1]
[--repeats 3] [--a9a-repeats 2] [--sizes 5000,10000,20000,49990] [--ijcnn1-repeats 1]``.
Writes tests/benchmarks/results/bench_kernel_svm.json (sections not run keep their previous entry).

Sections
--------
* ``a9a``: smo (second_order, shrinking, cache 200 MB) against libsvm-official (``-s 0 -t 2 -c 1
  -g 0.0081 -e 0.001 -h 1 -m 200``) on all 32,561 rows of a9a, rbf, C = 1, gamma = 0.0081; runs are
  interleaved (smo, libsvm, smo, ...) so that load from other processes hits both alike; medians of
  ``--a9a-repeats`` runs, the ratio smo / libsvm (target <= 1.5), the dual objectives (libsvm prints
  ``obj`` = -dual; captured from its stdout), numbers of SVs and iterations, test error on a9a.t.
* ``cache``: smo on the first 8,000 rows of a9a with and without shrinking, with a 200 MB cache and
  with the minimal cache (two rows), and libsvm with -h 1 / -h 0 on the same rows; medians of
  ``--repeats`` runs.
* ``ijcnn1``: nested random subsets (fixed seed) of ijcnn1 of growing size, rbf, C = 1, gamma = 2:
  sampled_cuts linear and constant (r = 400, tol 0.001, p = 4), smo, libsvm: solver seconds (median of
  ``--ijcnn1-repeats``) and test error on the first 20,000 rows of ijcnn1.t (paper 003, Figure 1:
  time against n; the constant variant should stay flat, the linear one grow linearly).

libsvm-official is built with OpenMP; it is run with OMP_NUM_THREADS=1 (set before it is loaded) so
that both sides use one thread (our solvers are serial). Seconds are wall-clock solver seconds
(``solver_seconds`` for ours, the ``svm_train`` call for libsvm with the problem built beforehand);
process CPU seconds are recorded too. JIT: the compile time of every kernel (fresh numba cache, in a
subprocess) is reported apart; each solver is warmed up before any timed run.
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

os.environ["OMP_NUM_THREADS"] = "1"

import numpy as np
import scipy.sparse as sp
from libsvm import svmutil
from sklearn.datasets import load_svmlight_file

from tests.benchmarks.environment import DATA_DIR as SHARED_DATA, machine
from worker.solvers import sampled_cuts, smo
from service.scoring.kernel import KernelExpansion

DATA_DIR = SHARED_DATA
RESULTS = Path(__file__).resolve().parent / "results" / "bench_kernel_svm.json"


def _load(name, n_features):
    X, y = load_svmlight_file(str(DATA_DIR / f"{name}.svm.gz"), n_features=n_features)
    X = sp.csr_matrix(X)
    X.sort_indices()
    return X, y.astype(np.float64)


def _csr(X):
    return X.indptr.astype(np.int64), X.indices.astype(np.int32), X.data.astype(np.float64)


def _compile_seconds() -> float:
    """Seconds to compile every kernel of kernels/smo/sampled_cuts from scratch (fresh cache, subprocess)."""
    code = ("import time; t = time.perf_counter()\n"
            "from worker.solvers import kernels, smo, sampled_cuts\n"
            "kernels.warm_up(); smo.warm_up(); sampled_cuts.warm_up()\n"
            "print(time.perf_counter() - t)")
    with tempfile.TemporaryDirectory() as cache_dir:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                             cwd=str(Path(__file__).resolve().parents[2]))
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
    rows = [dict(zip((X_test.indices[X_test.indptr[i]:X_test.indptr[i + 1]] + 1).tolist(),
                     X_test.data[X_test.indptr[i]:X_test.indptr[i + 1]].tolist())) for i in range(X_test.shape[0])]
    sys.stdout.flush()
    labels, _, _ = svmutil.svm_predict(y_test.tolist(), rows, model, "-q")
    return 100.0 * float(np.mean(np.asarray(labels) != y_test))


def _our_error(result, X, X_test, y_test, kernel):
    support = X[result.extra["support_indices"]]
    model = KernelExpansion(support.indptr, support.indices, support.data, result.extra["dual_coef"], result.bias,
                            kernel, n_features=X.shape[1])
    decision = model.decision_function(X_test.indptr, X_test.indices, X_test.data)
    return 100.0 * float(np.mean(np.where(decision > 0, 1.0, -1.0) != y_test))


def _timed(fn):
    cpu = time.process_time()
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start, time.process_time() - cpu


def _median(values):
    return float(np.median(values)) if values else None


def _load_avg():
    return list(os.getloadavg())


def section_a9a(repeats: int) -> dict:
    X, y = _load("a9a", 123)
    X_test, y_test = _load("a9a.t", 123)
    kernel = {"type": "rbf", "gamma": 0.0081}
    options = "-s 0 -t 2 -c 1 -g 0.0081 -e 0.001 -h 1 -m 200"
    problem = _libsvm_problem(X, y)
    indptr, indices, data = _csr(X)
    ours, theirs = [], []
    load_before = _load_avg()
    for _ in range(repeats):
        result, wall, cpu = _timed(lambda: smo.solve_smo(indptr, indices, data, y, n_features=123, C=1.0,
                                                          kernel=kernel, cache_mb=200))
        ours.append({"seconds": result.solver_seconds, "wall": wall, "cpu": cpu, "iterations": result.n_iter,
                     "dual_objective": result.extra["dual_objective"], "primal_objective": result.objective,
                     "n_sv": result.extra["n_sv"], "cache_hit_rate": result.extra["cache_hit_rate"],
                     "converged": result.converged})
        print(f"  smo    {result.solver_seconds:7.2f} s  dual {result.extra['dual_objective']:.4f}", flush=True)
        model, seconds, cpu, lines = _libsvm_train(problem, options)
        theirs.append({"seconds": seconds, "cpu": cpu, **_libsvm_summary(model, lines)})
        print(f"  libsvm {seconds:7.2f} s  dual {theirs[-1].get('dual_objective')}", flush=True)
    smo_median = _median([r["seconds"] for r in ours])
    lib_median = _median([r["seconds"] for r in theirs])
    return {
        "data": "a9a (32,561 rows; test a9a.t 16,281 rows)",
        "parameters": {"kernel": kernel, "C": 1.0, "tol": 1e-3, "cache_mb": 200, "shrinking": True,
                       "working_set": "second_order", "libsvm_options": options},
        "repeats": repeats,
        "smo": {"median_seconds": smo_median, "median_cpu_seconds": _median([r["cpu"] for r in ours]),
                "runs": ours, "test_error_pct": _our_error(result, X, X_test, y_test, kernel)},
        "libsvm": {"median_seconds": lib_median, "median_cpu_seconds": _median([r["cpu"] for r in theirs]),
                   "runs": theirs, "test_error_pct": _libsvm_error(model, X_test, y_test)},
        "ratio_smo_over_libsvm": smo_median / lib_median,
        "target_ratio": 1.5,
        "load_average_before_after": [load_before, _load_avg()],
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
            result = smo.solve_smo(indptr, indices, data, y, n_features=123, C=1.0, kernel=kernel,
                                   shrinking=shrinking, cache_mb=cache_mb)
            runs[f"smo shrinking={shrinking} cache_mb={cache_mb:g}"].append(
                {"seconds": result.solver_seconds, "iterations": result.n_iter,
                 "dual_objective": result.extra["dual_objective"], "cache_hit_rate": result.extra["cache_hit_rate"],
                 "kernel_values_computed": result.extra["kernel_values_computed"],
                 "min_active_size": result.extra["min_active_size"]})
            print(f"  smo shrinking={shrinking} cache={cache_mb:g}: {result.solver_seconds:.2f} s", flush=True)
        for name, opts in (("libsvm -h 1 -m 200", "-h 1"), ("libsvm -h 0 -m 200", "-h 0")):
            model, seconds, cpu, lines = _libsvm_train(problem, f"-s 0 -t 2 -c 1 -g 0.0081 -e 0.001 -m 200 {opts}")
            lib_runs[name].append({"seconds": seconds, "cpu": cpu, **_libsvm_summary(model, lines)})
            print(f"  {name}: {seconds:.2f} s", flush=True)
    table = {name: {"median_seconds": _median([r["seconds"] for r in rs]), "runs": rs}
             for name, rs in {**runs, **lib_runs}.items()}
    return {"data": "a9a, first 8,000 rows", "parameters": {"kernel": kernel, "C": 1.0, "tol": 1e-3},
            "repeats": repeats, "results": table, "load_average_before_after": [load_before, _load_avg()]}


def section_ijcnn1(sizes: list[int], repeats: int) -> dict:
    X_all, y_all = _load("ijcnn1", 22)
    X_test, y_test = _load("ijcnn1.t", 22)
    X_test, y_test = X_test[:20000], y_test[:20000]
    order = np.random.default_rng(0).permutation(X_all.shape[0])
    kernel = {"type": "rbf", "gamma": 2.0}
    C = float(os.environ.get("BENCH_IJCNN1_C", "1"))
    rows = []
    for size in sizes:
        pick = np.sort(order[:size])
        X, y = X_all[pick], y_all[pick]
        indptr, indices, data = _csr(X)
        entry = {"n": int(size)}
        csr = (indptr, indices, data, y)
        solvers = {
            "sampled_cuts_linear": lambda csr=csr: sampled_cuts.solve_sampled_cuts(
                *csr, n_features=22, C=C, kernel=kernel, variant="linear", sample_size=400),
            "sampled_cuts_constant": lambda csr=csr: sampled_cuts.solve_sampled_cuts(
                *csr, n_features=22, C=C, kernel=kernel, variant="constant", sample_size=400),
            "smo": lambda csr=csr: smo.solve_smo(*csr, n_features=22, C=C, kernel=kernel),
        }
        for name, run in solvers.items():
            seconds = []
            for _ in range(repeats):
                result = run()
                seconds.append(result.solver_seconds)
            entry[name] = {"median_seconds": _median(seconds), "seconds": seconds, "iterations": result.n_iter,
                           "converged": result.converged, "objective": result.objective,
                           "n_basis_or_sv": result.extra["n_sv"],
                           "test_error_pct": _our_error(result, X, X_test, y_test, kernel)}
            print(f"  n={size} {name}: {entry[name]['median_seconds']:.2f} s, "
                  f"error {entry[name]['test_error_pct']:.2f}%", flush=True)
        problem = _libsvm_problem(X, y)
        seconds = []
        for _ in range(repeats):
            model, sec, _cpu, lines = _libsvm_train(problem, f"-s 0 -t 2 -c {C:g} -g 2 -e 0.001 -h 1 -m 200")
            seconds.append(sec)
        entry["libsvm"] = {"median_seconds": _median(seconds), "seconds": seconds, **_libsvm_summary(model, lines),
                           "test_error_pct": _libsvm_error(model, X_test, y_test)}
        print(f"  n={size} libsvm: {entry['libsvm']['median_seconds']:.2f} s, "
              f"error {entry['libsvm']['test_error_pct']:.2f}%", flush=True)
        rows.append(entry)
    return {"data": "ijcnn1 (nested random subsets, seed 0); test: first 20,000 rows of ijcnn1.t",
            "parameters": {"kernel": kernel, "C": C, "sample_size": 400, "tol_sampled_cuts": 1e-3, "p": 4,
                           "tol_smo": 1e-3, "libsvm_options": f"-s 0 -t 2 -c {C:g} -g 2 -e 0.001 -h 1 -m 200"},
            "repeats": repeats, "sizes": rows}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default="a9a,cache,ijcnn1")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--a9a-repeats", type=int, default=2)
    parser.add_argument("--ijcnn1-repeats", type=int, default=1)
    parser.add_argument("--sizes", default="5000,10000,20000,49990")
    parser.add_argument("--skip-compile", action="store_true", help="do not measure the cold compile time")
    args = parser.parse_args(argv)
    sections = [s for s in args.sections.split(",") if s]
    report = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    report["machine"] = machine()
    report["threads"] = {"OMP_NUM_THREADS (libsvm)": os.environ.get("OMP_NUM_THREADS"),
                         "our solvers": "serial (no numba parallel)"}
    if not args.skip_compile:
        report["jit_compile_seconds"] = _compile_seconds()
        print(f"compile (fresh cache): {report['jit_compile_seconds']:.1f} s", flush=True)
    start = time.perf_counter()
    smo.warm_up()
    sampled_cuts.warm_up()
    report["jit_cache_load_seconds"] = time.perf_counter() - start
    if "a9a" in sections:
        print("a9a", flush=True)
        report["a9a"] = section_a9a(args.a9a_repeats)
    if "cache" in sections:
        print("cache", flush=True)
        report["cache"] = section_cache(args.repeats)
    if "ijcnn1" in sections:
        print("ijcnn1", flush=True)
        report["ijcnn1"] = section_ijcnn1([int(s) for s in args.sizes.split(",")], args.ijcnn1_repeats)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2, default=float) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
