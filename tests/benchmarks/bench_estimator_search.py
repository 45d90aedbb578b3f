"""HingeSearchCV (one job of the service's search) against GridSearchCV over HingeClassifier (issue 32, item 2).

    python -m tests.benchmarks.bench_estimator_search [--rounds 5] [--workers 2] [--out FILE]

Starts `hinge serve --workers N` (default 2, as `hinge serve`) on a fresh data directory, waits until every
solver's kernels are compiled, and runs the issue's two grids:

* ``breast_cancer``: scikit-learn's bundled set, standardized, HingeClassifier() (dcd, linear), C in
  {0.001, 0.01, 0.1, 1, 10}, 5 folds (25 fits and the refit);
* ``digits``: HingeClassifier(kernel="rbf") (smo, one-vs-one as SVC), C in {1, 10} x gamma in {0.001, 0.01},
  3 folds (12 fits of 45 pairs each, and the refit).

Each round times, interleaved, the fit of ``HingeSearchCV(estimator, grid, cv=k)``, of ``GridSearchCV(estimator,
grid, cv=k)`` (a job per fit), and of scikit-learn's own ``GridSearchCV(SVC() or LinearSVC(), ...)`` in this
process as the reference the issue quotes. Seconds are wall seconds of ``fit`` from the client's side (uploads,
jobs, predictions of the held-out folds and the refit included); the deletions the estimators queue in the
background are waited for between fits, outside the timings. A first round is run and discarded (it loads the
service's caches and this process's imports). The JSON (results/bench_estimator_search.json) has every run, the
medians, ``speedup`` = median GridSearchCV / median HingeSearchCV, and whether the chosen settings agree.
Target: speedup >= 3 on both, the same chosen setting.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.model_selection import GridSearchCV
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, LinearSVC

from hinge_client import HingeClassifier, HingeSearchCV, wait_for_cleanup
from tests.benchmarks.bench_scale import start_serve, stop_serve, wait_ready
from tests.benchmarks.environment import machine

RESULTS = Path(__file__).resolve().parent / "results" / "bench_estimator_search.json"


def cases(url: str) -> dict:
    """name -> (X, y, our estimator, scikit-learn's, grid, folds)."""
    X_cancer, y_cancer = load_breast_cancer(return_X_y=True)
    X_digits, y_digits = load_digits(return_X_y=True)
    return {
        "breast_cancer": (
            StandardScaler().fit_transform(X_cancer),
            y_cancer,
            HingeClassifier(url=url),
            LinearSVC(loss="hinge", max_iter=100_000),
            {"C": [0.001, 0.01, 0.1, 1.0, 10.0]},
            5,
        ),
        "digits": (
            X_digits,
            y_digits,
            HingeClassifier(kernel="rbf", url=url),
            SVC(),
            {"C": [1.0, 10.0], "gamma": [0.001, 0.01]},
            3,
        ),
    }


def timed(make, X, y) -> tuple[float, object]:
    """Wall seconds of make().fit(X, y), and the fitted search (the background deletions waited for after)."""
    search = make()
    start = time.perf_counter()
    search.fit(X, y)
    seconds = time.perf_counter() - start
    return seconds, search


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--port", type=int, default=8482)
    parser.add_argument("--data-dir", default="/tmp/hinge-bench-estimator-search")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    data_dir = Path(args.data_dir)
    serve = start_serve(args.port, args.workers, data_dir)
    url = f"http://127.0.0.1:{args.port}"
    out: dict = {"machine": machine(), "workers": args.workers, "rounds": args.rounds, "load_before": os.getloadavg()}
    try:
        wait_ready(url, all_kernels=True)
        for name, (X, y, ours, reference, grid, folds) in cases(url).items():
            arms = {
                "HingeSearchCV": lambda: HingeSearchCV(ours, grid, cv=folds),
                "GridSearchCV(HingeClassifier)": lambda: GridSearchCV(ours, grid, cv=folds),
                f"GridSearchCV({type(reference).__name__}) local": lambda: GridSearchCV(reference, grid, cv=folds),
            }
            runs: dict[str, list[dict]] = {arm: [] for arm in arms}
            for round_ in range(args.rounds + 1):
                for arm, make in arms.items():
                    seconds, search = timed(make, X, y)
                    entry = {
                        "seconds": round(seconds, 4),
                        "best_params": search.best_params_,
                        "best_score": round(float(search.best_score_), 5),
                        "mean_test_score": [round(float(v), 5) for v in search.cv_results_["mean_test_score"]],
                    }
                    del search
                    wait_for_cleanup(120)
                    if round_ == 0:
                        print(name, arm, "warm-up", entry, flush=True)
                        continue
                    runs[arm].append(entry)
                    print(name, arm, entry, flush=True)
            medians = {arm: statistics.median(r["seconds"] for r in runs[arm]) for arm in arms}
            choices = {arm: [r["best_params"] for r in runs[arm]] for arm in arms}
            ours_arm, grid_arm = "HingeSearchCV", "GridSearchCV(HingeClassifier)"
            out[name] = {
                "grid": grid,
                "cv": folds,
                "n_samples": int(X.shape[0]),
                "runs": runs,
                "median_seconds": medians,
                "speedup": round(medians[grid_arm] / medians[ours_arm], 2),
                "same_choice": all(c == choices[grid_arm][0] for c in choices[ours_arm] + choices[grid_arm]),
                "reference_choice": choices[next(a for a in arms if a.endswith("local"))][0],
                "n_classes": int(np.unique(y).size),
            }
            print(name, "speedup", out[name]["speedup"], "same choice", out[name]["same_choice"], flush=True)
    finally:
        stop_serve(serve)
        shutil.rmtree(data_dir, ignore_errors=True)
    out["load_after"] = os.getloadavg()
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
