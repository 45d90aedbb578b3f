"""What the sampled-cut solvers (``sampled_cuts.solve``, binary; ``sampled_cuts.multiclass``, Crammer and Singer's)
share: the fields of a job's settings they read (``SampledCutsSettings``), the variants and their default sample
sizes, how their kernel blocks are split, their clock and what they say of a gap they cannot certify."""

from __future__ import annotations

import time
from typing import Any, Protocol

VARIANTS = ("linear", "constant", "subspace")
DEFAULT_SAMPLE_SIZE = {"linear": 1000, "constant": 400, "subspace": 500}
"""r when ``sample_size`` is None: paper 003's Table 1 rows (linear r = 1000: within 0.1 point of smo's test
error on ijcnn1, where r = 400 was 0.2 above; constant r = 400, its Checkers row); the subspace variant's basis:
500 rows (the paper's Cholesky runs used 250-500 on Checkers; 2 GB of projected rows at 10^6 rows)."""
PAR_MIN_VALUES = 100_000
"""Kernel values below which a block is computed on one thread (read at each call, so tests can lower it)."""
SLICE_VALUES = 4_000_000  # kernel values per chunk of the linear variant's A row
SAMPLED_GAP_NOTE = (
    "none certified: the cuts are sampled, so the master problem's value bounds the sampled approximation, not the "
    "optimum"
)
"""The gap note of a model whose master problem holds sampled cuts."""


class TraceClock:
    """A solver's clock: seconds since it started, less those spent recording trace points (``record``)."""

    def __init__(self, control) -> None:
        self.control = control
        self.started = time.perf_counter()
        self.trace_seconds = 0.0

    def record(self, point: dict) -> None:
        """Stamp ``point`` with the solving time so far (``elapsed_s``) and hand it to the control."""
        t0 = time.perf_counter()
        point["elapsed_s"] = t0 - self.started - self.trace_seconds
        self.control.record(point)
        self.trace_seconds += time.perf_counter() - t0

    def solver_seconds(self) -> float:
        """The solving time so far, trace points excluded."""
        return time.perf_counter() - self.started - self.trace_seconds


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
