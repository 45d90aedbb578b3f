"""Progress people can read: fraction, eta and phase per solver; smo's primal while shrunk; a search's points."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.schemas.solver_params import SmoParams
from core.solvers import solver_params
from tests import naive
from tests.helpers import NullSink, a9a_stand_in, sparse_problem
from worker.runtime.progress import ProblemsEstimator, convergence_fraction
from worker.training.context import FitContext
from worker.training.fit import train_model

_csr = naive.csr_parts


def arrays_of(indptr, indices, data, y):
    return {"indptr": indptr, "indices": indices, "data": data, "y": y}


DCD_JSON = {
    "C": 1.0,
    "loss": "hinge",
    "bias": 1.0,
    "class_weight": None,
    "tol": 0.01,
    "max_iter": 1000,
    "shrinking": True,
    "trace_every": 1,
    "seed": 0,
    "max_seconds": None,
    "n_processes": 1,
}
DCD = solver_params("dcd", DCD_JSON)


def test_fraction_is_the_log_distance_from_the_first_measure_to_the_tolerance():
    first = {"max_violation": 10.0, "iteration": 1}
    assert convergence_fraction("dcd", DCD, first, None) == (1 / 1000, 10.0)  # 1 of max_iter 1000 iterations
    half, _ = convergence_fraction("dcd", DCD, {"max_violation": 10.0**0.5 * 0.1**0.5 * 1.0, "iteration": 2}, 10.0)
    # log(10 / 1) / log(10 / 0.01) = 1/3 at a violation of 1; sqrt(10 * 0.1) = 1 here
    assert half == pytest.approx(1.0 / 3.0)
    assert convergence_fraction("dcd", DCD, {"max_violation": 0.005, "iteration": 3}, 10.0)[0] == 1.0
    # iterations over max_iter are a floor
    assert (
        convergence_fraction(
            "dcd", solver_params("dcd", dict(DCD_JSON, max_iter=4)), {"max_violation": 10.0, "iteration": 3}, 10.0
        )[0]
        == 0.75
    )
    # ocas: the gap against tol_rel * primal
    ocas = solver_params("ocas", {"tol_rel": 0.01, "tol_abs": 0.0, "max_iter": 10**6})
    fraction, _ = convergence_fraction("ocas", ocas, {"primal": 100.0, "gap": 10.0, "iteration": 5}, 100.0)
    assert fraction == pytest.approx(math.log(10.0) / math.log(100.0))


def test_one_vs_rest_fraction_is_the_mean_over_classes():
    estimator = ProblemsEstimator("smo", solver_params("smo", {"tol": 0.001}), 4)
    estimator.observe(0, {"max_violation": 1.0})
    estimator.observe(0, {"max_violation": 0.0001})
    estimator.observe(1, {"max_violation": 1.0})
    estimator.observe(1, {"max_violation": 0.1})
    estimator.problem_done(2)
    assert estimator.fraction() == pytest.approx((1.0 + 1.0 / 3.0 + 1.0 + 0.0) / 4)


def test_training_publishes_phases_and_a_fraction_that_never_goes_back():
    indptr, indices, data, y = sparse_problem(3000, 40, 10, seed=3, noise=0.5)
    sink = NullSink()
    train_model("dcd", DCD, arrays_of(indptr, indices, data, y), 40, context=FitContext(sink))
    progress = sink.jobs.progress
    phases = [p["phase"] for p in progress]
    assert phases[0] == "training" and phases[-1] == "scoring training data"
    fractions = [p["fraction"] for p in progress]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and 0.0 <= fractions[0] < 1.0
    assert all(set(p) >= {"phase", "fraction", "eta_s", "primal", "dual", "gap", "iteration"} for p in progress)


def test_one_vs_rest_progress_counts_classes(monkeypatch):
    indptr, indices, data, y = sparse_problem(1500, 30, 8, seed=4, n_classes=3)
    sink = NullSink(subproblems=3)
    train_model("dcd", DCD, arrays_of(indptr, indices, data, y), 30, context=FitContext(sink, n_processes=1))
    assert {p["subproblem"] for p in sink.jobs.points} == {0, 1, 2}
    assert sink.jobs.progress[-1]["fraction"] == 1.0


def test_a_search_publishes_every_folds_points_and_its_phases():
    from worker.training.search import run_search

    indptr, indices, data, y = sparse_problem(600, 20, 6, seed=5, noise=0.3)
    params = dict(
        DCD_JSON,
        search={
            "C": [0.1, 1.0],
            "gamma": None,
            "cv_folds": 3,
            "metric": None,
            "seed": 0,
            "warm_start": True,
            "distribute": False,
        },
    )
    sink = NullSink()
    run_search(
        "dcd",
        solver_params("dcd", params),
        arrays_of(indptr, indices, data, y),
        20,
        context=FitContext(sink),
        publish=lambda table, subtasks: None,
    )
    search_points = [p for p in sink.jobs.points if p.get("stage") == "search"]
    assert {(p["fold"], p["C"]) for p in search_points} == {(f, C) for f in range(3) for C in (0.1, 1.0)}
    assert any(p.get("stage") == "refit" for p in sink.jobs.points)
    phases = [p["phase"] for p in sink.jobs.progress]
    assert phases.index("cross-validating") < phases.index("refitting the best setting")
    fractions = [p["fraction"] for p in sink.jobs.progress]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    # cross-validation takes 6 of 7 parts: 6 fits and the refit
    refit_start = next(p["fraction"] for p in sink.jobs.progress if p["phase"] == "refitting the best setting")
    assert refit_start == pytest.approx(6.0 / 7.0, abs=1e-3)


def test_smo_reports_the_exact_primal_while_shrunk(monkeypatch):
    """A point taken while shrunk has the primal that a full gradient rebuild gives at the same iterate."""
    from worker.solvers.common import SolverControl, StopReason
    from worker.solvers.smo import run as smo_run
    from worker.solvers.smo import solve as smo

    monkeypatch.setattr(smo_run, "PRIMAL_EVERY_S", 0.0)
    matrix, y = a9a_stand_in(3000, 0)
    indptr, indices, data = _csr(matrix)
    seen: dict = {}

    def watch(point: dict) -> None:
        if "shrunk" not in seen and point["active_size"] < y.size and point.get("primal") is not None:
            seen["shrunk"] = point

    control = SolverControl(cancel_requested=lambda: "shrunk" in seen, on_point=watch)
    result = smo.solve_smo(
        indptr,
        indices,
        data,
        y,
        n_features=123,
        params=SmoParams(C=1.0, kernel={"type": "rbf", "gamma": 0.0081}, trace_every=50),
        control=control,
    )
    assert result.stop_reason is StopReason.CANCELED
    point = seen["shrunk"]
    assert point["iteration"] == result.n_iter  # stopped right after that point: same iterate
    assert point["primal"] == pytest.approx(result.objective, rel=1e-9)
    # the trace's dual is the one smo tracks step by step; the result's is recomputed: equal up to rounding
    assert point["gap"] == pytest.approx(result.objective - result.extra["dual_objective"], abs=1e-8 * result.objective)
    assert np.isfinite(point["dual"]) and point["primal"] >= point["dual"]


def test_eta_is_published_only_once_it_is_stable(monkeypatch):
    """An ETA from the first second of a run can be off by a factor of 100 (issue 20: "20:37" for a 9 s job):
    none until the predicted end holds still, then the right one; the relative gap comes with every progress."""
    from worker.runtime import progress as progress_module

    clock = {"now": 1000.0}
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: clock["now"])
    sink = NullSink()
    sink.started = clock["now"]
    # a burst at the start (the first pass looks fast), then a steady 10% per second: 10 s in all
    fractions = [(0.2, 0.05), (0.4, 0.06), (0.6, 0.07), (1.0, 0.10)] + [
        (1.0 + 0.5 * i, 0.10 + 0.05 * i) for i in range(1, 12)
    ]
    etas = []
    for at, fraction in fractions:
        clock["now"] = 1000.0 + at
        etas.append((at, sink.eta_s(fraction)))
    assert all(eta is None for at, eta in etas if at <= 1.0), etas
    published = [(at, eta) for at, eta in etas if eta is not None]
    assert published, etas
    for at, eta in published:
        assert abs((at + eta) - 10.0) <= 2.5, (at, eta)  # the predicted end is about right when shown
    sink._latest = {"primal": 10.0, "gap": 0.5}
    assert sink.progress()["gap_rel"] == 0.05
    sink._latest = {"primal": 10.0, "gap": 0.5, "gap_rel": 0.04}
    assert sink.progress()["gap_rel"] == 0.04
