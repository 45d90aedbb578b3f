"""`cpa` (classification) with its rows split over several nodes: paper 001's Algorithm 1, the iterates of one machine.

An iteration of the 1-slack cutting-plane algorithm touches the rows once: the outputs of w_t, the most violated
constraint (the rows with y_i <w_t, x_i> < 1), its loss and its vector z = sum of y_i x_i over those rows. Each
node (``worker.solvers.row_part.RowPart.step_cpa``) does that for its rows in one call and answers with its sums
and its part of z; the driver (here) holds the reduced problem, the cuts and the best iterate, as
``worker.solvers.distributed_ocas`` does for ocas, with the same ``nodes`` interface and the same ``comm_s``
column in the trace. The stopping rules are cpa's: the certified relative gap ``tol_rel`` and the paper's
epsilon ``tol`` (confirmed on a precisely solved reduced problem). The in-memory solver's listed passes (a
share of the rows re-read between full passes) are not used here: every iteration is a full pass, as on
data larger than memory, so the iterates are those of ``solve_cpa`` without them. A node lost ends the training
with the best iterate so far (stop reason ``node_lost``).
"""

from __future__ import annotations

import math
import time

import numpy as np

from worker.solvers.common import SolverControl, SolverResult, StopReason, certified_gap
from worker.solvers.cpa import CPA_GAP_NOTE, QP_FINE, QP_REL
from worker.solvers.cut_data import FeatureSpace
from worker.solvers.cut_store import DenseCuts
from worker.solvers.distributed_ocas import CallStopped, NodeLost, _Timed


def solve_cpa_split(nodes, *, n_features: int, params, control=None) -> SolverResult:
    """Train a linear classifier by cpa (paper 001, Algorithm 1) over rows held by ``nodes`` (module docstring);
    ``params`` as ``cpa.CpaSettings`` with objective `classification`."""
    if params.objective != "classification":
        raise ValueError("a split cpa trains classification only")
    C, max_iter, max_inactive = float(params.C), int(params.max_iter), int(params.max_inactive)
    B = 0.0 if params.bias is None else float(params.bias)
    tol_rel = 0.0 if params.tol_rel is None else float(params.tol_rel)
    tol = None if params.tol is None else float(params.tol)
    control = control if control is not None else SolverControl()
    start = time.perf_counter()
    call = _Timed(nodes, control)
    store = DenseCuts(FeatureSpace(n_features, B, nodes.data_bytes), C)
    rp = store.rp
    m = int(nodes.n_rows)
    fine_tol = QP_FINE * C * m * tol if tol is not None else 0.0
    best_F = math.inf
    lower = 0.0
    prev_gap = math.inf
    converged = False
    stop_reason = StopReason.MAX_ITER
    violation = math.inf
    seconds = {"qp": 0.0, "outputs": 0.0, "cut": 0.0, "comm": 0.0}
    points = []
    n_iter = 0
    trace_time = 0.0
    answers: list = []
    for it in range(max_iter):
        n_iter = it + 1
        comm_before = call.comm
        t_qp = t_out = 0.0
        qp_tol = QP_REL * prev_gap if math.isfinite(prev_gap) else 0.0
        qp_tol = max(qp_tol, 1e-13 * max(1.0, abs(best_F) if math.isfinite(best_F) else 1.0))
        try:
            while True:
                t0 = time.perf_counter()
                D, _, _ = rp.solve(qp_tol)
                lower = max(lower, D)
                t = rp.t
                xi = max(0.0, float(np.max(rp.b[:t] - rp.h_alpha[:t]))) if t else 0.0
                t1 = time.perf_counter()
                answers = call("step_cpa", store.update_wt())
                t2 = time.perf_counter()
                risk = sum(a[0] for a in answers)
                F = 0.5 * store.sq_norm_t() + C * risk
                if F < best_F:
                    best_F = F
                    store.keep_t()
                violation = (risk - xi) / m
                gap = best_F - lower
                converged = gap <= tol_rel * best_F
                paper_rule = tol is not None and violation <= tol
                t_qp += t1 - t0
                t_out += t2 - t1
                if converged:
                    break
                if paper_rule and qp_tol > fine_tol:  # confirm the paper's rule at a precise solution
                    qp_tol = fine_tol
                    continue
                converged = paper_rule
                break
        except NodeLost:
            stop_reason = StopReason.NODE_LOST
            n_iter -= 1
            break
        except CallStopped as stop:
            stop_reason = stop.reason
            n_iter -= 1
            break
        stopped = None if converged else control.check()
        if stopped is not None:
            stop_reason = stopped
            break
        t3 = time.perf_counter()
        if not converged:
            z = answers[0][3].copy()  # the cut's parts, added in node order
            for part in answers[1:]:
                z += part[3]
            store.add_vector(z, float(sum(int(a[1]) for a in answers)))
            store.drop_inactive(max_inactive)
        t_cut = time.perf_counter() - t3
        prev_gap = max(F - lower, 0.0)
        comm = call.comm - comm_before
        for key, value in (("qp", t_qp), ("outputs", t_out), ("cut", t_cut), ("comm", comm)):
            seconds[key] += value
        r0 = time.perf_counter()
        control.record(
            {
                "iteration": n_iter,
                "elapsed_s": r0 - start - trace_time,
                "primal": F,
                "best_primal": best_F,
                "lower_bound": lower,
                "gap": F - lower,
                "gap_rel": (best_F - lower) / best_F if best_F > 0 else 0.0,
                "violation": violation,
                "n_cuts": rp.t,
                "n_active_cuts": int(np.count_nonzero(rp.alpha[: rp.t])),
                "rows_computed": m,
                "qp_s": t_qp,
                "outputs_s": t_out,
                "cut_s": t_cut,
                "comm_s": comm,
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
    solver_seconds = time.perf_counter() - start - trace_time
    return SolverResult(
        w=best_w[:n_features].copy(),
        bias=float(B * best_w[n_features]),
        n_iter=n_iter,
        converged=converged,
        stop_reason=stop_reason,
        objective=best_F,
        solver_seconds=solver_seconds,
        trace_seconds=trace_time,
        trace=tuple(points),
        extra={
            "objective_name": "classification",
            **certified_gap(best_F, lower, CPA_GAP_NOTE),
            "violation": violation,
            "n_cuts": rp.t,
            "qp_steps": rp.total_steps,
            "full_passes": n_iter,
            "cut_form": store.kind,
            "data": {"form": "split", "nodes": int(nodes.n_nodes)},
            "seconds": seconds,
        },
    )
