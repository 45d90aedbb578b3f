"""A model's arrays written ahead of its record (worker.runtime.model_staging): claimed and committed when the outcome's
arrays are the ones staged, removed otherwise; a write that does not fit is raised when claimed."""

from __future__ import annotations

import numpy as np
import pytest
import redis

from core.storage.capacity import StorageFull
from core.storage.documents import ModelRecord
from core.storage.records import models_in
from worker.runtime.model_staging import ModelStaging


@pytest.fixture()
def client(redis_server):
    connection = redis.Redis.from_url(redis_server.url)
    yield connection
    connection.close()


def _arrays(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    weights = rng.normal(size=(4, 5_000))
    weights[rng.random(weights.shape) < 0.6] = 0  # stored in the non-zero encoding
    return {"weights": weights, "offsets": rng.normal(size=4)}


def _record(model_id: str) -> ModelRecord:
    return ModelRecord.from_document(
        {
            "id": model_id,
            "tenant": "t_stage",
            "created_at": "2026-11-27T00:00:00.000000Z",
            "job_id": "job_x",
            "dataset_id": "ds_x",
            "solver": "dcd",
            "params": {},
            "kind": "linear",
            "labels": [0.0, 1.0, 2.0, 3.0],
            "n_features": 5_000,
            "zero_based": False,
            # the training report's figures every stored model has
            "n_iter": 1,
            "converged": True,
            "stop_reason": "converged",
            "training_seconds": 0.1,
            "objective": 1.0,
            "train_accuracy": 1.0,
        }
    )


def _staged_keys(client, model_id: str) -> list:
    return list(client.scan_iter(f"hinge:model:{model_id}:array:*"))


def test_staged_arrays_are_claimed_by_the_same_arrays_and_committed(client):
    store = models_in(client, None, chunk_bytes=16_384)
    staging = ModelStaging(store, "t_stage")
    arrays = _arrays()
    staging.start(arrays)
    staging.start(_arrays(1))  # only the first call of a job counts
    claimed = staging.claim(arrays)
    assert claimed is not None
    model_id, manifest = claimed
    assert manifest["weights"]["encoding"] == "nonzero" and len(_staged_keys(client, model_id)) > 1
    assert all(client.ttl(key) > 0 for key in _staged_keys(client, model_id))  # staged: expire unless committed
    record = store.commit(_record(model_id), manifest)
    staging.discard()  # claimed: nothing to remove
    assert all(client.ttl(key) == -1 for key in _staged_keys(client, model_id))
    back = store.load_arrays(store.get(record.id, "t_stage"))
    assert all(back[name].tobytes() == arrays[name].tobytes() for name in arrays)


def test_other_arrays_or_no_model_remove_what_was_staged(client):
    store = models_in(client, None, chunk_bytes=16_384)
    for outcome in ("other arrays", "no model", "job ended"):
        staging = ModelStaging(store, "t_stage")
        arrays = _arrays()
        staging.start(arrays)
        if outcome == "other arrays":
            assert staging.claim(dict(arrays, weights=arrays["weights"].copy())) is None
        elif outcome == "no model":
            assert staging.claim(None) is None
        else:
            staging.discard()
        assert staging.model_id is not None and _staged_keys(client, staging.model_id) == [], outcome


def test_a_model_that_does_not_fit_is_raised_when_claimed_and_leaves_nothing(client):
    store = models_in(client, None, chunk_bytes=16_384)
    staging = ModelStaging(store, "t_stage")
    before = client.config_get("maxmemory")["maxmemory"]
    used = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory", used + 64 * 1024)  # less room than the arrays
    try:
        arrays = {"weights": np.random.default_rng(2).normal(size=(8, 50_000)), "offsets": np.zeros(8)}
        staging.start(arrays)
        with pytest.raises(StorageFull):
            staging.claim(arrays)
    finally:
        client.config_set("maxmemory", before)
    assert staging.model_id is not None and _staged_keys(client, staging.model_id) == []
    staging.discard()  # after a failed write: nothing to do
