"""What ``HingeClassifier``, ``HingeRanker`` (``hinge_client.estimators``) and ``HingeRegressor``
(``hinge_client.regressor``) share: a connection's client and solver list (one per connection, outside the
estimators), the job's seed and processes from scikit-learn's ``random_state`` and ``n_jobs``, the parameters every
job takes the same way, a kernel's params, the service's warnings issued as ``ConvergenceWarning``, a linear model's
weights and a kernel model's support vectors from its export, and ``_RemoteModel``, the base that uploads, trains,
owns what a fit leaves and predicts in batches. ``HingeOneClassSVM`` (``hinge_client.one_class``) uses it too.
"""

from __future__ import annotations

import json
import numbers
import threading
import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted, validate_data

from hinge_client.cleanup import Leftovers, janitor
from hinge_client.client import Client
from hinge_client.data import predict_rows
from hinge_client.errors import HingeError, JobFailed
from hinge_client.solvers import SolverInfo, solvers_in
from hinge_client.types import Model

MAX_ROWS_PER_REQUEST = 10_000
MAX_VALUES_PER_REQUEST = 500_000
"""Rows go to predict in batches of at most this many rows and this many values (under the body limit)."""

_clients: dict = {}
_clients_lock = threading.Lock()


def client_for(url: str | None, api_key: str | None, timeout: float) -> Client:
    """The shared client of a connection (made on first use)."""
    key = (url, api_key, timeout)
    with _clients_lock:
        if key not in _clients:
            _clients[key] = Client(url, api_key, timeout=timeout)
        return _clients[key]


_service_solvers: dict[tuple, dict[str, SolverInfo]] = {}


def service_solvers(url: str | None, api_key: str | None, timeout: float) -> dict[str, SolverInfo]:
    """The solvers of the service at ``url`` and what each takes (its OpenAPI document, read once per process)."""
    key = (url, api_key, timeout)
    if key not in _service_solvers:
        _service_solvers[key] = solvers_in(client_for(url, api_key, timeout).openapi())
    return _service_solvers[key]


def seed_of(random_state) -> int:
    """The job's seed: an int as is, None as 0, a numpy RandomState as its next draw."""
    if random_state is None:
        return 0
    if isinstance(random_state, numbers.Integral):
        return int(random_state)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    raise ValueError(f"random_state must be an int, None or a numpy RandomState, got {random_state!r}")


def n_processes_of(n_jobs) -> int | None:
    """The job's ``n_processes`` for scikit-learn's ``n_jobs``: None and -1 (every core) leave it to the worker
    (its cores), a positive int is that many processes."""
    if n_jobs is None or n_jobs == -1:
        return None
    if isinstance(n_jobs, numbers.Integral) and not isinstance(n_jobs, bool) and int(n_jobs) >= 1:
        return int(n_jobs)
    raise ValueError(
        f"n_jobs must be None, -1 (the worker's cores) or a positive int (processes of the job), got {n_jobs!r}"
    )


PRECOMPUTED = "precomputed"
"""``kernel="precomputed"``: X is a kernel matrix, (n_samples, n_samples) to fit and (n, n_samples of the fit) to
predict, as scikit-learn's SVC, SVR and OneClassSVM take it; smo trains it as LIBSVM's -t 4 (``precomputed_rows``)."""
KERNELS = ("linear", "rbf", "poly", "sigmoid", PRECOMPUTED)
"""The kernels of the service's smo (and scikit-learn's SVC, SVR and OneClassSVM)."""


def kernel_params(kernel: str, gamma, degree, coef0) -> dict:
    """The job's ``kernel`` for scikit-learn's kernel parameters: gamma (a number or "scale") for all but linear,
    coef0 for poly and sigmoid, degree for poly; what a kernel does not use is left out, as scikit-learn ignores it."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {', '.join(map(repr, KERNELS))}, got {kernel!r}")
    params: dict = {"type": kernel}
    if kernel == PRECOMPUTED:
        return params
    if kernel != "linear":
        params["gamma"] = gamma if isinstance(gamma, str) else float(gamma)
    if kernel in ("poly", "sigmoid"):
        params["coef0"] = float(coef0)
    if kernel == "poly":
        params["degree"] = int(degree)
    return params


def warn_service_warnings(*records: dict) -> list[dict]:
    """Issue every entry of the records' ``warnings`` lists (a job's, a model's: ``{"code", "message"}``; an
    absent list is none) as scikit-learn's ``ConvergenceWarning``, once per distinct entry, the message followed
    by its code; the warning also carries ``code``. Returns the entries issued."""
    issued: list[dict] = []
    for record in records:
        for entry in (record or {}).get("warnings") or []:
            if entry in issued:
                continue
            issued.append(entry)
            code = entry.get("code", "warning")
            warning = ConvergenceWarning(f"{entry.get('message', '')} [Hinge: {code}]")
            warning.code = code
            warnings.warn(warning, stacklevel=3)
    return issued


def linear_weights(document: dict, n_features: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(coef, intercept) of an exported model whose scores are linear, X @ coef.T + intercept; else None.

    Linear models give their weights; kernel models with the linear kernel the sum of their support vectors
    times their coefficients. coef has one row per score: per class (one-vs-rest), or, for a one-vs-one model,
    per pair of labels as SVC's (the pairs of its labels in ascending order, positive for the first).
    """
    intercept = np.asarray(document["offsets"], dtype=np.float64)
    one_vs_one = document.get("multiclass") == "ovo"
    if one_vs_one and document.get("ovo_labels") != sorted(document.get("ovo_labels") or []):
        return None  # an import's pairs in its file's label order: not SVC's
    if document["kind"] == "linear":
        coef = np.asarray(document["weights"], dtype=np.float64).reshape(intercept.size, -1)
    elif (document.get("kernel") or {}).get("type") == "linear":
        vectors = document["support_vectors"]
        indptr = np.asarray(vectors["indptr"], dtype=np.int64)
        dense = np.zeros((indptr.size - 1, document["n_features"]))
        rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
        dense[rows, np.asarray(vectors["indices"], dtype=np.int64)] = np.asarray(vectors["data"], dtype=np.float64)
        coef = np.asarray(document["coef"], dtype=np.float64).reshape(intercept.size, -1) @ dense
    else:
        return None
    width = min(coef.shape[1], n_features)  # the model reads n_features columns; X has n_features_in_
    padded = np.zeros((coef.shape[0], n_features))
    padded[:, :width] = coef[:, :width]
    return padded, intercept


def support_vectors(document: dict, n_features: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(dual_coef, support_vectors, intercept) of an exported kernel model with one score, as scikit-learn's SVR and
    OneClassSVM give them: (1, n_SV), dense (n_SV, n_features) and (1,), its score being
    dual_coef @ K(support_vectors, x) + intercept (for a one-class model intercept is -rho); else None."""
    if document["kind"] != "kernel" or len(document["offsets"]) != 1:
        return None
    coef = np.asarray(document["coef"], dtype=np.float64).reshape(1, -1)
    offsets = np.asarray(document["offsets"], dtype=np.float64).reshape(1)
    if (document.get("kernel") or {}).get("type") == PRECOMPUTED:  # no vectors, only serials: (0, 0) as SVR's
        return coef, np.empty((0, 0)), offsets
    vectors = document["support_vectors"]
    indptr = np.asarray(vectors["indptr"], dtype=np.int64)
    indices = np.asarray(vectors["indices"], dtype=np.int64)
    data = np.asarray(vectors["data"], dtype=np.float64)
    keep = indices < n_features  # the model reads n_features columns; X has n_features_in_
    dense = np.zeros((indptr.size - 1, n_features))
    rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    dense[rows[keep], indices[keep]] = data[keep]
    return coef, dense, offsets


def precomputed_rows(K, serials: bool):
    """A kernel matrix's rows in the layout smo reads (LIBSVM's -t 4): column 0 the row's serial number (1..n for the
    n rows of a fit, whose kernel values K[i, j] = k(x_i, x_j) follow; 0 for rows to predict, whose K[i, j] =
    k(x_i, x_j of the fit)), then the kernel values, so that column j + 1 holds the values against training row j."""
    import scipy.sparse as sp  # scikit-learn's own dependency, as the estimators are

    first = np.arange(1.0, K.shape[0] + 1.0) if serials else np.zeros(K.shape[0])
    if sp.issparse(K):
        return sp.hstack([sp.csr_matrix(first.reshape(-1, 1)), K], format="csr")
    return np.hstack([first.reshape(-1, 1), np.asarray(K, dtype=np.float64)])


class _RemoteModel(BaseEstimator):
    """What both estimators share: connection, upload and job, batched predict calls."""

    def _client(self) -> Client:
        return client_for(self.url, self.api_key, self.timeout)

    def _job_params(self) -> dict:
        """What every estimator sends the same way: ``seed`` (from random_state), and ``max_iter`` and
        ``max_seconds`` when set (None: the service's default, no deadline)."""
        params: dict = {"seed": seed_of(self.random_state)}
        if self.max_iter is not None:
            params["max_iter"] = int(self.max_iter)
        if self.max_seconds is not None:
            params["max_seconds"] = float(self.max_seconds)
        return params

    def _precomputed(self) -> bool:
        """Whether X is a kernel matrix (``kernel="precomputed"``)."""
        return getattr(self, "kernel", None) == PRECOMPUTED

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self._precomputed()
        return tags

    def _adopt(self, model: Model) -> None:
        """Keep a fit's model: ``model_id_``, ``model_`` (its record) and ``n_iter_`` (at least 1)."""
        self.model_id_ = model["id"]
        self.n_iter_ = max(1, int(model.get("n_iter") or 1))
        self.model_ = model

    def _exported(self) -> dict:
        """The fitted model's JSON export (the service's ``hinge-model`` document)."""
        return json.loads(self._client().export_model(self.model_id_, "json"))

    def _exported_linear(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(coef, intercept) of the fitted model from its JSON export (``linear_weights``); None if not linear."""
        return linear_weights(self._exported(), self.n_features_in_)

    def _train(self, X, y, solver: str, params: dict, qid=None) -> Model:
        """Upload, train, and own what the fit left (deleted with this estimator unless keep_model); the job's
        and the model's warnings are issued as ConvergenceWarning."""
        client = self._client()
        if self._precomputed():
            if X.shape[0] != X.shape[1]:
                raise ValueError(
                    f"kernel='precomputed' fits a square kernel matrix, K[i, j] = k(x_i, x_j) for the n training "
                    f"samples; X is {X.shape[0]}x{X.shape[1]}"
                )
            X = precomputed_rows(X, serials=True)
        dataset_id = client.upload_arrays(X, y, qid=qid)["id"]
        try:
            job = client.wait_job(client.submit_job(dataset_id, solver, params)["id"], timeout=self.timeout)
            model_id = job.get("model_id")
            if job["status"] != "succeeded" or not model_id:
                raise JobFailed(job)
            model = client.get_model(model_id)
        except JobFailed as exc:
            if not self.keep_model:  # the failed job (and a canceled job's model) would only pile up
                Leftovers(client, exc.job.get("model_id"), exc.job.get("id")).delete()
            raise
        except HingeError as exc:
            if exc.status == 422:
                raise ValueError(
                    f"{type(self).__name__}: the service refused the training request: {exc.message}"
                ) from None
            raise
        finally:
            if not self.keep_data:
                try:
                    client.delete_dataset(dataset_id)
                except HingeError:
                    pass
        self._own(Leftovers(client, model["id"], model.get("job_id"), dataset_id if self.keep_data else None))
        warn_service_warnings(dict(job), dict(model))
        return model

    def _own(self, leftovers: Leftovers) -> None:
        """This fit's model replaces the last one's (deleted now); it goes with the estimator unless keep_model."""
        previous = self.__dict__.get("_cleanup")
        if previous is not None:
            previous()
        self._cleanup = None if self.keep_model else janitor.own(self, leftovers)

    def __getstate__(self):
        # a pickled or copied estimator uses the model: it is never deleted on this one's behalf
        state = dict(super().__getstate__())
        cleanup = state.pop("_cleanup", None)
        if cleanup is not None:
            janitor.keep(cleanup)
        return state

    def _predict_remote(self, X, probabilities: bool = False, decision_function_shape: str = "ovr") -> dict:
        """Labels, scores (and probabilities) of the rows, in batches."""
        if self._precomputed():
            X = precomputed_rows(X, serials=False)
        width = max(1, X.shape[1])
        batch = max(1, min(MAX_ROWS_PER_REQUEST, MAX_VALUES_PER_REQUEST // width))
        labels: list = []
        scores: list[float | list[float]] = []
        probs: list[list[float]] = []
        client = self._client()
        for start in range(0, X.shape[0], batch):
            answer = client.predict(
                self.model_id_,
                predict_rows(X[start : start + batch]),
                probabilities=probabilities,
                decision_function_shape=decision_function_shape,
            )
            labels.extend(answer["labels"] or [])
            scores.extend(answer["scores"])
            if probabilities:
                probs.extend(answer["probabilities"] or [])
        return {
            "labels": labels,
            "scores": np.asarray(scores, dtype=np.float64),
            "probabilities": np.asarray(probs, dtype=np.float64) if probabilities else None,
        }

    def _check_rows(self, X):
        check_is_fitted(self, "model_id_")
        return validate_data(self, X, reset=False, accept_sparse="csr", dtype=np.float64)
