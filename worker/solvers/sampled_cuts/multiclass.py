"""Crammer and Singer's multi-class SVM with kernels, by sampled cuts (Yu & Joachims, KDD 2008, the structural case).

Problem
-------
Rows x_i (CSR), classes y_i in {0, .., K-1}, a kernel K with feature map phi, and, as in the binary solver
(``sampled_cuts.solve``), the threshold as a regularized constant feature B (phi'(x) = (phi(x), B); ``bias=None``
drops it). One function per class, f_c(x) = <w_c, phi'(x)>, and Crammer and Singer's multi-class hinge:

    min_w  P(w) = 0.5 * sum_c |w_c|^2 + C * sum_i max_c (1[c != y_i] + f_c(x_i) - f_{y_i}(x_i)),

LIBLINEAR's -s 4 objective (and ocas's ``multiclass: crammer_singer``) in a kernel's feature space. In paper
003's terms (Section 2) this is the structural SVM with Psi(x, y) = e_y (x) phi'(x) (the joint feature map: phi'(x)
in class y's block), the zero-one loss Delta, and the argmax of Algorithms 2 and 3 (lines 13-14) over the K
classes: y_hat_i = argmax_c (1[c != y_i] + f_c(x_i)). The margin-rescaled constraint of OP1 for y_hat is
1 - (f_{y_i}(x_i) - f_{y_hat}(x_i)) <= xi_i, so with C_paper = C * N (the conversion from the C/N convention, as
in the binary case) OP1 is the problem above. A cut is

    c = (1/N) sum_i l_i,   g = -(1/N) sum_i l_i (Psi(x_i, y_i) - Psi(x_i, y_hat_i)),   l_i = [margin_i < 1],

margin_i = f_{y_i}(x_i) - max_{c != y_i} f_c(x_i); c + <w, g> is the mean multi-class hinge at w. Every cut is a
kernel expansion over (row, class) pairs: -g = sum_e beta_e e_{c(e)} (x) phi'(x_{u(e)}), with +weight at
(i, y_i) and -weight at (i, y_hat_i) for each row of the cut. The inner product of two pairs is
K'(x_u, x_v) when their classes are equal and 0 otherwise (Section 3, equation (1)); the Gram matrix of the cuts,
the master problem OP2 and its solver are the binary solver's (``Cuts``, ``sampled_cuts.master``).

The pairs are numbered v = i * K + c, so that the binary solver's working set (``Cuts``: entries by row, Gram
columns, inactive cuts dropped) keeps them unchanged; the kernel blocks read row i = v // K and class c = v % K
(``blocks._sampled_cuts_class_expansion``: one kernel value per row and target, added to the target's score of
each class the row has an entry in).

Algorithms
----------
* ``variant="linear"``, Algorithm 3 with the cached values of Section 4.2.1, stabilized by paper 000's (OCAS) line
  search: A_k holds <g_k, Psi(x_i, c)> for every row and class (K numbers per row and cut, the paper's "m numbers
  for multi-class classification"), so the master's solution w_t = sum_k alpha_k (-g_k) has its scores at every row
  with no kernel values. A best point w_b is kept by its scores, its norm and its expansion over pairs; each
  iteration moves it to the minimum of P on the segment [w_b, w_t] (paper 000, Algorithm 1, line 4: the exact line
  search over the rows' K-line envelopes, ``ocas_multiclass.line_breakpoints`` and ``line_search.minimize``) and
  takes the new cut at (1 - lambda) w_b + lambda w_t (its (8), lambda 0.1). Without it the plain cutting planes
  zigzag on many classes: letter (15,000 rows, 26 labels, rbf gamma 1, C = 1) was 24% above its master's bound
  after 300 iterations, against 2.5% after 113 with it; on pendigits, where the plain method is quick (25-69
  iterations), it takes 1.1-2.3x its iterations. The model is w_b, its objective P(w_b) exactly. When the loss
  rows at the cut point are no more than r the cut is the exact one (weights 1/N: Algorithm 1; r defaults to 10,000
  here, ``CRAMMER_SINGER_SAMPLE_SIZE``); else ``sampling="calibrated"`` (the default) takes r loss rows at equal steps of margin, their weights calibrated
  so that the cut's inner products with every cut of the working set equal the exact cut's
  (``sampling.calibrate``, from A); ``"uniform"`` the paper's draw (lines 17-20), r rows uniformly from the loss
  rows with weights |I| / (N r), drawn again until the cut is violated (after 50 draws the single most violating
  row). A new cut costs N * (its distinct rows) kernel values for its A row; its Gram column comes from A.
* ``variant="constant"``, Algorithm 2: f at a pool of uniformly drawn rows from the basis (rows with a non-zero
  coefficient in some class: |U| * pool kernel values), the pool's mean hinge as the sampled cut's value, r of its
  loss rows at equal steps of margin in the cut (all of them when fewer), weighted as the binary solver's pooled
  cut (``pool_size``; pool = r is the paper's algorithm as written); stop after ``p`` sampled cuts in a row not
  violated by more than tol. The new cut's Gram column: its expansion at the basis rows (float64).
* ``variant="subspace"`` has no cuts and is not available here (a ``SolverInputError``).
* Cuts whose alpha has been 0 for ``max_inactive`` consecutive iterations are removed.

Stopping rule in the user's terms: ``tol`` in units of the mean multi-class hinge; the linear variant stops when
P(w_b) exceeds the master's value by at most C * N * tol (paper 000's rule (9); with exact cuts the master's value
bounds the optimum, so P(w_b) is then within C * N * tol of it), the constant one when p sampled cuts in a row are
not violated by more than tol; both after ``max_iter`` iterations, at a deadline or a cancel (checked after every iteration and
between chunks of the linear variant's A row).

Inputs and outputs
------------------
``SolverResult`` with ``w`` None, ``bias`` 0.0, ``objective`` P(w) (exact for the linear variant; the constant
variant's estimate from its last p samples, ``extra["objective_is_estimate"]``). ``extra``: "support_indices" (the
rows of the expansion, ascending), "dual_coef" (K x rows: f_c(x) = sum_u dual_coef[c, u] K(x_u, x) + biases[c]),
"biases" (B^2 times each class's coefficient sum), "n_sv", "n_cuts", "C_paper", "xi", "master_dual", the kernel,
the variant and the kernel values computed; when every cut of the linear variant's final master with alpha > 0 is
exact, the certified gap (``certified_gap``: the master's dual value is then a lower bound on the optimum; cuts
with alpha = 0 do not enter it), else a note saying why none is. Trace points: as the binary solver's (iteration, elapsed_s, primal,
dual, gap, xi, cut_value, n_cuts, basis_size).

What runs in parallel: the kernel blocks, split by target rows over ``n_threads`` (numba prange), every sum in the
same order whatever the split (1 and 2 threads give the same model).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from worker.solvers.common import (
    SolverControl,
    SolverInputError,
    SolverResult,
    StopReason,
    certified_gap,
    check_csr,
    check_int,
    rng_state,
    solver_threads,
)
from worker.solvers.kernels import kernel_params, row_sq_norms
from worker.solvers.line_search import minimize
from worker.solvers.ocas_multiclass import line_breakpoints
from worker.solvers.sampled_cuts.blocks import (
    ClassExpansion,
    Kernel,
    Rows,
    Split,
    _entries_column,
    _sampled_cuts_class_expansion,
    _sampled_cuts_draw,
)
from worker.solvers.sampled_cuts.cuts import Cuts
from worker.solvers.sampled_cuts.sampling import (
    calibrate,
    combine_rows,
    default_pool_size,
    systematic_rows,
    uniform_rows,
)
from worker.solvers.sampled_cuts.settings import (
    DEFAULT_SAMPLE_SIZE,
    PAR_MIN_VALUES,
    SAMPLED_GAP_NOTE,
    SLICE_VALUES,
    SampledCutsSettings,
    TraceClock,
)

MIN_CUTS_IN_MEMORY = 8
"""The fewest cuts whose cached scores the job's memory must hold for the linear variant to start."""
CUT_POINT = 0.1
"""lambda of paper 000's (8): the linear variant's cut is taken at (1 - lambda) w_b + lambda w_t (ocas's default)."""
CRAMMER_SINGER_SAMPLE_SIZE = {**DEFAULT_SAMPLE_SIZE, "linear": 10_000}
"""r when ``sample_size`` is None: the linear variant's cut holds every loss row up to 10,000 of them (the exact cut),
for its robustness; sampled cuts are cheaper an iteration and may need more of them. Measured (1 thread, the line
search on): pendigits (7,494 rows, 10 labels, unscaled 0-100) at rbf gamma 1e-4, C = 10: exact 113 iterations,
12.4 s; r = 1000 112, 6.9 s, the same objective to 2e-4. letter (15,000 rows, 26 labels) at gamma 1, C = 1, after
113 iterations: exact 2.5% above the master's bound (78 s), r = 1000 10.6% (23 s). pendigits at gamma 0.5 (the
kernel nearly the identity: every row a support vector), C = 1: exact 77 iterations, 26 s; r = 1000 still 1.4%
above after 1,000 iterations (384 s). The constant variant keeps the binary's."""


def class_margins(scores: np.ndarray, classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's margin f_{y_i} - max_{c != y_i} f_c and its rival class (that argmax, the smallest class on ties),
    from the (rows, K) scores."""
    rows = np.arange(classes.size)
    own = scores[rows, classes]
    others = scores.copy()
    others[rows, classes] = -np.inf
    rivals = np.argmax(others, axis=1)
    return own - others[rows, rivals], rivals.astype(np.int64)


def class_terms(
    picked: np.ndarray, classes: np.ndarray, rivals: np.ndarray, weights: np.ndarray, n_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    """The pairs (v = i * K + c, ascending) and coefficients of -g for rows ``picked`` with these weights: +weight
    at (i, y_i), -weight at (i, rival_i); a row picked twice once, its weights summed. ``classes`` and ``rivals``
    are aligned with ``picked``."""
    pairs = np.concatenate((picked * n_classes + classes, picked * n_classes + rivals))
    return combine_rows(pairs, np.concatenate((weights, -weights)))


def class_expansion(pairs: np.ndarray, coef: np.ndarray, n_classes: int) -> ClassExpansion:
    """The kernel blocks' form (``ClassExpansion``) of the expansion over ascending pairs v = i * K + c."""
    rows_of = pairs // n_classes
    rows, first = np.unique(rows_of, return_index=True)
    ptr = np.append(first, pairs.size).astype(np.int64)
    return ClassExpansion(
        rows.astype(np.int64), ptr, (pairs % n_classes).astype(np.int64), np.ascontiguousarray(coef, dtype=np.float64)
    )


def _check_args(indptr, indices, data, classes, n_classes, n_features, variant):
    check_csr(indptr, indices, data, check_int("n_features", n_features, 1))
    n_classes = check_int("n_classes", n_classes, 2)
    classes = np.asarray(classes)
    n = indptr.size - 1
    if classes.shape != (n,):
        raise SolverInputError(f"classes must have one class per row ({n}), got shape {classes.shape}")
    if n and (classes.min() < 0 or classes.max() >= n_classes or not np.all(classes == np.round(classes))):
        raise SolverInputError(f"classes must be whole numbers in [0, {n_classes - 1}]")
    if variant == "subspace":
        raise SolverInputError(
            "the subspace variant has no cuts, so it does not train Crammer and Singer's problem: use variant "
            "linear or constant"
        )
    return classes.astype(np.int64), n_classes


def solve_sampled_cuts_crammer_singer(
    indptr,
    indices,
    data,
    classes,
    *,
    n_classes: int,
    n_features: int,
    params: SampledCutsSettings,
    trace_every: int = 1,
    n_threads: int | None = None,
    control: SolverControl | None = None,
    memory_bytes: int | None = None,
) -> SolverResult:
    """Train Crammer and Singer's multi-class SVM with a kernel by sampled cuts (see the module docstring).
    ``classes``: each row's class in [0, n_classes); ``params``: the job's sampled_cuts parameters;
    ``memory_bytes``: what the training may hold (the job's memory budget; None: no check), which the linear
    variant's cached scores of ``MIN_CUTS_IN_MEMORY`` cuts must fit in."""
    classes, K = _check_args(indptr, indices, data, classes, n_classes, n_features, params.variant)
    check_int("trace_every", trace_every, 1)
    C, tol, variant, sampling, p = float(params.C), float(params.tol), params.variant, params.sampling, int(params.p)
    bias = None if params.bias is None else float(params.bias)
    kernel: dict[str, Any] = dict(params.kernel)
    code, gamma, coef0, degree = kernel_params(kernel)
    r = int(CRAMMER_SINGER_SAMPLE_SIZE[variant] if params.sample_size is None else params.sample_size)
    n = classes.size
    linear = variant == "linear"
    cut_bytes = n * K * 8  # a cut's cached scores (linear variant)
    if linear and memory_bytes is not None and MIN_CUTS_IN_MEMORY * cut_bytes > memory_bytes:
        raise SolverInputError(
            f"the linear variant keeps {K} scores per row and cut ({cut_bytes / 2**20:.1f} MiB a cut): "
            f"{MIN_CUTS_IN_MEMORY} cuts do not fit the {memory_bytes / 2**20:.0f} MiB the job may use; use variant "
            "constant, or multiclass ovr"
        )
    pool = r if linear else max(r, int(default_pool_size(n, r) if params.pool_size is None else params.pool_size))
    indices = np.ascontiguousarray(indices, dtype=np.int32)
    data = np.ascontiguousarray(data, dtype=np.float64)
    control = control if control is not None else SolverControl()
    clock = TraceClock(control)
    C_paper = C * n
    shift = 0.0 if bias is None else bias * bias
    kernel_spec = Kernel(np.int64(code), np.float64(gamma), np.float64(coef0), np.int64(degree), np.float64(shift))
    split = Split(solver_threads(n_threads), PAR_MIN_VALUES)
    empty32 = np.zeros(0, dtype=np.float32)
    X = Rows(indptr, indices, data, row_sq_norms(indptr, data), empty32, empty32, int(n_features))
    rng = rng_state(int(params.seed))
    cuts = Cuts(n * K, keep_a=linear)
    all_rows = np.arange(n, dtype=np.int64)
    draw = np.empty(pool, dtype=np.int64)
    qp_tol = tol * 1e-3  # the master's duality gap, as the binary solver's
    computed = 0
    qp_fallbacks = 0
    xi = master_dual = 0.0
    quiet = 0
    recent_hinge: list[float] = []
    iteration = 0
    converged = False
    stop_reason = StopReason.MAX_ITER
    point: dict = {}
    O_b = np.zeros((n, K))  # the linear variant's best point w_b: its scores, |w_b|^2 and expansion over pairs
    wb_sq = 0.0
    b_pairs, b_coef = np.zeros(0, dtype=np.int64), np.zeros(0)
    ones = np.ones(n)  # the rows' factors on C in the line search
    keys, wts = np.zeros(2 * n + 16), np.zeros(2 * n + 16)  # its breakpoints

    def scores_at(targets: np.ndarray, expansion: ClassExpansion) -> np.ndarray:
        out = np.zeros((targets.size, K))
        if expansion.rows.size:
            _sampled_cuts_class_expansion(X, kernel_spec, expansion, targets, 0, targets.size, out, split)
        return out

    while iteration < int(params.max_iter):
        iteration += 1
        t = cuts.t
        alpha = cuts.alpha[:t]
        w_sq = float(alpha @ cuts.H[:t, :t] @ alpha) if t else 0.0
        if linear:
            # paper 000's line search from the best point w_b toward the master's solution w_t = sum_k alpha_k (-g_k):
            # both points' scores at every row are known (w_t's from the cached A, w_b's kept), and so are
            # |w_t|^2 = alpha' H alpha, |w_b|^2 and <w_b, w_t> = sum_k alpha_k <w_b, -g_k> (from w_b's scores at the
            # cuts' pairs)
            O_t = (alpha @ cuts.A[:t]).reshape(n, K) if t else np.zeros((n, K))
            wb_wt = 0.0
            if t:
                at_pairs = cuts.e_coef * O_b.reshape(-1)[cuts.e_rows]
                wb_wt = float(alpha @ np.bincount(cuts.e_cut, weights=at_pairs, minlength=t))
            A0 = w_sq - 2.0 * wb_wt + wb_sq
            B0 = wb_wt - wb_sq
            while True:
                slope0, m = line_breakpoints(classes, ones, C, O_b, O_t, keys, wts)
                if m >= 0:
                    break
                keys, wts = np.zeros(2 * keys.size), np.zeros(2 * wts.size)
            S = B0 + slope0
            k_star = float(minimize(keys, wts, m, A0, S)) if A0 > 0.0 and S < 0.0 else 0.0
            if k_star > 0.0:  # w_b <- w_b + k (w_t - w_b): its scores, norm and expansion over pairs
                O_b += k_star * (O_t - O_b)
                wb_sq = wb_sq + 2.0 * k_star * B0 + k_star * k_star * A0
                t_pairs, t_coef = cuts.expansion()
                union = np.union1d(b_pairs, t_pairs)
                merged = np.zeros(union.size)
                merged[np.searchsorted(union, b_pairs)] += (1.0 - k_star) * b_coef
                merged[np.searchsorted(union, t_pairs)] += k_star * t_coef
                keep = merged != 0.0
                b_pairs, b_coef = union[keep], merged[keep]
            hinge_b = float(np.sum(np.maximum(0.0, 1.0 - class_margins(O_b, classes)[0]))) / n
            primal = 0.5 * wb_sq + C_paper * hinge_b
            point = {"iteration": iteration, "primal": primal, "dual": master_dual, "gap": primal - master_dual,
                     "gap_per_example": (primal - master_dual) / C_paper, "xi": xi, "cut_value": hinge_b,
                     "n_cuts": t, "step": k_star}  # fmt: skip
            if t and primal - master_dual <= C_paper * tol:  # paper 000's rule (9) in the mean hinge's units
                converged, stop_reason = True, StopReason.CONVERGED
                break
            # the new cut at w_c = (1 - lambda) w_b + lambda w_t (paper 000's (8)); at w_t if w_c has no loss row
            O_c = (1.0 - CUT_POINT) * O_b + CUT_POINT * O_t
            margins, rivals = class_margins(O_c, classes)
            violators = np.flatnonzero(margins < 1.0)
            if violators.size == 0:
                margins, rivals = class_margins(O_t, classes)
                violators = np.flatnonzero(margins < 1.0)
            frac = violators.size / n
            if violators.size <= r:  # every loss row fits in the cut: the exact cut (Algorithm 1's)
                weights = np.full(violators.size, 1.0 / n)
                pairs, coef = class_terms(violators, classes[violators], rivals[violators], weights, K)
            elif sampling == "calibrated":
                picked = systematic_rows(rng, violators, margins[violators], r)
                pairs, coef = class_terms(picked, classes[picked], rivals[picked], np.full(r, frac / r), K)
                if t:
                    own, rival = violators * K + classes[violators], violators * K + rivals[violators]
                    targets = (cuts.A[:t, own].sum(axis=1) - cuts.A[:t, rival].sum(axis=1)) / n
                    coef = calibrate(coef, np.ascontiguousarray(cuts.A[:t, pairs].T), targets)
            else:
                picked, weight = uniform_rows(rng, violators, margins, frac, r, xi + tol, draw)
                pairs, coef = class_terms(picked, classes[picked], rivals[picked], np.full(picked.size, weight), K)
            expansion = class_expansion(pairs, coef, K)
            a_block = np.zeros((n, K))
            chunk = max(1, SLICE_VALUES // max(1, expansion.rows.size))
            stopped = None
            for start in range(0, n, chunk):
                stop = min(n, start + chunk)
                _sampled_cuts_class_expansion(X, kernel_spec, expansion, all_rows, start, stop, a_block, split)
                stopped = control.check()
                if stopped is not None:
                    break
            computed += n * expansion.rows.size
            if stopped is not None:
                stop_reason = stopped
                break
            a_row = a_block.reshape(n * K)
            column = cuts.A[:t, pairs] @ coef if t else np.zeros(0)
            cuts.add(
                pairs, coef, frac, column, float(a_row[pairs] @ coef), a_row, exact=violators.size <= r
            )  # Algorithm 3, lines 5-6
            xi, master_dual, fell_back = cuts.solve_master(C_paper, qp_tol, int(params.max_inactive))
            qp_fallbacks += int(fell_back)
        else:
            _sampled_cuts_draw(rng, all_rows, n, pool, draw)
            upairs, uptr, ucut, ucoef, gamma_u = cuts.grouped_basis()
            live = gamma_u != 0.0
            basis = class_expansion(upairs[live], gamma_u[live], K)
            margins, rivals = class_margins(scores_at(draw, basis), classes[draw])
            computed += basis.rows.size * pool
            losing = np.flatnonzero(margins < 1.0)
            value = float(np.sum(1.0 - margins[losing])) / pool
            recent_hinge = (recent_hinge + [value])[-p:]
            estimate = 0.5 * w_sq + C_paper * sum(recent_hinge) / len(recent_hinge)
            point = {"iteration": iteration, "primal": estimate, "dual": master_dual, "gap": estimate - master_dual,
                     "xi": xi, "cut_value": value, "n_cuts": t}  # fmt: skip
            if value <= xi + tol:  # Algorithm 2, line 4, read as Section 6.1: p non-violated cuts in a row
                quiet += 1
                if quiet >= p:
                    converged, stop_reason = True, StopReason.CONVERGED
                    break
            else:
                quiet = 0
                at = systematic_rows(rng, losing, margins[losing], r) if losing.size > r else losing
                weight = losing.size / (pool * r) if losing.size > r else 1.0 / pool
                picked = draw[at]
                pairs, coef = class_terms(picked, classes[picked], rivals[at], np.full(at.size, weight), K)
                new = class_expansion(pairs, coef, K)
                # H_kt = sum over cut k's pairs (u, c) of beta * b_c(x_u), b the new cut's expansion (float64)
                targets = np.unique(np.concatenate((upairs // K, new.rows)))
                b_at = scores_at(targets, new)
                computed += targets.size * new.rows.size
                b_basis = b_at[np.searchsorted(targets, upairs // K), upairs % K]
                column = _entries_column(uptr, ucut, ucoef, b_basis, t) if t else np.zeros(0)
                self_dot = float(b_at[np.searchsorted(targets, pairs // K), pairs % K] @ coef)
                cuts.add(pairs, coef, losing.size / pool, column, self_dot, None)
                xi, master_dual, fell_back = cuts.solve_master(C_paper, qp_tol, int(params.max_inactive))
                qp_fallbacks += int(fell_back)
        point["basis_size"] = cuts.basis_size
        if iteration % int(trace_every) == 0:
            clock.record(point)
        reason = control.check()
        if reason is not None:
            stop_reason = reason
            break
    if converged:
        point["basis_size"] = cuts.basis_size
        clock.record(point)

    t = cuts.t
    alpha = cuts.alpha[:t]
    w_sq = float(alpha @ cuts.H[:t, :t] @ alpha) if t else 0.0
    if linear:  # the model is the best point w_b, its scores afresh from its expansion
        scores = scores_at(all_rows, class_expansion(b_pairs, b_coef, K))
        objective = 0.5 * wb_sq + C * float(np.sum(np.maximum(0.0, 1.0 - class_margins(scores, classes)[0])))
    else:
        objective = 0.5 * w_sq + C_paper * (float(np.mean(recent_hinge)) if recent_hinge else 1.0)
    pairs, gamma_pairs = (b_pairs, b_coef) if linear else cuts.expansion()
    if linear and cuts.bound_is_certified():  # the master's dual value bounds the optimum
        gap = certified_gap(
            objective, master_dual, "the master problem's dual value, its weighted cuts exact (every loss row)"
        )
    else:
        gap = {"gap_note": SAMPLED_GAP_NOTE}
    rows, position = np.unique(pairs // K, return_inverse=True)
    dual_coef = np.zeros((K, rows.size))
    np.add.at(dual_coef, (pairs % K, position), gamma_pairs)
    return SolverResult(
        w=None,
        bias=0.0,
        n_iter=iteration,
        converged=converged,
        stop_reason=stop_reason,
        objective=float(objective),
        solver_seconds=clock.solver_seconds(),
        trace_seconds=clock.trace_seconds,
        trace=tuple(control.points),
        extra={
            "support_indices": rows.astype(np.int64),
            "dual_coef": dual_coef,
            "biases": shift * dual_coef.sum(axis=1),
            "n_sv": int(rows.size),
            "n_bounded_sv": None,
            "n_cuts": t,
            "C_paper": C_paper,
            "xi": xi,
            "master_dual": master_dual,
            "objective_is_estimate": not linear,
            **gap,
            "kernel": kernel,
            "bias_feature": bias,
            "variant": variant,
            "sample_size": r,
            "pool_size": None if linear else pool,
            "kernel_values_computed": int(computed),
            "master_smo_fallbacks": qp_fallbacks,
        },
    )


def warm_up() -> None:
    """Compile this module's kernel blocks on a tiny three-class problem, both variants."""
    from types import SimpleNamespace

    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    dense = rng.normal(size=(60, 3))
    classes = np.argmax(dense, axis=1)
    matrix = sp.csr_matrix(dense)
    for variant in ("linear", "constant"):
        solve_sampled_cuts_crammer_singer(
            matrix.indptr.astype(np.int64), matrix.indices.astype(np.int32), matrix.data, classes,
            n_classes=3, n_features=3,
            params=SimpleNamespace(C=1.0, kernel={"type": "rbf", "gamma": 0.5}, variant=variant, sampling="calibrated",
                                   sample_size=20, pool_size=None, p=4, tol=0.001, max_inactive=1, max_iter=5,
                                   bias=1.0, seed=0),
        )  # fmt: skip
