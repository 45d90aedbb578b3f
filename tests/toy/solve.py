"""The toy solver: subgradient descent with step 1 / (t + 1) on 0.5 |w|^2 + C sum_i hinge_i (numpy only)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from worker.solvers.common import SolverResult, StopReason

if TYPE_CHECKING:
    from tests.toy.spec import ToyParams


def solve_toy(indptr, indices, data, y, *, n_features, params: ToyParams, control=None):
    """Train; every 10 steps a trace point with the subgradient's norm as ``max_violation``. ``params``: the job's
    parameters, the schema's model (the convention of every solver: its fields and defaults live there only)."""
    C, tol, max_iter, bias = params.C, params.tol, params.max_iter, params.bias  # seed: nothing is drawn
    start = time.perf_counter()
    X = sp.csr_matrix((np.asarray(data, dtype=np.float64), indices, indptr), shape=(len(indptr) - 1, n_features))
    if bias is not None:
        X = sp.hstack([X, np.full((X.shape[0], 1), float(bias))], format="csr")
    y = np.asarray(y, dtype=np.float64)
    w = np.zeros(X.shape[1])
    best_w, best_F = w.copy(), np.inf
    stop_reason, converged, norm = StopReason.MAX_ITER, False, np.inf
    t = 0
    for t in range(1, max_iter + 1):
        margins = y * (X @ w)
        F = 0.5 * w @ w + C * np.maximum(0.0, 1.0 - margins).sum()
        if F < best_F:
            best_F, best_w = F, w.copy()
        g = w - C * (X.T @ (y * (margins < 1.0)))
        norm = float(np.linalg.norm(g)) / (1.0 + C * X.shape[0])
        if t % 10 == 1 and control is not None:
            control.record(
                {"iteration": t, "elapsed_s": time.perf_counter() - start, "primal": F, "max_violation": norm}
            )
        if norm < tol:
            stop_reason, converged = StopReason.CONVERGED, True
            break
        reason = control.check() if control is not None else None
        if reason is not None:
            stop_reason = reason
            break
        w = w - g / (t + 1.0)
    offset = float(best_w[-1] * bias) if bias is not None else 0.0
    weights = best_w[:-1] if bias is not None else best_w
    return SolverResult(
        w=weights,
        bias=offset,
        n_iter=t,
        converged=converged,
        stop_reason=stop_reason,
        objective=float(best_F),
        solver_seconds=time.perf_counter() - start,
        trace=tuple(control.points) if control is not None else (),
        extra={"max_violation": norm},
    )
