"""Honest stopping (issue 20, item 4): a tolerance the user named rules, every model says which rule stopped it,
a canceled multi-class job says why it has no model."""

from __future__ import annotations

import numpy as np
import pytest

from core.solvers import solver_params
from tests.helpers import NullSink, sparse_problem
from worker.training.context import FitContext
from worker.training.fit import train_model


def arrays(n=400, d=30, seed=3, classes=2):
    indptr, indices, data, y = sparse_problem(n, d, 6, seed=seed, n_classes=classes)
    return {"indptr": indptr, "indices": indices, "data": data, "y": y.astype(np.float64)}, d


def train(solver, params, problem):
    data, d = problem
    return train_model(solver, solver_params(solver, params), data, d, context=FitContext(NullSink()))


@pytest.mark.parametrize(
    ("solver", "named", "off"),
    [("dcd", {"tol": 0.5}, None), ("cpa", {"tol": 1e-4}, None), ("smo", {"tol": 0.01}, None)],
)
def test_a_named_tol_rules_unless_tol_rel_is_named_too(solver, named, off):
    assert solver_params(solver, named).tol_rel == off
    assert solver_params(solver, {}).tol_rel == 0.01, "the default keeps the certified gap"
    both = solver_params(solver, dict(named, tol_rel=0.05))
    assert both.tol_rel == 0.05, "both named: both rule"
    stored = both.model_dump(mode="json")
    assert solver_params(solver, solver_params(solver, named).model_dump(mode="json")).tol_rel == off, (
        "the stored form (defaults filled in) reads back the same in the worker"
    )
    assert solver_params(solver, stored).tol_rel == 0.05


def test_cpa_with_a_named_tol_is_not_cut_short_by_the_default_tol_rel():
    """The issue's case: cpa given tol stopped on the default tol_rel first, far above where tol would go."""
    problem = arrays()
    default = train("cpa", {"C": 10.0}, problem)
    named = train("cpa", {"C": 10.0, "tol": 1e-6}, problem)
    assert default.model.stopping_rule["rule"] == "tol_rel"
    assert default.model.gap_rel <= 0.01
    assert named.model.stopping_rule["rule"] == "tol" and named.model.stopping_rule["values"]["tol"] == 1e-6
    assert named.model.gap_rel < default.model.gap_rel / 10, (named.model.gap_rel, default.model.gap_rel)
    assert named.model.objective <= default.model.objective


def test_every_model_says_which_rule_stopped_it():
    problem = arrays()
    loose = train("dcd", {"C": 1.0, "tol": 0.5}, problem)
    rule = loose.model.stopping_rule
    assert rule["rule"] == "tol" and rule["values"] == {"tol": 0.5} and "certified gap" in rule["text"]
    assert loose.model.gap_rel is not None, "the certified gap is still reported"
    default = train("dcd", {"C": 1.0}, problem)
    assert default.model.stopping_rule["rule"] == "tol_rel"
    assert default.model.stopping_rule["values"] == {"tol": 0.1, "tol_rel": 0.01}
    capped = train("dcd", {"C": 1.0, "tol": 1e-9, "max_iter": 1}, problem)
    assert capped.model.stop_reason == "max_iter"
    assert capped.model.stopping_rule == {
        "rule": "max_iter",
        "values": {"max_iter": 1},
        "text": "iteration limit max_iter 1 reached",
    }
    ocas = train("ocas", {"C": 1.0, "tol_abs": 1e9}, problem)
    assert ocas.model.stopping_rule["rule"] == "tol_abs"
    smo = train("smo", {"C": 1.0, "kernel": {"type": "rbf", "gamma": 0.5}}, problem)
    assert smo.model.stopping_rule["rule"] == "tol_rel" and "KKT" in smo.model.stopping_rule["text"]
    cuts = train("sampled_cuts", {"C": 1.0, "kernel": {"type": "rbf", "gamma": 0.5}}, problem)
    assert cuts.model.stopping_rule["rule"] in ("tol", "max_iter")


def test_a_canceled_multiclass_job_says_why_it_has_no_model():
    data, d = arrays(classes=4)
    looks = {"n": 0}

    def cancel_after_the_first_class():
        looks["n"] += 1
        return looks["n"] > 40  # well into the first binary problem's iterations, before the last one

    outcome = train_model(
        "dcd",
        solver_params("dcd", {"C": 1.0, "tol": 1e-6, "trace_every": 1}),
        data,
        d,
        context=FitContext(NullSink(), cancel_requested=cancel_after_the_first_class, n_processes=1),
    )
    assert outcome.arrays is None and outcome.stop_reason.value == "canceled"
    assert "of 4 binary problems (one-vs-rest classes)" in outcome.no_model
