"""Cutting-plane training of kernel SVMs with sampled cuts (Yu & Joachims, KDD 2008), binary case.

Problem
-------
Rows x_i (CSR), labels y_i in {-1, +1}, a kernel K with feature map phi (``worker.solvers.kernels``).
The service's problem, with the threshold handled as LIBLINEAR's bias (a constant feature of value
B appended to every phi(x), regularized like the rest; ``bias=None`` drops it), is

    min_w  P(w) = 0.5 * |w|^2 + C * sum_i max(0, 1 - y_i <w, phi'(x_i)>),   phi'(x) = (phi(x), B),

i.e. the kernel seen by the solver is K'(x, z) = K(x, z) + B^2, and the decision value of the model
w = sum_u gamma_u phi'(x_u) is f(x) = sum_u gamma_u K(x_u, x) + b with b = B^2 * sum_u gamma_u.
(The paper's structural SVM has no threshold; SMO's unregularized b cannot be expressed as a cut.)

Paper 003 (Section 6.1) uses binary classification with Psi(x, y) = y phi(x) and the zero-one loss
Delta. We take Psi(x, y) = y phi'(x) / 2, which makes the margin-rescaled constraint of OP1 for
y_hat = -y_i read 1 - y_i <w, phi'(x_i)> <= xi_i: the hinge loss, with no factor 2. OP1 is then

    min 0.5 |w|^2 + (C_paper / N) sum_i xi_i,

so the paper's C is C_paper = C * N for the service's C (this is the conversion from the C/n
convention). The 1-slack form solved by Algorithm 1 is min 0.5 |w|^2 + C_paper * xi subject to the
cuts c + <w, g> <= xi, where for binary labels the argmax of line 13 picks y_hat_i = -y_i exactly
when y_i f(x_i) < 1, giving the cut (c, g) = ((1/N) sum_i l_i, -(1/N) sum_i l_i y_i phi'(x_i)),
l_i = [y_i f(x_i) < 1]; c + <w, g> is the mean hinge loss at w.

Master problem (OP2): with cuts (c_k, g_k), k = 1..t, H_kl = <g_k, g_l> and h_k = c_k,

    max_alpha  h' alpha - 0.5 alpha' H alpha   s.t.  alpha >= 0,  sum_k alpha_k <= C_paper,

and w = -sum_k alpha_k g_k. Every cut here is a kernel expansion g_k = -sum_u beta_ku phi'(x_u) over a
few rows, so w = sum_u gamma_u phi'(x_u) with gamma = sum_k alpha_k beta_k. OP2 is solved by a
primal active-set method (``sampled_cuts.master``: the equality-constrained problem on the cuts with
alpha > 0 solved exactly through a Cholesky factor of their Gram block, kept and updated across
iterations), warm-started from the previous alpha; a numerically singular face hands over to sequential
minimal optimization on the simplex (``reduced_qp.reduced_dual_smo``, cpa's and ocas's solver) from the
same alpha. Both stop when the duality gap is at most tol / 1000 (in the objective's units: tight
enough that the models are those of the solver this module had before, which stopped on the
gradients' spread instead: objectives within 3e-7 relative and the same iterations on 3,000 a9a-like
rows). SMO alone needed ~5,000 steps per solve on 49,990 ijcnn1 rows (nearly parallel sampled cuts make
H badly conditioned): 1.3 s of 4.8 s at r = 400, 24 s of 26 s at r = 100; the active-set method takes
the same cuts (identical iterations, basis and objective there) in 0.08 s and 0.3 s. The gradient of
cut k is its value c_k + <w, g_k> at w, and xi = max(0, max_k (c_k + <w, g_k>)).

Algorithms
----------
* ``variant="constant"``, Algorithm 2: a cut is built from r = ``sample_size`` rows S_1..S_r drawn
  uniformly with replacement (seeded splitmix64): c = (1/r) sum_j l_{S_j},
  beta = (1/r) sum_j l_{S_j} y_{S_j} e_{S_j}. The values f(x_{S_j}) = sum_u gamma_u K'(x_u, x_{S_j}) need
  the basis rows u with gamma_u != 0 (|U_live| * r kernel values, the cost the paper counts as O(t r^2)
  in Section 4.1.1); for the rbf kernel on rows that fit a dense copy these values are computed in
  float32 (each within ~3e-7 relative of float64; summed in float32 over blocks of 64 rows and in float64
  across blocks; on dense-ish rows the dot products by BLAS sgemm, one 64-row block at a time), which
  only decides which drawn rows have a loss and the sampled cut's value, both compared with
  tol = 1e-3. The new column of H is computed in float64, as the new cut's expansion
  b(x) = sum_j beta_tj K'(x_j, x) at the unique basis rows u of all cuts: H_kt = sum_u beta_ku b(x_u)
  (|U| times the new cut's row count: about 40 of the r = 400 drawn rows on ijcnn1); H_tt takes the
  square of that count more.
  Stopping (Section 6.1): after ``p`` consecutive sampled cuts that are not violated by more than
  ``tol`` (c + <w, g> <= xi + tol); a violated one is added and resets the count.
  **The pool** (``pool_size`` m > r; by default N / 250 rows, at least r, at most 4,000): f is computed at m uniformly drawn rows instead of r;
  the cut's offset c and its value are the pool's (fraction with a loss, mean hinge), and its r basis rows
  are taken among the pool's losing rows at equal steps of margin (``sampled_cuts.sampling.pooled_cut``),
  weighted (|losing| / m) / r. This is Algorithm 2 with a larger sample for the estimates and the same
  basis size: the cuts' error, which the cutting-plane model's maximum turns into an overstated loss near
  the optimum, falls as 1 / sqrt(m) instead of 1 / sqrt(r), for m * |U_live| kernel values per iteration
  instead of r * |U_live|. m <= r is the paper's Algorithm 2 exactly.
* ``variant="linear"``, Algorithm 3: f(x_i) for all N rows comes from the cached A_ki = a_k(x_i)
  (f = sum_k alpha_k A_k, no kernel values). The exact cut's value (the mean hinge) decides stopping:
  stop when it is <= xi + tol. Otherwise r rows are drawn uniformly with replacement from
  I = {i : y_i f(x_i) < 1} and the cut is c = |I| / N, beta = |I| / (N r) sum_j y_{S_j} e_{S_j} (line 19);
  drawing repeats until this cut is violated (line 20; after 50 draws the cut made of the single most
  violating row, which is violated whenever the exact cut is, as in the proof of Corollary 2). That is
  ``sampling="uniform"``. The default ``sampling="calibrated"`` (``sampled_cuts.sampling``) takes the r
  rows at equal steps of margin and calibrates their weights so that the cut's inner products with every
  cut of the working set equal the exact cut's (from the cached A, no kernel values): the cut is then
  exact at the current w and violated whenever the exact cut is, so it is never drawn again.
  A new cut costs N * r kernel values for its row A_t; its Gram entries then come from A:
  H_kt = sum_j beta_tj A_k(S_j), without kernel evaluations (Section 4.2.1).
* Cuts whose alpha has been 0 for ``max_inactive`` (paper: 20) consecutive iterations are removed.

Stopping rule in the user's terms: ``tol`` is in units of the mean hinge loss (paper: 0.001); the
linear variant stops when the exact mean hinge loss at w exceeds the model's slack xi by at most tol;
the constant variant when p sampled estimates in a row do; both stop after ``max_iter`` cutting-plane
iterations (oracle calls), or at a deadline or cancel (checked after every iteration and between
chunks of the N * r kernel evaluations of the linear variant).

Inputs and outputs
------------------
``SolverResult`` with ``w`` None, ``bias`` = B^2 * sum(gamma), ``n_iter`` = oracle calls,
``objective`` = P(w) exactly for the linear variant (its hinge losses are known for all rows); for the
constant variant computing P would cost N * |U| kernel values, so ``objective`` is the estimate
0.5 |w|^2 + C N * (mean hinge over the rows drawn by the last p oracle calls) and
``extra["objective_is_estimate"]`` is True. ``extra``: "support_indices" (int64 row ids of the basis
rows, ascending), "dual_coef" (gamma over them: decision(x) = sum dual_coef K(x_u, x) + bias), "n_sv"
(basis size), "n_bounded_sv" None (no box per example in this formulation), "n_cuts", "C_paper",
"xi", "master_dual", "kernel", "kernel_values_computed". Trace points: iteration, elapsed_s,
dual (OP2's value: a lower bound on the master's primal, not on P for sampled cuts), primal (linear:
exact; constant: estimate), gap, xi, cut_value, n_cuts, basis_size.

What runs in parallel: the kernel blocks (f at the drawn rows and the new cut's expansion at the basis
rows for the constant variant; the A row over all N rows for the linear one) are split by target rows over
``n_threads`` (numba prange, each thread writing its own targets). The float64 sums run in the same order
whatever the split; the constant variant's float32 decision values at the drawn rows (BLAS sgemm on
blocks whose shape follows the split) can round differently, so its models for 1 and 2 threads agree to
about 1e-8 relative in the objective rather than exactly (measured: 3610.70358 both, differing in the
9th digit). For a given seed and thread count the model is deterministic.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from worker.solvers.common import (
    SolverControl,
    SolverInputError,
    SolverResult,
    StopReason,
    binary_signs,
    certified_gap,
    check_csr,
    check_int,
    rng_state,
    solver_threads,
)
from worker.solvers.kernels import kernel_params, row_sq_norms
from worker.solvers.sampled_cuts.blocks import (
    Expansion,
    Kernel,
    Rows,
    Split,
    _entries_column,
    _sampled_cut,
    _sampled_cuts_draw,
    _sampled_cuts_expansion,
    _sampled_cuts_f_at,
)
from worker.solvers.sampled_cuts.cuts import Cuts
from worker.solvers.sampled_cuts.master import master_refactor
from worker.solvers.sampled_cuts.sampling import calibrated_cut, default_pool_size, pooled_cut, uniform_cut
from worker.solvers.sampled_cuts.settings import (
    DEFAULT_SAMPLE_SIZE,
    PAR_MIN_VALUES,
    SAMPLED_GAP_NOTE,
    SLICE_VALUES,
    VARIANTS,
    SampledCutsSettings,
    TraceClock,
)
from worker.solvers.sampled_cuts.subspace import solve_subspace

# ---------------------------------------------------------------------------------------------
# public wrapper
# ---------------------------------------------------------------------------------------------


def _check_args(indptr, indices, data, y, n_features):
    """solve_sampled_cuts's checks of what its schema cannot know: the arrays and both labels present;
    returns y as signs."""
    check_csr(indptr, indices, data, check_int("n_features", n_features, 1))
    y = binary_signs(y)
    n = indptr.size - 1
    if y.shape != (n,):
        raise SolverInputError(f"y must have one label per row ({n}), got shape {y.shape}")
    if n < 2 or np.all(y == y[0]):
        raise SolverInputError("y must contain both classes (-1 and +1); the dispatcher handles one-class data")
    return y


def solve_sampled_cuts(
    indptr,
    indices,
    data,
    y,
    *,
    n_features,
    params: SampledCutsSettings,
    trace_every=1,
    n_threads=None,
    control=None,
    memory_bytes=None,
) -> SolverResult:
    """Train a kernel SVM by the sampled-cut cutting-plane algorithms (see the module docstring). ``params``:
    the job's parameters (``SampledCutsSettings``); ``trace_every``: record a trace point every this many
    iterations (not a job parameter); ``memory_bytes``: what the training may hold (the job's memory budget; None:
    the machine's available memory only), which the subspace variant's projected rows must fit in."""
    y = _check_args(indptr, indices, data, y, n_features)
    check_int("trace_every", trace_every, 1)
    C, tol, variant, sampling, p = float(params.C), float(params.tol), params.variant, params.sampling, params.p
    max_inactive, max_iter, seed = params.max_inactive, params.max_iter, params.seed
    bias = None if params.bias is None else float(params.bias)
    kernel = dict(params.kernel)  # the schema's kernel model iterates as its (field, value) pairs
    kp = kernel_params(kernel)
    sample_size = DEFAULT_SAMPLE_SIZE[variant] if params.sample_size is None else params.sample_size
    pool_size = default_pool_size(indptr.size - 1, sample_size) if params.pool_size is None else params.pool_size
    threads = solver_threads(n_threads)
    # one compiled specialization of every kernel: float64 values, int32 indices (float32 values are accepted)
    indices = np.ascontiguousarray(indices, dtype=np.int32)
    data = np.ascontiguousarray(data, dtype=np.float64)
    control = control if control is not None else SolverControl()
    clock = TraceClock(control)
    n = y.size
    n_features = int(n_features)
    r = int(sample_size)
    C_paper = C * n
    shift = 0.0 if bias is None else bias * bias
    code, gamma, coef0, degree = kp
    kernel_spec = Kernel(np.int64(code), np.float64(gamma), np.float64(coef0), np.int64(degree), np.float64(shift))
    split = Split(threads, PAR_MIN_VALUES)
    sq = row_sq_norms(indptr, data)
    rng = rng_state(int(seed))
    linear = variant == "linear"
    # the constant variant's decision values at the drawn rows (rbf) read float32 copies
    data32 = np.zeros(0, dtype=np.float32) if linear else data.astype(np.float32)
    sq32 = np.zeros(0, dtype=np.float32) if linear else sq.astype(np.float32)
    X = Rows(indptr, indices, data, sq, data32, sq32, n_features)
    cuts = Cuts(n, keep_a=linear)
    all_rows = np.arange(n, dtype=np.int64)
    pool = r if linear else max(r, int(pool_size))  # rows whose f the constant variant evaluates
    draw = np.empty(pool, dtype=np.int64)
    qp_tol = tol * 1e-3  # the master's duality gap (see the module docstring)
    computed = 0
    qp_fallbacks = 0
    xi = 0.0
    master_dual = 0.0
    quiet = 0  # consecutive non-violated sampled cuts (constant variant)
    recent_hinge: list[float] = []  # mean hinge of the last p samples (constant variant)
    f_all = np.zeros(n)
    last_primal = float(C * n)  # P(0) = C * N * 1
    iteration = 0
    converged = False
    stop_reason = StopReason.MAX_ITER

    if variant == "subspace":
        basis, beta, passes, converged, stop_reason, primal, dual, computed = solve_subspace(
            indptr, indices, data, y, n_features=n_features, C=C, kernel=kernel, shift=shift, tol=tol, m=r,
            max_iter=max_iter, seed=seed, control=control, record=clock.record, threads=threads, memory_bytes=memory_bytes,
        )  # fmt: skip
        return SolverResult(
            w=None,
            bias=shift * float(beta.sum()),
            n_iter=passes,
            converged=converged,
            stop_reason=stop_reason,
            objective=primal,
            solver_seconds=clock.solver_seconds(),
            trace_seconds=clock.trace_seconds,
            trace=tuple(control.points),
            extra={
                "support_indices": basis,
                "dual_coef": beta,
                "n_sv": int(basis.size),
                "n_bounded_sv": None,
                **certified_gap(primal, dual, "the restricted problem's duality gap: w in the span of the basis rows"),
                "kernel": dict(kernel),
                "bias_feature": bias,
                "variant": variant,
                "sample_size": r,
                "pool_size": None,
                "kernel_values_computed": int(computed),
            },
        )

    def solve_master() -> None:
        """SOLVE_QP(J) (line 7 of Algorithms 2 and 3), then the cuts inactive for max_inactive iterations dropped."""
        nonlocal xi, master_dual, qp_fallbacks
        xi, master_dual, fell_back = cuts.solve_master(C_paper, qp_tol, int(max_inactive))
        qp_fallbacks += int(fell_back)

    while iteration < max_iter:
        iteration += 1
        t = cuts.t
        alpha = cuts.alpha[:t]
        w_sq = float(alpha @ cuts.H[:t, :t] @ alpha) if t else 0.0
        if linear:
            # Algorithm 3, lines 12-16: f at every row from the cached A_k (Section 4.2.1), I and the exact cut c'
            f_all = alpha @ cuts.A[:t] if t else np.zeros(n)
            margins = y * f_all
            violators = np.flatnonzero(margins < 1.0)
            exact_value = float(np.sum(1.0 - margins[violators])) / n
            last_primal = 0.5 * w_sq + C_paper * exact_value
            point = {
                "iteration": iteration,
                "primal": last_primal,
                "dual": master_dual,
                "gap": last_primal - master_dual,
                "xi": xi,
                "cut_value": exact_value,
                "n_cuts": t,
            }
            if exact_value <= xi + tol:  # Algorithm 3, line 4: c' + <w, g'> <= xi + epsilon
                converged = True
                stop_reason = StopReason.CONVERGED
                point["basis_size"] = cuts.basis_size
                clock.record(point)
                break
            frac = violators.size / n
            if sampling == "calibrated":  # the cut agrees with the exact one on the working set's span
                rows, coef = calibrated_cut(rng, violators, margins, y, cuts.A[:t], n, r)
            else:
                rows, coef = uniform_cut(rng, violators, margins, y, frac, r, xi + tol, draw)
            c_new = frac
            # A_t over all rows, in chunks between control checks
            a_row = np.empty(n)
            chunk = max(1, SLICE_VALUES // max(1, rows.size))
            stopped = None
            for start in range(0, n, chunk):
                _sampled_cuts_expansion(
                    X, kernel_spec, Expansion(rows, coef), all_rows, start, min(n, start + chunk), a_row, split
                )
                stopped = control.check()
                if stopped is not None:
                    break
            computed += n * rows.size
            if stopped is not None:
                stop_reason = stopped
                break
            column = cuts.A[:t, rows] @ coef if t else np.zeros(0)
            self_dot = float(a_row[rows] @ coef)
            cuts.add(rows, coef, c_new, column, self_dot, a_row)  # Algorithm 3, lines 5-6
            solve_master()
        else:
            # Algorithm 2, lines 12-16: r rows drawn uniformly, f there from the basis rows, the sampled cut
            _sampled_cuts_draw(rng, all_rows, n, pool, draw)
            urows, uptr, ucut, ucoef, gamma_u = cuts.grouped_basis()
            # f = sum_u gamma_u K'(x_u, .) over the basis rows with gamma_u = sum_k alpha_k beta_ku != 0
            f_draw = np.zeros(pool)
            if t:
                live = gamma_u != 0.0
                f_rows = urows[live]
                _sampled_cuts_f_at(X, kernel_spec, Expansion(f_rows, gamma_u[live]), draw, f_draw, split, True)
                computed += f_rows.size * pool
            if pool == r:  # line 16 as written: every drawn row with a loss is in the cut
                value, rows, coef, n_loss = _sampled_cut(draw, y, f_draw, r)
            else:  # the pool's mean hinge and a cut of r of its loss rows, spread over their margins
                value, rows, coef, n_loss = pooled_cut(rng, draw, y, f_draw, r)
            recent_hinge = (recent_hinge + [value])[-int(p) :]
            estimate = 0.5 * w_sq + C_paper * sum(recent_hinge) / len(recent_hinge)
            point = {
                "iteration": iteration,
                "primal": estimate,
                "dual": master_dual,
                "gap": estimate - master_dual,
                "xi": xi,
                "cut_value": value,
                "n_cuts": t,
            }
            if value <= xi + tol:  # Algorithm 2, line 4, read as Section 6.1: p non-violated cuts in a row
                quiet += 1
                if quiet >= p:
                    converged = True
                    stop_reason = StopReason.CONVERGED
                    point["basis_size"] = cuts.basis_size
                    clock.record(point)
                    break
            else:
                quiet = 0
                c_new = n_loss / pool
                # H_kt = <g_k, g_t> = sum_u beta_ku b(x_u) over cut k's rows u, with b(x) = sum_j beta_tj K'(x_j, x)
                # the new cut's expansion, evaluated (in float64) at the unique basis rows and at its own rows
                # (H_tt = sum_j beta_tj b(x_j))
                targets = np.concatenate((urows, rows))
                b_at = np.empty(targets.size)
                _sampled_cuts_f_at(X, kernel_spec, Expansion(rows, coef), targets, b_at, split, False)
                computed += targets.size * rows.size
                column = _entries_column(uptr, ucut, ucoef, b_at, t) if t else np.zeros(0)
                self_dot = float(b_at[urows.size :] @ coef)
                cuts.add(rows, coef, c_new, column, self_dot, None)
                solve_master()
        point["basis_size"] = cuts.basis_size
        if iteration % int(trace_every) == 0:
            clock.record(point)
        reason = control.check()
        if reason is not None:
            stop_reason = reason
            break

    # the returned model is the current alpha; its objective
    t = cuts.t
    alpha = cuts.alpha[:t]
    w_sq = float(alpha @ cuts.H[:t, :t] @ alpha) if t else 0.0
    if linear:
        f_all = alpha @ cuts.A[:t] if t else np.zeros(n)
        objective = 0.5 * w_sq + C * float(np.sum(np.maximum(0.0, 1.0 - y * f_all)))
        is_estimate = False
    else:
        objective = 0.5 * w_sq + C_paper * (float(np.mean(recent_hinge)) if recent_hinge else 1.0)
        is_estimate = True
    rows, gamma_coef = cuts.expansion()
    b = shift * float(gamma_coef.sum())
    solver_seconds = clock.solver_seconds()
    extra = {
        "support_indices": rows,
        "dual_coef": gamma_coef,
        "n_sv": int(rows.size),
        "n_bounded_sv": None,
        "n_cuts": t,
        "cut_alpha": cuts.alpha[:t].copy(),
        "C_paper": C_paper,
        "xi": xi,
        "master_dual": master_dual,
        "objective_is_estimate": is_estimate,
        "gap_note": SAMPLED_GAP_NOTE,
        "kernel": dict(kernel),
        "bias_feature": bias,
        "variant": variant,
        "sample_size": r,
        "pool_size": None if linear else pool,
        "kernel_values_computed": int(computed),
        "master_smo_fallbacks": qp_fallbacks,
    }
    return SolverResult(
        w=None,
        bias=b,
        n_iter=iteration,
        converged=converged,
        stop_reason=stop_reason,
        objective=float(objective),
        solver_seconds=solver_seconds,
        trace_seconds=clock.trace_seconds,
        trace=tuple(control.points),
        extra=extra,
    )


def warm_up() -> None:
    """Compile every kernel of this module on tiny problems: both variants, rows dense (sgemm) and sparse
    relative to n_features, cuts dropped (max_inactive 1), the master's refactoring, and Crammer and Singer's
    problem (``sampled_cuts.multiclass``)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    dense = rng.normal(size=(60, 3))
    y = np.where(dense[:, 0] + 0.3 * rng.normal(size=60) > 0, 1.0, -1.0)
    for n_features in (3, 12):  # 3 of 3 features set: dense-ish rows; 3 of 12: sparse ones
        matrix = sp.csr_matrix(np.hstack([dense, np.zeros((60, n_features - 3))]))
        indptr = matrix.indptr.astype(np.int64)
        indices = matrix.indices.astype(np.int32)
        for variant in VARIANTS:
            solve_sampled_cuts(
                indptr,
                indices,
                matrix.data,
                y,
                n_features=n_features,
                params=SimpleNamespace(
                    C=1.0,
                    kernel={"type": "rbf", "gamma": 0.5},
                    variant=variant,
                    sampling="calibrated",
                    sample_size=20,
                    pool_size=None,
                    p=4,
                    tol=0.001,
                    max_inactive=1,
                    max_iter=5,
                    bias=1.0,
                    seed=0,
                ),
            )
    H = np.eye(2)
    master_refactor(H, np.ones(2), 2, np.zeros((2, 2)), np.zeros(2, dtype=np.int64))
    from worker.solvers.sampled_cuts.multiclass import warm_up as warm_up_crammer_singer

    warm_up_crammer_singer()
