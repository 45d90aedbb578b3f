"""What the sampled-cut solvers (``sampled_cuts.solve``, binary; ``sampled_cuts.multiclass``, Crammer and Singer's)
share of a job's settings: the fields they read (``SampledCutsSettings``), the variants and their default sample
sizes, and how their kernel blocks are split."""

from __future__ import annotations

from typing import Any, Protocol

VARIANTS = ("linear", "constant", "subspace")
DEFAULT_SAMPLE_SIZE = {"linear": 1000, "constant": 400, "subspace": 500}
"""r when ``sample_size`` is None: paper 003's Table 1 rows (linear r = 1000: within 0.1 point of smo's test
error on ijcnn1, where r = 400 was 0.2 above; constant r = 400, its Checkers row); the subspace variant's basis:
500 rows (the paper's Cholesky runs used 250-500 on Checkers; 2 GB of projected rows at 10^6 rows)."""
PAR_MIN_VALUES = 100_000
"""Kernel values below which a block is computed on one thread (read at each call, so tests can lower it)."""
SLICE_VALUES = 4_000_000  # kernel values per chunk of the linear variant's A row


class SampledCutsSettings(Protocol):
    """What sampled_cuts reads of a job's params: the fields of its schema
    (``core.schemas.solver_params.SampledCutsParams``), which validates them and holds their defaults (this
    package imports no pydantic; tests and the warm-up build the schema's model or give every field).
    ``kernel``: the schema's kernel model (or a dict of its fields), with a number for gamma."""

    C: float
    kernel: Any
    variant: str
    sampling: str
    sample_size: int | None
    pool_size: int | None
    p: int
    tol: float
    max_inactive: int
    max_iter: int
    bias: float | None
    seed: int
