"""epsilon-SVR with a kernel (LIBSVM's -s 3) by the same SMO as the C-SVC (``solve.solve_smo``).

Problem
-------
Rows x_i, real targets y_i, epsilon >= 0, in the service's convention (C multiplies a sum of losses), with an
unregularized offset b:

    min_{w, b}  P(w, b) = 0.5 * |w|^2 + C * sum_i max(0, |<w, phi(x_i)> + b - y_i| - epsilon).

Its dual in 2n variables (Vapnik; the form LIBSVM's ``solve_epsilon_svr`` solves, Chang and Lin, "LIBSVM: a
library for support vector machines", 2011, Section 2.4): alpha_t for t < n and alpha*_i = alpha_{n+i},

    min  f(alpha) = 0.5 * alpha' Q alpha + p' alpha,   0 <= alpha_t <= C,   sum_t z_t alpha_t = 0,
    z = (+1, ..., +1, -1, ..., -1),   Q_st = z_s z_t K(x_(s mod n), x_(t mod n)),
    p = (epsilon - y_1, ..., epsilon - y_n, epsilon + y_1, ..., epsilon + y_n),

which is the C-SVC's dual with labels z, all costs C, and the linear term p in place of -1: the same
two-variable step, working-set rules, shrinking and stopping rule (m - M < tol over the whole problem, then the
certified gap). The model is f(x) = sum_i beta_i K(x_i, x) + b with beta_i = alpha_i - alpha*_i, b the C-SVC's
threshold of the doubled problem. Here the doubled problem is literally the rows twice (the kernel rows have 2n
entries and the data is held twice: twice LIBSVM's kernel work, which computes n entries and copies them).

The gap: the primal at (beta, b), 0.5 beta' K beta + C sum_i loss_i, against the dual value -f(alpha) (weak
duality), as the C-SVC's; row i's loss comes from the gradient of its first copy (``steps.svr_loss``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import scipy.sparse as sp

from worker.solvers.common import SolverInputError, SolverResult
from worker.solvers.kernels import KERNEL_LINEAR, kernel_params
from worker.solvers.smo.state import NU_SVR


def solve_svr(
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
    """Train an epsilon-SVR (module docstring) on real targets ``y`` by ``solve_smo`` (``solve.solve_smo``, given
    by its caller: this module does not import it back); ``params`` as ``solve.solve_smo``'s (C,
    epsilon, kernel, tol, tol_rel, ...). ``alpha0`` and ``gradient_bar0``: the 2n dual variables of a previous
    fit (``extra["alpha"]``) and their G_bar, a warm start. The result's ``support_indices`` and ``dual_coef``
    are the rows with beta_i != 0 and their beta_i; ``extra["alpha"]`` holds the 2n variables."""
    targets = _targets(y, indptr)
    epsilon = float(params.epsilon)
    linear_term = np.concatenate([epsilon - targets, epsilon + targets])
    return _solve_doubled(
        solve_smo, indptr, indices, data, n_features, params, n_threads, control, alpha0, gradient_bar0, linear_term,
        svr_epsilon=epsilon,
    )  # fmt: skip


def solve_nu_svr(
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
    """Train a nu-SVR (LIBSVM's -s 4; Schölkopf et al. 2000; Chang and Lin 2011, Section 2.5): epsilon is a variable,
    nu in (0, 1] bounds the fraction of rows outside the tube,

        min_{w, b, epsilon}  0.5 * |w|^2 + C * (nu n epsilon + sum_i max(0, |<w, phi(x_i)> + b - y_i| - epsilon)),

    whose dual is the doubled problem of the module docstring with p = (-y, +y) and the second equality
    sum_t alpha_t = C nu n, solved by the nu duals' working set (``smo.nu``) from LIBSVM's start (alpha_i =
    alpha*_i = min(C, what is left of C nu n / 2), in row order). epsilon = -rho (``smo.nu.nu_parts``) is in
    ``extra["epsilon"]``; arguments and result as ``solve_svr``'s."""
    targets = _targets(y, indptr)
    n = targets.size
    C, nu = float(params.C), float(params.nu)
    if alpha0 is None:
        half = np.zeros(n)
        left = C * nu * n / 2.0
        for i in range(n):
            half[i] = min(C, left)
            left -= half[i]
        alpha0, gradient_bar0 = np.concatenate([half, half]), None
    linear_term = np.concatenate([-targets, targets])
    result = _solve_doubled(
        solve_smo, indptr, indices, data, n_features, params, n_threads, control, alpha0, gradient_bar0, linear_term,
        nu_form=NU_SVR, nu_offset=C * nu * n,
    )  # fmt: skip
    return replace(result, extra=dict(result.extra, epsilon=-float(result.extra["rho"])))


def _targets(y, indptr) -> np.ndarray:
    targets = np.asarray(y, dtype=np.float64)
    n = np.asarray(indptr).size - 1
    if targets.shape != (n,):
        raise SolverInputError(f"y must have one target per row ({n}), got shape {targets.shape}")
    if n < 1 or not np.all(np.isfinite(targets)):
        raise SolverInputError("y must hold a finite target for each of at least one row")
    return targets


def _solve_doubled(
    solve_smo, indptr, indices, data, n_features, params, n_threads, control, alpha0, gradient_bar0, linear_term,
    **form,
) -> SolverResult:  # fmt: skip
    """The doubled problem (module docstring) with this linear term, and its expansion over the rows."""
    indptr = np.asarray(indptr, dtype=np.int64)
    n = indptr.size - 1
    doubled_indptr = np.concatenate([indptr, indptr[1:] + indptr[-1]])
    doubled_indices = np.concatenate([indices, indices])
    doubled_data = np.concatenate([data, data])
    signs = np.concatenate([np.ones(n), -np.ones(n)])
    if alpha0 is not None and np.asarray(alpha0).shape != (2 * n,):
        raise SolverInputError(f"alpha0 of an SVR has 2n = {2 * n} values, got {np.asarray(alpha0).shape}")
    result = solve_smo(
        doubled_indptr, doubled_indices, doubled_data, signs, n_features=n_features, params=params,
        n_threads=n_threads, control=control, alpha0=alpha0, gradient_bar0=gradient_bar0 if alpha0 is not None else None,
        linear_term=linear_term, **form,
    )  # fmt: skip
    alpha = np.asarray(result.extra["alpha"])
    beta = alpha[:n] - alpha[n:]
    support = np.flatnonzero(beta != 0.0).astype(np.int64)
    dual_coef = beta[support]
    w = None
    if kernel_params(dict(params.kernel))[0] == KERNEL_LINEAR:
        matrix = sp.csr_matrix((data, indices, indptr), shape=(n, int(n_features)))
        w = np.asarray(matrix[support].T @ dual_coef).reshape(-1)
    C = float(params.C)
    extra = dict(
        result.extra,
        support_indices=support,
        dual_coef=dual_coef,
        n_sv=int(support.size),
        n_bounded_sv=int(np.count_nonzero(np.abs(dual_coef) >= C * (1.0 - 1e-12))),
        gradient=None,  # a warm start scales G as a C-SVC's (G + 1); this G has p in place of -1: recomputed
    )
    return replace(result, w=w, extra=extra)
