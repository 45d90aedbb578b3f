"""A deleted data set leaves no copy in any machine's cache (``core.storage.cache``: ``forget`` when this machine's
API deletes it, ``sweep`` by the idle workers for the deletions of other machines' APIs)."""

from __future__ import annotations

import signal

import pytest

from core.storage import keys
from tests.cluster import Cluster
from tests.helpers import sparse_problem, to_svmlight, upload, wait_for, wait_job

pytestmark = pytest.mark.service


def test_a_deleted_data_set_leaves_no_copy_in_the_cache(tmp_path):
    cluster = Cluster(tmp_path).start(workers=1)
    try:
        copies = cluster.root / "data" / "cache" / "datasets"

        def cached() -> set[str]:
            return {p.name for p in copies.iterdir() if not p.name.startswith(".")}

        with cluster.http() as http:
            ids = []
            for seed in (1, 2, 3):
                dataset = upload(http, to_svmlight(*sparse_problem(200, 20, 5, seed=seed))).json()["id"]
                job = http.post("/v1/jobs", json={"dataset_id": dataset, "solver": "dcd"}).json()["id"]
                assert wait_job(http, job)["status"] == "succeeded"
                ids.append(dataset)
            assert cached() == set(ids)
            # deleted through this machine's API: its copy and its lock file go at once
            assert http.delete(f"/v1/datasets/{ids[0]}").status_code == 204
            assert cached() == set(ids[1:]) and not (copies / ".locks" / ids[0]).exists()
        # deleted by another machine's API (the record gone, this machine's copy left): the next idle worker's sweep
        # (its first comes as it starts) removes the copy, not the others'
        worker = cluster.workers[0]
        cluster.kill_worker(worker, signal.SIGTERM, group=True)
        cluster.forget_worker(worker)
        with cluster.client() as client:
            client.delete(keys.dataset(ids[1]))
        assert cached() == set(ids[1:])
        cluster.start_worker()
        # (the sweep removes the copy, then its lock file: both are waited for, not read in between)
        wait_for(
            lambda: cached() == {ids[2]} and not (copies / ".locks" / ids[1]).exists(),
            timeout=120,
            interval=0.2,
            message="the sweep of the deleted copy and its lock file",
        )
    finally:
        cluster.stop()
