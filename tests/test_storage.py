"""Redis storage: arrays in chunks round-trip exactly, records appear whole or not at all, tenants are apart.

(Arrays in Redis are what models keep, and what data sets kept before the object store; tests/test_object_store.py
covers the shards.)"""

from __future__ import annotations

import numpy as np
import pytest
import redis

from core.storage import arrays, keys
from core.storage.documents import DatasetRecord
from core.storage.records import datasets_in


def record_of(record_id: str, tenant: str) -> DatasetRecord:
    """A data set's metadata with placeholder figures (these tests are about its arrays)."""
    return DatasetRecord(
        id=record_id,
        tenant=tenant,
        created_at="2026-01-01T00:00:00.000000Z",
        format="svmlight",
        name=record_id,
        bytes=0,
        sha256="",
        n_samples=0,
        n_features=0,
        nnz=0,
        labels={},
        has_qid=False,
        zero_based=False,
        compressed=False,
        text_bytes=0,
        feature_names=None,
        value_dtype="float64",
    )


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
    store = datasets_in(client, None, chunk_bytes=1_000)
    store.create(record_of("ds_storage_a", "t1"), original)
    record = store.get("ds_storage_a", "t1")
    assert record is not None and record.arrays["data"]["chunks"] == 81  # 80,008 bytes in values of at most 1,000
    back = store.load_arrays(record)
    for name, array in original.items():
        assert back[name].dtype == array.dtype and np.array_equal(back[name], array)
    staged = arrays.chunk_keys(keys.dataset("ds_storage_a"), record.arrays)
    assert all(client.ttl(key) == -1 for key in staged), "committed chunks last"


def test_a_failed_write_leaves_nothing(client, monkeypatch):
    store = datasets_in(client, None, chunk_bytes=1_000)
    real_persist = arrays.persist_commands

    def failing_persist(pipe, owner, manifest):
        real_persist(pipe, owner, manifest)
        raise ConnectionError("lost Redis in the middle of the commit")

    monkeypatch.setattr(arrays, "persist_commands", failing_persist)
    with pytest.raises(ConnectionError):
        store.create(record_of("ds_storage_b", "t1"), {"data": np.ones(5_000)})
    assert list(client.scan_iter("hinge:dataset:ds_storage_b*")) == []
    assert "ds_storage_b" not in [r.id for r in store.list("t1")[0]]


def test_records_are_per_tenant(client):
    store = datasets_in(client, None, chunk_bytes=1_000)
    store.create(record_of("ds_storage_c", "t1"), {"y": np.ones(3)})
    assert store.get("ds_storage_c", "t2") is None
    assert store.delete("ds_storage_c", "t2") is False
    assert store.get("ds_storage_c", "t1") is not None
    assert store.delete("ds_storage_c", "t1") is True
    assert list(client.scan_iter("hinge:dataset:ds_storage_c*")) == []


def test_append_only_file_is_compacted_after_large_writes_not_during_them(tmp_path):
    """The embedded Redis never starts a rewrite on its own; the store starts one after a record once the file has doubled."""
    import time

    from core.storage import aof
    from service.embedded_redis import EmbeddedRedis

    server = EmbeddedRedis(tmp_path / "redis").start()
    connection = redis.Redis.from_url(server.url)
    try:
        assert connection.config_get("auto-aof-rewrite-percentage")["auto-aof-rewrite-percentage"] == "0"
        store = datasets_in(connection, None, chunk_bytes=1 << 20)
        payload = {"data": np.arange(1_000_000, dtype=np.float64)}  # 8 MB
        for i in range(3):  # 24 MB written: Redis's own rule (64 MB minimum) would not rewrite yet
            store.create(record_of(f"ds_aof{i}", "t"), payload)
        info = connection.info("persistence")
        assert info["aof_base_size"] == 0 and info["aof_current_size"] > 24e6  # no rewrite so far
        # with a 16 MB minimum the next record's commit finds the file doubled since the last rewrite
        assert aof.compact_if_due(connection, min_bytes=16 << 20)
        deadline = time.monotonic() + 30
        while connection.info("persistence")["aof_rewrite_in_progress"] and time.monotonic() < deadline:
            time.sleep(0.05)
        info = connection.info("persistence")
        assert info["aof_base_size"] > 24e6 and info["aof_last_bgrewrite_status"] == "ok"
        assert not aof.compact_if_due(connection, min_bytes=16 << 20)  # base = current now: not due
        stored = store.get("ds_aof2", "t")
        assert stored is not None and np.array_equal(store.load_arrays(stored)["data"], payload["data"])
    finally:
        connection.close()
        server.stop()


@pytest.mark.parametrize("background", [False, True])
def test_staged_arrays_written_piece_by_piece_round_trip_or_vanish(client, background):
    rng = np.random.default_rng(3)
    data = rng.normal(size=5_000).astype(np.float32)
    indices = rng.integers(0, 1000, size=5_000, dtype=np.int32)
    store = datasets_in(client, None, chunk_bytes=1_000)
    staged = store.staging("ds_storage_p", background=background)
    try:
        for start in range(0, 5_000, 333):  # pieces that straddle chunk boundaries
            staged.append("data", data[start : start + 333])
            staged.append("indices", indices[start : start + 333])
        staged.reset()  # a parse that starts over: nothing of the first attempt stays
        assert not list(client.scan_iter("hinge:dataset:ds_storage_p*"))
        for start in range(0, 5_000, 777):
            staged.append("data", data[start : start + 777])
            staged.append("indices", indices[start : start + 777])
        manifest = staged.manifest()
    finally:
        staged.close()
    assert manifest["data"] == {"dtype": "<f4", "shape": [5_000], "chunks": 20}
    assert all(0 < client.ttl(key) for key in arrays.chunk_keys(keys.dataset("ds_storage_p"), manifest))
    record = store.commit(record_of("ds_storage_p", "t1"), manifest)
    back = store.load_arrays(record)
    assert np.array_equal(back["data"], data) and np.array_equal(back["indices"], indices)
    assert back["data"].dtype == np.float32


@pytest.mark.parametrize("background", [False, True])
def test_an_array_of_one_repeated_element_is_not_written(client, background):
    """a9a's values are all 1: counted, not sent; read back bit for bit, as a whole or chunk by chunk."""
    n = arrays.FILL_MIN_BYTES  # float32: 4 times the smallest size
    store = datasets_in(client, None, chunk_bytes=1_000)
    staged = store.staging("ds_storage_f", background=background)
    try:
        staged.append("data", np.zeros(0, dtype=np.float32))  # an empty first piece decides nothing
        for start in range(0, n, 999):
            staged.append("data", np.ones(min(999, n - start), dtype=np.float32))
        staged.append("indptr", np.zeros(1, dtype=np.int64))
        staged.append("indptr", np.arange(1, n + 1, dtype=np.int64))  # repeated at first only: written
        manifest = staged.manifest()
    finally:
        staged.close()
    assert manifest["data"] == {"dtype": "<f4", "shape": [n], "chunks": 0, "fill": np.float32(1).tobytes().hex()}
    assert manifest["indptr"]["chunks"] > 0 and "fill" not in manifest["indptr"]
    assert not list(client.scan_iter("hinge:dataset:ds_storage_f:*data*")), "no chunk of the values in Redis"
    assert list(client.scan_iter("hinge:dataset:ds_storage_f:*indptr*")), "(the pattern finds the chunks there are)"
    record = store.commit(record_of("ds_storage_f", "t1"), manifest)
    back = store.load_arrays(record)
    assert back["data"].dtype == np.float32 and np.array_equal(back["data"], np.ones(n, dtype=np.float32))
    np.testing.assert_array_equal(back["indptr"], np.arange(n + 1))
    streamed = b"".join(store.iter_array_chunks(record, "data"))
    assert streamed == np.ones(n, dtype=np.float32).tobytes()


def test_elements_that_differ_late_or_only_in_their_bits_are_written(client):
    n = arrays.FILL_MIN_BYTES // 8 * 2
    cases = {
        "late": np.concatenate([np.full(n, 2.5), [3.0]]),  # repeated for n elements, then not
        "signed_zero": np.concatenate([np.zeros(n), [-0.0]]),  # equal values, other bits
        "small": np.ones(arrays.FILL_MIN_BYTES // 8 - 1),  # repeated, but below the smallest size
    }
    store = datasets_in(client, None, chunk_bytes=4_096)
    staged = store.staging("ds_storage_g")
    for name, values in cases.items():
        for start in range(0, values.size, 1_000):
            staged.append(name, values[start : start + 1_000])
    manifest = staged.manifest()
    staged.close()
    assert all("fill" not in manifest[name] and manifest[name]["chunks"] > 0 for name in cases), manifest
    back = store.load_arrays(store.commit(record_of("ds_storage_g", "t1"), manifest))
    for name, values in cases.items():
        assert back[name].view(np.int64).tolist() == values.view(np.int64).tolist(), name


def test_a_whole_array_of_one_repeated_element_is_stored_as_that_element(client):
    store = datasets_in(client, None, chunk_bytes=1_000)
    values = np.full(arrays.FILL_MIN_BYTES // 8, -0.0)
    store.create(record_of("ds_storage_h", "t1"), {"data": values, "y": np.ones(3)})
    record = store.get("ds_storage_h", "t1")
    assert record is not None and record.arrays["data"]["chunks"] == 0 and "fill" not in record.arrays["y"]
    back = store.load_arrays(record)
    assert back["data"].view(np.int64).tolist() == values.view(np.int64).tolist()


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_mostly_zero_arrays_are_stored_as_their_non_zero_elements_and_read_back_bit_for_bit(client, dtype):
    rng = np.random.default_rng(0)
    weights = rng.normal(size=(7, 3_001)).astype(dtype)  # 7 classes' weights, an odd size (a partial mask byte)
    weights[rng.random(weights.shape) < 0.6] = 0
    flat = weights.reshape(-1)
    flat[5] = -0.0 if dtype is not np.int64 else flat[5]  # a negative zero is kept, sign bit and all
    store = datasets_in(client, None, chunk_bytes=4_096)  # several chunks
    counted_before = int(client.hget(keys.dataset_stats(), "bytes") or 0)
    record = store.create(
        record_of(f"ds_storage_nz_{np.dtype(dtype).name}", "t1"), {"weights": weights, "dense": rng.normal(size=9_000)}
    )
    entry = record.arrays["weights"]
    n_nonzero = int(np.count_nonzero(flat.view(f"u{flat.itemsize}")))
    assert (
        entry["encoding"] == "nonzero" and entry["stored_bytes"] == -(-flat.size // 64) * 8 + n_nonzero * flat.itemsize
    )
    assert entry["chunks"] == -(-entry["stored_bytes"] // 4_096)
    assert "encoding" not in record.arrays["dense"]  # no zeros: raw bytes
    back = store.load_arrays(record)
    assert back["weights"].dtype == weights.dtype and back["weights"].shape == weights.shape
    assert back["weights"].tobytes() == weights.tobytes()
    assert b"".join(store.iter_array_chunks(record, "weights")) == weights.tobytes()
    counted = int(client.hget(keys.dataset_stats(), "bytes")) - counted_before
    assert counted == entry["stored_bytes"] + 9_000 * 8  # what Redis holds is what is counted


def test_the_non_zero_encoding_is_used_only_where_it_saves_a_quarter_of_the_bytes(client):
    n = arrays.FILL_MIN_BYTES // 8 * 4
    few_zeros = np.arange(1, n + 1, dtype=np.float64)
    few_zeros[: n // 5] = 0  # 20% zero: saves less than a quarter
    many_zeros = np.arange(1, n + 1, dtype=np.float64)
    many_zeros[: n // 3] = 0
    small = np.zeros(arrays.FILL_MIN_BYTES // 8 - 2)
    small[0] = 1.0
    manifest = arrays.write_staged(client, "owner:nz", {"few": few_zeros, "many": many_zeros, "small": small}, 1 << 20)
    assert "encoding" not in manifest["few"] and "encoding" not in manifest["small"]
    assert manifest["many"]["encoding"] == "nonzero"
    back = arrays.read(client, "owner:nz", manifest)
    for name, values in (("few", few_zeros), ("many", many_zeros), ("small", small)):
        assert back[name].tobytes() == values.tobytes(), name


def test_an_array_in_an_unknown_encoding_is_refused_by_name(client):
    weights = np.zeros(arrays.FILL_MIN_BYTES)
    weights[3] = 1.5
    manifest = arrays.write_staged(client, "owner:enc", {"w": weights}, 1 << 20)
    assert manifest["w"]["encoding"] == "nonzero"
    manifest["w"]["encoding"] = "from-the-future"
    with pytest.raises(KeyError, match="encoding 'from-the-future'"):
        arrays.read(client, "owner:enc", manifest)


@pytest.mark.parametrize("background", [False, True])
def test_integer_chunks_are_stored_narrow_and_read_back_bit_for_bit(client, background):
    """a9a's column indices fit a byte: Redis gets one byte an element; chunks that do not fit stay wider."""
    rng = np.random.default_rng(5)
    small = rng.integers(0, 123, size=4_000, dtype=np.int32)  # every chunk: 1 byte an element
    mixed = np.concatenate(
        [
            rng.integers(0, 256, size=250, dtype=np.int64),  # chunk 0 (250 elements of 8 bytes): 1 byte
            rng.integers(256, 65_536, size=250, dtype=np.int64),  # chunk 1: 2 bytes
            np.full(250, 1 << 40, dtype=np.int64),  # chunk 2: as it is
            -rng.integers(1, 5, size=250, dtype=np.int64),  # chunk 3: negative, as it is
            rng.integers(0, 9, size=100, dtype=np.int64),  # the last, partial chunk: 1 byte
        ]
    )
    store = datasets_in(client, None, chunk_bytes=2_000)
    counted_before = int(client.hget(keys.dataset_stats(), "bytes") or 0)
    staged = store.staging(f"ds_storage_n{int(background)}", background=background)
    try:
        for start in range(0, 4_000, 333):  # pieces that straddle chunk boundaries
            staged.append("indices", small[start : start + 333])
            staged.append("mixed", mixed[start : start + 333])
        staged.append("y", np.ones(7))  # floats are never narrowed
        manifest = staged.manifest()
    finally:
        staged.close()
    assert manifest["indices"]["encoding"] == "narrow" and manifest["indices"]["chunk_widths"] == [1] * 8
    assert manifest["indices"]["stored_bytes"] == 4_000
    assert manifest["mixed"]["chunk_widths"] == [1, 2, 8, 8, 1]
    assert manifest["mixed"]["stored_bytes"] == 250 + 500 + 2_000 + 2_000 + 100
    assert "encoding" not in manifest["y"]
    record = store.commit(record_of(f"ds_storage_n{int(background)}", "t1"), manifest)
    back = store.load_arrays(record)
    assert back["indices"].dtype == np.int32 and back["indices"].tobytes() == small.tobytes()
    assert back["mixed"].dtype == np.int64 and back["mixed"].tobytes() == mixed.tobytes()
    assert b"".join(store.iter_array_chunks(record, "indices")) == small.tobytes()
    assert b"".join(store.iter_array_chunks(record, "mixed")) == mixed.tobytes()
    counted = int(client.hget(keys.dataset_stats(), "bytes")) - counted_before
    assert counted == 4_000 + manifest["mixed"]["stored_bytes"] + 7 * 8  # what Redis holds is what is counted


def test_a_narrow_array_whose_chunks_do_not_match_their_widths_is_refused(client):
    store = datasets_in(client, None, chunk_bytes=1_000)
    staged = store.staging("ds_storage_nb")
    staged.append("indices", np.arange(600, dtype=np.int32) % 200)
    manifest = staged.manifest()
    staged.close()
    assert manifest["indices"]["chunk_widths"] == [1, 1, 1]
    wrong = {"indices": dict(manifest["indices"], chunk_widths=[1, 1])}
    with pytest.raises(KeyError, match="2 chunk widths for 3 chunks"):
        arrays.read(client, keys.dataset("ds_storage_nb"), wrong)
    too_many = {"indices": dict(manifest["indices"], shape=[500])}
    with pytest.raises(KeyError, match="more than 500 elements"):
        arrays.read(client, keys.dataset("ds_storage_nb"), too_many)
    arrays.discard(client, keys.dataset("ds_storage_nb"), manifest)
