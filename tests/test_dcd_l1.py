"""dcd's ``penalty: l1`` (L1-regularized squared hinge by coordinate descent, worker/solvers/dcd_l1.py) against
liblinear-official -s 5, on scikit-learn's breast cancer (standardized) and wine (three classes, one-vs-rest)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer, load_wine

from tests.helpers import assert_error, liblinear_train, sparse_problem, upload
from tests.model_files import export, import_model, predict, saved, split, svmlight, train
from worker.solvers.dcd_l1 import primal_value, solve_l1

liblinearutil = pytest.importorskip("liblinear.liblinearutil")


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return (X - X.mean(axis=0)) / X.std(axis=0), np.where(y == 1, 1.0, -1.0)


def _settings(**changes):
    return SimpleNamespace(
        **{**dict(tol=1e-6, tol_rel=1e-9, max_iter=100000, seed=0, trace_every=1, trace_budget=0.1), **changes}
    )


def solve_l1_logistic(*arguments, **keywords):
    """dcd_l1_glmnet's solver with the logistic loss (LIBLINEAR -s 6)."""
    from worker.solvers.dcd_l1_glmnet import solve_l1_glmnet

    return solve_l1_glmnet(*arguments[:9], "logistic", *arguments[9:], **keywords)


def solve_l1_glmnet_squared(*arguments, **keywords):
    """dcd_l1_glmnet's solver with the squared hinge (LIBLINEAR -s 5's problem; dcd runs it with few features)."""
    from worker.solvers.dcd_l1_glmnet import solve_l1_glmnet

    return solve_l1_glmnet(*arguments[:9], "squared_hinge", *arguments[9:], **keywords)


L1_SQUARED_HINGE = {"cdn": solve_l1, "glmnet": solve_l1_glmnet_squared}


def _liblinear_w_full(model, B):
    w, b = model.get_decfun(0)
    sign = 1.0 if model.get_labels()[0] == 1 else -1.0
    return sign * (np.append(np.asarray(w), b / B) if B else np.asarray(w))


@pytest.mark.parametrize("method", sorted(L1_SQUARED_HINGE))
@pytest.mark.parametrize("C", [0.05, 1.0])
@pytest.mark.parametrize("B", [1.0, 0.0])
def test_reaches_liblinear_s5_optimum_with_its_sparsity(cancer, C, B, method):
    """The L1-regularized squared hinge, by CDN (worker/solvers/dcd_l1.py, dcd's with many features) and by newGLMNET
    (dcd_l1_glmnet.py, with few), against liblinear-official -s 5: its optimum, its non-zero weights."""
    X, y = cancer
    M = sp.csr_matrix(X)
    solve = L1_SQUARED_HINGE[method]
    tol_rel = 1e-9 if method == "cdn" else 1e-8  # (newGLMNET's margins, kept by updates, certify to about 1e-9)
    result = solve(M.indptr.astype(np.int64), M.indices, M.data, y, X.shape[1], C, C, B, _settings(tol_rel=tol_rel))
    assert result.converged and result.extra["gap_rel"] <= tol_rel
    official, converged = liblinear_train(X, y, f"-s 5 -c {C} -e 1e-8" + (f" -B {B}" if B else ""))
    reference = primal_value(M.indptr, M.indices, M.data, y, _liblinear_w_full(official, B), B, C, C)
    assert result.objective <= reference * (1 + 1e-9)
    if converged:
        assert result.objective == pytest.approx(reference, rel=1e-6)
        w_official = _liblinear_w_full(official, B)[: X.shape[1]]
        assert np.count_nonzero(result.w) == np.count_nonzero(np.abs(w_official) > 1e-9)
    assert np.count_nonzero(result.w) < X.shape[1]  # sparse: some weights exactly 0
    assert all(p["dual"] <= p["primal"] * (1 + 1e-12) for p in result.trace)


def test_sparse_data_with_class_weights(cancer):
    indptr, indices, data, y = sparse_problem(400, 60, 8, seed=3)
    M = sp.csr_matrix((data, indices, indptr), shape=(400, 60))
    result = solve_l1(indptr, indices, data, y, 60, 0.5, 2.0, 1.0, _settings())
    official, converged = liblinear_train(M, y, "-s 5 -c 1 -w-1 0.5 -w1 2 -e 1e-8 -B 1")
    reference = primal_value(indptr, indices, data, y, _liblinear_w_full(official, 1.0), 1.0, 0.5, 2.0)
    assert result.objective <= reference * (1 + 1e-9)
    if converged:
        assert result.objective == pytest.approx(reference, rel=1e-6)


def test_service_l1_model_exports_as_liblinear_s5(http, cancer):
    """Through the API: a sparse model at the defaults, certified; its LIBLINEAR file (L1R_L2LOSS_SVC) is read by
    liblinear-official with the same labels and decision values, and imports back; three classes one-vs-rest."""
    X, y = cancer
    X_train, y_train, X_test, _ = split(X, y)
    dataset = upload(http, svmlight(X_train, y_train)).json()
    model = train(http, dataset["id"], "dcd", {"penalty": "l1", "loss": "squared_hinge", "C": 0.1})
    assert model["stop_reason"] == "converged" and model["params"]["tol"] == 0.01 and model["params"]["tol_rel"] is None
    assert model["gap_rel"] is not None and "loose" in model["gap_rel_note"]  # reported, not required by default
    certified = train(http, dataset["id"], "dcd", {"penalty": "l1", "loss": "squared_hinge", "C": 0.1, "tol_rel": 0.01})
    assert certified["gap_rel"] <= 0.01
    ours = predict(http, model["id"], X_test)
    text = export(http, model["id"], "liblinear")
    assert text.startswith(b"solver_type L1R_L2LOSS_SVC\n")
    loaded = liblinearutil.load_model(saved(text, ".liblinear"))
    labels, _, values = liblinearutil.predict([], sp.csr_matrix(X_test), loaded, "-q")
    assert labels == ours["labels"]
    assert np.max(np.abs(np.array(values).ravel() - np.array(ours["scores"]))) <= 1e-9
    assert import_model(http, text, "liblinear").status_code == 201
    weights = np.array(export_weights(http, model["id"]))
    assert 0 < np.count_nonzero(weights) < X.shape[1]
    Xw, yw = load_wine(return_X_y=True)
    wine = upload(http, svmlight((Xw - Xw.mean(axis=0)) / Xw.std(axis=0), yw.astype(float))).json()
    three = train(http, wine["id"], "dcd", {"penalty": "l1", "loss": "squared_hinge"})
    assert three["labels"] == [0.0, 1.0, 2.0] and three["train_accuracy"] > 0.95


def export_weights(http, model_id):
    import json

    return json.loads(export(http, model_id, "json"))["weights"]


def test_l1_needs_the_squared_hinge(http, cancer):
    X, y = cancer
    dataset = upload(http, svmlight(X[:50], y[:50])).json()
    response = http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd", "params": {"penalty": "l1"}})
    assert_error(response, 422, "validation_error", "penalty l1", "squared_hinge or logistic")


@pytest.mark.parametrize("C", [0.05, 1.0])
@pytest.mark.parametrize("B", [1.0, 0.0])
def test_l1_logistic_reaches_liblinear_s6_optimum_with_its_sparsity(cancer, C, B):
    """dcd's penalty l1 with loss logistic (worker/solvers/dcd_l1_glmnet.py, newGLMNET) against liblinear-official
    -s 6; a tol_rel below what float64 certifies ends the run (stalled: max_iter) instead of looping."""
    from worker.solvers.dcd_l1_glmnet import primal_value as logistic_primal

    X, y = cancer
    M = sp.csr_matrix(X)
    settings = _settings(tol_rel=1e-8)  # this certificate is tight, to what float64 allows (~1e-9 here)
    result = solve_l1_logistic(M.indptr.astype(np.int64), M.indices, M.data, y, X.shape[1], C, C, B, settings)
    assert result.converged and result.extra["gap_rel"] <= 1e-8
    official, converged = liblinear_train(X, y, f"-s 6 -c {C} -e 1e-8" + (f" -B {B}" if B else ""))
    reference = logistic_primal(M.indptr, M.indices, M.data, y, _liblinear_w_full(official, B), B, C, C)
    assert result.objective <= reference * (1 + 1e-9)
    if converged:  # measured: equal to 1e-12, the same non-zero weights
        assert result.objective == pytest.approx(reference, rel=1e-6)
        w_official = _liblinear_w_full(official, B)[: X.shape[1]]
        assert np.count_nonzero(result.w) == np.count_nonzero(np.abs(w_official) > 1e-9)
    assert 0 < np.count_nonzero(result.w) < X.shape[1]
    stalled = solve_l1_logistic(
        M.indptr.astype(np.int64), M.indices, M.data, y, X.shape[1], C, C, B, _settings(tol_rel=1e-14)
    )
    assert not stalled.converged and stalled.stop_reason.value == "max_iter" and stalled.n_iter < 1000
    assert stalled.objective == pytest.approx(result.objective, rel=1e-9)


def test_service_l1_logistic_has_probabilities_and_exports_as_liblinear_s6(http, cancer):
    """Through the API: penalty l1 with loss logistic at LIBLINEAR -s 6's defaults (tol 0.01, its gap reported, not
    required), certified when tol_rel is given; probabilities with no calibration; its LIBLINEAR file (L1R_LR) gives
    liblinear-official's -b 1 probabilities."""
    X, y = cancer
    X_train, y_train, X_test, _ = split(X, y)
    dataset = upload(http, svmlight(X_train, y_train)).json()
    model = train(http, dataset["id"], "dcd", {"penalty": "l1", "loss": "logistic", "C": 0.5})
    assert model["params"]["tol"] == 0.01 and model["params"]["tol_rel"] is None and model["gap_rel"] is not None
    certified = train(http, dataset["id"], "dcd", {"penalty": "l1", "loss": "logistic", "C": 0.5, "tol_rel": 0.01})
    assert certified["gap_rel"] <= 0.01
    ours = predict(http, model["id"], X_test, probabilities=True)
    text = export(http, model["id"], "liblinear")
    assert text.startswith(b"solver_type L1R_LR\n")
    loaded = liblinearutil.load_model(saved(text, ".liblinear"))
    labels, _, probabilities = liblinearutil.predict([], sp.csr_matrix(X_test), loaded, "-b 1 -q")
    assert labels == ours["labels"]
    order = [loaded.get_labels().index(label) for label in model["labels"]]
    assert np.max(np.abs(np.array(probabilities)[:, order] - np.array(ours["probabilities"]))) <= 1e-9
    assert 0 < np.count_nonzero(export_weights(http, model["id"])) < X.shape[1]


@pytest.mark.parametrize("loss", ["squared_hinge cdn", "squared_hinge glmnet", "logistic"])
def test_the_default_stop_is_liblinears_rule_with_its_class_factor(loss):
    """LIBLINEAR's -s 5 and -s 6 stop at |f'(w)|_1 <= eps * min(pos, neg) / l * |f'(w0)|_1 (its usage text). On
    digits' zeros against the rest (178 of 1,797 rows: a factor of 0.099), at the default -e 0.01, ours ends at or
    below LIBLINEAR's objective, within 2% of the optimum; without the factor it stopped above LIBLINEAR's (21.74
    against 18.99 and 49.21 against 48.65: 16% and 6% above the optimum)."""
    from sklearn.datasets import load_digits

    from worker.solvers.dcd_l1_glmnet import primal_value as logistic_primal

    X, digits = load_digits(return_X_y=True)
    X = X / 16.0
    y = np.where(digits == 0, 1.0, -1.0)
    M = sp.csr_matrix(X)
    if loss == "logistic":
        solve, value, s = solve_l1_logistic, logistic_primal, 6
    else:
        solve, value, s = L1_SQUARED_HINGE[loss.split()[1]], primal_value, 5
    arrays = (M.indptr.astype(np.int64), M.indices, M.data)
    ours = solve(*arrays, y, X.shape[1], 1.0, 1.0, 1.0, _settings(tol=0.01, tol_rel=None))
    official, _ = liblinear_train(X, y, f"-s {s} -c 1 -B 1")
    theirs = value(*arrays, y, _liblinear_w_full(official, 1.0), 1.0, 1.0, 1.0)
    optimum = solve(*arrays, y, X.shape[1], 1.0, 1.0, 1.0, _settings()).objective
    assert ours.objective <= theirs * (1 + 1e-9), (ours.objective, theirs, optimum)
    assert ours.objective - optimum <= 0.02 * optimum, (ours.objective, optimum)


def test_shrunk_passes_see_every_coordinate_again_once_their_violation_fell_a_hundredfold():
    """``common.RelativeRulePasses``: the passes after a full one shrink; once a shrunk pass's violation is below
    RECHECK_SHRUNK (0.01) times the last full pass's, the next pass is over every coordinate again (a coordinate
    shrunk wrongly comes back then, not after the shrunk problem is solved to tol), and shrinking resumes after it."""
    from worker.solvers.common import RECHECK_SHRUNK, RelativeRulePasses

    totals = iter([100.0, 10.0, 5.0, 0.5, 0.09, 0.05, 0.04])  # summed violations of successive passes
    seen: list[int] = []

    def run_pass(active, shrink_at, resume, stop_at):
        seen.append(active)
        return (max(active - 4, 2) if shrink_at < np.inf else active), 1.0, next(totals), True

    passes = RelativeRulePasses(10, run_pass)
    for _ in range(7):
        ratio, done = passes.one_pass(0.0)
        assert done and not passes.after_pass(ratio, 1e-9)
    assert RECHECK_SHRUNK == 0.01
    # the first pass and the second (which shrinks 10 -> 6) start full; the shrunk ones go on until 0.09 / 100 is
    # below 0.01 times the second's 10 / 100: then every coordinate again (no shrinking), then shrinking again
    assert seen == [10, 10, 6, 2, 2, 10, 10], seen


def test_l1_logistic_goes_on_over_the_hessian_where_the_inner_coordinate_descent_crawls(monkeypatch):
    """dcd's L1 logistic regression (worker/solvers/dcd_l1_glmnet.py) with few, correlated features: an inner loop
    that has run as many passes as forming X'DX costs goes on over it, solved closely; the same optimum (and
    liblinear-official -s 6's) in a fraction of the Newton steps the paper's inner rule alone takes. The Hessian
    itself is X'DX, from the rows made of the columns."""
    from worker.solvers import dcd_l1_glmnet
    from worker.solvers.data_passes import column_copy, column_counts
    from worker.solvers.dcd_l1 import columns

    rng = np.random.default_rng(3)
    z = rng.normal(size=(4000, 1))
    X = z + 0.05 * rng.normal(size=(4000, 8)) + 1.0  # eight features, nearly one
    y = np.where(z[:, 0] + 0.5 * rng.normal(size=4000) > 0, 1.0, -1.0)
    M = sp.csr_matrix(X)
    col_ptr, col_rows, col_vals = columns(M.indptr, M.indices, M.data, 8, 1.0)
    rows, H, _, after = dcd_l1_glmnet._dense_room(col_ptr, col_rows, 4000, 9)
    assert H.shape == (9, 9) and after >= 1
    counts = np.empty(4001, np.int64)
    column_counts(col_rows, 4000, counts)
    assert column_copy(col_ptr, col_rows, col_vals, counts, 4000, *rows)  # the rows, as the solver makes them
    D = rng.random(4000)
    factors = np.column_stack([rng.random(4000), D])  # (each row's gradient factor, D_i)
    dcd_l1_glmnet._dense_hessian(*rows, factors, H)
    with_bias = np.hstack([X, np.ones((4000, 1))])
    assert np.allclose(H, with_bias.T @ (D[:, None] * with_bias), rtol=1e-12)

    def solve(seed):
        return solve_l1_logistic(
            M.indptr.astype(np.int64), M.indices, M.data, y, 8, 1.0, 1.0, 1.0, _settings(tol_rel=1e-8, seed=seed)
        )

    on_hessian = [solve(seed) for seed in range(3)]
    monkeypatch.setattr(dcd_l1_glmnet, "DENSE_HESSIAN_FEATURES", 0)  # the paper's inner rule alone
    on_columns = [solve(seed) for seed in range(3)]
    for fast, slow in zip(on_hessian, on_columns, strict=True):
        assert fast.converged and slow.converged
        assert fast.objective == pytest.approx(slow.objective, rel=1e-9)
        assert fast.n_iter * 3 <= slow.n_iter  # measured: 28-35 against 141-143
    official, _ = liblinear_train(X, y, "-s 6 -e 1e-8 -B 1")
    reference = dcd_l1_glmnet.primal_value(M.indptr, M.indices, M.data, y, _liblinear_w_full(official, 1.0), 1.0, 1, 1)
    assert on_hessian[0].objective <= reference * (1 + 1e-9)


def test_the_squared_hinge_takes_newglmnet_only_where_the_dense_hessian_fits():
    """dcd runs the L1 squared hinge by newGLMNET (dcd_l1_glmnet) where its dense Hessian fits: few features, not too
    many stored values, and room for the data, its columns and rows within the training's memory; CDN (dcd_l1)
    elsewhere, which needs neither the rows nor H."""
    from worker.solvers.dcd_l1_glmnet import DENSE_HESSIAN_FEATURES, DENSE_HESSIAN_VALUES, suits

    assert suits(30, 5000, 1.0) and suits(DENSE_HESSIAN_FEATURES - 1, 10, 1.0)
    assert not suits(DENSE_HESSIAN_FEATURES, 10, 1.0) and suits(DENSE_HESSIAN_FEATURES, 10, 0.0)
    assert not suits(30, DENSE_HESSIAN_VALUES + 1, 1.0) and not suits(30, 0, 1.0)
    assert suits(30, 5000, 1.0, memory_bytes=36 * 5000 + 8 * 31 * 31)
    assert not suits(30, 5000, 1.0, memory_bytes=36 * 5000)  # (H's 31 x 31 too)
