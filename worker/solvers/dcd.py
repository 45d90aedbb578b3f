"""Dual coordinate descent (DCD) for L2-regularized linear SVMs with L1 (hinge) or L2 (squared hinge) loss,
(``loss: logistic``, ``worker.solvers.dcd_logistic``, whose docstring has its problem and dual) logistic regression,
and (``loss: epsilon_insensitive`` or ``squared_epsilon_insensitive``, ``worker.solvers.dcd_svr``) linear SVR.

Problem
-------
Given rows x_i in R^n (CSR), labels y_i in {-1, +1} and per-row costs C_i = C * class_weight(y_i),
the primal problem is (Hsieh et al. 2008, eq. (1)-(2), in the service's LIBLINEAR convention)

    min_w  P(w) = 0.5 * |w|^2 + sum_i C_i * loss_i,   loss_i = max(0, 1 - y_i w'x_i)      ("hinge")
                                                      loss_i = max(0, 1 - y_i w'x_i)^2    ("squared_hinge")

With ``bias=B`` every row is extended by a constant feature of value B (eq. (3)) and w by a weight w_B
that is regularized like the others; the extension is virtual: the kernels read B and keep w_B in the
last slot of the weight vector, no augmented matrix is built. The decision value is w'x + b, b = B * w_B.

The dual solved is eq. (4):

    min_alpha  f(alpha) = 0.5 * alpha' Qbar alpha - e'alpha,   0 <= alpha_i <= U_i,
    Qbar = Q + D,  Q_ij = y_i y_j x_i'x_j,
    hinge:          U_i = C_i,   D_ii = 0
    squared hinge:  U_i = inf,   D_ii = 1 / (2 C_i)

(the paper writes one C; with class weights the derivation is unchanged row by row: the L2-loss term
C_i xi_i^2 has conjugate alpha_i^2 / (4 C_i), which is 0.5 * D_ii * alpha_i^2 with D_ii = 1/(2 C_i)).
The primal solution is w = sum_i y_i alpha_i x_i (eq. (11)). Trace points report
primal P(w), dual value -f(alpha) = e'alpha - 0.5 |w|^2 - 0.5 sum_i D_ii alpha_i^2, and their gap.
A point costs a pass over every row (P(w) needs every margin), more than a shrunk epoch: with a point
at every pass, a9a at C = 10 took 1.38 s for 0.43 s of solving and sector's 105 one-vs-rest problems
6.1 s for 2.7 s. So with ``trace_budget`` (default 0.1) a point that ``trace_every``
makes due is skipped while the points so far took more than that share of the solver's time; the
first point, the last one and those the stopping check computes anyway (no extra pass) are always
recorded. ``trace_budget=None`` records every ``trace_every``-th pass.

Algorithm
---------
The paper: C.-J. Hsieh, K.-W. Chang, C.-J. Lin, S. S. Keerthi and S. Sundararajan, "A Dual Coordinate
Descent Method for Large-scale Linear SVM", ICML 2008.
Algorithm 1 (Section 2) with the random permutation of Section 3.1 and the shrinking of Section 3.2:

* One outer iteration ("epoch": ``_dcd_epoch``, called again for each 0.2 s slice of a long one, so
  a deadline or cancel is seen within a slice) shuffles the active set with the seeded
  splitmix64 Fisher-Yates of ``common.shuffle_prefix`` and visits each active i once:
      G  = y_i w'x_i - 1 + D_ii alpha_i                                   (eq. (12))
      PG = projected gradient (eq. (8)): min(G, 0) at alpha_i = 0, max(G, 0) at alpha_i = U_i, else G
      if |PG| > 1e-12:  alpha_i <- min(max(alpha_i - G / Qbar_ii, 0), U_i)  (eq. (9))
                        w <- w + (alpha_i_new - alpha_i_old) y_i x_i        (eq. (13))
  (the paper says |PG| != 0; 1e-12 skips updates whose effect is below rounding).
  Qbar_ii = x_i'x_i (+ B^2 with a bias) + D_ii is precomputed. A row with Qbar_ii = 0 (x_i = 0 with no
  bias, hinge loss only) has G = -1, so the paper's 1/Qbar_ii = inf rule sets alpha_i = U_i; the kernel
  does exactly that without dividing.
* Shrinking, rule (16): before updating, i leaves the active set when alpha_i = 0 and G > Mbar, or
  alpha_i = U_i and G < mbar, where Mbar = M of the previous epoch if M > 0 else +inf, and
  mbar = m of the previous epoch if m < 0 else -inf; M, m are the max / min of PG over the epoch's
  visits. A shrunk i has PG = 0 at its visit, so it does not move M or m.
* Stopping, rule (17): M - m < tol, with M and m taken over the PG values of the epoch AND 0, i.e.
  M = max(0, max PG) >= 0 >= m = min(0, min PG). Then (17) implies |PG_j| < tol for every j. The paper
  argues that in general M > 0 > m, but it can fail: on two rows (x = 2, y = +1), (x = 0, y = -1) with
  bias 1, the second epoch meets PG = -0.4 at both visits, so the literal max - min is 0 while the
  point is far from optimal (a test covers this case).
  When (17) holds on a shrunk problem, the active set is enlarged to all
  rows, Mbar = +inf and mbar = -inf (no shrinking in the next epoch), and the epochs continue;
  convergence is declared only by an epoch that visited every row and shrank none (so (17) holds for
  the projected gradient of every coordinate). No gradient reconstruction is needed: w is always complete.
* ``shrinking=False`` keeps Mbar = +inf, mbar = -inf throughout.
* Warm start: ``alpha0`` is clipped to [0, U_i] and w is rebuilt from it by eq. (11).

Inputs: CSR ``(indptr int64, indices int32, data float64)``, ``y`` float64 in {-1, +1}, ``n_features``,
``C``, ``loss``, ``bias`` (B or None), ``class_weight`` = (factor for y = -1, factor for y = +1),
``tol`` (the M - m threshold, LIBLINEAR's -e), ``max_iter`` (outer iterations), ``shrinking``, ``seed``,
``trace_every``, ``trace_budget``, ``control``, ``alpha0``.
Output: ``SolverResult`` with ``w`` (n_features,), ``bias`` = B * w_B (0.0 without bias), ``objective`` =
P(w) of the returned w, ``n_iter`` outer iterations, ``extra["alpha"]`` the final dual variables,
``extra["active_size"]`` the active-set size after the last epoch, ``extra["max_violation"]`` the last M - m.

Stopping rule in the user's terms: training stops when, during one full pass over all examples with
none set aside, the largest positive and the most negative projected dual gradient differ by less than
``tol`` (default 0.1, as LIBLINEAR's -s 1 / -s 3 -e) AND the duality gap certifies the model: with
``tol_rel`` > 0 (default 0.01), (P(w) - D(alpha)) / P(w) <= tol_rel, where D(alpha) = -f(alpha) is a
lower bound of the optimum (weak duality), so the returned objective is within tol_rel of the optimum.
Rule (17) alone at LIBLINEAR's tol does not promise that: at C = 10 on a text set it stopped 6% above
the optimum. When (17) holds but the gap is larger, the projected-gradient threshold is divided by 10
and the passes go on (each check costs one pass over the data, counted in the solver's time). Or
after ``max_iter`` passes (``converged=False``, MAX_ITER); or when the control reports a deadline or a
cancel request (checked after every pass). The result always carries the primal objective of the
returned w, ``extra["gap_rel"]`` its certified relative gap and ``extra["tol_used"]`` the final
threshold of rule (17).

Parallelism: none. Each epoch is sequential by nature (every update changes w for the next one);
one solve uses one thread, and the dispatcher runs independent binary problems (one-vs-rest, C paths)
side by side.

Speed: the Python loop only does bookkeeping; each epoch is one kernel call with no allocation. The
random order makes every row visit a cache miss, so the epoch prefetches (LLVM's prefetch hint, via a
numba intrinsic) the row, alpha_i, Qbar_ii and y_i it will visit four steps later; on a9a / w8a / ijcnn1
this halves the epoch time and changes no result. A row longer than 16 values is asked for whole, one
hint per cache line of its values and of its indices: the hardware's stream prefetcher does not follow
a jump to a random row, so a long row (TF-IDF text: 300 non-zeros, 2.4 KB) fetched by its first line
only stalls on each of its other lines in turn. On 20,000 such rows over 10^6 features (float32 values)
13 epochs take 0.70-0.72x the time they took with the first line only, close to a pass in storage
order; a9a, w8a and ijcnn1 (rows of 11-14 values) keep their times (1.00-1.01x): there the first-line
hints are all there is, and asking every row for its span (a loop and a call per row) made a9a 1.5x
slower. Prefetching the entries of w that the next row will touch (random in an 8 MB w) saves nothing
measurable, nor do four partial sums for w'x_i (no serial chain of additions): the epoch waits on
memory, not on arithmetic. What does help there is where w's frequent entries lie: data wider than
``feature_order.MIN_FEATURES`` is solved on a copy with its features numbered by frequency, so that
they share cache lines (20 Newsgroups' 20 one-vs-rest problems at C = 10: 12.0 s against 15.4 s, the
same passes; ``worker/solvers/feature_order.py``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Protocol

import numpy as np

from worker.solvers import dcd_l1_glmnet
from worker.solvers.common import (
    SLICE_SECONDS,
    SolverControl,
    SolverInputError,
    SolverResult,
    StopReason,
    binary_signs,
    check_csr,
    check_int,
    check_positive,
    dual_trace_due,
    dual_trace_point,
    rng_state,
)
from worker.solvers.dcd_l1 import solve_l1
from worker.solvers.dcd_logistic import primal_value as logistic_primal
from worker.solvers.dcd_logistic import solve_logistic
from worker.solvers.dcd_one_class import solve_one_class_linear
from worker.solvers.dcd_passes import (
    DualState,
    Problem,
    _dcd_build_w,
    _dcd_diagonal,
    _dcd_dual,
    _dcd_epoch,
    _dcd_primal,
)
from worker.solvers.dcd_svr import LOSSES as SVR_LOSSES
from worker.solvers.dcd_svr import solve_svr
from worker.solvers.feature_order import MIN_FEATURES, renumbered, renumbered_once

LOSSES = ("hinge", "squared_hinge", "logistic")

# ---------------------------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------------------------


def _check_bias(bias):
    if bias is None:
        return 0.0
    if isinstance(bias, bool):
        raise SolverInputError(f"bias must be a finite number >= 0 or None, got {bias!r}")
    try:
        value = float(bias)
    except (TypeError, ValueError):
        raise SolverInputError(f"bias must be a finite number >= 0 or None, got {bias!r}") from None
    if not (math.isfinite(value) and value >= 0.0):
        raise SolverInputError(f"bias must be a finite number >= 0 or None, got {bias!r}")
    return value


def _check_loss(loss):
    if loss not in LOSSES:
        raise SolverInputError(f"loss must be one of {LOSSES}, got {loss!r}")
    return loss == "squared_hinge"


def primal_objective(indptr, indices, data, y, w_full, *, C_neg, C_pos, loss, bias) -> float:
    """Primal objective 0.5*|w|^2 + sum_i C_i loss_i of a linear model, in the service's convention.

    ``w_full`` has n_features entries, plus the bias weight w_B as its last entry when ``bias`` = B is
    not None (the model's offset is b = B * w_B; pass w_B = b / B). ``C_neg`` / ``C_pos`` are the costs of
    rows with y = -1 / +1; ``loss`` is one of LOSSES. The CSR triple is not re-validated.
    """
    squared = _check_loss(loss)
    B = _check_bias(bias)
    indptr, indices, data, y = _as_kernels_take(indptr, indices, data, np.asarray(y, dtype=np.float64))
    w = np.asarray(w_full, dtype=np.float64)
    if bias is None:
        w = np.concatenate([w, [0.0]])
    else:
        w = np.ascontiguousarray(w)
    if loss == "logistic":
        return float(logistic_primal(indptr, indices, data, y, w, B, float(C_neg), float(C_pos)))
    return float(_dcd_primal(indptr, indices, data, y, w, B, float(C_neg), float(C_pos), squared))


class DcdSettings(Protocol):
    """What dcd reads of a job's params: the fields of its schema (``core.schemas.solver_params.DcdParams``),
    which validates them and holds their defaults (this package imports no pydantic; tests and the warm-up
    build the schema's model or give every field)."""

    C: float
    loss: str
    penalty: str
    epsilon: float
    nu: float
    bias: float | None
    tol: float
    tol_rel: float | None
    max_iter: int
    shrinking: bool
    seed: int
    trace_every: int
    trace_budget: float | None


def _check_args(indptr, indices, data, y, n_features, class_weight):
    """solve_dcd's checks of what its schema cannot know, once, up front: the arrays and the problem's
    class_weight factors; returns the arrays (contiguous) and the factors."""
    n_features = check_int("n_features", n_features, 0)
    check_csr(indptr, indices, data, n_features)
    # contiguous arrays keep the kernels on one compiled specialization (no copy when already so)
    indptr, indices, data = (np.ascontiguousarray(a) for a in (indptr, indices, data))
    n_rows = indptr.shape[0] - 1
    y = np.ascontiguousarray(binary_signs(y))
    if y.ndim != 1 or y.shape[0] != n_rows:
        raise SolverInputError(f"y must have one label per row ({n_rows}), got shape {y.shape}")
    if n_rows == 0:
        raise SolverInputError("the problem has no rows; at least one is required")
    try:
        weight_neg, weight_pos = class_weight
    except (TypeError, ValueError):
        raise SolverInputError(
            f"class_weight must be a pair (factor for y=-1, factor for y=+1), got {class_weight!r}"
        ) from None
    weight_neg = check_positive("class_weight[0] (y=-1)", weight_neg)
    weight_pos = check_positive("class_weight[1] (y=+1)", weight_pos)
    return indptr, indices, data, y, n_features, (weight_neg, weight_pos)


def _solve_regression(indptr, indices, data, y, n_features, params, control, alpha0) -> SolverResult:
    """solve_dcd with an epsilon-insensitive loss: the checks of the arrays, then ``dcd_svr.solve_svr`` (``alpha0``:
    its signed dual variables, a warm start)."""
    n_features = check_int("n_features", n_features, 0)
    check_csr(indptr, indices, data, n_features)
    n_rows = indptr.shape[0] - 1
    y = np.ascontiguousarray(y, dtype=np.float64)
    if y.ndim != 1 or y.shape[0] != n_rows:
        raise SolverInputError(f"y must have one target per row ({n_rows}), got shape {y.shape}")
    if n_rows == 0:
        raise SolverInputError("the problem has no rows; at least one is required")
    if not np.all(np.isfinite(y)):
        raise SolverInputError("y contains NaN or infinite targets")
    if alpha0 is not None and np.asarray(alpha0).shape != (n_rows,):
        raise SolverInputError(f"alpha0 must have shape ({n_rows},), got {np.asarray(alpha0).shape}")
    return solve_svr(indptr, indices, data, y, n_features, params, control, beta0=alpha0)


def _read_only(*arrays):
    """The arrays as read-only views (no copy; None stays None). The kernels then see the data one way whether a
    worker mapped it from its cache (read-only) or built it (writable): numba compiles a kernel once per argument
    type, and read-only is one (see ``_as_kernels_take``)."""
    views = []
    for a in arrays:
        if isinstance(a, np.ndarray) and a.flags.writeable:
            a = a.view()
            a.flags.writeable = False
        views.append(a)
    return views


def _as_kernels_take(indptr, indices, data, y):
    """The CSR triple and y as the kernels are compiled for: read-only (``_read_only``), with int32 column indices.
    A worker's data sets have int32 indices; int64 ones (an in-process caller's scipy matrix) are narrowed into an
    int32 copy when every value fits (else left as they are, for the checks to refuse or a kernel compiled on the
    spot). So the warm-up compiles 2 array variants of every kernel (float64 and float32 values) where it compiled
    5 (writable or not, int64 indices): dcd's unit 9.6-11.2 -> 5.2-5.5 CPU-s, dcd_formulations 35-40 -> 28 on this
    machine (2026-12-01, two runs each, interleaved)."""
    if isinstance(indices, np.ndarray) and indices.dtype == np.int64 and indices.size:
        low, high = np.iinfo(np.int32).min, np.iinfo(np.int32).max
        if low <= int(indices.min()) and int(indices.max()) <= high:
            indices = indices.astype(np.int32)
    return _read_only(indptr, indices, data, y)


def solve_dcd(
    indptr,
    indices,
    data,
    y,
    *,
    n_features: int,
    params: DcdSettings,
    class_weight: tuple[float, float] = (1.0, 1.0),
    control: SolverControl | None = None,
    alpha0: np.ndarray | None = None,
    memory_bytes: int | None = None,
) -> SolverResult:
    """Train a binary linear SVM by dual coordinate descent (Hsieh et al. 2008, Algorithm 1, 3.1, 3.2), or with
    ``loss: logistic`` a logistic regression by the same method on its dual (``worker.solvers.dcd_logistic``).

    See the module docstring for the problem, the stopping rule and the trace. ``params``: the job's
    parameters (``DcdSettings``); ``class_weight``: this problem's factors on C for y = -1 and y = +1.
    ``y`` must be in {-1, +1}. Returns a SolverResult; ``extra["alpha"]`` holds the final dual variables
    (for warm starts). Data wider than ``feature_order.MIN_FEATURES`` is solved on a copy with its features
    renumbered by frequency (``worker.solvers.feature_order``; counted in the solver's time) when the data and the
    copy fit in ``memory_bytes`` (what the training's data may take, ``memory_budget``; None: no limit); w comes back in the data's
    numbering.
    """
    indptr, indices, data, y = _as_kernels_take(indptr, indices, data, y)
    if params.loss == "one_class":  # the linear one-class SVM, labels unused (dcd_one_class)
        return solve_one_class_linear(indptr, indices, data, n_features, params, control)
    if params.loss in SVR_LOSSES:  # regression: real targets, the SVR dual (dcd_svr)
        return _solve_regression(indptr, indices, data, y, n_features, params, control, alpha0)
    indptr, indices, data, y, n_features, (weight_neg, weight_pos) = _check_args(
        indptr, indices, data, y, n_features, class_weight
    )
    indptr, indices, data, y = _read_only(indptr, indices, data, y)
    C, bias, tol, max_iter, shrinking = (
        float(params.C),
        params.bias,
        float(params.tol),
        params.max_iter,
        params.shrinking,
    )
    seed, trace_every, trace_budget = params.seed, params.trace_every, params.trace_budget
    squared = params.loss == "squared_hinge"
    B = 0.0 if bias is None else float(bias)
    tol_rel = 0.0 if params.tol_rel is None else float(params.tol_rel)  # None: off (0 inside)
    n_rows = indptr.shape[0] - 1
    if control is None:
        control = SolverControl()

    C_neg = C * weight_neg
    C_pos = C * weight_pos
    if squared:
        U_neg = U_pos = np.inf
        D_neg = 0.5 / C_neg
        D_pos = 0.5 / C_pos
    else:
        U_neg, U_pos = C_neg, C_pos
        D_neg = D_pos = 0.0

    alpha = np.zeros(n_rows, dtype=np.float64)
    start = None
    if alpha0 is not None:
        start = np.asarray(alpha0, dtype=np.float64)
        if start.shape != (n_rows,):
            raise SolverInputError(f"alpha0 must have shape ({n_rows},), got {start.shape}")
        if not np.all(np.isfinite(start)):
            raise SolverInputError("alpha0 contains NaN or infinite values")
    stored_values = int(indptr[-1]) + (n_rows if B > 0.0 else 0)
    if params.penalty == "l1" and (
        params.loss == "logistic" or dcd_l1_glmnet.suits(n_features, stored_values, B, memory_bytes)
    ):  # newGLMNET on |w|_1 + the loss (dcd_l1_glmnet): the logistic loss, and the squared hinge with few features
        return dcd_l1_glmnet.solve_l1_glmnet(
            indptr, indices, data, y, n_features, C_neg, C_pos, B, params, params.loss, control, memory_bytes
        )
    if params.loss == "logistic":  # the same coordinate descent on the entropy dual (dcd_logistic)
        return solve_logistic(indptr, indices, data, y, n_features, C_neg, C_pos, B, params, control, start)
    if params.penalty == "l1":  # the squared hinge with many features: CDN on |w|_1 (dcd_l1); no dual start
        return solve_l1(indptr, indices, data, y, n_features, C_neg, C_pos, B, params, control)
    if start is not None:
        upper = np.where(y > 0, U_pos, U_neg)
        np.clip(start, 0.0, upper, out=alpha)

    # ---- setup ----
    clock_start = time.perf_counter()
    new_id = None  # the features renumbered by frequency (feature_order), where w is wider than a core's cache
    with_copy = 2 * (indices.nbytes + data.nbytes)  # the copy, beside the data it is made from
    if n_features >= MIN_FEATURES and (memory_bytes is None or with_copy <= memory_bytes):
        indices, data, new_id = renumbered_once(indptr, indices, data, n_features)  # one-vs-rest: made once
        indices, data = _read_only(indices, data)
    trace_seconds = 0.0
    w = np.zeros(n_features + 1, dtype=np.float64)  # last slot: w_B
    if alpha0 is not None:
        _dcd_build_w(indptr, indices, data, y, alpha, B, w)
    QD = np.empty(n_rows, dtype=np.float64)
    _dcd_diagonal(indptr, indices, data, y, B, D_neg, D_pos, QD)
    index = np.arange(n_rows, dtype=np.int32 if n_rows < 2**31 else np.int64)
    state = rng_state(int(seed))
    active_size = n_rows
    PGmax_old = np.inf
    PGmin_old = -np.inf

    trace: list[dict] = []
    iteration = 0
    violation = np.inf
    stop_reason = StopReason.MAX_ITER
    converged = False
    last_primal = None
    last_dual = None
    tol_used = tol

    resume = np.array([-1.0, 0.0, 0.0])  # where a sliced epoch goes on (see _dcd_epoch)
    problem = Problem(indptr, indices, data, y, QD, B, U_neg, U_pos, D_neg, D_pos)
    dual_state = DualState(alpha, w, index, state, resume)
    while True:
        started_full = active_size == n_rows
        stopped_inside = None
        while True:  # an epoch, in slices of SLICE_SECONDS: a deadline or cancel is seen within one
            active_size, PGmax_new, PGmin_new, done = _dcd_epoch(
                problem, dual_state, active_size, PGmax_old, PGmin_old, time.monotonic() + SLICE_SECONDS
            )
            if done:
                break
            stopped_inside = control.check()
            if stopped_inside is not None:
                break
        iteration += 1
        if stopped_inside is None:
            violation = PGmax_new - PGmin_new

        finished = stopped_inside is not None
        certified = None
        if (
            stopped_inside is not None
        ):  # stopped inside a long epoch: the model is the current w (M, m of a part say nothing)
            stop_reason = stopped_inside
        elif violation < tol_used:
            if started_full and active_size == n_rows:
                if tol_rel > 0.0:  # the duality gap must certify the model too (counted as solver time)
                    primal = float(_dcd_primal(indptr, indices, data, y, w, B, C_neg, C_pos, squared))
                    dual = float(_dcd_dual(alpha, y, w, D_neg, D_pos))
                    certified = (primal, dual)
                    if primal - dual <= tol_rel * abs(primal):
                        converged = True
                    else:  # rule (17) is not enough here: ask for ten times smaller gradients
                        tol_used = violation / 10.0 if violation > 0.0 else tol_used / 10.0
                else:
                    converged = True
                if converged:
                    stop_reason = StopReason.CONVERGED
                    finished = True
            else:  # (17) holds on the shrunk problem: un-shrink, no shrinking next epoch
                active_size = n_rows
                PGmax_old = np.inf
                PGmin_old = -np.inf
        elif shrinking:
            PGmax_old = PGmax_new if PGmax_new > 0.0 else np.inf
            PGmin_old = PGmin_new if PGmin_new < 0.0 else -np.inf
        if not finished and iteration >= max_iter:
            stop_reason = StopReason.MAX_ITER
            finished = True
        if not finished:
            reason = control.check()
            if reason is not None:
                stop_reason = reason
                finished = True

        trace_clock = time.perf_counter()
        elapsed = trace_clock - clock_start - trace_seconds
        if dual_trace_due(
            finished, iteration, trace_every, certified is not None, last_primal is None, trace_budget, trace_seconds,
            elapsed,
        ):  # fmt: skip
            if certified is not None:  # the stopping check computed this point's objectives already
                primal, dual = certified
            else:
                primal = float(_dcd_primal(indptr, indices, data, y, w, B, C_neg, C_pos, squared))
                dual = float(_dcd_dual(alpha, y, w, D_neg, D_pos))
            point = dual_trace_point(iteration, elapsed, primal, dual, violation, int(active_size))
            control.record(point)  # (its time counts in the budget: on a few hundred rows it is the point's cost)
            trace_seconds += time.perf_counter() - trace_clock
            trace.append(dict(point))
            last_primal = primal
            last_dual = dual
        if finished:
            break

    assert last_primal is not None and last_dual is not None, "every outer iteration records its objectives"
    solver_seconds = time.perf_counter() - clock_start - trace_seconds
    return SolverResult(
        w=w[:n_features].copy() if new_id is None else w[new_id],
        bias=float(B * w[n_features]) if bias is not None else 0.0,
        n_iter=iteration,
        converged=converged,
        stop_reason=stop_reason,
        objective=float(last_primal),
        solver_seconds=solver_seconds,
        trace_seconds=trace_seconds,
        trace=tuple(trace),
        extra={
            "alpha": alpha,
            "active_size": int(active_size),
            "max_violation": float(violation),
            "tol_used": float(tol_used),
            "dual": float(last_dual),
            "gap_rel": max(0.0, (float(last_primal) - float(last_dual)) / abs(float(last_primal)))
            if last_primal
            else 0.0,
            "gap_note": "objective minus the dual objective of the returned dual variables (weak duality)",
            "features_renumbered": new_id is not None,
        },
    )


C_SVC_LOSSES = ("hinge", "squared_hinge")
"""The losses of dcd's own warm-up unit (C-SVC with the L2 penalty); the others are ``warm_up_formulations``'s."""


def _warm_up_settings(loss: str, bias: float | None) -> SimpleNamespace:
    """A job's parameters for a warm-up's tiny problem (three iterations at most)."""
    return SimpleNamespace(
        C=1.0, loss=loss, penalty="l2", epsilon=0.1, nu=0.5, bias=bias, tol=0.1, tol_rel=0.01, max_iter=3,
        shrinking=True, seed=0, trace_every=1, trace_budget=0.1,
    )  # fmt: skip


def _warm_up_problems() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """The tiny problem in every array type the kernels take (``_as_kernels_take`` of every array type of
    ``data_passes.csr_variants``: writable or read-only, int32 or int64 indices, float64 or float32 values, reduced
    to read-only int32 indices with float64 or float32 values), as (indptr, indices, data, y), one per type."""
    from worker.solvers.data_passes import csr_variants

    seen = set()
    for indptr, indices, data in csr_variants([0, 2, 3, 3], [0, 1, 1], [1.0, -0.5, 2.0]):
        arrays = _as_kernels_take(indptr, indices, data, np.array([1.0, -1.0, 1.0]))
        kind = tuple((a.dtype.str, a.flags.writeable) for a in arrays)
        if kind not in seen:
            seen.add(kind)
            yield tuple(arrays)


def warm_up() -> None:
    """Compile (or load from the numba cache) the kernels of C-SVC (``C_SVC_LOSSES``, the L2 penalty) on a tiny
    problem in every array type: dcd's own unit, the one a worker waits for before it takes its first job."""
    for arrays in _warm_up_problems():
        renumbered(*arrays[:3], 2)  # wide data's copy (feature_order)
        for loss in C_SVC_LOSSES:
            for bias in (1.0, None):
                result = solve_dcd(*arrays, n_features=2, params=_warm_up_settings(loss, bias), alpha0=np.full(3, 0.1))
                assert result.w is not None
                w_full = np.append(result.w, result.bias) if bias is not None else result.w
                primal_objective(*arrays, w_full, C_neg=1.0, C_pos=1.0, loss=loss, bias=bias)


def warm_up_formulations() -> None:
    """Compile (or load) the kernels of dcd's other formulations, the unit ``dcd_formulations`` (built after
    dcd's own): logistic regression, the SVR losses, the L1 penalty (newGLMNET, and CDN for the squared hinge)
    and the linear one-class SVM."""
    for arrays in _warm_up_problems():
        for bias in (1.0, None):
            for loss in ("logistic", *SVR_LOSSES):
                result = solve_dcd(*arrays, n_features=2, params=_warm_up_settings(loss, bias), alpha0=np.full(3, 0.1))
                if loss == "logistic":
                    assert result.w is not None
                    w_full = np.append(result.w, result.bias) if bias is not None else result.w
                    primal_objective(*arrays, w_full, C_neg=1.0, C_pos=1.0, loss=loss, bias=bias)
            for loss in ("squared_hinge", "logistic"):  # the L1-regularized ones (dcd_l1_glmnet)
                settings = _warm_up_settings(loss, bias)
                settings.penalty = "l1"
                solve_dcd(*arrays, n_features=2, params=settings)
                if loss == "squared_hinge":  # and CDN, which the squared hinge takes with many features (dcd_l1)
                    solve_l1(*arrays, n_features=2, C_neg=1.0, C_pos=1.0, B=bias or 0.0, params=settings)
        # the linear one-class SVM (dcd_one_class): no bias
        solve_dcd(*arrays, n_features=2, params=_warm_up_settings("one_class", None))
