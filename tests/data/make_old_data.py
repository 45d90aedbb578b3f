"""Write a data directory with the running version of Hinge, for tests/test_old_data.py.

Run from a checkout of the version whose data should keep loading (``python -m tests.data.make_old_data
DIR``): it starts `hinge serve` on an empty data directory, uploads a small data set, trains a dcd and
an smo model, records what the models predict, and stops the service (Ctrl-C, as a user does). The
append-only file and the predictions are then copied to ``DIR`` (``redis/appendonly.aof`` and
``expected.json``), the former compacted by a rewrite (the workers' heartbeats, expired, drop out).
"""

from __future__ import annotations

import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import httpx
import redis

from service.embedded_redis import EmbeddedRedis, free_port
from tests.helpers import upload, wait_job
from tests.serve_harness import ServeRun

ROWS_TO_PREDICT = [[1.0, 0.5, -1.0, 0.0], [-1.5, -0.2, 0.8, 0.3], [-0.3, 1.2, 0.4, -2.0], [0.0, 0.0, 0.0, 0.0]]
"""Rows whose labels and scores the old models must give again after the upgrade."""

JOBS = {"dcd": {"C": 0.5, "tol": 0.01}, "smo": {"C": 2.0, "kernel": {"type": "rbf", "gamma": 0.5}, "probability": True}}


def data_set(n_rows: int = 300, seed: int = 0) -> bytes:
    """A small two-class svmlight data set (four features, some left out as zeros)."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n_rows):
        x = [rng.gauss(0, 1) for _ in range(4)]
        label = 1 if x[0] + 0.5 * x[1] - x[2] * x[3] + rng.gauss(0, 0.3) > 0 else -1
        features = " ".join(f"{j + 1}:{v:.4f}" for j, v in enumerate(x) if abs(v) > 0.2)
        lines.append(f"{label} {features}")
    return ("\n".join(lines) + "\n").encode()


def compact(redis_dir: Path) -> None:
    """Rewrite the append-only file (as the service does once it has doubled)."""
    server = EmbeddedRedis(redis_dir).start()
    try:
        client = redis.Redis.from_url(server.url)
        client.bgrewriteaof()
        while (
            client.info("persistence")["aof_rewrite_in_progress"] or client.info("persistence")["aof_rewrite_scheduled"]
        ):
            time.sleep(0.05)
        client.close()
    finally:
        server.stop()


def main(target: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        run = ServeRun(data_dir, free_port(), workers=1)
        try:
            run.wait_ready()
            with httpx.Client(base_url=run.base_url, timeout=60.0) as http:
                dataset = upload(http, data_set(), name="old-data").raise_for_status().json()
                models = {}
                for solver, params in JOBS.items():
                    job = http.post(
                        "/v1/jobs", json={"dataset_id": dataset["id"], "solver": solver, "params": params}
                    ).raise_for_status()
                    done = wait_job(http, job.json()["id"], timeout=300)
                    assert done["status"] == "succeeded", done
                    body = {"instances": ROWS_TO_PREDICT, "probabilities": bool(params.get("probability"))}
                    answer = http.post(f"/v1/models/{done['model_id']}/predict", json=body).raise_for_status()
                    models[solver] = {"job_id": done["id"], "model_id": done["model_id"], "predict": answer.json()}
            run.ctrl_c()
            run.proc.wait(60)
        finally:
            run.close()
        compact(data_dir / "redis")
        (target / "redis").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data_dir / "redis" / "appendonly.aof", target / "redis" / "appendonly.aof")
    expected = {"dataset_id": dataset["id"], "rows": ROWS_TO_PREDICT, "models": models}
    (target / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
