"""Pairwise objectives of cpa (ordinal regression, ROC area, ranking): Algorithm 2 of Joachims 2006.

The condensed most-violated cut is checked against enumeration of the pairs, and the trained models
against the brute-force formulation OP4: the explicit difference vectors solved as a classification
SVM without intercept by LIBLINEAR (scikit-learn's LinearSVC and liblinear-official), same C.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score
from sklearn.svm import LinearSVC

from core.schemas.solver_params import CpaParams
from core.scoring.metrics import pairwise_accuracy, roc_auc
from core.scoring.metrics import predicted_ranks as predict_ranks
from tests import naive
from tests.helpers import liblinear_train, liblinear_w_full
from worker.solvers.common import SolverInputError
from worker.solvers.cpa import solve_cpa, warm_up
from worker.solvers.ranking import fit_thresholds, pairwise_cut, pairwise_setup

_csr = naive.csr_parts


@pytest.fixture(scope="module", autouse=True)
def _compiled():
    warm_up()


def _ranked_problem(n, d, n_ranks, seed, n_groups=None):
    """Rows with ranks from a noisy hidden linear score, cut into n_ranks quantile bins."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[rng.random(size=X.shape) < 0.3] = 0.0
    score = X @ rng.normal(size=d) + 0.7 * rng.normal(size=n)
    edges = np.quantile(score, np.linspace(0, 1, n_ranks + 1)[1:-1])
    y = np.digitize(score, edges).astype(float) * 1.5 - 2.0  # arbitrary rank values, larger = better
    qid = None if n_groups is None else rng.integers(0, n_groups, size=n) * 7 + 100
    return X, y, qid


def _brute_force_optimum(X, y, qid, C):
    """OP4's optimum from the explicit difference vectors (LinearSVC = LIBLINEAR dual CD, no intercept)."""
    D, signs = naive.pairwise_difference_problem(X, y, qid)
    ref = LinearSVC(dual=True, loss="hinge", C=C, fit_intercept=False, tol=1e-10, max_iter=10**6).fit(D, signs)
    w = ref.coef_.ravel()
    return naive.pairwise_primal(X, y, w, C, qid), D.shape[0]


# ---------------------------------------------------------------------------------------------
# the condensed cut
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_ranks,n_groups", [(2, None), (3, None), (5, None), (4, 6)])
def test_condensed_counts_equal_enumeration(n_ranks, n_groups):
    rng = np.random.default_rng(n_ranks)
    n = 120
    y = rng.integers(0, n_ranks, size=n).astype(float)
    qid = None if n_groups is None else rng.integers(0, n_groups, size=n)
    # scores on a grid of 0.25 so that many differences are exactly 1 (the strict < is tested) and ties occur
    scores = rng.integers(-8, 9, size=n) * 0.25
    setup = pairwise_setup(y, qid, "ranking" if qid is not None else "ordinal")
    cplus = np.zeros(n, dtype=np.int64)
    cminus = np.zeros(n, dtype=np.int64)
    gamma = np.zeros(n)
    b, risk = pairwise_cut(scores, setup, cplus, cminus, gamma)
    ref_plus, ref_minus = naive.pairwise_cut_counts(scores, y, qid)
    np.testing.assert_array_equal(cplus, ref_plus)
    np.testing.assert_array_equal(cminus, ref_minus)
    np.testing.assert_array_equal(gamma, ref_plus - ref_minus)
    assert b == ref_plus.sum() == ref_minus.sum()
    pairs = naive.pairs_of(y, qid)
    assert setup.n_pairs == len(pairs)
    ref_risk = sum(max(0.0, 1.0 - (scores[i] - scores[j])) for i, j in pairs)
    assert risk == pytest.approx(ref_risk, rel=1e-12, abs=1e-12)


def test_pairwise_setup_refuses_bad_input():
    y3 = np.array([0.0, 1.0, 2.0, 1.0])
    with pytest.raises(SolverInputError, match="exactly two"):
        pairwise_setup(y3, None, "roc_area")
    with pytest.raises(SolverInputError, match="needs qid"):
        pairwise_setup(y3, None, "ranking")
    with pytest.raises(SolverInputError, match="only used by objective='ranking'"):
        pairwise_setup(y3, np.zeros(4), "ordinal")
    with pytest.raises(SolverInputError, match="at least one pair"):
        pairwise_setup(np.array([1.0, 2.0, 1.0, 2.0]), np.array([1, 2, 3, 4]), "ranking")
    with pytest.raises(SolverInputError, match="finite"):
        pairwise_setup(np.array([1.0, np.nan]), None, "ordinal")


# ---------------------------------------------------------------------------------------------
# training against the brute-force formulation
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "objective,n_ranks,n_groups,n",
    [
        ("roc_area", 2, None, 150),
        ("ordinal", 3, None, 140),
        ("ordinal", 5, None, 130),
        ("ranking", 3, 8, 300),
        ("ranking", 5, 12, 300),
    ],
)
def test_pairwise_objectives_reach_brute_force_optimum(objective, n_ranks, n_groups, n):
    X, y, qid = _ranked_problem(n, 6, n_ranks, seed=n_ranks + n, n_groups=n_groups)
    C = 0.05
    best, m = _brute_force_optimum(X, y, qid, C)
    tol = 1e-5
    res = solve_cpa(
        *_csr(X),
        y,
        n_features=X.shape[1],
        params=CpaParams(C=C, bias=1.0, tol_rel=0.0, tol=tol, objective=objective),
        qid=qid,
    )
    assert res.converged
    assert res.bias == 0.0
    assert res.extra["n_pairs"] == m
    # the reported objective is the true OP4 objective of the returned w
    assert res.objective == pytest.approx(naive.pairwise_primal(X, y, res.w, C, qid), rel=1e-10)
    # within the stopping guarantee C * m * tol of the optimum, never meaningfully below it
    assert res.objective <= best + 1.001 * C * m * tol
    assert res.objective >= best * (1 - 1e-7)
    assert res.extra["lower_bound"] <= best * (1 + 1e-7)
    assert abs(res.objective - best) <= 1e-3 * best


def test_roc_area_agrees_with_liblinear_official():
    pytest.importorskip("liblinear.liblinearutil")
    X, y, _ = _ranked_problem(120, 5, 2, seed=7)
    C = 0.1
    D, signs = naive.pairwise_difference_problem(X, y)
    model, _converged = liblinear_train(D, signs, f"-s 3 -c {C} -e 1e-6 -B -1 -q")
    w_ref = liblinear_w_full(model, bias=None)
    ref = naive.pairwise_primal(X, y, w_ref, C)
    res = solve_cpa(*_csr(X), y, n_features=5, params=CpaParams(C=C, tol_rel=0.0, tol=1e-6, objective="roc_area"))
    assert abs(res.objective - ref) <= 1e-3 * ref


def test_ordinal_thresholds_and_ranks_in_result():
    X, y, _ = _ranked_problem(200, 6, 4, seed=3)
    res = solve_cpa(*_csr(X), y, n_features=6, params=CpaParams(C=0.1, tol_rel=0.0, tol=1e-4, objective="ordinal"))
    ranks = np.array(res.extra["ranks"])
    thresholds = np.array(res.extra["thresholds"])
    np.testing.assert_array_equal(ranks, np.unique(y))
    assert thresholds.shape == (3,)
    assert np.all(np.diff(thresholds) >= 0)
    pred = predict_ranks(X @ res.w, ranks, thresholds)
    assert np.mean(pred == y) > 0.5  # 4 balanced ranks: chance is 0.25


# ---------------------------------------------------------------------------------------------
# thresholds and metrics
# ---------------------------------------------------------------------------------------------


def test_thresholds_minimise_split_errors():
    rng = np.random.default_rng(11)
    y = rng.integers(0, 4, size=80).astype(float)
    scores = y + rng.normal(scale=0.8, size=80)
    ranks, raw = fit_thresholds(scores, y, monotone=False)
    grid = np.concatenate(([scores.min() - 1], np.sort(scores)))  # every distinct split by brute force
    for k in range(ranks.size - 1):
        low = y <= ranks[k]

        def errors(t, low=low):
            return int(np.sum(low & (scores > t)) + np.sum(~low & (scores <= t)))

        assert errors(raw[k]) == min(errors(t) for t in grid)
    np.testing.assert_array_equal(fit_thresholds(scores, y)[1], np.maximum.accumulate(raw))
    # separable scores: every example gets its rank back
    s = y * 10.0 + rng.random(80)
    ranks, thetas = fit_thresholds(s, y)
    np.testing.assert_array_equal(predict_ranks(s, ranks, thetas), y)


def test_thresholds_each_minimise_errors_when_already_monotone():
    y = np.array([0, 0, 1, 0, 1, 1, 2, 1, 2, 2], dtype=float)
    s = np.arange(10, dtype=float)
    _, thetas = fit_thresholds(s, y)
    assert thetas[0] == pytest.approx(1.5) or thetas[0] == pytest.approx(3.5)
    assert thetas[1] == pytest.approx(5.5) or thetas[1] == pytest.approx(7.5)
    assert np.all(np.diff(thetas) >= 0)


def test_roc_auc_and_pairwise_accuracy():
    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, size=300).astype(float) * 3.0 - 1.0
    s = np.round(y + rng.normal(size=300), 1)  # ties
    assert roc_auc(s, y > 0) == pytest.approx(roc_auc_score(y > 0, s), rel=1e-12)
    assert pairwise_accuracy(s, y) == pytest.approx(roc_auc(s, y > 0), rel=1e-12)
    y5 = rng.integers(0, 5, size=90).astype(float)
    qid = rng.integers(0, 4, size=90)
    s5 = np.round(y5 + rng.normal(size=90), 1)
    pairs = naive.pairs_of(y5, qid)
    ref = sum(1.0 if s5[i] > s5[j] else 0.5 if s5[i] == s5[j] else 0.0 for i, j in pairs) / len(pairs)
    assert pairwise_accuracy(s5, y5, qid) == pytest.approx(ref, rel=1e-12)
    assert roc_auc(s5, np.zeros(90, dtype=bool)) is None, "undefined without both classes"
