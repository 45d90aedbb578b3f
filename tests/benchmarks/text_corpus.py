"""A real text corpus for the benchmarks: 20 Newsgroups (the "bydate" split) as uni+bigram TF-IDF (issue 36).

The benchmarks' generated TF-IDF-like sets (``tests.benchmarks.synthetic``) have a fixed number of non-zeros a
row and values drawn from one distribution. Real text does not: rows of 20 Newsgroups hold 30 to 10,000
non-zeros, most features occur once, and the values are what scikit-learn's ``TfidfVectorizer`` computes
(``ngram_range=(1, 2)``, l2-normalized rows), written with 6 significant digits (``%.6g``: ``8801:0.0239435``),
as a user exporting a vectorizer's output with ``%g`` writes them. The vocabulary is fitted on the training
split; the test split uses it.

The corpus is the one scikit-learn's ``fetch_20newsgroups`` downloads (``20news-bydate.tar.gz``, 11,314 training
and 7,532 test posts, 20 groups; labels 1..20 in the order of the groups' names). Give ``--source`` a copy
(the tarball or the directory it unpacks to); without it the tarball is downloaded from scikit-learn's address
into the output folder once.

    python -m tests.benchmarks.text_corpus [--source PATH] [--out /tmp/hinge-text]

writes ``news20.svm`` and ``news20.t.svm`` under ``--out`` and prints their sizes.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tarfile
import urllib.request
from pathlib import Path

import numpy as np

ARCHIVE_URL = "https://ndownloader.figshare.com/files/5975967"
"""Where scikit-learn's ``fetch_20newsgroups`` downloads ``20news-bydate.tar.gz``."""

ARCHIVE_SHA256 = "8f1b2514ca22a5ade8fbb9cfa5727df95fa587f4c87b786e15c759fa66d95610"
"""The tarball's checksum (scikit-learn's)."""

DEFAULT_OUT = Path("/tmp/hinge-text")
"""Where the svmlight files go unless ``--out`` says otherwise."""


def _unpacked(source: Path | None, out: Path) -> Path:
    """The directory holding ``20news-bydate-train`` and ``20news-bydate-test``, downloading or unpacking as needed."""
    if source is not None and source.is_dir():
        for candidate in (source, source / "20news-bydate"):
            if (candidate / "20news-bydate-train").is_dir():
                return candidate
        raise SystemExit(f"text_corpus: {source} holds no 20news-bydate-train folder")
    tree = out / "20news-bydate"
    if (tree / "20news-bydate-train").is_dir():
        return tree
    tarball = source if source is not None else out / "20news-bydate.tar.gz"
    if not tarball.exists():
        print(f"downloading {ARCHIVE_URL} -> {tarball}", flush=True)
        try:
            urllib.request.urlretrieve(ARCHIVE_URL, str(tarball) + ".part")
        except OSError as exc:
            raise SystemExit(f"text_corpus: cannot download the corpus ({exc}); pass --source with a copy") from exc
        os.rename(str(tarball) + ".part", tarball)
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    if digest != ARCHIVE_SHA256:
        print(f"warning: {tarball} has sha256 {digest}, not scikit-learn's {ARCHIVE_SHA256}", file=sys.stderr)
    tree.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball) as tar:
        tar.extractall(tree, filter="data")
    return tree


def _posts(folder: Path, groups: list[str]) -> tuple[list[str], np.ndarray]:
    """Every post under ``folder`` (decoded as latin-1, as scikit-learn does) and its group's number (1-based)."""
    texts, labels = [], []
    for number, group in enumerate(groups, start=1):
        for path in sorted((folder / group).iterdir(), key=lambda p: p.name):
            texts.append(path.read_bytes().decode("latin-1"))
            labels.append(number)
    return texts, np.asarray(labels)


def write_svmlight_g6(path: Path, matrix, labels: np.ndarray) -> int:
    """Write CSR ``matrix`` with ``labels`` as svmlight text, values as ``%.6g``, indices 1-based; return bytes."""
    indptr, indices, data = matrix.indptr, matrix.indices, matrix.data
    written = 0
    with open(str(path) + ".part", "w", encoding="ascii") as fh:
        for i in range(matrix.shape[0]):
            lo, hi = indptr[i], indptr[i + 1]
            order = np.argsort(indices[lo:hi], kind="stable") + lo
            pairs = " ".join(f"{j + 1}:{v:.6g}" for j, v in zip(indices[order].tolist(), data[order].tolist()))
            line = f"{labels[i]} {pairs}\n"
            fh.write(line)
            written += len(line)
    os.rename(str(path) + ".part", path)
    return written


def build(out: Path = DEFAULT_OUT, source: Path | None = None) -> tuple[Path, Path]:
    """``news20.svm`` and ``news20.t.svm`` under ``out`` (made once); return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    train_path, test_path = out / "news20.svm", out / "news20.t.svm"
    if train_path.exists() and test_path.exists():
        return train_path, test_path
    from sklearn.feature_extraction.text import TfidfVectorizer

    tree = _unpacked(source, out)
    groups = sorted(p.name for p in (tree / "20news-bydate-train").iterdir() if p.is_dir())
    train_texts, train_labels = _posts(tree / "20news-bydate-train", groups)
    test_texts, test_labels = _posts(tree / "20news-bydate-test", groups)
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), dtype=np.float64)
    train = vectorizer.fit_transform(train_texts).tocsr()
    test = vectorizer.transform(test_texts).tocsr()
    for path, matrix, labels in ((train_path, train, train_labels), (test_path, test, test_labels)):
        size = write_svmlight_g6(path, matrix, labels)
        print(
            f"{path}: {matrix.shape[0]} rows, {matrix.shape[1]} features, {matrix.nnz} non-zeros, {size / 1e6:.1f} MB"
        )
    return train_path, test_path


def main(argv=None) -> int:
    """Build the corpus's svmlight files."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", type=Path, default=None, help="20news-bydate.tar.gz or the folder it unpacks to")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    for path in build(args.out, args.source):
        print(path, path.stat().st_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
