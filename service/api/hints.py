"""Error messages that say how to fix the request, as a new user needs them.

* An unknown field (``extra_forbidden``): the field it was probably meant to be, either a field of a
  nested object one level down (``gamma`` at the top of smo's params: "did you mean
  params.kernel.gamma?") or a close spelling of a field at that place (``max_iters``: "max_iter").
* A body that is not a JSON object although it may be JSON text: which header is missing.
* A body that is not JSON: the line and column where parsing failed.
* Limits: the ``HINGE_*`` environment variable that sets them, not the internal setting name.
"""

from __future__ import annotations

import difflib
import re
import typing

from pydantic import BaseModel

from service.config import Settings


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
    # the kernel first: its gamma is what a top-level `gamma` means far more often than the search's grid
    fields = sorted(parent.model_fields.items(), key=lambda item: item[0] != "kernel")
    for field_name, field in fields:
        for nested in _models_of(field.annotation):
            if name in nested.model_fields and name not in ("type", "solver"):
                where = f"{prefix}.{field_name}.{name}" if prefix else f"{field_name}.{name}"
                example = ""
                tag = _tag_of(nested)
                if tag is not None and field_name == "kernel":
                    example = f' (e.g. "kernel": {{"type": "{tag}", "{name}": ...}})'
                return f"did you mean {where}?{example}"
    close = difflib.get_close_matches(name, list(parent.model_fields), n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    return f"allowed here: {', '.join(sorted(parent.model_fields))}"


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
