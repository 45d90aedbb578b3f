"""sampled_cuts' ``multiclass: crammer_singer`` with an rbf kernel (worker/solvers/sampled_cuts/multiclass.py) beside
LIBSVM's one-vs-one at the same C and gamma, 1 thread.

No C program trains Crammer and Singer's problem with a kernel (LIBSVM is one-vs-one, LIBLINEAR's -s 4 and msvmocas
are linear), so this is the comparison a user makes: test accuracy and training seconds against ``svm-train`` (built
from LIBSVM's sources by ../shared/tools/build-anchors.sh, its solver seconds from strace) and its predictions
(libsvm-official's Python module, the same library). For each data set: LIBSVM, then ours with the linear and the
constant variant at their defaults (tol 1e-3), each stopped at ``--max-seconds`` (a deadline) if it runs longer,
``--repeats`` interleaved runs, medians. Writes
tests/benchmarks/results/bench_crammer_singer_kernel.json.

    .venv/bin/python -m tests.benchmarks.bench_crammer_singer_kernel --data dna.scale,pendigits,letter.scale

``--C``, ``--gamma`` and ``--sample-size`` replace the settings for every data set given, ``--variants`` picks ours,
``--out`` names the JSON (for the sample-size comparisons of tests/benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from sklearn.datasets import load_svmlight_file

from core.scoring.kernel import KernelExpansion
from tests.benchmarks import anchors
from tests.benchmarks.environment import DATA_DIR
from worker.solvers.common import SolverControl
from worker.solvers.sampled_cuts.multiclass import solve_sampled_cuts_crammer_singer, warm_up

RESULTS = Path(__file__).resolve().parent / "results"
SETTINGS = {"dna.scale": (1.0, 0.01), "pendigits": (10.0, 1e-4), "letter.scale": (10.0, 1.0)}
"""(C, gamma) per data set: gamma about 1 / (n_features * variance) (pendigits is unscaled, 0-100), C where LIBSVM's
one-vs-one is near its best."""


def scores(result, X_train, X, gamma: float) -> np.ndarray:
    """f_c(x) for every row of X: the expansion per class over the model's rows, rbf."""
    support = X_train[result.extra["support_indices"]]
    expansion = KernelExpansion(
        support.indptr, support.indices, support.data, result.extra["dual_coef"], result.extra["biases"],
        {"type": "rbf", "gamma": gamma}, n_features=X.shape[1],
    )  # fmt: skip
    return np.asarray(expansion.decision_function(X.indptr, X.indices, X.data)).reshape(X.shape[0], -1)


def ours(X_train, classes, n_classes, X_test, test_classes, C, gamma, variant, max_seconds, sample_size=None) -> dict:
    params = SimpleNamespace(
        C=C, kernel={"type": "rbf", "gamma": gamma}, variant=variant, sampling="calibrated", sample_size=sample_size,
        pool_size=None, p=4, tol=1e-3, max_inactive=20, max_iter=10000, bias=1.0, seed=0,
    )  # fmt: skip
    started = time.perf_counter()
    result = solve_sampled_cuts_crammer_singer(
        X_train.indptr.astype(np.int64), X_train.indices, X_train.data, classes, n_classes=n_classes,
        n_features=X_train.shape[1], params=params, n_threads=1,
        control=SolverControl(deadline=time.monotonic() + max_seconds),
    )  # fmt: skip
    wall = time.perf_counter() - started
    accuracy = float(np.mean(np.argmax(scores(result, X_train, X_test, gamma), axis=1) == test_classes))
    return {"seconds": result.solver_seconds, "wall": wall, "iterations": result.n_iter, "accuracy": accuracy,
            "objective": result.objective, "rows": int(result.extra["n_sv"]), "stop_reason": result.stop_reason.value,
            "gap_rel": result.extra.get("gap_rel")}  # fmt: skip


def libsvm(path: str, X_train, y_train, X_test, y_test, C: float, gamma: float) -> dict:
    from libsvm import svmutil

    run = anchors.svm_train(path, C, gamma)
    model = svmutil.svm_train(svmutil.svm_problem(y_train.tolist(), X_train), f"-t 2 -c {C} -g {gamma} -q")
    labels, _, _ = svmutil.svm_predict(y_test.tolist(), X_test, model, "-q")
    return {"seconds": run["seconds"], "accuracy": float(np.mean(np.array(labels) == y_test)), "n_sv": run["n_sv"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="dna.scale,pendigits,letter.scale")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--max-seconds", type=float, default=300.0, help="each of our runs stops there (a deadline)")
    parser.add_argument("--C", type=float, help="C for every data set (default: SETTINGS')")
    parser.add_argument("--gamma", type=float, help="gamma for every data set (default: SETTINGS')")
    parser.add_argument("--sample-size", type=int, help="our sample_size (default: the service's, None)")
    parser.add_argument("--variants", default="linear,constant", help="our variants to run")
    parser.add_argument("--out", default=str(RESULTS / "bench_crammer_singer_kernel.json"))
    args = parser.parse_args()
    warm_up()
    out: dict = {"note": __doc__.split("\n\n")[0], "data": {}}
    for name in args.data.split(","):
        C, gamma = SETTINGS[name]
        C = C if args.C is None else args.C
        gamma = gamma if args.gamma is None else args.gamma
        train_path, test_path = DATA_DIR / f"{name}.svm.gz", DATA_DIR / f"{name}.t.svm.gz"
        X_train, y_train = load_svmlight_file(str(train_path))
        X_test, y_test = load_svmlight_file(str(test_path), n_features=X_train.shape[1])
        labels, classes = np.unique(y_train, return_inverse=True)
        test_classes = np.searchsorted(labels, y_test)
        with tempfile.NamedTemporaryFile(suffix=".svm") as plain:
            plain.write(gzip.decompress(train_path.read_bytes()))
            plain.flush()
            variants = args.variants.split(",")
            runs: dict[str, list[dict]] = {"libsvm_ovo": [], **{variant: [] for variant in variants}}
            for _ in range(args.repeats):
                runs["libsvm_ovo"].append(libsvm(plain.name, X_train, y_train, X_test, y_test, C, gamma))
                for variant in variants:
                    runs[variant].append(
                        ours(
                            X_train,
                            classes,
                            labels.size,
                            X_test,
                            test_classes,
                            C,
                            gamma,
                            variant,
                            args.max_seconds,
                            args.sample_size,
                        )
                    )
        summary = {
            key: {field: statistics.median(r[field] for r in rows) if isinstance(rows[0][field], float) else rows[0][field]
                  for field in rows[0]}
            for key, rows in runs.items()
        }  # fmt: skip
        out["data"][name] = {"C": C, "gamma": gamma, "rows": int(X_train.shape[0]), "classes": int(labels.size),
                             **summary}  # fmt: skip
        print(name, json.dumps(out["data"][name]), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
