"""A job's model trained with its rows split over the nodes of a Dask cluster (``params.distributed``).

The nodes load the data set's shards once (``worker.runtime.cluster``); the binary problems of one-vs-rest then
run one after another over the same nodes, each by the solver's ``split_solve`` (ocas:
``worker.solvers.distributed_ocas``, cpa: ``worker.solvers.distributed_cpa``) from this process, which holds the
cuts and the reduced problem. Deadline and cancel are the job's, checked by the driver
between the calls of every iteration (each call to the nodes is a fraction of an iteration): a stop reaches
every node at once, since nothing runs on them between calls. A node lost: a two-label model ends with the best
point so far (stop reason ``node_lost``); one-vs-rest, whose other problems would have no model, fails the job
(`node_lost`).
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import replace

import numpy as np

from core.solvers import spec_of
from worker.solvers.common import SolverControl, SolverResult, StopReason
from worker.solvers.distributed_ocas import NodeLost
from worker.training.context import FitContext


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
    assert context.open_nodes is not None
    module, name = str(spec_of(solver).split_solve).split(":")
    solve = getattr(importlib.import_module(module), name)
    bias = 0.0 if params.bias is None else float(params.bias)
    positives = [labels[1]] if labels.size == 2 else list(labels)
    results: list[SolverResult | None] = [None] * len(positives)
    with context.open_nodes(bias) as nodes:
        for k, positive in enumerate(positives):
            nodes.begin(float(positive))
            control = SolverControl(
                deadline=context.deadline,
                cancel_requested=context.cancel_requested,
                on_point=functools.partial(on_point, k),
            )
            result = solve(nodes, n_features=n_features, params=params, control=control)
            results[k] = replace(result, trace=())
            if on_problem_done is not None:
                on_problem_done(k)
            if on_subtask_done is not None and len(positives) > 1:
                on_subtask_done(k + 1, len(positives))
            if result.stop_reason is StopReason.NODE_LOST and len(positives) > 1:
                raise NodeLost(
                    f"a node was lost during binary problem {k + 1} of {len(positives)} (one-vs-rest): no model; "
                    "the cluster's scheduler log says which node"
                )
            if result.stop_reason in (StopReason.CANCELED, StopReason.DEADLINE, StopReason.NODE_LOST):
                break
    return results
