"""A job's model trained with its rows split over the nodes of a Dask cluster (``params.distributed``).

The nodes load the data set's shards once (``worker.runtime.cluster``); the binary problems of one-vs-rest then
run one after another over the same nodes, each by the solver's ``split_solve`` (ocas:
``worker.solvers.distributed_ocas``, cpa: ``worker.solvers.distributed_cpa``) from this process, which holds the
cuts and the reduced problem. Deadline and cancel are the job's, checked by the driver
between the calls of every iteration (each call to the nodes is a fraction of an iteration): a stop reaches
every node at once, since nothing runs on them between calls.

A node lost (``params.distributed.on_node_lost``):

- ``regroup`` (the default): the nodes are released, the data set's shards shared again over the nodes left (the
  lost one excluded: a hung node may still be connected) and the binary problem goes on, ocas from its best point
  so far (``w0``), cpa from its start (its cutting planes need their first iterate at 0); the problems already
  done keep their models. Its trace goes on with the iterations and seconds counted from the problem's start, and
  the model counts the nodes lost (``data_access.nodes_lost``, a ``nodes_lost`` warning). At most as many regroups
  as nodes were asked; once none is left it ends as ``stop`` does.
- ``stop``: a two-label model ends with the best point so far (stop reason ``node_lost``); one-vs-rest, whose
  other problems would have no model, fails the job (``node_lost``).

Crammer and Singer's one problem over every label (ocas's ``multiclass: crammer_singer``,
``fit_split_crammer_singer``) runs the same way, as one problem: its nodes hold each row's class
(``worker.solvers.class_row_part``), and it regroups from its best point as ocas's binary problems do.
"""

from __future__ import annotations

import functools
import importlib
import logging
import time
from dataclasses import replace

import numpy as np

from core.schemas.enums import NodeLoss
from core.solvers import spec_of
from worker.runtime.cluster import ClusterError
from worker.solvers.common import SolverControl, SolverResult, StopReason
from worker.solvers.distributed_ocas import CallStopped, NodeLost
from worker.solvers.distributed_ocas_multiclass import solve_crammer_singer_split
from worker.training.context import FitContext

log = logging.getLogger("hinge.split")


class _Group:
    """The nodes a split training uses now, opened again without a lost one (``regroup``)."""

    def __init__(self, context: FitContext, bias: float, asked: int) -> None:
        assert context.open_nodes is not None
        self.open = context.open_nodes
        self.bias = bias
        self.regroups_left = asked
        self.lost: list[str] = []
        self.stopped: StopReason | None = None
        """Why a regroup ended without nodes: the job's cancel or deadline while the nodes left loaded the shards."""
        self.stop = SolverControl(deadline=context.deadline, cancel_requested=context.cancel_requested).check
        # the first load looks at a cancel only (CallStopped: nothing started); a deadline is the first iteration's
        self.nodes = self.open(bias, stop=lambda: StopReason.CANCELED if context.cancel_requested() else None)

    def regroup(self, where: str) -> bool:
        """Release the nodes and open the data set on those left, the lost one excluded; False when none is left
        (or the regroups are used up). ``where``: when it was lost, for the log."""
        lost = getattr(self.nodes, "lost", None)
        self.lost.append(str(lost) if lost is not None else "a node")
        why = f"node {self.lost[-1]} lost {where}"
        self.nodes.close()
        while self.regroups_left > 0:
            self.regroups_left -= 1
            try:
                self.nodes = self.open(
                    self.bias, exclude=[name for name in self.lost if name != "a node"], stop=self.stop
                )
                log.warning("split training: %s; regrouped over %d node(s)", why, self.nodes.n_nodes)
                return True
            except CallStopped as stopped:  # canceled, or past its deadline, while the nodes left loaded the rows
                self.stopped = stopped.reason
                return False
            except NodeLost as exc:  # one of the nodes left lost while loading: left out of the next try
                log.warning("split training: %s; no regroup: %s", why, exc)
                self.lost.append(exc.node or "a node")
            except ClusterError as exc:
                log.warning("split training: %s; no regroup: %s", why, exc)
                break
        return False

    def close(self) -> None:
        """Release the nodes (again, after a regroup that found none: a closed handle closes as a no-op)."""
        self.nodes.close()


def _starting_point(solver: str, result: SolverResult, *, bias: float) -> dict:
    """The solve's arguments that start it at ``result``'s weights (ocas), or none (cpa starts again)."""
    if solver != "ocas" or result.w is None:
        return {}
    return {"w0": np.append(result.w, result.bias) if bias else result.w}


def fit_split(
    solver: str,
    params,
    labels: np.ndarray,
    n_features: int,
    context: FitContext,
    *,
    on_point,
    on_problem_done=None,
    on_subtask_done=None,
) -> list[SolverResult | None]:
    """One result per binary problem of ``labels`` (two labels: one problem, the larger label positive; more:
    one-vs-rest); a problem never started because of a cancel is None."""
    module, name = str(spec_of(solver).split_solve).split(":")
    solve = getattr(importlib.import_module(module), name)
    bias = 0.0 if params.bias is None else float(params.bias)
    regroup = params.distributed.on_node_lost == NodeLoss.regroup
    positives = [labels[1]] if labels.size == 2 else list(labels)
    results: list[SolverResult | None] = [None] * len(positives)
    try:
        group = _Group(context, bias, int(params.distributed.nodes))
    except CallStopped:  # canceled while the nodes loaded the shards: no problem started
        return results
    try:
        for k, positive in enumerate(positives):
            result = _fit_problem(
                functools.partial(solve, n_features=n_features, params=params),
                lambda nodes, positive=float(positive): nodes.begin(positive),
                functools.partial(_starting_point, solver, bias=bias),
                params,
                context,
                group,
                k,
                on_point,
            )
            if result is None:  # stopped (canceled, or its deadline) while the nodes began it: never started
                break
            if result.stop_reason is StopReason.NODE_LOST and not regroup and len(positives) > 1:
                raise NodeLost(
                    f"a node was lost during binary problem {k + 1} of {len(positives)} (one-vs-rest, "
                    "on_node_lost stop): no model; the cluster's scheduler log says which node"
                )
            if result.stop_reason is StopReason.NODE_LOST and len(positives) > 1:
                raise NodeLost(
                    f"a node was lost during binary problem {k + 1} of {len(positives)} (one-vs-rest) and no node "
                    f"was left to regroup on (lost: {', '.join(group.lost)}): no model"
                )
            results[k] = result
            if on_problem_done is not None:
                on_problem_done(k)
            if on_subtask_done is not None and len(positives) > 1:
                on_subtask_done(k + 1, len(positives))
            if result.stop_reason in (StopReason.CANCELED, StopReason.DEADLINE, StopReason.NODE_LOST):
                break
    finally:
        group.close()
    return results


def fit_split_crammer_singer(
    params, labels: np.ndarray, n_features: int, context: FitContext, on_point
) -> SolverResult | None:
    """Crammer and Singer's one problem over every label (ocas's ``multiclass: crammer_singer``) with its rows split
    over the nodes (``worker.solvers.distributed_ocas_multiclass``), regrouped as a binary problem is; its result
    shaped as ``ocas_multiclass.solve_crammer_singer``'s; None when canceled while the nodes loaded the shards."""
    bias = 0.0 if params.bias is None else float(params.bias)
    try:
        group = _Group(context, bias, int(params.distributed.nodes))
    except CallStopped:
        return None
    n_classes = max(2, labels.size)
    try:
        result = _fit_problem(
            functools.partial(solve_crammer_singer_split, n_classes=n_classes, n_features=n_features, params=params),
            lambda nodes: nodes.begin_classes(labels),
            lambda result: {"w0": np.column_stack([result.w, result.extra["biases"]])},
            params,
            context,
            group,
            0,
            on_point,
        )
        assert result is not None  # its nodes are fresh: their first wait does not look at the job's stop
        return result
    finally:
        group.close()


def _fit_problem(solve, begin, starting_point, params, context, group, k, on_point) -> SolverResult | None:
    """Problem ``k`` over the group's nodes (``begin(nodes)`` starts it there, ``solve(nodes, control=, **start)``
    trains it), regrouped and continued after each node lost when ``on_node_lost`` is ``regroup`` (from
    ``starting_point(result)``, the arguments that start the solve where the lost attempt was); its result counts
    every attempt's iterations and seconds; None when the job was stopped while its nodes began it."""
    regroup = params.distributed.on_node_lost == NodeLoss.regroup
    started = time.perf_counter()
    offset = {"iteration": 0, "elapsed_s": 0.0}  # where the attempt's trace goes on from
    start: dict = {}
    result: SolverResult | None = None  # the attempts so far, added up

    def record(point: dict) -> None:
        on_point(k, {**point, **{key: point[key] + offset[key] for key in offset if key in point}})

    while True:
        try:
            begin(group.nodes)
        except CallStopped:  # a wait on nodes that served an earlier problem looks at the job's stop
            return result
        except NodeLost:
            if not (regroup and group.regroup(f"as problem {k + 1} began")):
                raise
            continue
        control = SolverControl(deadline=context.deadline, cancel_requested=context.cancel_requested, on_point=record)
        attempt = solve(group.nodes, control=control, **start)
        n_iter = attempt.n_iter + (result.n_iter if result else 0)
        lost = attempt.stop_reason is StopReason.NODE_LOST and regroup
        regrouped = lost and group.regroup(f"after iteration {n_iter} of problem {k + 1}")
        data = dict(attempt.extra.get("data") or {})
        if group.lost:
            data["nodes_lost"] = len(group.lost)
        result = replace(
            attempt,
            trace=(),
            n_iter=n_iter,
            solver_seconds=attempt.solver_seconds + (result.solver_seconds if result else 0.0),
            trace_seconds=attempt.trace_seconds + (result.trace_seconds if result else 0.0),
            extra={**attempt.extra, "data": data},
        )
        if not regrouped:  # done; or the best point so far, stopped by the job if it was, else by the node lost
            return replace(result, stop_reason=group.stopped or result.stop_reason) if lost else result
        offset = {"iteration": n_iter, "elapsed_s": time.perf_counter() - started}
        if attempt.n_iter > 0:  # ocas goes on from its best point (an iterate of the cutting planes is a model)
            start = starting_point(attempt)
