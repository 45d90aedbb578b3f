"""The contract between the API and the worker: job parameters cross Redis as the JSON the API stores,
and the worker reads them back with the same pydantic schemas (``core.schemas.solver_params``)."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from core.schemas.jobs import JobRequest
from core.schemas.solver_params import KERNEL_SOLVERS, PARAMS_BY_SOLVER, OcasParams, SmoParams, solver_params
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
    assert type(read) is PARAMS_BY_SOLVER[request.solver]
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
    assert set(KERNEL_SOLVERS) == {name for name, schema in PARAMS_BY_SOLVER.items() if "kernel" in schema.model_fields}
