"""The object store, the shards of a data set and the machine's cache, against both backends: a local directory
and a real S3 server (SeaweedFS, started by the ``s3_server`` fixture)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import threading
import time

import numpy as np
import pytest
import redis

from core.storage import cache, keys, shard_format, shards
from core.storage.documents import DatasetRecord
from core.storage.garbage import collect_garbage
from core.storage.objects import LocalDirectoryStore, ObjectMissing, ObjectStore, StoreRefused, StoreUnavailable
from core.storage.records import datasets_in, model_store
from service.embedded_redis import EmbeddedRedis
from service.ingest.parser import ArrayCollector, ParseLimits, parse_into

LIMITS = ParseLimits(
    max_decompressed_bytes=1 << 30, max_rows=10**7, max_features=10**7, max_nnz=10**9, max_line_bytes=1 << 20
)


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis-objects")).start()
    yield server.url
    server.stop()


@pytest.fixture
def client(redis_url):
    conn = redis.Redis.from_url(redis_url)
    conn.flushdb()
    yield conn
    conn.close()


def svmlight_text(n_rows: int, n_features: int, seed: int, *, qid: bool = False, ones: bool = False) -> bytes:
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n_rows):
        k = int(rng.integers(0, 12))
        cols = np.sort(rng.choice(n_features, size=min(k, n_features), replace=False)) + 1
        values = np.ones(cols.size) if ones else np.round(rng.normal(size=cols.size), 4)
        head = f"{int(rng.integers(0, 3))}" + (f" qid:{i // 7}" if qid else "")
        lines.append(" ".join([head, *(f"{c}:{v:g}" for c, v in zip(cols, values))]))
    return ("\n".join(lines) + "\n").encode()


def parse(sink, text: bytes, tmp_path, **options):
    path = tmp_path / f"upload-{time.monotonic_ns()}.svm"
    path.write_bytes(text)
    return parse_into(sink, lambda: open(path, "rb"), limits=LIMITS, chunk_bytes=2048, **options)


def write_shards(objects: ObjectStore, dataset_id: str, text: bytes, tmp_path, shard_bytes: int):
    """Parse ``text`` into a ShardWriter; (parse summary, arrays manifest, shard entries)."""
    writer = shards.ShardWriter(objects, dataset_id, shard_bytes=shard_bytes)
    try:
        summary = parse(writer, text, tmp_path)
        arrays, entries = writer.manifest()
    finally:
        writer.close()
    return summary, arrays, entries


def stored_keys(store: ObjectStore, prefix: str = "") -> set[str]:
    return {info.key for info in store.list(prefix) if not info.key.startswith(".hinge")}


# -- the interface, on both backends -------------------------------------------------------------------------------


def test_objects_round_trip_list_and_delete(objects):
    payload = np.random.default_rng(0).integers(0, 255, 3 << 20, dtype=np.uint8)
    objects.put("datasets/ds_a/one.shard", payload.data)
    objects.put("datasets/ds_a/two.shard", b"small")
    objects.put("models/mdl_b/w.array", b"")
    assert bytes(objects.get("datasets/ds_a/one.shard")) == payload.tobytes()
    assert bytes(objects.get("models/mdl_b/w.array")) == b""
    listed = {info.key: info.size for info in objects.list("datasets/")}
    assert listed == {"datasets/ds_a/one.shard": payload.size, "datasets/ds_a/two.shard": 5}
    assert all(abs(info.modified - time.time()) < 300 for info in objects.list(""))
    with pytest.raises(ObjectMissing):
        objects.get("datasets/ds_a/none.shard")
    objects.delete(["datasets/ds_a/one.shard", "datasets/ds_a/never-written"])
    assert stored_keys(objects) == {"datasets/ds_a/two.shard", "models/mdl_b/w.array"}
    objects.ping()
    objects.probe()


def test_a_local_write_is_whole_or_absent(tmp_path, monkeypatch):
    store = LocalDirectoryStore(tmp_path / "objects")

    def full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("core.storage.objects.os.replace", full)
    with pytest.raises(StoreUnavailable, match="No space left"):
        store.put("datasets/ds_x/a.shard", b"1234")
    assert list((tmp_path / "objects").rglob("*.shard")) == [] and list((tmp_path / "objects").rglob(".put-*")) == []


def test_wrong_credentials_are_refused_by_name_and_never_echoed(s3_server):
    store = s3_server.store(secret_access_key="not-the-secret")
    for call in (store.ping, lambda: store.put("datasets/ds_x/a.shard", b"1"), lambda: store.get("x")):
        with pytest.raises(StoreRefused) as caught:
            call()
        message = str(caught.value)
        assert "HINGE_S3_SECRET_ACCESS_KEY" in message and "not-the-secret" not in message
        assert s3_server.endpoint in message and "bucket=" in message


def test_an_unreachable_store_is_unavailable_within_seconds(s3_server):
    store = s3_server.store(endpoint_url="http://127.0.0.1:9", retry_s=1.0)
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match="no answer"):
        store.get("datasets/ds_x/a.shard")
    with pytest.raises(StoreUnavailable):
        store.probe()
    assert time.monotonic() - started < 15


# -- shards --------------------------------------------------------------------------------------------------------


def test_a_shard_round_trips_every_encoding_bit_for_bit():
    rng = np.random.default_rng(3)
    arrays = {
        "indptr": np.array([0, 3, 3, 70_000], dtype=np.int64),  # narrow to 4 bytes
        "indices": rng.integers(0, 200, 70_000).astype(np.int32),  # 1 byte
        "data": np.full(70_000, 1.0, dtype=np.float32),  # one repeated element
        "y": np.array([1.0, -0.0, 2.5]),  # labels: few distinct values (but fewer rows than twice them: raw)
        "qid": np.array([5, 5, 1 << 40], dtype=np.int64),  # too wide to narrow
    }
    encoded = shard_format.encode_shard(arrays, rows=3, nnz=70_000)
    decoded = shard_format.decode_shard(encoded.data, hashlib.sha256(encoded.data).hexdigest())
    encodings = {name: entry["encoding"] for name, entry in decoded.entries.items()}
    assert encodings == {"indptr": "narrow", "indices": "narrow", "data": "fill", "y": "raw", "qid": "raw"}
    for name, values in arrays.items():
        got = decoded.array(name)
        assert got.dtype == values.dtype and got.tobytes() == values.tobytes(), name
    labels = np.where(rng.random(1000) < 0.5, -1.0, 1.0)
    table = shard_format.decode_shard(shard_format.encode_shard({"y": labels}, rows=1000, nnz=0).data)
    assert table.entries["y"]["encoding"] == "table" and table.array("y").tobytes() == labels.tobytes()


def test_column_indices_are_stored_as_their_gaps_within_rows():
    """TF-IDF-like rows over 10^6 features: each row's first index as a signed step in 4 bytes, then its gaps in 2;
    empty rows and a gap wider than 2 bytes read back too."""
    rng = np.random.default_rng(4)
    rows = [np.sort(rng.choice(1_000_000, size=int(rng.integers(0, 400)), replace=False)) for _ in range(300)]
    rows[5] = np.array([], dtype=np.int64)
    indptr = np.concatenate([[0], np.cumsum([r.size for r in rows])]).astype(np.int64)
    indices = np.concatenate(rows).astype(np.int32)
    encoded = shard_format.encode_shard({"indptr": indptr, "indices": indices}, rows=300, nnz=indices.size)
    decoded = shard_format.decode_shard(encoded.data)
    entry = decoded.entries["indices"]
    assert entry["encoding"] == "gaps" and entry["width"] == 2 and entry["step_dtype"] == "<i4"
    assert entry["bytes"] < 0.55 * indices.nbytes
    assert decoded.array("indices").dtype == np.int32 and np.array_equal(decoded.array("indices"), indices)
    into = np.empty_like(indices)
    decoded.into("indices", into)
    assert np.array_equal(into, indices)
    wide = indices.copy()
    wide[indptr[7] + 1 : indptr[8]] += 300_000  # one gap of more than 65,535 in row 7: escaped
    again = shard_format.decode_shard(
        shard_format.encode_shard({"indptr": indptr, "indices": wide}, 300, wide.size).data
    )
    assert again.entries["indices"]["escapes"] >= 1 and np.array_equal(again.array("indices"), wide)
    binary = np.tile(np.arange(0, 120, 3, dtype=np.int32), 100)  # gaps of 3 under 123 features: 1 byte each
    ptr = np.arange(0, binary.size + 1, 40, dtype=np.int64)
    small = shard_format.decode_shard(
        shard_format.encode_shard({"indptr": ptr, "indices": binary}, 100, binary.size).data
    )
    assert small.entries["indices"]["encoding"] == "narrow" and np.array_equal(small.array("indices"), binary)


def test_a_damaged_shard_is_refused():
    encoded = shard_format.encode_shard({"y": np.arange(10.0)}, rows=10, nnz=0)
    digest = hashlib.sha256(encoded.data).hexdigest()
    encoded[-1] ^= 1
    with pytest.raises(shard_format.ShardCorrupt, match="SHA-256"):
        shard_format.decode_shard(encoded.data, digest)
    with pytest.raises(shard_format.ShardCorrupt, match="magic"):
        shard_format.decode_shard(b"not a shard at all")


@pytest.mark.parametrize("qid", [False, True])
def test_an_upload_in_many_shards_reads_back_as_the_parser_wrote_it(objects, tmp_path, qid):
    text = svmlight_text(3000, 500, seed=1, qid=qid)
    expected = ArrayCollector()
    parse(expected, text, tmp_path)
    summary, arrays, entries = write_shards(objects, "ds_many", text, tmp_path, shard_bytes=8192)
    assert len(entries) > 5 and sum(e.rows for e in entries) == summary.n_rows == 3000
    assert [e.row_start for e in entries] == list(np.cumsum([0] + [e.rows for e in entries[:-1]]))
    assert all(e.key == keys.dataset_shard("ds_many", e.sha256) for e in entries)
    assert stored_keys(objects) == {e.key for e in entries}
    got = shards.assemble(objects, arrays, entries)
    for name, values in expected.arrays().items():
        assert got[name].dtype == values.dtype and np.array_equal(got[name], values), name
    assert set(got) == set(expected.arrays())


def test_a_parse_that_starts_over_keeps_no_shard_of_its_first_pass(objects, tmp_path):
    """ "auto" learns of index 0 at the last line: the parse starts over zero-based; the first pass's shards go."""
    text = svmlight_text(2000, 50, seed=2) + b"1 0:1.5\n"
    summary, _, entries = write_shards(objects, "ds_restart", text, tmp_path, shard_bytes=4096)
    assert summary.zero_based
    assert stored_keys(objects) == {e.key for e in entries}


def test_a_failed_upload_leaves_nothing(objects, tmp_path):
    writer = shards.ShardWriter(objects, "ds_failed", shard_bytes=4096)
    try:
        with pytest.raises(Exception, match="bad feature"):
            parse(writer, svmlight_text(2000, 50, seed=3) + b"1 3:abc\n", tmp_path)
        assert stored_keys(objects), "shards were written before the error"
        writer.discard()
    finally:
        writer.close()
    assert stored_keys(objects) == set()


# -- records, the cache, the garbage --------------------------------------------------------------------------------


def store_dataset(client, objects, tmp_path, dataset_id="ds_cached", n_rows=3000, shard_bytes=8192):
    store = datasets_in(client, objects)
    writer = store.shard_writer(dataset_id, shard_bytes)
    try:
        summary = parse(writer, svmlight_text(n_rows, 400, seed=4), tmp_path)
        arrays, entries = writer.manifest()
    finally:
        writer.close()
    meta = DatasetRecord(
        id=dataset_id, tenant="public", created_at="2026-11-28T00:00:00Z", format="svmlight", name=dataset_id,
        bytes=0, sha256="", n_samples=summary.n_rows, n_features=summary.n_features, nnz=summary.nnz,
        labels={}, has_qid=False, zero_based=False, compressed=False, text_bytes=summary.text_bytes,
        feature_names=None, shards=[e.to_document() for e in entries],
    )  # fmt: skip
    return store, store.commit(meta, arrays)


class CountingStore(ObjectStore):
    """Another store's objects, counting the reads (and able to fail them)."""

    def __init__(self, inner: ObjectStore):
        self.inner = inner
        self.gets: list[str] = []
        self.down = False
        self.lock = threading.Lock()

    def put(self, key, data):
        self.inner.put(key, data)

    def get(self, key):
        if self.down:
            raise StoreUnavailable("down for the test")
        with self.lock:
            self.gets.append(key)
        time.sleep(0.01)  # a slow store: both threads ask while the first fetch runs
        return self.inner.get(key)

    def delete(self, keys):
        self.inner.delete(keys)

    def list(self, prefix):
        return self.inner.list(prefix)

    def ping(self):
        self.inner.ping()

    def describe(self):
        return self.inner.describe()


def test_the_cache_fetches_once_per_machine_and_checks_every_use(client, objects, tmp_path):
    counting = CountingStore(objects)
    store, record = store_dataset(client, counting, tmp_path)
    n_shards = len(record.shards)
    whole = store.load_arrays(record)
    counting.gets.clear()
    results: list = []

    def load():  # two workers of one machine at once (flock is per open file: threads behave as processes)
        results.append(cache.load(store, record.id, "public", tmp_path / "cache", 1 << 30)[1])

    threads = [threading.Thread(target=load) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(counting.gets) == sorted(e["key"] for e in record.shards), "each shard fetched exactly once"
    for arrays in results:
        for name, values in whole.items():
            assert np.array_equal(arrays[name], values), name
    # a cached data set needs no store at all
    counting.down = True
    _, again = cache.load(store, record.id, "public", tmp_path / "cache", 1 << 30)
    assert np.array_equal(again["indices"], whole["indices"])
    # a byte changed in one shard's part of a cached file: that shard alone is fetched again
    counting.down = False
    counting.gets.clear()
    entry = shards.shard_entries(record.shards)[n_shards // 2]
    path = tmp_path / "cache" / "datasets" / record.id / "indices.npy"
    mapped = np.load(path, mmap_mode="r+")
    mapped[entry.nnz_start] += 1
    mapped.flush()
    del mapped
    _, repaired = cache.load(store, record.id, "public", tmp_path / "cache", 1 << 30)
    assert counting.gets == [entry.key]
    assert np.array_equal(repaired["indices"], whole["indices"])


def test_a_job_waits_for_a_store_that_comes_back(client, objects, tmp_path):
    counting = CountingStore(objects)
    store, record = store_dataset(client, counting, tmp_path, dataset_id="ds_wait")
    counting.down = True
    told = []
    threading.Timer(1.0, lambda: setattr(counting, "down", False)).start()
    _, arrays = cache.load(store, record.id, "public", tmp_path / "cache", 1 << 30, patience_s=30, on_wait=told.append)
    assert len(told) == 1 and arrays["y"].shape == (3000,)
    counting.down = True
    stopped = time.monotonic()
    with pytest.raises(StoreUnavailable):
        cache.load(
            store, "ds_wait", "public", tmp_path / "other-cache", 1 << 30, patience_s=30, should_stop=lambda: True
        )
    assert time.monotonic() - stopped < 5


def test_deleting_a_data_set_deletes_its_shards(client, objects, tmp_path):
    store, record = store_dataset(client, objects, tmp_path, dataset_id="ds_gone")
    assert stored_keys(objects, "datasets/ds_gone/")
    assert store.delete(record.id, "public")
    assert stored_keys(objects, "datasets/ds_gone/") == set()
    assert int(client.hget(keys.dataset_stats(), "object_bytes")) == 0


def test_garbage_is_what_no_record_owns_once_it_is_old(client, objects, tmp_path):
    store, record = store_dataset(client, objects, tmp_path, dataset_id="ds_kept")
    objects.put("datasets/ds_orphan/abc.shard", b"cut short")
    objects.put("datasets/ds_kept/stale.shard", b"of a pass that started over")
    owned = {e["key"] for e in record.shards}
    assert collect_garbage(client, objects, grace_s=3600) == 0, "nothing is old yet"
    assert collect_garbage(client, objects, grace_s=3600, now=time.time() + 7200) == 2
    assert stored_keys(objects) == owned


def test_a_large_model_keeps_its_arrays_in_the_store(client, objects, tmp_path, monkeypatch):
    from core.config import Settings
    from core.storage.documents import ModelRecord

    monkeypatch.setattr("core.storage.records.object_store", lambda settings: objects)
    models = model_store(client, Settings(model_object_bytes=1000, redis_url="redis://unused"))
    weights = np.zeros(100_000)
    weights[::7] = np.arange(weights[::7].size)
    meta = ModelRecord(
        id="mdl_big", tenant="public", created_at="2026-11-28T00:00:00Z", job_id=None, dataset_id=None,
        solver="dcd", params={}, kind="linear", labels=[-1.0, 1.0], n_features=100_000, zero_based=False,
    )  # fmt: skip
    record = models.create(meta, {"weights": weights, "bias": np.array([0.5])})
    assert all("object" in entry for entry in record.arrays.values())
    assert record.arrays["weights"]["encoding"] == "nonzero"
    assert not [k for k in client.keys("*") if b":array:" in k], "no chunk in Redis"
    got = models.load_arrays(models.get("mdl_big", "public"))
    assert np.array_equal(got["weights"], weights) and got["bias"].tolist() == [0.5]
    models.delete("mdl_big", "public")
    assert stored_keys(objects, "models/") == set()


def test_a_data_set_stored_in_redis_before_the_object_store_still_loads(client, objects, tmp_path):
    """Records whose arrays are Redis chunks (no shard list) read and cache as they always did."""
    from core.storage import arrays as redis_arrays

    text = svmlight_text(500, 40, seed=5)
    collected = ArrayCollector()
    parse(collected, text, tmp_path)
    whole = collected.arrays()
    store = datasets_in(client, objects, chunk_bytes=1024)
    manifest = redis_arrays.write_staged(client, keys.dataset("ds_old"), whole, 1024)
    meta = DatasetRecord(
        id="ds_old", tenant="public", created_at="2025-01-01T00:00:00Z", format="svmlight", name="old", bytes=0,
        sha256="", n_samples=500, n_features=40, nnz=int(whole["indices"].size), labels={}, has_qid=False,
        zero_based=False, compressed=False, text_bytes=len(text), feature_names=None,
    )  # fmt: skip
    record = store.commit(meta, manifest)
    assert json.loads(client.get(keys.dataset("ds_old"))).get("shards") is None
    for loaded in (store.load_arrays(record), cache.load(store, "ds_old", "public", tmp_path / "cache", 1 << 30)[1]):
        for name, values in whole.items():
            assert np.array_equal(loaded[name], values), name


def test_hinge_store_migrate_moves_redis_data_sets_into_the_store(client, redis_url, tmp_path, monkeypatch, capsys):
    from core.config import get_settings
    from core.storage import arrays as redis_arrays
    from service.cli import main

    text = svmlight_text(3000, 40, seed=6, qid=True)
    collected = ArrayCollector()
    parse(collected, text, tmp_path)
    whole = collected.arrays()
    objects = LocalDirectoryStore(tmp_path / "data" / "objects")
    store = datasets_in(client, objects, chunk_bytes=4096)
    meta = DatasetRecord(
        id="ds_legacy", tenant="acme", created_at="2025-01-01T00:00:00Z", format="svmlight", name="legacy", bytes=0,
        sha256="", n_samples=3000, n_features=40, nnz=int(whole["indices"].size), labels={"0": 1}, has_qid=True,
        zero_based=False, compressed=False, text_bytes=len(text), feature_names=None,
    )  # fmt: skip
    store.commit(meta, redis_arrays.write_staged(client, keys.dataset("ds_legacy"), whole, 4096))
    assert int(client.hget(keys.dataset_stats(), "bytes")) > 0
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("HINGE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("HINGE_SHARD_BYTES", "16384")
    get_settings.cache_clear()
    try:
        assert main(["store", "migrate", "--dry-run"]) == 0
        assert "ds_legacy\tlegacy" in capsys.readouterr().out
        assert main(["store", "migrate"]) == 0
        assert "ds_legacy\tmoved" in capsys.readouterr().out
        assert main(["store", "check"]) == 0
    finally:
        get_settings.cache_clear()
    record = store.get("ds_legacy", "acme")
    assert record is not None and record.shards is not None and len(record.shards) > 1
    assert record.name == "legacy" and record.labels == {"0": 1}
    assert not [k for k in client.keys("*") if b":array:" in k], "the Redis chunks are gone"
    assert int(client.hget(keys.dataset_stats(), "bytes")) == 0
    loaded = store.load_arrays(record)
    for name, values in whole.items():
        assert loaded[name].dtype == values.dtype and np.array_equal(loaded[name], values), name


def test_no_credentials_at_all_is_said_in_those_words(s3_server, monkeypatch):
    """No key given and no AWS credential chain on this machine: refused, naming the settings to set."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    store = s3_server.store(access_key_id=None, secret_access_key=None, retry_s=1.0)
    with pytest.raises(StoreRefused, match="no credentials.*HINGE_S3_ACCESS_KEY_ID"):
        store.ping()


def test_the_cache_evicts_the_least_recently_used_copies_to_fit_its_budget(client, objects, tmp_path):
    """A budget for about two copies: fetching a third removes the copy used longest ago, keeps the one just used;
    a copy another process removed meanwhile is neither counted nor removed again."""
    root = tmp_path / "cache"
    ids = ["ds_one", "ds_two", "ds_three", "ds_four"]
    for dataset_id in ids:
        (tmp_path / dataset_id).mkdir()
        store, _ = store_dataset(client, objects, tmp_path / dataset_id, dataset_id=dataset_id, n_rows=600)
    folder_bytes = []
    for dataset_id in ids[:2]:
        cache.load(store, dataset_id, "public", root, 1 << 30)
        folder_bytes.append(sum(f.stat().st_size for f in (root / "datasets" / dataset_id).iterdir()))
        time.sleep(0.05)  # the markers' times order the copies
    budget = int(2.5 * max(folder_bytes))
    cache.load(store, "ds_one", "public", root, budget)  # used again: ds_two is now the oldest
    time.sleep(0.05)
    cache.load(store, "ds_three", "public", root, budget)
    assert sorted(p.name for p in (root / "datasets").iterdir() if not p.name.startswith(".")) == ["ds_one", "ds_three"]
    shutil.rmtree(root / "datasets" / "ds_one")  # another process sharing the cache evicted it
    time.sleep(0.05)
    _, arrays = cache.load(store, "ds_four", "public", root, budget)
    assert sorted(p.name for p in (root / "datasets").iterdir() if not p.name.startswith(".")) == [
        "ds_four",
        "ds_three",
    ]
    assert arrays["indptr"].size == 601


def test_a_copy_being_fetched_is_left_to_the_sweep(client, objects, tmp_path):
    """``forget`` never waits on a copy another process fetches or checks (it would hold an API request): it leaves
    it, and ``sweep`` removes it once its data set is gone and nobody holds it; a data set still there is kept."""
    root = tmp_path / "cache"
    for dataset_id in ("ds_kept", "ds_held"):
        (tmp_path / dataset_id).mkdir()
        store, _ = store_dataset(client, objects, tmp_path / dataset_id, dataset_id=dataset_id, n_rows=300)
        cache.load(store, dataset_id, "public", root, 1 << 30)
    assert store.delete("ds_held", "public")
    with open(root / "datasets" / ".locks" / "ds_held", "a+b") as other:  # another process's lock
        fcntl.flock(other, fcntl.LOCK_EX)
        assert cache.forget(root, "ds_held") is False
        assert cache.sweep(store, root) == []
        fcntl.flock(other, fcntl.LOCK_UN)
    assert (root / "datasets" / "ds_held").is_dir()
    assert cache.sweep(store, root) == ["ds_held"]
    assert sorted(p.name for p in (root / "datasets").iterdir() if not p.name.startswith(".")) == ["ds_kept"]
    assert cache.forget(root, "ds_absent") is False and cache.sweep(store, tmp_path / "no-cache") == []
