"""Probabilities for classification models (``params.probability``): Platt's sigmoid on cross-validated
decision values, as LIBSVM's ``-b 1`` does for its binary problems.

For each binary problem of the model (one for two labels, one per class in one-vs-rest) the rows are
split into ``CV_FOLDS`` folds, stratified by label and drawn with the job's seed; the problem is
trained on all folds but one with the job's own parameters (the same C, class weights and resolved
kernel) and its decision values are taken on the held-out fold. A fold whose training part has only
one class of the problem gives every held-out row the decision value +1 or -1 (LIBSVM's rule). The
decision values of all rows then fit (A, B) of P(positive | f) = 1 / (1 + exp(A f + B)) by maximum
likelihood (``service.scoring.probability.fit_sigmoid``). The model keeps trained on all the data;
these fits only serve the calibration.

The (fold, problem) fits run as subtasks in parallel processes. A cancel stops them and leaves the
model uncalibrated; the job's deadline applies to them like to the training itself.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from service.schemas.solver_params import SolverParams
from service.scoring.models import csr
from service.scoring.probability import fit_sigmoid
from worker import registry
from worker.folds import held_out_decisions, make_folds, subset
from worker.problems import binary_problems, class_weight_pairs
from worker.solvers.common import SolverControl
from worker.subtasks import SubtaskContext, run_subtasks

log = logging.getLogger("hinge.worker")

CV_FOLDS = 5


def held_out_decision_values(
    solver: str,
    params: SolverParams,
    arrays: dict,
    n_features: int,
    problems: list[np.ndarray],
    class_weights: list[tuple[float, float]],
    folds: np.ndarray,
    *,
    deadline,
    cancel_requested,
    n_processes: int,
) -> np.ndarray | None:
    """Decision values (n, n_problems) of every row from a model that did not see its fold; None when canceled."""
    fit = registry.adapter(solver)
    parallel = 1 if solver == "ocas" else None  # ocas: the processes go to the (fold, problem) fits
    matrix = csr(arrays, n_features)
    n_folds = int(folds.max()) + 1
    plan = [(fold, k) for fold in range(n_folds) for k in range(len(problems))]

    def fit_one(item: tuple[int, int], context: SubtaskContext) -> np.ndarray:
        fold, k = item
        train_rows = np.flatnonzero(folds != fold)
        test_rows = np.flatnonzero(folds == fold)
        y_train = problems[k][train_rows]
        if np.all(y_train > 0) or np.all(y_train < 0):
            return np.full(test_rows.size, 1.0 if y_train[0] > 0 else -1.0)
        train = subset(arrays, train_rows, n_features)
        control = SolverControl(deadline=context.deadline, cancel_requested=context.cancel_requested)
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
        n_processes=n_processes,
        deadline=deadline,
        cancel_requested=cancel_requested,
        on_point=lambda index, point: None,
    )
    if any(r is None for r in results) or cancel_requested():
        return None
    values = np.empty((folds.size, len(problems)))
    for (fold, k), decision in zip(plan, results):
        values[folds == fold, k] = decision
    return values


def calibrate(
    solver: str, params: SolverParams, arrays: dict, n_features: int, *, deadline, cancel_requested, n_processes: int
) -> dict | None:
    """The model's calibration ({method, A, B, cv_folds, seed}), or None when canceled or impossible."""
    y = np.asarray(arrays["y"])
    labels, problems = binary_problems(y)
    seed = int(params.seed)
    folds = make_folds(y, None, min(CV_FOLDS, y.size), seed)
    started = time.perf_counter()
    values = held_out_decision_values(
        solver,
        params,
        arrays,
        n_features,
        problems,
        class_weight_pairs(labels, getattr(params, "class_weight", None)),
        folds,
        deadline=deadline,
        cancel_requested=cancel_requested,
        n_processes=n_processes,
    )
    if values is None:
        return None
    A, B = [], []
    for k, target in enumerate(problems):
        a, b = fit_sigmoid(values[:, k], target > 0)
        A.append(a)
        B.append(b)
    log.info(
        "calibrated %d problem(s) on %d-fold decision values in %.2f s",
        len(problems),
        int(folds.max()) + 1,
        time.perf_counter() - started,
    )
    return {
        "method": "platt_ovr",
        "A": A,
        "B": B,
        "cv_folds": int(folds.max()) + 1,
        "seed": seed,
        "seconds": time.perf_counter() - started,
    }
