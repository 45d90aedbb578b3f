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
        slack = slack ** 2
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
