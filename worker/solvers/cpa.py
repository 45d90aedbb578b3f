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

Stopping rule in the user's terms. ``tol`` is the paper's epsilon: the precision of the training
loss in OP2's units (average hinge loss per example; per pair for OP5). With R(w) the loss sum at
the current iterate and xi = max(0, max_{j in W} b_j - <z_j, w>) the slack the working set asks
for, Algorithm 1 stops when (R(w) - xi) / n <= tol (n -> m, the number of pairs, for OP5), which in
the service's objective means F(w) - F_W(w) <= C * n * tol. The reduced problem is solved loosely
while far from the end (duality gap <= 0.1 x the current outer gap); when the test passes, it is
re-solved to a gap <= 1e-3 * C * n * tol and the test repeated at that solution, so at the stop
F(w) - F(w*) <= 1.001 * C * n * tol (Theorem 3 of paper 001 plus the reduced problem's residual
gap). The paper's default 0.001 (Section 4.4) is ours. ``max_iter`` (default 10000: far above the few hundred iterations the paper
reports, Figure 2) ends the run with converged=False; the deadline and cancel flag of ``control``
are checked after every iteration.

Output. The iterate with the smallest F seen (Algorithm 1 returns the last one; the best one is at
least as good and has the same guarantee), as ``w`` over the real features and ``bias = B * w_B``.
Trace point per iteration: iteration, elapsed_s, primal = F(w_t) of the current iterate,
best_primal, lower_bound = the reduced dual value (a lower bound of the optimum that never
decreases), gap = primal - lower_bound, violation = (R - xi)/n in the units of ``tol``, n_cuts, and
seconds of the phases qp_s, outputs_s, cut_s (most violated constraint and its sum).
For "ordinal", ``extra["ranks"]`` and ``extra["thresholds"]`` hold the rank values and the
thresholds between adjacent ranks (``ranking.fit_thresholds``: fewest training errors per adjacent
split, made non-decreasing). Everything runs in the calling process, serially; the algorithm uses
no randomness, so ``seed`` changes nothing (kept for the common interface).
"""

from __future__ import annotations

import math
import time

import numpy as np
from numba import njit

from worker.solvers.common import (
    SolverControl,
    SolverInputError,
    SolverResult,
    StopReason,
    binary_signs,
    check_csr,
    check_positive,
)
from worker.solvers.ranking import PAIRWISE_OBJECTIVES, fit_thresholds, pairwise_cut, pairwise_setup
from worker.solvers.reduced_qp import ReducedProblem
from worker.solvers.shared_pool import _pass_cut_rows, _pass_outputs

OBJECTIVES = ("classification",) + PAIRWISE_OBJECTIVES

# The reduced problem is solved to a duality gap of QP_REL times the current outer gap
# (F(w) - lower bound of the previous iteration; 0.1 costs no more outer iterations than 1e-3 in
# our measurements and a tenth of the SMO steps), and not tighter than 1e-13 relative.
# cpa confirms a passed stopping test at a reduced solution precise to QP_FINE * C * m * tol.
QP_REL = 0.1
QP_FINE = 1e-3


@njit(cache=True)
def _cpa_class_cut(y, o, gamma):
    """Most violated constraint of OP2 at outputs o: c_i = [y_i o_i < 1], gamma_i = y_i c_i.

    Returns (b, risk, sum_gamma) with b = sum c_i and risk = sum_i max(0, 1 - y_i o_i).
    """
    b = 0.0
    risk = 0.0
    gsum = 0.0
    for i in range(y.shape[0]):
        margin = 1.0 - y[i] * o[i]
        if margin > 0.0:
            gamma[i] = y[i]
            b += 1.0
            risk += margin
            gsum += y[i]
        else:
            gamma[i] = 0.0
    return b, risk, gsum


def check_common(indptr, indices, data, y, n_features, C, bias, max_iter, max_inactive, seed):
    """Shared input checks of the cutting-plane solvers; returns (n, C, B, max_iter, max_inactive)."""
    if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)) or n_features < 0:
        raise SolverInputError(f"n_features must be an integer >= 0, got {n_features!r}")
    check_csr(indptr, indices, data, int(n_features))
    n = indptr.shape[0] - 1
    if n < 1:
        raise SolverInputError("the data set has no rows")
    y = np.asarray(y)
    if y.shape != (n,):
        raise SolverInputError(f"y must have one entry per row ({n}), got shape {y.shape}")
    C = check_positive("C", C)
    if bias is None:
        B = 0.0
    else:
        B = float(bias)
        if not (math.isfinite(B) and B > 0):
            raise SolverInputError(f"bias must be None or a finite number > 0, got {bias!r}")
    for name, value in (("max_iter", max_iter), ("max_inactive", max_inactive)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise SolverInputError(f"{name} must be an integer >= 1, got {value!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise SolverInputError(f"seed must be an integer >= 0, got {seed!r}")
    return n, C, B, int(max_iter), int(max_inactive)


def solve_cpa(indptr, indices, data, y, *, n_features, C, bias=1.0, tol=0.001, max_iter=10000,
              max_inactive=50, objective="classification", qid=None, seed=0, control=None) -> SolverResult:
    """Train by Algorithm 1 (classification) or Algorithm 2 (pairwise objectives) of paper 001.

    See the module docstring for the problem, the meaning of ``tol`` (paper's epsilon: stop when
    the most violated constraint exceeds the working set's slack by at most tol per example, or
    per pair, i.e. F(w) - F_W(w) <= C * n * tol in the service's units) and the trace.
    """
    n, C, B, max_iter, max_inactive = check_common(indptr, indices, data, y, n_features, C, bias,
                                                   max_iter, max_inactive, seed)
    tol = check_positive("tol", tol)
    if objective not in OBJECTIVES:
        raise SolverInputError(f"objective must be one of {list(OBJECTIVES)}, got {objective!r}")
    control = control if control is not None else SolverControl()
    classification = objective == "classification"
    if classification:
        if qid is not None:
            raise SolverInputError("qid is only used by objective='ranking', not by objective='classification'")
        y = binary_signs(y)
        m = n
        setup = None
    else:
        setup = pairwise_setup(y, qid, objective)
        y = np.asarray(y, dtype=np.float64)
        m = setup.n_pairs
        B = 0.0

    start = time.perf_counter()
    trace_time = 0.0
    d = int(n_features) + 1
    rp = ReducedProblem(d, C)
    o = np.zeros(n)
    gamma = np.zeros(n)
    z = np.zeros(d)
    best_w = np.zeros(d)
    best_F = math.inf
    if not classification:
        cplus = np.zeros(n, dtype=np.int64)
        cminus = np.zeros(n, dtype=np.int64)
    lower = 0.0
    prev_gap = math.inf
    converged = False
    stop_reason = StopReason.MAX_ITER
    violation = math.inf
    F = math.inf
    seconds = {"qp": 0.0, "outputs": 0.0, "cut": 0.0}
    n_iter = 0
    points = []
    fine_tol = QP_FINE * C * m * tol
    for it in range(max_iter):
        n_iter = it + 1
        t_qp = t_out = t_cut = 0.0
        qp_tol = QP_REL * prev_gap if math.isfinite(prev_gap) else 0.0
        qp_tol = max(qp_tol, 1e-13 * max(1.0, abs(best_F) if math.isfinite(best_F) else 1.0))
        while True:
            t0 = time.perf_counter()
            w, D, xi, _, _ = rp.solve(qp_tol)
            lower = max(lower, D)
            t1 = time.perf_counter()
            _pass_outputs(indptr, indices, data, w, B, 0, n, o)
            t2 = time.perf_counter()
            if classification:
                b_cut, risk, gsum = _cpa_class_cut(y, o, gamma)
            else:
                b_cut, risk = pairwise_cut(o, setup, cplus, cminus, gamma)
                gsum = 0.0
            F = 0.5 * float(w @ w) + C * risk
            if F < best_F:
                best_F = F
                best_w[:] = w
            violation = (risk - xi) / m
            converged = violation <= tol
            stopped = None if converged else control.check()  # before the cut's pass over the data
            if stopped is not None:
                break
            t3 = time.perf_counter()
            t_qp += t1 - t0
            t_out += t2 - t1
            t_cut += t3 - t2
            # Line 9 passed on a loosely solved reduced problem: confirm it at the precise solution
            if not converged or qp_tol <= fine_tol:
                break
            qp_tol = fine_tol
        if stopped is not None:  # best_w is the best point so far
            stop_reason = stopped
            break
        t3 = time.perf_counter()
        if not converged:
            z[:] = 0.0
            _pass_cut_rows(indptr, indices, data, gamma, 0, n, z)
            z[d - 1] = B * gsum
            rp.add_cut(z, b_cut)
            rp.drop_inactive(max_inactive)
        t_cut += time.perf_counter() - t3
        prev_gap = max(F - lower, 0.0)
        seconds["qp"] += t_qp
        seconds["outputs"] += t_out
        seconds["cut"] += t_cut
        r0 = time.perf_counter()
        control.record({
            "iteration": n_iter,
            "elapsed_s": r0 - start - trace_time,
            "primal": F,
            "best_primal": best_F,
            "lower_bound": lower,
            "gap": F - lower,
            "violation": violation,
            "n_cuts": rp.t,
            "qp_s": t_qp,
            "outputs_s": t_out,
            "cut_s": t_cut,
        })
        points.append(control.points[-1])
        trace_time += time.perf_counter() - r0
        if converged:
            stop_reason = StopReason.CONVERGED
            break
        reason = control.check()
        if reason is not None:
            stop_reason = reason
            break

    extra = {
        "objective_kind": objective,
        "lower_bound": lower,
        "gap": best_F - lower,
        "violation": violation,
        "n_cuts": rp.t,
        "qp_steps": rp.total_steps,
        "seconds": seconds,
    }
    if not classification:
        extra["n_pairs"] = m
        if objective == "ordinal":
            _pass_outputs(indptr, indices, data, best_w, 0.0, 0, n, o)
            ranks, thresholds = fit_thresholds(o, y)
            extra["ranks"] = ranks.tolist()
            extra["thresholds"] = thresholds.tolist()
    solver_seconds = time.perf_counter() - start - trace_time
    return SolverResult(
        w=best_w[: d - 1].copy(),
        bias=float(B * best_w[d - 1]),
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
    """Compile every kernel used by cpa on tiny problems (classification and ordinal)."""
    from worker.solvers import ranking, reduced_qp, shared_pool

    reduced_qp.warm_up()
    shared_pool.warm_up()
    ranking.warm_up()
    indptr = np.array([0, 2, 3, 5, 6], dtype=np.int64)
    indices = np.array([0, 1, 1, 0, 1, 0], dtype=np.int32)
    data = np.array([1.0, -1.0, 2.0, 0.5, 1.0, -1.5])
    solve_cpa(indptr, indices, data, np.array([1.0, -1.0, 1.0, -1.0]), n_features=2, C=1.0, max_iter=5)
    solve_cpa(indptr, indices, data, np.array([1.0, 2.0, 3.0, 1.0]), n_features=2, C=1.0, max_iter=5,
              objective="ordinal")
