"""scikit-learn estimators that train and predict on a Hinge service: ``HingeClassifier`` and ``HingeRanker``.

``fit`` uploads the rows (as svmlight, features numbered from 1), trains a job remotely and keeps the
model's id; ``predict``, ``decision_function`` and ``predict_proba`` send the rows to the model's
predict route. ``get_params`` / ``set_params`` are the solver's parameters (``C``, ``kernel``,
``gamma``, ``loss``, ``bias``, ``tol``, ``max_iter``, ``class_weight``, ``probability``; anything else
a solver takes goes in ``solver_params``); ``random_state`` is the job's ``seed``. A parameter the
chosen solver does not take, set to anything but its default, is an error at ``fit``. The uploaded
data set is deleted once the model exists (``keep_data=True`` keeps it); the model stays on the
service, and a pickled estimator keeps using it.

Connection: ``url`` (else ``HINGE_URL``, else http://127.0.0.1:8000) and ``api_key`` (else
``HINGE_API_KEY``). Clients are shared per connection, outside the estimator, so that predicting
changes nothing in the estimator (scikit-learn checks that) and the estimator pickles.

    from hinge_client import HingeClassifier
    clf = HingeClassifier(solver="smo", C=10, kernel="rbf", gamma=0.5, probability=True).fit(X_train, y_train)
    clf.predict(X_test), clf.predict_proba(X_test)
"""

from __future__ import annotations

import numbers
import threading

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from hinge_client.client import Client
from hinge_client.data import predict_rows
from hinge_client.errors import HingeError
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


def seed_of(random_state) -> int:
    """The job's seed: an int as is, None as 0, a numpy RandomState as its next draw."""
    if random_state is None:
        return 0
    if isinstance(random_state, numbers.Integral):
        return int(random_state)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    raise ValueError(f"random_state must be an int, None or a numpy RandomState, got {random_state!r}")


SOLVER_PARAMS = {
    "dcd": ("C", "loss", "bias", "tol", "max_iter", "class_weight"),
    "cpa": ("C", "bias", "tol", "max_iter"),
    "ocas": ("C", "bias", "tol", "max_iter"),
    "smo": ("C", "kernel", "gamma", "degree", "coef0", "tol", "max_iter", "class_weight"),
    "sampled_cuts": ("C", "kernel", "gamma", "degree", "coef0", "bias", "tol", "max_iter"),
}
DEFAULTS = {
    "loss": "hinge",
    "bias": 1.0,
    "tol": None,
    "max_iter": None,
    "class_weight": None,
    "kernel": "rbf",
    "gamma": "scale",
    "degree": 3,
    "coef0": 0.0,
}


class _RemoteModel(BaseEstimator):
    """What both estimators share: connection, upload and job, batched predict calls."""

    def _client(self) -> Client:
        return client_for(self.url, self.api_key, self.timeout)

    def _train(self, X, y, solver: str, params: dict, qid=None) -> Model:
        client = self._client()
        dataset = client.upload_arrays(X, y, qid=qid)
        try:
            return client.train(dataset["id"], solver, params, timeout=self.timeout)
        except HingeError as exc:
            if exc.status == 422:
                raise ValueError(
                    f"{type(self).__name__}: the service refused the training request: {exc.message}"
                ) from None
            raise
        finally:
            if not self.keep_data:
                try:
                    client.delete_dataset(dataset["id"])
                except HingeError:
                    pass

    def _predict_remote(self, X, probabilities: bool = False) -> dict:
        """Labels, scores (and probabilities) of the rows, in batches."""
        width = max(1, X.shape[1])
        batch = max(1, min(MAX_ROWS_PER_REQUEST, MAX_VALUES_PER_REQUEST // width))
        labels: list = []
        scores: list[float | list[float]] = []
        probs: list[list[float]] = []
        client = self._client()
        for start in range(0, X.shape[0], batch):
            answer = client.predict(self.model_id_, predict_rows(X[start : start + batch]), probabilities=probabilities)
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


class HingeClassifier(ClassifierMixin, _RemoteModel):
    """A support vector classifier trained by a Hinge service (two labels, or one-vs-rest for more).

    Parameters
    ----------
    solver : "dcd", "cpa", "ocas" (linear), "smo" or "sampled_cuts" (kernel).
    C : penalty of the training loss, LIBLINEAR's convention: minimize 0.5|w|^2 + C sum loss_i.
    kernel, gamma, degree, coef0 : the kernel of smo and sampled_cuts ("linear", "rbf", "poly", "sigmoid";
        gamma a number or "scale").
    loss : dcd's loss, "hinge" or "squared_hinge".
    bias : value of the constant feature (dcd, cpa, ocas, sampled_cuts); None: no offset.
    tol, max_iter : the solver's stopping rule (None: the service's default; ocas reads tol as tol_rel).
    class_weight : {label: factor on C}, or "balanced" (n_samples / (n_classes * count of the label)).
    probability : calibrate with Platt's sigmoid on 5-fold decision values, so that predict_proba exists.
    random_state : the job's seed.
    max_seconds : the job's deadline (the best model so far is kept).
    solver_params : other parameters of the solver, as the service's schema names them.
    url, api_key, timeout : the service; timeout bounds each request and the wait for training.
    keep_data : keep the uploaded training data set on the service.
    """

    def __init__(
        self,
        solver="dcd",
        C=1.0,
        *,
        kernel="rbf",
        gamma="scale",
        degree=3,
        coef0=0.0,
        loss="hinge",
        bias=1.0,
        tol=None,
        max_iter=None,
        class_weight=None,
        probability=False,
        random_state=0,
        max_seconds=None,
        solver_params=None,
        url=None,
        api_key=None,
        timeout=600.0,
        keep_data=False,
    ):
        self.solver = solver
        self.C = C
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.loss = loss
        self.bias = bias
        self.tol = tol
        self.max_iter = max_iter
        self.class_weight = class_weight
        self.probability = probability
        self.random_state = random_state
        self.max_seconds = max_seconds
        self.solver_params = solver_params
        self.url = url
        self.api_key = api_key
        self.timeout = timeout
        self.keep_data = keep_data

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.non_deterministic = False
        return tags

    def service_params(self, y_encoded: np.ndarray | None = None) -> dict:
        """The job's ``params`` for the chosen solver (what ``fit`` sends)."""
        if self.solver not in SOLVER_PARAMS:
            raise ValueError(f"solver must be one of {', '.join(SOLVER_PARAMS)}, got {self.solver!r}")
        taken = SOLVER_PARAMS[self.solver]
        for name, default in DEFAULTS.items():
            value = getattr(self, name)
            if name not in taken and value != default:
                users = [s for s, names in SOLVER_PARAMS.items() if name in names]
                raise ValueError(
                    f"{name}={value!r} does not apply to solver {self.solver!r} (only to {', '.join(users)})"
                )
        params: dict = {"C": float(self.C), "seed": seed_of(self.random_state), "probability": bool(self.probability)}
        if self.max_seconds is not None:
            params["max_seconds"] = float(self.max_seconds)
        if "loss" in taken:
            params["loss"] = self.loss
        if "bias" in taken:
            params["bias"] = None if self.bias is None else float(self.bias)
        if self.tol is not None:
            params["tol_rel" if self.solver == "ocas" else "tol"] = float(self.tol)
        if self.max_iter is not None:
            params["max_iter"] = int(self.max_iter)
        if "kernel" in taken:
            kernel: dict = {"type": self.kernel}
            if self.kernel != "linear":
                kernel["gamma"] = self.gamma if isinstance(self.gamma, str) else float(self.gamma)
            if self.kernel in ("poly", "sigmoid"):
                kernel["coef0"] = float(self.coef0)
            if self.kernel == "poly":
                kernel["degree"] = int(self.degree)
            params["kernel"] = kernel
        if self.class_weight is not None and "class_weight" in taken:
            params["class_weight"] = self._class_weight(y_encoded)
        params.update(self.solver_params or {})
        return params

    def _class_weight(self, y_encoded) -> dict:
        if isinstance(self.class_weight, str):
            if self.class_weight != "balanced":
                raise ValueError(f"class_weight must be a dict or 'balanced', got {self.class_weight!r}")
            counts = np.bincount(y_encoded, minlength=len(self.classes_))
            return {
                str(k): float(y_encoded.size / (len(self.classes_) * counts[k]))
                for k in range(len(self.classes_))
                if counts[k]
            }
        index = {label: k for k, label in enumerate(self.classes_.tolist())}
        weights = {}
        for label, factor in self.class_weight.items():
            if label not in index:
                raise ValueError(
                    f"class_weight names label {label!r}, which is not among the classes {self.classes_.tolist()}"
                )
            weights[str(index[label])] = float(factor)
        return weights

    def fit(self, X, y):
        """Upload X and y, train on the service, keep the model's id."""
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64)
        check_classification_targets(y)
        self.classes_, y_encoded = np.unique(y, return_inverse=True)
        if self.classes_.size < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least two classes; the data has 1 class "
                f"({self.classes_[0]!r}) in {y.size} sample{'s' if y.size != 1 else ''}"
            )
        params = self.service_params(y_encoded)
        model = self._train(X, y_encoded, self.solver, params)
        self.model_id_ = model["id"]
        self.n_iter_ = max(1, int(model.get("n_iter") or 1))
        self.model_ = model
        return self

    def decision_function(self, X):
        """Scores: (n,) for two classes (positive: classes_[1]), (n, n_classes) for more (one-vs-rest)."""
        X = self._check_rows(X)
        return self._predict_remote(X)["scores"]

    def predict(self, X):
        """The predicted classes."""
        X = self._check_rows(X)
        labels = np.asarray(self._predict_remote(X)["labels"], dtype=np.int64)
        return self.classes_[labels]

    def _calibrated(self) -> bool:
        return bool(self.probability)

    @available_if(_calibrated)
    def predict_proba(self, X):
        """Class probabilities (n, n_classes), columns in the order of classes_ (needs probability=True)."""
        X = self._check_rows(X)
        return self._predict_remote(X, probabilities=True)["probabilities"]

    @available_if(_calibrated)
    def predict_log_proba(self, X):
        """Logarithms of predict_proba."""
        return np.log(self.predict_proba(X))


class HingeRanker(_RemoteModel):
    """A pairwise ranking model trained by a Hinge service (SVMperf's cutting planes, ``cpa``).

    ``fit(X, y, qid=None)``: with ``qid``, pairs are taken within each query only (SVMrank);
    without, every pair with y_i > y_j is a constraint (ordinal regression over the ranks y).
    ``predict`` returns scores (larger: ranked higher); ``score`` the fraction of pairs ordered right.

    Parameters
    ----------
    C : penalty per pair: minimize 0.5|w|^2 + C sum over ordered pairs of max(0, 1 - w'(x_i - x_j)).
    tol, max_iter : cpa's stopping rule (None: the service's default).
    random_state, max_seconds, solver_params, url, api_key, timeout, keep_data : as HingeClassifier.
    """

    def __init__(
        self,
        C=1.0,
        *,
        tol=None,
        max_iter=None,
        random_state=0,
        max_seconds=None,
        solver_params=None,
        url=None,
        api_key=None,
        timeout=600.0,
        keep_data=False,
    ):
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state
        self.max_seconds = max_seconds
        self.solver_params = solver_params
        self.url = url
        self.api_key = api_key
        self.timeout = timeout
        self.keep_data = keep_data

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.target_tags.required = True
        tags.non_deterministic = False
        return tags

    def fit(self, X, y, qid=None):
        """Upload X, y (and qid), train on the service, keep the model's id."""
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, y_numeric=True)
        if qid is not None:
            qid = np.asarray(qid).reshape(-1)
            if qid.size != y.size:
                raise ValueError(f"qid has {qid.size} entries for {y.size} samples")
        if np.unique(y).size < 2:
            raise ValueError(
                f"{type(self).__name__} needs at least two distinct ranks; the data has 1 class "
                f"in {y.size} sample{'s' if y.size != 1 else ''}"
            )
        params: dict = {
            "C": float(self.C),
            "seed": seed_of(self.random_state),
            "objective": "ranking" if qid is not None else "ordinal",
        }
        if self.tol is not None:
            params["tol"] = float(self.tol)
        if self.max_iter is not None:
            params["max_iter"] = int(self.max_iter)
        if self.max_seconds is not None:
            params["max_seconds"] = float(self.max_seconds)
        params.update(self.solver_params or {})
        model = self._train(X, y, "cpa", params, qid=qid)
        self.model_id_ = model["id"]
        self.n_iter_ = max(1, int(model.get("n_iter") or 1))
        self.model_ = model
        return self

    def predict(self, X):
        """Scores of the rows (larger: ranked higher)."""
        X = self._check_rows(X)
        return self._predict_remote(X)["scores"]

    def score(self, X, y, qid=None):
        """Fraction of the pairs with y_i > y_j (within a query, given qid) scored s_i > s_j; ties count one half."""
        scores = self.predict(X)
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        groups = [np.arange(y.size)] if qid is None else [np.flatnonzero(np.asarray(qid) == q) for q in np.unique(qid)]
        good = total = 0.0
        for rows in groups:
            diff_y = y[rows, None] - y[None, rows]
            diff_s = scores[rows, None] - scores[None, rows]
            pairs = diff_y > 0
            good += float(np.sum((diff_s > 0) & pairs) + 0.5 * np.sum((diff_s == 0) & pairs))
            total += float(pairs.sum())
        return good / total if total else float("nan")
