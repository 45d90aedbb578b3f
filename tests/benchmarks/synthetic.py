"""A generator of high-dimensional sparse classification data, the kind paper 000 (section 4) and paper 001
(section 5) were written for: text-like rows with a fixed number of non-zeros over a huge feature space.

Each row has ``nnz_per_row`` distinct features (default 50) out of ``n_features`` (default 10^6): half of
them drawn log-uniformly (a heavy head of frequent features, as words in text), half uniformly (a long tail
of rare ones). Values are positive, the row is scaled to unit length and every value is rounded to four
decimals (so the text has at most 7 significant digits and float32 holds it exactly), or, with
``significant_digits`` (TF-IDF-like text), to that many significant digits. A hidden hyperplane
``w_star`` (standard normal, fixed by ``seed``) labels each row: ``y = sign(w_star . x + noise * s * e)``
with ``e`` standard normal and ``s`` the standard deviation of the clean scores, so ``noise`` 0.5 gives
roughly 85 % Bayes accuracy. Rows are generated in blocks from ``(seed, first_row)``, so any slice of the
data can be produced on its own (a held-out set is ``rows(seed, n_test, first_row=n_train)``).

Command line (writes svmlight text, optionally gzip, at about 100 MB/s)::

    python -m tests.benchmarks.synthetic OUT.svm --rows 20000 [--features 1000000] [--nnz 50]
        [--first-row 0] [--seed 0] [--noise 0.5] [--significant-digits 6]

TF-IDF-like text (the upload benchmark's): ``--nnz 300 --significant-digits 6``.
"""

from __future__ import annotations

import argparse
import gzip
import sys

import numpy as np
from numba import njit

BLOCK_ROWS = 20_000
"""Rows generated per block; the block is the unit of the random streams, so slices are reproducible."""


@njit(cache=True)
def _block_indices(rng_u, n_features, nnz_per_row):
    """Distinct sorted feature indices (zero-based), ``nnz_per_row`` a row, from uniform draws ``rng_u``.

    ``rng_u`` has shape (rows, 4 * nnz_per_row); draws that repeat an index already taken are skipped,
    and a row that runs out of draws (practically never) falls back to the next free index."""
    n = rng_u.shape[0]
    out = np.empty((n, nnz_per_row), dtype=np.int64)
    log_f = np.log(n_features + 1.0)
    half = nnz_per_row // 2
    for i in range(n):
        taken = 0
        k = 0
        while taken < nnz_per_row:
            if k < rng_u.shape[1]:
                u = rng_u[i, k]
                k += 1
                if taken < half:
                    j = int(np.exp(u * log_f)) - 1  # log-uniform: P(j) ~ 1/(j+1)
                else:
                    j = int(u * n_features)
                if j >= n_features:
                    j = n_features - 1
            else:
                j = (out[i, taken - 1] + 1) % n_features if taken > 0 else 0
            dup = False
            for t in range(taken):
                if out[i, t] == j:
                    dup = True
                    break
            if not dup:
                out[i, taken] = j
                taken += 1
        out[i].sort()
    return out


def hidden_hyperplane(seed: int, n_features: int) -> np.ndarray:
    """The planted weight vector of the generator for ``seed`` (standard normal, one per feature)."""
    return np.random.default_rng([seed, 0xF00D]).standard_normal(n_features)


def rows(
    seed: int,
    n_rows: int,
    *,
    first_row: int = 0,
    n_features: int = 1_000_000,
    nnz_per_row: int = 50,
    noise: float = 0.5,
    significant_digits: int = 0,
):
    """Yield ``(indices, values, labels)`` blocks for rows ``first_row .. first_row + n_rows - 1``.

    ``indices`` is (rows, nnz_per_row) int64, zero-based and sorted within a row; ``values`` float64 with
    four decimals (``significant_digits`` > 0: that many significant digits); ``labels`` +1/-1. ``first_row`` must be a multiple of BLOCK_ROWS so that slices line up
    with the random streams."""
    if first_row % BLOCK_ROWS:
        raise ValueError(f"first_row must be a multiple of {BLOCK_ROWS}, got {first_row}")
    if nnz_per_row > n_features:
        raise ValueError(f"nnz_per_row ({nnz_per_row}) exceeds n_features ({n_features})")
    w_star = hidden_hyperplane(seed, n_features)
    # the score scale: for unit-norm rows, the clean score's standard deviation is about |w_star| / sqrt(F) = 1
    score_sd = 1.0
    done = 0
    while done < n_rows:
        block = (first_row + done) // BLOCK_ROWS
        rng = np.random.default_rng([seed, block])
        take = min(BLOCK_ROWS, n_rows - done)
        u = rng.random((BLOCK_ROWS, 4 * nnz_per_row))[:take]
        idx = _block_indices(u, n_features, nnz_per_row)
        raw = rng.uniform(0.1, 1.0, (BLOCK_ROWS, nnz_per_row))[:take]
        vals = raw / np.linalg.norm(raw, axis=1, keepdims=True)
        if significant_digits > 0:
            vals = round_significant(vals, significant_digits)
        else:
            vals = np.round(vals, 4)
            vals[vals == 0.0] = 1e-4
        e = rng.standard_normal(BLOCK_ROWS)[:take]
        scores = (w_star[idx] * vals).sum(axis=1) + noise * score_sd * e
        labels = np.where(scores >= 0.0, 1, -1).astype(np.int64)
        yield idx, vals, labels
        done += take


def csr(seed: int, n_rows: int, **kwargs):
    """The whole slice as a CSR triple ``(indptr, indices, data)`` (int64, int32, float64) and labels."""
    blocks = list(rows(seed, n_rows, **kwargs))
    idx = np.concatenate([b[0] for b in blocks])
    vals = np.concatenate([b[1] for b in blocks])
    y = np.concatenate([b[2] for b in blocks]).astype(np.float64)
    n, k = idx.shape
    indptr = np.arange(0, n * k + 1, k, dtype=np.int64)
    return indptr, idx.ravel().astype(np.int32), vals.ravel(), y


@njit(cache=True)
def _put_index(out, p, j, digits):
    """Write " j:" at ``out[p:]`` (``digits``: scratch space); return the position after it."""
    out[p] = 32  # ' '
    p += 1
    nd = 0
    while True:
        digits[nd] = 48 + j % 10
        nd += 1
        j //= 10
        if j == 0:
            break
    for d in range(nd - 1, -1, -1):
        out[p] = digits[d]
        p += 1
    out[p] = 58  # ':'
    return p + 1


@njit(cache=True)
def _format_block(idx, vals, labels):
    """svmlight text of a block (one-based indices, four decimals) as a uint8 array."""
    n, k = idx.shape
    out = np.empty(n * (3 + k * 16) + 16, dtype=np.uint8)
    p = 0
    digits = np.empty(20, dtype=np.uint8)
    for i in range(n):
        if labels[i] > 0:
            out[p] = 43  # '+'
        else:
            out[p] = 45  # '-'
        out[p + 1] = 49  # '1'
        p += 2
        for t in range(k):
            p = _put_index(out, p, idx[i, t] + 1, digits)
            q = int(vals[i, t] * 10000.0 + 0.5)
            out[p] = 48 + q // 10000
            out[p + 1] = 46  # '.'
            out[p + 2] = 48 + (q // 1000) % 10
            out[p + 3] = 48 + (q // 100) % 10
            out[p + 4] = 48 + (q // 10) % 10
            out[p + 5] = 48 + q % 10
            p += 6
        out[p] = 10
        p += 1
    return out[:p]


def round_significant(values: np.ndarray, digits: int) -> np.ndarray:
    """Positive ``values`` rounded to ``digits`` significant digits."""
    scale = 10.0 ** (digits - 1 - np.floor(np.log10(values)))
    return np.round(values * scale) / scale


@njit(cache=True)
def _format_block_significant(idx, vals, labels, digits):
    """svmlight text of a block (one-based indices, positive values with ``digits`` significant digits)."""
    n, k = idx.shape
    out = np.empty(n * (3 + k * (22 + digits)) + 16, dtype=np.uint8)
    p = 0
    buf = np.empty(24, dtype=np.uint8)
    for i in range(n):
        out[p] = 43 if labels[i] > 0 else 45  # '+' / '-'
        out[p + 1] = 49  # '1'
        p += 2
        for t in range(k):
            p = _put_index(out, p, idx[i, t] + 1, buf)
            v = vals[i, t]
            e = int(np.floor(np.log10(v)))
            m = int(np.round(v * 10.0 ** (digits - 1 - e)))
            if m >= 10**digits:
                m //= 10
                e += 1
            for d in range(digits - 1, -1, -1):
                buf[d] = 48 + m % 10
                m //= 10
            if e < 0:
                out[p] = 48  # '0'
                out[p + 1] = 46  # '.'
                p += 2
                for _ in range(-e - 1):
                    out[p] = 48
                    p += 1
                for d in range(digits):
                    out[p] = buf[d]
                    p += 1
            else:
                for d in range(digits):
                    if d == e + 1:
                        out[p] = 46
                        p += 1
                    out[p] = buf[d]
                    p += 1
        out[p] = 10
        p += 1
    return out[:p]


def write_svmlight(path: str, seed: int, n_rows: int, *, first_row: int = 0, **kwargs) -> int:
    """Write rows ``first_row ..`` of the generator to ``path`` (gzip when it ends in .gz); return bytes."""
    opener = gzip.open if path.endswith(".gz") else open
    written = 0
    digits = int(kwargs.get("significant_digits", 0))
    with opener(path, "wb") as fh:
        for idx, vals, labels in rows(seed, n_rows, first_row=first_row, **kwargs):
            if digits > 0:
                text = _format_block_significant(idx, vals, labels, digits)
            else:
                text = _format_block(idx, vals, labels)
            fh.write(text.tobytes())
            written += text.size
    return written


def main(argv=None) -> int:
    """Command-line entry: write a slice of the generator as svmlight text."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--first-row", type=int, default=0)
    parser.add_argument("--features", type=int, default=1_000_000)
    parser.add_argument("--nnz", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--noise", type=float, default=0.5)
    parser.add_argument(
        "--significant-digits", type=int, default=0, help="values with this many significant digits (0: four decimals)"
    )
    args = parser.parse_args(argv)
    size = write_svmlight(
        args.out,
        args.seed,
        args.rows,
        first_row=args.first_row,
        n_features=args.features,
        nnz_per_row=args.nnz,
        noise=args.noise,
        significant_digits=args.significant_digits,
    )
    print(f"{args.out}: {args.rows} rows, {size} bytes of text", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
