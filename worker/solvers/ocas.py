"""`ocas`: the Optimized Cutting Plane Algorithm for linear SVMs (hinge loss), with parallel subtasks.

Problem (service convention). With x_i augmented by a constant feature of value B (``bias=B``,
regularized like any weight, LIBLINEAR's -B; ``bias=None``: no such feature), y_i in {-1, +1}:

    min_w  F(w) = 0.5*|w|^2 + C * R(w),    R(w) = sum_i max(0, 1 - y_i <w, x_i>)            (1), (2)

Paper 000 (Franc & Sonnenburg, ICML 2008) writes R with a factor 1/m and C: its C is our C * m,
and every formula below is the paper's with C/m replaced by our C.

Paper: Algorithm 1 of paper 000 (Section 3), in its parts:
  * reduced problem (3) with the cutting-plane model (6) of R, solved in its dual over the cuts
    by ``worker.solvers.reduced_qp`` (SMO, warm start, cuts inactive for more than
    ``max_inactive`` iterations dropped; default 50), giving w_t and the lower bound D_t <= F(w*);
  * Change 1 and 2: best-so-far w_b by the exact line search (7)
        w_b <- (1 - k*) w_b + k* w_t,   k* = argmin_{k >= 0} G(k) = F((1 - k) w_b + k w_t),
    solved as in Appendix A: G(k) = 0.5 k^2 A0 + k B0 + C0 + sum_i max(0, k B_i + C_i) with
    A0 = |w_b - w_t|^2, B0 = <w_b, w_t - w_b>, B_i = C y_i <x_i, w_b - w_t>, C_i = C (1 - y_i <x_i, w_b>);
    the derivative is increasing and piecewise linear, jumping up by |B_i| at k_i = -C_i / B_i; if
    the right derivative at 0 is >= 0, k* = 0, else the sorted k_i > 0 are swept until the
    subdifferential contains 0 (O(m log m));
  * Change 3: the new cut at w_c = (1 - lam) w_b + lam w_t (8), lam = ``lam`` (the paper's 0.1):
        pi_i = [y_i <w_c, x_i> <= 1],  R(w) >= sum_i pi_i - <sum_i pi_i y_i x_i, w>   (cut (5));
  * outputs <x_i, w> of w_b and w_c are never recomputed: o_b and o_c are the same convex
    combinations of the outputs of w_b and w_t, so each iteration makes one pass for <x_i, w_t>.

Stopping rule (9) in the user's terms: stop when F(w_b) - D_t <= max(tol_abs, tol_rel * F(w_b)),
i.e. the returned objective is certified within tol_abs absolutely or tol_rel relatively of the
optimum (D_t is the reduced dual value, <= F_t(w_t), so the rule is (9) made safe for an inexact
reduced solve). tol_rel = 0.01 and tol_abs = 0 are libocas's defaults (its TolRel / TolAbs), which
paper 000 uses in its experiments (Section 4.1); max_iter = 100000 is only a safety net (paper 000,
Table 2: tens to hundreds of iterations). The deadline and cancel flag of ``control`` are checked
after every iteration; on DEADLINE / CANCELED / MAX_ITER the best-so-far w_b is returned.
``w0`` (optional) starts w_b elsewhere than 0: shape (n_features,) or (n_features + 1,) with the
last entry the bias term b of a previous result (w_B = b / B).

What runs in parallel (paper 000, Section 3.1, Table 4). With ``n_processes`` p > 1 the process
pool of ``worker.solvers.shared_pool`` (the data copied once into shared memory, spawned helpers,
shut down in ``finally``) splits by rows the output computation <x_i, w_t> and the line-search
preparation with its sort (each process sorts its rows' breakpoints; the main process merges the
sorted runs while sweeping), and by fixed row segments the cut sum (each segment into its own
buffer; the main process adds the buffers in segment order).
p = 1 (the default: an RQ work horse should not start processes unless asked; the service may pass
the number of cores) runs the same kernels in the calling process with no pool. p = None means the
cores available to this process. Row sums are accumulated in fixed blocks and merged in order, so
one and several processes give bit-identical results.

Trace point per iteration: iteration, elapsed_s, primal = F(w_b), lower_bound = D_t, gap, n_cuts,
step k*, and seconds: qp_s; output_s, sort_s and cut_s (the slowest process's own time for that
subtask); sweep_s, line_search_s (sort + sweep); update_s (moving o_b, picking the cut rows: a
round trip); cut_reduce_s (the rest of the cut step: waiting, adding the segment buffers, the new
Gram row of the reduced problem); with the per-process lists output_s_by_process,
sort_s_by_process, cut_s_by_process (wall seconds measured inside each process).
``extra["seconds"]`` holds their totals (Table 4's rows), ``extra["seconds_by_process"]`` and
``extra["cpu_seconds_by_process"]`` the per-process wall and thread-CPU totals of the parallel
subtasks (CPU < wall means the process waited for a core: the machine was shared), and
``extra["pool_start_s"]`` the time to start the helpers (included in solver_seconds).
The algorithm uses no randomness; ``seed`` is kept for the common interface.
"""

from __future__ import annotations

import math
import os
import time

import numpy as np

from worker.solvers.common import (
    SolverControl,
    SolverInputError,
    SolverResult,
    StopReason,
    binary_signs,
    check_positive,
)
from worker.solvers.cpa import QP_REL, check_common
from worker.solvers.reduced_qp import ReducedProblem
from worker.solvers.shared_pool import (
    OPS,
    SharedData,
    WorkerPool,
    _ocas_sweep,
    _sum_parts,
    block_rows_for,
    cut_segments,
    row_chunks,
    segment_groups,
)


class _LocalPool:
    """The one-process stand-in for WorkerPool: the same operations on in-process arrays."""

    n_processes = 1

    def __init__(self, arrays: dict) -> None:
        self.arrays = arrays

    def run(self, op: str, args_per_chunk: list[tuple]) -> list:
        return [OPS[op](self.arrays, *args_per_chunk[0])]

    def close(self) -> None:
        pass


def _available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def solve_ocas(indptr, indices, data, y, *, n_features, C, bias=1.0, tol_rel=0.01, tol_abs=0.0, lam=0.1,
               max_iter=100000, max_inactive=50, n_processes=1, seed=0, control=None, w0=None) -> SolverResult:
    """Train a linear hinge-loss SVM by OCAS (paper 000, Algorithm 1); see the module docstring."""
    n, C, B, max_iter, max_inactive = check_common(indptr, indices, data, y, n_features, C, bias,
                                                   max_iter, max_inactive, seed)
    y = binary_signs(y)
    for name, value in (("tol_rel", tol_rel), ("tol_abs", tol_abs)):
        value = float(value)
        if not (math.isfinite(value) and value >= 0):
            raise SolverInputError(f"{name} must be a finite number >= 0, got {value!r}")
    tol_rel = float(tol_rel)
    tol_abs = float(tol_abs)
    if tol_rel == 0.0 and tol_abs == 0.0:
        raise SolverInputError("tol_rel and tol_abs are both 0: at least one must be > 0")
    lam = check_positive("lam", lam)
    if lam > 1.0:
        raise SolverInputError(f"lam must lie in (0, 1], got {lam!r}")
    if n_processes is None:
        n_processes = _available_cores()
    if isinstance(n_processes, bool) or not isinstance(n_processes, (int, np.integer)) or n_processes < 1:
        raise SolverInputError(f"n_processes must be None or an integer >= 1, got {n_processes!r}")
    n_features = int(n_features)
    d = n_features + 1
    w_start = np.zeros(d)
    if w0 is not None:
        w0 = np.asarray(w0, dtype=np.float64)
        if w0.ndim != 1 or w0.shape[0] not in (n_features, n_features + 1) or not np.all(np.isfinite(w0)):
            raise SolverInputError(
                f"w0 must be a finite vector of length n_features ({n_features}) or n_features + 1 "
                f"(last entry: the bias term), got shape {w0.shape}"
            )
        w_start[:n_features] = w0[:n_features]
        if w0.shape[0] == n_features + 1 and w0[-1] != 0.0:
            if B == 0.0:
                raise SolverInputError("w0 has a bias entry but bias is None")
            w_start[n_features] = w0[-1] / B
    control = control if control is not None else SolverControl()

    start = time.perf_counter()
    block_rows = block_rows_for(n)
    n_blocks = -(-n // block_rows)
    rows = row_chunks(indptr, int(n_processes), block_rows)
    p = rows.shape[0] - 1
    seg_bounds = cut_segments(indptr, n_features)
    shared = None
    pool = None
    try:
        if p > 1:
            shared = SharedData()
            a = shared.arrays
            for name, arr in (("indptr", indptr), ("indices", indices), ("data", data), ("y", y)):
                shared.put(name, arr)
            for name, size in (("w", d), ("z", d), ("o_b", n), ("o_t", n), ("gamma", n), ("keys", n),
                               ("wts", n), ("slope_blocks", n_blocks), ("hinge_blocks", n_blocks),
                               ("count_blocks", n_blocks), ("gsum_blocks", n_blocks)):
                shared.empty(name, (size,), np.float64)
            shared.put("seg_bounds", seg_bounds)
            shared.empty("z_parts", (seg_bounds.shape[0] - 1, n_features), np.float64)
            pool_start = time.perf_counter()
            pool = WorkerPool(shared, p)
            pool_seconds = time.perf_counter() - pool_start
        else:
            a = {"indptr": indptr, "indices": indices, "data": data, "y": y}
            for name, size in (("w", d), ("z", d), ("o_b", n), ("o_t", n), ("gamma", n), ("keys", n),
                               ("wts", n), ("slope_blocks", n_blocks), ("hinge_blocks", n_blocks),
                               ("count_blocks", n_blocks), ("gsum_blocks", n_blocks)):
                a[name] = np.zeros(size)
            a["seg_bounds"] = seg_bounds
            a["z_parts"] = np.zeros((seg_bounds.shape[0] - 1, n_features))
            pool = _LocalPool(a)
            pool_seconds = 0.0
        return _ocas_loop(pool, a, rows, n, d, B, C, tol_rel, tol_abs, lam, max_iter, max_inactive,
                          block_rows, w_start, control, start, pool_seconds)
    finally:
        if pool is not None:
            pool.close()
        if shared is not None:
            shared.close()


def _ocas_loop(pool, a, rows, n, d, B, C, tol_rel, tol_abs, lam, max_iter, max_inactive,
               block_rows, w_b, control, start, pool_seconds) -> SolverResult:
    """Algorithm 1 of paper 000 around the pool's passes; returns the SolverResult."""
    p = rows.shape[0] - 1
    row_args = [(int(rows[q]), int(rows[q + 1])) for q in range(p)]
    run_start = rows[:-1].astype(np.int64)
    trace_time = 0.0

    # outputs and objective of the starting point w_b
    a["w"][:] = w_b
    pool.run("outputs", [(r0, r1, B, block_rows) for r0, r1 in row_args])
    a["o_b"][:] = a["o_t"]
    F_b = 0.5 * float(w_b @ w_b) + C * float(np.sum(a["hinge_blocks"]))

    rp = ReducedProblem(d, C)
    lower = 0.0
    converged = False
    stop_reason = StopReason.MAX_ITER
    totals = {k: 0.0 for k in ("qp", "output", "sort", "sweep", "line_search", "update", "cut", "cut_reduce")}
    by_process = {k: [0.0] * p for k in ("output", "sort", "cut")}
    cpu_by_process = {k: [0.0] * p for k in ("output", "sort", "cut")}
    points = []
    n_iter = 0
    k_star = 0.0
    for it in range(max_iter):
        n_iter = it + 1
        t0 = time.perf_counter()
        qp_tol = max(QP_REL * max(F_b - lower, 0.0), 1e-13 * max(1.0, F_b))
        w_t, D, _, _, _ = rp.solve(qp_tol)
        lower = max(lower, D)
        t1 = time.perf_counter()

        # output computation and line-search sort (parallel), then the sweep (main process)
        a["w"][:] = w_t
        res = pool.run("outputs_prep", [(r0, r1, B, C, block_rows) for r0, r1 in row_args])
        stopped = control.check()  # each phase is a pass over the data: look between them (issue 9)
        if stopped is not None:  # w_b and F_b are still the best point's
            stop_reason = stopped
            break
        t2 = time.perf_counter()
        counts = np.array([r[0] for r in res], dtype=np.int64)
        out_s = [r[1] for r in res]
        sort_s = [r[2] for r in res]
        out_cpu = [r[3] for r in res]
        sort_cpu = [r[4] for r in res]
        diff = w_t - w_b
        A0 = float(diff @ diff)
        B0 = float(w_b @ diff)
        S = B0 + float(np.sum(a["slope_blocks"]))
        if A0 > 0.0 and S < 0.0:
            k_star = float(_ocas_sweep(a["keys"], a["wts"], run_start, counts, A0, S))
        else:
            k_star = 0.0
        t3 = time.perf_counter()

        # new best-so-far point, cut rows at w_c, objective at w_b
        w_b = (1.0 - k_star) * w_b + k_star * w_t
        pool.run("update", [(r0, r1, k_star, lam, block_rows) for r0, r1 in row_args])
        F_b = 0.5 * float(w_b @ w_b) + C * float(np.sum(a["hinge_blocks"]))
        t4 = time.perf_counter()

        gap = F_b - lower
        converged = gap <= max(tol_abs, tol_rel * F_b)
        stopped = None if converged else control.check()
        cut_res = [(0.0, 0.0)] * p
        if not converged and stopped is None:
            z = a["z"]
            cut_res = pool.run("cut_parts", segment_groups(a["z_parts"].shape[0], p))
            _sum_parts(a["z_parts"], z)
            z[d - 1] = B * float(np.sum(a["gsum_blocks"]))
            rp.add_cut(z, float(np.sum(a["count_blocks"])))
            rp.drop_inactive(max_inactive)
        cut_s = [r[0] for r in cut_res]
        cut_cpu = [r[1] for r in cut_res]
        t5 = time.perf_counter()

        for q in range(p):
            by_process["output"][q] += out_s[q]
            by_process["sort"][q] += sort_s[q]
            by_process["cut"][q] += cut_s[q]
            cpu_by_process["output"][q] += out_cpu[q]
            cpu_by_process["sort"][q] += sort_cpu[q]
            cpu_by_process["cut"][q] += cut_cpu[q]
        step = {
            "qp": t1 - t0,
            "output": max(out_s),
            "sort": max(sort_s),
            "sweep": t3 - t2,
            "update": t4 - t3,
            "cut": max(cut_s),
            "cut_reduce": max(t5 - t4 - max(cut_s), 0.0),
        }
        step["line_search"] = step["sort"] + step["sweep"]
        for key, value in step.items():
            totals[key] += value
        r0 = time.perf_counter()
        control.record({
            "iteration": n_iter,
            "elapsed_s": r0 - start - trace_time,
            "primal": F_b,
            "lower_bound": lower,
            "gap": gap,
            "n_cuts": rp.t,
            "step": k_star,
            **{f"{key}_s": value for key, value in step.items()},
            "output_s_by_process": [float(v) for v in out_s],
            "sort_s_by_process": [float(v) for v in sort_s],
            "cut_s_by_process": [float(v) for v in cut_s],
        })
        points.append(control.points[-1])
        trace_time += time.perf_counter() - r0
        if converged:
            stop_reason = StopReason.CONVERGED
            break
        reason = stopped or control.check()
        if reason is not None:
            stop_reason = reason
            break

    if stop_reason in (StopReason.CANCELED, StopReason.DEADLINE):
        objective = F_b  # no further pass when asked to stop: F_b is w_b's objective (running outputs)
    else:
        # the returned objective from fresh outputs of w_b (not from the running convex combinations)
        a["w"][:] = w_b
        pool.run("outputs", [(r0, r1, B, block_rows) for r0, r1 in row_args])
        objective = 0.5 * float(w_b @ w_b) + C * float(np.sum(a["hinge_blocks"]))
    solver_seconds = time.perf_counter() - start - trace_time
    return SolverResult(
        w=w_b[: d - 1].copy(),
        bias=float(B * w_b[d - 1]),
        n_iter=n_iter,
        converged=converged,
        stop_reason=stop_reason,
        objective=objective,
        solver_seconds=solver_seconds,
        trace_seconds=trace_time,
        trace=tuple(points),
        extra={
            "lower_bound": lower,
            "gap": objective - lower,
            "n_cuts": rp.t,
            "qp_steps": rp.total_steps,
            "n_processes": p,
            "pool_start_s": pool_seconds,
            "seconds": totals,
            "seconds_by_process": by_process,
            "cpu_seconds_by_process": cpu_by_process,
        },
    )


def warm_up() -> None:
    """Compile every kernel used by ocas on a tiny problem (in this process; helpers load the cache)."""
    from worker.solvers import reduced_qp, shared_pool

    reduced_qp.warm_up()
    shared_pool.warm_up()
    indptr = np.array([0, 2, 3, 5, 6], dtype=np.int64)
    indices = np.array([0, 1, 1, 0, 1, 0], dtype=np.int32)
    data = np.array([1.0, -1.0, 2.0, 0.5, 1.0, -1.5])
    solve_ocas(indptr, indices, data, np.array([1.0, -1.0, 1.0, -1.0]), n_features=2, C=1.0, max_iter=5)
