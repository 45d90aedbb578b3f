"""The contract between the API and the worker: job parameters cross Redis as the JSON the API stores,
the worker reads them back with the same pydantic schemas (``core.schemas.solver_params``) and hands them to
the solve function as they are, which reads every field (issue 21, item 3: a parameter dropped on the way,
as the old adapters allowed, fails here); the schema alone validates them and holds their defaults."""

from __future__ import annotations

import typing

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


NOT_READ = {"cpa": {"seed"}, "ocas": {"seed"}}
"""Fields a solver has no use for (cpa and ocas draw nothing: their docstrings say so)."""


def _settings(solver: str) -> type:
    """The type of the solve function's ``params`` (its protocol of the schema's fields)."""
    import inspect

    from worker.training import registry

    return inspect.signature(registry.solve_function(solver), eval_str=True).parameters["params"].annotation


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_the_worker_hands_the_job_params_to_the_solve_function(solver, monkeypatch):
    """The job's params reach the solve function as the schema's model, exactly as the API stored them and
    the worker read them back (so every field arrives, with the job's value or the schema's default); the
    keywords besides are the dispatcher's: class_weight as the problem's factors, the threads of one problem."""
    from worker.training import registry

    spec = SOLVERS[solver]
    stored = solver_params(solver, solver_params(solver, {}).model_dump(mode="json", by_alias=True))  # across Redis
    seen = {}
    monkeypatch.setattr(registry, "solve_function", lambda s: lambda *a, **kw: seen.update(kw))
    registry.fit(solver, None, None, None, None, n_features=3, params=stored, class_weight=(0.5, 2.0), control=None)
    assert seen["params"] is stored
    keywords = set(seen) - {"params", "n_features", "control"}
    expected = ({"class_weight"} if "class_weight" in spec.params.model_fields else set()) | (
        {spec.threads} if spec.threads else set()
    )
    assert keywords == expected, (solver, keywords)
    if "class_weight" in keywords:
        assert seen["class_weight"] == (0.5, 2.0), "class_weight arrives as the problem's (negative, positive) factors"


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_every_field_is_read_by_its_solver_or_the_dispatcher(solver):
    """A parameter cannot be dropped on the way (issue 21, item 3): the solve function's ``params`` declares
    every field of the schema that the dispatcher does not use itself, and its module reads each one as
    ``params.<field>``; no schema field is a keyword of its own with a second default (one place for each
    default: the schema)."""
    import ast
    import inspect
    import typing

    from worker.training import registry

    spec = SOLVERS[solver]
    function = registry.solve_function(solver)
    fields = set(spec.params.model_fields)
    declared = set(typing.get_type_hints(_settings(solver)))
    assert declared == fields - registry.SERVICE_FIELDS - registry.KEYWORD_FIELDS - NOT_READ.get(solver, set()), solver
    import importlib

    tree = ast.parse(inspect.getsource(inspect.getmodule(function)))
    # the module and the solver modules it hands params to (dcd: dcd_logistic, dcd_svr)
    delegates = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("worker.solvers.")
    }
    trees = [tree] + [ast.parse(inspect.getsource(importlib.import_module(name))) for name in sorted(delegates)]
    read = {
        node.attr
        for each in trees
        for node in ast.walk(each)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "params"
    }
    assert declared <= read, f"{solver} never reads params.{sorted(declared - read)}"
    keywords = set(inspect.signature(function).parameters)
    assert keywords & fields <= registry.KEYWORD_FIELDS, (
        f"{solver}: schema fields as keywords {sorted(keywords & fields)}"
    )


REFUSED = [
    # what the solvers checked again before the schema alone did (issue: one place validates a parameter)
    ("dcd", {"C": 0.0}, "C"),
    ("dcd", {"C": "nan"}, "C"),
    ("dcd", {"loss": "log"}, "loss"),
    ("dcd", {"bias": -1.0}, "bias"),
    ("dcd", {"tol": 0.0}, "tol"),
    ("dcd", {"tol": "inf"}, "tol"),
    ("dcd", {"max_iter": 0}, "max_iter"),
    ("dcd", {"trace_every": 0}, "trace_every"),
    ("dcd", {"seed": -1}, "seed"),
    ("dcd", {"trace_budget": 0.0}, "trace_budget"),
    ("dcd", {"trace_budget": -0.1}, "trace_budget"),
    ("dcd", {"trace_budget": "nan"}, "trace_budget"),
    ("dcd", {"trace_budget": "inf"}, "trace_budget"),
    ("cpa", {"C": 0.0}, "C"),
    ("cpa", {"tol": -1.0}, "tol"),
    ("cpa", {"bias": 0.0}, "bias"),
    ("cpa", {"max_iter": 0}, "max_iter"),
    ("cpa", {"max_inactive": 0}, "max_inactive"),
    ("cpa", {"objective": "regression"}, "objective"),
    ("cpa", {"seed": -1}, "seed"),
    ("cpa", {"tol_rel": None}, "tol_rel and tol are both null"),
    ("ocas", {"lambda": 0.0}, "lambda"),
    ("ocas", {"lambda": 1.5}, "lambda"),
    ("ocas", {"tol_rel": None, "tol_abs": 0.0}, "tol_rel is null and tol_abs is 0"),
    ("ocas", {"tol_rel": 1.0}, "tol_rel"),
    ("ocas", {"tol_rel": -1.0}, "tol_rel"),
    ("ocas", {"tol_abs": "inf"}, "tol_abs"),
    ("ocas", {"C": -1.0}, "C"),
    ("ocas", {"bias": -1.0}, "bias"),
    ("smo", {"C": 0.0}, "C"),
    ("smo", {"kernel": {"type": "cosine"}}, "kernel"),
    ("smo", {"working_set": "wss3"}, "working_set"),
    ("smo", {"tol": -1e-3}, "tol"),
    ("smo", {"cache_mb": -5}, "cache_mb"),
    ("smo", {"shrinking": "yes"}, "shrinking"),
    ("smo", {"max_iter": 0}, "max_iter"),
    ("smo", {"trace_every": 0}, "trace_every"),
    ("sampled_cuts", {"C": -1.0}, "C"),
    ("sampled_cuts", {"variant": "quadratic"}, "variant"),
    ("sampled_cuts", {"sample_size": 0}, "sample_size"),
    ("sampled_cuts", {"p": 0}, "p"),
    ("sampled_cuts", {"tol": 0.0}, "tol"),
    ("sampled_cuts", {"max_inactive": 0}, "max_inactive"),
    ("sampled_cuts", {"max_iter": 2.5}, "max_iter"),
    ("sampled_cuts", {"bias": -1.0}, "bias"),
    ("sampled_cuts", {"seed": -3}, "seed"),
]


@pytest.mark.parametrize("solver, params, word", REFUSED, ids=[f"{s}-{w}" for s, _, w in REFUSED])
def test_the_schema_refuses_what_the_solvers_take_as_valid(solver, params, word):
    """The solvers no longer check their parameters: the schema refuses a bad one at POST /v1/jobs, naming the
    field (its `loc`) or, for a rule between fields, saying it."""
    with pytest.raises(ValidationError) as refused:
        solver_params(solver, params)
    errors = refused.value.errors()
    assert any(word in (error["loc"][:1] or ("",))[0] or word in error["msg"] for error in errors), errors


def test_the_dispatchers_own_fields_are_a_fixed_few():
    """The fields that do not go to the solve function (the dispatcher uses them), so that a solver field
    cannot be hidden there: every other field is checked above."""
    from worker.training import registry

    assert registry.SERVICE_FIELDS == {
        "search",
        "n_processes",
        "max_seconds",
        "probability",
        "retries",
        "multiclass",
        "distributed",
    }


def test_the_client_lists_the_registry():
    """The HTTP-only client, which cannot import core/, lists the built-in solvers as the registry does (where a
    solver may be named outside its package: tests/test_house.py)."""
    import typing

    from core.solvers import BUILT_IN, KERNEL_SOLVERS
    from hinge_client import estimators
    from hinge_client.types import Solver

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
    for name, spec in SOLVERS.items():  # a spec's Crammer-Singer function iff its schema offers the problem
        field = spec.params.model_fields.get("multiclass")
        offered = field is not None and "crammer_singer" in typing.get_args(field.annotation)
        assert offered == (spec.crammer_singer is not None), name


def test_the_estimators_table_of_built_in_solvers_is_what_the_openapi_document_says():
    """HingeClassifier knows the five built-in solvers without a request and reads any other from the service's
    OpenAPI document (``hinge_client.solvers``, issue 35, item 6): on the built-in ones both readings agree."""
    import json
    from pathlib import Path

    from hinge_client import estimators
    from hinge_client.solvers import estimator_params_of, solvers_in

    document = json.loads((Path(__file__).resolve().parents[1] / "openapi" / "openapi.json").read_text())
    solvers = solvers_in(document)
    assert list(solvers) == list(estimators.SOLVER_PARAMS)
    for name, info in solvers.items():
        assert estimator_params_of(info) == estimators.SOLVER_PARAMS[name], name
        assert ("ovo" in info.multiclass) == (name in estimators.ONE_VS_ONE_SOLVERS), name
        assert ("crammer_singer" in info.multiclass) == (name in estimators.CRAMMER_SINGER_SOLVERS), name
        assert (not info.kernel) == (name in estimators.LINEAR_SOLVERS), name
