"""`ocas` with its rows split over several nodes: paper 000's Algorithm 1, the same iterates as on one machine.

An OCAS iteration touches the data only in passes whose results are sums over rows (paper 000, Section 3.1),
so the rows can live on several nodes (``worker.solvers.row_part.RowPart``, each holding its rows and their
per-row state across iterations) while one driver holds what lives over the features: the cuts, the reduced
problem (3) and its solution w_t, the best-so-far point w_b. One iteration:

1. the driver solves the reduced problem and sends w_t to every node; each computes its rows' outputs and
   sends its part of the line search's G'(0+) with a sample of its breakpoints (``step_outputs``);
2. the line search (7): the driver, knowing A0 and B0 from w_t and w_b, finds k* by
   ``row_part.split_minimize`` (a round of pivots over the breakpoints that stay on the nodes, then the last
   few thousand gathered: one or two more calls);
3. the driver sends k* (and lam); each node moves o_b, picks the cut's rows at w_c (8) and sends its loss at
   the new w_b and its part of the new cut, z_p = sum over its cut rows of y_i x_i (``step_update``); the
   driver has F(w_b), the gap, the stopping rule (9), and adds the parts up into the new cut.

The objective, the lower bound and so the certified gap are those of one machine; the sums over rows are
taken node by node and added in node order, so the iterates equal the one-machine ones up to rounding (the
same iterations but for ties). Each trace point adds ``comm_s``: the seconds of the iteration's calls
to the nodes that the nodes did not spend computing (the network, serialization, the engine), so that a user
sees what the split costs; ``extra["seconds"]["comm"]`` totals them.

A node lost during an iteration ends the training with the best point so far, w_b, which every cutting-plane
iterate is a valid model of (stop reason ``node_lost``, its objective F(w_b) as last computed, its certified
gap against the last lower bound); lost before the first iteration, ``NodeLost`` goes to the caller.

``nodes`` is anything with ``call_all(method, *args) -> list`` (one answer per node, in node order, each a
tuple whose last entry is the node's seconds; ``NodeLost`` when a node is gone), ``n_nodes``, ``n_rows`` and
``data_bytes``: ``LocalNodes`` here (tests; a
node per part in this process), ``worker.runtime.cluster`` on a distributed engine.
"""

from __future__ import annotations

import math
import time

import numpy as np

from worker.solvers.common import SolverControl, SolverInputError, SolverResult, StopReason, certified_gap
from worker.solvers.cpa import QP_REL
from worker.solvers.cut_data import FeatureSpace
from worker.solvers.cut_store import DenseCuts
from worker.solvers.ocas import OCAS_GAP_NOTE, trace_point
from worker.solvers.row_part import PIVOTS, RowPart, split_minimize


class NodeLost(Exception):
    """A node stopped answering during a split training (its process, its machine or the network gone); ``node``:
    which, when the caller knows (a Dask worker's address)."""

    def __init__(self, message: str, node: str | None = None) -> None:
        super().__init__(message)
        self.node = node


class CallStopped(Exception):
    """The training was stopped (a cancel, its deadline) while a call waited on the nodes: ``reason`` says why. The
    model is the best point so far, as when a node is lost."""

    def __init__(self, reason) -> None:
        super().__init__(f"stopped while waiting on the nodes: {reason}")
        self.reason = reason


class LocalNodes:
    """Row parts in this process, called one after the other (tests, and the reference for the engines)."""

    def __init__(self, parts: list[RowPart], data_bytes: int) -> None:
        self.parts = parts
        self.n_nodes = len(parts)
        self.n_rows = sum(part.n for part in parts)
        self.data_bytes = int(data_bytes)

    def call_all(self, method: str, *args) -> list:
        """Every part's answer to ``method(*args)``."""
        return [getattr(part, method)(*args) for part in self.parts]


class _Timed:
    """``call_all`` with the seconds the calls took beyond the slowest node's own (the communication)."""

    def __init__(self, nodes, control=None) -> None:
        self.nodes = nodes
        self.comm = 0.0
        if control is not None and hasattr(nodes, "interrupt"):  # a stop seen while a call waits (CallStopped)
            nodes.interrupt = control.check

    def __call__(self, method: str, *args) -> list:
        started = time.perf_counter()
        answers = self.nodes.call_all(method, *args)
        wall = time.perf_counter() - started
        self.comm += max(0.0, wall - max((float(a[-1]) for a in answers), default=0.0))
        return answers


def solve_ocas_split(nodes, *, n_features: int, params, control=None, w0=None) -> SolverResult:
    """Train a linear hinge-loss SVM by OCAS over rows held by ``nodes`` (module docstring); ``params`` as
    ``ocas.OcasSettings``; ``w0``: the weights to start from (n_features, or n_features + 1 with the bias term)."""
    C, lam, max_iter, max_inactive = float(params.C), float(params.lam), int(params.max_iter), int(params.max_inactive)
    B = 0.0 if params.bias is None else float(params.bias)
    tol_rel = 0.0 if params.tol_rel is None else float(params.tol_rel)
    tol_abs = float(params.tol_abs)
    n_features = int(n_features)
    d1 = n_features + 1
    w_b = np.zeros(d1)
    if w0 is not None:
        w0 = np.asarray(w0, dtype=np.float64)
        if w0.ndim != 1 or w0.shape[0] not in (n_features, d1) or not np.all(np.isfinite(w0)):
            raise SolverInputError(f"w0 must be a finite vector of length {n_features} or {d1}, got shape {w0.shape}")
        w_b[:n_features] = w0[:n_features]
        if w0.shape[0] == d1 and w0[-1] != 0.0:
            if B == 0.0:
                raise SolverInputError("w0 has a bias entry but bias is None")
            w_b[n_features] = w0[-1] / B
    control = control if control is not None else SolverControl()
    start = time.perf_counter()
    call = _Timed(nodes, control)
    store = DenseCuts(FeatureSpace(n_features, B, nodes.data_bytes), C)
    rp = store.rp
    sq_b = store.start_best(w_b)
    F_b = 0.5 * sq_b + C * sum(a[0] for a in call("start", w_b))
    lower = 0.0
    converged = False
    stop_reason = StopReason.MAX_ITER
    totals = {k: 0.0 for k in ("qp", "output", "line_search", "update", "cut", "comm")}
    points = []
    n_iter = 0
    k_star = 0.0
    gap = math.inf
    trace_time = 0.0
    for it in range(max_iter):
        n_iter = it + 1
        comm_before = call.comm
        t0 = time.perf_counter()
        try:
            qp_tol = max(QP_REL * max(F_b - lower, 0.0), 1e-13 * max(1.0, F_b))
            D, _, _ = rp.solve(qp_tol)
            lower = max(lower, D)
            t1 = time.perf_counter()
            prepared = call("step_outputs", store.update_wt(), C, PIVOTS)
            stopped = control.check()
            if stopped is not None:
                stop_reason = stopped
                break
            t2 = time.perf_counter()
            A0, B0 = store.line_terms()
            S = B0 + sum(a[0] for a in prepared)
            first = [(a[2], a[3], 0.0) for a in prepared]
            k_star = split_minimize(call, A0, S, first) if A0 > 0.0 and S < 0.0 else 0.0
            t3 = time.perf_counter()
            updated = call("step_update", k_star, lam)  # before w_b moves here: a node lost keeps (w_b, F_b)
        except NodeLost:
            stop_reason = StopReason.NODE_LOST
            n_iter -= 1
            break
        except CallStopped as stop:
            stop_reason = stop.reason
            n_iter -= 1
            break
        sq_b = store.move_best(k_star)
        F_b = 0.5 * sq_b + C * sum(a[0] for a in updated)
        n_sel = sum(int(a[1]) for a in updated)
        t4 = time.perf_counter()
        gap = F_b - lower
        converged = gap <= max(tol_abs, tol_rel * F_b)
        stopped = None if converged else control.check()
        if not converged and stopped is None:
            z = updated[0][3].copy()  # the cut's parts, added in node order
            for part in updated[1:]:
                z += part[3]
            store.add_vector(z, float(n_sel))
            store.drop_inactive(max_inactive)
        t5 = time.perf_counter()
        step = {"qp": t1 - t0, "output": t2 - t1, "line_search": t3 - t2, "update": t4 - t3, "cut": t5 - t4}
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
        reason = stopped or control.check()
        if reason is not None:
            stop_reason = reason
            break
    w = store.best_weights()
    if stop_reason in (StopReason.CANCELED, StopReason.DEADLINE, StopReason.NODE_LOST):
        objective = F_b
    else:
        objective = 0.5 * float(w @ w) + C * sum(a[0] for a in call("loss", w))
    solver_seconds = time.perf_counter() - start - trace_time
    return SolverResult(
        w=w[:n_features].copy(),
        bias=float(B * w[n_features]),
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
            "cut_form": store.kind,
            "data": {"form": "split", "nodes": int(nodes.n_nodes)},
            "seconds": totals,
        },
    )
