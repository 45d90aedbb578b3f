"""Predicting with a wide multi-class linear model: sector.scale's 105 one-vs-rest classes x 55,197 features.

    python -m tests.benchmarks.bench_predict_wide [--requests 300] [--out results/bench_predict_wide.json]

Starts ``hinge serve --workers 1`` (embedded Redis), uploads sector.scale, trains dcd (C = 1, one-vs-rest),
then sends ``--requests`` one-row predict requests (sparse rows of sector.scale.t, in turn) one after the
other, and reports the latency percentiles a client sees. In the same run and process it times the
product the scorer computes both ways: with the weights as stored, (105, 55,197), whose transpose scipy
copied at every call, and with the transposed contiguous copy the scorer now makes once
(``core.scoring.models.Scorer.weights_t``): medians of interleaved calls, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

import httpx
import numpy as np
from sklearn.datasets import load_svmlight_file

from tests.benchmarks.bench_scale import start_serve, stop_serve, upload, wait_ready
from tests.benchmarks.environment import DATA_DIR, machine

RESULTS = Path(__file__).resolve().parent / "results"


def _percentiles(seconds: list[float]) -> dict:
    ordered = sorted(seconds)
    at = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3  # noqa: E731
    return {"p50_ms": round(at(0.5), 3), "p90_ms": round(at(0.9), 3), "p99_ms": round(at(0.99), 3)}


def in_process(weights: np.ndarray, rows, repeats: int) -> dict:
    """One-row products with the stored layout and with the scorer's, interleaved; medians in ms."""
    transposed = np.ascontiguousarray(weights.T)
    stored, cached = [], []
    for k in range(repeats):
        row = rows[k % rows.shape[0]]
        start = time.perf_counter()
        np.asarray(row @ weights.T)
        stored.append(time.perf_counter() - start)
        start = time.perf_counter()
        np.asarray(row @ transposed)
        cached.append(time.perf_counter() - start)
    a, b = statistics.median(stored) * 1e3, statistics.median(cached) * 1e3
    return {"stored_layout_ms": round(a, 4), "scorer_layout_ms": round(b, 4), "ratio": round(a / b, 1)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--port", type=int, default=8482)
    parser.add_argument("--out", type=Path, default=RESULTS / "bench_predict_wide.json")
    parser.add_argument("--data-dir", default="/tmp/hinge-bench-predict-wide")
    args = parser.parse_args(argv)

    test_X, _ = load_svmlight_file(str(DATA_DIR / "sector.scale.t.svm.gz"), n_features=55197)
    test_X = test_X.tocsr()
    data_dir = Path(args.data_dir)
    serve = start_serve(args.port, 1, data_dir)
    base = f"http://127.0.0.1:{args.port}"
    out: dict = {"machine": machine(), "requests": args.requests}
    try:
        wait_ready(base, all_kernels=True)
        http = httpx.Client(base_url=base, timeout=120)
        dataset, _ = upload(base, DATA_DIR / "sector.scale.svm.gz", "sector", None)
        job = http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd", "params": {"C": 1.0}}).json()
        while (job := http.get(f"/v1/jobs/{job['id']}").json())["status"] not in ("succeeded", "failed", "canceled"):
            time.sleep(0.2)
        assert job["status"] == "succeeded", job
        model_id = job["model_id"]
        bodies = []
        for i in range(min(args.requests, test_X.shape[0])):
            row = test_X[i]
            bodies.append({"instances": [{str(j + 1): float(v) for j, v in zip(row.indices, row.data)}]})
        http.post(f"/v1/models/{model_id}/predict", json=bodies[0]).raise_for_status()  # loads the model
        seconds = []
        for k in range(args.requests):
            start = time.perf_counter()
            http.post(f"/v1/models/{model_id}/predict", json=bodies[k % len(bodies)]).raise_for_status()
            seconds.append(time.perf_counter() - start)
        out["http_one_row"] = _percentiles(seconds)
        weights = np.random.default_rng(0).normal(size=(105, 55197))  # the model's shape; values do not matter
        out["product_one_row"] = in_process(weights, test_X, args.requests)
    finally:
        stop_serve(serve)
        shutil.rmtree(data_dir, ignore_errors=True)
    print(json.dumps({k: v for k, v in out.items() if k != "machine"}, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
