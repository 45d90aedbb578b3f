"""ocas with its rows split over two nodes of a Dask cluster (``params.distributed``), through the service: the same
model as on one machine, the network's share in the trace, and the refusals (issue 34, item 2).

The cluster is real and started here: a Dask scheduler and two ``dask worker`` processes, the second bound to
127.0.0.2 (another address of this machine, as a second machine would have), both with the service's settings
so that they read its object store. The split solve against the one-machine one, on data of its own, is in
``test_split_solve_matches_one_machine`` (no cluster: the nodes in this process)."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import numpy as np
import pytest

from core.schemas.solver_params import OcasParams
from service.embedded_redis import free_port
from tests.conftest import ROOT, _terminate, private_service_env, start_api, start_worker, wait_ready
from tests.helpers import sparse_problem, to_svmlight, wait_for
from tests.test_out_of_core import random_csr
from worker.solvers import row_part
from worker.solvers.distributed_ocas import LocalNodes, solve_ocas_split
from worker.solvers.ocas import solve_ocas
from worker.solvers.row_part import RowPart


@pytest.mark.unit
@pytest.mark.parametrize("n_nodes", [1, 3])
def test_split_solve_matches_one_machine(monkeypatch, n_nodes):
    """Rows split over nodes (here in this process), breakpoints gathered only after a round of pivots: the
    iterations, objective and certified gap of the one-machine solve."""
    monkeypatch.setattr(row_part, "GATHER", 50)  # force the pivot rounds of the split line search
    n, d = 6000, 300
    indptr, indices, data, y = random_csr(n, d, 25, seed=11)
    params = OcasParams(C=1.0, tol_rel=1e-4)
    one = solve_ocas(indptr, indices, data, y, n_features=d, params=params)
    bounds = np.linspace(0, n, n_nodes + 1).astype(int)
    parts = [
        RowPart(
            indptr[a : b + 1] - indptr[a], indices[indptr[a] : indptr[b]], data[indptr[a] : indptr[b]], y[a:b], d, 1.0
        )
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    split = solve_ocas_split(LocalNodes(parts, indices.size * 8), n_features=d, params=params)
    assert split.n_iter == one.n_iter and split.converged
    assert abs(split.objective - one.objective) <= 1e-6 * one.objective
    assert abs(split.extra["gap_rel"] - one.extra["gap_rel"]) <= 1e-6
    assert split.extra["data"] == {"form": "split", "nodes": n_nodes}
    assert all("comm_s" in point for point in split.trace)


def _start(command: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        command, env=env, cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def _dask(*args: str) -> list[str]:
    return [sys.executable, "-m", "distributed.cli.dask_" + args[0], *args[1:]]


@pytest.fixture()
def split_service(redis_server, tmp_path):
    """A private API and worker whose jobs may split over a two-node Dask cluster started here."""
    port = free_port()
    scheduler_port = free_port()
    address = f"tcp://127.0.0.1:{scheduler_port}"
    env = private_service_env(redis_server.url, 7, tmp_path, HINGE_DASK_SCHEDULER=address, HINGE_SHARD_BYTES="200000")
    processes = [
        _start(_dask("scheduler", "--host", "127.0.0.1", "--port", str(scheduler_port), "--no-dashboard"), env)
    ]
    for host in ("127.0.0.1", "127.0.0.2"):
        processes.append(
            _start(
                _dask(
                    "worker",
                    address,
                    "--host",
                    host,
                    "--nworkers",
                    "1",
                    "--nthreads",
                    "1",
                    "--no-dashboard",
                    "--memory-limit",
                    "0",
                ),
                env,
            )
        )
    api = start_api(env, port)
    worker = start_worker(env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base, api)
        _wait_for_nodes(address, 2)
        yield base
    finally:
        for proc in [worker, api, *processes]:
            _terminate(proc)


def _wait_for_nodes(address: str, n: int) -> None:
    from distributed import Client

    deadline = time.monotonic() + 60
    while True:
        try:
            with Client(address, timeout=10, set_as_default=False) as client:
                client.wait_for_workers(n, timeout=max(1.0, deadline - time.monotonic()))
                return
        except (OSError, TimeoutError):
            if time.monotonic() > deadline:
                raise


def test_a_job_split_over_two_nodes_trains_the_one_machine_model(split_service):
    with httpx.Client(base_url=split_service, timeout=60) as http:
        # three labels: one-vs-rest over the same nodes; about 700 KB of arrays, shards of 200 KB: one node has two
        content = to_svmlight(*sparse_problem(4000, 200, 12, seed=5, n_classes=3))
        dataset = http.post("/v1/datasets", files={"file": ("split.svm", content)}).json()

        def train(params: dict) -> tuple[dict, dict, list]:
            job = http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "ocas", "params": params}).json()
            done = wait_for(
                lambda: (s := http.get(f"/v1/jobs/{job['id']}").json())["status"] in ("succeeded", "failed") and s,
                timeout=240,
                message="the job",
            )
            assert done["status"] == "succeeded", done
            trace = http.get(f"/v1/jobs/{job['id']}/trace").json()["points"]
            return done, http.get(f"/v1/models/{done['model_id']}").json(), trace

        common = {"C": 0.5, "tol_rel": 1e-4}
        _, alone, _ = train(common)
        _, split, trace = train({**common, "distributed": {"nodes": 2}})
        assert split["params"]["distributed"] == {"nodes": 2}
        assert split["n_iter_per_problem"] == alone["n_iter_per_problem"]
        for a, b in zip(split["objectives"], alone["objectives"], strict=True):
            assert abs(a - b) <= 1e-6 * b
        assert abs(split["gap_rel"] - alone["gap_rel"]) <= 1e-6
        assert trace and all(point["comm_s"] >= 0.0 for point in trace)
        rows = [{"1": 1.0, "6": -0.5}, {"3": 2.0}, {"100": -1.0, "150": 0.25}]
        answers = [http.post(f"/v1/models/{m['id']}/predict", json={"instances": rows}).json() for m in (split, alone)]
        assert answers[0]["labels"] == answers[1]["labels"]
        assert np.allclose(answers[0]["scores"], answers[1]["scores"], rtol=1e-4, atol=1e-6)


def test_a_split_job_without_a_cluster_is_refused(http):
    content = to_svmlight(*sparse_problem(200, 10, 4, seed=1))
    dataset = http.post("/v1/datasets", files={"file": ("plain.svm", content)}).json()["id"]
    refused = http.post(
        "/v1/jobs", json={"dataset_id": dataset, "solver": "ocas", "params": {"distributed": {"nodes": 2}}}
    )
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert "HINGE_DASK_SCHEDULER" in error["message"] and "distributed" in str(error.get("details") or error)
    bad = http.post("/v1/jobs", json={"dataset_id": dataset, "solver": "ocas", "params": {"distributed": {"nodes": 0}}})
    assert bad.status_code == 422 and "nodes" in bad.text
    other = http.post(
        "/v1/jobs", json={"dataset_id": dataset, "solver": "dcd", "params": {"distributed": {"nodes": 2}}}
    )
    assert other.status_code == 422 and "distributed" in other.text
