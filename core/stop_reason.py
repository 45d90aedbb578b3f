"""Why a training run stopped: one enum for the solvers, the workers and the API's schemas.

It lives here, in a module that imports nothing but the standard library, because two sides need it:
the solvers (worker/solvers/, which import only numpy, scipy and numba: no pydantic) return it in their
results, and the schemas (core/schemas/) declare it in answers, where generated clients get it as an
enum. The values are what Redis stores and the API answers.
"""

from __future__ import annotations

from enum import Enum


class StopReason(str, Enum):
    """Why a solver stopped."""

    CONVERGED = "converged"
    MAX_ITER = "max_iter"
    DEADLINE = "deadline"
    CANCELED = "canceled"
    INTERRUPTED = "interrupted"  # the worker was asked to stop (SIGTERM, hinge serve stopping); set by the worker
    NODE_LOST = "node_lost"  # a node of a training split over nodes was lost: the best model so far
