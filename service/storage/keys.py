"""The one module that builds Redis keys. Every key of the service starts with ``hinge:``."""

from __future__ import annotations

import secrets

PREFIX = "hinge"


def new_id(kind: str) -> str:
    """A fresh random id with a readable prefix: ``ds_…``, ``job_…``, ``mdl_…``."""
    return f"{kind}_{secrets.token_hex(10)}"


def dataset(dataset_id: str) -> str:
    """JSON metadata of a data set (its presence is what makes the data set exist)."""
    return f"{PREFIX}:dataset:{dataset_id}"


def model(model_id: str) -> str:
    """JSON metadata of a model."""
    return f"{PREFIX}:model:{model_id}"


def array_chunk(owner_key: str, name: str, index: int) -> str:
    """One chunk of a binary array that belongs to a data set or a model."""
    return f"{owner_key}:array:{name}:{index}"


def job(job_id: str) -> str:
    """Hash with the state of a training job."""
    return f"{PREFIX}:job:{job_id}"


def job_trace(job_id: str) -> str:
    """List of JSON convergence points of a job, appended while it runs."""
    return f"{PREFIX}:job:{job_id}:trace"


def job_cancel(job_id: str) -> str:
    """Flag set when a cancel of the job is requested."""
    return f"{PREFIX}:job:{job_id}:cancel"


def tenant_index(tenant: str, kind: str) -> str:
    """Sorted set (score: creation time) of a tenant's data sets, jobs or models."""
    return f"{PREFIX}:tenant:{tenant}:{kind}"
