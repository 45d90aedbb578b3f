"""The contract between the API and the worker: job parameters cross Redis as the JSON the API stores,
the worker reads them back with the same pydantic schemas (``core.schemas.solver_params``), and every
field reaches the solve function, under its meaning (issue 21, item 3: a parameter dropped on the way,
as the old adapters allowed, fails here)."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from core.schemas.jobs import JobRequest
from core.schemas.solver_params import OcasParams, SmoParams
from core.solvers import KERNEL_SOLVERS, SOLVERS, solver_params
from service.api.job_checks import stored_params

BODIES = [
    {"solver": "dcd", "params": {"C": 0.5, "loss": "squared_hinge", "class_weight": {"1": 2.0}}},
    {"solver": "cpa", "params": {"objective": "ranking", "tol": 0.01}},
    {"solver": "ocas", "params": {"lambda": 0.3, "search": {"C": [0.1, 1.0], "cv_folds": 3}}},
    {"solver": "smo", "params": {"kernel": {"type": "poly", "degree": 2}, "max_iter": None}},
    {"solver": "sampled_cuts", "params": {"kernel": {"type": "rbf", "gamma": 0.5}, "variant": "constant"}},
]


@pytest.mark.parametrize("body", BODIES, ids=[b["solver"] for b in BODIES])
def test_the_worker_reads_what_the_api_stored(body):
    request = TypeAdapter(JobRequest).validate_python(dict(body, dataset_id="ds_x"))
    stored = stored_params(request)  # what the job record holds in Redis (JSON names: `lambda`)
    read = solver_params(request.solver, stored)
    assert type(read) is SOLVERS[request.solver].params
    assert read == request.params
    assert read.model_dump(mode="json", by_alias=True) == stored


def test_hand_written_params_get_the_schema_defaults():
    ocas = solver_params("ocas", {"lambda": 0.2})
    assert isinstance(ocas, OcasParams) and ocas.lam == 0.2 and ocas.max_iter == OcasParams().max_iter
    smo = solver_params("smo", {"tol": 0.01})
    assert isinstance(smo, SmoParams) and smo.kernel.type == "rbf" and smo.task == "classification"
    assert solver_params("cpa", {"objective": "ordinal"}).task == "ordinal"
    assert solver_params("smo", smo) is smo  # a model of the right schema passes through


def test_params_that_do_not_fit_are_refused():
    with pytest.raises(ValidationError):
        solver_params("dcd", {"lambda": 0.1})  # ocas's field
    with pytest.raises(ValidationError):
        solver_params("ocas", {"C": -1.0})
    with pytest.raises(TypeError, match="OcasParams"):
        solver_params("dcd", OcasParams())
    with pytest.raises(KeyError):
        solver_params("svm", {})


def test_kernel_solvers_are_the_schemas_with_a_kernel():
    assert set(KERNEL_SOLVERS) == {name for name, spec in SOLVERS.items() if "kernel" in spec.params.model_fields}


def _non_default(name: str, field, current):
    """A valid value of a schema field that differs from ``current`` (its default)."""
    import typing

    from pydantic import BaseModel

    if isinstance(current, BaseModel):  # a kernel: another type with its own fields
        return {"type": "poly", "degree": 2, "gamma": 0.25, "coef0": 1.0}
    annotation = field.annotation
    literal = [a for a in (annotation, *typing.get_args(annotation)) if typing.get_origin(a) is typing.Literal]
    if literal:
        return next(v for v in typing.get_args(literal[0]) if v != current)
    args = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    kinds = {typing.get_origin(a) or a for a in args}
    if dict in kinds:
        return {"1": 2.5}
    if bool in kinds:
        return not current
    if int in kinds and float not in kinds:
        return (current or 1) + 3
    return (current or 0.5) * 0.37 if current not in (None, 0, 0.0) else 0.123


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_every_field_reaches_the_solve_function_under_its_meaning(solver, monkeypatch):
    """Every schema field but the dispatcher's own arrives at the solve function with the value the job
    gave it: each field in turn gets a value other than its default, goes through the API's validation
    and the stored JSON, and the call the worker makes is captured."""
    import inspect

    from worker import registry

    spec = SOLVERS[solver]
    signature = inspect.signature(registry.solve_function(solver))
    schema = spec.params
    for name, field in schema.model_fields.items():
        if name in registry.SERVICE_FIELDS:
            continue
        keyword = spec.arguments.get(name, name)
        assert keyword in signature.parameters, f"{solver}: schema field {name} has no keyword {keyword} to go to"
        default = schema().__getattribute__(name)
        value = _non_default(name, field, default)
        if solver == "cpa" and name == "objective":
            value = "ordinal"
        try:
            params = solver_params(solver, {field.alias or name: value})
        except ValidationError:
            params = solver_params(solver, {field.alias or name: value, "tol": 0.01, "tol_rel": 0.02})
        stored = solver_params(solver, params.model_dump(mode="json", by_alias=True))  # across Redis
        seen = {}
        monkeypatch.setattr(registry, "solve_function", lambda s: lambda *a, **kw: seen.update(kw))
        registry.fit(solver, None, None, None, None, n_features=3, params=stored, class_weight=(0.5, 2.0), control=None)
        monkeypatch.undo()
        got = seen[keyword]
        expected = getattr(stored, name)
        expected = expected.model_dump() if hasattr(expected, "model_dump") else expected
        if name == "class_weight":
            assert got == (0.5, 2.0), "class_weight arrives as the problem's (negative, positive) factors"
        else:
            assert got == expected and got != (default.model_dump() if hasattr(default, "model_dump") else default), (
                solver,
                name,
                got,
                default,
            )


def test_the_dispatchers_own_fields_are_a_fixed_few():
    """The fields that do not go to the solve function (the dispatcher uses them), so that a solver field
    cannot be hidden there: every other field is checked above."""
    from worker import registry

    assert registry.SERVICE_FIELDS == {"search", "n_processes", "max_seconds", "probability", "retries", "multiclass"}


def test_a_solver_is_named_in_few_files_and_the_client_lists_the_registry():
    """One solver, one place: outside its own modules a solver is named only by its spec, its warm-up unit
    and the HTTP-only client (which cannot import core/: its lists are checked against the registry here)."""
    import subprocess
    import typing
    from pathlib import Path

    from core.solvers import BUILT_IN, KERNEL_SOLVERS
    from hinge_client import estimators
    from hinge_client.types import Solver

    root = Path(__file__).resolve().parents[1]
    for spec in BUILT_IN:
        named = subprocess.run(
            ["git", "grep", "-l", "-w", spec.name, "--", "core", "service", "worker", "hinge_client"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.split()
        outside = [
            path
            for path in named
            if path.endswith(".py")
            and not Path(path).name.startswith(spec.name)
            and not path.startswith(f"worker/solvers/{spec.name}/")
        ]
        if spec.name == "sampled_cuts":
            assert len(outside) <= 4, outside
    names = [spec.name for spec in BUILT_IN]
    assert list(typing.get_args(Solver)) == names
    assert list(estimators.SOLVER_PARAMS) == names
    assert set(estimators.LINEAR_SOLVERS) == set(names) - set(KERNEL_SOLVERS)
    for spec in BUILT_IN:  # the estimator's parameters are the schema's (gamma, degree, coef0: the kernel's;
        fields = set(spec.params.model_fields) | {"gamma", "degree", "coef0", "tol"}  # tol: tol_rel where none)
        assert set(estimators.SOLVER_PARAMS[spec.name]) <= fields, spec.name


def test_tol_rel_means_one_thing_for_every_solver():
    """Issue 21, item 5: where tol_rel exists it is a certified relative gap in (0, 1), or null for off; 0 reads
    as null (earlier versions stored 0 for off in dcd and cpa jobs, which must still load)."""
    with_tol_rel = [name for name, spec in SOLVERS.items() if "tol_rel" in spec.params.model_fields]
    assert set(with_tol_rel) >= {"dcd", "cpa", "ocas", "smo"}
    for name in with_tol_rel:
        field = SOLVERS[name].params.model_fields["tol_rel"]
        assert field.default == 0.01 and "(0, 1), or null for off" in field.description, name
        other_rule = {"tol": 1e-3} if name == "cpa" else {"tol_abs": 1.0} if name == "ocas" else {}
        assert solver_params(name, {"tol_rel": 0.5}).tol_rel == 0.5
        assert solver_params(name, {"tol_rel": None, **other_rule}).tol_rel is None
        assert solver_params(name, {"tol_rel": 0, **other_rule}).tol_rel is None, "an old job's 0 means off"
        for bad in (1.0, 1.5, -0.1):
            with pytest.raises(ValidationError):
                solver_params(name, {"tol_rel": bad})
    with pytest.raises(ValidationError, match="tol_rel and tol are both null"):
        solver_params("cpa", {"tol_rel": None})
    with pytest.raises(ValidationError, match="tol_rel is null and tol_abs is 0"):
        solver_params("ocas", {"tol_rel": None})
    for name, spec in SOLVERS.items():  # what n_processes does, said per solver
        assert "a single" in spec.params.model_fields["n_processes"].description, name


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_a_solve_functions_defaults_are_its_schemas(solver):
    """Jobs take their defaults from the schema (the registry passes every field); the solve functions keep
    defaults only for direct calls (tests, benchmarks), and they must be the schema's: one value each."""
    import inspect

    from pydantic import BaseModel

    from worker import registry

    spec = SOLVERS[solver]
    signature = inspect.signature(registry.solve_function(solver))
    defaults = spec.params()
    for name in spec.params.model_fields:
        parameter = signature.parameters.get(spec.arguments.get(name, name))
        if name in registry.SERVICE_FIELDS or name == "class_weight" or parameter is None:
            continue
        if parameter.default is inspect.Parameter.empty:
            continue  # required there (C, kernel): no second default
        value = getattr(defaults, name)
        value = value.model_dump() if isinstance(value, BaseModel) else value
        assert parameter.default == value, f"{solver}.{name}: solve default {parameter.default!r}, schema {value!r}"


def test_the_estimators_table_of_built_in_solvers_is_what_the_openapi_document_says():
    """HingeClassifier knows the five built-in solvers without a request and reads any other from the service's
    OpenAPI document (``hinge_client.solvers``, issue 35, item 6): on the built-in ones both readings agree."""
    import json
    from pathlib import Path

    from hinge_client import estimators
    from hinge_client.solvers import solvers_in

    document = json.loads((Path(__file__).resolve().parents[1] / "openapi" / "openapi.json").read_text())
    solvers = solvers_in(document)
    assert list(solvers) == list(estimators.SOLVER_PARAMS)
    for name, info in solvers.items():
        assert estimators.estimator_params_of(info) == estimators.SOLVER_PARAMS[name], name
        assert ("ovo" in info.multiclass) == (name in estimators.ONE_VS_ONE_SOLVERS), name
        assert (not info.kernel) == (name in estimators.LINEAR_SOLVERS), name
