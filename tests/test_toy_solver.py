"""A sixth solver, registered in the tests only (tests/toy: a spec, a params schema and a numpy solve
function; HINGE_SOLVER_PLUGINS=tests.toy.spec), reaches everything a solver reaches with no other file
touched: the OpenAPI document, POST /v1/jobs and its validation, the worker's call, progress, the model's
stopping rule, a cross-validated search, predict and export (issue 21, item 2)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx
import pytest
import redis
import scipy.sparse as sp

from hinge_client import HingeClassifier
from service.embedded_redis import free_port
from tests.conftest import Database, _terminate, private_service_env, start_api, start_worker, wait_ready
from tests.helpers import sparse_problem, to_svmlight, wait_for


def hingectl(url: str, *args: str) -> tuple[int, str, str]:
    """Run hingectl against ``url``: (exit code, stdout, stderr)."""
    env = dict(os.environ, HINGE_URL=url)
    env.pop("HINGE_API_KEY", None)
    proc = subprocess.run(
        [sys.executable, "-m", "hinge_client.cli", *args], capture_output=True, text=True, env=env, timeout=180
    )
    return proc.returncode, proc.stdout, proc.stderr


def test_a_toy_solver_registered_by_a_plugin_trains_searches_and_exports(redis_server, tmp_path):
    # a database of its own: the suite's workers know no toy
    env = private_service_env(redis_server.url, Database.TOY_SOLVER, tmp_path, HINGE_SOLVER_PLUGINS="tests.toy.spec")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    api = start_api(env, port)
    worker = start_worker(env)
    try:
        wait_ready(base, api)
        with httpx.Client(base_url=base, timeout=60) as http:
            document = http.get("/openapi.json").json()
            schemas = document["components"]["schemas"]
            assert "toy" in schemas["SolverName"]["enum"] and "ToyJobRequest" in schemas
            assert schemas["ToyParams"]["properties"]["tol"]["description"].startswith("Stop when the subgradient")
            assert http.get("/readyz").json()["solvers_ready"][-1] == "toy"

            content = to_svmlight(*sparse_problem(1500, 20, 6, seed=3))
            dataset = http.post("/v1/datasets", files={"file": ("toy.svm", content)}).json()["id"]

            refused = http.post("/v1/jobs", json={"dataset_id": dataset, "solver": "toy", "params": {"C": -1}})
            assert refused.status_code == 422 and "params.C" in refused.json()["error"]["message"]
            assert "did you mean 'toy'?" in http.post("/v1/jobs", json={"dataset_id": dataset, "solver": "toyy"}).text
            uncalibrated = http.post(
                "/v1/jobs", json={"dataset_id": dataset, "solver": "toy", "params": {"probability": True}}
            )
            assert uncalibrated.status_code == 422 and "does not calibrate" in uncalibrated.json()["error"]["message"]

            # a run long enough to watch (a few seconds): tol unreachable, so the iteration limit ends it
            job = http.post(
                "/v1/jobs",
                json={"dataset_id": dataset, "solver": "toy", "params": {"C": 0.1, "tol": 1e-12, "max_iter": 40000}},
            ).json()["id"]
            fractions = []

            def finished():
                state = http.get(f"/v1/jobs/{job}").json()
                fractions.append(state["progress"].get("fraction"))
                return state if state["status"] in ("succeeded", "failed", "canceled") else None

            done = wait_for(finished, timeout=120, interval=0.05, message="the toy job")
            assert done["status"] == "succeeded", done
            assert any(f is not None and 0.0 < f < 1.0 for f in fractions), fractions  # the spec's progress measure
            model = http.get(f"/v1/models/{done['model_id']}").json()
            assert model["solver"] == "toy" and model["kind"] == "linear" and model["stop_reason"] == "max_iter"
            assert model["stopping_rule"]["rule"] == "max_iter" and model["train_accuracy"] > 0.8
            trace = http.get(f"/v1/jobs/{job}/trace").json()["points"]
            assert trace and all("max_violation" in point for point in trace)

            converged = http.post(
                "/v1/jobs", json={"dataset_id": dataset, "solver": "toy", "params": {"tol": 0.05}}
            ).json()["id"]
            model = http.get(
                f"/v1/models/{wait_for(lambda: http.get(f'/v1/jobs/{converged}').json().get('model_id'), timeout=120)}"
            ).json()
            assert model["stopping_rule"]["text"] == "subgradient norm below tol 0.05"

            search = http.post(
                "/v1/jobs",
                json={
                    "dataset_id": dataset,
                    "solver": "toy",
                    "params": {"tol": 0.05, "search": {"C": [0.01, 1.0], "cv_folds": 3}},
                },
            ).json()["id"]
            searched = wait_for(
                lambda: (
                    (j := http.get(f"/v1/jobs/{search}").json())["status"] != "running"
                    and j["status"] != "queued"
                    and j
                ),
                timeout=180,
                message="the toy search",
            )
            assert searched["status"] == "succeeded", searched
            table = http.get(f"/v1/models/{searched['model_id']}").json()["search_results"]
            assert [row["C"] for row in table["settings"]] == [0.01, 1.0] and table["best"]["C"] in (0.01, 1.0)

            predicted = http.post(f"/v1/models/{done['model_id']}/predict", json={"instances": [{"1": 1.0}]})
            assert predicted.status_code == 200 and len(predicted.json()["labels"]) == 1
            for fmt in ("json", "liblinear", "onnx"):
                exported = http.get(f"/v1/models/{done['model_id']}/export", params={"format": fmt})
                assert exported.status_code == 200 and exported.content, fmt
            refused = http.get(f"/v1/models/{done['model_id']}/export", params={"format": "libsvm"})
            assert (
                refused.status_code == 409 and "export to json, liblinear, onnx" in refused.json()["error"]["message"]
            )

        # the clients follow the server: hingectl and HingeClassifier train the toy with no client change
        code, out, err = hingectl(base, "train", dataset, "--solver", "toy", "-p", "tol=0.05", "--watch")
        assert code == 0, err
        model_id = out.strip().splitlines()[-1]
        assert httpx.get(f"{base}/v1/models/{model_id}").json()["solver"] == "toy"
        code, out, err = hingectl(base, "train", dataset, "--solver", "toyy")
        assert code != 0 and "did you mean 'toy'?" in err, err
        indptr, indices, data, y = sparse_problem(600, 20, 6, seed=4)
        X = sp.csr_matrix((data, indices, indptr), shape=(600, 20))
        estimator = HingeClassifier(solver="toy", tol=0.05, max_iter=3000, url=base).fit(X, y)
        assert estimator.solver_ == "toy" and estimator.score(X, y) > 0.8
        assert estimator.service_params()["tol"] == 0.05 and "kernel" not in estimator.service_params()
        with pytest.raises(ValueError, match="does not apply to solver 'toy'"):
            HingeClassifier(solver="toy", loss="squared_hinge", url=base).fit(X, y)
        with pytest.raises(ValueError, match="one of the service's: dcd, cpa, ocas, smo, sampled_cuts, toy"):
            HingeClassifier(solver="toyy", url=base).fit(X, y)
    finally:
        _terminate(worker)
        _terminate(api)
        time.sleep(0.1)
        with redis.Redis.from_url(env["REDIS_URL"]) as client:
            client.flushdb()
