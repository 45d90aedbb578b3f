"""`cpa`: the 1-slack cutting-plane algorithm of SVMperf for linear SVMs, ordinal regression, ROC area, ranking.

Problem (service convention; C multiplies a sum of losses). With x_i augmented by a constant
feature of value B (``bias=B``; regularized like any weight, LIBLINEAR's -B) and o_i = <w, x_i>:

* objective="classification", y_i in {-1, +1}:
      min_w F(w) = 0.5*|w|^2 + C * sum_i max(0, 1 - y_i o_i)                                (OP1)
* objective="ordinal" / "roc_area" / "ranking", y_i = rank (float, larger is better), no bias:
      min_w F(w) = 0.5*|w|^2 + C * sum_{(i,j): y_i > y_j} max(0, 1 - (o_i - o_j))            (OP4)
  over all pairs ("ordinal"; "roc_area" = exactly two rank values) or the pairs inside each qid
  ("ranking"); see ``worker.solvers.ranking``. A bias would cancel in every difference, so it is
  not used (``bias`` is ignored and the result's bias is 0).

Paper: Joachims, "Training Linear SVMs in Linear Time", KDD 2006 (paper 001): the structural 1-slack
formulations OP2 (Section 2.1) and OP5 (Section 2.2), Algorithm 1 (Section 3.1) for classification
and Algorithm 2 (Section 3.2) for the pairwise objectives. In our units OP2 reads
      min 0.5|w|^2 + C xi   s.t.  xi >= sum_i c_i - <sum_i c_i y_i x_i, w>  for all c in {0,1}^n,
i.e. the paper's xi_paper = xi / n and C_paper = C * n (OP5: m = number of pairs instead of n).
Each iteration (Algorithm 1, lines 4-8):
  1. solve the reduced problem over the working set W (``worker.solvers.reduced_qp``: the dual OP3
     restricted to W, SMO warm-started from the previous iteration; cuts inactive for more than
     ``max_inactive`` iterations are dropped, default 50);
  2. outputs o_i = <w, x_i> (one pass over the data);
  3. the most violated constraint: c_i = [y_i o_i < 1] (line 6), or for pairs the condensed
     c+ / c- of Algorithm 2 by a sort and R - 1 sweeps (O(n log n + R n), no pair is enumerated);
  4. stop if it is violated by at most the tolerance (line 9), else add it to W (line 8).

Listed passes (classification with dense cuts, i.e. more rows than features). Any c in {0,1}^n gives
a valid constraint of OP2 (R(w) >= sum_i c_i (1 - y_i <w, x_i>) for every w), so the reduced problem's
dual value stays a lower bound whatever cut is added; only the stop needs the most violated one.
After every full pass (step 2 over all rows) at a point w_ref, the ``LISTED_SHARE`` (20%) of the rows
with the smallest |1 - y_i o_i| / |x_i| are listed, and ``radius`` is that ratio of the first row not
listed. The next iterations compute the outputs of the listed rows only; the other rows keep their
c_i. The loss of that cut at w_t is exact all the same (sum_i c_i (1 - y_i o_i) = sum_i c_i - <z, w_t>,
one dot product with the cut vector z, which is built incrementally from the rows whose c_i changed).
Since |<w_t - w_ref, x_i>| <= |w_t - w_ref| |x_i|, no unlisted row can change sides while
|w_t - w_ref| < radius: then the cut is the most violated one and F(w_t) is exact (an exact iteration,
with the stopping test). Farther away the cut is kept if its violation at w_t is at least
``LISTED_KEEP`` (a quarter) of the last exact iteration's, at most ``LISTED_RUN`` (50) times in a row;
otherwise the iteration makes a full pass. Every cut added is violated at w_t, so every iteration
raises the dual; the exact iterations add the most violated cut as Algorithm 1 does (so Lemma 2's
bound holds for them), at most LISTED_RUN listed iterations come between two of them, and the
stopping rules below are only ever tested at exact iterations. On w8a, ijcnn1 and a9a this makes an iteration 1.9-2.7 times cheaper on
average (tests/benchmarks/README.md). Trace points of listed iterations
that are not exact carry ``primal``, ``gap`` and ``violation`` None (F(w_t) is not known there).

Stopping rule in the user's terms. The reduced dual value D_t never decreases and is a lower bound
of the optimum F(w*); the best iterate's F(w) is an upper bound. ``tol_rel`` (default 0.01) stops
when F(w) - D_t <= tol_rel * F(w): the returned model is certified within tol_rel (relatively) of the
optimum, whatever C and n are. ``tol`` (default None: not used) adds the paper's rule: epsilon, the
precision of the training loss in OP2's units (average hinge loss per example; per pair for OP5).
With R(w) the loss sum at the current iterate and xi = max(0, max_{j in W} b_j - <z_j, w>) the slack
the working set asks for, Algorithm 1 stops when (R(w) - xi) / n <= tol (n -> m, the number of pairs,
for OP5), which in the service's objective means F(w) - F_W(w) <= C * n * tol; when that test passes
on a loosely solved reduced problem it is repeated at a solution precise to 1e-3 * C * n * tol, so
F(w) - F(w*) <= 1.001 * C * n * tol (Theorem 3 of paper 001). The paper's tol = 0.001 (Section 4.4)
was this solver's default until it turned out to mean "within C n 0.001", which at C = 10 on 6,412
rows is as large as the optimum itself. The reduced problem is solved to a duality gap of 0.1 x the
current outer gap. ``max_iter`` (default 10000: far above the few hundred iterations the paper
reports, Figure 2) ends the run with converged=False; the deadline and cancel flag of ``control``
are checked after every iteration.

Where the cuts live, and what runs in parallel: as in ``ocas`` (``worker.solvers.cut_store``: dense
cuts for data with more rows than features, cuts as row coefficients and outputs otherwise, where
the outputs of w_t cost no pass over the data; numba threads over row chunks and feature ranges).
The listed passes run over chunks of the listed rows, which are copied at each full pass into a CSR
of their own (memory: about LISTED_SHARE of the data's non-zeros, plus |x_i| per row); the iterates
are the same for any number of threads.

Output. The iterate with the smallest F seen (Algorithm 1 returns the last one; the best one is at
least as good and has the same guarantee), as ``w`` over the real features and ``bias = B * w_B``.
Trace point per iteration: iteration, elapsed_s, primal = F(w_t) of the current iterate,
best_primal, lower_bound = the reduced dual value (a lower bound of the optimum that never
decreases), gap = primal - lower_bound, violation = (R - xi)/n in the units of ``tol``, n_cuts, and
gap_rel = (best_primal - lower_bound) / best_primal, rows_computed (n, or the listed rows), and the
seconds of the phases qp_s, outputs_s, cut_s (most violated constraint, its sum and Gram row).
``extra["full_passes"]`` counts the iterations that computed every output. ``extra["gap_rel"]`` is the
certified relative gap of the returned model; ``extra["objective_name"]`` says which problem's objective
``objective`` is ("classification" or a pairwise one).
For "ordinal", ``extra["ranks"]`` and ``extra["thresholds"]`` hold the rank values and the
thresholds between adjacent ranks (``ranking.fit_thresholds``: fewest training errors per adjacent
split, made non-decreasing). The algorithm uses no randomness, so ``seed`` changes nothing (kept for
the common interface).
"""

from __future__ import annotations

import math
import time
from types import SimpleNamespace
from typing import Protocol

import numpy as np

from worker.solvers.common import (
    SolverControl,
    SolverInputError,
    SolverResult,
    StopReason,
    binary_signs,
    certified_gap,
    check_csr,
    check_int,
)
from worker.solvers.cpa_passes import _class_cut, _copy_rows, _listed_cut, _listed_cut_chunk, _row_norms
from worker.solvers.cut_data import prepare_data
from worker.solvers.cut_store import choose
from worker.solvers.data_passes import available_cores, compact_chunks, row_chunks, threads
from worker.solvers.ranking import fit_thresholds, pairwise_cut, pairwise_setup

# The reduced problem is solved to a duality gap of QP_REL times the current outer gap
# (F(w) - lower bound of the previous iteration; 0.1 costs no more outer iterations than 1e-3 in
# our measurements and a tenth of the SMO steps), and not tighter than 1e-13 relative.
# With the paper's rule (tol), cpa confirms a passed test at a reduced solution precise to
# QP_FINE * C * m * tol.
QP_REL = 0.1
QP_FINE = 1e-3

# Listed passes (classification with dense cuts; see ``_cpa_loop``): after every full pass the
# LISTED_SHARE of the rows nearest the margin (smallest |1 - y_i o_i| / |x_i|) are listed, and the
# next iterations compute the outputs of those rows only. A cut built that way is accepted when its
# violation at w_t is at least LISTED_KEEP times the violation of the last exact cut, at most
# LISTED_RUN times in a row; otherwise the iteration makes a full pass.
LISTED_SHARE = 0.2
LISTED_KEEP = 0.25
LISTED_RUN = 50


def check_arrays(indptr, indices, data, y, n_features) -> int:
    """The cutting-plane solvers' checks of what their schemas cannot know (the arrays); returns n."""
    check_csr(indptr, indices, data, check_int("n_features", n_features, 0))
    n = indptr.shape[0] - 1
    if n < 1:
        raise SolverInputError("the data set has no rows")
    y = np.asarray(y)
    if y.shape != (n,):
        raise SolverInputError(f"y must have one entry per row ({n}), got shape {y.shape}")
    return n


CPA_GAP_NOTE = "objective minus the reduced problem's dual value (a lower bound of the optimum)"
"""How a cpa result's gap is certified (``extra["gap_note"]``)."""


class CpaSettings(Protocol):
    """What cpa reads of a job's params: the fields of its schema (``core.schemas.solver_params.CpaParams``),
    which validates them and holds their defaults (this package imports no pydantic; tests and the warm-up
    build the schema's model or give every field). ``seed`` is not read: cpa draws nothing."""

    C: float
    objective: str
    bias: float | None
    tol_rel: float | None
    tol: float | None
    max_iter: int
    max_inactive: int


def solve_cpa(
    indptr,
    indices,
    data,
    y,
    *,
    n_features,
    params: CpaSettings,
    qid=None,
    n_processes=1,
    control=None,
    memory_bytes: int | None = None,
) -> SolverResult:
    """Train by Algorithm 1 (classification) or Algorithm 2 (pairwise objectives) of paper 001.

    See the module docstring for the problem, the stopping rules (``tol_rel``: certified relative gap;
    ``tol``: the paper's epsilon per example or per pair, off by default) and the trace. ``params``: the
    job's parameters (``CpaSettings``); ``qid``: the query of each row (objective `ranking`);
    ``n_processes``: numba threads for the passes (None: every core of this process); ``memory_bytes``: what the
    data may take in memory, past which it is read from its files in passes (``streamed_data``; None: no limit).
    """
    check_arrays(indptr, indices, data, y, n_features)
    C, objective, max_iter, max_inactive = float(params.C), params.objective, params.max_iter, params.max_inactive
    B = 0.0 if params.bias is None else float(params.bias)
    tol_rel = 0.0 if params.tol_rel is None else float(params.tol_rel)  # None: off (0 inside)
    tol = None if params.tol is None else float(params.tol)
    if n_processes is None:
        n_processes = available_cores()
    check_int("n_processes", n_processes, 1, or_none=True)
    control = control if control is not None else SolverControl()
    classification = objective == "classification"
    if classification:
        if qid is not None:
            raise SolverInputError("qid is only used by objective='ranking', not by objective='classification'")
        y = binary_signs(y).copy()  # writable: one compiled version of the kernels
        setup = None
    else:
        setup = pairwise_setup(y, qid, objective)
        y = np.asarray(y, dtype=np.float64)
        B = 0.0

    start = time.perf_counter()
    X = prepare_data(indptr, indices, data, int(n_features), B, n_processes, memory_bytes)
    try:
        store = choose(X, C, coef_dtype=np.int8 if classification else np.float64)
        with threads(X.n_threads) as used:
            return _cpa_loop(
                X, store, y, C, setup, objective, tol_rel, tol, max_iter, max_inactive, control, start, used
            )
    finally:
        X.close()


def _cpa_loop(
    X, store, y, C, setup, objective, tol_rel, tol, max_iter, max_inactive, control, start, n_threads
) -> SolverResult:
    """Algorithm 1 / 2 of paper 001 over the cut store; returns the SolverResult."""
    classification = setup is None
    n = X.n
    m = n if classification else setup.n_pairs
    chunks = X.chunks
    nc = chunks.shape[0] - 1
    rp = store.rp
    o = np.zeros(n)
    gamma = np.zeros(n)
    rows = np.zeros(n, dtype=np.int64)
    count_parts = np.zeros(nc, dtype=np.int64)
    risk_parts = np.zeros(nc)
    gsum_parts = np.zeros(nc)
    if not classification:
        cplus = np.zeros(n, dtype=np.int64)
        cminus = np.zeros(n, dtype=np.int64)
    trace_time = 0.0
    best_F = math.inf
    lower = 0.0
    prev_gap = math.inf
    converged = False
    stop_reason = StopReason.MAX_ITER
    violation = math.inf
    F = math.inf
    seconds = {"qp": 0.0, "outputs": 0.0, "cut": 0.0}
    n_iter = 0
    points = []
    fine_tol = QP_FINE * C * m * tol if tol is not None else 0.0
    n_sel = 0
    gsum = 0.0
    # listed passes (dense cuts, classification): the reference point of the last full pass, its
    # listed rows and the radius within which the listed rows alone decide the cut exactly
    # (not out of core: the listed rows would be a copy of a share of the data in memory)
    listed_passes = classification and store.kind == "dense" and X.kind == "memory"
    if listed_passes:
        nu = np.empty(n)
        _row_norms(X.indptr, X.data, X.B, nu)
        n_listed = min(n, max(1, int(math.ceil(LISTED_SHARE * n))))
        listed = np.zeros(n_listed, dtype=np.int64)
        changed = np.zeros(n_listed, dtype=np.int64)
        sub_indptr = np.zeros(n_listed + 1, dtype=np.int64)
        sub_indices = np.zeros(0, dtype=X.indices.dtype)
        sub_data = np.zeros(0, dtype=X.data.dtype)
        lchunks = np.zeros(2, dtype=np.int64)
        parts = np.zeros((3, 1))  # per chunk of the list: changed rows, change of count, change of sum
        w_ref = np.zeros(X.d + 1)
    n_cut = 0  # rows in the last cut (gamma_i != 0) and their sum of gamma_i
    cut_sum = 0.0
    have_ref = False
    radius = 0.0
    last_violation = 0.0
    run = 0
    n_full = 0
    for it in range(max_iter):
        n_iter = it + 1
        t_qp = t_out = t_cut = 0.0
        qp_tol = QP_REL * prev_gap if math.isfinite(prev_gap) else 0.0
        qp_tol = max(qp_tol, 1e-13 * max(1.0, abs(best_F) if math.isfinite(best_F) else 1.0))
        qp_tol_next = qp_tol  # what the next iteration uses after a listed one (prev_gap unchanged)
        exact = True
        prepared = False
        while True:
            t0 = time.perf_counter()
            D, _, _ = rp.solve(qp_tol)
            lower = max(lower, D)
            t = rp.t
            xi = max(0.0, float(np.max(rp.b[:t] - rp.h_alpha[:t]))) if t else 0.0
            t1 = time.perf_counter()
            listed_exact = False
            if have_ref and run < LISTED_RUN:
                # outputs of the listed rows only; the other rows keep their coefficient of the last
                # full pass. The cut is valid whatever the coefficients; its loss at w_t is exact:
                # sum_i gamma_i (1 - y_i o_i) = count - <z, w_t>. It is the most violated cut when
                # w_t is within ``radius`` of the reference (|o_i - o_i,ref| <= |w_t - w_ref| |x_i|)
                w = store.update_wt()
                delta = float(np.linalg.norm(w - w_ref))
                lists = (sub_indptr, sub_indices, sub_data, w, X.B * float(w[X.d]), y, listed, lchunks)
                if X.serial:  # one chunk, in this thread (no parallel region to start)
                    _listed_cut_chunk(*lists, 0, o, gamma, changed, parts)
                    n_changed = int(parts[0, 0])
                    n_cut += int(parts[1, 0])
                    cut_sum += float(parts[2, 0])
                else:
                    _listed_cut(*lists, o, gamma, changed, parts)
                    n_changed = compact_chunks(lchunks, parts[0].astype(np.int64), changed)
                    n_cut += int(np.sum(parts[1]))
                    cut_sum += float(np.sum(parts[2]))
                t2 = time.perf_counter()
                gsum = cut_sum
                z = store.prepare_cut(gamma, changed, n_changed, gsum)
                b_cut = float(n_cut)
                risk = max(0.0, b_cut - float(z @ w))
                listed_exact = delta * (1.0 + 1e-9) + 1e-12 < radius
                # kept: violated enough, and by more than the next solve's tolerance (the reduced
                # problem's gap grows by at least C (risk - xi) with this cut, so that solve moves w)
                kept = C * (risk - xi) >= LISTED_KEEP * last_violation and C * (risk - xi) > qp_tol_next
                if not listed_exact and kept:
                    exact = False
                    prepared = True
                    n_sel = n_cut
                    t_qp += t1 - t0
                    t_out += t2 - t1
                    t_cut += time.perf_counter() - t2
                    break
                prepared = listed_exact
                n_sel = n_cut
                t3 = time.perf_counter()
                t_out += t2 - t1
                t_cut += t3 - t2
                t1 = t3
            if not listed_exact:
                store.outputs_of_wt(o)
                t2 = time.perf_counter()
                if classification:
                    _class_cut(y, o, chunks, gamma, rows, count_parts, risk_parts, gsum_parts, X.serial)
                    risk = float(np.sum(risk_parts))
                    gsum = float(np.sum(gsum_parts))
                    b_cut = float(np.sum(count_parts))
                    n_cut = int(np.sum(count_parts))
                    cut_sum = gsum
                else:
                    b_cut, risk = pairwise_cut(o, setup, cplus, cminus, gamma)
                    gsum = 0.0
                n_full += 1
            else:
                t2 = t1
            F = 0.5 * store.sq_norm_t() + C * risk
            if F < best_F:
                best_F = F
                store.keep_t()
            violation = (risk - xi) / m
            last_violation = C * (risk - xi)
            gap = best_F - lower
            converged = gap <= tol_rel * best_F
            paper_rule = tol is not None and violation <= tol
            t3 = time.perf_counter()
            t_qp += t1 - t0
            t_out += t2 - t1
            t_cut += t3 - t2
            if converged:
                break
            # Line 9 passed on a loosely solved reduced problem: confirm it at the precise solution
            if paper_rule and qp_tol > fine_tol:
                qp_tol = fine_tol
                continue
            converged = paper_rule
            break
        stopped = None if converged else control.check()  # before the cut's pass over the data (issue 9)
        if stopped is not None:  # the kept point is the best so far
            stop_reason = stopped
            break
        t3 = time.perf_counter()
        if exact and listed_passes and not listed_exact:  # a full pass: new reference, new listed rows
            np.copyto(w_ref, store.w_t)
            ratio = np.abs(1.0 - y * o) / nu
            if n_listed < n:
                order = np.argpartition(ratio, n_listed)
                listed[:] = np.sort(order[:n_listed])
                radius = float(ratio[order[n_listed]])
            else:
                listed[:] = np.arange(n)
                radius = math.inf
            sub_nnz = int(np.sum(X.indptr[listed + 1] - X.indptr[listed]))
            if sub_indices.shape[0] < sub_nnz:
                sub_indices = np.zeros(int(1.25 * sub_nnz), dtype=X.indices.dtype)
                sub_data = np.zeros(int(1.25 * sub_nnz), dtype=X.data.dtype)
            _copy_rows(X.indptr, X.indices, X.data, listed, n_listed, sub_indptr, sub_indices, sub_data)
            # chunks of the list for the threads (one chunk for one thread: less to add up per
            # iteration); the iterates do not depend on them (integer sums, changed rows in list order)
            lchunks = np.array([0, n_listed], dtype=np.int64) if X.serial else row_chunks(sub_indptr)
            parts = np.zeros((3, lchunks.shape[0] - 1))
            have_ref = True
        run = 0 if exact else run + 1
        if not converged:
            if not prepared:
                if classification:
                    n_sel = compact_chunks(chunks, count_parts, rows)
                else:
                    sel = np.flatnonzero(gamma)
                    n_sel = sel.shape[0]
                    rows[:n_sel] = sel
            if prepared:
                store.add_cut(gamma, rows, n_sel, gsum, b_cut, prepared=True)
            else:
                store.add_cut(gamma, rows, n_sel, gsum, b_cut)
            store.drop_inactive(max_inactive)
        t_cut += time.perf_counter() - t3
        if exact:
            prev_gap = max(F - lower, 0.0)
        seconds["qp"] += t_qp
        seconds["outputs"] += t_out
        seconds["cut"] += t_cut
        r0 = time.perf_counter()
        control.record(
            {
                "iteration": n_iter,
                "elapsed_s": r0 - start - trace_time,
                "primal": F if exact else None,
                "best_primal": best_F,
                "lower_bound": lower,
                "gap": F - lower if exact else None,
                "gap_rel": (best_F - lower) / best_F if best_F > 0 else 0.0,
                "violation": violation if exact else None,
                "n_cuts": rp.t,
                "n_active_cuts": int(np.count_nonzero(rp.alpha[: rp.t])),
                "rows_computed": n if exact and not listed_exact else n_listed,
                "qp_s": t_qp,
                "outputs_s": t_out,
                "cut_s": t_cut,
            }
        )
        points.append(control.points[-1])
        trace_time += time.perf_counter() - r0
        if converged:
            stop_reason = StopReason.CONVERGED
            break
        reason = control.check()
        if reason is not None:
            stop_reason = reason
            break

    best_w = store.kept_weights()
    d = X.d + 1
    extra = {
        "objective_name": objective,
        **certified_gap(best_F, lower, CPA_GAP_NOTE),
        "violation": violation,
        "n_cuts": rp.t,
        "qp_steps": rp.total_steps,
        "full_passes": n_full,
        "threads": int(n_threads),
        "cut_form": store.kind,
        "aggregated_cuts": getattr(store, "aggregated", 0),
        "data": X.describe(),
        "seconds": seconds,
    }
    if not classification:
        extra["n_pairs"] = m
        if objective == "ordinal":
            X.outputs(best_w, o)
            ranks, thresholds = fit_thresholds(o, y)
            extra["ranks"] = ranks.tolist()
            extra["thresholds"] = thresholds.tolist()
    solver_seconds = time.perf_counter() - start - trace_time
    return SolverResult(
        w=best_w[: d - 1].copy(),
        bias=float(X.B * best_w[d - 1]),
        n_iter=n_iter,
        converged=converged,
        stop_reason=stop_reason,
        objective=float(best_F),
        solver_seconds=solver_seconds,
        trace_seconds=trace_time,
        trace=tuple(points),
        extra=extra,
    )


def warm_up() -> None:
    """Compile every kernel used by cpa on tiny problems (classification and ordinal, both cut forms)."""
    from worker.solvers import cut_store, data_passes, ranking, reduced_qp

    reduced_qp.warm_up()
    data_passes.warm_up()
    cut_store.warm_up()
    ranking.warm_up()
    for indptr, indices, data in data_passes.solver_csr_variants(
        [0, 2, 3, 5, 6], [0, 1, 1, 0, 1, 0], [1.0, -1.0, 2.0, 0.5, 1.0, -1.5]
    ):
        # the listed passes' kernels, whether or not the tiny runs below get to a listed iteration
        listed = np.array([0, 2], dtype=np.int64)
        sub_indptr = np.zeros(3, dtype=np.int64)
        sub_indices = np.zeros(6, dtype=indices.dtype)
        sub_data = np.zeros(6, dtype=data.dtype)
        _row_norms(indptr, data, 1.0, np.zeros(4))
        _copy_rows(indptr, indices, data, listed, 2, sub_indptr, sub_indices, sub_data)
        lists = (sub_indptr, sub_indices, sub_data, np.zeros(3), 0.0, np.ones(4), listed, np.array([0, 1, 2]))
        _listed_cut_chunk(*lists, 0, np.zeros(4), np.zeros(4), np.zeros(2, dtype=np.int64), np.zeros((3, 2)))
        _listed_cut(*lists, np.zeros(4), np.zeros(4), np.zeros(2, dtype=np.int64), np.zeros((3, 2)))
        if indices.dtype == np.uint16:  # only the solvers' own copy is narrow: the kernels above, no solve
            continue
        for n_features in (2, 7):  # dense cuts, cuts as outputs
            for objective, y in (("classification", [1.0, -1.0, 1.0, -1.0]), ("ordinal", [1.0, 2.0, 3.0, 1.0])):
                settings = SimpleNamespace(
                    C=1.0, objective=objective, bias=1.0, tol_rel=0.01, tol=None, max_iter=5, max_inactive=50
                )
                solve_cpa(indptr, indices, data, np.array(y), n_features=n_features, params=settings)
