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
    Out of core, where a pass is a read of the data from disk, that pass also guesses the cut's rows
    pi_i at the last iteration's step k* (``cut_data.CurrentCut.guess``): a row's pi_i changes with k*
    only where the line search's breakpoint k_i lies between the two steps, so the cut's own scatter
    then reads a few rows, not the data again (the same cut, its sum taken in another order).

Stopping rule (9) in the user's terms: stop when F(w_b) - D_t <= max(tol_abs, tol_rel * F(w_b)),
i.e. the returned objective is certified within tol_abs absolutely or tol_rel relatively of the
optimum (D_t is the reduced dual value, <= F_t(w_t), so the rule is (9) made safe for an inexact
reduced solve). tol_rel = 0.01 and tol_abs = 0 are libocas's defaults (its TolRel / TolAbs), which
paper 000 uses in its experiments (Section 4.1); max_iter = 100000 is only a safety net (paper 000,
Table 2: tens to hundreds of iterations). The deadline and cancel flag of ``control`` are checked
after every iteration; on DEADLINE / CANCELED / MAX_ITER the best-so-far w_b is returned.
``w0`` (optional) starts w_b elsewhere than 0: shape (n_features,) or (n_features + 1,) with the
last entry the bias term b of a previous result (w_B = b / B).

Where the cuts live (``worker.solvers.cut_store``). For data with more rows than features, each cut
is a dense vector over the weights (as in libocas). For data with at least as many features as rows
(text, hashed features: the data paper 000 was written for) each cut is kept as its row
coefficients and its outputs X z_k, so that the Gram row of a new cut, the outputs of w_t and the
best-so-far point cost O(n t) per iteration and nothing grows with features x cuts: one scatter
(the new cut, over the rows whose coefficient changed) and one gather (its outputs) are the only
passes over the data; on long runs the gather reads only the columns of the cut's features, from a
column copy of the data (``cut_data.Data.cut_outputs``: the same sums bit for bit).

What runs in parallel (paper 000, Section 3.1, Table 4). ``n_processes`` numba threads (at most the
cores of this process; None: all of them) share every pass: the output computation and the gathers
split by fixed row chunks, the line-search preparation by the same chunks (the selection of k*
itself is O(m) and serial, see ``worker.solvers.line_search``), the cut sum by feature ranges
(``worker.solvers.data_passes``), the Gram row by cuts. Row sums are taken per chunk and added in
chunk order, so one thread and several give bit-identical results (out of core, the guessed cut is
summed in one part a thread: there the same threads give the same results).

Trace point per iteration: iteration, elapsed_s, primal = F(w_b), lower_bound = D_t, gap, gap_rel
= gap / primal, n_cuts, n_active_cuts (alpha > 0), step k*, and the seconds of the phases: qp_s
(reduced problem), output_s (outputs of w_t), line_search_s, update_s (moving o_b, choosing the
cut's rows, the loss at w_b), cut_s (the new cut: its sum, its outputs or Gram row, dropping
inactive cuts). ``extra["seconds"]``
holds their totals, ``extra["cut_form"]`` the form of the cuts ("dense" or "outputs"),
``extra["threads"]`` the threads used, ``extra["gap_rel"]`` the certified relative gap of the
returned model: (F(w) - D) / F(w), an upper bound on how far above the optimum it lies.
The algorithm uses no randomness; ``seed`` is kept for the common interface.
"""

from __future__ import annotations

import math
import time
from types import SimpleNamespace
from typing import Protocol

import numpy as np
from numba import njit, prange

from worker.solvers import line_search
from worker.solvers.common import (
    SolverControl,
    SolverInputError,
    SolverResult,
    StopReason,
    binary_signs,
    certified_gap,
    check_int,
)
from worker.solvers.cpa import QP_REL, check_arrays
from worker.solvers.cpa_passes import hinge_parts
from worker.solvers.cut_data import prepare_data
from worker.solvers.cut_store import choose
from worker.solvers.data_passes import available_cores, compact_chunks, threads


@njit(cache=True)
def _update_chunk(y, o_b, o_t, k, lam, c, chunks, gamma, rows, hinge_parts, count_parts, gsum_parts):
    base = chunks[c]
    h = 0.0
    cnt = 0
    gs = 0.0
    for i in range(chunks[c], chunks[c + 1]):
        ob = (1.0 - k) * o_b[i] + k * o_t[i]
        o_b[i] = ob
        oc = (1.0 - lam) * ob + lam * o_t[i]
        margin = 1.0 - y[i] * ob
        if margin > 0.0:
            h += margin
        if y[i] * oc <= 1.0:
            gamma[i] = y[i]
            rows[base + cnt] = i
            cnt += 1
            gs += y[i]
        else:
            gamma[i] = 0.0
    hinge_parts[c] = h
    count_parts[c] = cnt
    gsum_parts[c] = gs


@njit(cache=True, parallel=True)
def _ocas_update(y, o_b, o_t, k, lam, chunks, gamma, rows, hinge_parts, count_parts, gsum_parts, serial):
    """Move o_b to the line-search point, pick the cut rows at w_c, and sum the loss per chunk.

    o_b <- (1 - k) o_b + k o_t (outputs of the new best-so-far w_b); o_c = (1 - lam) o_b + lam o_t
    (outputs of w_c, eq. (8)); pi_i = [y_i o_c_i <= 1] (Algorithm 1, line 5); gamma_i = y_i pi_i.
    Per chunk: sum of max(0, 1 - y_i o_b_i), number of pi_i = 1 and sum of gamma_i; the chunk's
    cut rows go to rows[chunks[c] : chunks[c] + count_parts[c]].
    """
    if serial:
        for c in range(chunks.shape[0] - 1):
            _update_chunk(y, o_b, o_t, k, lam, c, chunks, gamma, rows, hinge_parts, count_parts, gsum_parts)
    else:
        for c in prange(chunks.shape[0] - 1):
            _update_chunk(y, o_b, o_t, k, lam, c, chunks, gamma, rows, hinge_parts, count_parts, gsum_parts)


OCAS_ROW_BYTES = 96
"""Memory ocas takes per row besides the data (out of core, ``streamed_data``): the outputs of w_b and w_t, the cut's
coefficients and rows, the line search's breakpoints and weights, the incremental cut's previous coefficients,
changes and changed rows, the labels, the blocks' row pointers, and one number to spare: 12 numbers."""

OCAS_GAP_NOTE = "objective minus the cutting-plane lower bound D_t (paper 000, rule (9))"
"""How an ocas result's gap is certified (``extra["gap_note"]``)."""


def trace_point(n_iter: int, elapsed: float, F_b: float, lower: float, rp, k_star: float, step: dict) -> dict:
    """An ocas iteration's trace point (module docstring): the objective of w_b, the lower bound and gap, the cuts,
    the line search's step and the seconds of each phase of ``step``."""
    gap = F_b - lower
    return {
        "iteration": n_iter,
        "elapsed_s": elapsed,
        "primal": F_b,
        "lower_bound": lower,
        "gap": gap,
        "gap_rel": gap / F_b if F_b > 0 else 0.0,
        "n_cuts": rp.t,
        "n_active_cuts": int(np.count_nonzero(rp.alpha[: rp.t])),
        "step": k_star,
        **{f"{key}_s": value for key, value in step.items()},
    }


class OcasSettings(Protocol):
    """What ocas reads of a job's params: the fields of its schema (``core.schemas.solver_params.OcasParams``),
    which validates them and holds their defaults (this package imports no pydantic; tests and the warm-up
    build the schema's model or give every field). ``seed`` is not read: ocas draws nothing."""

    C: float
    bias: float | None
    tol_rel: float | None
    tol_abs: float
    lam: float
    max_iter: int
    max_inactive: int


def solve_ocas(
    indptr,
    indices,
    data,
    y,
    *,
    n_features,
    params: OcasSettings,
    n_processes=1,
    control=None,
    w0=None,
    memory_bytes: int | None = None,
) -> SolverResult:
    """Train a linear hinge-loss SVM by OCAS (paper 000, Algorithm 1); see the module docstring.

    ``params``: the job's parameters (``OcasSettings``); ``n_processes``: numba threads for the passes
    (None: every core of this process); ``w0``: the weights to start from (warm start); ``memory_bytes``: what
    the data may take in memory, past which it is read from its files in passes (``streamed_data``; None: no
    limit).
    """
    check_arrays(indptr, indices, data, y, n_features)
    y = binary_signs(y).copy()  # writable: one compiled version of the kernels
    C, lam, max_iter, max_inactive = float(params.C), float(params.lam), params.max_iter, params.max_inactive
    B = 0.0 if params.bias is None else float(params.bias)
    tol_rel = 0.0 if params.tol_rel is None else float(params.tol_rel)  # None: off (0 inside)
    tol_abs = float(params.tol_abs)
    if n_processes is None:
        n_processes = available_cores()
    check_int("n_processes", n_processes, 1, or_none=True)
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
    X = prepare_data(indptr, indices, data, n_features, B, n_processes, memory_bytes, OCAS_ROW_BYTES, guess_cuts=True)
    try:
        store = choose(X, C, risk_at_zero=float(X.n))  # R(0) = n: rounded cuts' bound (cut_store)
        with threads(X.n_threads) as used:
            return _ocas_loop(
                X, store, y, C, tol_rel, tol_abs, lam, max_iter, max_inactive, w_start, control, start, used
            )
    finally:
        X.close()


def _ocas_loop(
    X, store, y, C, tol_rel, tol_abs, lam, max_iter, max_inactive, w_b, control, start, n_threads
) -> SolverResult:
    """Algorithm 1 of paper 000 over the cut store; returns the SolverResult."""
    n = X.n
    chunks = X.chunks
    nc = chunks.shape[0] - 1
    o_b = np.zeros(n)
    o_t = np.zeros(n)
    gamma = np.zeros(n)
    rows = np.zeros(n, dtype=np.int64)
    keys = np.zeros(n)
    wts = np.zeros(n)
    slope_parts = np.zeros(nc)
    count_parts = np.zeros(nc, dtype=np.int64)
    loss_parts = np.zeros(nc)
    gsum_parts = np.zeros(nc)
    trace_time = 0.0

    # outputs and objective of the starting point w_b
    if np.any(w_b):
        X.outputs(w_b, o_b)
    sq_b = store.start_best(w_b)
    hinge_parts(y, o_b, chunks, loss_parts, X.serial)
    F_b = 0.5 * sq_b + C * float(np.sum(loss_parts))  # F(w_b), (1)-(2)

    rp = store.rp
    lower = 0.0
    converged = False
    stop_reason = StopReason.MAX_ITER
    totals = {k: 0.0 for k in ("qp", "output", "line_search", "update", "cut")}
    points = []
    n_iter = 0
    k_star = 0.0
    gap = math.inf
    for it in range(max_iter):
        n_iter = it + 1
        t0 = time.perf_counter()
        qp_tol = max(QP_REL * max(F_b - lower, 0.0), 1e-13 * max(1.0, F_b))
        # Algorithm 1, line 3: w_t from the reduced problem (3) (cutting-plane model (6)), solved in its dual;
        # D <= F_t(w_t) <= F(w*) is the lower bound of the stopping rule (9)
        D, _, _ = rp.solve(qp_tol)
        lower = max(lower, D)
        t1 = time.perf_counter()

        # <x_i, w_t>: Section 3.1's output computation (out of core, with the next cut guessed at the last step)
        store.outputs_of_wt(o_t, guess=(y, o_b, k_star, lam))
        stopped = control.check()  # each phase is a pass over the data: look between them (issue 9)
        if stopped is not None:  # w_b and F_b are still the best point's
            stop_reason = stopped
            break
        t2 = time.perf_counter()

        # Algorithm 1, line 4: exact line search between w_b and w_t (7), as in Appendix A:
        # G(k) = 0.5 k^2 A0 + k B0 + C0 + sum_i max(0, k B_i + C_i), S = G's right derivative at 0
        A0, B0 = store.line_terms()
        line_search.prepare(y, o_b, o_t, C, chunks, slope_parts, count_parts, keys, wts, X.serial)
        S = B0 + float(np.sum(slope_parts))
        if A0 > 0.0 and S < 0.0:
            m = line_search.compact(chunks, count_parts, keys, wts)
            k_star = float(line_search.minimize(keys, wts, m, A0, S))
        else:
            k_star = 0.0
        t3 = time.perf_counter()

        # new best-so-far point w_b <- (1 - k*) w_b + k* w_t (7), the cut's rows pi_i at w_c (8), F(w_b)
        sq_b = store.move_best(k_star)
        _ocas_update(y, o_b, o_t, k_star, lam, chunks, gamma, rows, loss_parts, count_parts, gsum_parts, X.serial)
        F_b = 0.5 * sq_b + C * float(np.sum(loss_parts))
        t4 = time.perf_counter()

        gap = F_b - lower
        converged = gap <= max(tol_abs, tol_rel * F_b)  # stopping rule (9), with D_t for F_t(w_t)
        stopped = None if converged else control.check()  # before the cut's pass over the data
        if not converged and stopped is None:
            # Algorithm 1, line 5: the cut (a_{t+1}, b_{t+1}) at w_c, a = -sum_i pi_i y_i x_i by (5) (our R has no 1/m)
            n_sel = compact_chunks(chunks, count_parts, rows)
            store.add_cut(gamma, rows, n_sel, float(np.sum(gsum_parts)), float(n_sel), o_b)
            store.drop_inactive(max_inactive)
        t5 = time.perf_counter()

        step = {"qp": t1 - t0, "output": t2 - t1, "line_search": t3 - t2, "update": t4 - t3, "cut": t5 - t4}
        for key, value in step.items():
            totals[key] += value
        r0 = time.perf_counter()
        control.record(trace_point(n_iter, r0 - start - trace_time, F_b, lower, rp, k_star, step))
        points.append(control.points[-1])
        trace_time += time.perf_counter() - r0
        if converged:
            stop_reason = StopReason.CONVERGED
            break
        reason = stopped or control.check()
        if reason is not None:
            stop_reason = reason
            break

    w = store.best_weights()
    if stop_reason in (StopReason.CANCELED, StopReason.DEADLINE):
        objective = F_b  # no further pass when asked to stop: F_b is w_b's objective (running outputs)
    else:
        # the returned objective from fresh outputs of w_b (not from the running convex combinations):
        # from the stored cuts' outputs when w_b is their combination, else by a pass over the data
        if not store.best_outputs(o_t):
            X.outputs(w, o_t)
        hinge_parts(y, o_t, chunks, loss_parts, X.serial)
        objective = 0.5 * float(w @ w) + C * float(np.sum(loss_parts))
    solver_seconds = time.perf_counter() - start - trace_time
    d = X.d + 1
    return SolverResult(
        w=w[: d - 1].copy(),
        bias=float(X.B * w[d - 1]),
        n_iter=n_iter,
        converged=converged,
        stop_reason=stop_reason,
        objective=objective,
        solver_seconds=solver_seconds,
        trace_seconds=trace_time,
        trace=tuple(points),
        extra={
            **certified_gap(objective, lower, OCAS_GAP_NOTE),
            "n_cuts": rp.t,
            "qp_steps": rp.total_steps,
            "threads": int(n_threads),
            "cut_form": store.kind,
            "aggregated_cuts": getattr(store, "aggregated", 0),
            "data": X.describe(),
            "seconds": totals,
        },
    )


def warm_up() -> None:
    """Compile every kernel used by ocas on tiny problems (both cut forms, the stored dtypes)."""
    from worker.solvers import cut_store, data_passes, reduced_qp

    reduced_qp.warm_up()
    data_passes.warm_up()
    line_search.warm_up()
    cut_store.warm_up()
    y = np.array([1.0, -1.0, 1.0, -1.0])
    for indptr, indices, data in data_passes.csr_variants(
        [0, 2, 3, 5, 6], [0, 1, 1, 0, 1, 0], [1.0, -1.0, 2.0, 0.5, 1.0, -1.5]
    ):
        for n_features in (2, 7):  # dense cuts, cuts as outputs
            settings = SimpleNamespace(C=1.0, bias=1.0, tol_rel=0.01, tol_abs=0.0, lam=0.1, max_iter=5, max_inactive=50)
            solve_ocas(indptr, indices, data, y, n_features=n_features, params=settings)
            solve_ocas(indptr, indices, data, y, n_features=n_features, params=settings, w0=np.full(n_features, 0.1))
