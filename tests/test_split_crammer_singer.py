"""Crammer-Singer ocas with its rows split over nodes (``worker.solvers.distributed_ocas_multiclass``), the nodes
in this process: the iterations, objective and certified gap of the one-machine solve (``ocas_multiclass``); the
same through a real 2-node cluster is in tests/test_split_training.py."""

from __future__ import annotations

import numpy as np
import pytest

from core.schemas.solver_params import OcasParams
from tests.helpers import sparse_problem
from worker.solvers import row_part
from worker.solvers.class_row_part import ClassRowPart
from worker.solvers.common import StopReason
from worker.solvers.distributed_ocas import LocalNodes, NodeLost
from worker.solvers.distributed_ocas_multiclass import solve_crammer_singer_split
from worker.solvers.ocas_multiclass import solve_crammer_singer

pytestmark = pytest.mark.unit


def class_parts(indptr, indices, data, classes, K: int, d: int, bounds, B: float = 1.0) -> list[ClassRowPart]:
    """The rows cut at ``bounds`` into a node's part each."""
    return [
        ClassRowPart(
            indptr[a : b + 1] - indptr[a],
            indices[indptr[a] : indptr[b]],
            data[indptr[a] : indptr[b]],
            classes[a:b],
            K,
            d,
            B,
        )  # fmt: skip
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]


def _problem(n: int, d: int, K: int, seed: int):
    indptr, indices, data, y = sparse_problem(n, d, 12, seed=seed, noise=0.5, n_classes=K)
    classes = np.searchsorted(np.unique(y), y)
    return indptr, indices, data, classes


@pytest.mark.parametrize(("n_nodes", "K"), [(1, 3), (3, 3), (2, 6)])
def test_split_crammer_singer_is_the_one_machine_solve(monkeypatch, n_nodes, K):
    """Breakpoints gathered only after a round of pivots (GATHER forced small): the same iterations, objective and
    gap as on one machine, up to the order in which the nodes' sums are added."""
    monkeypatch.setattr(row_part, "GATHER", 50)
    n, d = 3000, 150
    indptr, indices, data, classes = _problem(n, d, K, seed=K)
    params = OcasParams(C=1.0, tol_rel=1e-4, multiclass="crammer_singer")
    one = solve_crammer_singer(indptr, indices, data, classes, n_classes=K, n_features=d, params=params)
    bounds = np.linspace(0, n, n_nodes + 1).astype(int)
    nodes = LocalNodes(class_parts(indptr, indices, data, classes, K, d, bounds), indices.size * 12)
    split = solve_crammer_singer_split(nodes, n_classes=K, n_features=d, params=params)
    assert split.converged and split.stop_reason is StopReason.CONVERGED
    if n_nodes == 1:  # the same sums in the same order: the same iterates
        assert split.n_iter == one.n_iter and split.objective == one.objective
        assert np.array_equal(split.w, one.w) and np.array_equal(split.extra["biases"], one.extra["biases"])
    # the nodes' sums added in another order: the rounding can tip the path after many iterations (3 nodes, 3
    # classes: 300 against 304); both are certified within tol_rel of the optimum, so within it of each other
    assert abs(split.n_iter - one.n_iter) <= 0.05 * one.n_iter, (split.n_iter, one.n_iter)
    assert abs(split.objective - one.objective) <= 1e-4 * one.objective
    assert split.extra["gap_rel"] <= 1e-4 and split.extra["lower_bound"] <= one.objective
    assert split.extra["data"] == {"form": "split", "nodes": n_nodes}
    assert all("comm_s" in point for point in split.trace)


def test_split_crammer_singer_from_a_start_and_a_lost_node():
    """From ``w0`` (the weights and biases of another solve) it starts where they are; a node lost mid-training
    returns the best point so far with its certified gap."""
    n, d, K = 3000, 150, 4
    indptr, indices, data, classes = _problem(n, d, K, seed=9)
    params = OcasParams(C=1.0, tol_rel=1e-3, multiclass="crammer_singer")
    one = solve_crammer_singer(indptr, indices, data, classes, n_classes=K, n_features=d, params=params)
    bounds = [0, 1500, n]
    w0 = np.column_stack([one.w, one.extra["biases"]])
    again = solve_crammer_singer_split(
        LocalNodes(class_parts(indptr, indices, data, classes, K, d, bounds), 1),
        n_classes=K, n_features=d, params=params, w0=w0,
    )  # fmt: skip
    # its first point is the start's objective (certifying it still takes the cuts a lower bound needs)
    assert again.converged and again.trace[0]["primal"] <= one.objective * (1 + 1e-9)

    class Losing(LocalNodes):
        calls = 0

        def call_all(self, method, *args):
            self.calls += 1
            if self.calls >= 14:
                raise NodeLost(f"node 1 stopped answering during {method}")
            return super().call_all(method, *args)

    lost = solve_crammer_singer_split(
        Losing(class_parts(indptr, indices, data, classes, K, d, bounds), 1), n_classes=K, n_features=d, params=params
    )
    assert lost.stop_reason is StopReason.NODE_LOST and not lost.converged and lost.n_iter >= 2
    assert 0 < lost.extra["gap_rel"] < 1 and lost.objective >= one.objective
