"""``HingeOneClassSVM``: scikit-learn's OneClassSVM trained by a Hinge service (smo's ``svm_type: one_class``).

``fit(X)`` uploads the rows with the label 1 on every one (the service does not use labels for a one-class SVM) and
trains solver ``smo`` with ``svm_type: "one_class"`` (LIBSVM -s 2, Schoelkopf et al.'s nu formulation): minimize
0.5 alpha' K alpha subject to 0 <= alpha_i <= 1 and sum alpha = nu n, the decision function
f(x) = sum_i alpha_i K(x_i, x) - rho positive inside the estimated support of the data. As OneClassSVM:

- ``predict`` is +1 (inlier, f(x) > 0) or -1 (outlier), ``fit_predict`` the training rows' (``OutlierMixin``);
- ``decision_function`` is f(x), the service's ``scores``;
- ``score_samples`` is decision_function + ``offset_`` = sum_i alpha_i K(x_i, x), the unshifted score;
- ``offset_`` = rho = -``intercept_`` ((1,), as OneClassSVM's), ``dual_coef_`` (1, n_SV) and ``support_vectors_``
  (dense, n_SV x n_features), read from the model's JSON export (``support_`` is not: the export does not say which
  training rows the support vectors were).

The parameters carry OneClassSVM's names: ``kernel``, ``degree``, ``gamma`` ("scale" by default), ``coef0``, ``tol``,
``nu``, ``shrinking``, ``cache_size`` (the job's ``cache_mb``), ``max_iter``; ``tol`` and ``max_iter`` left at None
are the service's (LIBSVM's tol 1e-3, plus a certified relative gap of 1e-2 unless a tol is given); ``random_state``
is the job's seed; anything else smo takes goes in ``solver_params``. Connection, upload, warnings and what a fit
leaves on the service are HingeClassifier's: ``url``, ``api_key``, ``timeout``, ``max_seconds``, ``keep_data``,
``keep_model``.

    from hinge_client import HingeOneClassSVM
    detector = HingeOneClassSVM(nu=0.1, gamma=0.05).fit(X_inliers)
    detector.predict(X_new), detector.decision_function(X_new), detector.score_samples(X_new)
"""

from __future__ import annotations

import numpy as np
from sklearn.base import OutlierMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from hinge_client.remote_estimator import _RemoteModel, kernel_params, support_vectors

__all__ = ["HingeOneClassSVM"]

MIN_SAMPLES = 2
"""Fewer rows are refused before any request: the service's one-class job on a single row ends its worker (the job
fails as worker_lost, as of the service's first one-class version), where OneClassSVM fits it."""


class HingeOneClassSVM(OutlierMixin, _RemoteModel):
    """A one-class SVM (novelty detection, OneClassSVM's) trained by a Hinge service: smo with svm_type one_class.

    Parameters
    ----------
    kernel, gamma, degree, coef0 : the kernel ("linear", "rbf" (default), "poly", "sigmoid"; gamma a number or
        "scale", 1 / (n_features * X.var())); each parameter is used by the kernels that have it, ignored by the others.
    nu : in (0, 1]: an upper bound on the fraction of training rows outside the boundary and a lower bound on the
        fraction of support vectors (LIBSVM's -n; default 0.5 as OneClassSVM's).
    tol, max_iter : smo's stopping rule (None: the service's defaults). A tol given alone rules alone (the service's
        certified relative gap, ``tol_rel``, is then off unless given in ``solver_params``).
    shrinking : smo's shrinking heuristic.
    cache_size : smo's cache of kernel rows in MB (the job's cache_mb).
    random_state : the job's seed.
    max_seconds : the job's deadline (the best model so far is kept).
    solver_params : other parameters of smo, as the service's schema names them (``tol_rel``, ...).
    url, api_key, timeout, keep_data, keep_model : as HingeClassifier.

    Attributes
    ----------
    n_features_in_, model_id_ (the service's model), model_ (its record: ``train_outlier_fraction``, ...), n_iter_.
    dual_coef_ : (1, n_SV), the alpha_i of the support vectors; support_vectors_ : dense (n_SV, n_features).
    intercept_ : (1,), -rho; offset_ : (1,), rho (OneClassSVM's: decision_function = score_samples - offset_).
    """

    def __init__(
        self,
        *,
        kernel="rbf",
        degree=3,
        gamma="scale",
        coef0=0.0,
        tol=None,
        nu=0.5,
        shrinking=True,
        cache_size=200.0,
        max_iter=None,
        random_state=0,
        max_seconds=None,
        solver_params=None,
        url=None,
        api_key=None,
        timeout=600.0,
        keep_data=False,
        keep_model=False,
    ):
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.tol = tol
        self.nu = nu
        self.shrinking = shrinking
        self.cache_size = cache_size
        self.max_iter = max_iter
        self.random_state = random_state
        self.max_seconds = max_seconds
        self.solver_params = solver_params
        self.url = url
        self.api_key = api_key
        self.timeout = timeout
        self.keep_data = keep_data
        self.keep_model = keep_model

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.non_deterministic = False
        return tags

    def service_params(self) -> dict:
        """The params of the smo job ``fit`` sends; the kernel's name is checked here, the numbers (nu, gamma, tol,
        ...) by the service, whose refusal is a ValueError."""
        params: dict = {
            "svm_type": "one_class",
            "nu": float(self.nu),
            "kernel": kernel_params(self.kernel, self.gamma, self.degree, self.coef0),
            "shrinking": bool(self.shrinking),
            "cache_mb": float(self.cache_size),
            **self._job_params(),
        }
        if self.tol is not None:
            params["tol"] = float(self.tol)
        params.update(self.solver_params or {})
        return params

    def fit(self, X, y=None):
        """Upload X (every row labelled 1; y is ignored, as OneClassSVM's), train smo's one-class SVM on the service,
        keep the model's id and its support vectors."""
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64)
        params = self.service_params()
        if X.shape[0] < MIN_SAMPLES:
            raise ValueError(
                f"{type(self).__name__} needs at least {MIN_SAMPLES} samples to describe their support; got "
                f"{X.shape[0]} sample"
            )
        model = self._train(X, np.ones(X.shape[0]), "smo", params)
        self._adopt(model)
        parts = support_vectors(self._exported(), self.n_features_in_)
        if model.get("task") != "one_class" or parts is None:
            raise ValueError(
                f"{type(self).__name__}: the service trained a {model.get('task')} model of kind {model.get('kind')} "
                f"(params {params}); a one-class SVM needs smo with svm_type one_class"
            )
        self._dual = parts
        return self

    def _part(self, index: int) -> np.ndarray:
        check_is_fitted(self, "model_id_")
        return self._dual[index]

    @property
    def dual_coef_(self) -> np.ndarray:
        """The support vectors' coefficients alpha_i, (1, n_SV)."""
        return self._part(0)

    @property
    def support_vectors_(self) -> np.ndarray:
        """The support vectors, dense (n_SV, n_features)."""
        return self._part(1)

    @property
    def intercept_(self) -> np.ndarray:
        """-rho, (1,): decision_function(X) is dual_coef_ @ K(support_vectors_, X) + intercept_."""
        return self._part(2)

    @property
    def offset_(self) -> np.ndarray:
        """rho, (1,) (OneClassSVM's: -intercept_): decision_function = score_samples - offset_."""
        return -self._part(2)

    def decision_function(self, X):
        """f(x) = sum_i alpha_i K(x_i, x) - rho, (n_samples,): positive for inliers, negative for outliers."""
        X = self._check_rows(X)
        return self._predict_remote(X)["scores"]

    def score_samples(self, X):
        """The unshifted scores, decision_function(X) + offset_ = sum_i alpha_i K(x_i, x), (n_samples,)."""
        return self.decision_function(X) + self.offset_

    def predict(self, X):
        """+1 for inliers, -1 for outliers, (n_samples,) integers as OneClassSVM's."""
        X = self._check_rows(X)
        return np.asarray(self._predict_remote(X)["labels"], dtype=np.intp)
