"""nu-SVC (Schölkopf et al. 2000, LIBSVM's -s 1) by the same SMO as the C-SVC (``solve.solve_smo``) with the nu
duals' working set (``smo.nu``).

Problem
-------
Rows x_i, labels y_i in {-1, +1}, a kernel K, nu in (0, 1]. As LIBSVM scales it (Chang and Lin, "LIBSVM: a library
for support vector machines", 2011, Sections 2.2 and 4.1.2), the primal

    min_{w, b, rho}  P = 0.5 * |w|^2 - nu n rho + sum_i max(0, rho - y_i (<w, phi(x_i)> + b))

and its dual

    min_alpha  f(alpha) = 0.5 * alpha' Q alpha,   0 <= alpha_i <= 1,   sum_i y_i alpha_i = 0,   sum_i alpha_i = nu n,

Q_ij = y_i y_j K(x_i, x_j): the C-SVC's dual with box [0, 1], no linear term and a second equality, which steps on
pairs of the same sign keep (``smo.nu``). The start is LIBSVM's: nu n / 2 spread over the positive rows in their
order (1 each until it is spent), the same over the negative ones; it exists when nu <= 2 min(n_+, n_-) / n. At the
solution, LIBSVM's r_1 and r_2 give b = (r_2 - r_1) / 2 and rho = (r_1 + r_2) / 2 (``smo.nu.nu_parts``); the model
is LIBSVM's: alpha, b scaled by 1 / rho, f(x) = sum_i y_i (alpha_i / rho) K(x_i, x) + b / rho, which is the C-SVC
solution at C = 1 / rho (``extra["equivalent_C"]``, LIBSVM's printed "C ="). The objective and the certified gap
are those of the problem above (P at (alpha, b, rho) against D = -f(alpha); P is negative at the optimum).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from worker.solvers.common import SolverInputError, SolverResult, binary_signs
from worker.solvers.smo.state import NU_SVC


def largest_nu(n_positive: int, n_negative: int) -> float:
    """The largest feasible nu of a nu-SVC on these class sizes: 2 min(n_+, n_-) / n."""
    return 2.0 * min(n_positive, n_negative) / max(1, n_positive + n_negative)


def initial_alpha(y: np.ndarray, nu: float) -> np.ndarray:
    """LIBSVM's start: nu n / 2 on each sign, 1 per row in row order until it is spent."""
    left = {1.0: nu * y.size / 2.0, -1.0: nu * y.size / 2.0}
    alpha = np.zeros(y.size)
    for i, label in enumerate(y):
        share = min(1.0, left[float(label)])
        alpha[i] = share
        left[float(label)] -= share
    return alpha


def solve_nu_svc(
    solve_smo,
    indptr,
    indices,
    data,
    y,
    *,
    n_features,
    params,
    n_threads=None,
    control=None,
    alpha0=None,
    gradient_bar0=None,
) -> SolverResult:
    """Train a nu-SVC (module docstring) by ``solve_smo`` (``solve.solve_smo``, given by its caller: this module does
    not import it back); ``params`` as ``solve.solve_smo``'s, with ``nu`` (``C`` unused: the box is [0, 1]).
    ``alpha0``/``gradient_bar0``: a warm start (a previous fit's ``extra["alpha"]``, unscaled)."""
    signs = binary_signs(y)
    n = signs.size
    nu = float(params.nu)
    n_positive = int(np.count_nonzero(signs > 0))
    largest = largest_nu(n_positive, n - n_positive)
    if not 0.0 < nu <= largest:
        raise SolverInputError(
            f"nu = {nu} is infeasible for a nu-SVC on {n_positive} positive and {n - n_positive} negative rows: it "
            f"must lie in (0, 2 min(n+, n-) / n] = (0, {largest:.6g}]"
        )
    start = initial_alpha(signs, nu) if alpha0 is None else np.asarray(alpha0, dtype=np.float64)
    result = solve_smo(
        indptr, indices, data, signs, n_features=n_features, params=params, n_threads=n_threads, control=control,
        alpha0=start, gradient_bar0=gradient_bar0 if alpha0 is not None else None, linear_term=np.zeros(n),
        nu_form=NU_SVC, nu_offset=nu * n,
    )  # fmt: skip
    rho = float(result.extra["rho"])
    scale = 1.0 / rho if rho > 0.0 else 1.0  # rho <= 0: a degenerate solution, left unscaled
    extra = dict(
        result.extra,
        dual_coef=np.asarray(result.extra["dual_coef"]) * scale,
        equivalent_C=scale if rho > 0.0 else None,
        gradient=None,  # a warm start scales G as a C-SVC's (G + 1); this G has no linear term: recomputed
    )
    w = None if result.w is None else result.w * scale
    return replace(result, w=w, bias=result.bias * scale, extra=extra)
