"""One node's rows of a Crammer-Singer ocas training split over several nodes (``worker.solvers.distributed_ocas_multiclass``).

The multi-class form of ``worker.solvers.row_part``: the problem and the iteration are those of
``worker.solvers.ocas_multiclass`` (paper 000's Algorithm 1 with a weight matrix W, one column per class), whose
passes over the rows are sums over rows too. Each node keeps its rows, their classes and factors, and their outputs
O_b = X W_b^T and O_t = X W_t^T (n x K) across iterations, and answers the driver with sums and its part of a cut:

* ``start(W_b)``: its risk at the starting point and its part of the first cut (at W_b);
* ``step_outputs(W_t, C, n_pivots)``: O_t for its rows, its part of the line search's right derivative at 0 and its
  breakpoints (each row's upper envelope of K lines, ``ocas_multiclass.line_breakpoints``), which stay here and
  answer ``row_part.split_minimize`` (``line_count``, ``line_evaluate``, ``line_gather``);
* ``step_update(k, lam)``: O_b moved to the line-search point, each row's most violated class at W_c, its risk at
  the new W_b and its part of the new cut, Z_p = sum over its violators of c_i x_i (e_{y_i} - e_{k*_i})^T (a dense
  (n_features + 1) x K matrix, what the driver adds up);
* ``loss(W)``: its risk at W from fresh outputs.

Every answer ends with the seconds the node computed (the driver's ``comm_s``).
"""

from __future__ import annotations

import time

import numpy as np

from worker.solvers.ocas_multiclass import _cut, _outputs, _risk, _update, line_breakpoints
from worker.solvers.row_part import SortedBreakpoints


class ClassRowPart(SortedBreakpoints):
    """A node's rows, their classes and outputs across the iterations of a split Crammer-Singer training."""

    def __init__(self, indptr, indices, data, classes, n_classes: int, n_features: int, B: float, cost=None) -> None:
        self.indptr = np.asarray(indptr, dtype=np.int64)
        self.indices = np.asarray(indices, dtype=np.int64)
        self.data = np.asarray(data, dtype=np.float64)
        self.yc = np.asarray(classes, dtype=np.int64)
        n = self.yc.size
        self.n = n
        K = int(n_classes)
        self.cost = np.ones(n) if cost is None else np.asarray(cost, dtype=np.float64)
        self.B = float(B)
        self.shape = (int(n_features) + 1, K)
        self.O_b = np.zeros((n, K))
        self.O_t = np.zeros((n, K))
        self.violator = np.zeros(n, dtype=np.int64)
        self.keys = np.zeros(2 * n + 16)
        self.wts = np.zeros(2 * n + 16)

    def _cut_part(self) -> np.ndarray:
        Z = np.zeros(self.shape)
        _cut(self.indptr, self.indices, self.data, self.B, self.yc, self.cost, self.violator, Z)
        return Z

    def start(self, W_b: np.ndarray) -> tuple[float, float, np.ndarray, float]:
        """The outputs of the starting point W_b (kept), the risk here and this node's part of the first cut (at
        W_b); (risk, the cut's offset here, Z_p, seconds)."""
        started = time.perf_counter()
        if np.any(W_b):
            _outputs(self.indptr, self.indices, self.data, self.B, W_b, self.O_b)
        risk = float(_risk(self.yc, self.cost, self.O_b))
        _, offset = _update(self.yc, self.cost, self.O_b, self.O_b.copy(), 0.0, 0.0, self.violator)
        return risk, float(offset), self._cut_part(), time.perf_counter() - started

    def step_outputs(self, W_t: np.ndarray, C: float, n_pivots: int) -> tuple[float, int, int, np.ndarray, float]:
        """O_t = X W_t^T here (kept), this node's part of the line search's G'(0+) and its breakpoints (kept, sorted),
        and ``line_count(0, inf, n_pivots)``; (slope, breakpoints, count, pivots, seconds)."""
        started = time.perf_counter()
        _outputs(self.indptr, self.indices, self.data, self.B, W_t, self.O_t)
        while True:
            slope, m = line_breakpoints(self.yc, self.cost, C, self.O_b, self.O_t, self.keys, self.wts)
            if m >= 0:
                break
            self.keys = np.zeros(2 * self.keys.size)
            self.wts = np.zeros(2 * self.wts.size)
        self.keep_sorted(self.keys[:m], self.wts[:m])
        count, pivots, _ = self.line_count(0.0, np.inf, n_pivots)
        return float(slope), int(m), count, pivots, time.perf_counter() - started

    def step_update(self, k: float, lam: float) -> tuple[float, int, float, np.ndarray, float]:
        """O_b <- (1 - k) O_b + k O_t, each row's most violated class at W_c = (1 - lam) W_b + lam W_t, the risk at the
        new W_b, and this node's part of the new cut; (risk, violators, the cut's offset here, Z_p, seconds)."""
        started = time.perf_counter()
        risk, offset = _update(self.yc, self.cost, self.O_b, self.O_t, float(k), float(lam), self.violator)
        n_viol = int(np.count_nonzero(self.violator >= 0))
        return float(risk), n_viol, float(offset), self._cut_part(), time.perf_counter() - started

    def loss(self, W: np.ndarray) -> tuple[float, float]:
        """The risk of W over the rows here, from fresh outputs; (risk, seconds)."""
        started = time.perf_counter()
        _outputs(self.indptr, self.indices, self.data, self.B, W, self.O_t)
        return float(_risk(self.yc, self.cost, self.O_t)), time.perf_counter() - started
