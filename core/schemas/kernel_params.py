"""The kernels of the kernel solvers' params: one schema per kernel, told apart by `type`."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field

from core.schemas.base import StrictModel

PositiveGamma = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class LinearKernel(StrictModel):
    """K(x, z) = <x, z>."""

    type: Literal["linear"] = Field(description="`linear`.")


class RbfKernel(StrictModel):
    """K(x, z) = exp(-gamma |x - z|^2)."""

    type: Literal["rbf"] = Field(description="`rbf`.")
    gamma: PositiveGamma | Literal["scale"] = Field(
        default="scale", description="Width; `scale` means 1 / (n_features * variance of the data), as scikit-learn."
    )


class PolyKernel(StrictModel):
    """K(x, z) = (gamma <x, z> + coef0)^degree."""

    type: Literal["poly"] = Field(description="`poly`.")
    gamma: PositiveGamma | Literal["scale"] = Field(
        default="scale", description="Scale of the inner product; `scale` as for rbf."
    )
    coef0: float = Field(default=0.0, allow_inf_nan=False, description="Constant term.")
    degree: int = Field(default=3, ge=1, le=20, description="Degree of the polynomial.")


class SigmoidKernel(StrictModel):
    """K(x, z) = tanh(gamma <x, z> + coef0)."""

    type: Literal["sigmoid"] = Field(description="`sigmoid`.")
    gamma: PositiveGamma | Literal["scale"] = Field(
        default="scale", description="Scale of the inner product; `scale` as for rbf."
    )
    coef0: float = Field(default=0.0, allow_inf_nan=False, description="Constant term.")


class PrecomputedKernel(StrictModel):
    """K given by the data (LIBSVM's -t 4): each row holds its kernel values against the training rows."""

    type: Literal["precomputed"] = Field(
        description="`precomputed` (smo only): row x is `0:i` (the training row's serial number i, from 1; any value "
        "for rows that only get predicted) then `j:K(x, x_j)` for every training row j, LIBSVM's -t 4 layout (upload "
        "it with zero_based=true or auto: index 0 is the serial). The model keeps its support vectors' serials, so "
        "rows to predict hold their kernel values against the same numbering."
    )


Kernel = Annotated[
    LinearKernel | RbfKernel | PolyKernel | SigmoidKernel | PrecomputedKernel, Field(discriminator="type")
]
KERNEL_TYPES = tuple(
    get_args(kind.model_fields["type"].annotation)[0]
    for kind in (LinearKernel, PolyKernel, RbfKernel, SigmoidKernel, PrecomputedKernel)
)
"""The kernel `type` names, read from the schemas above: ("linear", "poly", "rbf", "sigmoid", "precomputed")."""
