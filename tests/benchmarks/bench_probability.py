"""Probability quality of ``params.probability`` against LIBSVM ``-b 1`` and scikit-learn's
``CalibratedClassifierCV(method="sigmoid")``, on the standard test files of a9a and letter.

Run on purpose: ``python -m tests.benchmarks.bench_probability [--sections a9a-linear,a9a-kernel,
letter-linear,letter-kernel,letter-kernel-ovo] [--processes 2]``. Writes tests/benchmarks/results/bench_probability.json
(sections not run keep their previous entry).

Each section trains on the training file and measures on the test file:

* ours: the dispatcher the workers run (``worker.training.fit.train_model``, the code a job runs) with
  ``probability: true``, fitted on 5-fold cross-validated decision values: Platt's sigmoid for two
  labels; for more, one softmax over the one-vs-rest scores, or with smo's ``multiclass: ovo``
  (section ``letter-kernel-ovo``, LIBSVM's own scheme) one sigmoid per pair, pairwise coupled;
* the reference: ``-linear`` sections: scikit-learn's ``CalibratedClassifierCV(LinearSVC(loss="hinge",
  C), method="sigmoid", cv=5)`` (the same problem as dcd with bias 1: LinearSVC penalizes its intercept
  like LIBLINEAR's -B 1); ``-kernel`` sections: libsvm-official ``svm_train -b 1`` with the same C and
  gamma (one-vs-one with pairwise coupling for letter), and ``svm_predict -b 1``.

Figures: log-loss (mean of -log p(true label), p clipped to [1e-15, 1]), Brier score (mean over rows of
sum over labels of (p_label - [label is true])^2, the multi-class form; for two labels it is twice the
usual binary Brier score), accuracy of the argmax of the probabilities and of the model's own labels,
seconds. The bar of issue 11: ours no worse than the reference by more than 1% (ratio <= 1.01).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file

from core.scoring.models import Scorer
from core.solvers import solver_params
from tests.benchmarks.environment import DATA_DIR, machine
from tests.helpers import NullSink
from worker.training.context import FitContext

RESULTS = Path(__file__).resolve().parent / "results" / "bench_probability.json"

SECTIONS = {
    "a9a-linear": {"data": "a9a", "n_features": 123, "solver": "dcd", "params": {"C": 1.0, "tol": 1e-4}},
    "a9a-kernel": {"data": "a9a", "n_features": 123, "solver": "smo", "params": {"C": 1.0, "gamma": 0.05}},
    "letter-linear": {"data": "letter.scale", "n_features": 16, "solver": "dcd", "params": {"C": 1.0, "tol": 1e-4}},
    "letter-kernel": {"data": "letter.scale", "n_features": 16, "solver": "smo", "params": {"C": 10.0, "gamma": 0.5}},
    "letter-kernel-ovo": {
        "data": "letter.scale",
        "n_features": 16,
        "solver": "smo",
        "params": {"C": 10.0, "gamma": 0.5, "multiclass": "ovo"},
    },
}


def load(name: str, n_features: int):
    X, y = load_svmlight_file(str(DATA_DIR / f"{name}.svm.gz"), n_features=n_features)
    X = sp.csr_matrix((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)), shape=X.shape)
    X.sort_indices()
    return X, y.astype(np.float64)


def quality(probabilities: np.ndarray, classes: np.ndarray, y: np.ndarray, labels: np.ndarray | None = None) -> dict:
    """Log-loss, Brier score and accuracies; columns of ``probabilities`` follow ``classes``."""
    truth = (y.reshape(-1, 1) == classes.reshape(1, -1)).astype(float)
    p_true = np.clip((probabilities * truth).sum(axis=1), 1e-15, 1.0)
    out = {
        "log_loss": float(-np.mean(np.log(p_true))),
        "brier": float(np.mean(((probabilities - truth) ** 2).sum(axis=1))),
        "accuracy_of_argmax_probability": float(np.mean(classes[np.argmax(probabilities, axis=1)] == y)),
    }
    if labels is not None:
        out["accuracy_of_labels"] = float(np.mean(labels == y))
    return out


def ours(section: dict, X, y, X_test, y_test, processes: int) -> dict:
    from worker.training.fit import train_model

    params = {
        "seed": 0,
        "max_seconds": None,
        "n_processes": processes,
        "probability": True,
        "class_weight": None,
        "trace_every": 10**6,
    }
    if section["solver"] == "dcd":
        params.update(
            C=section["params"]["C"],
            loss="hinge",
            bias=1.0,
            tol=section["params"]["tol"],
            max_iter=100000,
            shrinking=True,
        )
    else:
        params.update(
            C=section["params"]["C"],
            kernel={"type": "rbf", "gamma": section["params"]["gamma"]},
            working_set="second_order",
            tol=1e-3,
            cache_mb=200.0,
            shrinking=True,
            max_iter=None,
            trace_every=10**6,
            multiclass=section["params"].get("multiclass", "ovr"),
        )
    arrays = {
        "indptr": X.indptr.astype(np.int64),
        "indices": X.indices.astype(np.int32),
        "data": X.data.astype(np.float64),
        "y": y,
    }
    started = time.perf_counter()
    outcome = train_model(
        section["solver"],
        solver_params(section["solver"], params),
        arrays,
        X.shape[1],
        context=FitContext(NullSink(), n_processes=processes),
    )
    seconds = time.perf_counter() - started
    scorer = Scorer(outcome.model, outcome.arrays)
    labels, _ = scorer.predict_values(X_test)
    probabilities = scorer.probabilities(X_test)
    result = quality(probabilities, scorer.labels, y_test, labels)
    result.update(
        seconds_training_and_calibration=seconds,
        seconds_calibration=(outcome.model.calibration.seconds if outcome.model.calibration else None),
        training_seconds=outcome.model.training_seconds,
    )
    return result


def calibrated_linear_svc(section: dict, X, y, X_test, y_test) -> dict:
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.svm import LinearSVC

    started = time.perf_counter()
    base = LinearSVC(C=section["params"]["C"], loss="hinge", dual=True, tol=1e-4, max_iter=100000, random_state=0)
    model = CalibratedClassifierCV(base, method="sigmoid", cv=5).fit(X, y)
    seconds = time.perf_counter() - started
    result = quality(model.predict_proba(X_test), model.classes_, y_test, model.predict(X_test))
    result.update(
        seconds=seconds,
        reference="scikit-learn CalibratedClassifierCV(LinearSVC(loss='hinge'), method='sigmoid', cv=5)",
    )
    return result


def libsvm_b1(section: dict, X, y, X_test, y_test) -> dict:
    from libsvm import svmutil

    options = f"-s 0 -t 2 -c {section['params']['C']} -g {section['params']['gamma']} -e 0.001 -m 200 -b 1 -q"
    problem = svmutil.svm_problem(y, X)
    started = time.perf_counter()
    model = svmutil.svm_train(problem, svmutil.svm_parameter(options))
    seconds = time.perf_counter() - started
    path = "/tmp/hinge-bench-probability.libsvm"
    svmutil.svm_save_model(path, model)
    model = svmutil.svm_load_model(path)
    labels, _, probabilities = svmutil.svm_predict([], X_test, model, "-b 1 -q")
    classes = np.asarray(model.get_labels(), dtype=float)
    result = quality(np.asarray(probabilities), classes, y_test, np.asarray(labels))
    result.update(seconds=seconds, reference=f"libsvm-official svm_train {options}")
    return result


def run(name: str, processes: int) -> dict:
    section = SECTIONS[name]
    X, y = load(section["data"], section["n_features"])
    X_test, y_test = load(section["data"] + ".t", section["n_features"])
    mine = ours(section, X, y, X_test, y_test, processes)
    reference = (
        calibrated_linear_svc(section, X, y, X_test, y_test)
        if section["solver"] == "dcd"
        else libsvm_b1(section, X, y, X_test, y_test)
    )
    return {
        "train": f"{section['data']}.svm.gz",
        "test": f"{section['data']}.t.svm.gz",
        "rows": int(y.size),
        "test_rows": int(y_test.size),
        "classes": int(np.unique(y).size),
        "solver": section["solver"],
        "params": section["params"],
        "ours": mine,
        "reference": reference,
        "log_loss_ratio": mine["log_loss"] / reference["log_loss"],
        "brier_ratio": mine["brier"] / reference["brier"],
        "within_1_percent": bool(
            mine["log_loss"] <= 1.01 * reference["log_loss"] and mine["brier"] <= 1.01 * reference["brier"]
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results["machine"] = machine()
    for name in args.sections.split(","):
        results[name] = run(name, args.processes)
        print(
            name,
            json.dumps({k: results[name][k] for k in ("log_loss_ratio", "brier_ratio", "within_1_percent")}),
            json.dumps(results[name]["ours"]),
            json.dumps(results[name]["reference"]),
            flush=True,
        )
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
