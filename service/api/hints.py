"""Error messages that say how to fix the request, as a new user needs them.

* An unknown field (``extra_forbidden``): the field it was probably meant to be: a field of a nested
  object up to two levels down (``gamma`` at the top of smo's params: "did you mean
  params.kernel.gamma?"; at the top of the request: the same), scikit-learn's name for one of ours
  (``random_state``: "seed"), a kernel asked of a linear solver (which solvers take one), or a close
  spelling of a field at that place (``max_iters``: "max_iter").
* A solver name that is not one (``svm``, ``SMO``, ``sampled-cuts``): the solver meant.
* A job without a ``solver`` (or a kernel without a ``type``): the field named, and the values it takes.
* scikit-learn's spellings of values: ``"kernel": "rbf"`` (ours is an object), ``"class_weight":
  "balanced"`` (ours are factors per label).
* A body that is not a JSON object although it may be JSON text: which header is missing.
* A body that is not JSON: the line and column where parsing failed.
* Limits: the ``HINGE_*`` environment variable that sets them, not the internal setting name.
"""

from __future__ import annotations

import difflib
import re
import typing

from pydantic import BaseModel

from core.config import Settings
from core.schemas.kernel_params import KERNEL_TYPES
from core.solvers import KERNEL_SOLVERS, SOLVERS


def setting_variable(name: str) -> str:
    """The environment variable of a setting (``max_rows`` -> ``HINGE_MAX_ROWS``)."""
    return "REDIS_URL" if name == "redis_url" else f"HINGE_{name.upper()}"


_SETTING_NAMES = re.compile(
    r"\b("
    + "|".join(sorted((n for n in Settings.model_fields if n.startswith("max_")), key=len, reverse=True))
    + r")\b"
)


def with_setting_variables(message: str) -> str:
    """Name limits by the environment variables that set them (``max_rows`` -> ``HINGE_MAX_ROWS``)."""
    return _SETTING_NAMES.sub(lambda match: setting_variable(match.group(1)), message)


def _models_of(annotation) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through Optional, Union and Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for argument in typing.get_args(annotation):
        found.extend(_models_of(argument))
    return found


def _tag_of(model: type[BaseModel]) -> str | None:
    """The discriminator value of a union member (its `solver` or `type` literal)."""
    for name in ("solver", "type"):
        field = model.model_fields.get(name)
        if field is not None:
            values = typing.get_args(field.annotation)
            if len(values) == 1 and isinstance(values[0], str):
                return values[0]
    return None


def _parent_model(root: list[type[BaseModel]], path: list) -> type[BaseModel] | None:
    """Walk a validation location (without its last element) from the union of root models."""
    candidates = root
    model = None
    for part in path:
        if not isinstance(part, str):
            return None
        tagged = [m for m in candidates if _tag_of(m) == part]
        if tagged and len(candidates) > 1:  # a discriminated union's tag in the location
            model, candidates = tagged[0], tagged
            continue
        if model is None and len(candidates) == 1:
            model = candidates[0]
        if model is None or part not in model.model_fields:
            return None
        candidates = _models_of(model.model_fields[part].annotation)
        model = candidates[0] if len(candidates) == 1 else None
    if model is None and len(candidates) == 1:
        model = candidates[0]
    return model


CRAMMER_SINGER = (
    'Crammer-Singer (one problem over every label) is "multiclass": "crammer_singer" on solver '
    + " or ".join(
        f"{name} ({'with a kernel' if spec.model_kind == 'kernel' else 'linear'})"
        for name, spec in SOLVERS.items()
        if spec.crammer_singer
    )
)
"""Where Crammer and Singer's multi-class SVM is, for a request that asks another solver for it."""

SKLEARN_NAMES = {
    "random_state": "seed",
    "n_jobs": "n_processes",
    "cache_size": "cache_mb",
    "decision_function_shape": "multiclass",
}
"""scikit-learn's (and LIBSVM's Python) parameter names -> ours, where the meaning is the same."""


def _nested_field(parent: type[BaseModel], name: str, depth: int = 2) -> tuple[list[str], type[BaseModel]] | None:
    """The path of fields, up to ``depth`` levels below ``parent``, to a model that has a field ``name``
    (nearest first; the kernel before anything else: its gamma is what a stray `gamma` means far more
    often than the search's grid)."""
    level: list[tuple[list[str], type[BaseModel]]] = [([], parent)]
    for _ in range(depth):
        following: list[tuple[list[str], type[BaseModel]]] = []
        for path, model in level:
            fields = sorted(model.model_fields.items(), key=lambda item: item[0] != "kernel")
            for field_name, field in fields:
                for nested in _models_of(field.annotation):
                    if name in nested.model_fields and name not in ("type", "solver"):
                        return [*path, field_name], nested
                    following.append(([*path, field_name], nested))
        level = following
    return None


def extra_field_hint(root: list[type[BaseModel]], loc: list) -> str | None:
    """ "did you mean ...?" for an unknown field at ``loc`` (a validation location without 'body')."""
    if not loc or not isinstance(loc[-1], str):
        return None
    name = loc[-1]
    parent = _parent_model(root, list(loc[:-1]))
    if parent is None:
        return None
    shown = [p for p in loc[:-1] if not any(_tag_of(m) == p for m in _all_models(root))]
    prefix = ".".join(str(p) for p in shown)
    solver = next((p for p in loc[:-1] if p in KERNEL_SOLVERS or any(_tag_of(m) == p for m in root)), None)
    if name in ("kernel", "gamma", "degree", "coef0") and "kernel" not in parent.model_fields and solver:
        if solver not in KERNEL_SOLVERS and (parent in root or "C" in parent.model_fields):
            kernel_solvers = " or ".join(KERNEL_SOLVERS)
            return f"{solver} trains linear models and takes no kernel: use solver {kernel_solvers} for a kernel SVM"
    if name in ("multiclass", "multi_class") and "multiclass" not in parent.model_fields and solver:
        return f"{solver} trains one binary problem per label (one-vs-rest); {CRAMMER_SINGER}"
    if name in SKLEARN_NAMES and SKLEARN_NAMES[name] in parent.model_fields:
        ours = f"{prefix}.{SKLEARN_NAMES[name]}" if prefix else SKLEARN_NAMES[name]
        return f"did you mean {ours}? (scikit-learn's {name})"
    found = _nested_field(parent, name)
    if found is not None:
        path, nested = found
        where = ".".join([*([prefix] if prefix else []), *path, name])
        example = ""
        tag = _tag_of(nested)
        if tag is not None and path[-1] == "kernel":
            example = f' (e.g. "kernel": {{"type": "{tag}", "{name}": ...}})'
        return f"did you mean {where}?{example}"
    close = difflib.get_close_matches(name, list(parent.model_fields), n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    return f"allowed here: {', '.join(sorted(parent.model_fields))}"


SOLVER_WORDS = {
    "svm": "dcd (a linear SVM, LIBLINEAR's algorithm) or smo (a kernel SVM, LIBSVM's)",
    "linear": "dcd (LIBLINEAR's dual coordinate descent), cpa or ocas",
    "linearsvc": "dcd (LIBLINEAR's dual coordinate descent, as LinearSVC)",
    "liblinear": "dcd (LIBLINEAR's dual coordinate descent)",
    "svc": "smo (LIBSVM's algorithm, as scikit-learn's SVC)",
    "libsvm": "smo (LIBSVM's algorithm)",
    "kernel": " or ".join(KERNEL_SOLVERS),
    "svmperf": "cpa (SVMperf's 1-slack cutting planes)",
    "svmrank": 'cpa with params.objective "ranking"',
}
"""Names people give a solver, and the solver they mean."""


def solver_hint(tag: object, solvers: tuple[str, ...]) -> str:
    """Which solver a name that is not one probably means."""
    text = str(tag).strip().lower().replace("-", "_").replace(" ", "_")
    if text in solvers:
        return f"did you mean {text!r}? (solver names are lower case, with _)"
    word = text.replace("_", "")
    if word in SOLVER_WORDS:
        return f"for that use solver {SOLVER_WORDS[word]}"
    close = difflib.get_close_matches(text, list(solvers), n=1, cutoff=0.5)
    return f"did you mean {close[0]!r}?" if close else f"solvers: {', '.join(solvers)}"


def _either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def tag_choices(field: str) -> str:
    """What a missing union tag takes: the solvers (grouped by the models they train, from their specs) for
    a job's `solver`, the kernel types for a kernel's `type`."""
    if field == "solver":
        kinds: dict[str, list[str]] = {}
        for name, spec in SOLVERS.items():
            kinds.setdefault(spec.model_kind, []).append(name)
        groups = "; ".join(f"{_either(names)} ({kind} models)" for kind, names in kinds.items())
        return f'every job names its solver, e.g. "solver": "{next(iter(SOLVERS))}"; solvers: {groups}'
    if field == "type":
        return f'a kernel names its type, e.g. {{"type": "rbf", "gamma": 0.5}}; types: {", ".join(KERNEL_TYPES)}'
    return f"send {field!r}"


def value_hint(field: str, value: object, kernel_types: tuple[str, ...]) -> str | None:
    """How to write scikit-learn's spelling of a value the way this API takes it."""
    if field == "kernel" and isinstance(value, str):
        kind = value.strip().lower()
        example = {"rbf": '"gamma": 0.5', "poly": '"degree": 3, "gamma": 1, "coef0": 0', "sigmoid": '"gamma": 0.1'}
        if kind in kernel_types:
            extra = f", {example[kind]}" if kind in example else ""
            return f'a kernel is an object here: "kernel": {{"type": "{kind}"{extra}}}'
        return f'a kernel is an object here, e.g. "kernel": {{"type": "rbf", "gamma": 0.5}} (types: {", ".join(kernel_types)})'
    if field in ("multiclass", "multi_class") and value == "crammer_singer":
        return CRAMMER_SINGER
    if field == "class_weight" and isinstance(value, str):
        return (
            'class_weight is a factor per label, e.g. {"1": 5}; scikit-learn\'s "balanced" is '
            "n_samples / (n_labels * count of the label), from the data set's `labels` counts"
        )
    return None


def _all_models(root: list[type[BaseModel]]) -> list[type[BaseModel]]:
    seen: list[type[BaseModel]] = []
    stack = list(root)
    while stack:
        model = stack.pop()
        if model in seen:
            continue
        seen.append(model)
        for field in model.model_fields.values():
            stack.extend(_models_of(field.annotation))
    return seen


def json_position(body: bytes, position: int) -> str:
    """'line L, column C' of a character offset in a request body."""
    text = body.decode("utf-8", errors="replace")[:position]
    line = text.count("\n") + 1
    column = position - (text.rfind("\n") + 1) + 1
    return f"line {line}, column {column}"
