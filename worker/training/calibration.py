"""Probabilities for classification models (``params.probability``), fitted on cross-validated decision
values as LIBSVM's ``-b 1`` does.

For each binary problem of the model (one for two labels, one per class in one-vs-rest) the rows are
split into ``CV_FOLDS`` folds, stratified by label and drawn with the job's seed; the problem is
trained on all folds but one with the job's own parameters (the same C, class weights and resolved
kernel) and its decision values are taken on the held-out fold. A fold whose training part has only
one class of the problem gives every held-out row the decision value +1 or -1 (LIBSVM's rule). The
model keeps trained on all the data; these fits only serve the calibration, which is then fitted on
the held-out decision values of all rows:

- two labels: Platt's sigmoid, (A, B) of P(positive | f) = 1 / (1 + exp(A f + B)) by maximum
  likelihood (``core.scoring.probability.fit_sigmoid``), method ``platt_ovr``;
- one-vs-one models (smo's ``multiclass: ovo``): each pair's problem is cross-validated on its own
  rows (the same folds) and gets Platt's sigmoid, coupled at predict time by Wu, Lin and Weng's second
  method (``core.scoring.probability.pairwise_coupling``), method ``pairwise_coupling``, as
  LIBSVM's ``-b 1``;
- ocas's ``multiclass: crammer_singer``: the one problem over every label is cross-validated whole
  (``crammer_singer.held_out_scores``), then as two labels (the one score's sigmoid) or as one-vs-rest (the softmax
  over its K scores);
- more labels, one-vs-rest: one softmax over the K one-vs-rest scores, P = softmax(W f + c), by multinomial
  logistic regression on the scores (``fit_softmax``), method ``multinomial``. W is K x K so that a
  class's probability can use every class's score; its off-diagonal entries carry a small ridge
  (``SOFTMAX_RIDGE``) on standardized scores, so with few rows per class the fit falls back towards
  one scale per class. Normalized one-vs-rest sigmoids (scikit-learn's coupling) were measured worse:
  log-loss 1.68 against 0.91 on letter with a linear model (tests/benchmarks/bench_probability.py).

The (fold, problem) fits run as subtasks in parallel processes. A cancel stops them and leaves the
model uncalibrated; the job's deadline applies to them like to the training itself.
"""

from __future__ import annotations

import logging
import time

import numpy as np
from scipy.optimize import minimize

from core.schemas.solver_params import SolverParams
from core.scoring.models import csr
from core.scoring.probability import fit_sigmoid
from core.solvers import spec_of
from worker.runtime.subtasks import SubtaskContext, run_subtasks
from worker.solvers.common import SolverControl
from worker.training import registry
from worker.training.context import FitContext
from worker.training.crammer_singer import held_out_scores, uses_crammer_singer
from worker.training.folds import held_out_decisions, make_folds, subset
from worker.training.problems import job_problems

log = logging.getLogger("hinge.worker")

CV_FOLDS = 5

SOFTMAX_RIDGE = 1.0
"""Ridge on the off-diagonal softmax weights of standardized scores, in units of one row's log-loss."""


def held_out_decision_values(
    solver: str,
    params: SolverParams,
    arrays: dict,
    n_features: int,
    problems: list[np.ndarray],
    class_weights: list[tuple[float, float]],
    folds: np.ndarray,
    context: FitContext,
    *,
    members: list[np.ndarray] | None = None,
) -> list[np.ndarray] | None:
    """Per problem, the decision value of each of its rows from a fit that did not see the row's fold; None
    when canceled. A problem covers every row, or with ``members`` the rows members[k] (its targets
    problems[k] follow them)."""
    fit = registry.adapter(solver)
    # threads inside a problem (ocas, cpa) go to 1: the processes go to the (fold, problem) fits
    parallel = 1 if spec_of(solver).threads == "n_processes" else None
    matrix = csr(arrays, n_features)
    n_folds = int(folds.max()) + 1
    plan = [(fold, k) for fold in range(n_folds) for k in range(len(problems))]
    every_row = np.arange(folds.size)

    def rows_of(k: int) -> np.ndarray:
        return every_row if members is None else members[k]

    def fit_one(item: tuple[int, int], subtask: SubtaskContext) -> np.ndarray:
        fold, k = item
        rows = rows_of(k)
        held = folds[rows] == fold
        train_rows = rows[~held]
        test_rows = rows[held]
        y_train = problems[k][~held]
        if np.all(y_train > 0) or np.all(y_train < 0):
            return np.full(test_rows.size, 1.0 if y_train[0] > 0 else -1.0)
        train = subset(arrays, train_rows, n_features)
        control = SolverControl(deadline=subtask.deadline, cancel_requested=subtask.cancel_requested)
        result = fit(
            train["indptr"],
            train["indices"],
            train["data"],
            y_train,
            n_features=n_features,
            params=params,
            class_weight=class_weights[k],
            control=control,
            parallel=parallel,
        )
        test = matrix[test_rows]
        kernel = getattr(params, "kernel", None)
        return held_out_decisions(result, train, test, kernel.model_dump() if kernel is not None else None, n_features)

    results = run_subtasks(
        fit_one,
        plan,
        n_processes=context.processes(params),
        deadline=context.deadline,
        cancel_requested=context.cancel_requested,
        on_point=lambda index, point: None,
    )
    if any(r is None for r in results) or context.cancel_requested():
        return None
    values = [np.empty(rows_of(k).size) for k in range(len(problems))]
    for (fold, k), decision in zip(plan, results):
        values[k][folds[rows_of(k)] == fold] = decision
    return values


def calibrate(solver: str, params: SolverParams, arrays: dict, n_features: int, context: FitContext) -> dict | None:
    """The model's calibration ({method, A, B, cv_folds, seed}), or None when canceled or impossible."""
    y = np.asarray(arrays["y"])
    labels, members, problems, weight_pairs = job_problems(params, y)
    seed = int(params.seed)
    folds = make_folds(y, None, min(CV_FOLDS, y.size), seed)
    started = time.perf_counter()
    values: list[np.ndarray] | None
    if uses_crammer_singer(params):  # one problem, K scores a row
        scores = held_out_scores(params, arrays, n_features, folds, context)
        if scores is None:
            return None
        values = [scores] if scores.ndim == 1 else [scores[:, k] for k in range(scores.shape[1])]
    else:
        values = held_out_decision_values(
            solver, params, arrays, n_features, problems, weight_pairs, folds, context, members=members
        )
    if values is None:
        return None
    if members is not None or len(problems) == 1:
        A, B = zip(*(fit_sigmoid(values[k], problems[k] > 0) for k in range(len(problems))))
        method = "platt_ovr" if members is None else "pairwise_coupling"
        fitted: dict = {"method": method, "A": list(A), "B": list(B)}
    else:
        weights, intercepts = fit_softmax(np.column_stack(values), np.searchsorted(labels, y))
        fitted = {
            "method": "multinomial",
            "weights": weights.tolist(),
            "intercepts": intercepts.tolist(),
            "ridge": SOFTMAX_RIDGE,
        }
    log.info(
        "calibrated %d problem(s) on %d-fold decision values in %.2f s",
        len(problems),
        int(folds.max()) + 1,
        time.perf_counter() - started,
    )
    return {**fitted, "cv_folds": int(folds.max()) + 1, "seed": seed, "seconds": time.perf_counter() - started}


def fit_softmax(
    scores: np.ndarray, classes: np.ndarray, *, ridge: float = SOFTMAX_RIDGE, tol: float = 1e-6
) -> tuple[np.ndarray, np.ndarray]:
    """(W, c) of P(k | f) = softmax(W f + c)_k maximizing the likelihood of ``classes`` given ``scores``.

    ``scores`` (n, K) are one-vs-rest decision values, ``classes`` (n,) the column index of each row's
    class. The scores are standardized per column for the fit (so the ridge means the same at any C or
    kernel scale) and the result is folded back to raw scores. The objective, the mean negative
    log-likelihood plus ridge / (2 n) times the squared off-diagonal weights, is convex; L-BFGS from
    W = I, c = 0 minimizes it to a gradient of ``tol``.
    """
    F = np.asarray(scores, dtype=np.float64)
    n, k = F.shape
    center = F.mean(axis=0)
    spread = F.std(axis=0)
    spread[spread <= 0.0] = 1.0
    S = (F - center) / spread
    truth = np.zeros((n, k))
    truth[np.arange(n), classes] = 1.0
    off_diagonal = 1.0 - np.eye(k)

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        W = theta[: k * k].reshape(k, k)
        z = S @ W.T + theta[k * k :]
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        total = e.sum(axis=1, keepdims=True)
        residual = (e / total - truth) / n
        penalized = off_diagonal * W
        value = float(np.sum(np.log(total)) - np.sum(truth * z)) / n + 0.5 * ridge / n * float(np.sum(penalized**2))
        return value, np.concatenate([(residual.T @ S + ridge / n * penalized).ravel(), residual.sum(axis=0)])

    start = np.concatenate([np.eye(k).ravel(), np.zeros(k)])
    found = minimize(objective, start, jac=True, method="L-BFGS-B", options={"maxiter": 5000, "gtol": tol})
    W = found.x[: k * k].reshape(k, k) / spread.reshape(1, -1)
    return W, found.x[k * k :] - W @ center
