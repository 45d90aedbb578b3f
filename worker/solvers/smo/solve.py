"""Sequential minimal optimization (SMO) for the kernel C-SVC, with a kernel row cache and shrinking.

Problem
-------
Rows x_i (CSR), labels y_i in {-1, +1}, a kernel K (``worker.solvers.kernels``) with feature map phi,
per-row costs C_i = C * class_weight(y_i). The primal is LIBSVM's C-SVC, in the service's convention
(C multiplies a sum of losses) with an unregularized threshold b:

    min_{w, b}  P(w, b) = 0.5 * |w|^2 + sum_i C_i * max(0, 1 - y_i (<w, phi(x_i)> + b)).

Its dual (Platt's (3)-(5), written as a minimization with Q_ij = y_i y_j K(x_i, x_j)) is

    min_alpha  f(alpha) = 0.5 * alpha' Q alpha - sum_i alpha_i,
    s.t.       0 <= alpha_i <= C_i,   sum_i y_i alpha_i = 0,

and the model is decision(x) = sum_i y_i alpha_i K(x_i, x) + b. (Platt writes u = ... - b; here b is
added, as everywhere in the service, so Platt's b is our -b.) We keep the gradient G = Q alpha - 1 of
f for every variable. With F_t = -y_t G_t, and the index sets

    I_up  = {t : y_t = +1, alpha_t < C_t}  U  {t : y_t = -1, alpha_t > 0}
    I_low = {t : y_t = -1, alpha_t < C_t}  U  {t : y_t = +1, alpha_t > 0},

the KKT conditions (Platt's (6): alpha_t = 0 => y_t u_t >= 1, 0 < alpha_t < C => y_t u_t = 1,
alpha_t = C => y_t u_t <= 1, with y_t u_t - 1 = G_t + y_t b) hold for some b exactly when
m(alpha) = max_{I_up} F  <=  M(alpha) = min_{I_low} F, and then every b in [m, M] is optimal.
m - M is "the maximal KKT violation" (LIBSVM's -e criterion).

Two-variable step (Platt, Section 2.1, eq. (7)-(9))
----------------------------------------------------
For a pair (1, 2), s = y_1 y_2, E_t = u_t - y_t, so E_1 - E_2 = y_1 G_1 - y_2 G_2 (b cancels):

    alpha_2' = alpha_2 + y_2 (E_1 - E_2) / eta,   eta = K_11 + K_22 - 2 K_12             (8)
    alpha_2' clipped to [L, H],
        L = max(0, alpha_2 + s alpha_1 - (s + 1) C_1 / 2),
        H = min(C_2, alpha_2 + s alpha_1 - (s - 1) C_1 / 2)                             (7)
    alpha_1' = alpha_1 + s (alpha_2 - alpha_2')                                          (9)

(7) is the paper's with the two box sizes kept apart (C_1 for the bounds that come from alpha_1's
box, C_2 for alpha_2's own box), which is what per-class costs need; with C_1 = C_2 it is the paper's
formula. When eta <= 0 (a non-PSD sigmoid kernel or duplicated rows) eta is replaced by 1e-12, which
sends alpha_2' to the end of [L, H] that lowers f, as Platt's evaluation of both ends would. After the
step G moves by Q[:, 1] d_1 + Q[:, 2] d_2 (two kernel rows), and f by
G_1 d_1 + G_2 d_2 + 0.5 (Q_11 d_1^2 + Q_22 d_2^2) + Q_12 d_1 d_2, so the dual value is tracked exactly
without extra kernel work.

Working-set selection ``working_set``
-------------------------------------
* ``"second_order"`` (default): i = argmax_{t in I_up} F_t; j = argmax over t in I_low with F_t < F_i
  of (F_i - F_t)^2 / eta_it (the second-order gain of the pair, Fan, Chen & Lin 2005, the rule LIBSVM
  uses); stop when m - M < tol.
* ``"platt"`` (Section 2.2): the outer loop alternates one pass over all (active) examples with
  repeated passes over the non-bound ones until none of them changes, then a full pass again; it ends
  when a full pass changes nothing. An example is examined when it violates the KKT conditions
  against the current threshold b by more than eps = tol / 2 (if no example does, m - M <= 2 eps = tol,
  so both modes stop on the same criterion). The second choice maximises |E_1 - E_2| over the non-bound
  examples; if that step makes no progress, the non-bound examples are tried from a random start, then
  all examples from a random start (seeded splitmix64). b is set after each step so that the KKT
  conditions hold for the two examples (b = F_t of a non-bound one, the mean of both ends otherwise).
  Platt's error cache holds the errors of the non-bound examples and evaluates the others on demand;
  here every active error comes from the maintained G (the same two-row update the second-order mode
  needs), so the choices are the paper's and only the bookkeeping differs. A step counts as progress
  when it moves alpha_2 by more than 1e-12 * (alpha_2 + alpha_2' + 1e-12) (Platt's test with a smaller
  constant: his 1e-3 would refuse steps that the 1e-3 violation criterion still needs). If a full pass
  ever ends with m - M > tol, one step on the maximal violating pair is taken and the passes resume
  (a safety net; with the test above it is not expected to fire).

Kernel cache ``cache_mb``
-------------------------
A least-recently-used cache of rows of Q (float32, as LIBSVM's Qfloat) in a pool of ``cache_mb``
MiB split into equal slots; a row of the active problem has length ``active_size`` (see shrinking),
the variables being kept permuted so that the active ones come first. When the active set shrinks
well below the slot length while the pool is full, the pool is re-cut into shorter, more numerous
slots (rows keep their prefix), and re-cut back to full rows (keeping the most recently used ones)
when everything is made active again; the rows of the free variables used to rebuild the gradient
then go through the cache at full length. Moving a variable out of the active prefix swaps two columns in every cached row (or
truncates a row that holds only one of them). At least two rows are always kept, whatever cache_mb.
Rows needed beyond the slot length (the G_bar update below while shrunk) are computed without caching.

Shrinking ``shrinking``
-----------------------
Every min(n, 1000) steps (second_order) or after every full pass (platt), a variable at a bound
leaves the active set when it cannot be part of any violating pair: t in I_up only with F_t < M, or
t in I_low only with F_t > m (Joachims' heuristic, cited in Section 2.2: "examples which fulfill the
KKT conditions more than the worst example failed"). G is then updated only for active variables; to
rebuild it for the others, G_bar_t = sum_{j: alpha_j = C_j} C_j Q_tj is maintained for all t (a full row
whenever a variable reaches or leaves its upper bound), and G_t = G_bar_t - 1 + sum_{j free} alpha_j Q_tj.
When m - M first falls below 10 * tol every variable is made active again (gradient rebuilt) and
shrinking resumes; when the active problem has converged, the gradient is rebuilt, every variable
made active and the stopping test repeated on the whole problem (the final un-shrunk check). The
rebuild runs in chunks between control checks.

Kernel rows
-----------
A row Q[p, :] takes the dot products <x_p, x_t> for all positions t at once, from copies of the rows
kept in position order (rewritten after each shrinking pass): when the transposed dense copy
(n_features x n) takes at most 256 MB and at least 5% of its entries are stored (a9a, ijcnn1), row p's
entries times its columns (contiguous, vectorized, computed 1,024 positions at a time so that they stay
in the first-level cache); otherwise the columns in CSC form, positions ascending, so that only the rows
sharing a feature with x_p are touched and a row of the active problem stops at active_size. The rbf
kernel then takes ``kernels.fast_exp`` (within one ulp of exp, vectorizes). LIBSVM instead merges the
two index lists of every pair. Both give each dot product summed in the order of row p's entries.

Linear kernel (Section 2.3): the result also carries the folded weight vector w = sum_i y_i alpha_i x_i
(prediction then costs one sparse dot product); the kernel rows themselves are the same dot products.

Warm start
----------
``alpha0`` (one value per row, in the box [0, C_i] and on the plane sum_i y_i alpha_i = 0, else refused)
starts the steps from those dual variables instead of zero; ``gradient0`` and ``gradient_bar0`` are its G and
G_bar when the caller has them (a previous fit returns both in ``extra``: "gradient", when G was complete at
its end, and "gradient_bar"), else they are computed from a kernel row per non-zero alpha_i (per variable
at its bound for G_bar). Scaling alpha by s scales G + 1 and G_bar by s, so a search's path along C starts
each fit from the previous one at no kernel cost (``worker.training.registry.warm_start_arguments`` chooses the
start: the previous alpha as it is toward a larger C unless most support vectors were at their bound,
scaled otherwise).

Stopping rule in the user's terms: training stops when the largest KKT violation m - M over ALL
examples is below ``tol`` (LIBSVM's -e, default 1e-3) and the duality gap of the returned model is at
most ``tol_rel`` of its objective (default 0.01; (P - D) / |P| with D the dual value of the returned alpha,
a lower bound of the optimum: when ``tol`` alone leaves a larger gap, as on hard problems at large C,
``tol`` is divided by 10 and the steps go on, down to 1e-9; ``tol_rel`` None: ``tol`` alone; the
offset forms, nu-SVC, nu-SVR and one-class, divide by the larger of |P| and 1% of the dual objective at their start,
as their optimum can be zero: ``_relative_gap``), or after ``max_iter`` two-variable steps
(default max(10^7, 100 n), LIBSVM's cap), or at a deadline or cancel (checked between slices of at
most ~0.1 s of numba work, so a cancel is honoured within a fraction of a second).

Outputs
-------
``SolverResult``: ``w`` None (the folded weight vector for the linear kernel), ``bias`` = b (the mean
of F_t over the free support vectors, or the middle of [m, M] if there are none), ``objective`` = the
primal P(w, b), computed from G (y_t u_t = G_t + 1 + y_t b, |w|^2 = alpha' (G + 1)) whenever G is
complete (after a deadline or cancel that stops a shrunk run, G is completed first if that costs at
most 2e7 kernel values, i.e. well under a second; otherwise ``objective`` is NaN and
``extra["primal_complete"]`` is False),
``n_iter`` = number of two-variable steps. ``extra``: "support_indices" (int64 row ids with alpha > 0,
ascending), "dual_coef" (y_i alpha_i there), "n_sv", "n_bounded_sv" (alpha_i = C_i), "dual_objective"
(the dual value D = sum alpha - 0.5 alpha' Q alpha, which LIBSVM prints negated as "obj"),
"primal_complete" (whether ``objective`` is the primal over all rows), "max_violation", "cache_hit_rate", "kernel", "alpha" (all n dual variables, row
order), "gradient" and "gradient_bar" (G and G_bar, row order; "gradient" None when G was not complete at
the end), "active_size", "min_active_size", "working_set", "safety_steps" (platt's safety-net steps),
and counters "kernel_values_computed" (all kernel values evaluated), "kernel_values_full_rows" (of
them, computed beyond the slot length for G_bar), "kernel_values_reconstruct" (during gradient
rebuilds), "full_row_updates".
Trace points (every ``trace_every`` steps and at the end): iteration, elapsed_s, dual, max_violation
(over the active set), n_sv, n_bounded_sv, cache_hit_rate, active_size, and primal/gap: at every
point when no variable is shrunk; while shrunk, at most every PRIMAL_EVERY_S seconds (the shrunk
variables' gradients are then computed outside the cache, at most about a fifth of the run's time,
counted as trace time).

What runs in parallel (``n_threads``, default: the threads numba allows this process): kernel rows and
the gradient updates (G after a step, G_bar when a variable reaches or leaves its upper bound) of at least
``TEAM_MIN_ROW`` positions (8,192) are cut into 4 chunks per thread and computed by the solver's thread
and ``n_threads - 1`` partner threads that spin between passes (``smo.team``: an OpenMP-like team of
plain threads, handing a pass over in well under a microsecond; numba's ``prange`` regions cost about as
much as a row, so two threads had run no faster than one). The two working-set scans take each thread's
first maximum and keep the first of those (so the choice is the one a single scan makes), through
numba's ``prange`` on its ``workqueue`` layer (fork-safe) and only from ``PAR_MIN_SCAN`` positions
(262,144: about 1 ms), below which a region costs more than it saves (measured: ~100 us for an empty
region at load 9 on 2 cores). Every value is computed by the same arithmetic whatever the split, so 1 and
2 threads take the very same steps and return the same alpha (tested). Measured on 2 quiet cores
(2026-11-26, tests/benchmarks/README.md): 2 threads take 0.6x the time of one on ijcnn1 and a9a.
Processes x threads <= cores. Deterministic for a given seed and thread count (only ``platt`` draws
numbers).

Where the code is
-----------------
This module: the checks of the arrays and keywords (the parameters are the schema's), the Python loop
(slices of numba work between control checks, trace points, gradient rebuilds, on a ``run.Run``, which
also checks a warm start) and the result. The numba side, as LIBSVM cuts its Solver, Cache and Kernel
apart: ``smo.steps`` (the two-variable step, shrinking, both run loops, the gradient rebuild),
``smo.scans`` (working-set scans and gradient updates over the active positions), ``smo.cache`` (the
LRU cache of rows), ``smo.rows`` (kernel rows from the position-ordered copies of the data), ``smo.team``
(the row team of threads) and ``smo.state`` (the named slots of the scalar state the kernels share). This
docstring is the one description of the whole algorithm, which is why it is long.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, Protocol

import numba
import numpy as np
import scipy.sparse as sp

from worker.solvers.common import (
    SolverControl,
    SolverInputError,
    SolverResult,
    StopReason,
    binary_signs,
    check_csr,
    check_int,
    check_positive,
    solver_threads,
)
from worker.solvers.kernels import KERNEL_LINEAR, kernel_params, row_sq_norms
from worker.solvers.smo.nu_svc import solve_nu_svc
from worker.solvers.smo.one_class import solve_one_class
from worker.solvers.smo.rows import KernelParams, position_copies
from worker.solvers.smo.run import FINAL_REBUILD_VALUES, Run, check_given, check_start, next_budget
from worker.solvers.smo.state import (
    FREE,
    FS_F,
    IS_ACTIVE,
    IS_COMPUTED,
    IS_FULL_ROWS,
    IS_HITS,
    IS_ITER,
    IS_MIN_ACTIVE,
    IS_MISSES,
    IS_RECONSTRUCTED,
    IS_SAFETY_STEPS,
    IS_SIZE,
    IS_TEAM_MIN_ROW,
    IS_THREADS,
    IS_UNCACHED,
    NU_NONE,
    NU_SVC,
    RUN_BUDGET,
    RUN_CONVERGED,
    RUN_RECONSTRUCT,
)
from worker.solvers.smo.svr import solve_nu_svr, solve_svr
from worker.solvers.smo.team import RowTeam, inactive_gradient

WORKING_SETS = ("second_order", "platt")


def default_max_iter(n: int) -> int:
    """The step cap when ``max_iter`` is None: LIBSVM's max(10^7, 100 n), a guard against a run that never
    reaches tol (rounding can make it cycle) when no deadline is set."""
    return max(10_000_000, 100 * n)


class SmoSettings(Protocol):
    """What smo reads of a job's params: the fields of its schema (``core.schemas.solver_params.SmoParams``),
    which validates them and holds their defaults (this package imports no pydantic; tests and the warm-up
    build the schema's model or give every field). ``kernel``: the schema's kernel model (or a dict of its
    fields), with a number for gamma (the worker resolves `scale`)."""

    C: float
    svm_type: str
    epsilon: float
    nu: float
    kernel: Any
    working_set: str
    tol: float
    tol_rel: float | None
    cache_mb: float
    shrinking: bool
    max_iter: int | None
    trace_every: int
    seed: int


def _check_args(indptr, indices, data, y, n_features, class_weight, one_class: bool = False):
    """solve_smo's checks of what its schema cannot know: the arrays, both labels present (``one_class``: all +1),
    the problem's class_weight factors; returns y as signs and the factors."""
    check_csr(indptr, indices, data, check_int("n_features", n_features, 1))
    y = binary_signs(y)
    n = indptr.size - 1
    if y.shape != (n,):
        raise SolverInputError(f"y must have one label per row ({n}), got shape {y.shape}")
    if one_class and n < 2:  # the steps pair two variables: one row has none to pair (its run overran its arrays)
        raise SolverInputError("a one-class SVM needs at least 2 rows")
    if not one_class and (n < 2 or np.all(y == y[0])):
        raise SolverInputError("y must contain both classes (-1 and +1); the dispatcher handles one-class data")
    try:
        w_neg, w_pos = (float(v) for v in class_weight)
    except (TypeError, ValueError):
        raise SolverInputError(
            f"class_weight must be a pair (weight for y=-1, weight for y=+1), got {class_weight!r}"
        ) from None
    for name, value in (("class_weight[0]", w_neg), ("class_weight[1]", w_pos)):
        check_positive(name, value)
    return y, (w_neg, w_pos)


TOL_FLOOR = 1e-9  # tol_rel tightens tol down to this

GAP_FLOOR_OF_START = 0.01
"""The offset forms (nu-SVC, nu-SVR, one-class) measure their gap against at least this fraction of the dual
objective at their start (``_relative_gap``)."""


def _relative_gap(primal: float, dual: float, floor: float) -> float | None:
    """(P - D) / max(|P|, floor), None when that is 0. ``floor`` is 0 but for the offset forms, whose optimum can be
    zero: a nu-SVC whose classes' reduced convex hulls meet (overlapping classes, duplicate rows of both labels) has
    0.5 alpha' Q alpha -> 0, so (P - D) / |P| would ask for a vanishing absolute gap and the steps would crawl to
    TOL_FLOOR (LIBSVM stops such a problem at its -e); their floor is GAP_FLOOR_OF_START times the dual objective
    at LIBSVM's start, which bounds the optimum's size."""
    scale = max(abs(primal), floor)
    return max(primal - dual, 0.0) / scale if scale != 0 else None


def _gap_rel(run: Run, floor: float) -> float | None:
    """``_relative_gap`` of the current alpha when the gradient is complete (None while shrunk)."""
    if int(run.istate[IS_ACTIVE]) < run.n:
        return None
    _m, _M, b, _n_sv, _n_bounded, quad, hinge, rho = run.stats()
    return _relative_gap(run.primal(quad, hinge, b, rho), -float(0.5 * quad + run.V.P @ run.V.alpha), floor)


def solve_smo(
    indptr,
    indices,
    data,
    y,
    *,
    n_features,
    params: SmoSettings,
    class_weight=(1.0, 1.0),
    n_threads=None,
    control=None,
    alpha0=None,
    gradient0=None,
    gradient_bar0=None,
    linear_term=None,
    svr_epsilon=None,
    one_class_nu=None,
    nu_form=NU_NONE,
    nu_offset=0.0,
) -> SolverResult:
    """Train a kernel C-SVC by SMO (see the module docstring for the problem, rules and outputs). ``params``:
    the job's parameters (``SmoSettings``); ``class_weight``: this problem's factors on C for y = -1 and
    y = +1; ``alpha0``, ``gradient0`` and ``gradient_bar0``: the dual variables to start from and,
    optionally, their G and G_bar (see "Warm start"). With ``svm_type: epsilon_svr`` an epsilon-SVR on real
    targets ``y`` (``smo.svr``, which calls back with its doubled problem's ``linear_term`` and ``svr_epsilon``)."""
    if linear_term is None and params.svm_type == "epsilon_svr":
        return solve_svr(
            solve_smo,
            indptr, indices, data, y, n_features=n_features, params=params, n_threads=n_threads, control=control,
            alpha0=alpha0, gradient_bar0=gradient_bar0,
        )  # fmt: skip
    if linear_term is None and params.svm_type in ("nu_svc", "nu_svr"):
        solve_nu = solve_nu_svc if params.svm_type == "nu_svc" else solve_nu_svr
        return solve_nu(
            solve_smo,
            indptr, indices, data, y, n_features=n_features, params=params, n_threads=n_threads, control=control,
            alpha0=alpha0, gradient_bar0=gradient_bar0,
        )  # fmt: skip
    if linear_term is None and params.svm_type == "one_class":
        return solve_one_class(
            solve_smo,
            indptr, indices, data, n_features=n_features, params=params, n_threads=n_threads, control=control,
            alpha0=alpha0, gradient_bar0=gradient_bar0,
        )  # fmt: skip
    y, (w_neg, w_pos) = _check_args(indptr, indices, data, y, n_features, class_weight, one_class_nu is not None)
    unit_box = one_class_nu is not None or nu_form == NU_SVC  # the box is [0, 1]: C is not a parameter
    C, tol, tol_rel = (1.0 if unit_box else float(params.C)), float(params.tol), params.tol_rel
    working_set, cache_mb, shrinking, seed = params.working_set, float(params.cache_mb), params.shrinking, params.seed
    kernel = dict(params.kernel)  # the schema's kernel model iterates as its (field, value) pairs
    kp = kernel_params(kernel)
    max_iter = default_max_iter(indptr.size - 1) if params.max_iter is None else params.max_iter
    trace_every = params.trace_every
    if alpha0 is not None:
        alpha0 = check_start(alpha0, y, C, w_neg, w_pos, one_class_nu is None)
    gradient0, gradient_bar0 = (
        check_given(name, value, alpha0, y)
        for name, value in (("gradient0", gradient0), ("gradient_bar0", gradient_bar0))
    )
    threads = solver_threads(n_threads)
    # one compiled specialization of every kernel: float64 values, int32 indices (the service may store
    # float32 values; the rows are copied in position order anyway)
    indices = np.ascontiguousarray(indices, dtype=np.int32)
    data = np.ascontiguousarray(data, dtype=np.float64)
    n_features = int(n_features)
    run = Run(
        indptr,
        indices,
        data,
        y,
        n_features,
        C,
        w_neg,
        w_pos,
        kp,
        cache_mb,
        threads,
        int(seed),
        control if control is not None else SolverControl(),
        alpha0,
        gradient0,
        gradient_bar0,
        linear_term,
        -1.0 if svr_epsilon is None else float(svr_epsilon),
        float(nu_offset) if nu_form != NU_NONE else 0.0 if one_class_nu is None else float(one_class_nu) * y.size,
        nu_form,
    )
    istate, n = run.istate, run.n
    offset_form = nu_form != NU_NONE or one_class_nu is not None
    gap_floor = GAP_FLOOR_OF_START * abs(float(run.fstate[FS_F])) if offset_form else 0.0

    # split scans are handed out chunk by chunk to whichever thread is free (numba's setting, this thread only)
    chunk_size = numba.set_parallel_chunksize(1) if threads > 1 else None
    try:
        work_budget = 50_000
        next_trace = trace_every
        stop_reason = StopReason.MAX_ITER
        converged = False
        while True:
            t0 = time.perf_counter()
            run_code = run.run_slice(working_set == "platt", tol, shrinking, work_budget, min(next_trace, max_iter))
            took = time.perf_counter() - t0
            if run_code == RUN_BUDGET and took > 0:
                work_budget = next_budget(work_budget, took)
            if run_code == RUN_CONVERGED:
                gap_rel = _gap_rel(run, gap_floor) if tol_rel is not None else None
                if gap_rel is not None and tol_rel is not None and gap_rel > tol_rel and tol > TOL_FLOOR:
                    tol = max(tol / 10.0, TOL_FLOOR)  # the gap is not certified yet: tighten and go on
                    run.restart_full_check()
                    continue
                converged = True
                stop_reason = StopReason.CONVERGED
                break
            if run_code == RUN_RECONSTRUCT:
                reason = run.reconstruct()
                if reason is not None:
                    stop_reason = reason
                    break
                run.restart_full_check()
            if istate[IS_ITER] >= next_trace:
                run.record()
                next_trace += trace_every
            if istate[IS_ITER] >= max_iter:
                stop_reason = StopReason.MAX_ITER
                reason = run.reconstruct()
                if reason is not None:
                    stop_reason = reason
                break
            reason = run.control.check()
            if reason is not None:
                stop_reason = reason
                break
            if run.team is not None and run.control.thread_limit is not None:
                run.team.limit(run.control.thread_limit)  # the job's share of the cores (worker.runtime.core_budget)

        active = int(istate[IS_ACTIVE])
        if active < n:
            # stopped by a deadline or cancel while shrunk: complete G (hence the primal) when that is cheap
            n_free = int(np.count_nonzero(run.V.status[:active] == FREE))
            if n_free * (n - active) <= FINAL_REBUILD_VALUES:
                run.reconstruct(check=False)
                active = int(istate[IS_ACTIVE])
        m, M, b, _n_sv, _n_bounded, quad, hinge, rho = run.stats()
        complete = active == n
        objective = run.primal(quad, hinge, b, rho) if complete else float("nan")
        dual_value = -float(0.5 * quad + run.V.P @ run.V.alpha) if complete else -float(run.fstate[FS_F])
        run.record(final=True)
    finally:
        run.close()
        if chunk_size is not None:
            numba.set_parallel_chunksize(chunk_size)

    alpha_rows = np.empty(n)
    alpha_rows[run.orig.perm] = run.V.alpha
    gradient_rows = None
    if complete:  # G is Q alpha - 1 over every position: a warm start can take it (scaled or as it is)
        gradient_rows = np.empty(n)
        gradient_rows[run.orig.perm] = run.V.G
    gradient_bar_rows = np.empty(n)  # G_bar is kept over every position, shrunk or not
    gradient_bar_rows[run.orig.perm] = run.V.G_bar
    support = np.flatnonzero(alpha_rows > 0).astype(np.int64)
    dual_coef = y[support] * alpha_rows[support]
    w = None
    if run.kp.code == KERNEL_LINEAR:
        matrix = sp.csr_matrix((data, indices, indptr), shape=(n, n_features))
        w = np.asarray(matrix[support].T @ dual_coef).reshape(-1)
    lookups = istate[IS_HITS] + istate[IS_MISSES]
    solver_seconds = time.perf_counter() - run.started - run.trace_seconds
    extra = {
        "support_indices": support,
        "dual_coef": dual_coef,
        "n_sv": int(support.size),
        "n_bounded_sv": int(np.count_nonzero(alpha_rows[support] >= np.where(y[support] > 0, C * w_pos, C * w_neg))),
        "dual_objective": dual_value,
        "primal_complete": complete,
        # weak duality: the dual value of any feasible alpha is <= the optimum <= the primal at (alpha, b)
        "gap_rel": _relative_gap(objective, dual_value, gap_floor) if complete else None,
        "gap_note": (
            "primal minus the dual objective of the returned alpha (weak duality)"
            + (
                ", relative to the larger of |primal| and 1% of the dual objective at the start (the optimum of a "
                "nu or one-class problem can be zero)"
                if offset_form
                else ""
            )
            if complete
            else "stopped while shrunk: the primal of the returned model was not computed, so no gap"
        ),
        "max_violation": float(m - M),
        "rho": float(rho),  # the nu duals' rho (smo.nu.nu_parts); 0 for the others
        "cache_hit_rate": float(istate[IS_HITS] / lookups) if lookups else 0.0,
        "kernel_values_computed": int(istate[IS_COMPUTED]),
        "kernel_values_full_rows": int(istate[IS_UNCACHED]),
        "kernel_values_reconstruct": int(istate[IS_RECONSTRUCTED]),
        "full_row_updates": int(istate[IS_FULL_ROWS]),
        "kernel": dict(kernel),
        "alpha": alpha_rows,
        "gradient": gradient_rows,
        "gradient_bar": gradient_bar_rows,
        "active_size": active,
        "min_active_size": int(istate[IS_MIN_ACTIVE]),
        "working_set": working_set,
        "safety_steps": int(istate[IS_SAFETY_STEPS]),
    }
    return SolverResult(
        w=w,
        bias=float(b),
        n_iter=int(istate[IS_ITER]),
        converged=converged,
        stop_reason=stop_reason,
        objective=float(objective),
        solver_seconds=solver_seconds,
        trace_seconds=run.trace_seconds,
        trace=tuple(run.control.points),
        extra=extra,
    )


def warm_up() -> None:
    """Compile every kernel of the smo modules on a tiny problem (both working-set rules, with shrinking)."""
    rng = np.random.default_rng(0)
    dense = rng.normal(size=(40, 3))
    y = np.where(dense[:, 0] + 0.3 * rng.normal(size=40) > 0, 1.0, -1.0)
    matrix = sp.csr_matrix(dense)
    indptr = matrix.indptr.astype(np.int64)
    indices = matrix.indices.astype(np.int32)
    csr = (indptr, indices, matrix.data, y)

    def settings(
        C: float, working_set: str = "second_order", cache_mb: float = 200.0, svm_type: str = "c_svc"
    ) -> SimpleNamespace:
        return SimpleNamespace(
            C=C,
            svm_type=svm_type,
            epsilon=0.1,
            nu=0.5,
            kernel={"type": "rbf", "gamma": 0.5},
            working_set=working_set,
            tol=1e-3,
            tol_rel=0.01,
            cache_mb=cache_mb,
            shrinking=True,
            max_iter=None,
            trace_every=5,
            seed=0,
        )

    for working_set in WORKING_SETS:
        first = solve_smo(*csr, n_features=3, params=settings(1.0, working_set, cache_mb=0.0))
    # the warm starts (a search's path along C): from alpha alone, and with G and G_bar
    alpha, gradient, gradient_bar = (first.extra[key] for key in ("alpha", "gradient", "gradient_bar"))
    solve_smo(*csr, n_features=3, params=settings(2.0), alpha0=alpha)
    solve_smo(*csr, n_features=3, params=settings(2.0), alpha0=alpha, gradient0=gradient, gradient_bar0=gradient_bar)
    # epsilon-SVR (smo.svr): real targets, shrinking on, its primal's loss
    targets = dense @ np.array([1.0, -0.5, 0.2])
    for working_set in WORKING_SETS:
        solve_smo(
            indptr, indices, matrix.data, targets, n_features=3, params=settings(1.0, working_set, 0.0, "epsilon_svr")
        )
    sq = row_sq_norms(indptr, matrix.data)
    kp = KernelParams(np.int64(KERNEL_LINEAR), np.float64(0.5), np.float64(0.0), np.int64(3))
    istate = np.zeros(IS_SIZE, dtype=np.int64)
    istate[IS_THREADS] = 1
    for dense_rows in (True, False):
        X = position_copies(indptr, indices, matrix.data, sq, y, 3, 1, dense_rows)
        inactive_gradient(X, kp, np.ones(40), np.arange(3, dtype=np.int64), 0, 3, 30, 40, istate, np.zeros(10))
    # the row team's kernels (the owner's and the partner's), whatever threads this process may use
    team = RowTeam(X, kp, 1)
    try:
        istate[IS_TEAM_MIN_ROW] = 0
        inactive_gradient(X, kp, np.ones(40), np.arange(3, dtype=np.int64), 0, 3, 30, 40, istate, np.zeros(10))
    finally:
        team.stop()
