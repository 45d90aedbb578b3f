"""One node's rows of an ocas training split over several nodes (``worker.solvers.distributed_ocas``).

OCAS touches the rows only through passes whose results are sums over rows (paper 000, Section 3.1): the
outputs <x_i, w_t>, the line search's terms, the loss, the cut's rows and the cut z = sum_i gamma_i x_i. Split
by rows over nodes, each node keeps its rows' data and its per-row state (the outputs of w_b and w_t, the cut's
coefficients) across iterations and answers the driver with sums and small vectors:

* ``start(w_b)``, ``loss(w)``: its hinge loss at a point;
* ``step_outputs(w_t, C, n_pivots)``: o_t for its rows (kept here), its part of the line search's right
  derivative at 0 and its breakpoints (k_i, |B_i|) (``worker.solvers.line_search``), which stay here;
  ``line_count``, ``line_evaluate`` and ``line_gather`` answer the driver's search for k* over every node's
  breakpoints (``split_minimize``);
* ``step_update(k, lam)``: o_b moved to the line-search point, the cut's rows chosen at w_c, its loss at w_b,
  and its part of the new cut, z_p = sum over its cut rows of gamma_i x_i (bias entry B * sum gamma_i), built
  from its previous part by the rows that changed (``cut_data.CurrentCut``).

So an iteration is two calls to every node, plus one or two rounds of the line search (``split_minimize``).

Every answer carries the seconds the node computed, so that the driver can tell the network's share of an
iteration from the nodes' work.
"""

from __future__ import annotations

import math
import time

import numpy as np

from worker.solvers import line_search
from worker.solvers.common import binary_signs
from worker.solvers.cpa_passes import hinge_parts
from worker.solvers.cut_data import CurrentCut, prepare_data
from worker.solvers.data_passes import compact_chunks, threads

GATHER = 65_536
"""``split_minimize`` gathers the breakpoints left in its bracket once the nodes hold at most this many."""
PIVOTS = 63
"""Pivots per round of ``split_minimize``: each node's breakpoints in the bracket at evenly spaced ranks."""


class SortedBreakpoints:
    """A node's breakpoints of the line search, sorted, with the running sums of their weights: what ``line_count``,
    ``line_evaluate`` and ``line_gather`` answer ``split_minimize`` from (ocas's ``RowPart``, Crammer-Singer's
    ``worker.solvers.class_row_part.ClassRowPart``)."""

    sorted_keys: np.ndarray = np.zeros(0)
    cum_wts: np.ndarray = np.zeros(1)

    def keep_sorted(self, keys: np.ndarray, wts: np.ndarray) -> None:
        """Keep these breakpoints (key, weight), sorted by key (ties in their order)."""
        order = np.argsort(keys, kind="stable")
        self.sorted_keys = keys[order]
        self.cum_wts = np.concatenate(([0.0], np.cumsum(wts[order])))

    def _range(self, lo: float, hi: float) -> tuple[int, int]:
        """The sorted breakpoints in the open interval (lo, hi): [a, b)."""
        a = int(np.searchsorted(self.sorted_keys, lo, side="right"))
        b = int(np.searchsorted(self.sorted_keys, hi, side="left"))
        return a, max(a, b)

    def line_count(self, lo: float, hi: float, n_pivots: int) -> tuple[int, np.ndarray, float]:
        """How many breakpoints lie in (lo, hi), and ``n_pivots`` of them at evenly spaced ranks; (count, keys,
        seconds)."""
        started = time.perf_counter()
        a, b = self._range(lo, hi)
        if b - a == 0:
            return 0, np.zeros(0), time.perf_counter() - started
        ranks = a + ((b - a) * np.arange(1, n_pivots + 1)) // (n_pivots + 1)
        return b - a, np.unique(self.sorted_keys[np.minimum(ranks, b - 1)]), time.perf_counter() - started

    def line_evaluate(self, lo: float, hi: float, pivots: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """For each pivot p (in (lo, hi), increasing): the weight of the breakpoints in (lo, p) and at p;
        (below, equal, seconds)."""
        started = time.perf_counter()
        a, _ = self._range(lo, hi)
        left = np.searchsorted(self.sorted_keys, pivots, side="left")
        right = np.searchsorted(self.sorted_keys, pivots, side="right")
        below = self.cum_wts[np.maximum(left, a)] - self.cum_wts[a]
        equal = self.cum_wts[right] - self.cum_wts[left]
        return below, equal, time.perf_counter() - started

    def line_gather(self, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray, float]:
        """The breakpoints in (lo, hi) and their weights; (keys, weights, seconds)."""
        started = time.perf_counter()
        a, b = self._range(lo, hi)
        weights = np.diff(self.cum_wts[a : b + 1])
        return self.sorted_keys[a:b].copy(), weights, time.perf_counter() - started


class RowPart(SortedBreakpoints):
    """A node's rows and their state across the iterations of a split ocas training (module docstring)."""

    def __init__(self, indptr, indices, data, y, n_features: int, B: float, n_threads: int = 1) -> None:
        self.X = prepare_data(indptr, indices, data, int(n_features), float(B), int(n_threads))
        self.y = binary_signs(y).copy()
        n = self.X.n
        self.n = n
        self.o_b = np.zeros(n)
        self.o_t = np.zeros(n)
        self.gamma = np.zeros(n)
        self.rows = np.zeros(n, dtype=np.int64)
        self.keys = np.zeros(n)
        self.wts = np.zeros(n)
        nc = self.X.chunks.shape[0] - 1
        self.slope_parts = np.zeros(nc)
        self.count_parts = np.zeros(nc, dtype=np.int64)
        self.loss_parts = np.zeros(nc)
        self.gsum_parts = np.zeros(nc)
        self.current = CurrentCut(self.X)

    def _threads(self):
        return threads(self.X.n_threads)

    def start(self, w_b: np.ndarray) -> tuple[float, float]:
        """The outputs of the starting point w_b (kept) and its hinge loss here; (loss, seconds)."""
        started = time.perf_counter()
        with self._threads():
            if np.any(w_b):
                self.X.outputs(w_b, self.o_b)
            hinge_parts(self.y, self.o_b, self.X.chunks, self.loss_parts, self.X.serial)
        return float(np.sum(self.loss_parts)), time.perf_counter() - started

    def step_outputs(self, w_t: np.ndarray, C: float, n_pivots: int) -> tuple[float, int, int, np.ndarray, float]:
        """An iteration's first call: o_t = X w_t for the rows here (kept), this node's part of the line search's
        G'(0+) and its breakpoints (kept, sorted), and ``line_count(0, inf, n_pivots)``; (slope, breakpoints,
        count, pivots, seconds)."""
        started = time.perf_counter()
        X = self.X
        with self._threads():
            X.outputs(w_t, self.o_t)
            line_search.prepare(
                self.y,
                self.o_b,
                self.o_t,
                C,
                X.chunks,
                self.slope_parts,
                self.count_parts,
                self.keys,
                self.wts,
                X.serial,
            )
        m = line_search.compact(X.chunks, self.count_parts, self.keys, self.wts)
        self.keep_sorted(self.keys[:m], self.wts[:m])
        count, pivots, _ = self.line_count(0.0, math.inf, n_pivots)
        return float(np.sum(self.slope_parts)), int(m), count, pivots, time.perf_counter() - started

    def step_update(self, k: float, lam: float) -> tuple[float, int, float, np.ndarray, float]:
        """An iteration's last call: o_b <- (1 - k) o_b + k o_t, the cut's rows at w_c = (1 - lam) w_b + lam w_t,
        the loss at the new w_b, and this node's part of the new cut, z_p over the d + 1 weights (built from its
        previous part by the rows that changed; computed even when the driver then finds the training converged,
        which saves a call an iteration); (loss, cut rows, sum of their gamma, z_p, seconds)."""
        from worker.solvers.ocas import _ocas_update

        started = time.perf_counter()
        X = self.X
        with self._threads():
            _ocas_update(
                self.y,
                self.o_b,
                self.o_t,
                k,
                lam,
                X.chunks,
                self.gamma,
                self.rows,
                self.loss_parts,
                self.count_parts,
                self.gsum_parts,
                X.serial,
            )
            n_sel = int(compact_chunks(X.chunks, self.count_parts, self.rows))
            gsum = float(np.sum(self.gsum_parts))
            z = self.current.update(self.gamma, self.rows, n_sel, gsum)
        return float(np.sum(self.loss_parts)), n_sel, gsum, z.copy(), time.perf_counter() - started

    def step_cpa(self, w_t: np.ndarray) -> tuple[float, int, float, np.ndarray, float]:
        """A cpa iteration's call (paper 001, Algorithm 1): o_t = X w_t, the most violated constraint's rows here
        (y_i <w_t, x_i> < 1), their hinge loss, and this node's part of the cut, z_p = sum of y_i x_i over them
        (from its previous part by the rows that changed); (risk, rows in the cut, sum of their gamma, z_p,
        seconds)."""
        from worker.solvers.cpa_passes import _class_cut

        started = time.perf_counter()
        X = self.X
        with self._threads():
            X.outputs(w_t, self.o_t)
            _class_cut(
                self.y,
                self.o_t,
                X.chunks,
                self.gamma,
                self.rows,
                self.count_parts,
                self.loss_parts,
                self.gsum_parts,
                X.serial,
            )
            risk = float(np.sum(self.loss_parts))
            gsum = float(np.sum(self.gsum_parts))
            n_sel = int(compact_chunks(X.chunks, self.count_parts, self.rows))
            z = self.current.update(self.gamma, self.rows, n_sel, gsum)
        return risk, n_sel, gsum, z.copy(), time.perf_counter() - started

    def loss(self, w: np.ndarray) -> tuple[float, float]:
        """The hinge loss of w over the rows here, from fresh outputs; (loss, seconds)."""
        started = time.perf_counter()
        with self._threads():
            self.X.outputs(w, self.o_t)
            hinge_parts(self.y, self.o_t, self.X.chunks, self.loss_parts, self.X.serial)
        return float(np.sum(self.loss_parts)), time.perf_counter() - started


def split_minimize(call_all, A0: float, S: float, first: list | None = None) -> float:
    """argmin_{k >= 0} of OCAS's line-search function G (``worker.solvers.line_search``) over breakpoints held by
    several nodes, A0 > 0 and S = G'(0+) < 0, without moving them all to one place.

    ``call_all(method, *args)`` calls a ``RowPart`` method on every node and returns their answers; ``first``: the
    nodes' answers to ``line_count(0, inf, PIVOTS)`` when they came with another call (``step_outputs``). The search
    keeps an interval (lo, hi) that holds k* and the derivative's constant part just right of lo (S plus the
    weights of the breakpoints <= lo): each round asks every node for PIVOTS of its breakpoints in the interval,
    evaluates the derivative just left and just right of each pivot from every node's sums, and keeps the piece
    between the last pivot where it is still negative and the first where it is positive (or stops at a pivot
    where it changes sign). Once at most GATHER breakpoints are left, they are gathered and the serial
    selection (``line_search.minimize``) finishes. The minimiser is the serial one's: G is strictly convex.
    """
    lo, hi = 0.0, math.inf
    for _ in range(64):
        answers = first if first is not None else call_all("line_count", lo, hi, PIVOTS)
        first = None
        total = sum(int(a[0]) for a in answers)
        if total <= GATHER:
            gathered = call_all("line_gather", lo, hi)
            keys = np.concatenate([g[0] for g in gathered]) if gathered else np.zeros(0)
            wts = np.concatenate([g[1] for g in gathered]) if gathered else np.zeros(0)
            return float(line_search.minimize(keys, wts, keys.shape[0], A0, S))
        pivots = np.unique(np.concatenate([a[1] for a in answers]))
        evaluated = call_all("line_evaluate", lo, hi, pivots)
        below = np.sum([e[0] for e in evaluated], axis=0)
        equal = np.sum([e[1] for e in evaluated], axis=0)
        new_lo, new_S, new_hi = lo, S, hi
        for j, p in enumerate(pivots):
            left = A0 * p + S + below[j]
            if left > 0.0:
                new_hi = float(p)
                break
            if left + equal[j] >= 0.0:
                return float(p)
            new_lo, new_S = float(p), S + below[j] + equal[j]
        lo, S, hi = new_lo, new_S, new_hi
    raise RuntimeError("the split line search did not narrow its interval")  # pragma: no cover
