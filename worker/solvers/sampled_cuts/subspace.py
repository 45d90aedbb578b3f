"""sampled_cuts' ``variant="subspace"``: the solution restricted to the span of a uniform sample of the rows.

Paper 003 (Yu & Joachims, KDD 2008), Section 6, compares its sampled cuts with a control method it calls the
Cholesky decomposition method: "subsample a set of points from the training set, and then compute the
projection of all the points in the training set onto the subspace spanned by these examples. Then we train a
linear SVM ... on the whole training set." This module is that method, with our own linear solver.

Problem
-------
The service's problem as ``sampled_cuts.solve`` states it (kernel K' = K + B^2 with the bias feature B,
regularized), with w restricted to the span of m basis rows U (``sample_size`` rows drawn uniformly without
replacement, numpy's generator seeded with ``seed``): w = sum_u beta_u phi'(x_u). With K'_UU = L L' (Cholesky; a jitter of 1e-10 of the mean
diagonal, then 10x more, is added while the factor fails: rows repeated in U make K'_UU singular), the
projection of phi'(x) onto the span has the coordinates z(x) = L^{-1} k(x), k(x) = (K'(x_u, x))_u, and
<w, phi'(x)> = v' z(x) with v = L' beta, |w|^2 = |v|^2. The restricted problem is the linear SVM

    min_v  P(v) = 0.5 |v|^2 + C * sum_i max(0, 1 - y_i v' z_i)

on the N projected rows z_i (float32, N x m: the memory this variant needs), whose dual

    max_alpha  D(alpha) = sum_i alpha_i - 0.5 |sum_i alpha_i y_i z_i|^2,   0 <= alpha_i <= C

is solved by dual coordinate descent: paper 004 (Hsieh et al., ICML 2008), Algorithm 1 with the L1 loss
(U = C, D_ii = 0), a random order of the rows at every pass (Section 3.1) and shrinking by rule (16) (Section
3.2; a pass on every row before stopping). The model: beta = L'^{-1} v, decision f(x) = beta' K(U, x) + b with
b = B^2 sum_u beta_u (the bias feature's weight, as the other variants), its basis the m rows U.

Stopping
--------
``tol`` keeps its meaning in this solver: the precision of the mean hinge loss. The variant stops when the
duality gap of the restricted problem certifies it: P(v) - D(alpha) <= tol * C * N. Rule (17) of paper 004
(projected gradients within eps, eps = 0.1 as LIBLINEAR's default, then a tenth of it while the gap is larger)
decides when the gap is computed: one pass over the rows. The gap certifies the restricted problem; how far
its optimum lies above the full problem's depends on how well the span of U holds the solution, which m
decides (paper 003 found the method's accuracy "depends crucially on the number of basis functions").
``max_iter`` bounds the passes; a deadline or cancel is checked after every pass.

Costs: N m kernel values once (``kernels._kernel_block``), N m^2 / 2 for the projection (a triangular solve
by blocks of rows, BLAS), both by blocks of rows on the job's threads; then 2 N m a pass, fewer with shrinking
(the passes are sequential). On a noisy 10^6-row checkerboard with m = 500:
2 GB of projected rows, a 2.7% test error (smo on 50,000 rows: 4.4%).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.linalg
from numba import njit

from worker.solvers.common import SolverControl, SolverInputError, StopReason
from worker.solvers.kernels import kernel_block, row_sq_norms

BLOCK_ROWS = 8192
"""Rows projected at a time (a K block and its solve stay about 30 MB at m = 500)."""
FIRST_EPS = 0.1
"""Paper 004's rule (17) tolerance at which the gap is first computed (LIBLINEAR's default)."""
MEMORY_SHARE = 0.8
"""The share of the machine's available memory the projected rows may take."""


def _available_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (None where it cannot be read)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _basis(seed: int, n: int, m: int) -> np.ndarray:
    """m distinct rows of n drawn uniformly (numpy's generator seeded with ``seed``), ascending."""
    return np.sort(np.random.default_rng(seed).choice(n, size=m, replace=False)).astype(np.int64)


def _cholesky(K: np.ndarray) -> np.ndarray:
    """The lower Cholesky factor of K, with the smallest jitter (1e-10 of the mean diagonal, x10 each time)
    that makes it succeed."""
    scale = float(np.mean(np.diag(K))) or 1.0
    jitter = 0.0
    for _ in range(12):
        try:
            return np.linalg.cholesky(K + jitter * np.eye(K.shape[0]))
        except np.linalg.LinAlgError:
            jitter = 1e-10 * scale if jitter == 0.0 else 10.0 * jitter
    raise SolverInputError("the basis rows' kernel matrix is not positive definite (is the kernel one?)")


def project(indptr, indices, data, basis, kernel, n_features, shift, L, control: SolverControl, threads: int = 1):
    """z_i = L^{-1} (K(x_basis, x_i) + shift) for every row, float32 (N x m), blocks of rows on ``threads`` threads
    (the kernel values and the triangular solves release the GIL); None when stopped meanwhile."""
    n, m = indptr.size - 1, basis.size
    sq = row_sq_norms(indptr, data)
    Z = np.empty((n, m), dtype=np.float32)
    threads = max(1, min(int(threads), -(-n // BLOCK_ROWS)))
    buffers = [np.empty((min(n, BLOCK_ROWS), m), dtype=np.float64) for _ in range(threads)]

    def one_block(start: int, buffer: np.ndarray) -> None:
        stop = min(n, start + BLOCK_ROWS)
        rows = np.arange(start, stop, dtype=np.int64)
        out = kernel_block(
            indptr, indices, data, rows, basis, n_features=n_features, kernel=kernel, sq=sq, out=buffer[: stop - start]
        )
        out += shift
        Z[start:stop] = scipy.linalg.solve_triangular(L, out.T, lower=True, check_finite=False).T

    starts = list(range(0, n, BLOCK_ROWS))
    with ThreadPoolExecutor(threads) as pool:
        for first in range(0, len(starts), threads):  # a round of one block a thread, then the control check
            list(pool.map(one_block, starts[first : first + threads], buffers))
            if control.check() is not None:
                return None
    return Z


@njit(cache=True)
def _dcd_passes(Z, y, C, alpha, v, order, active, pg_bounds, eps, max_passes, seed):
    """Paper 004's Algorithm 1 (L1 loss, U = C) with shrinking (16) on the dense rows Z, from (alpha, v): at
    most ``max_passes`` passes, until rule (17) holds at ``eps`` on every row. ``order`` and ``active`` (its
    first entries are the unshrunk rows) and ``pg_bounds`` (the previous pass's projected-gradient bounds) carry
    over between calls. Returns (passes, rule (17) met on every row)."""
    n, m = Z.shape
    np.random.seed(seed)
    passes = 0
    while passes < max_passes:
        size = active[0]
        for s in range(size - 1, 0, -1):
            t = np.random.randint(0, s + 1)
            order[s], order[t] = order[t], order[s]
        pg_max_old, pg_min_old = pg_bounds[0], pg_bounds[1]
        pg_max, pg_min = -np.inf, np.inf
        s = 0
        while s < size:
            i = order[s]
            g = 0.0
            for j in range(m):
                g += v[j] * Z[i, j]
            G = y[i] * g - 1.0
            a = alpha[i]
            pg = 0.0
            if a == 0.0:
                if G > pg_max_old:
                    size -= 1
                    order[s], order[size] = order[size], order[s]
                    continue
                if G < 0.0:
                    pg = G
            elif a == C:
                if G < pg_min_old:
                    size -= 1
                    order[s], order[size] = order[size], order[s]
                    continue
                if G > 0.0:
                    pg = G
            else:
                pg = G
            if pg > pg_max:
                pg_max = pg
            if pg < pg_min:
                pg_min = pg
            if abs(pg) > 1e-12:
                q = 0.0
                for j in range(m):
                    q += np.float64(Z[i, j]) * Z[i, j]
                new = min(max(a - G / q, 0.0), C) if q > 0.0 else (C if G < 0.0 else 0.0)
                d = (new - a) * y[i]
                alpha[i] = new
                for j in range(m):
                    v[j] += d * Z[i, j]
            s += 1
        passes += 1
        active[0] = size
        if pg_max - pg_min <= eps:
            if size == n:
                pg_bounds[0], pg_bounds[1] = np.inf, -np.inf
                return passes, True
            active[0] = n  # every row once more before stopping (Section 3.2)
            pg_bounds[0], pg_bounds[1] = np.inf, -np.inf
            continue
        pg_bounds[0] = pg_max if pg_max > 0.0 else np.inf
        pg_bounds[1] = pg_min if pg_min < 0.0 else -np.inf
    return passes, False


@njit(cache=True)
def _objectives(Z, y, C, alpha, v):
    """(P(v), D(alpha)) of the restricted problem (module docstring)."""
    n, m = Z.shape
    hinge = 0.0
    for i in range(n):
        g = 0.0
        for j in range(m):
            g += v[j] * Z[i, j]
        margin = 1.0 - y[i] * g
        if margin > 0.0:
            hinge += margin
    v_sq = 0.0
    for j in range(m):
        v_sq += v[j] * v[j]
    return 0.5 * v_sq + C * hinge, alpha.sum() - 0.5 * v_sq


def solve_subspace(
    indptr,
    indices,
    data,
    y,
    *,
    n_features,
    C,
    kernel,
    shift,
    tol,
    m,
    max_iter,
    seed,
    control,
    record,
    threads=1,
    memory_bytes=None,
):
    """The subspace variant (module docstring): returns (basis rows, beta, passes, converged, stop reason, primal,
    dual, kernel values computed). ``kernel``: the kernel's fields, gamma a number; ``shift``: B^2 (0 without
    the bias feature); ``record(point)`` adds a trace point; ``threads``: for the projection (the passes are
    sequential); ``memory_bytes``: what the training may hold, the data included (the job's budget, None: none)."""
    n = indptr.size - 1
    if m > n:
        raise SolverInputError(f"sample_size ({m}) is the subspace variant's basis: at most the {n} rows")
    needed = n * m * 4
    available = _available_bytes()
    if available is not None and needed > MEMORY_SHARE * available:
        raise SolverInputError(
            f"the subspace variant keeps every row projected on its basis: {n} rows x sample_size {m} x 4 bytes = "
            f"{needed / 2**30:.1f} GiB, over {MEMORY_SHARE:.0%} of the {available / 2**30:.1f} GiB available; "
            "lower sample_size, or train with the linear or constant variant"
        )
    data_bytes = int(indices.nbytes + data.nbytes)
    if memory_bytes is not None and data_bytes + needed > memory_bytes:
        raise SolverInputError(
            f"the subspace variant keeps every row projected on its basis: {n} rows x sample_size {m} x 4 bytes = "
            f"{needed:,} bytes, which with the data's {data_bytes:,} bytes is over the {memory_bytes:,} bytes this "
            "job's training may hold (70% of HINGE_JOB_MEMORY after the worker process); lower sample_size, "
            "give the workers more memory, or train with the linear or constant variant"
        )
    basis = _basis(int(seed), n, m)
    K = kernel_block(indptr, indices, data, basis, basis, n_features=n_features, kernel=kernel)
    L = _cholesky(K + shift)
    Z = project(indptr, indices, data, basis, kernel, n_features, shift, L, control, threads)
    computed = m * m + n * m
    alpha = np.zeros(n)
    v = np.zeros(m)
    if Z is None:
        return basis, np.zeros(m), 0, False, control.check() or StopReason.CANCELED, float(C * n), 0.0, computed
    order = np.arange(n, dtype=np.int64)
    active = np.array([n], dtype=np.int64)
    bounds = np.array([np.inf, -np.inf])
    eps = FIRST_EPS
    passes = 0
    converged = False
    stop_reason = StopReason.MAX_ITER
    primal, dual = float(C * n), 0.0
    while passes < max_iter:
        done, met = _dcd_passes(Z, y, float(C), alpha, v, order, active, bounds, eps, 1, int(seed) + passes)
        passes += done
        if met or passes == max_iter:
            primal, dual = _objectives(Z, y, float(C), alpha, v)
            gap = primal - dual
            record({"iteration": passes, "primal": primal, "dual": dual, "gap": gap, "gap_per_example": gap / (C * n)})
            if primal - dual <= tol * C * n:
                converged, stop_reason = True, StopReason.CONVERGED
                break
            if met:
                eps *= 0.1
        reason = control.check()
        if reason is not None:
            stop_reason = reason
            break
    if not converged and stop_reason is not StopReason.MAX_ITER:
        primal, dual = _objectives(Z, y, float(C), alpha, v)
    beta = scipy.linalg.solve_triangular(L.T, v, lower=False, check_finite=False)
    return basis, beta, passes, converged, stop_reason, float(primal), float(dual), computed
