"""Closed sets of names that answers carry, declared as enums so generated clients get them as such."""

from __future__ import annotations

from enum import Enum

from core.stop_reason import StopReason as StopReason  # beside the solvers' results; the schemas take it from here


class ModelKind(str, Enum):
    """How a model scores rows."""

    linear = "linear"
    kernel = "kernel"
    ranking = "ranking"


class Task(str, Enum):
    """What a model was trained for."""

    classification = "classification"
    ordinal = "ordinal"
    roc_area = "roc_area"
    ranking = "ranking"
    regression = "regression"
    one_class = "one_class"


class Multiclass(str, Enum):
    """How more than two classes are decided."""

    ovr = "ovr"
    ovo = "ovo"


class NodeLoss(str, Enum):
    """What a training split over nodes does when one of them is lost (``params.distributed.on_node_lost``)."""

    regroup = "regroup"
    stop = "stop"


class ExportFormat(str, Enum):
    """A format a model can be exported in."""

    json = "json"
    liblinear = "liblinear"
    libsvm = "libsvm"
    onnx = "onnx"


class ImportFormat(str, Enum):
    """A format a model can be imported from."""

    json = "json"
    liblinear = "liblinear"
    libsvm = "libsvm"


class ModelSource(str, Enum):
    """Where a model came from."""

    trained = "trained"
    imported = "imported"


class WarningCode(str, Enum):
    """Why a result that ended as a success deserves a second look (``core.scoring.quality``)."""

    max_iter = "max_iter"
    not_converged = "not_converged"
    no_better_than_majority = "no_better_than_majority"
    search_incomplete = "search_incomplete"
    parameter_out_of_range = "parameter_out_of_range"
    fewer_nodes = "fewer_nodes"
    nodes_lost = "nodes_lost"
