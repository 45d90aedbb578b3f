"""The one-class SVM (Schölkopf et al., LIBSVM's -s 2) by the same SMO as the C-SVC (``solve.solve_smo``).

Problem
-------
Rows x_i (their labels unused), a kernel K with feature map phi, nu in (0, 1]. As LIBSVM scales it (Chang and Lin,
"LIBSVM: a library for support vector machines", 2011, Section 2.3), the primal

    min_{w, rho}  P(w, rho) = 0.5 * |w|^2 - nu n rho + sum_i max(0, rho - <w, phi(x_i)>)

and its dual

    min_alpha  f(alpha) = 0.5 * alpha' Q alpha,   0 <= alpha_i <= 1,   sum_i alpha_i = nu n,   Q_ij = K(x_i, x_j),

the C-SVC's dual with every label +1, every cost 1, no linear term and the equality's constant nu n instead of 0:
the same two-variable steps keep sum_i alpha_i where the start put it. The start is LIBSVM's: alpha_i = 1 for the
first floor(nu n) rows, the next one the remainder, the rest 0. The model is f(x) = sum_i alpha_i K(x_i, x) - rho
with rho the C-SVC's threshold of this problem (b = -rho); a row is an inlier (+1) when f(x) > 0, else an outlier
(-1). The primal at (alpha, rho) is 0.5 alpha' Q alpha + nu n b + the C-SVC's hinge sum with y = +1 and p = 0
(max(0, -G_i - b)), so the certified gap is the C-SVC's (P - D) / |P|, D = -f(alpha) (P is negative at the
optimum).
"""

from __future__ import annotations

import math

import numpy as np

from worker.solvers.common import SolverInputError, SolverResult


def initial_alpha(n: int, nu: float) -> np.ndarray:
    """LIBSVM's start: 1 for the first floor(nu n) rows, the remainder for the next, 0 after; sums to nu n."""
    total = nu * n
    whole = min(int(math.floor(total)), n)
    alpha = np.zeros(n)
    alpha[:whole] = 1.0
    if whole < n:
        alpha[whole] = total - whole
    return alpha


def check_one_class(n: int, nu) -> float:
    """nu as a float, checked with the rows: a one-class SVM needs nu in (0, 1] and at least 2 rows (its steps pair
    two variables)."""
    nu = float(nu)
    if n < 2:
        raise SolverInputError("a one-class SVM needs at least 2 rows")
    if not 0.0 < nu <= 1.0:
        raise SolverInputError(f"nu must lie in (0, 1], got {nu}")
    return nu


def solve_one_class(
    solve_smo,
    indptr,
    indices,
    data,
    *,
    n_features,
    params,
    n_threads=None,
    control=None,
    alpha0=None,
    gradient_bar0=None,
) -> SolverResult:
    """Train a one-class SVM (module docstring) by ``solve_smo`` (``solve.solve_smo``, given by its caller: this
    module does not import it back); ``params`` as ``solve.solve_smo``'s, with ``nu`` (``C`` unused: the
    box is [0, 1]). ``alpha0``/``gradient_bar0``: a warm start (a previous fit's ``extra["alpha"]``, summing to nu n)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    n = indptr.size - 1
    nu = check_one_class(n, params.nu)
    start = initial_alpha(n, nu) if alpha0 is None else np.asarray(alpha0, dtype=np.float64)
    if start.shape != (n,) or abs(float(start.sum()) - nu * n) > 1e-9 * max(1.0, nu * n):
        raise SolverInputError(f"alpha0 of a one-class SVM has {n} values summing to nu n = {nu * n}")
    return solve_smo(
        indptr, indices, data, np.ones(n), n_features=n_features, params=params, n_threads=n_threads,
        control=control, alpha0=start, gradient_bar0=gradient_bar0 if alpha0 is not None else None,
        linear_term=np.zeros(n), one_class_nu=nu,
    )  # fmt: skip
