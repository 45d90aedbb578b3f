"""Typed records: jobs, data sets and models read what Hinge stored before they existed, exactly; their
conversions to and from storage round-trip; a transition says what it did with an IntEnum.

``tests/data/stored_cfa9d22.json`` holds hashes and documents written by the service at commit
cfa9d22 (before typed records), captured from a running service, with the API's answers of then.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import redis

from core.schemas.jobs import JobError, JobProgress, JobStatus
from core.schemas.search_params import SearchParams
from core.storage import keys
from core.storage.documents import DatasetRecord, ModelRecord
from core.storage.job_record import IncompleteJobHash, JobLoss, JobRecord, JobSubtasks
from core.storage.jobs import Deletion, JobStore, Transition
from worker.runtime.runs import job_params

ROOT = Path(__file__).resolve().parents[1]
STORED = json.loads((ROOT / "tests" / "data" / "stored_cfa9d22.json").read_text())


def as_redis_returns(stored: dict[str, str]) -> dict[bytes, bytes]:
    return {name.encode(): value.encode() for name, value in stored.items()}


# -- jobs ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(STORED["jobs"]))
def test_a_stored_job_hash_reads_as_a_typed_record_and_writes_back_unchanged(name):
    stored = STORED["jobs"][name]
    job = JobRecord.from_hash(as_redis_returns(stored))
    assert job.to_hash() == stored
    assert JobRecord.from_hash(job.to_hash()) == job
    assert job.extra == {}, "every field the service wrote is a field of the record"
    assert job.status is JobStatus(stored["status"])
    assert job.attempts == int(stored["attempts"]) and job.enqueues == int(stored["enqueues"])
    assert job.params == json.loads(stored["params"])
    progress = job.progress.model_dump(exclude_unset=True) if job.progress is not None else None
    assert progress == (json.loads(stored["progress"]) if "progress" in stored else None)
    assert job.started_ts == (float(stored["started_ts"]) if "started_ts" in stored else None)
    assert job.created_at == stored["created_at"] and job.started_at == stored.get("started_at")


def test_stored_jobs_read_with_their_life_cycle_fields_typed():
    jobs = {name: JobRecord.from_hash(as_redis_returns(stored)) for name, stored in STORED["jobs"].items()}
    queued = jobs["queued"]
    assert (queued.attempts, queued.lost, queued.worker, queued.started_ts) == (0, 0, None, None)
    assert queued.rq_job_id == f"{queued.id}_r1"
    running = jobs["running"]
    assert running.status is JobStatus.running and running.attempts == 1 and running.worker
    assert isinstance(running.started_ts, float) and running.progress is not None
    requeued = jobs["requeued"]  # lost once: back in the queue, its run's fields gone
    assert requeued.status is JobStatus.queued and requeued.lost == 1 and requeued.worker is None
    assert requeued.last_loss is not None and requeued.last_loss.reason == "capture: pretend lost"
    failed = jobs["failed_lost"]
    assert failed.status is JobStatus.failed and failed.lost == 2 and failed.attempts == 2
    assert failed.error is not None and failed.error.code == "worker_lost"
    assert failed.retries == 1
    search = jobs["search"]
    assert search.search_results is not None and search.search_results["cv_folds"] == 2
    assert search.subtasks is not None and (search.subtasks.done, search.subtasks.total) == (4, 4)
    assert jobs["dcd"].model_id is not None and jobs["dcd"].stop_reason == "converged"
    assert jobs["canceled_queued"].stop_reason == "canceled" and jobs["canceled_queued"].started_at is None


def test_a_job_record_round_trips_exactly_with_every_field_set():
    job = JobRecord(
        id="job_x",
        tenant="t",
        status=JobStatus.running,
        dataset_id="ds_x",
        solver="ocas",
        params={"lambda": 0.5, "search": None, "retries": 3},
        created_at="2026-01-02T03:04:05.000006Z",
        attempts=7,
        enqueues=9,
        rq_job_id="job_x_r9",
        worker="host.12.ab",
        started_at="2026-01-02T03:04:06.000000Z",
        started_ts=1767323046.123456,
        progress=JobProgress(phase="training", fraction=0.25, eta_s=None),
        subtasks=JobSubtasks(done=1, total=3),
        search_results={"settings": [{"C": 0.1, "mean": 0.9}], "best": None},
        finished_at="2026-01-02T03:05:00.000000Z",
        model_id="mdl_x",
        stop_reason="deadline",
        error=JobError(code="solver_error", message="ünïcode"),
        lost=2,
        last_loss=JobLoss(reason="worker heartbeat stopped", at="2026-01-02T03:04:59.000000Z"),
        extra={"a_field_of_a_later_version": "kept as it is"},
    )
    stored = job.to_hash()
    assert stored["a_field_of_a_later_version"] == "kept as it is" and stored["attempts"] == "7"
    assert stored["params"] == '{"lambda": 0.5, "search": null, "retries": 3}'
    assert JobRecord.from_hash(stored) == job
    assert JobRecord.from_hash(as_redis_returns(stored)) == job
    assert job.retries == 3


def test_absent_fields_and_counters_at_zero_are_not_written():
    job = JobRecord(
        id="job_y", tenant="t", status=JobStatus.queued, dataset_id="ds", solver="dcd", params={}, created_at="now"
    )
    assert job.to_hash() == {
        "id": "job_y",
        "tenant": "t",
        "status": "queued",
        "dataset_id": "ds",
        "solver": "dcd",
        "params": "{}",
        "created_at": "now",
        "attempts": "0",
    }
    assert job.retries == 1, "the schema's default when the stored params lack it"


def test_writes_name_fields_of_the_record_with_values_of_their_type():
    assert JobRecord.encode({"lost": 2, "error": {"code": "c", "message": "m"}, "model_id": None}) == {
        "lost": "2",
        "error": '{"code": "c", "message": "m"}',
    }
    assert JobRecord.encode({"error": JobError(code="c", message="m")}) == {"error": '{"code": "c", "message": "m"}'}
    with pytest.raises(TypeError, match="not fields of JobProgress: fracton"):
        JobRecord.encode({"progress": {"phase": "training", "fracton": 0.5}})
    with pytest.raises(ValueError, match="message"):
        JobRecord.encode({"error": {"code": "c"}})
    assert JobRecord.encode({"status": JobStatus.failed}) == {"status": "failed"}
    with pytest.raises(TypeError, match="not fields of a job record: colour"):
        JobRecord.encode({"colour": "blue"})
    with pytest.raises(TypeError, match="integer"):
        JobRecord.encode({"attempts": "1"})
    with pytest.raises(TypeError, match="text"):
        JobRecord.encode({"worker": 12})
    with pytest.raises(ValueError):
        JobRecord.encode({"status": "lost"})


def test_a_hash_without_the_fields_of_a_job_is_no_job():
    with pytest.raises(IncompleteJobHash, match="tenant"):
        JobRecord.from_hash({b"enqueues": b"1", b"rq_job_id": b"job_z_r1", b"id": b"job_z"})


@pytest.mark.parametrize("name", sorted(STORED["jobs"]))
def test_the_worker_reads_the_stored_parameters_with_their_solver_schema(name):
    job = JobRecord.from_hash(STORED["jobs"][name])
    params = job_params(job)
    expected = dict(job.params)
    if (
        expected.get("tol_rel") == 0
    ):  # what earlier versions stored for "off" reads as null (core.schemas.solver_params)
        expected["tol_rel"] = None
    read = params.model_dump(mode="json", by_alias=True)
    # fields added since (sampled_cuts' `sampling` and `pool_size`, issue 22) read as their defaults
    added = {key: read.pop(key) for key in set(read) - set(expected)}
    defaults = type(params)().model_dump(mode="json", by_alias=True)
    assert added == {key: defaults[key] for key in added}
    if read.get("search") and expected.get("search"):  # search.trace_fits (issue 22) reads as its default too
        new = {key: read["search"].pop(key) for key in set(read["search"]) - set(expected["search"])}
        assert new == {key: SearchParams.model_fields[key].default for key in new}
    assert read == expected


# -- data sets and models -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "record_type", "name"),
    [("datasets", DatasetRecord, name) for name in sorted(STORED["datasets"])]
    + [("models", ModelRecord, name) for name in sorted(STORED["models"])],
)
def test_a_stored_document_reads_as_a_typed_record_and_writes_back_unchanged(kind, record_type, name):
    document = json.loads(STORED[kind][name])
    record = record_type.from_document(document)
    assert record.to_document() == document
    assert list(record.to_document()) == list(document), "in the stored order (the JSON export follows it)"
    assert json.loads(json.dumps(record.to_document())) == document
    assert record_type.from_document(record.to_document()) == record
    assert (record.id, record.tenant, record.created_at, record.arrays) == (
        document["id"],
        document["tenant"],
        document["created_at"],
        document["arrays"],
    )


def test_stored_data_sets_read_with_their_fields_typed():
    two, csv, qid = (DatasetRecord.from_document(json.loads(STORED["datasets"][n])) for n in ("two", "csv", "qid"))
    assert two.labels == {"-1": two.labels["-1"], "1": two.labels["1"]} and sum(two.labels.values()) == two.n_samples
    assert csv.feature_names == ["a", "b"] and csv.format == "csv" and csv.value_dtype == "float32"
    assert qid.has_qid and not two.has_qid and two.feature_names is None and two.extra == {}
    legacy = {k: v for k, v in json.loads(STORED["datasets"]["two"]).items() if k != "value_dtype"}
    old = DatasetRecord.from_document(legacy)  # stored before value types existed
    assert old.value_dtype is None and old.to_document() == legacy


def test_stored_models_read_with_their_fields_typed():
    models = {name: ModelRecord.from_document(json.loads(raw)) for name, raw in STORED["models"].items()}
    trained = models["dcd"]
    assert trained.source is None and trained.job_id and trained.solver == "dcd" and trained.kind == "linear"
    assert trained.task == "classification" and trained.labels == [-1.0, 1.0] and trained.zero_based is False
    assert trained.stop_reason == "converged" and trained.n_iter == 70 and trained.gap_rel is not None
    assert trained.stopping is not None and trained.stopping.rule == "tol"
    assert {name: model.extra for name, model in models.items() if model.extra} == {}, "every field is typed"
    imported = models["imported_libsvm_ovo"]
    assert (imported.source, imported.import_format, imported.job_id, imported.solver) == (
        "imported",
        "libsvm",
        None,
        None,
    )
    assert imported.one_vs_one and imported.kind == "kernel" and imported.nr_sv == [21, 45, 38]
    assert imported.n_iter is None and imported.gap_rel is None and imported.libsvm_svm_type == "c_svc"
    assert models["cpa_ordinal"].task == "ordinal" and models["cpa_ordinal"].labels == models["cpa_ordinal"].ranks
    calibration = models["smo_prob"].calibration
    assert calibration is not None and calibration.method == "platt_ovr" and calibration.cv_folds == 5
    kernel = models["smo_prob"].kernel_spec
    assert kernel is not None and (kernel.type, kernel.gamma) == ("rbf", 0.5)
    assert models["search"].search_results is not None and models["dcd"].search_results is None


# -- transitions and deletes, against a Redis of their own ---------------------------------------------


@pytest.fixture()
def store(tmp_path):
    from service.embedded_redis import EmbeddedRedis

    server = EmbeddedRedis(tmp_path / "redis").start()
    client = redis.Redis.from_url(server.url)
    try:
        yield JobStore(client)
    finally:
        client.close()
        server.stop()


def queued_job(job_id: str, tenant: str = "t") -> JobRecord:
    return JobRecord(
        id=job_id, tenant=tenant, status=JobStatus.queued, dataset_id="ds", solver="dcd", params={}, created_at="now"
    )


def test_a_transition_says_what_it_did(store):
    assert [int(member) for member in Transition] == [-1, 0, 1, 2], "the transition script's return codes"
    for job_id in ("job_a", "job_b"):
        assert store.create(queued_job(job_id))
    queued, running = JobStatus.queued, JobStatus.running
    assert store.transition_code("job_none", (queued,), running) is Transition.NO_JOB
    assert store.transition_code("job_a", (running,), JobStatus.succeeded) is Transition.WRONG_STATE
    assert store.transition_code("job_a", (queued,), running, fence=("attempts", "3")) is Transition.WRONG_STATE
    started = store.transition_code("job_a", (queued,), running, fence=("attempts", "0"), running_cap=1, attempts=1)
    assert started is Transition.DONE
    assert store.transition_code("job_b", (queued,), running, running_cap=1) is Transition.AT_RUNNING_CAP
    job = store.get("job_a")
    assert job is not None and job.status is running and job.attempts == 1
    assert store.transition("job_a", (running,), JobStatus.failed, error={"code": "c", "message": "m"}) is True
    assert store.transition("job_a", (running,), JobStatus.failed) is False
    with pytest.raises(TypeError, match="not fields of a job record"):
        store.transition("job_b", (queued,), running, fence=("run", "1"))


def test_a_delete_says_what_it_did(store):
    assert [int(member) for member in Deletion] == [-1, 0, 1], "the delete script's return codes"
    store.create(queued_job("job_c"))
    assert store.delete("job_c") is Deletion.NOT_FINISHED
    store.transition("job_c", (JobStatus.queued,), JobStatus.canceled, stop_reason="canceled")
    assert store.delete("job_c") is Deletion.DELETED
    assert store.delete("job_c") is Deletion.NO_JOB


def test_the_store_reads_what_the_service_stored_and_writes_in_the_same_form(store):
    stored = STORED["jobs"]["running"]
    store.client.hset(keys.job(stored["id"]), mapping=stored)
    job = store.get(stored["id"])
    assert job == JobRecord.from_hash(stored)
    assert store.get(stored["id"], tenant="someone else") is None
    store.update(stored["id"], progress={"phase": "storing model"}, subtasks={"done": 1, "total": 2})
    store.clear(stored["id"], "worker")
    raw = {k.decode(): v.decode() for k, v in store.client.hgetall(keys.job(stored["id"])).items()}
    assert raw["progress"] == '{"phase": "storing model"}' and raw["subtasks"] == '{"done": 1, "total": 2}'
    assert "worker" not in raw and raw["status"] == "running"
    store.client.hset(keys.job("job_partial"), "enqueues", 1)  # a write that raced a delete
    assert store.get("job_partial") is None


# -- the code reads records by attribute and parameters in one place ------------------------------------


def _python_files():
    for package in ("core", "service", "worker"):
        yield from sorted((ROOT / package).rglob("*.py"))


def test_no_job_record_is_read_by_key():
    found = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text())):
            subscript = isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
            target = node.value if subscript else getattr(getattr(node, "func", None), "value", None)
            by_get = isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "get"
            if (subscript or by_get) and isinstance(target, ast.Name) and target.id == "job":
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_the_worker_reads_stored_parameters_in_one_place():
    calls = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "solver_params":
                calls.append(str(path.relative_to(ROOT)))
    assert calls == ["worker/runtime/runs.py"]


# -- over HTTP: the API answers for stored records as it did then --------------------------------------


ADDED_JOB_FIELDS = ',"cores":null,"data_load":null,"warnings":[]}'
"""What a job's answer gained since cfa9d22, at its end."""
ADDED_PROGRESS_FIELDS = ('"compiling":null,',)
"""What a job's progress gained since, once each (issue 35: `compiling`, the new name of `kernels`)."""
ADDED_FIELDS = {
    "datasets": (',"zero_based_guessed":null', ',"max_row_norm_sq":null', ',"targets":null', ',"labelled":true'),
    "models": (
        ',"zero_based_guessed":null',
        ',"warnings":[]',
        ',"data_access":null',
        ',"train_mse":null',
        ',"train_r2":null',
        ',"train_outlier_fraction":null',
    ),
}
"""What a data set's and a model's answers gained since (issue 32: whether the index base was guessed, unknown for
a record stored before; the scale of C's range; the warnings; issue 34: how an out-of-core training read its
data, null for one in memory; issue 33: the labels as numbers, a regression's training error, a one-class model's outliers), once each."""


def test_the_api_answers_for_records_stored_then_byte_for_byte(service, http):
    client = redis.Redis.from_url(service.redis_url)
    written = []
    try:
        for name, stored in STORED["jobs"].items():
            client.delete(keys.job(stored["id"]))
            client.hset(keys.job(stored["id"]), mapping=stored)
            written.append(keys.job(stored["id"]))
            answer = http.get(f"/v1/jobs/{stored['id']}")
            # the answer as then, with the fields the API gained since at their end (issue 22: `cores`, null
            # for a record that never had a core lease)
            text = answer.content.decode()
            assert text.endswith(ADDED_JOB_FIELDS), name
            for added in ADDED_PROGRESS_FIELDS:
                assert text.count(added) == 1, (name, added, text)
                text = text.replace(added, "")
            then = text[: -len(ADDED_JOB_FIELDS)] + "}"
            assert answer.status_code == 200 and then == STORED["answers"][f"job:{name}"], name
        for kind, key_of in (("datasets", keys.dataset), ("models", keys.model)):
            for name, raw in STORED[kind].items():
                record_id = json.loads(raw)["id"]
                client.set(key_of(record_id), raw)
                written.append(key_of(record_id))
                answer = http.get(f"/v1/{kind}/{record_id}")
                assert answer.status_code == 200, (name, answer.text)
                text = answer.content.decode()
                for added in ADDED_FIELDS[kind]:
                    assert text.count(added) == 1, (name, added, text)
                    text = text.replace(added, "")
                assert text == STORED["answers"][f"{kind}:{name}"], name
    finally:
        if written:
            client.delete(*written)
        client.close()
