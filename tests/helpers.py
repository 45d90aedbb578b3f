"""Shared test helpers: polling with a deadline, generated data sets as svmlight text (and rows shaped like
a9a), upload and job polling over HTTP, the one error shape, `hinge serve` waited for and stopped,
liblinear-official as an oracle, and what a warm-up left compiled."""

from __future__ import annotations

import gzip
import io
import json
import os
import signal
import subprocess
import tempfile
import time

import httpx
import numpy as np
import scipy.sparse as sp

from core.schemas.base import ErrorResponse
from core.storage.jobs import FINAL_STATES

READY_TIMEOUT_S = float(os.environ.get("HINGE_TEST_READY_TIMEOUT", "600"))
"""How long the tests wait for a service to be ready (every kernel compiled, on a cold cache)."""


def npm_install(directory, name: str, packages: list[str]) -> None:
    """Install npm packages (``name@version``) into ``directory``'s node_modules, once: nothing is done when every
    package's folder is there (the tests that need npm skip, saying so, where npm is missing)."""
    from pathlib import Path

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if all((directory / "node_modules" / package.rsplit("@", 1)[0]).exists() for package in packages):
        return
    (directory / "package.json").write_text(json.dumps({"name": name, "private": True, "type": "module"}))
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--silent", *packages],
        cwd=directory,
        check=True,
        capture_output=True,
        timeout=600,
    )


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.05, message: str = "condition"):
    """Poll ``predicate`` until it returns a truthy value (returned) or fail after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {message}")
        time.sleep(interval)


def liblinear_train(X, y, options: str):
    """Train liblinear-official on (X, y) with its command-line ``options``; returns (model, converged).

    ``converged`` is read from liblinear's own output ("reaching max number of iterations" means it stopped
    at its iteration cap), so pass options without -q when that matters. Callers skip the test first with
    ``pytest.importorskip("liblinear.liblinearutil")``.
    """
    import scipy.sparse as sp
    from liblinear import liblinearutil

    with tempfile.TemporaryFile(mode="w+b") as captured:
        saved = os.dup(1)
        os.dup2(captured.fileno(), 1)
        try:
            model = liblinearutil.train(list(np.asarray(y, dtype=float)), sp.csr_matrix(X), options)
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        captured.seek(0)
        output = captured.read().decode(errors="replace")
    return model, "reaching max number of iterations" not in output


def liblinear_w_full(model, bias, label_idx: int = 0, positive_label: float = 1.0) -> np.ndarray:
    """liblinear's (w, b) for its ``label_idx``-th label as w with w_B = b / bias appended (bias None: w alone),
    signed so that it scores ``positive_label`` positive (liblinear orders labels as it first meets them)."""
    w, b = model.get_decfun(label_idx)
    w = np.asarray(w, dtype=float)
    sign = 1.0 if model.get_labels()[label_idx] == positive_label else -1.0
    w_full = w if bias is None else np.append(w, b / bias)
    return sign * w_full


def kernels_compiled_after_warm_up(modules: list[str], warm_up: str, use: str) -> list[list[str]]:
    """The numba kernels (name, signature) of ``modules`` that ``use`` (Python source) still compiles or loads
    after ``warm_up`` (Python source) ran, in a fresh interpreter (so that nothing else compiled them before).

    A warm-up is for a worker (or parser process) to do all its compiling before it takes a job: the
    answer should be empty.
    """
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    code = "\n".join(
        [
            "import importlib, json",
            "import numpy as np",
            "from tests.helpers import compiled_signatures",
            f"modules = [importlib.import_module(name) for name in {modules!r}]",
            warm_up,
            "before = compiled_signatures(*modules)",
            use,
            "print(json.dumps(sorted(compiled_signatures(*modules) - before)))",
        ]
    )
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def compiled_signatures(*modules) -> set[tuple[str, str]]:
    """(kernel name, signature) of every compiled (or cache-loaded) specialization of the numba kernels
    defined in ``modules``, in this process."""
    from numba.core.registry import CPUDispatcher

    found = set()
    for module in modules:
        for name, value in vars(module).items():
            if isinstance(value, CPUDispatcher) and value.py_func.__module__ == module.__name__:
                found.update((f"{module.__name__}.{name}", str(sig)) for sig in value.signatures)
    return found


def sparse_problem(
    n_rows: int,
    n_features: int,
    nnz_per_row: int,
    seed: int = 0,
    noise: float = 0.1,
    n_classes: int = 2,
    random_labels: bool = False,
):
    """A seeded sparse classification problem: CSR pieces and labels from a hidden linear model."""
    rng = np.random.default_rng(seed)
    indptr = np.arange(n_rows + 1, dtype=np.int64) * nnz_per_row
    indices = np.empty(n_rows * nnz_per_row, dtype=np.int32)
    for i in range(n_rows):
        indices[i * nnz_per_row : (i + 1) * nnz_per_row] = np.sort(rng.choice(n_features, nnz_per_row, replace=False))
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
    """Wait until a job's status is one of ``statuses``; returns the job. For ended statuses it asks the API's long
    poll (``?wait_s``: one request answered as the job ends); for others (``running``) it polls every 50 ms."""
    long_poll = set(statuses) <= {status.value for status in FINAL_STATES}
    end = time.monotonic() + timeout
    read_timeout = getattr(getattr(http, "timeout", None), "read", None)  # a wait shorter than the client's patience
    longest = 10.0 if read_timeout is None else max(0.5, min(10.0, read_timeout - 1.0))

    def done():
        params = {"wait_s": round(min(longest, max(0.0, end - time.monotonic())), 1)} if long_poll else None
        job = http.get(f"/v1/jobs/{job_id}", params=params).json()
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
    from worker.runtime.progress import TraceSink

    return TraceSink(NullJobs(), "job_test", 0.05, subproblems)


def assert_error(response, status: int, code: str, *fragments: str) -> dict:
    """Check an answer in the one error shape, as documented: its status, code and message fragments; returns the error."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}, body
    assert body["error"]["code"] == code, body
    ErrorResponse.model_validate(body)  # the details match a shape the OpenAPI document names
    for fragment in fragments:
        assert fragment in body["error"]["message"], (fragment, body["error"]["message"])
    return body["error"]


def a9a_stand_in(n_rows: int, seed: int):
    """Rows shaped like a9a: 123 binary features in 14 one-hot groups (one active per group), ~24% positives."""
    rng = np.random.default_rng(seed)
    sizes = [5, 8, 5, 16, 5, 7, 14, 6, 5, 2, 2, 2, 5, 41]
    columns = []
    offset = 0
    for size in sizes:
        probabilities = rng.dirichlet(np.full(size, 0.7))
        columns.append(offset + rng.choice(size, size=n_rows, p=probabilities))
        offset += size
    cols = np.stack(columns, axis=1)
    weights = rng.normal(size=offset)
    score = weights[cols].sum(axis=1) + 0.4 * weights[cols[:, 3]] * weights[cols[:, 6]] + rng.normal(size=n_rows)
    y = np.where(score > np.quantile(score, 0.76), 1.0, -1.0)
    indptr = np.arange(0, n_rows * len(sizes) + 1, len(sizes), dtype=np.int64)
    indices = np.sort(cols, axis=1).reshape(-1).astype(np.int32)
    matrix = sp.csr_matrix((np.ones(indices.size), indices, indptr), shape=(n_rows, offset))
    return matrix, y


def wait_http(base: str, path: str, proc: subprocess.Popen, status: int = 200, timeout: float = READY_TIMEOUT_S):
    """Wait until ``base + path`` answers ``status`` (fails fast if `hinge serve` exited)."""

    def check():
        assert proc.poll() is None, f"hinge serve exited with {proc.returncode}"
        try:
            return httpx.get(base + path, timeout=2).status_code == status
        except httpx.HTTPError:
            return False

    wait_for(check, timeout=timeout, interval=0.2, message=f"{base}{path} -> {status}")


def service_ready(base: str, *, all_kernels: bool = False) -> list[str] | None:
    """Whether ``hinge serve`` at ``base`` is ready: None while /readyz does not answer 200, else the solvers still
    compiling when ``all_kernels`` asks for every solver (empty: ready). A benchmark measured while a builder
    compiles in the background shares the cores with it: on a cache that lacked the current kernels, a
    2-process search measured 1.0x where it gives 1.4x."""
    try:
        answer = httpx.get(base + "/readyz", timeout=2)
    except httpx.HTTPError:
        return None
    if answer.status_code != 200:
        return None
    return (answer.json().get("solvers_compiling") or []) if all_kernels else []


def terminate_group(proc: subprocess.Popen, grace_s: float) -> None:
    """Stop a process started in a session of its own, with its group: SIGTERM, then SIGKILL after ``grace_s``."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(grace_s)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)


def stop_serve(proc: subprocess.Popen, sig=signal.SIGINT) -> set[int]:
    """Signal `hinge serve` (SIGINT: Ctrl-C) and check that it exits 0; returns the processes it had."""
    from tests.cluster import descendants  # tests.cluster imports the fixtures, which import this module

    family = descendants(proc.pid)
    proc.send_signal(sig)
    assert proc.wait(60) == 0
    return family


def cancer_arrays():
    """breast_cancer standardized, as CSR arrays with labels in {-1, +1}, and its number of features."""
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    matrix = sp.csr_matrix(X)
    return {
        "indptr": matrix.indptr.astype(np.int64),
        "indices": matrix.indices.astype(np.int32),
        "data": matrix.data,
        "y": np.where(y == 1, 1.0, -1.0),
    }, X.shape[1]


def with_params(schema, keywords: dict) -> dict:
    """A direct call's keywords with the fields of the solver's params ``schema`` gathered into ``params=``, the
    schema's model (validated, its defaults for the rest), as the worker calls the solve functions."""
    from worker.training.registry import KEYWORD_FIELDS

    names = {name for name in schema.model_fields if name not in KEYWORD_FIELDS}
    names |= {field.alias for name, field in schema.model_fields.items() if field.alias and name in names}
    fields = {name: value for name, value in keywords.items() if name in names}
    return {"params": schema(**fields), **{name: value for name, value in keywords.items() if name not in names}}


def breast_cancer_scaled():
    """breast_cancer standardized by scikit-learn's StandardScaler, as a CSR matrix, with labels in {-1, +1} (the smo
    tests' data: their saved runs were recorded on exactly these values)."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    X, y = load_breast_cancer(return_X_y=True)
    return sp.csr_matrix(StandardScaler().fit_transform(X)), np.where(y == 1, 1.0, -1.0)
