"""Exported models on the benchmark data sets, loaded by the official tools: a check of issue 11's bars.

Run on purpose: ``python -m tests.benchmarks.check_model_export [--sections liblinear,libsvm,onnx]``.
Writes tests/benchmarks/results/check_model_export.json.

Models are trained by the dispatcher the workers run (``worker.training.fit.train_model``) on the training
files of ../shared/data and written by the service's exporters (``service.interchange``, the code behind
``GET /v1/models/{id}/export``); predictions are compared on the standard test files, which no test uses:

* ``liblinear``: dcd on a9a, letter (26 classes, one-vs-rest) and sector (105 classes, 55,197 features),
  cpa and ocas on a9a; liblinear-official ``load_model`` + ``predict``: labels must be equal, decision
  values within 1e-9.
* ``libsvm``: smo (rbf) on the first 5,000 rows of a9a and on letter (one-vs-rest written as one-vs-one
  pairs), sampled_cuts on a9a; libsvm-official ``svm_load_model`` + ``svm_predict``: labels equal,
  decision values within 1e-6 (letter: the pairwise differences of ours); letter trained one-vs-one
  with probabilities: the pairs' decision values, and ``-b 1`` probabilities within 1e-6.
* ``onnx``: the a9a and sector dcd models and the letter smo model in onnxruntime (float32 input,
  batches of 256 rows): labels equal, scores within 1e-5.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file

from core.scoring.models import Scorer
from core.storage.documents import ModelRecord
from service.interchange.liblinear import write_liblinear
from service.interchange.libsvm import write_libsvm
from service.interchange.onnx_model import write_onnx
from tests.benchmarks.environment import DATA_DIR, machine
from tests.helpers import NullSink
from worker.training.context import FitContext

RESULTS = Path(__file__).resolve().parent / "results" / "check_model_export.json"
DATA = {"a9a": 123, "letter.scale": 16, "sector.scale": 55197}


def load(name: str):
    X, y = load_svmlight_file(str(DATA_DIR / f"{name}.svm.gz"), n_features=DATA[name.removesuffix(".t")])
    X = sp.csr_matrix((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int64)), shape=X.shape)
    X.sort_indices()
    return X, y.astype(np.float64)


def train(solver: str, params: dict, X, y) -> tuple[dict, dict, float]:
    from core.solvers import spec_of
    from worker.training.fit import train_model

    base = {
        "seed": 0,
        "max_seconds": None,
        "n_processes": 2,
        "probability": False,
        "class_weight": None,
        "trace_every": 10**6,
    }
    arrays = {"indptr": X.indptr.astype(np.int64), "indices": X.indices.astype(np.int32), "data": X.data, "y": y}
    started = time.perf_counter()
    fields = spec_of(solver).params.model_fields  # the worker validates params: keep what this solver takes
    given = {key: value for key, value in dict(base, **params).items() if key in fields or key == "lambda"}
    outcome = train_model(
        solver,
        spec_of(solver).params.model_validate(given),
        arrays,
        X.shape[1],
        context=FitContext(NullSink(), n_processes=2),
    )
    model = ModelRecord.from_document(
        dict(
            outcome.model.to_document(),
            solver=solver,
            params=dict(base, **params),
            id=f"check-{solver}",
            tenant="check",
            created_at="",
            job_id=None,
            dataset_id=None,
            zero_based=False,
        )
    )
    return model, outcome.arrays, time.perf_counter() - started


DCD = {"C": 1.0, "loss": "hinge", "bias": 1.0, "tol": 0.1, "max_iter": 1000, "shrinking": True, "tol_rel": 0.0}
CPA = {"C": 1.0, "bias": 1.0, "tol": 0.001, "max_iter": 10000, "max_inactive": 50, "objective": "classification"}
OCAS = {"C": 1.0, "bias": 1.0, "tol_rel": 0.01, "tol_abs": 0.0, "lambda": 0.1, "max_iter": 100000, "max_inactive": 50}
SMO = {"C": 10.0, "working_set": "second_order", "tol": 1e-3, "cache_mb": 200.0, "shrinking": True, "max_iter": None}
CUTS = {
    "C": 1.0,
    "variant": "linear",
    "sample_size": 400,
    "p": 4,
    "tol": 0.001,
    "max_inactive": 20,
    "max_iter": 10000,
    "bias": 1.0,
}


def compare(model, arrays, X_test, theirs_labels, theirs_values, pairwise=False) -> dict:
    scorer = Scorer(model, arrays)
    labels, scores = scorer.predict_values(X_test)
    scores = np.asarray(scores).reshape(X_test.shape[0], -1)
    theirs_values = np.asarray(theirs_values, dtype=np.float64).reshape(X_test.shape[0], -1)
    if model.one_vs_one:  # trained one-vs-one: the pairs' own decision values
        scores = scorer.decision_values(X_test)
        pairwise = False
    if pairwise:
        k = scores.shape[1]
        pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
        ours_values = np.column_stack([scores[:, i] - scores[:, j] for i, j in pairs])
    else:
        ours_values = scores
    return {
        "rows": int(X_test.shape[0]),
        "labels_equal": int(np.sum(np.asarray(theirs_labels) == labels)),
        "labels_different": int(np.sum(np.asarray(theirs_labels) != labels)),
        "max_abs_decision_difference": float(np.max(np.abs(ours_values - theirs_values))),
    }


def section_liblinear() -> dict:
    from liblinear import liblinearutil

    out = {}
    for name, solver, params in [
        ("a9a", "dcd", DCD),
        ("a9a", "cpa", CPA),
        ("a9a", "ocas", OCAS),
        ("letter.scale", "dcd", DCD),
        ("sector.scale", "dcd", DCD),
    ]:
        X, y = load(name)
        X_test, y_test = load(name + ".t")
        model, arrays, seconds = train(solver, params, X, y)
        with tempfile.NamedTemporaryFile("w", suffix=".liblinear", delete=False) as handle:
            for piece in write_liblinear(model, arrays):
                handle.write(piece)
        model = liblinearutil.load_model(handle.name)
        labels, _, values = liblinearutil.predict([], X_test, model, "-q")
        result = compare(model, arrays, X_test, labels, values)
        result.update(
            train_seconds=seconds,
            file_bytes=os.path.getsize(handle.name),
            test_accuracy=float(np.mean(np.asarray(labels) == y_test)),
        )
        result["bar_met"] = result["labels_different"] == 0 and result["max_abs_decision_difference"] <= 1e-9
        out[f"{name} {solver}"] = result
        print("liblinear", name, solver, json.dumps(result), flush=True)
        os.unlink(handle.name)
    return out


def section_libsvm() -> dict:
    from libsvm import svmutil

    out = {}
    a9a_X, a9a_y = load("a9a")
    for label, (X, y), test, solver, params, multi in [
        (
            "a9a[:5000] smo rbf",
            (a9a_X[:5000], a9a_y[:5000]),
            "a9a.t",
            "smo",
            dict(SMO, C=1.0, kernel={"type": "rbf", "gamma": 0.05}),
            False,
        ),
        (
            "a9a sampled_cuts rbf",
            (a9a_X, a9a_y),
            "a9a.t",
            "sampled_cuts",
            dict(CUTS, kernel={"type": "rbf", "gamma": 0.05}),
            False,
        ),
        (
            "letter smo rbf (one-vs-rest as pairs)",
            load("letter.scale"),
            "letter.scale.t",
            "smo",
            dict(SMO, kernel={"type": "rbf", "gamma": 0.5}),
            True,
        ),
        (
            "letter smo rbf one-vs-one, calibrated",
            load("letter.scale"),
            "letter.scale.t",
            "smo",
            dict(SMO, kernel={"type": "rbf", "gamma": 0.5}, multiclass="ovo", probability=True),
            False,
        ),
    ]:
        X_test, y_test = load(test)
        model, arrays, seconds = train(solver, params, X, y)
        with tempfile.NamedTemporaryFile("w", suffix=".libsvm", delete=False) as handle:
            for piece in write_libsvm(model, arrays):
                handle.write(piece)
        model = svmutil.svm_load_model(handle.name)
        labels, _, values = svmutil.svm_predict([], X_test, model, "-q")
        result = compare(model, arrays, X_test, labels, values, pairwise=multi)
        result.update(
            train_seconds=seconds,
            file_bytes=os.path.getsize(handle.name),
            n_support=model.n_support,
            test_accuracy=float(np.mean(np.asarray(labels) == y_test)),
        )
        result["bar_met"] = result["labels_different"] == 0 and result["max_abs_decision_difference"] <= 1e-6
        if params.get("probability"):
            _, _, coupled = svmutil.svm_predict([], X_test, model, "-q -b 1")
            order = np.argsort(model.get_labels())
            difference = np.abs(np.asarray(coupled)[:, order] - Scorer(model, arrays).probabilities(X_test))
            result["max_abs_probability_difference"] = float(np.max(difference))
            result["bar_met"] = result["bar_met"] and result["max_abs_probability_difference"] <= 1e-6
        out[label] = result
        print("libsvm", label, json.dumps(result), flush=True)
        os.unlink(handle.name)
    return out


def section_onnx() -> dict:
    import onnxruntime as ort

    out = {}
    for name, solver, params in [
        ("a9a", "dcd", DCD),
        ("sector.scale", "dcd", DCD),
        ("letter.scale", "smo", dict(SMO, kernel={"type": "rbf", "gamma": 0.5})),
    ]:
        X, y = load(name)
        X_test, y_test = load(name + ".t")
        model, arrays, seconds = train(solver, params, X, y)
        session = ort.InferenceSession(write_onnx(model, arrays), providers=["CPUExecutionProvider"])
        labels, scores = [], []
        for start in range(0, X_test.shape[0], 256):
            block = X_test[start : start + 256].toarray().astype(np.float32)
            label, score = session.run(["label", "scores"], {"X": block})
            labels.append(label)
            scores.append(score.reshape(block.shape[0], -1))
        labels = np.concatenate(labels)
        result = compare(model, arrays, X_test, labels, np.concatenate(scores))
        result.update(train_seconds=seconds, test_accuracy=float(np.mean(labels == y_test)))
        result["bar_met"] = result["labels_different"] == 0 and result["max_abs_decision_difference"] <= 1e-5
        out[f"{name} {solver}"] = result
        print("onnx", name, solver, json.dumps(result), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default="liblinear,libsvm,onnx")
    args = parser.parse_args()
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results["machine"] = machine()
    for name in args.sections.split(","):
        results[name] = {"liblinear": section_liblinear, "libsvm": section_libsvm, "onnx": section_onnx}[name]()
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
