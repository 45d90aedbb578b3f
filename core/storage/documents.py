"""Data set and model records: the typed form of their JSON metadata documents, converted here only.

A data set's or a model's metadata is one JSON document in Redis (``core.storage.records`` stores it
with the record's binary arrays). ``from_document`` and ``to_document`` are the one conversion, as
``JobRecord.from_hash`` / ``to_hash`` for jobs; the API and the workers read attributes.

Dataclasses, as the job record (see ``core.storage.job_record`` for why not pydantic): the records
are the service's own writing, read back exactly as stored. Keys this version does not know are kept
as they are (``extra``), and so is the order of the keys read (``key_order``): the JSON export of a
model lists its training figures in the stored order. Which fields a document holds:

- in a stored record, a field without a default (or marked required) is always written, null included
  (``from_document`` refuses a document that lacks one);
- an optional field (``_optional``), which older or other records lack, only when it is not None;
- any other field once it is set: read from a document that has it (null included), given to the
  constructor (other than its default), or assigned later. A record keeps the order of its fields as a
  dict keeps its keys: as read, then as set (an assignment of a field not yet there puts it last), so
  that a model assembled field by field is stored in the order it was assembled, as when it was a dict.

A model is declared once, by ``ModelDescription`` (what scores rows, and how it was trained: the
training report) and ``ModelRecord`` (the description with where it came from and where it is
stored). The training code and the model file readers build a ``ModelDescription``; the worker and the
import route store it as a ``ModelRecord``; ``core.scoring``, the model file writers and the warnings
read their attributes. What derives from the declaration: the API's ``ModelOut`` (which holds the
fields' descriptions) shows every field but ``NOT_SHOWN`` and requires those every stored model has
(``tests/test_model_fields.py`` checks both); the JSON document's top-level fields are those of
``ModelDocument`` the record has, its ``training`` part the rest, of which an import keeps what
``TrainingInfo`` names (``service.interchange.json_model``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any, ClassVar, Self

from core.schemas.enums import Multiclass
from core.schemas.model_files import Calibration, ModelKernel
from core.schemas.stopping_rule import StoppingRule

_NOT_STORED = {"extra", "key_order"}


def _optional() -> Any:
    """A field that documents may lack: None, and then not written."""
    return field(default=None, metadata={"optional": True})


def _reported(default: Any = None) -> Any:
    """A field written once it is set (null included): what one path of a model's making reports and another lacks."""
    return field(default=default)


def _required(default: Any = None, *, factory: Any = MISSING) -> Any:
    """A field every stored record has (written even when None); a description being built may not have it yet."""
    if factory is not MISSING:
        return field(default_factory=factory, metadata={"required": True})
    return field(default=default, metadata={"required": True})


def _is_required(spec: Field) -> bool:
    return bool(spec.metadata.get("required")) or (spec.default is MISSING and spec.default_factory is MISSING)


def _default_of(spec: Field) -> Any:
    if spec.default_factory is not MISSING:
        return spec.default_factory()
    return None if spec.default is MISSING else spec.default


_FIELDS: dict[type, tuple[tuple[Field, ...], frozenset[str]]] = {}
"""Per record type: its stored fields, and their names (read at every assignment)."""


def _stored_fields(cls: type) -> tuple[Field, ...]:
    if cls not in _FIELDS:
        specs = tuple(spec for spec in fields(cls) if spec.name not in _NOT_STORED)
        _FIELDS[cls] = (specs, frozenset(spec.name for spec in specs))
    return _FIELDS[cls][0]


def _stored_names(cls: type) -> frozenset[str]:
    _stored_fields(cls)
    return _FIELDS[cls][1]


@dataclass(kw_only=True)
class Document:
    """Typed fields of a JSON document: the conversion to and from it, in its order (see the module docstring)."""

    complete: ClassVar[bool] = False
    """Whether a document of this type is whole (a stored record: its required fields are always written)."""

    extra: dict[str, Any] = field(default_factory=dict)  # keys this record type does not name, as stored
    key_order: tuple[str, ...] = field(default=(), compare=False, repr=False)  # as read, then as set

    def __post_init__(self) -> None:
        if not self.key_order:  # built here, not read: the fields given, in the order they are declared
            self.key_order = tuple(
                spec.name
                for spec in _stored_fields(type(self))
                if (self.complete and _is_required(spec))
                or (not spec.metadata.get("optional") and getattr(self, spec.name) != _default_of(spec))
            )
        object.__setattr__(self, "_built", True)

    def __setattr__(self, name: str, value: Any) -> None:
        """Set a field; one not in the document yet goes last, as a new key of a dict would."""
        object.__setattr__(self, name, value)
        if self.__dict__.get("_built") and name not in self.key_order and name in _stored_names(type(self)):
            object.__setattr__(self, "key_order", (*self.key_order, name))

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The names of the document's typed fields, in the order they are declared."""
        return tuple(spec.name for spec in _stored_fields(cls))

    @classmethod
    def required_field_names(cls) -> tuple[str, ...]:
        """The names of the fields every stored document of this type has (null or not)."""
        return tuple(spec.name for spec in _stored_fields(cls) if _is_required(spec))

    def put(self, name: str, value: Any) -> None:
        """Set a field by its name, or a key this type does not name (kept in ``extra``), in the document's order."""
        if name in _stored_names(type(self)):
            setattr(self, name, value)
            return
        self.extra[name] = value
        if name not in self.key_order:
            object.__setattr__(self, "key_order", (*self.key_order, name))

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> Self:
        """The record of a stored document, or of a document about to be stored (a TypeError names a field it lacks)."""
        names = _stored_names(cls)
        if cls.complete:
            lacking = [spec.name for spec in _stored_fields(cls) if _is_required(spec) and spec.name not in document]
            if lacking:
                raise TypeError(f"{cls.__name__} lacks the fields {', '.join(lacking)}")
        known = {name: value for name, value in document.items() if name in names}
        extra = {name: value for name, value in document.items() if name not in names}
        return cls(**known, extra=extra, key_order=tuple(document))

    def to_document(self) -> dict[str, Any]:
        """The document as stored (see the module docstring for which fields), its keys as read, then as set."""
        values = {}
        for spec in _stored_fields(type(self)):
            value = getattr(self, spec.name)
            if spec.metadata.get("optional"):
                written = value is not None
            else:
                written = spec.name in self.key_order or value != _default_of(spec)
            if written:
                values[spec.name] = value
        values.update(self.extra)
        ordered = {name: values[name] for name in self.key_order if name in values}
        return {**ordered, **{name: value for name, value in values.items() if name not in ordered}}


@dataclass(kw_only=True)
class StoredDocument(Document):
    """What data set and model records share: an id, an owner, a time, and the manifest of their arrays."""

    complete: ClassVar[bool] = True

    id: str
    tenant: str
    created_at: str
    arrays: dict[str, dict] = field(default_factory=dict)  # the binary arrays' manifest (name -> dtype, shape, chunks)


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
    labels: dict[str, int]  # rows per label, keyed by the label as text (empty past ``MAX_COUNTED_LABELS`` values)
    has_qid: bool
    zero_based: bool
    compressed: bool
    text_bytes: int
    feature_names: list[str] | None
    zero_based_guessed: bool | None = _optional()  # absent: CSV, or stored before it was recorded
    value_dtype: str | None = _optional()  # absent: float64 (data sets stored before float32 existed)
    shards: list[dict] | None = _optional()  # in the object store (core.storage.shards); absent: Redis chunks
    max_row_norm_sq: float | None = _optional()  # the largest |x_i|^2 (absent: stored before it was kept)
    targets: dict | None = _optional()  # the labels as numbers (``TargetSummary``; absent: stored before it was kept)
    labelled: bool | None = _optional()  # False: uploaded with labels=none (every row's label is 1); absent: labelled


@dataclass(kw_only=True)
class ModelDescription(Document):
    """A model: what scores rows with it, and how it was trained (``ModelOut`` describes each field).

    Built by the training code (``worker.training``) and by the model file readers (``service.interchange``);
    stored, with where it came from, as a ``ModelRecord``. The fields of the training report are None (and
    not written) for imported models, except those an import states (``TrainingInfo``) or writes as null.
    """

    # -- what scores rows (``core.scoring.models``, the model file writers) --
    kind: str = _required("linear")  # linear, kernel or ranking (``ModelKind``)
    task: str | None = _optional()  # None: classification (``Task``)
    labels: list[float] | None = _required()  # ascending (ordinal: the ranks); None: a model that only scores
    n_features: int = _required(0)
    zero_based: bool = _required(False)  # whether predict rows number features from 0 (as the training upload)
    multiclass: str | None = _reported()  # `ovo` (one decision per pair of labels, vote); else not written
    ovo_labels: list[float] | None = _reported()  # ovo: the labels in the order their pairs are numbered
    nr_sv: list[int] | None = _reported()  # ovo: expansion rows per label of ovo_labels (stored grouped so)
    kernel: dict | None = _reported()  # kernel models: the kernel, gamma resolved (``kernel_spec``)
    n_support: int | None = _reported()  # kernel models: the expansion rows
    ranks: list[float] | None = _reported()  # ordinal models: the ranks, ascending
    thresholds: list[float] | None = _reported()  # ordinal models: score thresholds between adjacent ranks
    probability: dict | None = _reported()  # calibrated models (``calibration``); null: calibration was impossible
    liblinear_solver_type: str | None = _reported()  # LIBLINEAR imports: the file's solver_type (written back)
    libsvm_svm_type: str | None = _reported()  # LIBSVM imports: the file's svm_type

    # -- how it was trained (the training report; ``TrainingInfo`` is the part a JSON export carries). The
    # required ones are null for an imported model (the import writes them so), unless its file states them. --
    solver: str | None = _required()  # None: imported from LIBLINEAR or LIBSVM
    params: dict = _required(factory=dict)  # the job's (as stored with it), or what an imported file states
    n_iter: int | None = _required()  # outer iterations, summed over the binary problems
    n_iter_per_problem: list[int] | None = _reported()
    converged: bool | None = _required()
    stop_reason: str | None = _required()  # ``StopReason``'s value
    training_seconds: float | None = _required()  # solver seconds
    trace_seconds: float | None = _reported()
    objective: float | None = _required()
    objectives: list[float | None] | None = _reported()  # per binary problem
    gap_rel: float | None = _reported()  # certified relative gap, the largest over the problems
    gap_rel_per_problem: list[float | None] | None = _reported()
    gap_rel_note: str | None = _reported()
    stopping_rule: dict | None = _reported()  # ``StoppingRule``: {rule, values, text}
    data_access: dict | None = _reported()  # out of core: ``DataAccess`` (held and read bytes, passes)
    train_accuracy: float | None = _required()  # None: a model that only scores, or imported
    train_accuracy_rows: int | None = _reported()  # when measured on a sample
    n_support_per_problem: list[int] | None = _reported()  # kernel models
    n_bounded_support_per_problem: list[int | None] | None = _reported()  # kernel models (smo)
    n_pairs: int | None = _reported()  # pairwise objectives
    train_pairwise_accuracy: float | None = _reported()  # pairwise objectives
    train_roc_auc: float | None = _reported()  # roc_area models
    train_mse: float | None = _reported()  # regression models: mean squared error on the training rows
    train_r2: float | None = _reported()  # regression models: R² on the training rows
    train_outlier_fraction: float | None = _reported()  # one-class models: training rows predicted -1
    search_results: dict | None = _optional()  # model selection: the cross-validation table (worker.training.search)
    refit_params: dict | None = _reported()  # model selection: the best setting, refit on all the data
    refit_path: dict | None = _reported()  # model selection: the Cs the refit walked (stored, not shown)
    warnings: list[dict] | None = _reported()  # ``ResultWarning``s: the search's, then the worker's

    # The typed views below are built without validation: what is stored was checked when it was made (by the
    # training code, or by a reader against ``ModelDocument``), and a record reads back as it was stored.
    @property
    def calibration(self) -> Calibration | None:
        """The calibration, typed (None: not calibrated)."""
        return Calibration.model_construct(**self.probability) if self.probability else None

    @property
    def kernel_spec(self) -> ModelKernel | None:
        """The kernel of a kernel model, typed (gamma resolved to a number)."""
        return ModelKernel.model_construct(**self.kernel) if self.kernel is not None else None

    @property
    def stopping(self) -> StoppingRule | None:
        """The rule behind stop_reason, typed (None: imported)."""
        return StoppingRule.model_construct(**self.stopping_rule) if self.stopping_rule else None

    @property
    def one_vs_one(self) -> bool:
        """Whether more than two labels are decided by one-vs-one votes (``ovo_labels`` and ``nr_sv`` are set)."""
        return self.multiclass == Multiclass.ovo


@dataclass(kw_only=True)
class ModelRecord(StoredDocument, ModelDescription):
    """A stored model: its description (``ModelDescription``) and where it came from."""

    job_id: str | None  # None: imported
    dataset_id: str | None
    zero_based_guessed: bool | None = _optional()  # the training data set's (None: imported, CSV or older)
    source: str | None = _optional()  # None: trained here (``ModelSource``)
    import_format: str | None = _optional()


NOT_SHOWN = frozenset(
    {"tenant", "arrays", "ovo_labels", "nr_sv", "liblinear_solver_type", "libsvm_svm_type", "refit_path"}
)
"""Fields of a stored model that the API's ``ModelOut`` does not show (the file writers read the middle ones)."""
