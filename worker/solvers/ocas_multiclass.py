"""Crammer-Singer multi-class SVM by OCAS: paper 000's cutting planes on the multi-class hinge (libocas's msvmocas).

Problem (service convention). K classes, rows x_i with classes y_i in {0, ..., K-1}, per-row factors c_i (the
class weight of y_i), x_i augmented by a constant feature of value B (``bias=B``, regularized; None: none), one
weight vector w_k per class, W = (w_0, ..., w_{K-1}):

    min_W  F(W) = 0.5 * sum_k |w_k|^2 + C * R(W),
           R(W) = sum_i c_i * max_k (delta_ik + <w_k, x_i> - <w_{y_i}, x_i>),   delta_ik = [k != y_i],

Crammer and Singer's formulation (JMLR 2001) as LIBLINEAR's -s 4 and scikit-learn's
LinearSVC(multi_class="crammer_singer") state it; the term k = y_i is 0, so each loss is >= 0. A row is predicted
by argmax_k <w_k, x>.

Paper 000 (Franc & Sonnenburg, ICML 2008, Section 5) writes that its algorithm extends to multi-class risks
unchanged; this module is Algorithm 1 with W in place of w:

  * R is convex and piecewise linear; its subgradient at W_c, with k*_i = argmax_k (delta_ik + <w_k - w_{y_i}, x_i>)
    (k*_i = y_i when no other class is ahead), gives the cut R(W) >= sum_i c_i [k*_i != y_i] - <Z, W>,
    Z = sum_{i: k*_i != y_i} c_i x_i (e_{y_i} - e_{k*_i})^T (row y_i gets +c_i x_i, row k*_i gets -c_i x_i);
  * the reduced problem (3) over these cuts is the binary one with <Z_j, Z_k> (Frobenius) as the Gram matrix:
    ``worker.solvers.reduced_qp`` solves it unchanged, W_t = sum_j alpha_j Z_j, its dual value D_t <= F(W*);
  * Change 1 and 2, the exact line search W_b <- (1 - k*) W_b + k* W_t, k* = argmin_{k >= 0} G(k) = F((1 - k) W_b +
    k W_t): G(k) = 0.5 k^2 A0 + k B0 + const + sum_i max_m (a_im + k s_im) with A0 = |W_t - W_b|^2, B0 = <W_b, W_t -
    W_b>, a_im = C c_i (delta_im + o_im - o_iy_i) and s_im = C c_i (u_im - u_iy_i) for the outputs o = X W_b^T and
    u = X (W_t - W_b)^T. Each row's max of K lines is convex and piecewise linear in k: walked from k = 0 along its
    upper envelope, it gives at most K - 1 breakpoints, at each of which G's derivative jumps up by the slope gained.
    With every row's breakpoints, k* is found as in the binary case (``line_search.minimize``: the derivative
    A0 k + B0 + sum of slopes crosses 0);
  * Change 3: the cut at W_c = (1 - lam) W_b + lam W_t (8); outputs of W_b and W_c are the convex combinations of
    those of W_b and W_t, so each iteration makes one pass over the data for X W_t^T, and one for the new cut.

Stopping rule (9): F(W_b) - D_t <= max(tol_abs, tol_rel * F(W_b)), the certified gap (libocas's TolRel 0.01 is
msvmocas's default too). Deadline and cancel are checked between the passes; the best-so-far W_b is returned.

Cuts are dense (n_features + 1) x K matrices, as msvmocas keeps them: memory grows with the cuts held (those
inactive for ``max_inactive`` iterations are dropped). ``solve_crammer_singer`` refuses to start when the cuts'
ceiling (``memory_bytes``) cannot hold a handful of them. The passes run on one thread (the row passes' results
are bit-identical whatever the threads; the scatter of a cut is serial).

Trace point per iteration: as ocas's (iteration, elapsed_s, primal, lower_bound, gap, gap_rel, n_cuts,
n_active_cuts, step and the seconds of the phases qp_s, output_s, line_search_s, update_s, cut_s).
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
from numba import njit

from worker.solvers import line_search
from worker.solvers.common import SolverControl, SolverInputError, SolverResult, StopReason, certified_gap
from worker.solvers.cpa import QP_REL
from worker.solvers.cut_store import combine_rows, dense_dots
from worker.solvers.ocas import OCAS_GAP_NOTE, OcasSettings, trace_point
from worker.solvers.reduced_qp import ReducedProblem

MIN_CUTS_IN_MEMORY = 8
"""The fewest cuts the memory ceiling must hold for a Crammer-Singer ocas to start."""
CLASS_MAJOR_MAX_K = 4
"""Up to this many classes, a pass over the rows computes one class's outputs at a time (``_outputs``)."""


@njit(cache=True)
def _outputs(indptr, indices, data, B, W, O):
    """O[i, :] = <x_i, W> over the augmented rows (W: (n_features + 1) x K, the last row the bias feature's), each
    sum in the row's entry order. Up to ``CLASS_MAJOR_MAX_K`` classes, one sparse pass per class over a transposed
    copy of W (dna, 91,000 entries: 146 / 238 / 290 us for K = 2 / 3 / 4 against 280-300 us for the classes inside
    each entry's loop); with more classes, the classes inside (flat in K up to about 8; letter's 26 classes take a
    quarter of the time of 26 passes)."""
    n = indptr.shape[0] - 1
    K = W.shape[1]
    d = W.shape[0] - 1
    if K <= CLASS_MAJOR_MAX_K:
        W_by_class = np.ascontiguousarray(W.T)
        for k in range(K):
            w = W_by_class[k]
            start = B * w[d]
            for i in range(n):
                acc = start
                for p in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):  # (unsigned: kernels.gather_dot)
                    acc += data[p] * w[np.uint64(indices[p])]
                O[i, k] = acc
        return
    for i in range(n):
        o = O[i]
        for k in range(K):
            o[k] = B * W[d, k]
        for p in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
            v = data[p]
            row = W[np.uint64(indices[p])]
            for k in range(K):
                o[k] += v * row[k]


@njit(cache=True)
def _risk(yc, cost, O):
    """R at outputs O: sum_i c_i max_k (delta_ik + o_ik - o_iy_i)."""
    total = 0.0
    K = O.shape[1]
    for i in range(O.shape[0]):
        yi = yc[i]
        base = O[i, yi]
        top = 0.0
        for k in range(K):
            if k != yi:
                v = 1.0 + O[i, k] - base
                if v > top:
                    top = v
        total += cost[i] * top
    return total


@njit(cache=True)
def line_breakpoints(yc, cost, C, O_b, O_t, keys, wts):
    """Each row's upper envelope of its K lines a_m + k s_m over k >= 0 (module docstring): the right derivative of
    the risk term at 0 and the breakpoints (key, slope gained) in keys/wts; returns (slope at 0, count), count -1
    when keys is too short."""
    n, K = O_b.shape
    slope0 = 0.0
    m = 0
    capacity = keys.shape[0]
    a = np.empty(K)
    s = np.empty(K)
    for i in range(n):
        yi = yc[i]
        ci = C * cost[i]
        ob_y = O_b[i, yi]
        u_y = O_t[i, yi] - ob_y
        cur = -1
        for k in range(K):
            a[k] = ci * ((0.0 if k == yi else 1.0) + O_b[i, k] - ob_y)
            s[k] = ci * ((O_t[i, k] - O_b[i, k]) - u_y)
            if cur < 0 or a[k] > a[cur] or (a[k] == a[cur] and s[k] > s[cur]):
                cur = k
        slope0 += s[cur]
        k_at = 0.0
        while True:
            nxt = -1
            best = np.inf
            for k in range(K):
                if s[k] > s[cur]:
                    kk = (a[cur] - a[k]) / (s[k] - s[cur])
                    if kk < k_at:
                        kk = k_at
                    if kk < best or (kk == best and s[k] > s[nxt]):
                        best = kk
                        nxt = k
            if nxt < 0:
                break
            if m >= capacity:
                return slope0, -1
            keys[m] = best
            wts[m] = s[nxt] - s[cur]
            m += 1
            cur = nxt
            k_at = best
    return slope0, m


@njit(cache=True)
def _update(yc, cost, O_b, O_t, k_step, lam, violator):
    """O_b <- (1 - k) O_b + k O_t; the cut's class k*_i at O_c = (1 - lam) O_b + lam O_t in violator[i] (-1: none);
    returns (R at the new O_b, the cut's offset sum_i c_i [k*_i != y_i])."""
    n, K = O_b.shape
    risk = 0.0
    offset = 0.0
    for i in range(n):
        yi = yc[i]
        for k in range(K):
            O_b[i, k] = (1.0 - k_step) * O_b[i, k] + k_step * O_t[i, k]
        base_b = O_b[i, yi]
        base_c = (1.0 - lam) * base_b + lam * O_t[i, yi]
        top_b = 0.0
        top_c = 0.0
        arg_c = -1
        for k in range(K):
            if k != yi:
                vb = 1.0 + O_b[i, k] - base_b
                if vb > top_b:
                    top_b = vb
                vc = 1.0 + (1.0 - lam) * O_b[i, k] + lam * O_t[i, k] - base_c
                if vc > top_c:
                    top_c = vc
                    arg_c = k
        risk += cost[i] * top_b
        violator[i] = arg_c
        if arg_c >= 0:
            offset += cost[i]
    return risk, offset


@njit(cache=True)
def _cut(indptr, indices, data, B, yc, cost, violator, Z):
    """Z = sum over violators of c_i x_i (e_{y_i} - e_{k*_i}) (augmented rows), written over Z."""
    Z[:] = 0.0
    d = Z.shape[0] - 1
    for i in range(indptr.shape[0] - 1):
        k = violator[i]
        if k < 0:
            continue
        yi = yc[i]
        c = cost[i]
        for p in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
            v = c * data[p]
            f = np.uint64(indices[p])
            Z[f, yi] += v
            Z[f, k] -= v
        Z[d, yi] += c * B
        Z[d, k] -= c * B


class ClassCuts:
    """The cuts (dense (n_features + 1) x K matrices, in a table that grows by doubling), the reduced problem over
    them and its solution W_t: what the driver of a Crammer-Singer ocas holds (here, and split over nodes in
    ``distributed_ocas_multiclass``)."""

    def __init__(self, C: float, D: int, K: int, max_inactive: int) -> None:
        self.rp = ReducedProblem(C)
        self.cuts = np.zeros((16, D, K))
        self.free = list(range(16))
        self.W_t = np.zeros((D, K))
        self.whole, self.zero = np.array([0, D * K], dtype=np.int64), np.zeros(D * K)  # W_t in one chunk, from zero
        self.max_inactive = int(max_inactive)

    def add(self, write, offset: float) -> None:
        """Algorithm 1, line 5: a new cut, written by ``write(Z)`` into its slot, with its offset; the cuts inactive
        for ``max_inactive`` iterations dropped."""
        D, K = self.W_t.shape
        if len(self.free) == 0:
            grown = np.zeros((2 * self.cuts.shape[0], D, K))
            grown[: self.cuts.shape[0]] = self.cuts
            self.free = list(range(self.cuts.shape[0], grown.shape[0]))
            self.cuts = grown
        slot = self.free.pop()
        Z = self.cuts[slot]
        write(Z)
        held = self.rp.slot[: self.rp.t]
        table = self.cuts.reshape(self.cuts.shape[0], D * K)  # the cuts as flat rows, read in place
        h_row = np.empty(held.size)
        dense_dots(table, held, np.int64(0), held.size, slot, h_row)
        self.rp.add_cut(h_row, float(np.vdot(Z, Z)), offset, slot)
        for dropped in self.rp.drop_inactive(self.max_inactive):
            self.free.append(int(dropped))

    def solve(self, F_b: float, lower: float) -> float:
        """Algorithm 1, line 3: the reduced problem solved to a precision relative to the gap, W_t its solution;
        returns the lower bound (the best dual value so far)."""
        rp = self.rp
        qp_tol = max(QP_REL * max(F_b - lower, 0.0), 1e-13 * max(1.0, F_b))
        dual, _, _ = rp.solve(qp_tol)
        D, K = self.W_t.shape
        table = self.cuts.reshape(self.cuts.shape[0], D * K)
        combine_rows(table, rp.slot, rp.alpha, rp.t, self.whole, self.zero, self.W_t.reshape(-1), True)
        return max(lower, dual)


def crammer_singer_result(W_b, B: float, cuts: ClassCuts, lower: float, outcome: dict, extra: dict) -> SolverResult:
    """A Crammer-Singer solve's result: ``w`` (K, n_features), ``extra["biases"]`` the K offsets, the certified gap
    of ``outcome["objective"]`` against ``lower``; ``outcome``: n_iter, converged, stop_reason, objective,
    solver_seconds, trace_seconds, trace; ``extra``: what the solve adds (its seconds, its data's form)."""
    D = W_b.shape[0]
    objective = outcome["objective"]
    return SolverResult(
        w=np.ascontiguousarray(W_b[: D - 1].T),
        bias=0.0,
        **outcome,
        extra={
            **certified_gap(objective, lower, OCAS_GAP_NOTE),
            "biases": B * W_b[D - 1].copy(),
            "n_cuts": cuts.rp.t,
            "qp_steps": cuts.rp.total_steps,
            "threads": 1,
            "cut_form": "dense",
            **extra,
        },
    )


def starting_weights(w0, n_classes: int, n_features: int, B: float) -> np.ndarray:
    """W_b, (n_features + 1) x K, from ``w0``: (K, n_features), or (K, n_features + 1) with the bias terms last
    (None: zeros)."""
    K, D = int(n_classes), int(n_features) + 1
    W_b = np.zeros((D, K))
    if w0 is None:
        return W_b
    start = np.asarray(w0, dtype=np.float64)
    if start.ndim != 2 or start.shape[0] != K or start.shape[1] not in (D - 1, D) or not np.all(np.isfinite(start)):
        raise SolverInputError(f"w0 must be a finite ({K}, {D - 1}) or ({K}, {D}) matrix, got {start.shape}")
    W_b[: D - 1] = start[:, : D - 1].T
    if start.shape[1] == D and np.any(start[:, -1]):
        if B == 0.0:
            raise SolverInputError("w0 has bias terms but bias is None")
        W_b[D - 1] = start[:, -1] / B
    return W_b


def solve_crammer_singer(
    indptr,
    indices,
    data,
    y,
    *,
    n_classes,
    n_features,
    params: OcasSettings,
    class_cost=None,
    control=None,
    w0=None,
    memory_bytes: int | None = None,
) -> SolverResult:
    """Train a Crammer-Singer multi-class SVM by OCAS (module docstring).

    ``y``: class indices 0..n_classes-1; ``class_cost``: a factor on C per class (None: 1); ``w0``: weights to start
    from, (n_classes, n_features) or (n_classes, n_features + 1) with the bias terms last. The result's ``w`` is the
    (n_classes, n_features) weight matrix and ``extra["biases"]`` the n_classes offsets (B times the bias feature's
    weights), so that class k scores <w_k, x> + biases[k]; ``bias`` is 0.
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    data = np.asarray(data, dtype=np.float64)
    n = indptr.size - 1
    K = int(n_classes)
    yc = np.asarray(y, dtype=np.int64)
    if K < 2:
        raise SolverInputError(f"a Crammer-Singer model needs at least 2 classes, got {K}")
    if yc.shape != (n,) or n < 1 or yc.min() < 0 or yc.max() >= K:
        raise SolverInputError(f"y must hold a class in 0..{K - 1} for each of the {n} rows")
    costs = np.ones(K) if class_cost is None else np.asarray(class_cost, dtype=np.float64)
    if costs.shape != (K,) or not np.all(costs > 0):
        raise SolverInputError(f"class_cost must hold {K} positive factors")
    C, lam = float(params.C), float(params.lam)
    B = 0.0 if params.bias is None else float(params.bias)
    tol_rel = 0.0 if params.tol_rel is None else float(params.tol_rel)
    tol_abs = float(params.tol_abs)
    D = int(n_features) + 1
    cut_bytes = D * K * 8
    if memory_bytes is not None and MIN_CUTS_IN_MEMORY * cut_bytes > memory_bytes:
        raise SolverInputError(
            f"a Crammer-Singer cut is a dense {D} x {K} matrix ({cut_bytes / 2**20:.1f} MiB): {MIN_CUTS_IN_MEMORY} of "
            f"them do not fit the {memory_bytes / 2**20:.0f} MiB the job may use; use multiclass ovr, or fewer features"
        )
    W_b = starting_weights(w0, K, D - 1, B)
    control = control if control is not None else SolverControl()
    cost = costs[yc]
    return _loop(indptr, indices, data, B, yc, cost, C, tol_rel, tol_abs, lam, params, W_b, control, memory_bytes)


def _loop(indptr, indices, data, B, yc, cost, C, tol_rel, tol_abs, lam, params, W_b, control, memory_bytes):
    """Algorithm 1 of paper 000 on the multi-class risk (module docstring)."""
    start = time.perf_counter()
    n = yc.size
    D, K = W_b.shape
    O_b = np.zeros((n, K))
    O_t = np.zeros((n, K))
    violator = np.zeros(n, dtype=np.int64)
    keys = np.zeros(2 * n + 16)
    wts = np.zeros(2 * n + 16)
    if np.any(W_b):
        _outputs(indptr, indices, data, B, W_b, O_b)
    F_b = 0.5 * float(np.vdot(W_b, W_b)) + C * _risk(yc, cost, O_b)
    cuts = ClassCuts(C, D, K, int(params.max_inactive))
    rp, W_t = cuts.rp, cuts.W_t
    lower = 0.0
    converged = False
    stop_reason = StopReason.MAX_ITER
    totals = {key: 0.0 for key in ("qp", "output", "line_search", "update", "cut")}
    points: list[dict] = []
    trace_time = 0.0
    n_iter = 0
    k_star = 0.0
    # the first cut, at W_b (no W_t yet: W_c = W_b)
    _, offset = _update(yc, cost, O_b, O_b.copy(), 0.0, 0.0, violator)
    pending = offset
    for it in range(int(params.max_iter)):
        n_iter = it + 1
        t0 = time.perf_counter()
        # Algorithm 1, line 5 (the cut of the previous iteration) and line 3 (the reduced problem)
        cuts.add(lambda Z: _cut(indptr, indices, data, B, yc, cost, violator, Z), pending)
        t1 = time.perf_counter()
        lower = cuts.solve(F_b, lower)
        t2 = time.perf_counter()
        _outputs(indptr, indices, data, B, W_t, O_t)
        stopped = control.check()
        if stopped is not None:
            stop_reason = stopped
            totals["cut"] += t1 - t0
            totals["qp"] += t2 - t1
            break
        t3 = time.perf_counter()
        # Algorithm 1, line 4: the exact line search between W_b and W_t (module docstring)
        diff = W_t - W_b
        A0 = float(np.vdot(diff, diff))
        B0 = float(np.vdot(W_b, diff))
        while True:
            slope0, m = line_breakpoints(yc, cost, C, O_b, O_t, keys, wts)
            if m >= 0:
                break
            keys = np.zeros(2 * keys.size)
            wts = np.zeros(2 * wts.size)
        S = B0 + slope0
        k_star = float(line_search.minimize(keys, wts, m, A0, S)) if A0 > 0.0 and S < 0.0 else 0.0
        t4 = time.perf_counter()
        W_b += k_star * diff
        risk, pending = _update(yc, cost, O_b, O_t, k_star, lam, violator)
        F_b = 0.5 * float(np.vdot(W_b, W_b)) + C * risk
        gap = F_b - lower
        converged = gap <= max(tol_abs, tol_rel * F_b)
        t5 = time.perf_counter()
        step = {"qp": t2 - t1, "output": t3 - t2, "line_search": t4 - t3, "update": t5 - t4, "cut": t1 - t0}
        for key, value in step.items():
            totals[key] += value
        r0 = time.perf_counter()
        control.record(trace_point(n_iter, r0 - start - trace_time, F_b, lower, rp, k_star, step))
        points.append(control.points[-1])
        trace_time += time.perf_counter() - r0
        if converged:
            stop_reason = StopReason.CONVERGED
            break
        stopped = control.check()
        if stopped is not None:
            stop_reason = stopped
            break
    objective = F_b
    if stop_reason not in (StopReason.CANCELED, StopReason.DEADLINE):
        _outputs(indptr, indices, data, B, W_b, O_t)  # fresh outputs, not the running convex combinations
        objective = 0.5 * float(np.vdot(W_b, W_b)) + C * _risk(yc, cost, O_t)
    outcome = {
        "n_iter": n_iter,
        "converged": converged,
        "stop_reason": stop_reason,
        "objective": objective,
        "solver_seconds": time.perf_counter() - start - trace_time,
        "trace_seconds": trace_time,
        "trace": tuple(points),
    }
    return crammer_singer_result(W_b, B, cuts, lower, outcome, {"seconds": totals})


def cut_memory_bytes(n_features: int, n_classes: int) -> int:
    """The bytes of one Crammer-Singer cut: a dense (n_features + 1) x n_classes matrix of float64."""
    return (int(n_features) + 1) * int(n_classes) * 8


def warm_up() -> None:
    """Compile the kernels of this module on a tiny problem."""
    settings = SimpleNamespace(C=1.0, bias=1.0, tol_rel=0.01, tol_abs=0.0, lam=0.1, max_iter=5, max_inactive=50)
    indptr = np.array([0, 2, 3, 5, 6])
    indices = np.array([0, 1, 1, 0, 1, 0])
    data = np.array([1.0, -1.0, 2.0, 0.5, 1.0, -1.5])
    solve_crammer_singer(indptr, indices, data, np.array([0, 1, 2, 1]), n_classes=3, n_features=2, params=settings)
