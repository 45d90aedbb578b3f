"""``HingeOneClassSVM``: scikit-learn's OneClassSVM trained by a Hinge service (smo's ``svm_type: one_class``, or
for the linear kernel dcd's ``loss: one_class``).

``fit(X)`` uploads the rows with the label 1 on every one (the service does not use labels for a one-class SVM) and
trains Schoelkopf et al.'s nu formulation (LIBSVM -s 2): minimize 0.5 alpha' K alpha subject to 0 <= alpha_i <= 1 and
sum alpha = nu n, the decision function f(x) = sum_i alpha_i K(x_i, x) - rho positive inside the estimated support of
the data. Two solvers train it (``solver``; ``solver_`` says which ran):

- ``smo`` (any kernel; ``svm_type: "one_class"``): a kernel model, its support vectors and their alpha_i;
- ``dcd`` (the linear kernel only; ``loss: "one_class"``, LIBLINEAR -s 21): the same dual with K = X X', solved by
  dual coordinate descent with w = sum_i alpha_i x_i kept, so that a step costs a sparse row instead of a kernel row
  (much cheaper for large sparse data); a linear model, f(x) = w'x - rho, with no support vectors.

``solver="auto"`` (the default) trains dcd for ``kernel="linear"`` and smo for the other kernels, as HingeClassifier
and HingeRegressor pick their solvers. As OneClassSVM:

- ``predict`` is +1 (inlier, f(x) >= 0) or -1 (outlier), ``fit_predict`` the training rows' (``OutlierMixin``); a
  row exactly on the boundary, f(x) = 0, is an inlier, as scikit-learn's outlier detectors label it, where the
  service (LIBSVM's and LIBLINEAR's f(x) > 0) says outlier: dcd ends exactly on its free support vectors on
  low-dimensional data, so such rows occur;
- ``decision_function`` is f(x), the service's ``scores``;
- ``score_samples`` is decision_function + ``offset_``, the unshifted score (sum_i alpha_i K(x_i, x), or w'x);
- ``offset_`` = rho = -``intercept_`` ((1,), as OneClassSVM's);
- ``coef_`` (1, n_features), the linear kernel only (either solver; an AttributeError for the others, as
  OneClassSVM's): decision_function(X) = X @ coef_.T + intercept_;
- ``dual_coef_`` (1, n_SV) and ``support_vectors_`` (dense, n_SV x n_features), smo's models only (dcd's model keeps
  w, not the alpha_i: an AttributeError, as scikit-learn raises for what a fitted model lacks), read from the model's
  JSON export (``support_`` is not: the export does not say which training rows the support vectors were).

The parameters carry OneClassSVM's names: ``kernel``, ``degree``, ``gamma`` ("scale" by default), ``coef0``, ``tol``,
``nu``, ``shrinking``, ``cache_size`` (the job's ``cache_mb``), ``max_iter``; ``tol`` and ``max_iter`` left at None
are the service's (smo: LIBSVM's tol 1e-3; dcd: LIBLINEAR -s 21's tol 0.01; either plus a certified relative gap of
1e-2 unless a tol is given); ``random_state`` is the job's seed; anything else the solver takes goes in
``solver_params``. gamma, degree and coef0 are ignored by the linear kernel whichever solver trains it (as
OneClassSVM ignores them); ``cache_size`` is smo's only: any value but its default with dcd is an error (as
HingeClassifier treats a parameter its solver does not take). Connection, upload, warnings and what a fit leaves on
the service are HingeClassifier's: ``url``, ``api_key``, ``timeout``, ``max_seconds``, ``keep_data``,
``keep_model``.

    from hinge_client import HingeOneClassSVM
    detector = HingeOneClassSVM(nu=0.1, gamma=0.05).fit(X_inliers)                    # smo, rbf kernel
    detector.predict(X_new), detector.decision_function(X_new), detector.score_samples(X_new)
    HingeOneClassSVM(kernel="linear", nu=0.1).fit(X_sparse).coef_                    # dcd (LIBLINEAR -s 21)
"""

from __future__ import annotations

import numpy as np
from sklearn.base import OutlierMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from hinge_client.remote_estimator import _RemoteModel, kernel_params, linear_weights, support_vectors

__all__ = ["HingeOneClassSVM"]

MIN_SAMPLES = 2
"""Fewer rows are refused before any request: the service's one-class job on a single row ends its worker (the job
fails as worker_lost, as of the service's first one-class version), where OneClassSVM fits it."""
SOLVERS = ("auto", "smo", "dcd")
"""``solver`` values: "auto" is dcd for the linear kernel, smo for the others."""
SMO_ONLY = {"cache_size": 200.0}
"""smo's parameters that dcd has no counterpart for (it keeps no kernel rows): any other value with dcd is an error."""


class HingeOneClassSVM(OutlierMixin, _RemoteModel):
    """A one-class SVM (novelty detection, OneClassSVM's) trained by a Hinge service: smo with svm_type one_class, or
    for the linear kernel dcd with loss one_class (LIBLINEAR -s 21).

    Parameters
    ----------
    kernel, gamma, degree, coef0 : the kernel ("linear", "rbf" (default), "poly", "sigmoid"; gamma a number or
        "scale", 1 / (n_features * X.var())); each parameter is used by the kernels that have it, ignored by the others.
        "precomputed" (smo, OneClassSVM's): X is the kernel matrix, (n_samples, n_samples) to fit and (n, n_samples
        of the fit) to predict.
    solver : "auto" (default: "dcd" for kernel="linear", else "smo"), "smo" (any kernel: a kernel model with
        support vectors) or "dcd" (kernel="linear" only: the linear one-class SVM, LIBLINEAR -s 21, by dual
        coordinate descent with w kept; the same problem as smo's with the linear kernel, much cheaper on large
        sparse data; no support vectors). ``solver_`` is the one used.
    nu : in (0, 1]: an upper bound on the fraction of training rows outside the boundary and a lower bound on the
        fraction of support vectors (LIBSVM's and LIBLINEAR's -n; default 0.5 as OneClassSVM's).
    tol, max_iter : the solver's stopping rule (None: the service's defaults: smo's tol 1e-3, dcd's 0.01; smo's
        max_iter counts steps, dcd's passes over the data). A tol given alone rules alone (the service's certified
        relative gap, ``tol_rel``, is then off unless given in ``solver_params``).
    shrinking : the solver's shrinking heuristic.
    cache_size : smo's cache of kernel rows in MB (the job's cache_mb); dcd has none (only the default is taken).
    random_state : the job's seed.
    max_seconds : the job's deadline (the best model so far is kept).
    solver_params : other parameters of the solver, as the service's schema names them (``tol_rel``, ...).
    url, api_key, timeout, keep_data, keep_model : as HingeClassifier.

    Attributes
    ----------
    n_features_in_, model_id_ (the service's model), model_ (its record: ``train_outlier_fraction``, ...), n_iter_,
    solver_.
    coef_ : (1, n_features), the linear kernel only (OneClassSVM's; an AttributeError otherwise):
        decision_function(X) = X @ coef_.T + intercept_.
    dual_coef_ : (1, n_SV), the alpha_i of the support vectors; support_vectors_ : dense (n_SV, n_features); smo's
        models only (an AttributeError for dcd's, which keep w = coef_ instead).
    intercept_ : (1,), -rho; offset_ : (1,), rho (OneClassSVM's: decision_function = score_samples - offset_).
    """

    def __init__(
        self,
        *,
        kernel="rbf",
        solver="auto",
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
        self.solver = solver
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

    def solver_for(self) -> str:
        """The solver a fit trains: ``solver``, or for "auto" dcd with the linear kernel, else smo; dcd with another
        kernel is an error that names what to set."""
        if self.solver not in SOLVERS:
            raise ValueError(f"solver must be one of {', '.join(map(repr, SOLVERS))}, got {self.solver!r}")
        if self.solver == "auto":
            return "dcd" if self.kernel == "linear" else "smo"
        if self.solver == "dcd" and self.kernel != "linear":
            raise ValueError(
                f"solver='dcd' trains the linear one-class SVM only: set kernel='linear' (got kernel={self.kernel!r}), "
                "or solver='smo' (or 'auto', which picks it) for a kernel model"
            )
        return self.solver

    def service_params(self) -> dict:
        """The params of the job ``fit`` sends (to ``solver_for()``: smo's svm_type one_class or dcd's loss
        one_class); the solver, the kernel's name and what dcd does not take are checked here, the numbers (nu, gamma,
        tol, ...) by the service, whose refusal is a ValueError."""
        solver = self.solver_for()
        kernel = kernel_params(self.kernel, self.gamma, self.degree, self.coef0)
        if solver == "dcd":
            for name, default in SMO_ONLY.items():
                if getattr(self, name) != default:
                    raise ValueError(
                        f"{name}={getattr(self, name)!r} does not apply to solver 'dcd' (only to 'smo', which keeps "
                        f"kernel rows): leave it at {default!r}, or set solver='smo'"
                    )
            params: dict = {"loss": "one_class", "nu": float(self.nu), "shrinking": bool(self.shrinking)}
        else:
            params = {
                "svm_type": "one_class",
                "nu": float(self.nu),
                "kernel": kernel,
                "shrinking": bool(self.shrinking),
                "cache_mb": float(self.cache_size),
            }
        params.update(self._job_params())
        if self.tol is not None:
            params["tol"] = float(self.tol)
        params.update(self.solver_params or {})
        return params

    def fit(self, X, y=None):
        """Upload X (every row labelled 1; y is ignored, as OneClassSVM's), train the one-class SVM on the service
        (smo or dcd), keep the model's id, its weights (linear kernel) and support vectors (smo)."""
        return self._fit(X)

    def _fit(self, X, labels=None, search: dict | None = None):
        """``fit``; ``labels`` (1 inlier, -1 outlier) go with the rows, which the training ignores and a search
        (``search``, the job's ``params.search``: ``HingeSearchCV``) scores its folds by."""
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64)
        params = self.service_params()
        if search is not None:
            params["search"] = search
        solver = self.solver_for()
        if X.shape[0] < MIN_SAMPLES:
            raise ValueError(
                f"{type(self).__name__} needs at least {MIN_SAMPLES} samples to describe their support; got "
                f"{X.shape[0]} sample"
            )
        model = self._train(X, np.ones(X.shape[0]) if labels is None else labels, solver, params)
        self._adopt(model)
        self.solver_ = solver
        document = self._exported()
        expected = "linear" if solver == "dcd" else "kernel"
        if model.get("task") != "one_class" or document["kind"] != expected or len(document["offsets"]) != 1:
            raise ValueError(
                f"{type(self).__name__}: the service trained a {model.get('task')} model of kind {model.get('kind')} "
                f"(params {params}); a one-class SVM needs smo with svm_type one_class or dcd with loss one_class"
            )
        self._dual = support_vectors(document, self.n_features_in_) if expected == "kernel" else None
        self._coef = None
        if self.kernel == "linear":
            coef, _ = linear_weights(document, self.n_features_in_) or (None, None)
            self._coef = coef
        self._intercept = np.asarray(document["offsets"], dtype=np.float64).reshape(1)
        return self

    def _kernel_part(self, index: int, name: str) -> np.ndarray:
        check_is_fitted(self, "model_id_")
        if self._dual is None:
            raise AttributeError(
                f"{name} is only available for a kernel model (solver 'smo'); this one was trained by dcd, whose "
                "linear model keeps w (coef_), not the support vectors"
            )
        return self._dual[index]

    @property
    def dual_coef_(self) -> np.ndarray:
        """The support vectors' coefficients alpha_i, (1, n_SV): smo's models only."""
        return self._kernel_part(0, "dual_coef_")

    @property
    def support_vectors_(self) -> np.ndarray:
        """The support vectors, dense (n_SV, n_features): smo's models only."""
        return self._kernel_part(1, "support_vectors_")

    @property
    def coef_(self) -> np.ndarray:
        """w, (1, n_features) as OneClassSVM's: decision_function(X) is X @ coef_.T + intercept_ (the linear kernel
        only, either solver)."""
        check_is_fitted(self, "model_id_")
        if self._coef is None:
            raise AttributeError(
                f"coef_ is only available when using a linear kernel (this model's is {self.kernel!r})"
            )
        return self._coef

    @property
    def intercept_(self) -> np.ndarray:
        """-rho, (1,): decision_function(X) is dual_coef_ @ K(support_vectors_, X) + intercept_ (smo), or
        X @ coef_.T + intercept_ (the linear kernel)."""
        check_is_fitted(self, "model_id_")
        return self._intercept

    @property
    def offset_(self) -> np.ndarray:
        """rho, (1,) (OneClassSVM's: -intercept_): decision_function = score_samples - offset_."""
        return -self.intercept_

    def decision_function(self, X):
        """f(x) = sum_i alpha_i K(x_i, x) - rho (or w'x - rho), (n_samples,): positive for inliers, negative for
        outliers."""
        X = self._check_rows(X)
        return self._predict_remote(X)["scores"]

    def score_samples(self, X):
        """The unshifted scores, decision_function(X) + offset_ = sum_i alpha_i K(x_i, x) (or w'x), (n_samples,)."""
        return self.decision_function(X) + self.offset_

    def predict(self, X):
        """+1 for inliers, -1 for outliers, (n_samples,) integers as OneClassSVM's: the service's labels, but a row on
        the boundary (decision_function exactly 0) is an inlier, as scikit-learn's outlier detectors have it
        (decision_function >= 0) and as nu counts (it bounds the rows strictly outside)."""
        X = self._check_rows(X)
        answer = self._predict_remote(X)
        labels = np.asarray(answer["labels"], dtype=np.intp)
        return np.where(answer["scores"] == 0, 1, labels).astype(np.intp)
