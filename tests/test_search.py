"""Model selection: folds, the same table with 1 and 2 processes, warm starts, and the search over HTTP."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from core.solvers import solver_params
from core.storage.documents import ModelDescription
from tests.helpers import NullSink, cancer_arrays
from worker.training.context import FitContext
from worker.training.folds import make_folds
from worker.training.search import run_search


def test_folds_are_stratified_and_keep_queries_whole():
    y = np.array([1.0] * 30 + [-1.0] * 70)
    folds = make_folds(y, None, 5, seed=3)
    for fold in range(5):
        assert (y[folds == fold] == 1).sum() == 6 and (y[folds == fold] == -1).sum() == 14
    qid = np.repeat(np.arange(20), 5)
    grouped = make_folds(np.zeros(100), qid, 4, seed=1)
    for q in range(20):
        assert np.unique(grouped[qid == q]).size == 1
    assert np.array_equal(make_folds(y, None, 5, seed=3), folds)


def search_table(processes: int, warm: bool = True) -> ModelDescription:
    arrays, n_features = cancer_arrays()
    params = {
        "C": 1.0,
        "loss": "hinge",
        "bias": 1.0,
        "class_weight": None,
        "tol": 0.1,
        "max_iter": 1000,
        "shrinking": True,
        "trace_every": 1,
        "seed": 0,
        "max_seconds": None,
        "n_processes": processes,
        "search": {
            "C": [0.001, 0.01, 0.1, 1.0, 10.0, 100.0],
            "gamma": None,
            "cv_folds": 5,
            "metric": "accuracy",
            "seed": 7,
            "warm_start": warm,
            "distribute": False,
        },
    }
    tables = []
    outcome = run_search(
        "dcd",
        solver_params("dcd", params),
        arrays,
        n_features,
        context=FitContext(NullSink()),
        publish=lambda table, subtasks: tables.append((table, subtasks)),
    )
    assert tables[-1][1]["done"] == tables[-1][1]["total"]
    return outcome.model


def strip_timing(table: dict) -> list:
    return [{k: v for k, v in row.items() if k != "seconds"} for row in table["settings"]]


def test_same_table_with_one_and_two_processes():
    one = search_table(1)
    two = search_table(2)
    assert strip_timing(one.search_results) == strip_timing(two.search_results)
    assert one.search_results["best"] == two.search_results["best"]
    assert len(one.search_results["settings"]) == 6
    assert all(row["folds_done"] == 5 and len(row["fold_scores"]) == 5 for row in one.search_results["settings"])
    best = one.search_results["best"]
    assert best["mean"] == max(row["mean"] for row in one.search_results["settings"])
    assert one.refit_params["C"] == best["C"] and one.objectives


@pytest.mark.parametrize(
    "solver,params", [("dcd", {"tol": 0.1, "trace_every": 1000}), ("ocas", {"tol_rel": 1e-3, "n_processes": 1})]
)
def test_warm_start_saves_iterations_along_c(solver, params):
    from worker.solvers.common import SolverControl
    from worker.training import registry

    arrays, n_features = cancer_arrays()
    fit = registry.adapter(solver)
    totals = {}
    for mode in ("cold", "warm"):
        previous, previous_C, total = None, None, 0
        for C in [0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0]:
            setting = solver_params(solver, dict(params, C=C))
            start = registry.warm_start_arguments(solver, previous, setting, previous_C) if mode == "warm" else {}
            result = fit(
                arrays["indptr"],
                arrays["indices"],
                arrays["data"],
                arrays["y"],
                n_features=n_features,
                params=setting,
                class_weight=(1.0, 1.0),
                control=SolverControl(),
                **start,
            )
            total += result.n_iter
            previous, previous_C = result, C
        totals[mode] = total
    assert totals["warm"] < 0.9 * totals["cold"], totals


def test_search_reports_warm_started_fits():
    warm = search_table(1, warm=True).search_results
    cold = search_table(1, warm=False).search_results
    assert warm["warm_start"] is True and cold["warm_start"] is False
    # every fold walks the whole C path: all fits but the smallest C's start warm
    assert [row["warm_started_fits"] for row in warm["settings"]] == [0] + [5] * 5
    assert sum(row["warm_started_fits"] for row in cold["settings"]) == 0
    for row in warm["settings"] + cold["settings"]:
        assert sum(row["stop_reasons"].values()) == 5
        expected = "max_iter" if "max_iter" in row["stop_reasons"] else "converged"
        assert row["stop_reason"] == expected and set(row["stop_reasons"]) <= {"converged", "max_iter"}
        assert row["iterations_saved"] is None and "not measured" in row["iterations_saved_basis"]
    assert warm["settings"][-1]["stop_reason"] == "max_iter", "C = 100 on this data needs more than 1000 passes"


def test_paths_split_into_fits_give_the_same_table(monkeypatch):
    """Few paths for the processes: every fit becomes a task and the warm start travels with it."""
    import worker.training.search.cross_validation as search_module

    whole = search_table(2).search_results
    made = []

    class Rows(search_module.SharedRows):
        def __init__(self, n_rows, n_columns):
            super().__init__(n_rows, n_columns)
            made.append(self)

    monkeypatch.setattr(search_module, "PATHS_PER_PROCESS", 100)
    monkeypatch.setattr(search_module, "SharedRows", Rows)
    split = search_table(2).search_results
    assert strip_timing(whole) == strip_timing(split)
    assert [row["warm_started_fits"] for row in split["settings"]] == [0] + [5] * 5
    assert len(made) == 1 and (made[0].lengths > 0).all(), "every path's warm start went through the shared rows"


def test_a_two_label_fit_brings_its_score_not_its_decisions():
    """A cell of one binary problem is scored where its fit ran: the record holds the score the parent would
    have computed from the held-out decision values, and no decision values travel back."""
    from worker.training.folds import held_out_decisions
    from worker.training.search import Search
    from worker.training.search.fits import FitPath, FoldCache

    arrays, n_features = cancer_arrays()
    params = solver_params("dcd", {"C": 1.0, "search": {"C": [0.1, 1.0], "cv_folds": 3, "seed": 7}})
    search = Search("dcd", params, arrays, n_features)
    cache = FoldCache(arrays, n_features, search.folds, search.task)
    path = FitPath(1, 0, None, 0, search.Cs, True)
    records, state = search.fit_segment(path, 0, 1, None, cache, deadline=None, cancel_requested=lambda: False)
    (record,) = records
    assert record.decisions is None and record.score is not None
    fold = cache.get(1)
    decisions = held_out_decisions(state[1], fold["train"], fold["held_matrix"], None, n_features)
    assert record.score == search.score_cell(1, decisions[:, None], None)
    assert search.cell_row(1, None, {0: record})["score"] == record.score


def test_a_warm_state_in_shared_rows_comes_back_as_it_was():
    from worker.runtime.subtasks import SharedRows
    from worker.solvers.common import SolverResult, StopReason
    from worker.training.search.fits import WARM_ROW, restored, warm_state

    alpha = np.linspace(0.0, 1.0, 7)
    result = SolverResult(
        w=np.ones(3),
        bias=0.5,
        n_iter=4,
        converged=True,
        stop_reason=StopReason.CONVERGED,
        objective=1.0,
        solver_seconds=0.1,
        extra={"alpha": alpha},
    )
    rows = SharedRows(2, 10)
    state = warm_state(result, rows, 1)
    assert state.extra == {WARM_ROW: 1}, "only the row's number travels"
    np.testing.assert_array_equal(restored(state, rows).extra["alpha"], alpha)
    assert warm_state(result).extra["alpha"] is alpha, "without rows the state carries its variables"


def test_measured_cold_fits_show_the_iterations_saved():
    arrays, n_features = cancer_arrays()
    params = {
        "C": 1.0,
        "loss": "hinge",
        "bias": 1.0,
        "class_weight": None,
        "tol": 0.01,
        "max_iter": 1000,
        "shrinking": True,
        "trace_every": 1000,
        "seed": 0,
        "max_seconds": None,
        "n_processes": 2,
        "search": {
            "C": [0.01, 0.1, 1.0, 10.0, 100.0],
            "cv_folds": 3,
            "seed": 1,
            "warm_start": True,
            "measure_cold": True,
        },
    }
    outcome = run_search(
        "dcd",
        solver_params("dcd", params),
        arrays,
        n_features,
        context=FitContext(NullSink()),
        publish=lambda table, subtasks: None,
    )
    settings = outcome.model.search_results["settings"]
    assert settings[0]["iterations_saved"] == 0, "the first C of a path is a cold fit"
    assert all(
        row["cold_n_iter"] is not None and row["iterations_saved_basis"].startswith("measured") for row in settings
    )
    assert sum(row["iterations_saved"] for row in settings) > 0, settings


def test_max_iter_shows_in_the_table():
    arrays, n_features = cancer_arrays()
    params = {
        "C": 1.0,
        "loss": "hinge",
        "bias": 1.0,
        "class_weight": None,
        "tol": 1e-6,
        "max_iter": 3,
        "shrinking": True,
        "trace_every": 1000,
        "seed": 0,
        "max_seconds": None,
        "n_processes": 1,
        "search": {"C": [0.001, 100.0], "cv_folds": 3, "seed": 1},
    }
    outcome = run_search(
        "dcd",
        solver_params("dcd", params),
        arrays,
        n_features,
        context=FitContext(NullSink()),
        publish=lambda table, subtasks: None,
    )
    big = outcome.model.search_results["settings"][1]
    assert big["stop_reason"] == "max_iter" and big["stop_reasons"].get("max_iter", 0) >= 1


def multiclass_arrays():
    from tests.helpers import sparse_problem

    indptr, indices, data, y = sparse_problem(600, 40, 8, seed=5, noise=0.5, n_classes=4)
    return {"indptr": indptr, "indices": indices, "data": data, "y": y}, 40


@pytest.mark.parametrize(
    "solver,extra",
    [
        ("dcd", {"loss": "hinge", "bias": 1.0, "tol": 0.1, "max_iter": 1000, "shrinking": True, "trace_every": 1000}),
        (
            "smo",
            {
                "kernel": {"type": "rbf", "gamma": 0.05},
                "working_set": "second_order",
                "tol": 1e-3,
                "cache_mb": 10,
                "shrinking": True,
                "max_iter": None,
                "trace_every": 1000,
            },
        ),
        (
            "smo",
            {
                "kernel": {"type": "rbf", "gamma": 0.05},
                "working_set": "second_order",
                "tol": 1e-3,
                "cache_mb": 10,
                "shrinking": True,
                "max_iter": None,
                "trace_every": 1000,
                "multiclass": "ovo",
            },
        ),
    ],
    ids=["dcd-ovr", "smo-ovr", "smo-ovo"],
)
def test_multiclass_cells_score_like_the_stored_model(solver, extra):
    """Per-class (one-vs-rest) or per-pair (one-vs-one) fits give, per fold, the score a model assembled from
    the same fits would get (one-vs-one: the vote)."""
    from core.scoring.models import Scorer
    from worker.training.assemble import assemble_model
    from worker.training.fit import fit_problems
    from worker.training.folds import subset
    from worker.training.search import Search

    arrays, n_features = multiclass_arrays()
    params = dict(
        extra,
        C=1.0,
        class_weight=None,
        seed=0,
        max_seconds=None,
        n_processes=2,
        search={"C": [0.1, 1.0], "cv_folds": 3, "seed": 2, "warm_start": False},
    )
    one = run_search(
        solver,
        solver_params(solver, dict(params, n_processes=1)),
        arrays,
        n_features,
        context=FitContext(NullSink()),
        publish=lambda table, subtasks: None,
    )
    two = run_search(
        solver,
        solver_params(solver, params),
        arrays,
        n_features,
        context=FitContext(NullSink()),
        publish=lambda table, subtasks: None,
    )
    assert strip_timing(one.model.search_results) == strip_timing(two.model.search_results)
    search = Search(solver, solver_params(solver, params), arrays, n_features)
    for row in one.model.search_results["settings"]:
        for fold in range(3):
            train = subset(arrays, np.flatnonzero(search.folds != fold), n_features)
            held = subset(arrays, np.flatnonzero(search.folds == fold), n_features)
            setting = search.setting(row["C"], None)
            labels, results = fit_problems(solver, setting, train, n_features, FitContext(), on_point=lambda k, p: None)
            model_arrays, meta = assemble_model(
                solver, setting, results, labels, train, n_features, with_accuracy=False
            )
            matrix = sp.csr_matrix((held["data"], held["indices"], held["indptr"]), shape=(held["y"].size, n_features))
            predicted, _ = Scorer(meta, model_arrays).predict_values(matrix)
            assert row["fold_scores"][fold] == pytest.approx(float(np.mean(predicted == held["y"])), abs=1e-12)


@pytest.mark.parametrize("grid", [[0.001, 0.01, 0.1, 1.0], [1e-5, 1e-4]])
def test_the_refit_path_runs_with_the_search_and_gives_the_same_model(monkeypatch, grid):
    """With few paths the refit's path on all the data runs as tasks among the folds' fits: same model as
    walking it after the search (the same warm chain), with 1 or 2 processes. Its fit at the largest C
    runs with the others unless the scores so far rule that C out; ruled out, it waits until that C is
    known to win (second grid: it wins; first: it does not, and never runs)."""
    import worker.training.search.cross_validation as search_module

    arrays, n_features = cancer_arrays()
    params = {
        "C": 1.0,
        "loss": "hinge",
        "bias": 1.0,
        "class_weight": None,
        "tol": 0.1,
        "max_iter": 1000,
        "shrinking": True,
        "trace_every": 1,
        "seed": 0,
        "max_seconds": None,
        "search": {"C": grid, "cv_folds": 3, "seed": 7, "warm_start": True},
    }

    def run(processes):
        sink = NullSink()
        outcome = run_search(
            "dcd",
            solver_params("dcd", dict(params, n_processes=processes)),
            arrays,
            n_features,
            context=FitContext(sink),
            publish=lambda table, subtasks: None,
        )
        return outcome, sink

    monkeypatch.setattr(search_module, "PATHS_PER_PROCESS", 1)
    after, _ = run(1)  # a path is a task: the refit walks its path after the search
    assert "ran_with_search" not in after.model.refit_path
    monkeypatch.setattr(search_module, "PATHS_PER_PROCESS", 100)
    monkeypatch.setattr(search_module, "largest_c_ruled_out", lambda rows, cv_folds: True)
    for processes in (1, 2):
        outcome, sink = run(processes)
        assert outcome.model.refit_path["ran_with_search"] is True
        assert outcome.model.refit_path["C"] == after.model.refit_path["C"]
        assert outcome.model.refit_path["n_iter"] == after.model.refit_path["n_iter"]
        np.testing.assert_array_equal(outcome.arrays["weights"], after.arrays["weights"])
        assert strip_timing(outcome.model.search_results) == strip_timing(after.model.search_results)
        assert any(p.get("stage") == "refit" for p in sink.jobs.points)
        # the best C is 0.1 (first grid) and 1e-4, the largest (second): the refit's fit at the largest C
        # ran only in the second, once the search had scored it
        assert outcome.model.refit_path["C"] == ([0.001, 0.01, 0.1] if len(grid) == 4 else grid)
        assert outcome.model.refit_path["fits_beyond_best"] == 0, "walked only up to the best C"
    # not ruled out: with 2 processes the fit at the largest C may run with the search (speculatively in the first
    # grid, where it loses: whether it starts before the search's scores are in depends on the two processes'
    # timing, and a loaded machine's CI once had the scores first), the model stays the same
    monkeypatch.setattr(search_module, "largest_c_ruled_out", lambda rows, cv_folds: False)
    outcome, _ = run(2)
    assert outcome.model.refit_path["fits_beyond_best"] in ((0, 1) if len(grid) == 4 else (0,))
    np.testing.assert_array_equal(outcome.arrays["weights"], after.arrays["weights"])


def _rows(scores_by_C: dict) -> list[dict]:
    return [{"C": C, "fold": f, "score": s} for C, scores in scores_by_C.items() for f, s in enumerate(scores)]


def test_the_largest_c_is_ruled_out_only_when_the_scores_clearly_fall():
    """The refit's fit at the grid's largest C runs early unless the scored settings rule that C out: its
    predecessor trailing the best by more than two standard errors of the paired fold differences."""
    from worker.training.search import largest_c_ruled_out

    rising = {0.1: [0.80, 0.82, 0.81], 1.0: [0.84, 0.85, 0.83]}
    assert not largest_c_ruled_out(_rows(rising), 3), "the largest scored C is the best: still rising"
    flat = {0.1: [0.847, 0.859, 0.849], 1.0: [0.846, 0.860, 0.848]}
    assert not largest_c_ruled_out(_rows(flat), 3), "behind by less than its noise"
    falling = {0.1: [0.90, 0.91, 0.92], 1.0: [0.85, 0.86, 0.86]}
    assert largest_c_ruled_out(_rows(falling), 3), "clearly past the peak"
    partial = {0.1: [0.90, 0.91, 0.92], 1.0: [0.85, 0.86]}
    assert not largest_c_ruled_out(_rows(partial), 3), "a setting not scored on every fold does not count"
    assert not largest_c_ruled_out(_rows({0.1: [0.9, 0.9, 0.9]}), 3), "one setting: nothing to compare"
    nan = {0.1: [0.90, 0.91, 0.92], 1.0: [0.85, float("nan"), 0.86]}
    assert not largest_c_ruled_out(_rows(nan), 3)


@pytest.mark.parametrize("multiclass", ["ovo", "ovr"])
def test_smo_paths_warm_start_along_c_and_refit_at_the_best_c_alone(multiclass):
    """smo's paths warm-start each C from the previous one (the table is the same on one and two processes, every
    fit but a path's first warm); the refit is one fit at the best C, the model a plain training there gives."""
    from worker.training.fit import train_model

    arrays, n_features = multiclass_arrays()
    params = dict(
        kernel={"type": "rbf", "gamma": 0.05},
        C=1.0,
        multiclass=multiclass,
        n_processes=2,
        search={"C": [0.1, 1.0, 10.0], "cv_folds": 3, "seed": 2},
    )
    outcomes = [
        run_search(
            "smo",
            solver_params("smo", dict(params, n_processes=processes)),
            arrays,
            n_features,
            context=FitContext(NullSink()),
            publish=lambda table, subtasks: None,
        )
        for processes in (1, 2)
    ]
    one, two = (outcome.model.search_results for outcome in outcomes)
    assert strip_timing(one) == strip_timing(two)
    assert [row["warm_started_fits"] for row in one["settings"]] == [0, 3, 3]  # a fold's cell at C > 0.1
    best = one["best"]
    assert outcomes[0].model.refit_path["C"] == [best["C"]]
    plain = train_model(
        "smo",
        solver_params("smo", dict(params, C=best["C"], search=None, n_processes=1)),
        arrays,
        n_features,
        context=FitContext(NullSink()),
    )
    for outcome in outcomes:
        assert outcome.model.n_support_per_problem == plain.model.n_support_per_problem
        assert outcome.model.objectives == pytest.approx(plain.model.objectives, rel=1e-9)
        np.testing.assert_allclose(outcome.arrays["coef"], plain.arrays["coef"], rtol=1e-9, atol=1e-12)
