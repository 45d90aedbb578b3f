"""Benchmarks of the cutting-plane solvers cpa and ocas (issue 3).

Run on purpose: ``python -m tests.benchmarks.bench_cutting_planes [--sections ...] [--repeats 3]
[--max-rows 1000000]``; writes tests/benchmarks/results/bench_cutting_planes.json (a section run
alone replaces only its own entry). Sections:

* ``classification`` -- a9a, w8a, ijcnn1, C = 1, no bias (the certified optima of ANCHORS.md apply).
  cpa and ocas stop at the same absolute precision eps = 1e-3 * F* (cpa: tol = eps / (C n), ocas:
  tol_rel = 0, tol_abs = eps); iterations, solver seconds (median of ``repeats``), objective, and,
  read from the trace of the same runs, the iteration and elapsed seconds at which each first had a
  model within 1e-3 of F* ("to the same objective"). Reference in the same run: liblinear-official
  -s 3 (-e 0.1, its default, and -e 0.001; timed on a prebuilt problem), and scikit-learn's LinearSVC
  at tol 1e-6 (the certified optimum F*).
* ``threads`` -- ocas with 1 and 2 numba threads on ijcnn1 and on 400,000 rows of the generated problem
  (runs interleaved 1, 2, 1, 2, ... so that load from other users hits both alike): phase seconds
  (output computation, line search, update, cut) and total solver seconds, the speedup of each, and
  whether the two models are bit-identical.
* ``ordinal`` -- cpa objective="ordinal" on abalone_scale (28 ranks, all pairs, C = 1e-3 per pair):
  full data, and a 1,000-row subset where the brute-force formulation (explicit difference vectors,
  LinearSVC without intercept) is solved too, in the same run.
* ``ranking`` -- cpa objective="ranking" on lightgbm_rank (qid groups, C = 1e-3 per pair), against the
  certified optimum 9.706853 and the brute-force difference-vector problem solved by LinearSVC.
* ``scaling`` -- solver seconds of ocas and cpa against n on nested subsets (first n rows) of a
  generated sparse problem of up to ``--max-rows`` rows (1,000 features, ~20 nonzeros per row,
  planted labels with 10% flipped), with the paper's C convention held fixed (C = 1e4 / n, i.e.
  C_paper = 10,000 as in paper 001's experiments) and relative precision 1e-3 (ocas tol_rel = 1e-3,
  cpa tol = 1e-3); the log-log slope is fitted over the sizes.

JIT: compile time of every kernel with a fresh numba cache (in a subprocess) and the first call in
this process (cache load) are reported apart from the steady-state runs.
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

import numpy as np
import scipy.sparse as sp
from liblinear import liblinearutil
from sklearn.datasets import load_svmlight_file
from sklearn.svm import LinearSVC

from core.schemas.solver_params import CpaParams, OcasParams
from core.scoring.metrics import pairwise_accuracy
from core.scoring.metrics import predicted_ranks as predict_ranks
from tests import naive
from tests.benchmarks.environment import DATA_DIR as SHARED_DATA
from tests.benchmarks.environment import machine
from worker.solvers import cpa as cpa_module
from worker.solvers import ocas as ocas_module
from worker.solvers.cpa import solve_cpa
from worker.solvers.ocas import solve_ocas

DATA_DIR = SHARED_DATA
RESULTS = Path(__file__).resolve().parent / "results" / "bench_cutting_planes.json"
ANCHORS = {"a9a": 11433.8077, "w8a": 6604.8866, "ijcnn1": 8596.0042}
RANK_ANCHOR = 9.706853  # lightgbm_rank, pairs within each qid, C per pair 0.001


def _load(name):
    X, y, *rest = load_svmlight_file(str(DATA_DIR / f"{name}.svm.gz"), query_id=name == "lightgbm_rank")
    X = X.tocsr()
    X.sort_indices()
    qid = rest[0] if rest else None
    return X, y, qid


_csr = naive.csr_parts


def _hinge_objective(X, y, w, C):
    return 0.5 * float(w @ w) + C * float(np.maximum(0.0, 1.0 - y * (X @ w)).sum())


def _median(values):
    return float(np.median(values))


def _compile_seconds() -> float:
    """Seconds to compile every cpa/ocas kernel from scratch (fresh numba cache dir, in a subprocess)."""
    code = (
        "import time; t=time.perf_counter(); from worker.solvers import cpa, ocas; "
        "cpa.warm_up(); ocas.warm_up(); print(time.perf_counter()-t)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, NUMBA_CACHE_DIR=tmp)
        out = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parents[2],
        )
    return float(out.stdout.strip().splitlines()[-1])


def _first_within(trace, target, key):
    for point in trace:
        if point[key] is not None and point[key] <= target:
            return point["iteration"], point["elapsed_s"]
    return None, None


def _generated(n_rows, n_features=1000, nnz=20, seed=7):
    """A seeded sparse problem; the scaling section takes its first n rows as the nested subsets."""
    rng = np.random.default_rng(seed)
    w_true = rng.normal(size=n_features)
    counts = rng.integers(nnz // 2, 3 * nnz // 2 + 1, size=n_rows)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    indices = rng.integers(0, n_features, size=indptr[-1]).astype(np.int32)
    data = rng.normal(size=indptr[-1])
    X = sp.csr_matrix((data, indices, indptr), shape=(n_rows, n_features))
    X.sum_duplicates()
    X.sort_indices()
    y = np.where(X @ w_true > 0, 1.0, -1.0)
    flip = rng.random(n_rows) < 0.1
    y[flip] = -y[flip]
    return X, y


# ---------------------------------------------------------------------------------------------
# sections
# ---------------------------------------------------------------------------------------------


def bench_classification(repeats):
    out = {}
    C = 1.0
    for name in ("a9a", "w8a", "ijcnn1"):
        X, y, _ = _load(name)
        y = np.where(y > 0, 1.0, -1.0)
        args = _csr(X)
        n, d = X.shape
        t0 = time.perf_counter()
        ref = LinearSVC(dual=True, loss="hinge", C=C, fit_intercept=False, tol=1e-6, max_iter=10**6).fit(
            sp.csr_matrix((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)), shape=X.shape), y
        )
        sk_seconds = time.perf_counter() - t0
        F_star = _hinge_objective(X, y, ref.coef_.ravel(), C)
        eps = 1e-3 * F_star
        target = F_star + eps
        prob = liblinearutil.problem(y, X)
        lib = {}
        for e in (0.1, 0.001):
            param = liblinearutil.parameter(f"-s 3 -c {C} -e {e} -B -1 -q")
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                model = liblinearutil.train(prob, param)
                times.append(time.perf_counter() - t0)
            w = np.array(model.get_decfun()[0]) * (1.0 if model.get_labels()[0] == 1 else -1.0)
            lib[f"-e {e}"] = {"seconds_median": _median(times), "objective": _hinge_objective(X, y, w, C)}
        row = {
            "n": n,
            "features": d,
            "nnz": int(X.nnz),
            "C": C,
            "bias": None,
            "eps_abs": eps,
            "optimum_linearsvc_tol1e-6": F_star,
            "linearsvc_seconds": sk_seconds,
            "anchor_optimum": ANCHORS[name],
            "liblinear_s3": lib,
        }
        for solver in ("cpa", "ocas"):
            runs = []
            for _ in range(repeats):
                if solver == "cpa":
                    r = solve_cpa(
                        *args, y, n_features=d, params=CpaParams(C=C, bias=None, tol_rel=0.0, tol=eps / (C * n))
                    )
                else:
                    r = solve_ocas(*args, y, n_features=d, params=OcasParams(C=C, bias=None, tol_rel=0.0, tol_abs=eps))
                runs.append(r)
            r = runs[0]
            key = "best_primal" if solver == "cpa" else "primal"
            it_t, sec_t = _first_within(r.trace, target, key)
            row[solver] = {
                "n_iter": r.n_iter,
                "converged": r.converged,
                "objective": r.objective,
                "rel_above_optimum": (r.objective - F_star) / F_star,
                "solver_seconds_median": _median([x.solver_seconds for x in runs]),
                "solver_seconds_all": [x.solver_seconds for x in runs],
                "iterations_to_target": it_t,
                "elapsed_s_to_target_first_run": sec_t,
                "n_cuts_final": r.extra["n_cuts"],
                "qp_steps": r.extra["qp_steps"],
                "phase_seconds_first_run": r.extra["seconds"],
            }
        out[name] = row
        print(name, json.dumps({k: row[k] for k in ("cpa", "ocas")}, default=str)[:400], flush=True)
    return out


def bench_threads(repeats, max_rows):
    """ocas with 1 and 2 numba threads (interleaved 1, 2, 1, 2, ...): phase seconds and total speedup."""
    out = {}
    cases = [("ijcnn1", None), ("generated_400k", min(400_000, max_rows))]
    for name, rows in cases:
        if rows is None:
            X, y, _ = _load(name)
            y = np.where(y > 0, 1.0, -1.0)
            C = 1.0
        else:
            X, y = _generated(rows)
            C = 1e4 / rows
        args = _csr(X)
        row = {"n": X.shape[0], "nnz": int(X.nnz), "C": C, "tol_rel": 1e-3}
        results = {}
        runs_by_p = {1: [], 2: []}
        for _ in range(repeats):
            for p in (1, 2):
                runs_by_p[p].append(
                    solve_ocas(*args, y, n_features=X.shape[1], params=OcasParams(C=C, tol_rel=1e-3), n_processes=p)
                )
        for p, runs in runs_by_p.items():
            r = runs[0]
            results[p] = {
                "n_iter": r.n_iter,
                "objective": r.objective,
                "threads": r.extra["threads"],
                "cut_form": r.extra["cut_form"],
                "solver_seconds_median": _median([x.solver_seconds for x in runs]),
                "phase_seconds_median": {
                    k: _median([x.extra["seconds"][k] for x in runs])
                    for k in ("output", "line_search", "update", "cut", "qp")
                },
            }
        row["t1"], row["t2"] = results[1], results[2]
        row["bit_identical"] = bool(np.array_equal(runs_by_p[1][0].w, runs_by_p[2][0].w))
        row["speedup"] = {
            k: results[1]["phase_seconds_median"][k] / max(results[2]["phase_seconds_median"][k], 1e-12)
            for k in ("output", "line_search", "update", "cut")
        }
        row["speedup"]["total"] = results[1]["solver_seconds_median"] / max(results[2]["solver_seconds_median"], 1e-12)
        out[name] = row
        print(name, json.dumps(row["speedup"]), flush=True)
    return out


def bench_ordinal(repeats):
    X, y, _ = _load("abalone_scale")
    C = 1e-3
    out = {}
    for label, rows in (("full", X.shape[0]), ("subset_1000", 1000)):
        Xs, ys = X[:rows], y[:rows]
        args = _csr(Xs)
        runs = [
            solve_cpa(
                *args, ys, n_features=X.shape[1], params=CpaParams(C=C, tol_rel=0.0, tol=1e-3, objective="ordinal")
            )
            for _ in range(repeats)
        ]
        r = runs[0]
        scores = Xs @ r.w
        row = {
            "n": rows,
            "ranks": int(np.unique(ys).size),
            "pairs": r.extra["n_pairs"],
            "C_per_pair": C,
            "tol": 1e-3,
            "cpa": {
                "n_iter": r.n_iter,
                "objective": r.objective,
                "lower_bound": r.extra["lower_bound"],
                "solver_seconds_median": _median([x.solver_seconds for x in runs]),
                "pairwise_accuracy": pairwise_accuracy(scores, ys),
                "rank_accuracy": float(np.mean(predict_ranks(scores, r.extra["ranks"], r.extra["thresholds"]) == ys)),
                "within_one_rank": float(
                    np.mean(np.abs(predict_ranks(scores, r.extra["ranks"], r.extra["thresholds"]) - ys) <= 1)
                ),
            },
        }
        if rows <= 1000:
            Xd = Xs.toarray()
            P = [(i, j) for i in range(rows) for j in range(rows) if ys[i] > ys[j]]
            I = np.array([p[0] for p in P])
            J = np.array([p[1] for p in P])
            signs = np.where(np.arange(len(P)) % 2 == 0, 1.0, -1.0)
            D = (Xd[I] - Xd[J]) * signs[:, None]
            t0 = time.perf_counter()
            ref = LinearSVC(dual=True, loss="hinge", C=C, fit_intercept=False, tol=1e-6, max_iter=10**6).fit(D, signs)
            ref_seconds = time.perf_counter() - t0
            w = ref.coef_.ravel()
            ref_obj = 0.5 * float(w @ w) + C * float(np.maximum(0.0, 1.0 - (Xd[I] - Xd[J]) @ w).sum())
            row["brute_force_linearsvc"] = {
                "objective": ref_obj,
                "seconds": ref_seconds,
                "build_seconds_excluded": True,
            }
            row["cpa"]["rel_above_brute_force"] = (r.objective - ref_obj) / ref_obj
        out[label] = row
        print("ordinal", label, json.dumps(row["cpa"])[:300], flush=True)
    return out


def bench_ranking(repeats):
    X, y, qid = _load("lightgbm_rank")
    C = 1e-3
    args = _csr(X)
    out = {"n": X.shape[0], "queries": int(np.unique(qid).size), "C_per_pair": C, "anchor_optimum": RANK_ANCHOR}
    for tol in (1e-3, 1e-4):
        runs = [
            solve_cpa(
                *args,
                y,
                n_features=X.shape[1],
                params=CpaParams(C=C, tol_rel=0.0, tol=tol, objective="ranking"),
                qid=qid,
            )
            for _ in range(repeats)
        ]
        r = runs[0]
        out[f"cpa_tol_{tol}"] = {
            "n_iter": r.n_iter,
            "objective": r.objective,
            "rel_above_anchor": (r.objective - RANK_ANCHOR) / RANK_ANCHOR,
            "solver_seconds_median": _median([x.solver_seconds for x in runs]),
            "pairs": r.extra["n_pairs"],
            "pairwise_accuracy": pairwise_accuracy(X @ r.w, y, qid),
        }
    # brute force: explicit difference vectors within each query
    rows, cols, vals, signs = [], [], [], []
    Xd = X.tocsr()
    k = 0
    for q in np.unique(qid):
        members = np.flatnonzero(qid == q)
        for i in members:
            for j in members:
                if y[i] > y[j]:
                    diff = (Xd[i] - Xd[j]).tocoo()
                    s = 1.0 if k % 2 == 0 else -1.0
                    rows.append(np.full(diff.nnz, k))
                    cols.append(diff.col)
                    vals.append(s * diff.data)
                    signs.append(s)
                    k += 1
    D = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(k, X.shape[1]))
    signs = np.array(signs)
    t0 = time.perf_counter()
    ref = LinearSVC(dual=True, loss="hinge", C=C, fit_intercept=False, tol=1e-6, max_iter=10**6).fit(
        sp.csr_matrix((D.data, D.indices.astype(np.int32), D.indptr.astype(np.int32)), shape=D.shape), signs
    )
    seconds = time.perf_counter() - t0
    w = ref.coef_.ravel()
    out["brute_force_linearsvc"] = {
        "pairs": k,
        "seconds": seconds,
        "objective": 0.5 * float(w @ w) + C * float(np.maximum(0.0, 1.0 - signs * (D @ w)).sum()),
    }
    print("ranking", json.dumps(out, default=str)[:500], flush=True)
    return out


def bench_scaling(repeats, max_rows):
    X_all, y_all = _generated(max_rows)
    sizes = [s for s in (10_000, 30_000, 100_000, 300_000, 1_000_000) if s <= max_rows]
    out = {
        "features": X_all.shape[1],
        "C": "1e4 / n (paper convention C_paper = 1e4)",
        "sizes": sizes,
        "ocas": [],
        "cpa": [],
    }
    for n in sizes:
        X = X_all[:n]
        y = y_all[:n]
        args = _csr(X)
        C = 1e4 / n
        ocas_runs = [
            solve_ocas(*args, y, n_features=X.shape[1], params=OcasParams(C=C, tol_rel=1e-3)) for _ in range(repeats)
        ]
        cpa_runs = [
            solve_cpa(*args, y, n_features=X.shape[1], params=CpaParams(C=C, tol_rel=0.0, tol=1e-3))
            for _ in range(max(1, repeats if n <= 300_000 else 1))
        ]
        for name, runs in (("ocas", ocas_runs), ("cpa", cpa_runs)):
            out[name].append(
                {
                    "n": n,
                    "nnz": int(X.nnz),
                    "n_iter": runs[0].n_iter,
                    "objective": runs[0].objective,
                    "runs": len(runs),
                    "solver_seconds_median": _median([r.solver_seconds for r in runs]),
                }
            )
        print("scaling", n, out["ocas"][-1], out["cpa"][-1], flush=True)
    for name in ("ocas", "cpa"):
        ns = np.log([r["n"] for r in out[name]])
        ts = np.log([r["solver_seconds_median"] for r in out[name]])
        out[f"{name}_loglog_slope"] = float(np.polyfit(ns, ts, 1)[0]) if len(ns) > 1 else None
        big = [r for r in out[name] if r["n"] >= 100_000]
        if len(big) > 1:
            out[f"{name}_loglog_slope_n_ge_100k"] = float(
                np.polyfit(np.log([r["n"] for r in big]), np.log([r["solver_seconds_median"] for r in big]), 1)[0]
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default="classification,threads,ordinal,ranking,scaling")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-rows", type=int, default=1_000_000)
    opts = parser.parse_args()
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results["machine"] = machine()
    results["machine"]["load_average_start"] = os.getloadavg()
    results["jit"] = {"compile_seconds_fresh_cache": _compile_seconds()}
    t0 = time.perf_counter()
    cpa_module.warm_up()
    ocas_module.warm_up()
    results["jit"]["first_call_seconds_cache_load"] = time.perf_counter() - t0
    results["settings"] = {
        "repeats": opts.repeats,
        "numba_parallel_kernels": True,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "qp_rel": cpa_module.QP_REL,
    }
    sections = {
        "classification": lambda: bench_classification(opts.repeats),
        "threads": lambda: bench_threads(opts.repeats, opts.max_rows),
        "ordinal": lambda: bench_ordinal(opts.repeats),
        "ranking": lambda: bench_ranking(opts.repeats),
        "scaling": lambda: bench_scaling(opts.repeats, opts.max_rows),
    }
    for name in opts.sections.split(","):
        started = time.perf_counter()
        results[name] = sections[name]()
        results[name + "_wall_seconds"] = time.perf_counter() - started
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(results, indent=2, default=str))
    results["machine"]["load_average_end"] = os.getloadavg()
    RESULTS.write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
