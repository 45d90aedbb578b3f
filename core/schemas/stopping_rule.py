"""The stopping rule of a model: which rule ended its training, with its values, in the user's words.

Made by each solver's spec (``core.solvers``: what its convergence rule says) and by the worker for the
reasons that are not convergence (``worker.training.stopping``); stored with the model and shown as its
``stopping_rule``.
"""

from __future__ import annotations

from pydantic import Field

from core.schemas.base import ResponseModel


class StoppingRule(ResponseModel):
    """Which rule ended training, with its values."""

    rule: str = Field(
        description="`tol`, `tol_rel`, `tol_abs` (converged by that tolerance), `max_iter`, `max_seconds`, `cancel` "
        "or `shutdown` (a worker stopped with the checkpoint policy)."
    )
    values: dict[str, float | int | None] = Field(
        description='The stopping parameters as used, e.g. {"tol": 0.1, "tol_rel": 0.01}.'
    )
    text: str = Field(description="The rule in words, with the values reached (e.g. the certified gap).")
