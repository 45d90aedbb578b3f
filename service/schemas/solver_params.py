"""Parameters of each solver, validated and documented one schema per solver.

The C convention is the same for every solver (LIBLINEAR's): minimize
0.5*|w|^2 + C * sum_i loss_i. Solvers whose papers use C/m or C/n convert internally.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, field_validator

from service.schemas.base import StrictModel


class CommonParams(StrictModel):
    """Parameters every solver accepts."""

    max_seconds: float | None = Field(
        default=None,
        gt=0,
        description=(
            "Wall-clock budget of the solver in seconds. At the deadline the solver stops at its next "
            "iteration check and the job succeeds with the best model so far (`stop_reason: deadline`). "
            "Null: no deadline (the server's ceiling still applies)."
        ),
    )
    seed: int = Field(
        default=0, ge=0, le=2**63 - 1, description="Seed of every random choice of the solver: the same seed gives the same model."
    )


class DcdParams(CommonParams):
    """Dual coordinate descent (Hsieh et al., ICML 2008) for linear SVMs with L1 or L2 loss."""

    C: float = Field(default=1.0, gt=0, description="Penalty of the training loss: minimize 0.5*|w|^2 + C * sum_i loss_i.")
    loss: Literal["hinge", "squared_hinge"] = Field(
        default="hinge",
        description="`hinge`: max(0, 1 - y w'x) (L1-SVM, LIBLINEAR -s 3). `squared_hinge`: its square (L2-SVM, LIBLINEAR -s 1).",
    )
    bias: float | None = Field(
        default=1.0,
        description=(
            "Value B of a constant feature appended to every row, so the model learns an offset b = B*w_B "
            "(regularized like the other weights, as LIBLINEAR's -B). Null: no offset."
        ),
    )
    class_weight: dict[str, float] | None = Field(
        default=None,
        description=(
            "Factor on C per label, keyed by the label as the data set lists it (e.g. {\"1\": 5}). "
            "Labels not listed keep factor 1."
        ),
    )
    tol: float = Field(
        default=0.1,
        gt=0,
        description="Stop when the largest minus the smallest projected gradient of the dual is below tol (paper's rule (17); LIBLINEAR's -e).",
    )
    max_iter: int = Field(default=1000, ge=1, le=10**7, description="Most outer iterations (passes over the data) per binary problem.")
    shrinking: bool = Field(default=True, description="Drop bounded dual variables from the passes (paper's Section 3.2); always ends with a full check.")
    trace_every: int = Field(
        default=1,
        ge=1,
        description="Record a convergence point every this many outer iterations (each point costs one pass over the data, not counted in training_seconds).",
    )

    @field_validator("bias", "C")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value

    @field_validator("class_weight")
    @classmethod
    def _positive_weights(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        if value is not None:
            for label, factor in value.items():
                if not (math.isfinite(factor) and factor > 0):
                    raise ValueError(f"the factor for label {label!r} must be a finite number > 0, got {factor}")
        return value
