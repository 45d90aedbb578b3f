"""Multi-class through the dispatcher: one-vs-rest dcd against LIBLINEAR, smo against LIBSVM."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits, load_iris, load_wine

from core.scoring.models import Scorer
from core.solvers import solver_params
from tests.helpers import NullSink, liblinear_train, liblinear_w_full
from worker.training.context import FitContext
from worker.training.fit import train_model


def arrays_of(X, y):
    matrix = sp.csr_matrix(X)
    return {
        "indptr": matrix.indptr.astype(np.int64),
        "indices": matrix.indices.astype(np.int32),
        "data": matrix.data.astype(np.float64),
        "y": y.astype(np.float64),
    }


def train_quietly(solver: str, params, arrays: dict, n_features: int, processes: int):
    """``train_model`` without deadline, cancel or trace."""
    return train_model(solver, params, arrays, n_features, context=FitContext(NullSink(), n_processes=processes))


def primal(X, y_signs, w, b, C):
    margins = y_signs * (X @ w + b)
    return 0.5 * (w @ w + b * b) + C * np.maximum(0.0, 1.0 - margins).sum()


@pytest.mark.parametrize("processes", [1, 2])
def test_digits_one_vs_rest_matches_liblinear(processes):
    liblinearutil = pytest.importorskip("liblinear.liblinearutil")
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    C = 0.01  # liblinear-official converges within its 300-iteration cap here (at larger C it stops early)
    params = solver_params(
        "dcd",
        {
            "C": C,
            "loss": "hinge",
            "bias": 1.0,
            "class_weight": None,
            "tol": 1e-4,
            "max_iter": 100000,
            "shrinking": True,
            "trace_every": 1000,
            "seed": 0,
            "max_seconds": None,
            "n_processes": processes,
        },
    )
    outcome = train_quietly("dcd", params, arrays_of(X, y), X.shape[1], processes)
    model, _converged = liblinear_train(X, y, f"-s 3 -c {C} -e 1e-4 -B 1 -q")
    labels = model.get_labels()
    ours_weights, ours_offsets = outcome.arrays["weights"], outcome.arrays["offsets"]
    for k, label in enumerate(sorted(labels)):
        w_full = liblinear_w_full(model, bias=1.0, label_idx=labels.index(label), positive_label=label)
        w, b = w_full[:-1], w_full[-1]
        signs = np.where(y == label, 1.0, -1.0)
        theirs = primal(X, signs, w, b, C)
        ours = primal(X, signs, ours_weights[k], ours_offsets[k], C)
        assert ours == pytest.approx(outcome.model.objectives[k], rel=1e-9)
        assert abs(ours - theirs) <= 1e-4 * theirs, (label, ours, theirs)
    predicted, _ = Scorer(outcome.model, outcome.arrays).predict_values(sp.csr_matrix(X))
    theirs_labels, _, _ = liblinearutil.predict(y, sp.csr_matrix(X), model, "-q")
    assert np.mean(predicted == np.array(theirs_labels)) >= 0.995
    # on 2 processes the weight vectors came back in shared rows, and the model's matrix is those rows
    assert ours_weights.flags.c_contiguous and (ours_weights.base is not None) == (processes == 2)


def test_two_processes_score_the_training_rows_in_their_subtasks(monkeypatch):
    """Linear one-vs-rest on 2 processes: the subtask processes score the training rows after the fits (not the
    job's process, after them); the accuracy is the one the job's process computes, to the bit."""
    from worker.training import assemble as training

    X, y = load_digits(return_X_y=True)
    arrays = arrays_of(X / 16.0, y)
    serial = training._train_accuracy
    calls: list[int] = []
    monkeypatch.setattr(training, "_train_accuracy", lambda *args: calls.append(1) or serial(*args))
    outcomes = {}
    for processes in (2, 1):
        params = solver_params("dcd", {"C": 0.1, "n_processes": processes})
        outcomes[processes] = train_quietly("dcd", params, arrays, X.shape[1], processes)
        assert calls == ([] if processes == 2 else [1])
    two = outcomes[2]
    assert two.model.train_accuracy == serial(two.model, two.arrays, arrays, X.shape[1], arrays["y"])
    assert two.model.train_accuracy == outcomes[1].model.train_accuracy > 0.9
    assert np.array_equal(two.arrays["weights"], outcomes[1].arrays["weights"])


def test_stacked_weights_are_the_shared_rows_only_when_they_are_consecutive_full_rows():
    from worker.runtime.subtasks import SharedRows
    from worker.solvers.common import SolverResult, StopReason
    from worker.training.assemble import stacked_weights as _stacked_weights

    def results(vectors):
        return [SolverResult(v, 0.0, 1, True, StopReason.CONVERGED, 0.0, 0.0) for v in vectors]

    full, short = SharedRows(3, 4), SharedRows(3, 5)  # short: vectors of 4 in rows of 5
    for k in range(3):
        full.put(k, np.arange(4.0) + 10 * k)
        short.put(k, np.arange(4.0) + 10 * k)
    expected = np.vstack([np.arange(4.0) + 10 * k for k in range(3)])
    shared = _stacked_weights(results([full.view(k) for k in range(3)]))
    assert np.array_equal(shared, expected) and np.shares_memory(shared, full.values)
    for vectors, reordered in (
        ([full.view(k) for k in (0, 2, 1)], True),
        ([short.view(k) for k in range(3)], False),
        (list(expected.copy()), False),
    ):
        stacked = _stacked_weights(results(vectors))
        assert not np.shares_memory(stacked, full.values) and not np.shares_memory(stacked, short.values)
        assert np.array_equal(stacked, expected[[0, 2, 1]] if reordered else expected)


@pytest.mark.parametrize("loader", [load_iris, load_wine])
def test_smo_multiclass_agrees_with_libsvm(loader):
    svmutil = pytest.importorskip("libsvm.svmutil")
    X, y = loader(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    gamma, C = 1.0 / X.shape[1], 1.0
    params = solver_params(
        "smo",
        {
            "C": C,
            "kernel": {"type": "rbf", "gamma": gamma},
            "working_set": "second_order",
            "tol": 1e-3,
            "cache_mb": 100.0,
            "shrinking": True,
            "class_weight": None,
            "max_iter": None,
            "trace_every": 1000,
            "seed": 0,
            "max_seconds": None,
            "n_processes": 2,
        },
    )
    outcome = train_model("smo", params, arrays_of(X, y), X.shape[1], context=FitContext(NullSink()))
    predicted, _ = Scorer(outcome.model, outcome.arrays).predict_values(sp.csr_matrix(X))
    model = svmutil.svm_train(y.tolist(), X.tolist(), f"-s 0 -t 2 -c {C} -g {gamma} -e 1e-3 -q")
    theirs, _, _ = svmutil.svm_predict(y.tolist(), X.tolist(), model, "-q")
    agreement = np.mean(predicted == np.array(theirs))
    assert agreement >= 0.99, agreement
    # the objectives: LIBSVM on each one-vs-rest problem (class k +1, the rest -1), its primal
    # 0.5 |w|^2 + C sum hinge from its model; both stop at the same KKT tolerance (1e-3)
    K = np.exp(-gamma * ((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=-1))
    for k, label in enumerate(np.unique(y)):
        signs = np.where(y == label, 1.0, -1.0)
        binary = svmutil.svm_train(signs.tolist(), X.tolist(), f"-s 0 -t 2 -c {C} -g {gamma} -e 1e-3 -q")
        flip = 1.0 if binary.get_labels()[0] == 1 else -1.0  # LIBSVM scores its first label positive
        _, _, values = svmutil.svm_predict(signs.tolist(), X.tolist(), binary, "-q")
        coef = np.zeros(y.size)
        coef[np.array(binary.get_sv_indices()) - 1] = flip * np.array(binary.get_sv_coef()).ravel()
        theirs_objective = 0.5 * coef @ K @ coef + C * np.maximum(0.0, 1.0 - signs * flip * np.ravel(values)).sum()
        assert abs(outcome.model.objectives[k] - theirs_objective) <= 1e-3 * theirs_objective, (
            label,
            outcome.model.objectives[k],
            theirs_objective,
        )
