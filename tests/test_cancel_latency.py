"""Every solver looks at the cancel flag and the deadline often enough to stop within a second (issue 9).

No timing here (tests never assert on time): each test checks *where* a solver looks. dcd cuts a long
epoch into slices and looks between them (inside one epoch, and the slices change nothing in the
result); ocas and cpa look between the passes of an iteration; smo and sampled_cuts between slices of
their kernels. The latencies themselves are measured by tests/benchmarks/bench_cancel.py
(figures in tests/README.md).
"""

from __future__ import annotations

import numpy as np
import pytest

from core.schemas.solver_params import CpaParams, DcdParams, OcasParams, SampledCutsParams, SmoParams
from tests.helpers import sparse_problem
from worker.solvers import dcd as dcd_module
from worker.solvers.common import SolverControl, StopReason, monotonic_s


class CancelOnCall:
    """A cancel flag that turns true on its n-th look (and counts the looks)."""

    def __init__(self, n: int):
        self.n = n
        self.looks = 0

    def __call__(self) -> bool:
        self.looks += 1
        return self.looks >= self.n


@pytest.fixture(scope="module")
def problem():
    indptr, indices, data, y = sparse_problem(5000, 50, 8, seed=3, random_labels=True)
    return indptr.astype(np.int64), indices.astype(np.int32), data.astype(np.float64), y


def test_the_kernel_clock_is_time_monotonic():
    import time

    before = time.monotonic()
    inside = monotonic_s()
    after = time.monotonic()
    assert before <= inside <= after


def test_dcd_slices_of_an_epoch_change_nothing(problem, monkeypatch):
    whole = dcd_module.solve_dcd(*problem, n_features=50, params=DcdParams(C=10.0, tol=1e-6, max_iter=30, seed=4))
    monkeypatch.setattr(dcd_module, "SLICE_SECONDS", 0.0)  # every 1024 rows: a slice
    sliced = dcd_module.solve_dcd(*problem, n_features=50, params=DcdParams(C=10.0, tol=1e-6, max_iter=30, seed=4))
    assert sliced.n_iter == whole.n_iter
    np.testing.assert_array_equal(sliced.w, whole.w)
    assert sliced.bias == whole.bias


def test_dcd_stops_inside_an_epoch(problem, monkeypatch):
    monkeypatch.setattr(dcd_module, "SLICE_SECONDS", 0.0)
    flag = CancelOnCall(1)
    stopped = dcd_module.solve_dcd(
        *problem,
        n_features=50,
        params=DcdParams(C=10.0, seed=4, shrinking=False),
        control=SolverControl(cancel_requested=flag),
    )
    one_epoch = dcd_module.solve_dcd(
        *problem, n_features=50, params=DcdParams(C=10.0, seed=4, shrinking=False, max_iter=1)
    )
    assert stopped.stop_reason is StopReason.CANCELED and stopped.n_iter == 1
    assert flag.looks == 1
    assert not np.array_equal(stopped.w, one_epoch.w), "the cancel was seen before the epoch ended"
    assert np.isfinite(stopped.objective)


def test_ocas_looks_between_the_passes_of_an_iteration(problem):
    from worker.solvers.ocas import solve_ocas

    flag = CancelOnCall(2)  # the second look is within the first iteration, before its cut pass
    result = solve_ocas(
        *problem,
        n_features=50,
        params=OcasParams(C=10.0, tol_rel=1e-12, max_iter=100),
        n_processes=1,
        control=SolverControl(cancel_requested=flag),
    )
    assert result.stop_reason is StopReason.CANCELED
    assert result.n_iter == 1 and flag.looks == 2
    assert np.isfinite(result.objective) and result.w is not None


def test_cpa_looks_before_the_cut_pass(problem):
    from worker.solvers.cpa import solve_cpa

    flag = CancelOnCall(1)
    result = solve_cpa(
        *problem,
        n_features=50,
        params=CpaParams(C=10.0, tol=1e-9, max_iter=100),
        control=SolverControl(cancel_requested=flag),
    )
    assert result.stop_reason is StopReason.CANCELED
    assert result.n_iter == 1 and result.extra["n_cuts"] == 0, "stopped before the cut of the first iteration"


@pytest.mark.parametrize("solver", ["smo", "sampled_cuts"])
def test_kernel_solvers_stop_at_their_first_look(problem, solver):
    from worker.solvers.sampled_cuts.solve import solve_sampled_cuts
    from worker.solvers.smo.solve import solve_smo

    flag = CancelOnCall(1)
    kernel = {"type": "rbf", "gamma": 0.1}
    control = SolverControl(cancel_requested=flag)
    if solver == "smo":
        result = solve_smo(*problem, n_features=50, params=SmoParams(C=10.0, kernel=kernel, tol=1e-9), control=control)
    else:
        result = solve_sampled_cuts(
            *problem, n_features=50, params=SampledCutsParams(C=10.0, kernel=kernel, tol=1e-9), control=control
        )
    assert result.stop_reason is StopReason.CANCELED and flag.looks == 1
    assert result.extra["support_indices"] is not None
