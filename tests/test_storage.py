"""Redis storage: arrays in chunks round-trip exactly, records appear whole or not at all, tenants are apart."""

from __future__ import annotations

import numpy as np
import pytest
import redis

from service.storage import arrays, keys
from service.storage.records import dataset_store


@pytest.fixture()
def client(redis_server):
    connection = redis.Redis.from_url(redis_server.url)
    yield connection
    for key in connection.scan_iter("hinge:dataset:ds_storage*"):
        connection.delete(key)
    connection.close()


def test_arrays_round_trip_across_many_chunks(client):
    rng = np.random.default_rng(0)
    original = {
        "data": rng.normal(size=10_001),
        "indices": rng.integers(0, 2**31 - 1, size=3_333, dtype=np.int32),
        "indptr": np.arange(1_001, dtype=np.int64),
        "empty": np.zeros(0),
    }
    store = dataset_store(client, chunk_bytes=1_000)
    store.create({"id": "ds_storage_a", "tenant": "t1", "name": "a"}, original)
    record = store.get("ds_storage_a", "t1")
    assert record["arrays"]["data"]["chunks"] == 81  # 80,008 bytes in values of at most 1,000
    back = store.load_arrays(record)
    for name, array in original.items():
        assert back[name].dtype == array.dtype and np.array_equal(back[name], array)
    staged = arrays.chunk_keys(keys.dataset("ds_storage_a"), record["arrays"])
    assert all(client.ttl(key) == -1 for key in staged), "committed chunks last"


def test_a_failed_write_leaves_nothing(client, monkeypatch):
    store = dataset_store(client, chunk_bytes=1_000)
    real_persist = arrays.persist_commands

    def failing_persist(pipe, owner, manifest):
        real_persist(pipe, owner, manifest)
        raise ConnectionError("lost Redis in the middle of the commit")

    monkeypatch.setattr(arrays, "persist_commands", failing_persist)
    with pytest.raises(ConnectionError):
        store.create({"id": "ds_storage_b", "tenant": "t1", "name": "b"}, {"data": np.ones(5_000)})
    assert list(client.scan_iter("hinge:dataset:ds_storage_b*")) == []
    assert "ds_storage_b" not in [r["id"] for r in store.list("t1")[0]]


def test_records_are_per_tenant(client):
    store = dataset_store(client, chunk_bytes=1_000)
    store.create({"id": "ds_storage_c", "tenant": "t1", "name": "c"}, {"y": np.ones(3)})
    assert store.get("ds_storage_c", "t2") is None
    assert store.delete("ds_storage_c", "t2") is False
    assert store.get("ds_storage_c", "t1") is not None
    assert store.delete("ds_storage_c", "t1") is True
    assert list(client.scan_iter("hinge:dataset:ds_storage_c*")) == []
