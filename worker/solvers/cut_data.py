"""What the cut forms of ``cut_store`` share: the data with its row chunks, threads and the copies that make its
passes cheaper (``Data``, ``prepare_data``), how many cuts fit in memory (``cut_budget``), the cuts' slots, and the
newest cut as a dense vector updated by the rows that changed (``CurrentCut``). The forms themselves and why
there are two are in ``worker.solvers.cut_store``'s docstring.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from worker.solvers.data_passes import (
    available_cores,
    column_copy,
    column_cost,
    column_counts,
    fill,
    gather_columns,
    gather_outputs,
    row_chunks,
    scatter_rows,
)
from worker.solvers.streamed_data import ROW_STATE_BYTES, StreamedData, csr_bytes, memory_room


@njit(cache=True)
def _changed_rows(gamma, previous, flips, delta):
    """Rows where gamma differs from previous: their numbers into flips, gamma - previous into delta
    (at the row), previous updated; returns how many."""
    m = 0
    for i in range(gamma.shape[0]):
        g = gamma[i]
        if g != previous[i]:
            delta[i] = g - previous[i]
            previous[i] = g
            flips[m] = i
            m += 1
    return m


@njit(cache=True)
def _listed_changes(gamma, previous, rows, n_rows, flips, delta):
    """As ``_changed_rows``, looking at rows[:n_rows] only."""
    m = 0
    for q in range(n_rows):
        i = rows[q]
        g = gamma[i]
        if g != previous[i]:
            delta[i] = g - previous[i]
            previous[i] = g
            flips[m] = i
            m += 1
    return m


# ---------------------------------------------------------------------------------------------
# the data and its partitions, shared by both forms
# ---------------------------------------------------------------------------------------------


class Data:
    """The CSR triple with its fixed row chunks and the number of threads."""

    kind = "memory"

    def __init__(self, indptr, indices, data, n_features, B, chunks, n_threads):
        self.indptr = indptr
        self.indices = indices
        self.data = data
        self.n = indptr.shape[0] - 1
        self.d = int(n_features)
        self.B = float(B)
        self.chunks = chunks
        self.n_threads = int(n_threads)
        self.serial = self.n_threads == 1
        self.index_bytes = indices.itemsize  # of the caller's indices (``prepare_data`` may narrow them)
        # the column copy for the cuts' outputs (``cut_outputs``): -1 never, 0 not yet, 1 built
        self.nnz = int(indptr[-1])
        eligible = (
            self.serial
            and 0 < self.nnz <= COLUMNS_MAX_NNZ
            and COLUMNS_MAX_D_SHARE * (self.d + 1) <= self.nnz
            and self.n < 2**31  # row numbers of the copy: uint16 or int32
        )
        self.columns_state = 0 if eligible else -1
        self.row_passes = 0
        self.missed = 0.0
        self.counts = None
        self.colptr = None
        self.col_rows = None
        self.col_data = None

    def outputs(self, w: np.ndarray, out: np.ndarray) -> None:
        """out = X_aug w for w of length d + 1 (last entry: the bias weight)."""
        gather_outputs(
            self.indptr, self.indices, self.data, w, self.B * float(w[self.d]), self.chunks, out, self.serial
        )

    @property
    def cut_memory(self) -> int:
        """Bytes against which the cut store's share is counted (``cut_budget``): the caller's arrays'."""
        return self.nnz * (self.index_bytes + self.data.itemsize)

    def scatter(self, coef, rows, n_rows, z) -> None:
        """z[f] += sum_q coef[rows[q]] * x_{rows[q], f} over q < n_rows, in the order listed."""
        scatter_rows(self.indptr, self.indices, self.data, coef, rows, n_rows, z)

    def describe(self) -> dict:
        """What the trace's ``extra`` says of the data: all of it in memory."""
        return {"form": "memory"}

    def close(self) -> None:
        """Nothing to release (``streamed_data.StreamedData`` has a reader to stop)."""

    def make_room(self, cut_bytes: int) -> None:
        """The cut store is about to hold ``cut_bytes``: nothing to give back in memory (out of core, pinned
        rows go back to disk)."""

    def can_hold(self, cut_bytes: int) -> bool:
        """Whether the cut store may grow to ``cut_bytes``: in memory, always (its budget is a share of the data)."""
        return True

    def cut_outputs(self, z: np.ndarray, out: np.ndarray) -> None:
        """out = X_aug z for a cut z, through the column copy of the data when that reads fewer entries.

        A cut of a late iteration sums a few rows, and only the columns of its non-zero features
        contribute: on sector.scale (10^6 non-zeros) about half of the entries. The column-wise gather
        gives the row-wise sums bit for bit (``gather_columns``), so this only changes the time. The
        copy costs as many bytes as the data and about COLUMNS_BUILD row passes to build, so it is
        built only when the row passes it would have shortened add up to that (a rent-or-buy rule:
        at most twice the time of the better choice in hindsight), counted from the COLUMNS_WAIT-th
        cut on (short runs never pay even the column counts); one thread only (the row passes split
        over threads, the column one does not), data of at most COLUMNS_MAX_NNZ non-zeros with at
        least COLUMNS_MAX_D_SHARE of them per feature (the choice scans z), rows with sorted indices.
        """
        state = self.columns_state
        if state > 0:
            cost = COLUMNS_ENTRY * column_cost(self.counts, z, self.d)
            if cost < self.nnz:
                gather_columns(self.colptr, self.col_rows, self.col_data, z, self.d, self.B * float(z[self.d]), out)
                return
        elif state == 0:
            self.row_passes += 1
            if self.row_passes == COLUMNS_WAIT:
                self.counts = np.zeros(self.d + 1, dtype=np.int64)
                column_counts(self.indices, self.d, self.counts)
            elif self.row_passes > COLUMNS_WAIT:
                cost = COLUMNS_ENTRY * column_cost(self.counts, z, self.d)
                self.missed += max(0.0, self.nnz - cost)
                if self.missed >= COLUMNS_BUILD * self.nnz:
                    self._build_columns()
                    self.cut_outputs(z, out)
                    return
        self.outputs(z, out)

    def _build_columns(self) -> None:
        self.colptr = np.zeros(self.d + 1, dtype=np.int64)
        self.col_rows = np.empty(self.nnz, dtype=np.uint16 if self.n <= 65536 else np.int32)
        self.col_data = np.empty(self.nnz, dtype=self.data.dtype)
        ok = column_copy(
            self.indptr, self.indices, self.data, self.counts, self.d, self.colptr, self.col_rows, self.col_data
        )
        if ok:
            self.columns_state = 1
        else:  # unsorted rows: keep the row-wise pass
            self.columns_state = -1
            self.counts = self.colptr = self.col_rows = self.col_data = None

    def weights(self, coef: np.ndarray) -> np.ndarray:
        """X_aug^T coef as a dense vector of length d + 1 (one scatter over the rows with coef != 0: the
        others would add exact zeros)."""
        rows = np.flatnonzero(coef)
        w = np.zeros(self.d + 1)
        self.scatter(coef, rows, rows.shape[0], w)
        w[self.d] = self.B * float(np.sum(coef))
        return w


COLUMNS_WAIT = 12
"""Cuts computed row-wise before ``Data.cut_outputs`` starts to weigh a column copy of the data."""
COLUMNS_BUILD = 12.0
"""Building the column copy costs about this many row passes (10.5 ms against 1.0 ms on sector.scale)."""
COLUMNS_ENTRY = 1.25
"""A column entry read by ``gather_columns`` costs about this many row entries (scattered adds)."""
COLUMNS_MAX_NNZ = 16_000_000
"""No column copy for more non-zeros than this: it takes as many bytes as the data."""
COLUMNS_MAX_D_SHARE = 4
"""No column copy unless the data has at least this many non-zeros per feature: each choice scans z."""

PARALLEL_NNZ = 4_000_000
"""Non-zeros per thread below which more threads do not pay: each iteration starts several parallel
regions (tens of microseconds each), and on sector.scale (10^6 non-zeros, 2 ms an iteration) two
threads were slower than one."""


def prepare_data(
    indptr,
    indices,
    data,
    n_features: int,
    B: float,
    n_processes: int,
    memory_bytes: int | None = None,
    row_bytes: int = ROW_STATE_BYTES,
    guess_cuts: bool = False,
) -> RowData:
    """The data with its row chunks, for at most ``n_processes`` threads: no more than the cores of this
    process, and one per PARALLEL_NNZ non-zeros. ``memory_bytes`` (None: no limit) is what the solve may hold:
    data whose indices and values take more than that leaves for them, after the solve's vectors (``row_bytes``
    a row) and room for a few cuts (``streamed_data.memory_room``), is read from its files in passes
    (``streamed_data.StreamedData``; ``guess_cuts``: the solver guesses its next cut in the pass for the outputs,
    OCAS's ``CurrentCut.guess``, and room is kept for it)."""
    n_threads = int(max(1, min(int(n_processes), available_cores(), int(indptr[-1]) // PARALLEL_NNZ)))
    if memory_bytes is not None and csr_bytes(indices, data) > memory_room(
        indptr.shape[0] - 1, n_features, memory_bytes, row_bytes
    ):
        chunks = row_chunks(indptr)
        return StreamedData(
            indptr, indices, data, n_features, B, chunks, n_threads, memory_bytes, row_bytes=row_bytes,
            guess_cuts=guess_cuts,
        )  # fmt: skip
    index_bytes = indices.itemsize
    if int(n_features) <= NARROW_MAX_D and indices.itemsize > 2 and 0 < int(indptr[-1]) <= NARROW_MAX_NNZ:
        indices = indices.astype(np.uint16)  # check_csr has seen every index below n_features
    X = Data(indptr, indices, data, n_features, B, row_chunks(indptr), n_threads)
    X.index_bytes = index_bytes
    return X


class FeatureSpace:
    """What the driver of a training split over nodes tells its cut store of the data: its features, bias
    feature and size; the rows are on the nodes (``worker.solvers.distributed_ocas``)."""

    kind = "split"

    def __init__(self, n_features: int, B: float, data_bytes: int, n_threads: int = 1) -> None:
        self.d = int(n_features)
        self.B = float(B)
        self.n = 0
        self.n_threads = int(n_threads)
        self.serial = self.n_threads == 1
        self.cut_memory = int(data_bytes)  # the cuts' budget as on one machine (``cut_data.cut_budget``)

    def make_room(self, cut_bytes: int) -> None:
        """Nothing to give back: the rows are on the nodes."""

    def can_hold(self, cut_bytes: int) -> bool:
        """The driver's cuts may grow as on one machine."""
        return True


RowData = Data | StreamedData
"""The rows as the solvers see them: in memory, or read from disk in passes."""
CutData = RowData | FeatureSpace
"""The data as the cut stores see it: rows here, or on other nodes (the features only)."""

NARROW_MAX_D = 65536
"""Data with at most this many features is read through a copy of its indices as 16-bit numbers: every
pass over the data reads 6 or 10 bytes a non-zero instead of 8 or 12, and the passes are bound by
memory (on sector.scale, 55,197 features: 0.82 ms a pass against 1.0 ms). Same sums bit for bit."""
NARROW_MAX_NNZ = 16_000_000
"""No 16-bit copy of the indices for more non-zeros than this (it takes 2 bytes a non-zero)."""


MEMORY_SHARE = 0.25
"""The stored cuts may take this share of the data's own bytes (at least MIN_CUTS cuts): past it, cuts
whose alpha is 0 at the last solve are dropped before a new one is added (their loss changes no lower
bound). Only when every stored cut is active does the store grow beyond it."""
MIN_CUTS = 32


def cut_budget(X: CutData, bytes_per_cut: int) -> int:
    """How many cuts fit in MEMORY_SHARE of the data's bytes (of those it may hold, out of core; at least
    MIN_CUTS)."""
    return max(MIN_CUTS, int(MEMORY_SHARE * X.cut_memory) // max(1, bytes_per_cut))


class _Slots:
    """Slot numbers for cut data; when full, capacity doubles up to the budget, then grows by a quarter
    (callers reallocate their arrays)."""

    def __init__(self, capacity: int, budget: int) -> None:
        self.capacity = min(capacity, budget)
        self.budget = budget
        self.free = list(range(self.capacity - 1, -1, -1))

    def take(self) -> tuple[int, bool]:
        """A free slot (the last one given back, else the lowest never used) and whether the capacity grew for it."""
        grew = False
        if not self.free:
            old = self.capacity
            self.capacity = min(2 * old, self.budget) if old < self.budget else old + max(1, old // 4)
            self.free = list(range(self.capacity - 1, old - 1, -1))
            grew = True
        return self.free.pop(), grew

    def give(self, slot: int) -> None:
        self.free.append(int(slot))


class CutGuess(NamedTuple):
    """OCAS's next cut guessed in a gather (``CurrentCut.guess``, ``data_passes.scatter_guess``)."""

    y: np.ndarray
    """The labels (+-1)."""
    o_b: np.ndarray
    """The outputs of the best-so-far point w_b."""
    k: float
    """The step of the line search the cut is guessed at (the last iteration's)."""
    lam: float
    """Where OCAS takes its cut between w_b and w_t (its ``lam``)."""
    previous: np.ndarray
    """The current cut's coefficients, set to the guessed ones as the rows pass."""
    rebuild: bool
    """Whether the cut is summed from zero (``z`` cleared) rather than from the previous one."""
    z: np.ndarray
    """The cut's vector, moved to the guessed cut."""


class CurrentCut:
    """The newest cut as a dense vector z = X_aug^T gamma, updated by the rows whose coefficient changed.

    Consecutive cuts of a cutting-plane run differ in few rows (paper 001, Section 3.1, as SVMperf
    updates its cut by the examples that flipped): adding (gamma_i - previous_i) x_i over those rows
    costs their non-zeros instead of all the cut's rows plus clearing the vector. Sums kept this way
    drift by rounding, so the vector is rebuilt from scratch every REFRESH cuts, and whenever more rows
    changed than the new cut has (the decision counts rows, not non-zeros, so that explicit zeros in
    the data change nothing).
    """

    REFRESH = 64
    GUESS = True
    """Out of core, whether OCAS's next cut is guessed in its pass for the outputs of w_t (``guess``)."""

    def __init__(self, X: RowData) -> None:
        self.X = X
        self.z = np.zeros(X.d + 1)
        self.previous = np.zeros(X.n)
        self.delta = np.zeros(X.n)
        self.flips = np.zeros(X.n, dtype=np.int64)
        self.since_refresh = self.REFRESH
        self._parts = max(1, X.n_threads)

    def update(self, gamma, rows, n_rows, gsum) -> np.ndarray:
        """z for the new coefficients gamma (non-zero exactly at rows[:n_rows]); returns the vector."""
        X = self.X
        n_flips = _changed_rows(gamma, self.previous, self.flips, self.delta)
        if self.since_refresh >= self.REFRESH or n_flips >= n_rows:
            fill(self.z, 0.0, self._parts)
            X.scatter(gamma, rows, n_rows, self.z)
            self.since_refresh = 0
        else:
            X.scatter(self.delta, self.flips, n_flips, self.z)
            self.since_refresh += 1
        self.z[X.d] = X.B * gsum
        return self.z

    def guess(self, y, o_b, k, lam) -> CutGuess:
        """What ``StreamedData.outputs`` needs to move this cut, in its pass for o_t = X w_t (OCAS out of core), to
        the one OCAS would add if its line search chose the step k (its last one), each row as its output comes:
        ``update`` with the cut the line search then gives reads only the rows where the guess was wrong, not every
        changed row again (see ``ocas``). The vector is the same sum up to rounding (in another order); a rebuild
        that is due is done by the guess."""
        rebuild = self.since_refresh >= self.REFRESH
        if rebuild:
            fill(self.z, 0.0, self._parts)
            self.since_refresh = 0
        return CutGuess(y, o_b, float(k), float(lam), self.previous, rebuild, self.z)

    def update_changed(self, gamma, changed, n_changed, gsum) -> np.ndarray:
        """As ``update``, for coefficients gamma that differ from the previous ones at most at the rows
        changed[:n_changed] (no scan over all rows, except for the periodic rebuild)."""
        if self.since_refresh >= self.REFRESH:
            rows = np.flatnonzero(gamma)
            return self.update(gamma, rows, rows.shape[0], gsum)
        X = self.X
        n_flips = _listed_changes(gamma, self.previous, changed, n_changed, self.flips, self.delta)
        X.scatter(self.delta, self.flips, n_flips, self.z)
        self.since_refresh += 1
        self.z[X.d] = X.B * gsum
        return self.z
