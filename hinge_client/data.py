"""Arrays to the text the service parses: svmlight lines (one-based indices), and predict rows.

numpy is imported by the functions that need it, not with the module: ``hingectl`` loads this module for every
command, most of which never touch an array (numpy was 50 ms of each command's start)."""

from __future__ import annotations


def _csr(X):
    """X as (indptr, indices, data, n_rows, n_features) of a CSR matrix (numpy or scipy input)."""
    import numpy as np

    try:
        import scipy.sparse as sp
    except ImportError:  # pragma: no cover - scipy comes with numpy-based stacks
        sp = None
    if sp is not None and sp.issparse(X):
        matrix = sp.csr_matrix(X)
        matrix.sort_indices()
        return matrix.indptr, matrix.indices, matrix.data, matrix.shape[0], matrix.shape[1]
    dense = np.asarray(X, dtype=np.float64)
    if dense.ndim != 2:
        raise ValueError(f"X must be two-dimensional, got shape {dense.shape}")
    rows, columns = np.nonzero(dense)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=dense.shape[0]))])
    return indptr, columns, dense[rows, columns], dense.shape[0], dense.shape[1]


def to_svmlight(X, y, qid=None) -> bytes:
    """svmlight text of rows X (dense or scipy sparse) with labels y (and query ids), features numbered from 1.

    The last feature is written (as an explicit 0 when the first row lacks it), so the service sees
    all X.shape[1] features even when the last columns are empty.
    """
    import numpy as np

    indptr, indices, data, n_rows, n_features = _csr(X)
    y = np.asarray(y).reshape(-1)
    if y.size != n_rows:
        raise ValueError(f"X has {n_rows} rows but y has {y.size} labels")
    lines = []
    for i in range(n_rows):
        label = y[i].item() if hasattr(y[i], "item") else y[i]
        parts = [repr(int(label)) if float(label).is_integer() else repr(float(label))]
        if qid is not None:
            parts.append(f"qid:{int(qid[i])}")
        lo, hi = indptr[i], indptr[i + 1]
        parts.extend(
            f"{j + 1}:{v!r}"
            for j, v in zip(indices[lo:hi].tolist(), np.asarray(data[lo:hi], dtype=np.float64).tolist())
        )
        if i == 0 and n_features and (hi == lo or indices[hi - 1] != n_features - 1):
            parts.append(f"{n_features}:0")
        lines.append(" ".join(parts))
    return ("\n".join(lines) + "\n").encode()


def predict_rows(X) -> list:
    """Rows for a predict request: dense lists for dense X, {"index": value} maps (from 1) for sparse X."""
    import numpy as np

    try:
        import scipy.sparse as sp
    except ImportError:  # pragma: no cover
        sp = None
    if sp is not None and sp.issparse(X):
        indptr, indices, data, n_rows, _ = _csr(X)
        return [
            {
                str(j + 1): v
                for j, v in zip(
                    indices[indptr[i] : indptr[i + 1]].tolist(),
                    np.asarray(data[indptr[i] : indptr[i + 1]], dtype=np.float64).tolist(),
                )
            }
            for i in range(n_rows)
        ]
    return np.asarray(X, dtype=np.float64).tolist()
