"""Data set and model records: the typed form of their JSON metadata documents, converted here only.

A data set's or a model's metadata is one JSON document in Redis (``core.storage.records`` stores it
with the record's binary arrays). ``from_document`` and ``to_document`` are the one conversion, as
``JobRecord.from_hash`` / ``to_hash`` for jobs; the API and the workers read attributes.

Dataclasses, as the job record (see ``core.storage.job_record`` for why not pydantic): the records
are the service's own writing, read back exactly as stored. A field is written even when it is None
(the document holds a null), except the optional ones, which older or other records lack: those are
left out when None, so that a document read and written again is the document that was read. Keys
this version does not know are kept as they are (``extra``), and so is the order of the keys read
(``key_order``): the JSON export of a model lists its training figures in the stored order.

A model's document holds more than the fields typed here: the training report (iterations,
objectives, certified gap, stopping rule, ...) and what scoring needs (the kernel, the calibration,
ordinal thresholds, LIBSVM's one-vs-one layout). Those stay in ``extra``, as stored: the API shows
them through its ``ModelOut`` schema, and ``core.scoring`` and the model file writers read them from
the whole document (``to_document()``), the same form in which a training outcome or an imported
file describes a model before it is stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Self

_NOT_STORED = {"extra", "key_order"}


def _optional() -> Any:
    """A field that documents may lack: None, and then not written."""
    return field(default=None, metadata={"optional": True})


@dataclass(kw_only=True)
class StoredDocument:
    """What data set and model records share: the conversion to and from the stored JSON document."""

    id: str
    tenant: str
    created_at: str
    arrays: dict[str, dict] = field(default_factory=dict)  # the binary arrays' manifest (name -> dtype, shape, chunks)
    extra: dict[str, Any] = field(default_factory=dict)  # keys this record type does not name, as stored
    key_order: tuple[str, ...] = field(default=(), compare=False, repr=False)  # of the document read, if any

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> Self:
        """The record of a stored document, or of a document about to be stored (a TypeError names a field it lacks)."""
        names = {spec.name for spec in fields(cls)} - _NOT_STORED
        known = {name: value for name, value in document.items() if name in names}
        extra = {name: value for name, value in document.items() if name not in names}
        return cls(**known, extra=extra, key_order=tuple(document))

    def to_document(self) -> dict[str, Any]:
        """The document as stored (optional fields only when set), its keys in the order they were read."""
        values = {
            spec.name: getattr(self, spec.name)
            for spec in fields(self)
            if spec.name not in _NOT_STORED and not (spec.metadata.get("optional") and getattr(self, spec.name) is None)
        }
        values.update(self.extra)
        ordered = {name: values[name] for name in self.key_order if name in values}
        return {**ordered, **{name: value for name, value in values.items() if name not in ordered}}


@dataclass(kw_only=True)
class DatasetRecord(StoredDocument):
    """An uploaded data set: what the parser found (``DatasetOut`` describes each field)."""

    format: str
    name: str
    bytes: int
    sha256: str
    n_samples: int
    n_features: int
    nnz: int
    labels: dict[str, int]  # rows per label, keyed by the label as text
    has_qid: bool
    zero_based: bool
    compressed: bool
    text_bytes: int
    feature_names: list[str] | None
    zero_based_guessed: bool | None = _optional()  # absent: CSV, or stored before it was recorded
    value_dtype: str | None = _optional()  # absent: float64 (data sets stored before float32 existed)
    shards: list[dict] | None = _optional()  # in the object store (core.storage.shards); absent: Redis chunks
    max_row_norm_sq: float | None = _optional()  # the largest |x_i|^2 (absent: stored before it was kept)


@dataclass(kw_only=True)
class ModelRecord(StoredDocument):
    """A trained or imported model: where it came from and what the API and workers read (``ModelOut``)."""

    job_id: str | None  # None: imported
    dataset_id: str | None
    solver: str | None  # None: imported from LIBLINEAR or LIBSVM
    params: dict
    kind: str  # linear, kernel or ranking
    labels: list[float] | None  # None: a model that only scores
    n_features: int
    zero_based: bool
    zero_based_guessed: bool | None = _optional()  # the training data set's (None: imported, CSV or older)
    source: str | None = _optional()  # None: trained here
    import_format: str | None = _optional()
    task: str | None = _optional()  # None: classification
    search_results: dict | None = _optional()
