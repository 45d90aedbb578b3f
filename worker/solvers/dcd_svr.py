"""Dual coordinate descent for L2-regularized linear support vector regression (LIBLINEAR's -s 13 and -s 12).

Problem
-------
Rows x_i (CSR), real targets y_i, the insensitive zone epsilon >= 0, costs C; in the service's convention

    min_w  P(w) = 0.5 * |w|^2 + C * sum_i loss_i,   r_i = w'x_i - y_i,
           loss_i = max(0, |r_i| - epsilon)      ("epsilon_insensitive", L1 loss, LIBLINEAR -s 13)
           loss_i = max(0, |r_i| - epsilon)^2    ("squared_epsilon_insensitive", L2 loss, LIBLINEAR -s 12)

with ``bias=B`` the virtual constant feature of ``worker.solvers.dcd`` (w's last slot is w_B, b = B * w_B). Its
dual (Ho and Lin, "Large-scale linear support vector regression", JMLR 13, 2012, Section 3, eq. (12)) is

    min_beta  f(beta) = 0.5 * beta' (Q + D) beta - y'beta + epsilon * |beta|_1,   -U <= beta_i <= U,
    Q_ij = [x_i; B]'[x_j; B],   w = sum_i beta_i [x_i; B],
    L1 loss: U = C, D = 0;   L2 loss: U = inf, D_ii = 1 / (2C)

and D(beta) = -f(beta) <= P(w*) <= P(w): the certified gap, as dcd's.

Algorithm
---------
The paper's Algorithm 2 (coordinate descent over a random permutation each pass, the seeded shuffle of
``common.shuffle_prefix``): at row i, with G = w'x_i - y_i + D_ii beta_i and Qbar_ii = Q_ii + D_ii, the
one-variable sub-problem min_d 0.5 Qbar_ii d^2 + G d + epsilon |beta_i + d| has the closed form of its eq. (17):
with G+ = G + epsilon and G- = G - epsilon, d = -G+ / Qbar_ii when G+ < Qbar_ii beta_i, d = -G- / Qbar_ii when
G- > Qbar_ii beta_i, else d = -beta_i; then beta_i + d is clipped to [-U, U]. The violation of the optimality
conditions at row i (the projected subgradient, eq. (19)): |G+| inside (0, U), |G-| inside (-U, 0),
max(0, |G| - epsilon) at 0, max(0, G+) at U and max(0, -G-) at -U.

Shrinking (the paper's Section 3.3, as dcd's rule (16)): a row at a bound whose condition holds by more than the
previous pass's largest violation M leaves the passes (beta_i = 0 with G+ > M and G- < -M; beta_i = U with
G+ < -M; beta_i = -U with G- > M). Stopping (LIBLINEAR -s 12/13's -e rule): after a pass whose
summed violation is below ``tol`` times that of the first pass (each row's violation as the pass meets it), a rule in
the targets' own scale (the largest violation against an absolute tol, dcd's classification rule, asked 177 passes
of NYC's flights where the certified gap was below 1% after 8): on the shrunk rows, every row comes back and the passes go on without shrinking; on all of them, the duality gap must certify
the model too (``tol_rel``, as dcd: when it does not, the threshold is divided by 10 and the passes go on);
``tol_rel`` null: the violation rule alone.
"""

from __future__ import annotations

import math
import time

import numpy as np
from numba import njit

from worker.solvers.common import (
    RelativeRulePasses,
    SolverControl,
    SolverResult,
    monotonic_s,
    rng_state,
    run_dual_passes,
    shuffle_prefix,
)
from worker.solvers.dcd_passes import PREFETCH_AHEAD, prefetch, prefetch_row_ahead
from worker.solvers.kernels import dense_row_dot, fill_dense_row, keeps_dense_rows

LOSSES = ("epsilon_insensitive", "squared_epsilon_insensitive")


@njit(cache=True)
def _pass(
    indptr, indices, data, dense, y, QD, B, U, D, epsilon, beta, w, index, active, shrink_at, rng, resume, stop_at
):
    """One pass over index[:active] (or a slice of one: ``resume`` = [next position, largest violation so far, their
    sum so far], position < 0 for a new pass, like ``dcd_passes._dcd_epoch``), shrinking (module docstring) against
    ``shrink_at`` (inf: none); ``dense``: the rows as a dense array (``kernels.keeps_dense_rows``), or no rows.
    Returns (new active size, largest violation, summed violation, done)."""
    nf = w.shape[0] - 1
    kept_dense = dense.shape[0] > 0
    if resume[0] < 0.0:
        shuffle_prefix(index, active, rng)
        s = 0
        worst = 0.0
        total = 0.0
    else:
        s = int(resume[0])
        worst = resume[1]
        total = resume[2]
    first = s
    while s < active:
        if (s & 1023) == 0 and s - first >= 1024 and monotonic_s() >= stop_at:
            resume[0] = s
            resume[1] = worst
            resume[2] = total
            return active, worst, total, False
        ahead = s + PREFETCH_AHEAD
        if ahead < active and not kept_dense:  # (as dcd's passes: the row a few steps on, while this one is worked)
            j = prefetch_row_ahead(indptr, indices, data, index, ahead, active)
            prefetch(beta, j)
            prefetch(QD, j)
            prefetch(y, j)
        i = np.uint64(index[s])  # (unsigned indices: kernels.gather_dot)
        start = np.uint64(indptr[i])
        end = np.uint64(indptr[i + np.uint64(1)])
        if kept_dense:
            wx = w[nf] * B + dense_row_dot(dense, i, w)
        else:
            wx = w[nf] * B
            for p in range(start, end):
                wx += w[np.uint64(indices[p])] * data[p]
        b = beta[i]
        G = wx - y[i] + D * b
        Gp = G + epsilon
        Gn = G - epsilon
        shrink = False
        if b == 0.0:
            violation = max(0.0, abs(G) - epsilon)
            shrink = Gp > shrink_at and Gn < -shrink_at
        elif b >= U:
            violation = max(0.0, Gp)
            shrink = Gp < -shrink_at
        elif b <= -U:
            violation = max(0.0, -Gn)
            shrink = Gn > shrink_at
        elif b > 0.0:
            violation = abs(Gp)
        else:
            violation = abs(Gn)
        if shrink:  # at a bound, well inside its optimality condition: out of the passes until the check
            active -= 1
            index[s] = index[active]
            index[active] = i
            continue
        if violation > worst:
            worst = violation
        total += violation
        q = QD[i]
        qb = q * b
        if q > 0.0:  # the Newton step of the side whose condition fails (-Gp / q, -Gn / q), else to 0, as selects:
            # rows come in random order, below, above or inside [Gn, Gp]'s band unpredictably (first pass 0.86x)
            g = Gn if Gn > qb else Gp  # (Gp < qb implies Gn < qb)
            d = -g / q
            d = -b if Gp >= qb and Gn <= qb else d
        else:  # an empty row without bias: w'x_i = 0 whatever beta_i, only the linear terms count
            d = (U if Gp < 0.0 else (-U if Gn > 0.0 else 0.0)) - b
        new = b + d
        new = -U if new < -U else new
        new = U if new > U else new
        d = new - b
        if d != 0.0:
            beta[i] = new
            if kept_dense:
                for f in range(nf):
                    w[f] += d * dense[i, f]
            else:
                for p in range(start, end):
                    w[np.uint64(indices[p])] += d * data[p]
            w[nf] += d * B
        s += 1
    resume[0] = -1.0
    return active, worst, total, True


@njit(cache=True)
def _build_w(indptr, indices, data, B, beta, w):
    """w = sum_i beta_i [x_i; B] (a warm start's weights)."""
    nf = w.shape[0] - 1
    for i in range(indptr.shape[0] - 1):
        b = beta[i]
        if b != 0.0:
            for p in range(indptr[i], indptr[i + 1]):
                w[indices[p]] += b * data[p]
            w[nf] += b * B


@njit(cache=True)
def _start(indptr, indices, data, B, D, QD, dense, index):
    """Qbar_ii = |x_i|^2 + B^2 + D_ii; every row into ``dense`` when it has rows; index = 0, 1, ... (one call: on a
    few hundred rows, as diabetes', a call's dispatch is a tenth of a pass)."""
    kept_dense = dense.shape[0] > 0
    for i in range(indptr.shape[0] - 1):
        s = B * B + D
        for p in range(indptr[i], indptr[i + 1]):
            s += data[p] * data[p]
        QD[i] = s
        if kept_dense:
            fill_dense_row(indptr, indices, data, i, dense)
        index[i] = i


@njit(cache=True)
def primal_value(indptr, indices, data, y, w, B, C, epsilon, squared):
    """P(w) = 0.5 |w|^2 + C sum_i max(0, |w'x_i - y_i| - epsilon) (squared: each term squared)."""
    nf = w.shape[0] - 1
    reg = 0.0
    for j in range(w.shape[0]):
        reg += w[j] * w[j]
    loss = 0.0
    for i in range(indptr.shape[0] - 1):
        wx = w[nf] * B
        for p in range(indptr[i], indptr[i + 1]):
            wx += w[indices[p]] * data[p]
        excess = abs(wx - y[i]) - epsilon
        if excess > 0.0:
            loss += excess * excess if squared else excess
    return 0.5 * reg + C * loss


@njit(cache=True)
def _dual(beta, y, w, D, epsilon):
    """D(beta) = -f(beta) = y'beta - epsilon |beta|_1 - 0.5 |w|^2 - 0.5 D |beta|^2."""
    reg = 0.0
    for j in range(w.shape[0]):
        reg += w[j] * w[j]
    lin = 0.0
    l1 = 0.0
    sq = 0.0
    for i in range(beta.shape[0]):
        b = beta[i]
        lin += y[i] * b
        l1 += abs(b)
        sq += b * b
    return lin - epsilon * l1 - 0.5 * reg - 0.5 * D * sq


def solve_svr(
    indptr,
    indices,
    data,
    y,
    n_features: int,
    params,
    control: SolverControl | None = None,
    beta0: np.ndarray | None = None,
) -> SolverResult:
    """Train a linear SVR by dual coordinate descent (module docstring). ``params``: C, epsilon, loss (one of
    LOSSES), bias (B or None), tol, tol_rel, max_iter, seed, trace_every, trace_budget. ``y``: real targets.
    ``beta0``: dual variables to start from (a warm start; clipped to the box). ``extra["alpha"]`` holds the
    final dual variables (named as dcd's, whose warm starts read them)."""
    control = control or SolverControl()
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices, data = np.ascontiguousarray(indices), np.ascontiguousarray(data)
    y = np.ascontiguousarray(y, dtype=np.float64)
    C, epsilon = float(params.C), float(params.epsilon)
    squared = params.loss == "squared_epsilon_insensitive"
    B = 0.0 if params.bias is None else float(params.bias)
    U, D = (math.inf, 0.5 / C) if squared else (C, 0.0)
    n = indptr.shape[0] - 1
    started = time.perf_counter()
    beta = np.zeros(n)
    w = np.zeros(n_features + 1)
    if beta0 is not None:
        np.clip(np.asarray(beta0, dtype=np.float64), -U, U, out=beta)
        _build_w(indptr, indices, data, B, beta, w)
    QD = np.empty(n)
    dense = np.empty((n if keeps_dense_rows(int(indptr[-1]), n, n_features) else 0, int(n_features)))
    index = np.empty(n, dtype=np.int32 if n < 2**31 else np.int64)
    _start(indptr, indices, data, B, D, QD, dense, index)
    rng = rng_state(int(params.seed))
    passes = RelativeRulePasses(
        n,
        lambda active, shrink_at, resume, stop_at: _pass(
            indptr,
            indices,
            data,
            dense,
            y,
            QD,
            B,
            U,
            D,
            epsilon,
            beta,
            w,
            index,
            active,
            shrink_at,
            rng,
            resume,
            stop_at,
        ),
    )

    def objectives():
        return (
            float(primal_value(indptr, indices, data, y, w, B, C, epsilon, squared)),
            float(_dual(beta, y, w, D, epsilon)),
        )

    setup = time.perf_counter() - started
    run = run_dual_passes(passes.one_pass, passes.after_pass, objectives, lambda: passes.active, params, control)
    return run.result(
        w, B, setup, "objective minus the dual objective of the returned dual variables (weak duality)", alpha=beta
    )
