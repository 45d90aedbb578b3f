"""Paper 003 at its accuracy: sampled_cuts against the exact solver (smo) on the same rows.

Run on purpose: ``python -m tests.benchmarks.bench_sampled_cuts_accuracy [--sets board,checkers,ijcnn1,a9a]
[--rows 50000] [--seeds 0]``, or ``... --million [--smo-budget 1800]`` for Table 1's Checkers row, or
``... --board-million subspace,constant`` for a noisy board at 10^6 rows (issue 36, item 4).
Writes tests/benchmarks/results/bench_sampled_cuts_accuracy.json.

``--million``: 10^6 Checkers rows and 10^5 fresh test points; sampled_cuts constant (r = 400, the
default pool and the paper's pool = r) on every row; then the best exact model within the budget: smo
on the first 50,000, 100,000, 200,000, ... rows (and then all of them) while the budget's time remains (a run that would not
finish is stopped at the budget by smo's deadline and reported as such).

Data
----
* ``board``: a 4 x 4 checkerboard in the unit square, 3% of the labels flipped, rbf gamma 10, C = 1:
  a boundary that needs many support vectors (smo keeps ~38% of the rows). 10^5 fresh test points.
* ``checkers``: paper 003's Checkers as its Section 6.1 describes it: classes alternating on a 4 x 4
  board of unit squares, the points jittered by Gaussian noise of sigma 0.02 (~2.5% Bayes error), rbf with
  sigma^2 = 0.05 (gamma = 1 / (2 sigma^2) = 10), C = 1 per example. 10^5 fresh test points.
* ``ijcnn1`` (49,990 rows, rbf gamma 2, C = 1; its 91,701-row test file) and ``a9a`` (32,561 rows, rbf
  gamma 0.0081, C = 1; a9a.t), from ../shared/data.

Solvers: smo (the exact solver, tol 1e-3, its default tol_rel); sampled_cuts linear with the paper's
uniform draw and with calibrated cuts (the default); sampled_cuts constant with the paper's Algorithm 2
(pool = r) and with the default pool of 4,000 rows; r = 400, p = 4, tol 1e-3 throughout. For each: test
error (%), the objective 0.5 |w|^2 + C sum hinge computed from the returned model over every training row
(sampled_cuts regularizes its bias feature B = 1, smo does not: the objectives differ by that too), solver
seconds, support vectors, iterations. Targets (issue 22): linear within 0.2 points of smo's test error,
constant within 0.5.

Diagnostics (``--solvers smo,constant_pool,constant_every_row --section every_row_pool``): ``constant_every_row``
is the constant variant with every row as its pool at every iteration (the draw replaced for the run; not a
setting of the product): its cuts' value and offset are exact and only their direction is sampled (r rows at
equal steps of margin), which isolates the pool's sampling error as the cause of the constant variant's gap.
``constant_every_row_r1000`` is the same with r = 1,000: what exact values and a larger sampled direction reach.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file

import worker.solvers.sampled_cuts.solve as sampled_cuts_module
from core.schemas.solver_params import SampledCutsParams, SmoParams
from core.scoring.kernel import KernelExpansion
from tests import naive
from tests.benchmarks.environment import DATA_DIR, machine
from tests.helpers import with_params
from worker.solvers.common import SolverControl
from worker.solvers.kernels import kernel_block
from worker.solvers.sampled_cuts.solve import solve_sampled_cuts
from worker.solvers.smo.solve import solve_smo

RESULTS = Path(__file__).resolve().parent / "results" / "bench_sampled_cuts_accuracy.json"
TEST_ROWS = 100_000

_csr = naive.csr_parts

SOLVERS = {
    "smo": (solve_smo, {}),
    "linear_uniform": (solve_sampled_cuts, {"variant": "linear", "sampling": "uniform"}),
    "linear_calibrated": (solve_sampled_cuts, {"variant": "linear", "sampling": "calibrated"}),
    "constant_paper": (solve_sampled_cuts, {"variant": "constant", "pool_size": 400}),
    "constant_pool": (solve_sampled_cuts, {"variant": "constant", "pool_size": 4000}),
}
DIAGNOSTICS = {"constant_every_row": 400, "constant_every_row_r1000": 1000}
"""Not product settings: the constant variant whose pool is every row, once, at every iteration (the draw
is replaced for the run), so that its cuts' value and offset are exact and only the direction is sampled,
from r = 400 or 1,000 rows (the value)."""


@contextlib.contextmanager
def _every_row_pool(n_rows: int):
    """The constant variant's pool draw replaced by every row in order, while the context lasts."""
    draw = sampled_cuts_module._sampled_cuts_draw

    def every_row(rng, pool, pool_size, count, out):
        if count != n_rows:
            return draw(rng, pool, pool_size, count, out)
        out[:count] = pool[:count]

    sampled_cuts_module._sampled_cuts_draw = every_row
    try:
        yield
    finally:
        sampled_cuts_module._sampled_cuts_draw = draw


def board(n_rows: int, seed: int, flipped: float = 0.03) -> tuple[np.ndarray, np.ndarray]:
    """The unit-square 4 x 4 checkerboard with a share ``flipped`` of the labels flipped (3%)."""
    rng = np.random.default_rng(seed)
    X = rng.random((n_rows, 2))
    y = np.where((np.floor(4 * X[:, 0]) + np.floor(4 * X[:, 1])) % 2 == 0, 1.0, -1.0)
    flip = rng.random(n_rows) < flipped
    y[flip] = -y[flip]
    return X, y


def checkers(n_rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Paper 003's Checkers: unit squares of a 4 x 4 board, points jittered by N(0, 0.02^2) after labeling."""
    rng = np.random.default_rng(seed)
    X = rng.random((n_rows, 2)) * 4.0
    y = np.where((np.floor(X[:, 0]) + np.floor(X[:, 1])) % 2 == 0, 1.0, -1.0)
    return X + rng.normal(0.0, 0.02, X.shape), y


def _shared(name: str, n_features: int):
    def load(path):
        X, y = load_svmlight_file(str(DATA_DIR / path), n_features=n_features)
        X = sp.csr_matrix(X)
        X.sort_indices()
        return X, np.where(y > 0, 1.0, -1.0)

    return load(f"{name}.svm.gz"), load(f"{name}.t.svm.gz")


def data_set(name: str, rows: int, seed: int):
    """(X train CSR, y, X test CSR, y test, kernel, C) of a named set."""
    if name in ("board", "checkers"):
        make = board if name == "board" else checkers
        X, y = make(rows, seed)
        X_test, y_test = make(TEST_ROWS, seed + 10_000)
        return sp.csr_matrix(X), y, sp.csr_matrix(X_test), y_test, {"type": "rbf", "gamma": 10.0}, 1.0
    gamma, n_features = {"ijcnn1": (2.0, 22), "a9a": (0.0081, 123)}[name]
    (X, y), (X_test, y_test) = _shared(name, n_features)
    return X, y, X_test, y_test, {"type": "rbf", "gamma": gamma}, 1.0


def kernel_model(result, X, kernel) -> KernelExpansion:
    """The decision function of a kernel solver's result, over its support rows of X."""
    support = X[result.extra["support_indices"]]
    return KernelExpansion(
        support.indptr,
        support.indices,
        support.data,
        result.extra["dual_coef"],
        result.bias,
        kernel,
        n_features=X.shape[1],
    )


def objective(result, X, y, kernel, C, shift) -> float:
    """0.5 |w|^2 + C sum_i hinge_i of a kernel model, from its expansion over every training row."""
    sv, coef = result.extra["support_indices"], result.extra["dual_coef"]
    hinge = float(np.sum(np.maximum(0.0, 1.0 - y * kernel_model(result, X, kernel).decision_function(*_csr(X)))))
    w_sq = 0.0
    Xs = sp.csr_matrix(X[sv])
    for start in range(0, sv.size, 2000):
        rows = np.arange(start, min(sv.size, start + 2000))
        block = kernel_block(*_csr(Xs), rows, np.arange(sv.size), n_features=X.shape[1], kernel=kernel)
        w_sq += float(coef[rows] @ ((block + shift) @ coef))
    return 0.5 * w_sq + C * hinge


def error_percent(result, X, X_test, y_test, kernel) -> float:
    """Test error (%) of a kernel solver's result."""
    decision = kernel_model(result, X, kernel).decision_function(*_csr(X_test))
    return 100.0 * float(np.mean(np.where(decision > 0, 1.0, -1.0) != y_test))


def run_set(name: str, rows: int, seed: int, solvers: list[str]) -> dict:
    X, y, X_test, y_test, kernel, C = data_set(name, rows, seed)
    out = {"rows": int(X.shape[0]), "test_rows": int(X_test.shape[0]), "kernel": kernel, "C": C, "seed": seed}
    for label in solvers:
        if label in DIAGNOSTICS:
            solve = solve_sampled_cuts
            options = {"variant": "constant", "pool_size": X.shape[0], "sample_size": DIAGNOSTICS[label]}
            context = _every_row_pool(X.shape[0])
        else:
            (solve, options), context = SOLVERS[label], contextlib.nullcontext()
        extra = {"seed": seed} if solve is solve_sampled_cuts else {}
        started = time.perf_counter()
        with context:
            result = solve(*_csr(X), y, n_features=X.shape[1], C=C, kernel=kernel, **options, **extra)
        wall = time.perf_counter() - started
        shift = 0.0 if solve is solve_smo else 1.0
        entry = {
            "test_error": error_percent(result, X, X_test, y_test, kernel),
            "objective": objective(result, X, y, kernel, C, shift),
            "solver_seconds": result.solver_seconds,
            "wall_seconds": wall,
            "n_sv": int(result.extra["n_sv"]),
            "iterations": int(result.n_iter),
            "converged": bool(result.converged),
        }
        out[label] = entry
        print(name, label, json.dumps(entry), flush=True)
    smo_error = out["smo"]["test_error"] if "smo" in out else None
    if smo_error is not None:
        labels = [k for k in out if k in SOLVERS or k in DIAGNOSTICS]
        out["points_above_smo"] = {k: round(out[k]["test_error"] - smo_error, 3) for k in labels}
        out["objective_above_smo"] = {k: round(out[k]["objective"] / out["smo"]["objective"] - 1.0, 5) for k in labels}
    return out


def million(rows: int, smo_budget_s: float) -> dict:
    """Table 1's Checkers row: sampled_cuts constant on 10^6 rows against smo on as many rows as the budget allows."""
    X_all, y_all = checkers(rows, 0)
    X_test, y_test = checkers(TEST_ROWS, 10_000)
    kernel, C = {"type": "rbf", "gamma": 10.0}, 1.0
    X, Xt = sp.csr_matrix(X_all), sp.csr_matrix(X_test)
    out: dict = {"rows": rows, "test_rows": TEST_ROWS, "kernel": kernel, "C": C, "smo_budget_s": smo_budget_s}
    for label in ("constant_pool", "constant_paper"):
        result = solve_sampled_cuts(
            *_csr(X),
            y_all,
            n_features=2,
            **with_params(SampledCutsParams, {"C": C, "kernel": kernel, **SOLVERS[label][1]}),
        )
        out[label] = {
            "test_error": error_percent(result, X, Xt, y_test, kernel),
            "solver_seconds": result.solver_seconds,
            "n_sv": int(result.extra["n_sv"]),
            "iterations": int(result.n_iter),
            "converged": bool(result.converged),
            "kernel_values": int(result.extra["kernel_values_computed"]),
        }
        print("million", label, json.dumps(out[label]), flush=True)
    spent, size, exact = 0.0, 50_000, []
    while size <= rows and spent < smo_budget_s:
        left = smo_budget_s - spent
        started = time.perf_counter()
        part = X[:size]
        result = solve_smo(
            *_csr(part),
            y_all[:size],
            n_features=2,
            params=SmoParams(C=C, kernel=kernel),
            control=SolverControl(deadline=time.monotonic() + left),
        )
        spent += time.perf_counter() - started
        entry = {
            "rows": size,
            "test_error": error_percent(result, part, Xt, y_test, kernel),
            "solver_seconds": result.solver_seconds,
            "converged": bool(result.converged),
            "n_sv": int(result.extra["n_sv"]),
        }
        exact.append(entry)
        print("million smo", json.dumps(entry), flush=True)
        if not result.converged or size == rows:
            break
        size = min(2 * size, rows)
    out["smo"] = exact
    finished = [e for e in exact if e["converged"]]
    if finished:
        best = min(finished, key=lambda e: e["test_error"])
        out["best_exact"] = best
        out["points_above_best_exact"] = {
            label: round(out[label]["test_error"] - best["test_error"], 3)
            for label in ("constant_pool", "constant_paper")
        }
    return out


def board_million(rows: int, variants: list[str]) -> dict:
    """Issue 36, item 4: the noisy board at 10^6 rows (2% of the labels flipped, rbf gamma 10, C = 1, 10^5 fresh test
    points): smo on its first 50,000 rows (the reference: the bar is its test error + 0.5 points, in at most
    600 s), then sampled_cuts' ``variants`` at their defaults on every row (``linear`` stops at 1,800 s)."""
    X_all, y_all = board(rows, 0, flipped=0.02)
    X_test, y_test = board(TEST_ROWS, 10_000, flipped=0.02)
    kernel, C = {"type": "rbf", "gamma": 10.0}, 1.0
    X, Xt = sp.csr_matrix(X_all), sp.csr_matrix(X_test)
    out: dict = {"rows": rows, "test_rows": TEST_ROWS, "kernel": kernel, "C": C, "flipped": 0.02}
    part = X[:50_000]
    result = solve_smo(*_csr(part), y_all[:50_000], n_features=2, params=SmoParams(C=C, kernel=kernel))
    out["smo_50000"] = {
        "test_error": error_percent(result, part, Xt, y_test, kernel),
        "solver_seconds": result.solver_seconds,
        "n_sv": int(result.extra["n_sv"]),
        "converged": bool(result.converged),
    }
    out["bar_test_error"] = out["smo_50000"]["test_error"] + 0.5
    print("board_million smo 50,000", json.dumps(out["smo_50000"]), flush=True)
    for variant in variants:
        started = time.perf_counter()
        result = solve_sampled_cuts(
            *_csr(X),
            y_all,
            n_features=2,
            control=SolverControl(deadline=time.monotonic() + 1800),
            **with_params(SampledCutsParams, {"C": C, "kernel": kernel, "variant": variant}),
        )
        out[variant] = {
            "test_error": error_percent(result, X, Xt, y_test, kernel),
            "solver_seconds": result.solver_seconds,
            "wall_seconds": time.perf_counter() - started,
            "n_sv": int(result.extra["n_sv"]),
            "iterations": int(result.n_iter),
            "stop_reason": result.stop_reason.value,
            "gap_rel": result.extra.get("gap_rel"),
            "bar_met": bool(
                error_percent(result, X, Xt, y_test, kernel) <= out["bar_test_error"] and result.solver_seconds <= 600
            ),
        }
        print("board_million", variant, json.dumps(out[variant]), flush=True)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="board,checkers,ijcnn1,a9a")
    parser.add_argument("--rows", type=int, default=50_000, help="training rows of the generated sets")
    parser.add_argument("--seeds", default="0", help="comma-separated seeds of the generated sets and samplers")
    parser.add_argument("--solvers", default=",".join(SOLVERS))
    parser.add_argument("--million", action="store_true", help="Table 1's Checkers row at 10^6 rows")
    parser.add_argument("--million-rows", type=int, default=1_000_000)
    parser.add_argument("--smo-budget", type=float, default=1800.0, help="seconds of smo for the best exact model")
    parser.add_argument(
        "--section", help="write the runs under this key of the results file (default: one key per set)"
    )
    parser.add_argument(
        "--board-million",
        default=None,
        help="issue 36's noisy board at 10^6 rows with these sampled_cuts variants (subspace,constant[,linear])",
    )
    args = parser.parse_args(argv)
    if args.board_million:
        save({"board_million": board_million(args.million_rows, args.board_million.split(","))})
        return
    if args.million:
        save({"million": million(args.million_rows, args.smo_budget)})
        return
    if args.section:
        save(
            {
                args.section: {
                    name: [
                        run_set(name, args.rows, int(seed), args.solvers.split(",")) for seed in args.seeds.split(",")
                    ]
                    for name in args.sets.split(",")
                }
            }
        )
        return
    for name in args.sets.split(","):
        save({name: [run_set(name, args.rows, int(seed), args.solvers.split(",")) for seed in args.seeds.split(",")]})


def save(sections: dict) -> None:
    """Write ``sections`` into the results file, keeping the sections other runs wrote (read just before)."""
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results.update(sections, machine=machine())
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {RESULTS}: {', '.join(sections)}", flush=True)


if __name__ == "__main__":
    main()
