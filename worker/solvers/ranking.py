"""Pairwise objectives for the cutting-plane solver: the condensed most-violated cut of OP5, thresholds, metrics.

Problem (service convention, paper 001 divides the loss by m instead). With P the ordered pairs
(i, j) with y_i > y_j (for "ranking": and qid_i == qid_j), m = |P|, o_i = <w, x_i>,

    min_w  0.5*|w|^2 + C * sum_{(i,j) in P} max(0, 1 - (o_i - o_j))                             (OP4)

which is LIBLINEAR's problem on the explicit difference vectors x_i - x_j without a bias (a bias
would cancel in every difference). ``objective`` "ordinal" uses all pairs of the data set with
different ranks, "roc_area" the same with exactly two rank values (the pairs are then the
positive/negative pairs and the pairwise loss upper-bounds 1 - ROC area), "ranking" only the pairs
inside each qid group (SVMrank).

Most violated cut (paper 001, Section 3.2, Algorithm 2 and the proof of Theorem 5). The 1-slack cut
at w selects c_ij = [o_i - o_j < 1]; with the condensed counts
    c+_i = |{j : (i, j) in P, o_i - o_j < 1}|,   c-_j = |{i : (i, j) in P, o_i - o_j < 1}|
the cut is  R(w') >= b - <z, w'>  with  z = sum_i (c+_i - c-_i) x_i  and  b = sum_i c+_i  (= sum_ij c_ij),
and the risk at w is R(w) = b - sum_i (c+_i - c-_i) o_i. (In paper 001's units the constraint of OP5
is this one divided by m.) ``_rank_counts`` computes c+ and c- without enumerating pairs: inside each
group it sorts the rows by decreasing o (O(n log n)), then for every rank r above the lowest one it
makes the two monotone sweeps of Algorithm 2 (lines 8-22): walking the rows with y_i = r in order of
decreasing o, a pointer collects the rows j with o_i - o_j < 1 and counts b = those with y_j < r
(c+_i += b); walking the rows with y_j < r, a pointer collects the rows i with o_i - o_j >= 1 and
counts a = those with y_i = r (c-_j += n_r - a). Both tests are written as the same floating-point
expression o_i - o_j < 1, so sum c+ == sum c- exactly. Cost O(n log n + R n) per cut.

Thresholds for "ordinal" (``fit_thresholds``). The scores s = <w, x> order the examples; between each
pair of adjacent ranks r_k < r_{k+1} we put the threshold theta_k that minimises the number of
training examples on the wrong side of the binary split {y <= r_k} vs {y >= r_{k+1}}, at the middle
of the widest gap between consecutive distinct scores among the minimisers (below the smallest or
above the largest score when that is best); then theta is made non-decreasing by a running maximum.
The predicted rank of s is ranks[#{k : s > theta_k}].

The metrics on scores (ROC AUC, pairwise accuracy, predicted ranks) live in ``core.scoring.metrics``,
shared by the API and the workers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from worker.solvers.common import SolverInputError

PAIRWISE_OBJECTIVES = ("ordinal", "roc_area", "ranking")


@dataclass(frozen=True)
class PairwiseSetup:
    """Rows grouped by qid (one group without qid) and each row's rank code inside its group."""

    rows: np.ndarray  # int64, row numbers ordered by group
    group_ptr: np.ndarray  # int64, group g is rows[group_ptr[g]:group_ptr[g+1]]
    code: np.ndarray  # int64 per row: index of y_i among its group's sorted distinct values
    group_ranks: np.ndarray  # int64 per group: number of distinct values
    n_pairs: int  # m = |P|
    ranks: np.ndarray  # float64, distinct y values over the whole data set, ascending


def pairwise_setup(y: np.ndarray, qid: np.ndarray | None, objective: str) -> PairwiseSetup:
    """Validate ranks (and qid) for a pairwise objective and precompute the grouping."""
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 1 or not np.all(np.isfinite(y)):
        raise SolverInputError("y must be a 1-D array of finite rank values for a pairwise objective")
    n = y.shape[0]
    ranks = np.unique(y)
    if objective == "roc_area" and ranks.size != 2:
        raise SolverInputError(f"objective='roc_area' needs exactly two distinct y values, got {ranks.size}")
    if objective == "ranking":
        if qid is None:
            raise SolverInputError("objective='ranking' needs qid (one query id per row)")
        qid = np.asarray(qid)
        if qid.shape != (n,):
            raise SolverInputError(f"qid must have one entry per row ({n}), got shape {qid.shape}")
        rows = np.argsort(qid, kind="stable").astype(np.int64)
        sq = qid[rows]
        cuts = np.flatnonzero(sq[1:] != sq[:-1]) + 1
        group_ptr = np.concatenate(([0], cuts, [n])).astype(np.int64)
    else:
        if qid is not None:
            raise SolverInputError(f"qid is only used by objective='ranking', not by objective={objective!r}")
        rows = np.arange(n, dtype=np.int64)
        group_ptr = np.array([0, n], dtype=np.int64)
    code = np.zeros(n, dtype=np.int64)
    n_groups = group_ptr.shape[0] - 1
    group_ranks = np.zeros(n_groups, dtype=np.int64)
    n_pairs = 0
    for g in range(n_groups):
        members = rows[group_ptr[g] : group_ptr[g + 1]]
        values, inverse, counts = np.unique(y[members], return_inverse=True, return_counts=True)
        code[members] = inverse
        group_ranks[g] = values.size
        size = int(members.size)
        n_pairs += (size * size - int(np.sum(counts.astype(np.int64) ** 2))) // 2
    if n_pairs == 0:
        raise SolverInputError(
            "a pairwise objective needs at least one pair with different y values"
            + (" inside one qid group" if objective == "ranking" else "")
        )
    return PairwiseSetup(rows, group_ptr, code, group_ranks, int(n_pairs), ranks)


@njit(cache=True)
def _rank_counts(o, rows, group_ptr, code, group_ranks, cplus, cminus, gamma):
    """Condensed most-violated cut of OP5 (Algorithm 2 of paper 001), per qid group.

    Fills cplus/cminus (int64) and gamma = cplus - cminus (float64); returns (b, risk) with
    b = sum cplus and risk = b - sum_i gamma_i o_i = sum over violated pairs of 1 - (o_i - o_j).
    """
    n = o.shape[0]
    for i in range(n):
        cplus[i] = 0
        cminus[i] = 0
    max_group = 0
    max_ranks = 1
    for g in range(group_ptr.shape[0] - 1):
        size = group_ptr[g + 1] - group_ptr[g]
        if size > max_group:
            max_group = size
        if group_ranks[g] > max_ranks:
            max_ranks = group_ranks[g]
    negs = np.empty(max_group, dtype=np.float64)
    sigma = np.empty(max_group, dtype=np.int64)
    n_r = np.zeros(max_ranks, dtype=np.int64)
    for g in range(group_ptr.shape[0] - 1):
        start = group_ptr[g]
        size = group_ptr[g + 1] - start
        R = group_ranks[g]
        if R < 2:
            continue
        for q in range(size):
            negs[q] = -o[rows[start + q]]
        perm = np.argsort(negs[:size], kind="mergesort")
        for q in range(size):
            sigma[q] = rows[start + perm[q]]
        for r in range(R):
            n_r[r] = 0
        for q in range(size):
            n_r[code[sigma[q]]] += 1
        for r in range(1, R):
            # c+_i for y_i = r: rows j with code < r and o_i - o_j < 1
            jp = 0
            below = 0
            for q in range(size):
                i = sigma[q]
                if code[i] != r:
                    continue
                oi = o[i]
                while jp < size and oi - o[sigma[jp]] < 1.0:
                    if code[sigma[jp]] < r:
                        below += 1
                    jp += 1
                cplus[i] += below
            # c-_j for y_j < r: rows i with code r and o_i - o_j < 1 = n_r - those with o_i - o_j >= 1
            ip = 0
            above = 0
            for q in range(size):
                j = sigma[q]
                if code[j] >= r:
                    continue
                oj = o[j]
                while ip < size and not (o[sigma[ip]] - oj < 1.0):
                    if code[sigma[ip]] == r:
                        above += 1
                    ip += 1
                cminus[j] += n_r[r] - above
    b = 0
    risk = 0.0
    for i in range(n):
        b += cplus[i]
        gi = float(cplus[i] - cminus[i])
        gamma[i] = gi
        risk -= gi * o[i]
    return b, risk + b


def pairwise_cut(
    o: np.ndarray, setup: PairwiseSetup, cplus: np.ndarray, cminus: np.ndarray, gamma: np.ndarray
) -> tuple[float, float]:
    """(b, R(w)) of the most violated cut at outputs o; gamma receives c+ - c- per row."""
    b, risk = _rank_counts(o, setup.rows, setup.group_ptr, setup.code, setup.group_ranks, cplus, cminus, gamma)
    return float(b), float(risk)


def fit_thresholds(scores: np.ndarray, y: np.ndarray, monotone: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(ranks, thresholds): per adjacent rank pair, the split of the scores with fewest training errors.

    See the module docstring; len(thresholds) == len(ranks) - 1; with ``monotone`` (the default, what
    the solver stores) the per-split optima are made non-decreasing by a running maximum.
    """
    scores = np.asarray(scores, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    ranks = np.unique(y)
    order = np.argsort(scores, kind="mergesort")
    s = scores[order]
    ys = y[order]
    n = s.size
    # candidate cut q: the q lowest scores predicted low; allowed where s[q-1] < s[q], or q in {0, n}
    allowed = np.ones(n + 1, dtype=bool)
    allowed[1:n] = s[1:] > s[:-1]
    gaps = np.empty(n + 1)
    gaps[0] = np.inf
    gaps[n] = np.inf
    gaps[1:n] = s[1:] - s[:-1]
    thetas = np.empty(max(ranks.size - 1, 0))
    for k in range(ranks.size - 1):
        high = ys > ranks[k]
        high_below = np.concatenate(([0], np.cumsum(high)))  # high examples among the q lowest
        low_above = (n - high.sum()) - (np.arange(n + 1) - high_below)  # low examples above the cut
        errors = np.where(allowed, high_below + low_above, n + 1)
        best = errors.min()
        cand = np.flatnonzero(errors == best)
        q = int(cand[np.argmax(gaps[cand])])
        if q == 0:
            thetas[k] = s[0] - 1.0
        elif q == n:
            thetas[k] = s[n - 1] + 1.0
        else:
            thetas[k] = 0.5 * (s[q - 1] + s[q])
    if monotone and thetas.size:
        thetas = np.maximum.accumulate(thetas)
    return ranks, thetas


def warm_up() -> None:
    """Compile every kernel of this module on a tiny problem."""
    y = np.array([1.0, 2.0, 3.0, 2.0])
    setup = pairwise_setup(y, None, "ordinal")
    n = y.size
    pairwise_cut(
        np.array([0.1, 0.5, 0.2, -0.3]), setup, np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros(n)
    )
