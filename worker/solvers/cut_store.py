"""Where the cutting-plane solvers keep their cuts, in one of two forms chosen by the shape of the data.

A cut of the hinge risk is  R(w) >= b - <z, w>  with  z = sum_i gamma_i x_i  (x_i augmented by the
bias feature of value B; gamma_i = y_i [row i is in the cut] for classification, c+_i - c-_i for the
pairwise objectives of paper 001). The reduced problem (``reduced_qp``) needs the Gram matrix of the
cuts, H_jk = <z_j, z_k>, and the solvers need the outputs o_i = <x_i, w_t> of w_t = sum_k alpha_k z_k.
Two ways to provide them, with the same answers and different costs per iteration (t cuts, t_a of them
active, n rows, d features, one pass = the non-zeros of the data):

* ``DenseCuts`` keeps every z_k as a dense vector of d + 1 numbers. New Gram row: t dot products of
  length d; outputs of w_t: the combination sum_k alpha_k z_k (t_a * d) and one gather pass.
  Memory t * d. What libocas and SVMperf do (their cuts are sparse vectors, which at the densities
  where this form is chosen are as long as dense ones).
* ``OutputCuts`` keeps every cut as its row coefficients gamma (n small integers) and its outputs
  X z_k (n numbers), never as a vector over the features. New Gram row: H_tk = <z_t, z_k> =
  sum_i gamma_ti <x_i, z_k> = sum over the cut's rows of gamma_ti (X z_k)_i, so t sums over the new
  cut's rows; the new cut's own outputs cost one gather pass; outputs of w_t: sum_k alpha_k X z_k
  (t_a * n), no pass at all.
  No cost grows with d x t: this is the form for data with more features than rows (text, hashed
  features), where dense cuts made OCAS and CPA spend most of their time on the reduced problem.

The new cut's outputs X z_t are the one pass over the data per iteration that ``OutputCuts`` makes.
A cut of a late iteration sums few rows, and only the columns of its non-zero features contribute:
``Data.cut_outputs`` reads those columns from a copy of the data by columns when that reads fewer
entries (about half on sector.scale), with the row-wise sums bit for bit; the copy is built only on
runs long enough to repay it (see there). Data with at most 65,536 features is read through a 16-bit
copy of its indices (``prepare_data``): the passes are bound by memory, not arithmetic.

``choose`` picks ``OutputCuts`` when n <= d + 1 (the costs above: n (t + t_a) against d (t + t_a)).

OCAS also needs its best-so-far point w_b (paper 000, Change 1). ``DenseCuts`` keeps it as a dense
vector. ``OutputCuts`` keeps it implicitly, as w_b = s0 w0 + X^T (rho + sum_k beta_k gamma_k): the
coefficients beta_k of every cut, u_k = <w_b, z_k>, |w_b|^2, and in rho the coefficients of cuts
already dropped from the working set; every update is O(t) or O(n), and w_b is built as a vector
over the features once, at the end (one scatter pass).

Both forms build each new cut's vector incrementally (``CurrentCut``): from the previous cut, by the
rows whose coefficient changed, so that a cut costs the non-zeros of the rows that flipped rather than
of all its rows.

The cut data live in slots; the reduced problem remembers each cut's slot and hands back the slots
of the cuts it drops. The stored cuts may use a quarter of the data's own bytes (``cut_budget``, at
least 32 cuts): at 2,000,000 rows x 10^6 features a dense cut is 8 MB, so past the budget the cuts with
alpha = 0 go first (this never lowers the lower bound), and the store grows only when every cut is
active.

Out of core (``streamed_data``) the memory may hold fewer dense cuts than OCAS keeps active (2·10^6 rows x 10^6
features under 1.6 GB: 77 of 8 MB, where 169 are active at the end). There, below ROUNDED_BELOW cuts, OCAS's
cuts are stored as float32, twice as many, and each stays a valid cut of what is stored: with z the cut's vector
and z' its rounding, R(w) >= b - <z, w> = b - <z', w> - <z - z', w> >= (b - |z - z'| U) - <z', w> for every w
with |w| <= U, and U = sqrt(2 C R(0)) bounds |w*| (0.5 |w*|^2 <= F(w*) <= F(0) = C R(0)). So the cut enters the
reduced problem as z' with its offset lowered by |z - z'| U (about 1e-7 of b here), its Gram entries summed from
the stored values in float64, and the lower bound D_t <= F_t(w*) <= F(w*) holds: the gap stays certified. The
iterates are then not those of the float64 solve (an aggregate is rounded too, with its own offset).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from worker.solvers.cut_data import (
    CurrentCut,
    CutData,
    FeatureSpace,
    RowData,
    _changed_rows,
    _listed_changes,
    _Slots,
    cut_budget,
)
from worker.solvers.reduced_qp import ReducedProblem
from worker.solvers.streamed_data import StreamedData

# ---------------------------------------------------------------------------------------------
# kernels
# ---------------------------------------------------------------------------------------------


ROUNDED_BELOW = 256
"""Out of core, OCAS's dense cuts are stored as float32 when the job's memory holds fewer than this many in float64."""
DENSE_BLOCK = 4096
"""Features per block of the dense kernels: a block of the new cut (or of w) stays in cache while every
stored cut's block streams past it, so a Gram row or a combination reads each stored cut once."""


@njit(cache=True)
def dense_dots(Z, slots, k0, k1, new, out):
    """out[k] = <Z[slots[k]], Z[new]> for k in [k0, k1), blockwise over the features, summed in float64."""
    d = Z.shape[1]
    for k in range(k0, k1):
        out[k] = 0.0
    for f0 in range(0, d, DENSE_BLOCK):
        f1 = min(f0 + DENSE_BLOCK, d)
        for k in range(k0, k1):
            s = slots[k]
            acc = 0.0
            for f in range(f0, f1):
                acc += np.float64(Z[s, f]) * np.float64(Z[new, f])  # float32 cuts: exact products
            out[k] += acc


@njit(cache=True, parallel=True)
def _dense_gram_row(Z, slots, t, new, out, n_parts):
    """out[k] = <Z[slots[k]], Z[new]> for k < t; the cuts split into n_parts groups (1: serial)."""
    if n_parts <= 1:
        dense_dots(Z, slots, np.int64(0), t, new, out)
    else:
        for p in prange(n_parts):
            dense_dots(Z, slots, t * p // n_parts, t * (p + 1) // n_parts, new, out)


@njit(cache=True)
def _sel_dot(outs, s, gamma, rows, n_rows):
    acc = 0.0
    for q in range(n_rows):
        i = rows[q]
        acc += gamma[i] * outs[s, i]
    return acc


@njit(cache=True, parallel=True)
def _output_gram_row(outs, slots, t, gamma, rows, n_rows, out, serial):
    """out[k] = sum_q gamma[rows[q]] * outs[slots[k], rows[q]] for k < t (= <z_new, z_k>)."""
    if serial:
        for k in range(t):
            out[k] = _sel_dot(outs, slots[k], gamma, rows, n_rows)
    else:
        for k in prange(t):
            out[k] = _sel_dot(outs, slots[k], gamma, rows, n_rows)


@njit(cache=True)
def _dot_rows(gamma, rows, n_rows, v):
    """sum_q gamma[rows[q]] * v[rows[q]]."""
    acc = 0.0
    for q in range(n_rows):
        i = rows[q]
        acc += gamma[i] * v[i]
    return acc


@njit(cache=True)
def _combine_chunk(table, slots, weights, t, i0, i1, base, c):
    # through 1-d views of the chunk: the inner loop then compiles to vector instructions (indexed as
    # table[s, i] and c[i] it did not, and ran 2-3x slower); same operations in the same order
    cc = c[i0:i1]
    cc[:] = base[i0:i1]
    m = i1 - i0
    for k in range(t):
        a = weights[k]
        if a != 0.0:
            row = table[slots[k], i0:i1]
            for i in range(m):
                cc[i] += a * row[i]


@njit(cache=True, parallel=True)
def combine_rows(table, slots, weights, t, chunks, base, c, serial):
    """c[i] = base[i] + sum_k weights[k] table[slots[k], i] (weights 0 skipped; k in order), by row chunks.

    With ``table`` the cuts' outputs this gives the outputs of w = sum_k weights_k z_k; with the
    cuts' row coefficients, the row coefficients of w; with dense cuts and feature parts, w itself."""
    if serial:
        for ch in range(chunks.shape[0] - 1):
            _combine_chunk(table, slots, weights, t, chunks[ch], chunks[ch + 1], base, c)
    else:
        for ch in prange(chunks.shape[0] - 1):
            _combine_chunk(table, slots, weights, t, chunks[ch], chunks[ch + 1], base, c)


# ---------------------------------------------------------------------------------------------
# dense cuts
# ---------------------------------------------------------------------------------------------


class DenseCuts:
    """Cuts as dense vectors over the d + 1 weights; w_t and w_b as dense vectors too.

    ``risk_at_zero`` (OCAS: R(0) = n) allows the cuts to be stored as float32 out of core, when the memory holds
    fewer than ROUNDED_BELOW of them in float64 (module docstring: twice as many, each still a valid cut)."""

    kind = "dense"

    def __init__(self, X: CutData, C: float, capacity: int = 32, risk_at_zero: float | None = None) -> None:
        self.X = X
        self.rp = ReducedProblem(C)
        self.d1 = X.d + 1
        self.budget = cut_budget(X, 8 * self.d1)
        self.bounded = X.kind == "streamed"
        """Out of core: one array for every cut the job's memory holds, allocated untouched (its pages are the
        kernel's zero page until a cut is written there), so that the store never grows by a copy (which holds
        the old and the new array at once: half the cuts); the memory counted against the job is that of the
        slots written so far (``touched``). Past it, two cuts are aggregated into one."""
        self.rounded = False
        """Whether the cuts are stored as float32 (out of core, memory for few cuts; module docstring)."""
        self.norm_bound = 0.0
        """A bound on |w*| (sqrt(2 C R(0)), as 0.5 |w*|^2 <= F(w*) <= F(0)), by which rounded cuts are lowered."""
        dtype: type[np.floating] = np.float64
        if self.bounded:
            capacity = max(2, X.cut_memory // (8 * self.d1))
            if risk_at_zero is not None and capacity < ROUNDED_BELOW:
                self.rounded, dtype = True, np.float32
                self.norm_bound = math.sqrt(2.0 * C * float(risk_at_zero))
                capacity = max(2, X.cut_memory // (4 * self.d1))
            self.slots = _Slots(capacity, capacity)
        else:
            self.slots = _Slots(capacity, self.budget)
            X.make_room(self.slots.capacity * 8 * self.d1)
        self.cut_bytes = np.dtype(dtype).itemsize * self.d1
        self.Z = np.zeros((self.slots.capacity, self.d1), dtype=dtype)
        self.touched = 0
        self.w_t = np.zeros(self.d1)
        self.w_b = np.zeros(self.d1)
        self.best = np.zeros(self.d1)
        self._row = np.zeros(capacity)
        self._parts = max(1, X.n_threads)  # fill() runs serially for one part
        self._fparts = np.append(np.arange(0, self.d1, DENSE_BLOCK), self.d1).astype(np.int64)  # feature blocks
        self._zero_d = np.zeros(self.d1)
        self.current = None if isinstance(X, FeatureSpace) else CurrentCut(X)  # split: cuts summed by the nodes
        self.aggregated = 0

    # -- cuts --------------------------------------------------------------------------------------

    def add_cut(self, gamma, rows, n_rows, gsum, b, o_b=None, prepared=False) -> None:
        """Add the cut z = sum_q gamma[rows[q]] x_rows[q] (bias entry B * gsum), offset b.

        ``prepared``: ``prepare_cut`` was called with these coefficients, ``self.current.z`` is the cut."""
        assert self.current is not None, "rows here"
        self.add_vector(self.current.z if prepared else self.current.update(gamma, rows, n_rows, gsum), b)

    def add_vector(self, vector: np.ndarray, b: float) -> None:
        """Add the cut whose vector z (d + 1 entries, the last the bias feature's) is given, offset b: a cut summed
        elsewhere (over the nodes of a split training, ``worker.solvers.distributed_ocas``)."""
        if self.rp.t >= self.budget:
            self.drop_inactive(0)
        if self.bounded and not self.slots.free:
            self._aggregate_smallest()  # no memory for one more cut: two become one
        slot, grew = self.slots.take()
        if self.bounded and slot >= self.touched:
            self.touched = slot + 1
            self.X.make_room(self.touched * self.cut_bytes)
        if grew:
            self.X.make_room((self.Z.shape[0] + self.slots.capacity) * 8 * self.d1)  # both, while copied
            Z = np.zeros((self.slots.capacity, self.d1))
            Z[: self.Z.shape[0]] = self.Z
            self.Z = Z
            self.X.make_room(self.Z.nbytes)
        X = self.X
        z = self.Z[slot]
        z[:] = vector
        if self.rounded:  # a valid cut for the stored vector: b lowered by |z - stored| |w*| (module docstring)
            b -= self.norm_bound * float(np.linalg.norm(vector - z))
        t = self.rp.t
        if self._row.shape[0] < t + 1:
            self._row = np.zeros(2 * (t + 1))
        _dense_gram_row(self.Z, self.rp.slot, t, slot, self._row, 1 if X.serial else X.n_threads)
        stored = z.astype(np.float64) if self.rounded else z
        self.rp.add_cut(self._row, float(stored @ stored), b, slot)

    def drop_inactive(self, max_inactive: int) -> int:
        """Drop the cuts inactive for more than max_inactive solves; free their slots."""
        dropped = self.rp.drop_inactive(max_inactive)
        for slot in dropped:
            self.slots.give(slot)
        return len(dropped)

    def _aggregate_smallest(self) -> None:
        """Replace the two cuts with the smallest alpha by their aggregate (``ReducedProblem.aggregate``): w_t, w_b
        and the lower bound unchanged, one slot freed. Out of core only, when the cuts have taken back every
        pinned row and the memory holds no more of them."""
        rp = self.rp
        order = np.argsort(rp.alpha[: rp.t], kind="stable")
        i, j = (int(k) for k in sorted(order[:2]))
        slot_i = int(rp.slot[i])
        wi, wj, freed = rp.aggregate(i, j)
        if self.rounded:  # the aggregate in float64, stored rounded: its Gram row and offset for what is stored
            aggregate = wi * self.Z[slot_i].astype(np.float64) + wj * self.Z[freed]
            self.Z[slot_i] = aggregate
            _dense_gram_row(self.Z, rp.slot, rp.t, slot_i, self._row, 1 if self.X.serial else self.X.n_threads)
            slack = self.norm_bound * float(np.linalg.norm(aggregate - self.Z[slot_i]))
            rp.replace(i, self._row, float(rp.b[i]) - slack)  # i < j: still at i
        else:
            self.Z[slot_i] *= wi
            self.Z[slot_i] += wj * self.Z[freed]
        self.slots.give(freed)
        self.aggregated += 1

    # -- w_t ---------------------------------------------------------------------------------------

    def update_wt(self) -> np.ndarray:
        """w_t = sum_k alpha_k z_k (after a solve of the reduced problem); returns it."""
        rp = self.rp
        combine_rows(self.Z, rp.slot, rp.alpha, rp.t, self._fparts, self._zero_d, self.w_t, self.X.serial)
        return self.w_t

    def outputs_of_wt(self, o_t: np.ndarray, guess=None) -> None:
        """w_t = sum_k alpha_k z_k, and o_t = X_aug w_t. ``guess``: (y, o_b, k, lam) of an OCAS iteration, whose next
        cut is then guessed in the same pass when the data are streamed (``CurrentCut.guess``)."""
        assert not isinstance(self.X, FeatureSpace), "rows here"
        w_t = self.update_wt()
        if guess is not None and self.current is not None and isinstance(self.X, StreamedData) and CurrentCut.GUESS:
            self.X.outputs(w_t, o_t, self.current.guess(*guess))
        else:
            self.X.outputs(w_t, o_t)

    def prepare_cut(self, gamma, changed, n_changed, gsum) -> np.ndarray:
        """The vector z of the cut with coefficients gamma (as ``add_cut`` would store it), without
        storing it, for gamma that differs from the last cut's coefficients at most at the rows
        changed[:n_changed]; ``add_cut(..., prepared=True)`` then stores this vector."""
        assert self.current is not None, "rows here"
        return self.current.update_changed(gamma, changed, n_changed, gsum)

    def sq_norm_t(self) -> float:
        """|w_t|^2."""
        return float(self.w_t @ self.w_t)

    # -- OCAS's best-so-far point ------------------------------------------------------------------

    def start_best(self, w0: np.ndarray) -> float:
        """w_b = w0; returns |w_b|^2."""
        self.w_b[:] = w0
        return float(w0 @ w0)

    def line_terms(self) -> tuple[float, float]:
        """(A0, B0) = (|w_t - w_b|^2, <w_b, w_t - w_b>)."""
        diff = self.w_t - self.w_b
        return float(diff @ diff), float(self.w_b @ diff)

    def move_best(self, k: float) -> float:
        """w_b <- (1 - k) w_b + k w_t; returns |w_b|^2."""
        if k != 0.0:
            self.w_b *= 1.0 - k
            self.w_b += k * self.w_t
        return float(self.w_b @ self.w_b)

    def best_outputs(self, out: np.ndarray) -> bool:
        """Outputs of w_b without a pass over the data: not kept in this form (returns False)."""
        return False

    def best_weights(self) -> np.ndarray:
        """w_b as a dense vector (d + 1 entries)."""
        return self.w_b.copy()

    # -- CPA's best iterate ------------------------------------------------------------------------

    def keep_t(self) -> None:
        """Remember the current w_t as the best iterate."""
        self.best[:] = self.w_t

    def kept_weights(self) -> np.ndarray:
        """The remembered iterate as a dense vector (d + 1 entries)."""
        return self.best.copy()


# ---------------------------------------------------------------------------------------------
# cuts as row coefficients and outputs
# ---------------------------------------------------------------------------------------------


class OutputCuts:
    """Cuts as their row coefficients gamma and their outputs X_aug z; w_b implicit (module docstring)."""

    kind = "outputs"

    def __init__(self, X: RowData, C: float, coef_dtype=np.int8, capacity: int = 32) -> None:
        self.X = X
        self.rp = ReducedProblem(C)
        self.coef_dtype = np.dtype(coef_dtype)
        n = X.n
        self.budget = cut_budget(X, n * (8 + self.coef_dtype.itemsize))
        self.slots = _Slots(capacity, self.budget)
        capacity = self.slots.capacity
        self._cut_bytes = n * (8 + self.coef_dtype.itemsize)
        X.make_room(capacity * self._cut_bytes)
        self.outs = np.zeros((capacity, n))
        self.coefs = np.zeros((capacity, n), dtype=self.coef_dtype)
        self.current = CurrentCut(X)
        self._row = np.zeros(capacity)
        self._parts = max(1, X.n_threads)  # fill() runs serially for one part
        # OCAS's best-so-far point: w_b = s0 w0 + X^T (rho + sum_k beta[slot_k] gamma_k)
        self.beta = np.zeros(capacity)
        self.u = np.zeros(capacity)
        self.rho = np.zeros(0)
        self.s0 = 1.0
        self.w0: np.ndarray | None = None
        self.sq_b = 0.0
        self._best_coef = np.zeros(n)
        self._zero_n = np.zeros(n)

    def _grow(self) -> None:
        cap = self.slots.capacity
        old = self.outs.shape[0]
        self.X.make_room((old + cap) * self._cut_bytes)  # both, while copied
        outs = np.zeros((cap, self.X.n))
        outs[:old] = self.outs
        coefs = np.zeros((cap, self.X.n), dtype=self.coef_dtype)
        coefs[:old] = self.coefs
        beta = np.zeros(cap)
        beta[:old] = self.beta
        u = np.zeros(cap)
        u[:old] = self.u
        self.outs, self.coefs, self.beta, self.u = outs, coefs, beta, u
        self.X.make_room(cap * self._cut_bytes)

    # -- cuts --------------------------------------------------------------------------------------

    def add_cut(self, gamma, rows, n_rows, gsum, b, o_b=None) -> None:
        """Add the cut z = sum_q gamma[rows[q]] x_rows[q] (bias entry B * gsum), offset b.

        ``o_b`` (OCAS): the outputs of w_b, for u_new = <w_b, z_new>.
        """
        if self.rp.t >= self.budget:
            self.drop_inactive(0)
        slot, grew = self.slots.take()
        if grew:
            self._grow()
        X = self.X
        X.cut_outputs(self.current.update(gamma, rows, n_rows, gsum), self.outs[slot])
        self.coefs[slot] = gamma
        t = self.rp.t
        if self._row.shape[0] < t + 1:
            self._row = np.zeros(2 * (t + 1))
        _output_gram_row(self.outs, self.rp.slot, t, gamma, rows, n_rows, self._row, X.serial)
        h_self = _dot_rows(gamma, rows, n_rows, self.outs[slot])
        self.rp.add_cut(self._row, h_self, b, slot)
        self.beta[slot] = 0.0
        self.u[slot] = _dot_rows(gamma, rows, n_rows, o_b) if o_b is not None else 0.0

    def drop_inactive(self, max_inactive: int) -> int:
        """Drop the cuts inactive for more than max_inactive solves; fold their share of w_b into rho."""
        dropped = self.rp.drop_inactive(max_inactive)
        for slot in dropped:
            if self.beta[slot] != 0.0:
                if self.rho.shape[0] == 0:
                    self.rho = np.zeros(self.X.n)
                self.rho += self.beta[slot] * self.coefs[slot]
                self.beta[slot] = 0.0
            self.slots.give(slot)
        return len(dropped)

    # -- w_t ---------------------------------------------------------------------------------------

    def outputs_of_wt(self, o_t: np.ndarray, guess=None) -> None:
        """o_t = sum_k alpha_k X_aug z_k: no pass over the data (``guess`` unused: no pass to guess the cut in)."""
        rp = self.rp
        combine_rows(self.outs, rp.slot, rp.alpha, rp.t, self.X.chunks, self._zero_n, o_t, self.X.serial)

    def sq_norm_t(self) -> float:
        """|w_t|^2 = alpha^T H alpha."""
        return self.rp.sq_norm()

    # -- OCAS's best-so-far point ------------------------------------------------------------------

    def start_best(self, w0: np.ndarray) -> float:
        """w_b = w0 (dense, d + 1 entries, kept aside); returns |w_b|^2."""
        self.w0 = w0.copy() if np.any(w0) else None
        self.s0 = 1.0
        self.sq_b = float(w0 @ w0)
        return self.sq_b

    def line_terms(self) -> tuple[float, float]:
        """(A0, B0) = (|w_t - w_b|^2, <w_b, w_t - w_b>) from |w_t|^2 = alpha^T H alpha and
        <w_b, w_t> = sum_k alpha_k u_k."""
        rp = self.rp
        t = rp.t
        sq_t = rp.sq_norm()
        dot_bt = float(rp.alpha[:t] @ self.u[rp.slot[:t]]) if t else 0.0
        self._sq_t, self._dot_bt = sq_t, dot_bt
        A0 = self.sq_b - 2.0 * dot_bt + sq_t
        if A0 < 0.0:
            A0 = 0.0
        return A0, dot_bt - self.sq_b

    def move_best(self, k: float) -> float:
        """w_b <- (1 - k) w_b + k w_t in coefficients; returns |w_b|^2. Call after ``line_terms``."""
        if k == 0.0:
            return self.sq_b
        rp = self.rp
        t = rp.t
        s = rp.slot[:t]
        keep = 1.0 - k
        self.beta *= keep
        self.beta[s] += k * rp.alpha[:t]
        self.u *= keep
        self.u[s] += k * rp.h_alpha[:t]
        self.s0 *= keep
        if self.rho.shape[0]:
            self.rho *= keep
        self.sq_b = keep * keep * self.sq_b + 2.0 * k * keep * self._dot_bt + k * k * self._sq_t
        return self.sq_b

    def best_outputs(self, out: np.ndarray) -> bool:
        """out = X_aug w_b from the stored cuts' outputs (sum_k beta_k X z_k, O(n t), no pass over the
        data) when w_b is a combination of stored cuts alone (no dropped cut and no w0 in it); returns
        whether it did."""
        if self.rho.shape[0] or (self.w0 is not None and self.s0 != 0.0):
            return False
        rp = self.rp
        weights = self.beta[rp.slot[: rp.t]].copy()
        combine_rows(self.outs, rp.slot, weights, rp.t, self.X.chunks, self._zero_n, out, self.X.serial)
        return True

    def best_weights(self) -> np.ndarray:
        """w_b as a dense vector (d + 1 entries): one scatter pass."""
        rp = self.rp
        base = self.rho if self.rho.shape[0] else self._zero_n
        coef = np.empty(self.X.n)
        weights = self.beta[rp.slot[: rp.t]].copy()
        combine_rows(self.coefs, rp.slot, weights, rp.t, self.X.chunks, base, coef, self.X.serial)
        w = self.X.weights(coef)
        if self.w0 is not None and self.s0 != 0.0:
            w += self.s0 * self.w0
        return w

    # -- CPA's best iterate ------------------------------------------------------------------------

    def keep_t(self) -> None:
        """Remember the current w_t as the best iterate (its row coefficients, O(n t_a))."""
        rp = self.rp
        combine_rows(self.coefs, rp.slot, rp.alpha, rp.t, self.X.chunks, self._zero_n, self._best_coef, self.X.serial)

    def kept_weights(self) -> np.ndarray:
        """The remembered iterate as a dense vector (d + 1 entries): one scatter pass."""
        return self.X.weights(self._best_coef)


def choose(X: RowData, C: float, coef_dtype=np.int8, risk_at_zero: float | None = None):
    """The cut form for this data: OutputCuts when n <= d + 1, else DenseCuts (module docstring; ``risk_at_zero``:
    see DenseCuts)."""
    if X.n <= X.d + 1:
        return OutputCuts(X, C, coef_dtype=coef_dtype)
    return DenseCuts(X, C, risk_at_zero=risk_at_zero)


def warm_up() -> None:
    """Compile every kernel of this module on a tiny problem."""
    Z = np.arange(12, dtype=np.float64).reshape(4, 3)
    slots = np.array([0, 1, 2, 3], dtype=np.int64)
    out = np.zeros(4)
    chunks = np.array([0, 3], dtype=np.int64)
    rows = np.array([0, 2], dtype=np.int64)
    weights = np.array([0.5, 0.0, 0.25, 0.0])
    _changed_rows(np.array([1.0, 0.0, -1.0]), np.zeros(3), np.zeros(3, dtype=np.int64), np.zeros(3))
    _listed_changes(np.array([1.0, 0.0, -1.0]), np.zeros(3), rows, 2, np.zeros(3, dtype=np.int64), np.zeros(3))
    for serial in (True, False):
        _dense_gram_row(Z, slots, 3, 3, out, 1 if serial else 2)
        for gamma in (np.array([1.0, 0.0, -1.0]), np.array([1, 0, -1], dtype=np.int8)):
            _output_gram_row(Z, slots, 3, gamma, rows, 2, out, serial)
            _dot_rows(gamma, rows, 2, Z[0])
        for table in (Z, Z.astype(np.int8)):
            combine_rows(table, slots, weights, 3, chunks, np.zeros(3), np.zeros(3), serial)
