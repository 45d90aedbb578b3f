"""ocas with its rows split over two nodes of a Dask cluster (``params.distributed``), through the service: the same
model as on one machine, the network's share in the trace, and the refusals (issue 34, item 2).

The cluster is real and started here: a Dask scheduler and two ``dask worker`` processes, the second bound to
127.0.0.2 (another address of this machine, as a second machine would have), both with the service's settings
so that they read its object store. The split solve against the one-machine one, on data of its own, is in
``test_split_solve_matches_one_machine`` (no cluster: the nodes in this process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest

from core.schemas.solver_params import CpaParams, OcasParams
from service.embedded_redis import free_port
from tests.conftest import ROOT, Database, _terminate, private_service_env, start_api, start_worker, wait_ready
from tests.helpers import sparse_problem, to_svmlight, wait_for, wait_job
from tests.test_out_of_core import random_csr
from worker.solvers import cut_data, row_part
from worker.solvers.common import StopReason
from worker.solvers.cpa import solve_cpa
from worker.solvers.distributed_cpa import solve_cpa_split
from worker.solvers.distributed_ocas import LocalNodes, NodeLost, solve_ocas_split
from worker.solvers.ocas import solve_ocas
from worker.solvers.row_part import RowPart


def row_parts(indptr, indices, data, y, d: int, bounds) -> list[RowPart]:
    """The rows cut at ``bounds`` into a node's part each (bias feature 1)."""
    return [
        RowPart(
            indptr[a : b + 1] - indptr[a], indices[indptr[a] : indptr[b]], data[indptr[a] : indptr[b]], y[a:b], d, 1.0
        )
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]


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
    parts = row_parts(indptr, indices, data, y, d, bounds)
    split = solve_ocas_split(LocalNodes(parts, indices.size * 8), n_features=d, params=params)
    assert split.n_iter == one.n_iter and split.converged
    assert abs(split.objective - one.objective) <= 1e-6 * one.objective
    assert abs(split.extra["gap_rel"] - one.extra["gap_rel"]) <= 1e-6
    assert split.extra["data"] == {"form": "split", "nodes": n_nodes}
    assert all("comm_s" in point for point in split.trace)


@pytest.mark.unit
def test_split_cpa_is_cpa_with_full_passes(monkeypatch):
    """cpa over rows split on three nodes: the iterates of the one-machine solve that reads every row at every
    iteration (its listed passes off, as out of core), bit for bit up to the order the nodes' sums are added."""
    n, d = 5000, 300
    indptr, indices, data, y = random_csr(n, d, 20, seed=4)
    params = CpaParams(C=1.0, tol_rel=1e-4)
    with_lists = solve_cpa(indptr, indices, data, y, n_features=d, params=params)
    monkeypatch.setattr(cut_data.Data, "kind", "full passes only")  # cpa's listed passes need kind "memory"
    one = solve_cpa(indptr, indices, data, y, n_features=d, params=params)
    bounds = [0, 1700, 3300, n]
    parts = row_parts(indptr, indices, data, y, d, bounds)
    split = solve_cpa_split(LocalNodes(parts, indices.size * 8), n_features=d, params=params)
    assert split.n_iter == one.n_iter and split.converged
    assert abs(split.objective - one.objective) <= 1e-9 * one.objective
    assert abs(split.objective - with_lists.objective) <= 1e-4 * with_lists.objective
    assert split.extra["data"] == {"form": "split", "nodes": 3} and all("comm_s" in p for p in split.trace)


class LosingNodes(LocalNodes):
    """Local nodes, one of which stops answering at its ``lose_at``-th call."""

    def __init__(self, parts, data_bytes, lose_at: int) -> None:
        super().__init__(parts, data_bytes)
        self.calls = 0
        self.lose_at = lose_at

    def call_all(self, method: str, *args) -> list:
        self.calls += 1
        if self.calls >= self.lose_at:
            raise NodeLost(f"node 1 stopped answering during {method}")
        return super().call_all(method, *args)


@pytest.mark.unit
@pytest.mark.parametrize("lose_at", [12, 13, 14])  # during the outputs, the line search or the update
def test_a_node_lost_returns_the_best_point_so_far(lose_at):
    n, d = 3000, 100
    indptr, indices, data, y = random_csr(n, d, 15, seed=12)
    params = OcasParams(C=1.0, tol_rel=1e-6)
    parts = row_parts(indptr, indices, data, y, d, [0, 1500, 3000])
    result = solve_ocas_split(LosingNodes(parts, indices.size * 8, lose_at), n_features=d, params=params)
    assert result.stop_reason is StopReason.NODE_LOST and not result.converged and result.n_iter >= 2
    # the objective reported is that of the returned weights, and its gap is certified against the lower bound
    margins = y * (np.add.reduceat(data * result.w[indices], indptr[:-1]) + result.bias)
    objective = 0.5 * (result.w @ result.w + result.bias**2) + np.sum(np.maximum(0.0, 1.0 - margins))
    assert abs(objective - result.objective) <= 1e-9 * objective
    assert 0 < result.extra["gap_rel"] < 1 and result.extra["lower_bound"] <= objective


def _start(command: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        command, env=env, cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def _dask(*args: str) -> list[str]:
    return [sys.executable, "-m", "distributed.cli.dask_" + args[0], *args[1:]]


class SplitService:
    """A private API and worker whose jobs may split over a two-node Dask cluster, all started here."""

    def __init__(self, redis_url: str, data_dir) -> None:
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{free_port()}"
        self.env = private_service_env(
            redis_url, Database.SPLIT_TRAINING, data_dir, HINGE_DASK_SCHEDULER=self.address, HINGE_SHARD_BYTES="200000",
            HINGE_NODE_TIMEOUT="15",
        )  # fmt: skip
        scheduler_port = self.address.rsplit(":", 1)[1]
        self.scheduler = _start(
            _dask("scheduler", "--host", "127.0.0.1", "--port", scheduler_port, "--no-dashboard"), self.env
        )
        self.nodes = [self._node(host) for host in ("127.0.0.1", "127.0.0.2")]
        self.api = start_api(self.env, self.port)
        self.worker = start_worker(self.env)
        self.base = f"http://127.0.0.1:{self.port}"

    def _node(self, host: str) -> subprocess.Popen:
        command = _dask("worker", self.address, "--host", host, "--nworkers", "1", "--nthreads", "1")
        return _start([*command, "--no-dashboard", "--memory-limit", "0"], self.env)

    def kill_node(self, index: int) -> None:
        """SIGKILL a node's processes (its machine gone), then start another in its place."""
        os.killpg(self.nodes[index].pid, signal.SIGKILL)
        self.nodes[index].wait(10)

    def restart_node(self, index: int) -> None:
        self.nodes[index] = self._node(("127.0.0.1", "127.0.0.2")[index])
        _wait_for_nodes(self.address, 2)

    def stop(self) -> None:
        for proc in [self.worker, self.api, *self.nodes, self.scheduler]:
            _terminate(proc)


@pytest.fixture(scope="module")
def split_service(redis_server, tmp_path_factory):
    service = SplitService(redis_server.url, tmp_path_factory.mktemp("split"))
    try:
        wait_ready(service.base, service.api)
        _wait_for_nodes(service.address, 2)
        yield service
    finally:
        service.stop()


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
    with httpx.Client(base_url=split_service.base, timeout=60) as http:
        # three labels: one-vs-rest over the same nodes; about 700 KB of arrays, shards of 200 KB (the parser takes
        # its text in chunks of half a shard, so that shards are cut near that size): both nodes hold some
        content = to_svmlight(*sparse_problem(4000, 200, 12, seed=5, n_classes=3))
        dataset = http.post("/v1/datasets", files={"file": ("split.svm", content)}).json()

        def train(params: dict, solver: str = "ocas") -> tuple[dict, dict, list]:
            job = http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": solver, "params": params}).json()
            done = wait_job(http, job["id"], statuses=("succeeded", "failed"), timeout=240)
            assert done["status"] == "succeeded", done
            trace = http.get(f"/v1/jobs/{job['id']}/trace").json()["points"]
            return done, http.get(f"/v1/models/{done['model_id']}").json(), trace

        common = {"C": 0.5, "tol_rel": 1e-4}
        _, alone, _ = train(common)
        _, split, trace = train({**common, "distributed": {"nodes": 2}})
        _, cpa_split, cpa_trace = train({**common, "distributed": {"nodes": 2}}, solver="cpa")
        # Crammer and Singer's one problem over the three labels, its rows' classes on the nodes
        crammer_singer = {**common, "multiclass": "crammer_singer"}
        _, cs_alone, _ = train(crammer_singer)
        _, cs_split, cs_trace = train({**crammer_singer, "distributed": {"nodes": 2}})
        assert cs_split["stop_reason"] == cs_alone["stop_reason"] == "converged"
        assert cs_split["data_access"]["nodes"] == 2 and all("comm_s" in point for point in cs_trace)
        assert len(cs_split["objectives"]) == 1  # both within 1e-4 of the optimum
        assert abs(cs_split["objectives"][0] - cs_alone["objectives"][0]) <= 2e-4 * cs_alone["objectives"][0]
        assert cpa_split["solver"] == "cpa" and cpa_split["stop_reason"] == "converged"
        assert all("comm_s" in point for point in cpa_trace)
        for a, b in zip(cpa_split["objectives"], alone["objectives"], strict=True):  # both within 1e-4 of the optimum
            assert abs(a - b) <= 2e-4 * b
        assert split["params"]["distributed"] == {"nodes": 2, "on_node_lost": "regroup"}
        assert split["data_access"]["form"] == "split" and split["data_access"]["nodes"] == 2
        assert alone["data_access"] is None and not any(w["code"] == "fewer_nodes" for w in split["warnings"])
        # the rows really split (two shards or more a node): the nodes' sums are added in another order than one
        # machine's, and the rounding tips the cutting planes' path (here 108 / 115 / 114 iterations against
        # 114 / 113 / 112, objectives 5e-6 apart): both certified within tol_rel of the optimum, so within it of
        # each other
        assert split["stop_reason"] == alone["stop_reason"] == "converged"
        for a, b in zip(split["objectives"], alone["objectives"], strict=True):
            assert abs(a - b) <= 1e-4 * b
        for a, b in zip(split["n_iter_per_problem"], alone["n_iter_per_problem"], strict=True):
            assert abs(a - b) <= 0.15 * b
        assert trace and all(point["comm_s"] >= 0.0 for point in trace)
        # a data set of one shard: one node holds it all, and the model says so
        small = http.post("/v1/datasets", files={"file": ("small.svm", to_svmlight(*sparse_problem(300, 20, 4)))})
        job = http.post(
            "/v1/jobs",
            json={"dataset_id": small.json()["id"], "solver": "ocas", "params": {"distributed": {"nodes": 2}}},
        ).json()
        done = wait_job(http, job["id"], statuses=("succeeded", "failed"), timeout=120)
        one_shard = http.get(f"/v1/models/{done['model_id']}").json()
        assert one_shard["data_access"]["nodes"] == 1
        assert [w["code"] for w in one_shard["warnings"]] == ["fewer_nodes"], one_shard["warnings"]
        rows = [{"1": 1.0, "6": -0.5}, {"3": 2.0}, {"100": -1.0, "150": 0.25}]
        answers = [http.post(f"/v1/models/{m['id']}/predict", json={"instances": rows}).json() for m in (split, alone)]
        assert answers[0]["labels"] == answers[1]["labels"]
        assert np.allclose(
            answers[0]["scores"], answers[1]["scores"], atol=0.02
        )  # two models within 1e-4 of one optimum


def _long_split_job(http, name: str, seed: int, on_node_lost: str = "stop") -> str:
    """A split ocas job that would take long (a gap it cannot certify soon, cuts dropped as soon as inactive), once
    it has made 3 iterations: its id."""
    content = to_svmlight(*sparse_problem(20000, 2000, 30, seed=seed, noise=2.0))
    dataset = http.post("/v1/datasets", files={"file": (name, content)}).json()["id"]
    split = {"nodes": 2, "on_node_lost": on_node_lost}
    params = {"C": 100.0, "tol_rel": 1e-12, "max_inactive": 1, "max_iter": 100000, "distributed": split}
    job = http.post("/v1/jobs", json={"dataset_id": dataset, "solver": "ocas", "params": params}).json()["id"]
    wait_for(
        lambda: len(http.get(f"/v1/jobs/{job}/trace").json()["points"]) >= 3,
        timeout=180,
        interval=0.25,
        message="iterations",
    )
    return job


def test_a_node_lost_mid_training_ends_the_job_with_the_best_model_so_far(split_service):
    """``on_node_lost: stop``: the job ends at once with its best point so far."""
    with httpx.Client(base_url=split_service.base, timeout=60) as http:
        job = _long_split_job(http, "long.svm", seed=9)
        assert http.get(f"/v1/jobs/{job}").json()["status"] == "running"
        split_service.kill_node(1)
        try:
            done = wait_job(http, job, timeout=120)
        finally:
            split_service.restart_node(1)
        assert done["status"] == "succeeded", done
        model = http.get(f"/v1/models/{done['model_id']}").json()
        assert model["stop_reason"] == "node_lost" and model["stopping_rule"]["rule"] == "node_lost", model
        assert model["gap_rel"] is not None and model["gap_rel"] > 0 and model["train_accuracy"] > 0.6
        assert any(w["code"] == "not_converged" for w in model.get("warnings") or done.get("warnings") or [])
        # the model is a usable one
        answer = http.post(f"/v1/models/{done['model_id']}/predict", json={"instances": [{"1": 1.0}]}).json()
        assert answer["labels"][0] in (-1, 1)


def test_a_hung_node_is_left_out_and_one_vs_rest_goes_on_to_the_one_machine_model(split_service):
    """A node that stops answering (its process stopped, SIGSTOP: alive, connected, silent) counts as lost once a
    call waits HINGE_NODE_TIMEOUT (15 s here) plus 10 times the slowest answer so far; with ``on_node_lost``
    ``regroup`` (the default) the rows are loaded again by the node left (the hung one, still connected, left out)
    and one-vs-rest goes on: every label gets its model, the one trained on one machine."""
    with httpx.Client(base_url=split_service.base, timeout=60) as http:
        content = to_svmlight(*sparse_problem(12000, 1000, 30, seed=13, noise=1.0, n_classes=3))
        dataset = http.post("/v1/datasets", files={"file": ("hung.svm", content)}).json()["id"]
        common = {"C": 1.0, "tol_rel": 1e-4}

        def submit(params: dict) -> str:
            return http.post("/v1/jobs", json={"dataset_id": dataset, "solver": "ocas", "params": params}).json()["id"]

        job = submit({**common, "distributed": {"nodes": 2}})
        wait_for(
            lambda: len(http.get(f"/v1/jobs/{job}/trace").json()["points"]) >= 3,
            timeout=180,
            interval=0.25,
            message="steps",
        )
        node = split_service.nodes[1]
        os.killpg(node.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            done = wait_job(http, job, timeout=240)
            waited = time.monotonic() - stopped
        finally:
            os.killpg(node.pid, signal.SIGCONT)
            split_service.kill_node(1)
            split_service.restart_node(1)
        assert done["status"] == "succeeded", done
        assert waited >= 15.0, waited  # it waited for the node timeout before leaving the node out
        model = http.get(f"/v1/models/{done['model_id']}").json()
        assert model["stop_reason"] == "converged", model
        access = {key: value for key, value in model["data_access"].items() if value is not None}
        assert access == {"form": "split", "nodes": 1, "nodes_lost": 1}, access
        assert [w["code"] for w in model["warnings"]] == ["nodes_lost"], model["warnings"]
        alone = wait_job(http, submit(common), timeout=240)
        one_machine = http.get(f"/v1/models/{alone['model_id']}").json()
        assert len(model["objectives"]) == 3
        for a, b in zip(model["objectives"], one_machine["objectives"], strict=True):  # both within 1e-4 of it
            assert abs(a - b) <= 2e-4 * b


def test_a_cancel_reaches_a_job_waiting_on_a_hung_node(split_service):
    """A cancel while a call waits on a node that does not answer (SIGSTOP) ends the job at once, not after the
    node timeout: the wait is sliced and looks at the job's stop between slices."""
    with httpx.Client(base_url=split_service.base, timeout=60) as http:
        job = _long_split_job(http, "cancel.svm", seed=11)
        node = split_service.nodes[1]
        os.killpg(node.pid, signal.SIGSTOP)
        try:
            time.sleep(1.0)  # a call is waiting on the stopped node by now
            asked = time.monotonic()
            assert http.post(f"/v1/jobs/{job}/cancel").status_code == 202
            done = wait_job(http, job, timeout=60)
            waited = time.monotonic() - asked
        finally:
            os.killpg(node.pid, signal.SIGCONT)
            split_service.kill_node(1)
            split_service.restart_node(1)
        assert waited < 10.0, waited  # the node timeout here is 15 s: the cancel did not wait for it
        assert done["status"] in ("succeeded", "canceled"), done
        if done["status"] == "succeeded":  # a canceled job keeps its best model
            assert http.get(f"/v1/models/{done['model_id']}").json()["stop_reason"] == "canceled"


def test_an_exception_of_a_nodes_own_code_loses_no_node(split_service):
    """A node that answers with an exception of its own code (here: a call before ``begin``) has not gone: the
    driver raises NodeCodeError naming the node, the method and the exception, counts no node lost, and the same
    nodes answer the next calls (a regroup would only have run the same code on the other nodes)."""
    import json

    import redis

    from core.storage import keys
    from core.storage.documents import DatasetRecord
    from worker.runtime.cluster import DaskNodes, NodeCodeError

    with httpx.Client(base_url=split_service.base, timeout=60) as http:
        content = to_svmlight(*sparse_problem(3000, 40, 8, seed=21))
        dataset = http.post("/v1/datasets", files={"file": ("own-code.svm", content)}).json()["id"]
    client = redis.Redis.from_url(split_service.env["REDIS_URL"])
    try:
        record = DatasetRecord.from_document(json.loads(client.get(keys.dataset(dataset))))
    finally:
        client.close()
    d = record.n_features
    _wait_for_nodes(split_service.address, 2)  # a node killed and started again by an earlier test is back
    with DaskNodes(split_service.address, 2, record, d, 1.0) as nodes:
        assert nodes.n_nodes == 2
        with pytest.raises(NodeCodeError, match=r"\(tcp://127\.0\.0\.\d:\d+\) raised RuntimeError during start: begin"):
            nodes.call_all("start", np.zeros(d + 1))
        assert nodes.lost is None
        nodes.begin(float(max(record.labels, key=float)))
        answers = nodes.call_all("loss", np.zeros(d + 1))
    assert len(answers) == 2


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
