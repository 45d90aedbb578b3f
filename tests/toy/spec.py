"""The toy solver's spec and parameters: plain subgradient descent on the linear SVM's primal.

Registered with ``HINGE_SOLVER_PLUGINS=tests.toy.spec``; nothing else in the project names it."""

from __future__ import annotations

from pydantic import Field

from core.schemas.common_params import CommonParams
from core.solvers import SolverSpec, StoppingRule, fmt_value, violation_measure


class ToyParams(CommonParams):
    """A linear SVM by subgradient steps (test solver)."""

    C: float = Field(default=1.0, gt=0, description="Penalty of the training loss.")
    tol: float = Field(default=1e-3, gt=0, description="Stop when the subgradient's norm is below tol.")
    max_iter: int = Field(default=2000, ge=1, description="Most steps.")
    bias: float | None = Field(default=1.0, description="Value of the constant feature; null: none.")


def toy_stopping(params, extra: dict) -> StoppingRule:
    """The subgradient below tol."""
    return StoppingRule(
        rule="tol", values={"tol": params.tol}, text=f"subgradient norm below tol {fmt_value(params.tol)}"
    )


SPEC = SolverSpec(
    name="toy",
    summary="Train a linear SVM with plain subgradient steps (`toy`, a test solver).",
    params=ToyParams,
    solve="tests.toy.solve:solve_toy",
    progress=violation_measure,
    stopping=toy_stopping,
    exports=("json", "liblinear", "onnx"),  # no libsvm file: the test sees the spec's list honoured
    calibration=False,
)
