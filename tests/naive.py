"""Slow, obvious reference implementations that tests compare the fast code against."""

from __future__ import annotations

import numpy as np

# ---------------------------------------------------------------------------------------------
# Linear SVM (dcd): primal objective, dual projected gradient, cyclic dual coordinate descent.
# Dense X, explicit bias column, dense Qbar: nothing shared with worker/solvers/dcd.py.
# ---------------------------------------------------------------------------------------------


def _svm_augment(X, B):
    X = np.asarray(X, dtype=float)
    if B is None:
        return X
    return np.hstack([X, np.full((X.shape[0], 1), float(B))])


def svm_linear_primal(X, y, w_full, *, C_neg, C_pos, loss, bias):
    """0.5*|w|^2 + sum_i C_i loss_i for dense X; w_full ends with w_B when bias is not None."""
    Z = _svm_augment(X, bias)
    w_full = np.asarray(w_full, dtype=float)
    margins = 1.0 - y * (Z @ w_full)
    slack = np.maximum(margins, 0.0)
    if loss == "squared_hinge":
        slack = slack**2
    costs = np.where(y > 0, C_pos, C_neg)
    return 0.5 * float(w_full @ w_full) + float(costs @ slack)


def svm_linear_dual_parts(y, *, C_neg, C_pos, loss):
    """Per-row upper bound U_i and diagonal D_ii of the DCD dual (Hsieh et al. 2008, eq. (4))."""
    costs = np.where(np.asarray(y) > 0, C_pos, C_neg).astype(float)
    if loss == "squared_hinge":
        return np.full(costs.shape, np.inf), 0.5 / costs
    return costs, np.zeros_like(costs)


def svm_linear_dual_projected_gradient(X, y, alpha, *, C_neg, C_pos, loss, bias):
    """Projected gradient (eq. (8)) of f(alpha) = 0.5 alpha'Qbar alpha - e'alpha, from dense Qbar."""
    Z = _svm_augment(X, bias) * np.asarray(y, dtype=float)[:, None]
    U, D = svm_linear_dual_parts(y, C_neg=C_neg, C_pos=C_pos, loss=loss)
    Qbar = Z @ Z.T + np.diag(D)
    G = Qbar @ alpha - 1.0
    PG = G.copy()
    at_lower = alpha <= 0.0
    at_upper = alpha >= U
    PG[at_lower] = np.minimum(G[at_lower], 0.0)
    PG[at_upper] = np.maximum(G[at_upper], 0.0)
    return PG


def svm_linear_dcd_cyclic(X, y, *, C_neg, C_pos, loss, bias, n_epochs):
    """Algorithm 1 of Hsieh et al. (2008) in plain cyclic order, dense, no shrinking; returns (w_full, alpha)."""
    Z = _svm_augment(X, bias)
    y = np.asarray(y, dtype=float)
    U, D = svm_linear_dual_parts(y, C_neg=C_neg, C_pos=C_pos, loss=loss)
    alpha = np.zeros(Z.shape[0])
    w = np.zeros(Z.shape[1])
    Qii = np.einsum("ij,ij->i", Z, Z) + D
    for _ in range(n_epochs):
        for i in range(Z.shape[0]):
            G = y[i] * float(Z[i] @ w) - 1.0 + D[i] * alpha[i]
            if Qii[i] > 0:
                new = min(max(alpha[i] - G / Qii[i], 0.0), U[i])
            else:
                new = U[i] if G < 0 else 0.0
            w += (new - alpha[i]) * y[i] * Z[i]
            alpha[i] = new
    return w, alpha


# ---------------------------------------------------------------------------------------------
# Upload parser (service/ingest/parser.py): a CSV reader with the csv module and float().
# ---------------------------------------------------------------------------------------------


def csv_dense(text, label_column):
    """Parse CSV text (header + numeric rows) into (X dense, y, feature names), with csv and float."""
    import csv as _csv
    import io as _io

    rows = [r for r in _csv.reader(_io.StringIO(text)) if r and any(cell.strip() for cell in r)]
    names = [name.strip() for name in rows[0]]
    label_at = names.index(label_column)
    values = np.array([[float(cell) for cell in r] for r in rows[1:]], dtype=float).reshape(len(rows) - 1, len(names))
    keep = [j for j in range(len(names)) if j != label_at]
    return values[:, keep], values[:, label_at], [names[j] for j in keep]


# ---------------------------------------------------------------------------------------------
# kernel SVMs (smo, sampled_cuts, kernel_predict): dense, obvious, slow
# ---------------------------------------------------------------------------------------------


def kernel_dense(A, B, kernel):
    """K(a_i, b_j) for dense rows, straight from the formulas."""
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    kind = kernel["type"]
    if kind == "linear":
        return A @ B.T
    gamma = kernel["gamma"]
    if kind == "rbf":
        out = np.empty((A.shape[0], B.shape[0]))
        for i in range(A.shape[0]):
            diff = B - A[i]
            out[i] = np.exp(-gamma * np.sum(diff * diff, axis=1))
        return out
    coef0 = kernel.get("coef0", 0.0)
    if kind == "poly":
        return (gamma * (A @ B.T) + coef0) ** kernel.get("degree", 3)
    return np.tanh(gamma * (A @ B.T) + coef0)


def svc_dual_value(K, y, alpha):
    """D(alpha) = sum alpha - 0.5 sum_ij alpha_i alpha_j y_i y_j K_ij."""
    coef = y * alpha
    return float(alpha.sum() - 0.5 * coef @ K @ coef)


def svc_primal_value(K, y, coef, b, C_i):
    """0.5 |w|^2 + sum_i C_i hinge_i for the expansion w = sum_k coef_k phi(x_k) over all training rows."""
    decision = K @ coef + b
    return float(0.5 * coef @ K @ coef + np.sum(C_i * np.maximum(0.0, 1.0 - y * decision)))


def svc_max_violation(K, y, alpha, C_i):
    """m - M of the C-SVC dual at alpha (the KKT violation LIBSVM's -e bounds)."""
    G = (np.outer(y, y) * K) @ alpha - 1.0
    F = -y * G
    up = ((y > 0) & (alpha < C_i)) | ((y < 0) & (alpha > 0))
    low = ((y < 0) & (alpha < C_i)) | ((y > 0) & (alpha > 0))
    return float(F[up].max() - F[low].min())


def svc_smo_first_order(K, y, C_i, *, tol=1e-8, max_steps=1_000_000):
    """C-SVC dual by the plainest SMO: maximal violating pair, full gradient, dense Q. Returns (alpha, b)."""
    n = y.size
    Q = np.outer(y, y) * K
    alpha = np.zeros(n)
    G = -np.ones(n)
    for _ in range(max_steps):
        F = -y * G
        up = ((y > 0) & (alpha < C_i)) | ((y < 0) & (alpha > 0))
        low = ((y < 0) & (alpha < C_i)) | ((y > 0) & (alpha > 0))
        i = np.flatnonzero(up)[np.argmax(F[up])]
        j = np.flatnonzero(low)[np.argmin(F[low])]
        if F[i] - F[j] < tol:
            break
        # move along d = (y_i, -y_j) in (alpha_i, alpha_j): the largest feasible step, then the line optimum
        eta = max(K[i, i] + K[j, j] - 2 * K[i, j], 1e-12)
        step = (F[i] - F[j]) / eta
        room_i = C_i[i] - alpha[i] if y[i] > 0 else alpha[i]
        room_j = alpha[j] if y[j] > 0 else C_i[j] - alpha[j]
        step = min(step, room_i, room_j)
        alpha[i] += y[i] * step
        alpha[j] -= y[j] * step
        G += Q[:, i] * (y[i] * step) - Q[:, j] * (y[j] * step)
    F = -y * G
    free = (alpha > 0) & (alpha < C_i)
    if free.any():
        b = float(F[free].mean())
    else:
        up = ((y > 0) & (alpha < C_i)) | ((y < 0) & (alpha > 0))
        low = ((y < 0) & (alpha < C_i)) | ((y > 0) & (alpha > 0))
        b = float(0.5 * (F[up].max() + F[low].min()))
    return alpha, b


def svc_no_threshold_dual(K, y, C, *, B=1.0, n_sweeps=5000, tol=1e-10):
    """min 0.5|w|^2 + C sum hinge with the threshold as a regularized feature of value B (kernel K + B^2).

    Box-constrained dual (no equality constraint) by cyclic exact coordinate ascent. Returns the
    expansion coefficients coef = y * alpha over all rows and the bias B^2 * sum(coef).
    """
    Kb = K + B * B
    Q = np.outer(y, y) * Kb
    n = y.size
    alpha = np.zeros(n)
    grad = -np.ones(n)  # Q alpha - 1
    for _ in range(n_sweeps):
        largest = 0.0
        for i in range(n):
            new = min(max(alpha[i] - grad[i] / Q[i, i], 0.0), C)
            delta = new - alpha[i]
            if delta != 0.0:
                largest = max(largest, abs(delta))
                alpha[i] = new
                grad += Q[:, i] * delta
        if largest < tol:
            break
    coef = y * alpha
    return coef, float(B * B * coef.sum())


# ---------------------------------------------------------------------------------------------
# Cutting planes (cpa, ocas): pairwise problems by explicit enumeration of the pairs, the reduced
# problem's primal and dual from their definitions, the OCAS line search by trying every segment.
# Nothing shared with worker/solvers/{cpa,ocas,ranking,reduced_qp,shared_pool}.py.
# ---------------------------------------------------------------------------------------------


def pairs_of(y, qid=None):
    """All ordered pairs (i, j) with y_i > y_j (and qid_i == qid_j when qid is given), as a list."""
    y = np.asarray(y)
    n = y.shape[0]
    return [(i, j) for i in range(n) for j in range(n) if y[i] > y[j] and (qid is None or qid[i] == qid[j])]


def pairwise_difference_problem(X, y, qid=None):
    """OP4 as a classification problem: rows s*(x_i - x_j) with label s, s alternating +1/-1.

    Hinge of row (s*(x_i - x_j), s) is max(0, 1 - <w, x_i - x_j>) whatever s, so a classifier without
    intercept trained with the same C on these rows solves OP4 (the alternating signs only give the
    reference solver two classes).
    """
    X = np.asarray(X, dtype=float)
    P = pairs_of(y, qid)
    signs = np.where(np.arange(len(P)) % 2 == 0, 1.0, -1.0)
    D = np.array([X[i] - X[j] for i, j in P]).reshape(len(P), X.shape[1])
    return D * signs[:, None], signs


def pairwise_primal(X, y, w, C, qid=None):
    """0.5*|w|^2 + C * sum over pairs y_i > y_j (same qid) of max(0, 1 - <w, x_i - x_j>), by enumeration."""
    X = np.asarray(X, dtype=float)
    s = X @ np.asarray(w, dtype=float)
    loss = sum(max(0.0, 1.0 - (s[i] - s[j])) for i, j in pairs_of(y, qid))
    return 0.5 * float(np.dot(w, w)) + C * loss


def pairwise_cut_counts(scores, y, qid=None):
    """c+_i = #{j: (i,j) pair, s_i - s_j < 1}, c-_j = #{i: (i,j) pair, s_i - s_j < 1}, by enumeration."""
    n = len(y)
    cplus = np.zeros(n, dtype=np.int64)
    cminus = np.zeros(n, dtype=np.int64)
    for i, j in pairs_of(y, qid):
        if scores[i] - scores[j] < 1.0:
            cplus[i] += 1
            cminus[j] += 1
    return cplus, cminus


def reduced_primal(Z, b, w, C):
    """F_t(w) = 0.5*|w|^2 + C * max(0, max_j b_j - <z_j, w>) for cuts given as rows of Z."""
    Z = np.asarray(Z, dtype=float)
    slack = max(0.0, float(np.max(np.asarray(b) - Z @ w))) if len(b) else 0.0
    return 0.5 * float(w @ w) + C * slack


def reduced_dual(Z, b, alpha):
    """D(alpha) = sum_j alpha_j b_j - 0.5*|sum_j alpha_j z_j|^2."""
    v = np.asarray(Z, dtype=float).T @ np.asarray(alpha, dtype=float)
    return float(np.dot(alpha, b)) - 0.5 * float(v @ v)


def line_search_min(A0, B0, Bi, Ci):
    """argmin_{k >= 0} 0.5 A0 k^2 + B0 k + sum_i max(0, k Bi + Ci), trying every linear piece."""
    Bi = np.asarray(Bi, dtype=float)
    Ci = np.asarray(Ci, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        kinks = np.where(Bi != 0, -Ci / Bi, -1.0)
    cuts = np.unique(np.concatenate(([0.0], kinks[kinks > 0])))
    G = lambda k: 0.5 * A0 * k * k + B0 * k + float(np.maximum(0.0, k * Bi + Ci).sum())  # noqa: E731
    best_k, best_G = 0.0, G(0.0)
    for a, b in zip(cuts, np.append(cuts[1:], np.inf)):
        mid = a + 1.0 if np.isinf(b) else 0.5 * (a + b)
        active = mid * Bi + Ci > 0
        k = -(B0 + Bi[active].sum()) / A0
        k = min(max(k, a), b)
        for cand in (a, k):
            if np.isfinite(cand) and G(cand) < best_G:
                best_k, best_G = cand, G(cand)
    return best_k, best_G


# ---------------------------------------------------------------------------------------------
# shared by the linear solver tests (dcd, cpa, ocas, ranking)
# ---------------------------------------------------------------------------------------------


def csr_parts(X):
    """(indptr int64, indices int32, data float64) of a dense or sparse matrix, indices sorted."""
    import scipy.sparse as sp

    A = sp.csr_matrix(X)
    A.sort_indices()
    return A.indptr.astype(np.int64), A.indices.astype(np.int32), A.data.astype(np.float64)


def hinge_primal(X, y, w, b, C, B):
    """0.5|w|^2 + 0.5 w_B^2 + C sum hinge for weights w and offset b = B * w_B (B None: no bias)."""
    import scipy.sparse as sp

    w_full = np.append(w, b / B) if B is not None else np.asarray(w)
    return svm_linear_primal(X.toarray() if sp.issparse(X) else X, y, w_full, C_neg=C, C_pos=C, loss="hinge", bias=B)


def linear_svc_optimum(X, y, C, B):
    """Optimum of 0.5|w|^2 + 0.5 w_B^2 + C sum hinge by scikit-learn's LinearSVC at a tight tolerance.

    Its coordinate order is seeded (``random_state=0``): unseeded, an unlucky order at C = 100 now and then
    ran out of its 10^6 iterations 0.4% above the optimum, and the oracle failed the solver it checks."""
    from sklearn.svm import LinearSVC

    clf = LinearSVC(
        random_state=0,
        dual=True,
        loss="hinge",
        C=C,
        tol=1e-8,
        max_iter=10**6,
        fit_intercept=B is not None,
        intercept_scaling=B if B is not None else 1.0,
    ).fit(X, y)
    b = float(clf.intercept_[0]) if B is not None else 0.0
    return hinge_primal(X, y, clf.coef_.ravel(), b, C, B)
