"""Crammer-Singer ocas with its rows split over several nodes: ``worker.solvers.ocas_multiclass``'s iterations, the
rows held by ``worker.solvers.class_row_part.ClassRowPart`` on each node.

The problem, the iteration and the stopping rule are ``ocas_multiclass``'s (paper 000's Algorithm 1 with a weight
matrix W). What lives over the features stays here: the cuts (dense (n_features + 1) x K matrices), the reduced
problem and its solution W_t, the best point W_b. One iteration, as ``distributed_ocas``'s:

1. the reduced problem over the cuts gives W_t, sent to every node; each computes its rows' outputs and sends its
   part of the line search's G'(0+) with a sample of its breakpoints (``step_outputs``);
2. the line search for k* over every node's breakpoints (``row_part.split_minimize``: a round of pivots, then the
   last few thousand gathered), with A0 = |W_t - W_b|^2 and B0 = <W_b, W_t - W_b> known here;
3. k* goes out; each node moves O_b, finds its rows' most violated classes at W_c and sends its risk at the new
   W_b and its part of the next cut (``step_update``); the parts are added in node order.

So the objective, the lower bound and the certified gap are those of one machine, and the iterates equal them up to
the rounding of the nodes' sums (the same iterations but for ties). Each trace point adds ``comm_s``. A node lost
ends the training with the best point so far (stop reason ``node_lost``; ``worker.training.split`` regroups and
calls again from it); lost before the first iteration, ``NodeLost`` goes to the caller.
"""

from __future__ import annotations

import time

import numpy as np

from worker.solvers.common import SolverControl, SolverResult, StopReason
from worker.solvers.distributed_ocas import CallStopped, NodeLost, _Timed
from worker.solvers.ocas import trace_point
from worker.solvers.ocas_multiclass import ClassCuts, crammer_singer_result, starting_weights
from worker.solvers.row_part import PIVOTS, split_minimize


def _sum_parts(answers: list, index: int) -> np.ndarray:
    """The nodes' parts of a cut (entry ``index`` of each answer), added in node order."""
    Z = answers[0][index].copy()
    for answer in answers[1:]:
        Z += answer[index]
    return Z


def solve_crammer_singer_split(
    nodes, *, n_classes: int, n_features: int, params, control=None, w0=None
) -> SolverResult:
    """Train a Crammer-Singer multi-class SVM by OCAS over rows held by ``nodes`` (``ClassRowPart`` on each; module
    docstring); ``params`` as ``ocas.OcasSettings``; ``w0`` as ``ocas_multiclass.starting_weights``. The result is
    shaped as ``ocas_multiclass.solve_crammer_singer``'s: ``w`` (K, n_features), ``extra["biases"]`` the K
    offsets."""
    C, lam = float(params.C), float(params.lam)
    B = 0.0 if params.bias is None else float(params.bias)
    tol_rel = 0.0 if params.tol_rel is None else float(params.tol_rel)
    tol_abs = float(params.tol_abs)
    W_b = starting_weights(w0, n_classes, n_features, B)
    D, K = W_b.shape
    control = control if control is not None else SolverControl()
    start = time.perf_counter()
    call = _Timed(nodes, control)
    started = call("start", W_b)
    F_b = 0.5 * float(np.vdot(W_b, W_b)) + C * sum(a[0] for a in started)
    pending = sum(a[1] for a in started)
    next_cut = _sum_parts(started, 2)
    cuts = ClassCuts(C, D, K, int(params.max_inactive))
    rp, W_t = cuts.rp, cuts.W_t
    lower = 0.0
    converged = False
    stop_reason = StopReason.MAX_ITER
    totals = {key: 0.0 for key in ("qp", "output", "line_search", "update", "cut", "comm")}
    points: list[dict] = []
    trace_time = 0.0
    n_iter = 0
    k_star = 0.0
    for it in range(int(params.max_iter)):
        n_iter = it + 1
        comm_before = call.comm
        t0 = time.perf_counter()
        cuts.add(lambda Z, cut=next_cut: np.copyto(Z, cut), pending)
        t1 = time.perf_counter()
        lower = cuts.solve(F_b, lower)
        t2 = time.perf_counter()
        try:
            prepared = call("step_outputs", W_t, C, PIVOTS)
            stopped = control.check()
            if stopped is not None:
                stop_reason = stopped
                break
            t3 = time.perf_counter()
            diff = W_t - W_b
            A0 = float(np.vdot(diff, diff))
            S = float(np.vdot(W_b, diff)) + sum(a[0] for a in prepared)
            first = [(a[2], a[3], 0.0) for a in prepared]
            k_star = split_minimize(call, A0, S, first) if A0 > 0.0 and S < 0.0 else 0.0
            t4 = time.perf_counter()
            updated = call("step_update", k_star, lam)  # before W_b moves here: a node lost keeps (W_b, F_b)
        except NodeLost:
            stop_reason = StopReason.NODE_LOST
            n_iter -= 1
            break
        except CallStopped as stop:
            stop_reason = stop.reason
            n_iter -= 1
            break
        W_b += k_star * diff
        F_b = 0.5 * float(np.vdot(W_b, W_b)) + C * sum(a[0] for a in updated)
        pending = sum(a[2] for a in updated)
        next_cut = _sum_parts(updated, 3)
        gap = F_b - lower
        converged = gap <= max(tol_abs, tol_rel * F_b)
        t5 = time.perf_counter()
        step = {"qp": t2 - t1, "output": t3 - t2, "line_search": t4 - t3, "update": t5 - t4, "cut": t1 - t0}
        step["comm"] = call.comm - comm_before
        for key, value in step.items():
            totals[key] += value
        r0 = time.perf_counter()
        control.record(trace_point(n_iter, r0 - start - trace_time, F_b, lower, rp, k_star, step))
        points.append(control.points[-1])
        trace_time += time.perf_counter() - r0
        if converged:
            stop_reason = StopReason.CONVERGED
            break
        stopped = control.check()
        if stopped is not None:
            stop_reason = stopped
            break
    objective = F_b
    if stop_reason not in (StopReason.CANCELED, StopReason.DEADLINE, StopReason.NODE_LOST):
        try:  # fresh outputs, not the running convex combinations
            objective = 0.5 * float(np.vdot(W_b, W_b)) + C * sum(a[0] for a in call("loss", W_b))
        except NodeLost:  # the training is over: F_b, from the running outputs, stands
            pass
    outcome = {
        "n_iter": n_iter,
        "converged": converged,
        "stop_reason": stop_reason,
        "objective": objective,
        "solver_seconds": time.perf_counter() - start - trace_time,
        "trace_seconds": trace_time,
        "trace": tuple(points),
    }
    data = {"form": "split", "nodes": int(nodes.n_nodes)}
    return crammer_singer_result(W_b, B, cuts, lower, outcome, {"data": data, "seconds": totals})
