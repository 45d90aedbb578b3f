"""A node lost in a training split over nodes (issue 34, item 3), the driver's side without a cluster: with
``on_node_lost: regroup`` (the default) the rows are shared again over the nodes left and the training goes on to
the one-machine model; with ``stop``, or once no node is left, a two-label job keeps its best point so far and
one-vs-rest fails. The nodes are row parts in this process (``LocalNodes``); the real cluster's losses (a node
killed, a node hung) are in tests/test_split_training.py."""

from __future__ import annotations

import numpy as np
import pytest

from core.schemas.solver_params import CpaParams, OcasParams
from tests.test_out_of_core import random_csr
from tests.test_split_training import row_parts
from worker.runtime.cluster import ClusterError
from worker.solvers.common import StopReason
from worker.solvers.distributed_ocas import CallStopped, LocalNodes, NodeLost
from worker.training.context import FitContext
from worker.training.split import fit_split

pytestmark = pytest.mark.unit


class Nodes(LocalNodes):
    """Row parts of one data set at ``bounds``, the signs set by ``begin``; the node at ``lose`` (an index) stops
    answering at the ``lose_at``-th call."""

    def __init__(self, csr, bounds, lose_at: int | None = None, lose: int = 1) -> None:
        self.csr, self.bounds = csr, bounds
        self.lose_at, self.calls, self.lost, self.closed = lose_at, 0, None, False
        self.workers = [f"tcp://node-{i}" for i in range(len(bounds) - 1)]
        self.lose = lose
        super().__init__([], csr[1].size * 8)
        self.n_nodes = len(bounds) - 1

    def begin(self, positive: float) -> None:
        indptr, indices, data, y = self.csr
        signs = np.where(y == positive, 1.0, -1.0)
        self.parts = row_parts(indptr, indices, data, signs, indices.max() + 1, self.bounds)
        self.n_rows = sum(part.n for part in self.parts)

    def call_all(self, method: str, *args) -> list:
        self.calls += 1
        if self.lose_at is not None and self.calls >= self.lose_at:
            self.lost = self.workers[self.lose]
            raise NodeLost(f"{self.lost} stopped answering during {method}")
        return super().call_all(method, *args)

    def close(self) -> None:
        self.closed = True


class Cluster:
    """``FitContext.open_nodes``: the first group loses a node at its ``lose_at``-th call; the next groups (over
    the nodes not excluded) answer, unless ``none_left``."""

    def __init__(self, csr, n_nodes: int, lose_at: int, none_left: bool = False, load_s: int = 0) -> None:
        self.csr, self.n_nodes, self.lose_at, self.none_left = csr, n_nodes, lose_at, none_left
        self.load_s_left = load_s
        self.first_load_s_left = 0
        self.opened: list[tuple[list[str], Nodes]] = []

    def __call__(self, bias: float, exclude=(), stop=None) -> Nodes:
        if exclude and self.none_left:
            raise ClusterError("the job asks for 3 nodes and the cluster has 0 left (the others were lost)")
        while not self.opened and self.first_load_s_left > 0:  # the job's first load, its stop looked at
            if stop is not None and (reason := stop()) is not None:
                raise CallStopped(reason)
            self.first_load_s_left -= 1
        while exclude and self.load_s_left > 0:  # the nodes left loading the rows, the job's stop looked at
            if stop is not None and (reason := stop()) is not None:
                raise CallStopped(reason)
            self.load_s_left -= 1
        n = self.n_nodes - len(exclude)
        bounds = np.linspace(0, self.csr[0].size - 1, n + 1).astype(int)
        nodes = Nodes(self.csr, bounds, self.lose_at if not self.opened else None)
        self.opened.append((list(exclude), nodes))
        return nodes


def _three_labels(csr):
    """The rows' labels 0, 1, 2 (by the planted margin's sign and a second split)."""
    indptr, indices, data, y = csr
    labels = np.where(y > 0, 2.0, 0.0)
    labels[(np.arange(y.size) % 3 == 0) & (y < 0)] = 1.0
    return indptr, indices, data, labels


def _fit(solver, params, csr, cluster, cancel_requested=lambda: False):
    points: list[tuple[int, dict]] = []
    labels = np.unique(csr[3])
    results = fit_split(
        solver,
        params,
        labels,
        int(csr[1].max()) + 1,
        FitContext(open_nodes=cluster, cancel_requested=cancel_requested),
        on_point=lambda k, point: points.append((k, point)),
    )
    return results, points


def _alone(solver, params, csr):
    """The same training on one node that loses nothing."""
    return _fit(solver, params, csr, Cluster(csr, 1, lose_at=10**9))[0]


@pytest.mark.parametrize("solver", ["ocas", "cpa"])
def test_a_lost_node_regroups_and_the_training_ends_at_the_one_machine_model(solver):
    csr = random_csr(3000, 120, 15, seed=21)
    schema = OcasParams if solver == "ocas" else CpaParams
    params = schema(C=1.0, tol_rel=1e-6, distributed={"nodes": 3})
    assert params.distributed.on_node_lost.value == "regroup"  # the default
    cluster = Cluster(csr, 3, lose_at=14)
    [result], points = _fit(solver, params, csr, cluster)
    [alone] = _alone(solver, params, csr)
    assert result.stop_reason is StopReason.CONVERGED and result.converged
    assert abs(result.objective - alone.objective) <= 2e-6 * alone.objective
    # the lost node was excluded from the new group, over the two left, and the first group released
    assert [excluded for excluded, _ in cluster.opened] == [[], ["tcp://node-1"]]
    assert cluster.opened[0][1].closed and cluster.opened[1][1].n_nodes == 2
    assert result.extra["data"] == {"form": "split", "nodes": 2, "nodes_lost": 1}
    # one trace over both groups: iterations and seconds go on from where the lost group stopped
    iterations = [point["iteration"] for _, point in points]
    assert iterations == list(range(1, result.n_iter + 1)), iterations
    elapsed = [point["elapsed_s"] for _, point in points]
    assert elapsed == sorted(elapsed)
    if solver == "ocas":  # it went on from its best point: the best objective never rose at the regroup
        primal = [point["primal"] for _, point in points]
        assert all(b <= a * (1 + 1e-12) for a, b in zip(primal, primal[1:])), primal  # F(w0) recomputed: rounding


def test_one_vs_rest_loses_a_node_and_every_label_gets_its_model():
    csr = _three_labels(random_csr(3000, 120, 15, seed=22))
    params = OcasParams(C=1.0, tol_rel=1e-5, distributed={"nodes": 3})
    n_calls_first_problem = 60  # past the first problem's calls: the loss falls in a later problem
    cluster = Cluster(csr, 3, lose_at=n_calls_first_problem)
    results, points = _fit("ocas", params, csr, cluster)
    alone = _alone("ocas", params, csr)
    assert len(results) == 3 and all(r is not None and r.converged for r in results)
    for r, a in zip(results, alone, strict=True):
        assert r is not None and a is not None
        assert abs(r.objective - a.objective) <= 1e-5 * a.objective
    assert len(cluster.opened) == 2 and results[-1].extra["data"]["nodes_lost"] == 1
    for k in range(3):  # each problem's trace counts on from its own start
        iterations = [point["iteration"] for j, point in points if j == k]
        assert iterations == list(range(1, len(iterations) + 1))


def test_no_node_left_keeps_the_best_point_or_fails_one_vs_rest():
    csr = random_csr(3000, 120, 15, seed=23)
    params = OcasParams(C=1.0, tol_rel=1e-6, distributed={"nodes": 3})
    [result], _ = _fit("ocas", params, csr, Cluster(csr, 3, lose_at=14, none_left=True))
    assert result.stop_reason is StopReason.NODE_LOST and not result.converged and result.n_iter >= 2
    assert 0 < result.extra["gap_rel"] < 1 and result.extra["data"]["nodes_lost"] == 1
    three = _three_labels(csr)
    with pytest.raises(NodeLost, match="no node was left"):
        _fit("ocas", params, three, Cluster(three, 3, lose_at=14, none_left=True))


def test_on_node_lost_stop_ends_with_the_best_point():
    csr = random_csr(3000, 120, 15, seed=24)
    params = OcasParams(C=1.0, tol_rel=1e-6, distributed={"nodes": 3, "on_node_lost": "stop"})
    cluster = Cluster(csr, 3, lose_at=14)
    [result], _ = _fit("ocas", params, csr, cluster)
    assert result.stop_reason is StopReason.NODE_LOST and len(cluster.opened) == 1
    assert "nodes_lost" not in result.extra["data"]
    three = _three_labels(csr)
    with pytest.raises(NodeLost, match="on_node_lost stop"):
        _fit("ocas", params, three, Cluster(three, 3, lose_at=14))


def test_a_cancel_while_the_nodes_left_load_the_rows_ends_with_the_best_point():
    """A regroup's load is waited for in slices, the job's stop looked at between them: a cancel then ends the job
    with the best point so far (stop reason ``canceled``), not after the load."""
    csr = random_csr(3000, 120, 15, seed=25)
    params = OcasParams(C=1.0, tol_rel=1e-6, distributed={"nodes": 3})
    cluster = Cluster(csr, 3, lose_at=14, load_s=10**6)
    asked = []
    [result], _ = _fit("ocas", params, csr, cluster, cancel_requested=lambda: bool(asked.append(1)) or len(asked) > 20)
    assert result.stop_reason is StopReason.CANCELED and not result.converged and result.n_iter >= 2
    assert cluster.load_s_left > 10**6 - 100 and result.extra["data"]["nodes_lost"] == 1
    assert 0 < result.extra["gap_rel"] < 1


def test_the_nodes_load_is_waited_for_in_slices_that_look_at_the_stop(monkeypatch):
    """``DaskNodes._placed``: an actor's future waited for WAIT_SLICE_S at a time; a stop reason between two slices
    raises ``CallStopped``."""
    from worker.runtime import cluster as cluster_module

    class Pending:
        waits = 0

        def result(self, timeout=None):
            self.waits += 1
            raise TimeoutError

    nodes = object.__new__(cluster_module.DaskNodes)
    stops = iter([None, None, StopReason.DEADLINE])
    nodes.stop = lambda: next(stops)
    future = Pending()
    with pytest.raises(CallStopped) as stopped:
        nodes._placed(future)
    assert stopped.value.reason is StopReason.DEADLINE and future.waits == 3


def test_a_stop_seen_while_the_nodes_begin_a_later_problem_leaves_it_unstarted():
    """The nodes' wait looks at the job's stop (the previous problem's control): a cancel seen while they begin the
    second label's problem leaves it and the third unstarted (None: the job then stores no model and says so)."""
    csr = _three_labels(random_csr(2000, 80, 10, seed=26))
    params = OcasParams(C=1.0, tol_rel=1e-3, distributed={"nodes": 2})

    class StoppedAtBegin(Nodes):
        begun = 0

        def begin(self, positive: float) -> None:
            StoppedAtBegin.begun += 1
            if StoppedAtBegin.begun == 2:
                raise CallStopped(StopReason.CANCELED)
            super().begin(positive)

    class Opens(Cluster):
        def __call__(self, bias: float, exclude=(), stop=None) -> Nodes:
            nodes = StoppedAtBegin(self.csr, np.linspace(0, self.csr[0].size - 1, 3).astype(int))
            self.opened.append((list(exclude), nodes))
            return nodes

    results, _ = _fit("ocas", params, csr, Opens(csr, 2, lose_at=10**9))
    assert results[0] is not None and results[0].converged and results[1:] == [None, None]


def test_a_cancel_during_the_first_load_starts_nothing():
    """The job's first load of the shards looks at a cancel too: one-vs-rest's problems and Crammer-Singer's one
    come back unstarted (None: the job says it was canceled with no model), without waiting for the load."""
    from worker.training.split import fit_split_crammer_singer

    csr = _three_labels(random_csr(2000, 80, 10, seed=27))
    cluster = Cluster(csr, 2, lose_at=10**9)
    cluster.first_load_s_left = 10**6
    asked = []
    canceled = lambda: bool(asked.append(1)) or len(asked) > 5  # noqa: E731
    results, _ = _fit("ocas", OcasParams(distributed={"nodes": 2}), csr, cluster, cancel_requested=canceled)
    assert results == [None, None, None] and cluster.first_load_s_left > 10**6 - 100 and not cluster.opened
    cluster.first_load_s_left, asked[:] = 10**6, []
    params = OcasParams(multiclass="crammer_singer", distributed={"nodes": 2})
    context = FitContext(open_nodes=cluster, cancel_requested=canceled)
    assert fit_split_crammer_singer(params, np.unique(csr[3]), 80, context, lambda k, p: None) is None


@pytest.mark.parametrize(
    ("exc", "gone"),
    [
        (OSError("Unable to contact Actor's worker"), True),
        (TimeoutError("timed out"), True),
        (RuntimeError("Worker holding Actor was lost.  Status: lost"), True),
        (RuntimeError("begin() first"), False),
        (ValueError("shapes (3,) and (4,) not aligned"), False),
        (MemoryError(), False),
    ],
)
def test_a_node_is_gone_when_its_call_fails_in_the_network_not_in_its_own_code(exc, gone):
    """What counts as a lost node (regrouped) and what as the node's own exception (the job fails with it)."""
    from distributed.comm.core import CommClosedError
    from distributed.scheduler import KilledWorker

    from worker.runtime.cluster import is_node_gone

    assert is_node_gone(exc) is gone
    assert is_node_gone(CommClosedError("in <TCP ...>: Stream is closed")) and is_node_gone(KilledWorker("k", None, 3))
