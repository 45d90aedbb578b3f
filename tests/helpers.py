"""Shared test helpers: generated data sets as svmlight text, upload and job polling over HTTP."""

from __future__ import annotations

import gzip
import io

import numpy as np

from tests.conftest import wait_for


def sparse_problem(n_rows: int, n_features: int, nnz_per_row: int, seed: int = 0, noise: float = 0.1,
                   n_classes: int = 2, random_labels: bool = False):
    """A seeded sparse classification problem: CSR pieces and labels from a hidden linear model."""
    rng = np.random.default_rng(seed)
    indptr = np.arange(n_rows + 1, dtype=np.int64) * nnz_per_row
    indices = np.empty(n_rows * nnz_per_row, dtype=np.int32)
    for i in range(n_rows):
        indices[i * nnz_per_row:(i + 1) * nnz_per_row] = np.sort(rng.choice(n_features, nnz_per_row, replace=False))
    data = rng.normal(size=indices.size)
    hidden = rng.normal(size=(n_classes if n_classes > 2 else 1, n_features))
    scores = np.zeros((n_rows, hidden.shape[0]))
    for i in range(n_rows):
        sl = slice(indptr[i], indptr[i + 1])
        scores[i] = hidden[:, indices[sl]] @ data[sl]
    scores += noise * rng.normal(size=scores.shape)
    if random_labels:
        y = rng.integers(0, max(2, n_classes), size=n_rows).astype(float)
        if n_classes == 2:
            y = np.where(y > 0, 1.0, -1.0)
    elif n_classes == 2:
        y = np.where(scores[:, 0] > 0, 1.0, -1.0)
    else:
        y = np.argmax(scores, axis=1).astype(float) + 1
    return indptr, indices, data, y


def to_svmlight(indptr, indices, data, y, zero_based: bool = False, qid=None) -> bytes:
    """svmlight text of a CSR problem (one-based indices unless zero_based)."""
    out = io.StringIO()
    base = 0 if zero_based else 1
    for i in range(y.size):
        label = int(y[i]) if float(y[i]).is_integer() else y[i]
        parts = [str(label)]
        if qid is not None:
            parts.append(f"qid:{int(qid[i])}")
        for j in range(indptr[i], indptr[i + 1]):
            parts.append(f"{indices[j] + base}:{float(data[j])!r}")
        out.write(" ".join(parts) + "\n")
    return out.getvalue().encode()


def gzipped(text: bytes) -> bytes:
    """gzip-compressed bytes."""
    return gzip.compress(text)


def upload(http, content: bytes, filename: str = "data.svm", **params):
    """POST a file to /v1/datasets; returns the httpx response."""
    return http.post("/v1/datasets", params=params, files={"file": (filename, content, "application/octet-stream")})


def wait_job(http, job_id: str, statuses=("succeeded", "failed", "canceled"), timeout: float = 120.0) -> dict:
    """Poll a job until its status is one of ``statuses``; returns the job."""

    def done():
        job = http.get(f"/v1/jobs/{job_id}").json()
        return job if job["status"] in statuses else None

    return wait_for(done, timeout=timeout, interval=0.05, message=f"job {job_id} to reach {statuses}")


class NullJobs:
    """A job store that keeps what a sink publishes in memory (no Redis)."""

    def __init__(self):
        self.points: list[dict] = []
        self.progress: list[dict] = []

    def update(self, job_id, **fields):
        if "progress" in fields:
            self.progress.append(fields["progress"])

    def append_trace(self, job_id, points, progress=None):
        self.points.extend(points)
        if progress is not None:
            self.progress.append(progress)


def NullSink(subproblems: int = 1):
    """A real trace sink for running the dispatcher in-process: points and progress stay in ``sink.jobs``."""
    from worker.progress import TraceSink

    return TraceSink(NullJobs(), "job_test", 0.05, subproblems)
