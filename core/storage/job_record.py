"""A training job's record: the typed form of its Redis hash, converted to and from the hash here only.

As RQ's ``Job`` (``to_dict`` / ``restore``): every other line reads ``job.status`` or
``job.attempts``, never a hash field, and writes name record fields whose values this module encodes.

Why a dataclass and not a pydantic model: the record is the service's own state, not input to
check. Parameters were validated when the job was accepted (the request's schema, in the API) and
are kept in that validated JSON form; the worker reads them with its solver's schema in one place
(``worker.runtime.runs.job_params``). A pydantic model would validate every hash again on every read (the
event stream reads a job five times a second) and coerce what it reads, where a record written by an
older version must come back exactly as it was stored. A dataclass holds what the hash holds, and the
encoding stays in two explicit methods.

The hash: one field per attribute, absent when the attribute is None (or, for the counters ``lost``
and ``enqueues``, 0); text as it is (times are the ISO 8601 strings the service wrote, kept as text
so that answers show them unchanged), integers and ``started_ts`` as their decimal text, the
structured fields as JSON, the status as its name. The parts the API describes with a schema of their own
(``progress``, ``cores``, ``data_load``, ``error``) are those typed classes (``core.schemas.jobs``), and
``subtasks`` and ``last_loss`` small classes of their own here: a
write may give the class or its dict (checked against the class: a misspelt key is an error at the
write), a read gives the class. Fields this version does not know are kept as
they are (``extra``), so that reading a hash and writing it back loses nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from pydantic import BaseModel

from core.schemas.common_params import CommonParams
from core.schemas.jobs import JobCores, JobDataLoad, JobError, JobProgress, JobStatus

_TEXT, _INT, _FLOAT, _JSON, _STATUS = "text", "int", "float", "json", "status"


def _stored(codec: str | type[BaseModel], default: Any = MISSING, *, unwritten: Any = None) -> Any:
    """A field of the hash, encoded as ``codec`` says (a schema class: its JSON; without a default: every job has
    it); not written when its value is None or ``unwritten`` (a counter that has not counted yet is absent)."""
    return field(default=default, metadata={"codec": codec, "unwritten": unwritten})


class JobSubtasks(BaseModel):
    """A job's subtasks: one-vs-rest classes, or a search's (fold, setting) cells; shown in its progress."""

    done: int
    total: int


class JobLoss(BaseModel):
    """The latest loss of a job's run with its worker (``core.lifecycle``)."""

    reason: str
    at: str  # ISO 8601, as the service writes times


class IncompleteJobHash(KeyError):
    """A job hash without the fields every job has (what a write racing a delete leaves behind)."""


@dataclass
class JobRecord:
    """Everything a job's hash holds (see the module docstring for the encoding)."""

    id: str = _stored(_TEXT)
    tenant: str = _stored(_TEXT)
    status: JobStatus = _stored(_STATUS)
    dataset_id: str = _stored(_TEXT)
    solver: str = _stored(_TEXT)
    params: dict = _stored(_JSON)  # the validated JSON form (defaults filled in, ocas's `lambda` by its alias)
    created_at: str = _stored(_TEXT)
    attempts: int = _stored(_INT, 0)  # the run number: every write of a run is fenced on it
    enqueues: int = _stored(_INT, 0, unwritten=0)  # how many times it was put in a queue (``core.queueing``)
    rq_job_id: str | None = _stored(_TEXT, None)  # its current RQ job: a worker runs only that one
    worker: str | None = _stored(_TEXT, None)  # the worker running it (none while a distributed search's settings run)
    started_at: str | None = _stored(_TEXT, None)
    started_ts: float | None = _stored(_FLOAT, None)  # started_at in Unix seconds (the reaper and deadlines)
    progress: JobProgress | None = _stored(JobProgress, None)
    subtasks: JobSubtasks | None = _stored(JobSubtasks, None)
    search_results: dict | None = _stored(_JSON, None)
    cores: JobCores | None = _stored(JobCores, None)  # its core lease
    data_load: JobDataLoad | None = _stored(JobDataLoad, None)  # how its data set was loaded
    finished_at: str | None = _stored(_TEXT, None)
    model_id: str | None = _stored(_TEXT, None)
    stop_reason: str | None = _stored(_TEXT, None)
    error: JobError | None = _stored(JobError, None)
    warnings: list | None = _stored(
        _JSON, None
    )  # [{"code", "message"}]: doubts about its result (core.scoring.quality)
    lost: int = _stored(_INT, 0, unwritten=0)  # runs lost with their worker so far
    last_loss: JobLoss | None = _stored(JobLoss, None)
    extra: dict[str, str] = field(default_factory=dict)  # fields this version does not know, as stored

    @property
    def retries(self) -> int:
        """How many lost runs the job may start again (its ``retries`` parameter; the schema's default if absent)."""
        return int(self.params.get("retries", _DEFAULT_RETRIES))

    @classmethod
    def from_hash(cls, raw: Mapping[bytes | str, bytes | str]) -> JobRecord:
        """The record of a hash as Redis returns it (bytes) or as text; ``IncompleteJobHash`` when it is no job."""
        text = {_text(name): _text(value) for name, value in raw.items()}
        missing = [name for name in _REQUIRED if name not in text]
        if missing:
            raise IncompleteJobHash(f"job hash without {', '.join(missing)}")
        known = {name: _decode(_CODECS[name], text.pop(name)) for name in list(text) if name in _CODECS}
        return cls(**known, extra=text)

    def to_hash(self) -> dict[str, str]:
        """The hash's fields and values (None attributes and uncounted counters are not written)."""
        return {**self.encode({name: getattr(self, name) for name in _CODECS}), **self.extra}

    @staticmethod
    def encode(values: Mapping[str, Any]) -> dict[str, str]:
        """Some fields as the hash holds them, for a write of part of a record.

        A name that is no field of the record, or a value not of the field's type, is a TypeError."""
        check_names(values)
        return {
            name: _encode(_CODECS[name], value)
            for name, value in values.items()
            if value is not None and value != _UNWRITTEN[name]
        }


def check_names(names: Iterable[str]) -> None:
    """TypeError for a name that is no field of a job record (a write or a fence must name real fields)."""
    unknown = [name for name in names if name not in _CODECS]
    if unknown:
        raise TypeError(f"not fields of a job record: {', '.join(unknown)}")


_CODECS: dict[str, str | type[BaseModel]] = {
    spec.name: spec.metadata["codec"] for spec in fields(JobRecord) if spec.metadata
}
_UNWRITTEN: dict[str, Any] = {spec.name: spec.metadata["unwritten"] for spec in fields(JobRecord) if spec.metadata}
_REQUIRED = [spec.name for spec in fields(JobRecord) if spec.default is MISSING and spec.default_factory is MISSING]
_DEFAULT_RETRIES = CommonParams.model_fields["retries"].default


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _encode(codec: str | type[BaseModel], value: Any) -> str:
    if isinstance(codec, type):
        if not isinstance(value, codec):
            unknown = set(value) - set(codec.model_fields) if isinstance(value, Mapping) else ()
            if unknown:
                raise TypeError(f"not fields of {codec.__name__}: {', '.join(sorted(unknown))}")
            value = codec.model_validate(value)
        return json.dumps(value.model_dump(mode="json", exclude_unset=True))
    if codec == _JSON:
        return json.dumps(value)
    if codec == _STATUS:
        return JobStatus(value).value
    if codec == _INT:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"an integer field of a job record got {value!r}")
        return str(value)
    if codec == _FLOAT:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"a number field of a job record got {value!r}")
        return str(value)
    if not isinstance(value, str):
        raise TypeError(f"a text field of a job record got {value!r}")
    return value


def _decode(codec: str | type[BaseModel], text: str) -> Any:
    if isinstance(codec, type):
        return codec.model_validate_json(text)
    if codec == _JSON:
        return json.loads(text)
    if codec == _STATUS:
        return JobStatus(text)
    if codec == _INT:
        return int(text)
    if codec == _FLOAT:
        return float(text)
    return text
