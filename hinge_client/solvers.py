"""The solvers a service trains and the parameters each takes, read from its OpenAPI document.

The client follows the server: a solver registered on the service (``HINGE_SOLVER_PLUGINS``) is trained from
``hingectl`` and ``HingeClassifier`` with no client change. Each solver is one ``<Name>JobRequest`` schema of the
document, whose ``solver`` is a constant and whose ``params`` point to the solver's parameter schema.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SolverInfo", "estimator_params_of", "solvers_in"]


@dataclass(frozen=True)
class SolverInfo:
    """What one solver of the service takes."""

    name: str
    """The solver's name, as ``POST /v1/jobs`` takes it."""
    fields: frozenset[str]
    """The fields of its parameter schema (``C``, ``tol``, ``kernel``, ...)."""
    multiclass: tuple[str, ...]
    """The schemes its ``multiclass`` field takes (``ovr``, ``ovo``, ``crammer_singer``); empty when it has none
    (one-vs-rest)."""

    @property
    def kernel(self) -> bool:
        """Whether it trains kernel models (its parameters have a ``kernel``)."""
        return "kernel" in self.fields


def _resolve(document: dict, schema: dict) -> dict:
    """A schema with its ``$ref`` (or the one ``$ref`` of an ``allOf``/``anyOf``) followed."""
    for key in ("allOf", "anyOf"):
        refs = [part for part in schema.get(key, ()) if "$ref" in part]
        if len(refs) == 1:
            schema = refs[0]
    ref = schema.get("$ref")
    if ref is None:
        return schema
    return document["components"]["schemas"][ref.rsplit("/", 1)[-1]]


def solvers_in(document: dict) -> dict[str, SolverInfo]:
    """Every solver of an OpenAPI document of the service, by name, in the service's order (its ``SolverName``)."""
    solvers = {}
    for schema in document.get("components", {}).get("schemas", {}).values():
        properties = schema.get("properties", {})
        name = properties.get("solver", {}).get("const")
        if name is None or "params" not in properties or "dataset_id" not in properties:
            continue
        params = _resolve(document, properties["params"])
        fields = params.get("properties", {})
        multiclass = _resolve(document, fields["multiclass"]).get("enum", ()) if "multiclass" in fields else ()
        solvers[name] = SolverInfo(name, frozenset(fields), tuple(multiclass))
    order = document["components"]["schemas"].get("SolverName", {}).get("enum", [])
    rank = {name: k for k, name in enumerate(order)}
    return dict(sorted(solvers.items(), key=lambda item: rank.get(item[0], len(rank))))


def estimator_params_of(info: SolverInfo) -> tuple[str, ...]:
    """The estimator's parameters a solver takes, from its parameter schema's fields (``tol_rel`` takes ``tol``,
    ``kernel`` takes gamma, degree and coef0 too, ``nu`` with an ``svm_type`` NuSVC's nu; its ``multiclass`` schemes are
    ``SolverInfo.multiclass``)."""
    taken: list[str] = [name for name in ("C", "loss", "penalty") if name in info.fields]
    if info.kernel:
        taken += ["kernel", "gamma", "degree", "coef0"]
    taken += [name for name in ("bias",) if name in info.fields]
    if "tol" in info.fields or "tol_rel" in info.fields:
        taken.append("tol")
    taken += [name for name in ("max_iter", "class_weight") if name in info.fields]
    if "nu" in info.fields and "svm_type" in info.fields:  # NuSVC's nu: an svm_type of its own (dcd's nu is one-class)
        taken.append("nu")
    return tuple(taken)
