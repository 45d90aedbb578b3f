"""``HingeRegressor``: scikit-learn's LinearSVR, SVR and NuSVR trained by a Hinge service.

``kernel="linear"`` (the default) is LinearSVR: ``fit`` trains solver ``dcd`` with ``loss`` ``"epsilon_insensitive"``
(LIBLINEAR -s 13, LinearSVR's default) or ``"squared_epsilon_insensitive"`` (-s 12), the intercept a regularized
constant feature (LIBLINEAR's and LinearSVR's convention). ``kernel`` "rbf", "poly" or "sigmoid" is SVR: the service's
``smo`` with ``svm_type: "epsilon_svr"`` (LIBSVM -s 3, the intercept unregularized), with SVR's ``gamma``
("scale" by default), ``degree``, ``coef0``, ``cache_size`` (the job's ``cache_mb``) and ``shrinking``;
``solver="smo"`` with ``kernel="linear"`` is SVR(kernel="linear") (an unregularized intercept, as LIBSVM's).
``nu`` given is NuSVR: smo's ``svm_type: "nu_svr"`` (LIBSVM -s 4) with any kernel ("auto" picks smo then, the linear
kernel included), nu in place of epsilon (the tube's width is learned).
``predict`` sends the rows to the model's predict route and returns the predicted values; ``score`` is R²
(scikit-learn's ``RegressorMixin``). ``coef_`` (n_features,) exists for the linear kernel only (an AttributeError
otherwise, as SVR's); ``intercept_`` (1,) always; kernel models have SVR's ``dual_coef_`` (1, n_SV) and
``support_vectors_`` (n_SV, n_features), read from the model's JSON export (``support_`` is not: the export does
not say which training rows the support vectors were).

The parameters carry LinearSVR's and SVR's names: ``C``, ``epsilon``, ``loss``, ``tol``, ``fit_intercept`` and
``intercept_scaling`` (the service's ``bias``: the value of a constant feature whose weight is the intercept,
regularized as LIBLINEAR's; dcd only), ``max_iter``, ``random_state`` (the job's ``seed``). LinearSVR's ``dual`` and
``verbose`` have no counterpart: dcd always solves the dual. What the service does not take from LinearSVR's
defaults: ``epsilon``, ``tol`` and ``max_iter`` left at None are the service's (epsilon 0.1 as LIBLINEAR's -p and
SVR's, LinearSVR's is 0.0; see the API's dcd and smo parameters). Anything else the solver takes goes in
``solver_params`` (``tol_rel``, ...). Connection, upload, warnings and what a fit leaves on the service are
HingeClassifier's (``hinge_client.remote_estimator``): ``url``, ``api_key``, ``timeout``, ``max_seconds``,
``keep_data``, ``keep_model``.

    from hinge_client import HingeRegressor
    reg = HingeRegressor(C=1.0, epsilon=0.0).fit(X_train, y_train)   # LinearSVR(C=1.0)'s problem, on the service
    reg.predict(X_test), reg.score(X_test, y_test), reg.coef_, reg.intercept_
    HingeRegressor(kernel="rbf", C=10.0).fit(X_train, y_train).predict(X_test)   # SVR(C=10.0), on the service
    HingeRegressor(kernel="rbf", nu=0.5, C=10.0).fit(X_train, y_train)           # NuSVR(nu=0.5, C=10.0)
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from hinge_client.remote_estimator import _RemoteModel, kernel_params, linear_weights, support_vectors

__all__ = ["HingeRegressor", "REGRESSION_LOSSES"]

REGRESSION_LOSSES = ("epsilon_insensitive", "squared_epsilon_insensitive")
"""The losses of a regression: dcd's (and LinearSVR's) names; any other would train a classifier."""
SOLVERS = ("auto", "dcd", "smo")
"""``solver`` values: "auto" is dcd for the linear kernel without nu, smo otherwise."""
LINEAR_ONLY = {"loss": "epsilon_insensitive", "fit_intercept": True, "intercept_scaling": 1.0}
"""LinearSVR's parameters that smo's SVR has no counterpart for (its loss is the epsilon-insensitive one, its intercept
unregularized): any other value with smo is an error."""


def check_nu(nu) -> float:
    """``nu`` as the job's float: a number in (0, 1] (LIBSVM's -n), else a ValueError."""
    if isinstance(nu, bool) or not isinstance(nu, numbers.Real) or not 0.0 < float(nu) <= 1.0:
        raise ValueError(f"nu must be a number in (0, 1], got {nu!r}")
    return float(nu)


class HingeRegressor(RegressorMixin, _RemoteModel):
    """A support vector regression trained by a Hinge service: LinearSVR's (dcd) or, with a kernel or nu, SVR's or
    NuSVR's (smo).

    Parameters
    ----------
    C : penalty of the training loss, LIBLINEAR's and LIBSVM's (and LinearSVR's and SVR's) convention: minimize
        0.5|w|^2 + C sum loss_i.
    kernel : "linear" (default: LinearSVR, solver dcd), or "rbf", "poly", "sigmoid" (SVR, solver smo with
        svm_type epsilon_svr); with nu, any kernel is NuSVR's (smo, svm_type nu_svr). "precomputed" (smo, SVR's): X
        is the kernel matrix, (n_samples, n_samples) to fit and (n, n_samples of the fit) to predict.
    solver : "auto" (default: dcd for the linear kernel without nu, else smo), "dcd" (linear kernel only, no nu) or
        "smo" (any kernel; with "linear" it is SVR(kernel="linear"): the intercept unregularized, LIBSVM's).
        ``solver_`` is the one used.
    epsilon : half-width of the insensitive zone, in the targets' units (residuals within it cost nothing); None:
        the service's default, 0.1 as LIBLINEAR's -p and SVR's (LinearSVR's default is 0.0). Not with nu (NuSVR
        learns it).
    nu : None (default: not used, epsilon sets the tube) or a number in (0, 1]: NuSVR (smo's svm_type nu_svr, LIBSVM
        -s 4), whose tube's width epsilon is learned: nu is an upper bound on the fraction of training errors (rows
        outside the tube) and a lower bound on the fraction of support vectors. Solver smo only ("auto" picks it,
        whatever the kernel); C is NuSVR's C, sent as usual; epsilon must be left at None.
    gamma, degree, coef0 : SVR's kernel parameters (gamma a number or "scale", 1 / (n_features * X.var())); each is
        used by the kernels that have it, and ignored by the others as SVR ignores it.
    cache_size : smo's cache of kernel rows in MB (SVR's cache_size, the job's cache_mb).
    shrinking : smo's shrinking heuristic (SVR's); dcd shrinks always.
    loss : dcd's loss: "epsilon_insensitive" (max(0, |w'x - y| - epsilon), LIBLINEAR -s 13, LinearSVR's default) or
        "squared_epsilon_insensitive" (its square, LIBLINEAR -s 12). smo trains the first only.
    tol, max_iter : the solver's stopping rule (None: the service's defaults). A tol given alone rules alone (the
        service's certified relative gap, ``tol_rel``, is then off unless given in ``solver_params``).
    fit_intercept, intercept_scaling : dcd only, as LinearSVR's: with fit_intercept, every row gets a constant
        feature intercept_scaling whose weight (regularized like the others) times intercept_scaling is the
        intercept; the service's ``bias`` (None without an intercept). smo's intercept is unregularized, always.
    random_state : the job's seed.
    max_seconds : the job's deadline (the best model so far is kept).
    solver_params : other parameters of the solver, as the service's schema names them (``tol_rel``, ...).
    url, api_key, timeout, keep_data, keep_model : as HingeClassifier.

    Attributes
    ----------
    n_features_in_, model_id_ (the service's model), model_ (its record: ``train_mse``, ``train_r2``, ...), n_iter_,
    solver_.
    coef_ : (n_features,), the linear kernel only (LinearSVR's shape; an AttributeError otherwise, as SVR's):
        predict(X) is X @ coef_ + intercept_.
    intercept_ : (1,) ([0.0] for dcd without an intercept).
    dual_coef_, support_vectors_ : kernel models (smo), as SVR's: (1, n_SV) and dense (n_SV, n_features);
        predict(X) is dual_coef_ @ K(support_vectors_, X) + intercept_.
    """

    def __init__(
        self,
        C=1.0,
        *,
        kernel="linear",
        solver="auto",
        epsilon=None,
        nu=None,
        gamma="scale",
        degree=3,
        coef0=0.0,
        cache_size=200.0,
        shrinking=True,
        loss="epsilon_insensitive",
        tol=None,
        fit_intercept=True,
        intercept_scaling=1.0,
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
        self.C = C
        self.kernel = kernel
        self.solver = solver
        self.epsilon = epsilon
        self.nu = nu
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.cache_size = cache_size
        self.shrinking = shrinking
        self.loss = loss
        self.tol = tol
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
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
        """The solver a fit trains: ``solver``, or for "auto" dcd with the linear kernel and no nu, else smo; dcd with
        another kernel, or with nu, is an error."""
        if self.solver == "auto":
            return "dcd" if self.kernel == "linear" and self.nu is None else "smo"
        if self.solver not in SOLVERS:
            raise ValueError(f"solver must be 'auto', 'dcd' or 'smo', got {self.solver!r}")
        if self.solver == "dcd" and self.kernel != "linear":
            raise ValueError(
                f"kernel={self.kernel!r} needs solver 'smo' (or 'auto', which picks it); dcd trains linear models only"
            )
        if self.solver == "dcd" and self.nu is not None:
            raise ValueError(
                f"nu={self.nu!r} (NuSVR) needs solver 'smo' (or 'auto', which picks it); dcd trains LinearSVR's "
                "epsilon-insensitive problem only"
            )
        return self.solver

    def service_params(self) -> dict:
        """The params of the job ``fit`` sends (to ``solver_for()``). The loss, the kernel and the intercept are checked
        here (any other loss would train a classifier), and nu (NuSVR's, smo's nu_svr) with epsilon left unset; the
        other numbers (C, epsilon, tol, ...) by the service, whose refusal is a ValueError."""
        solver = self.solver_for()
        if self.nu is not None and self.epsilon is not None:
            raise ValueError(
                f"nu={self.nu!r} and epsilon={self.epsilon!r}: NuSVR learns epsilon (nu sets the tube's width); pass "
                "one or the other"
            )
        nu = None if self.nu is None else check_nu(self.nu)
        if self.loss not in REGRESSION_LOSSES:
            raise ValueError(f"loss must be one of {', '.join(map(repr, REGRESSION_LOSSES))}, got {self.loss!r}")
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise ValueError(f"fit_intercept must be True or False, got {self.fit_intercept!r}")
        scaling = self.intercept_scaling
        if (
            isinstance(scaling, bool)
            or not isinstance(scaling, numbers.Real)
            or not math.isfinite(scaling)
            or scaling <= 0
        ):
            raise ValueError(f"intercept_scaling must be a finite number > 0, got {scaling!r}")
        kernel = kernel_params(self.kernel, self.gamma, self.degree, self.coef0)
        params: dict = {"C": float(self.C)}
        if solver == "dcd":
            params.update(loss=self.loss, bias=float(scaling) if self.fit_intercept else None)
        else:
            for name, default in LINEAR_ONLY.items():
                if getattr(self, name) != default:
                    raise ValueError(
                        f"{name}={getattr(self, name)!r} applies to the linear kernel's solver dcd (LinearSVR's) only; "
                        f"smo (SVR's) trains the epsilon-insensitive loss with an unregularized intercept"
                    )
            params.update(
                svm_type="epsilon_svr" if nu is None else "nu_svr", kernel=kernel, shrinking=bool(self.shrinking)
            )
            if nu is not None:
                params["nu"] = nu
            params["cache_mb"] = float(self.cache_size)
        params.update(self._job_params())
        if self.epsilon is not None:
            params["epsilon"] = float(self.epsilon)
        if self.tol is not None:
            params["tol"] = float(self.tol)
        params.update(self.solver_params or {})
        return params

    def fit(self, X, y):
        """Upload X and the targets y, train the regression on the service (dcd or smo), keep the model's id and
        its weights (linear) or support vectors (kernel)."""
        return self._fit(X, y)

    def _fit(self, X, y, search: dict | None = None):
        """``fit``; with ``search`` (the job's ``params.search``) the service's search picks the setting
        (``HingeSearchCV``)."""
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, y_numeric=True)
        params = self.service_params()
        if search is not None:
            params["search"] = search
        solver = self.solver_for()
        model = self._train(X, y, solver, params)
        self._adopt(model)
        self.solver_ = solver
        if model.get("task") != "regression":
            raise ValueError(
                f"{type(self).__name__}: the service trained a {model.get('task')} model of kind {model.get('kind')} "
                f"(params {params}); a regression needs dcd with loss epsilon_insensitive or "
                "squared_epsilon_insensitive, or smo with svm_type epsilon_svr or nu_svr"
            )
        document = self._exported()
        self._coef = self._dual = None
        if self.kernel == "linear":
            coef, intercept = linear_weights(document, self.n_features_in_) or (None, None)
            if coef is None:
                raise ValueError(f"{type(self).__name__}: the service's model {model['id']} has no linear weights")
            self._coef = coef[0]
        if model.get("kind") == "kernel":
            self._dual = support_vectors(document, self.n_features_in_)
        self._intercept = np.asarray(document["offsets"], dtype=np.float64).reshape(1)
        return self

    @property
    def coef_(self) -> np.ndarray:
        """Weights, (n_features,) as LinearSVR's: predict(X) is X @ coef_ + intercept_ (the linear kernel only)."""
        check_is_fitted(self, "model_id_")
        if self._coef is None:
            raise AttributeError(
                f"coef_ is only available when using a linear kernel (this model's is {self.kernel!r})"
            )
        return self._coef

    @property
    def intercept_(self) -> np.ndarray:
        """The intercept, (1,) as LinearSVR's and SVR's ([0.0] for dcd when fit_intercept=False)."""
        check_is_fitted(self, "model_id_")
        return self._intercept

    def _kernel_part(self, index: int, name: str) -> np.ndarray:
        check_is_fitted(self, "model_id_")
        if self._dual is None:
            raise AttributeError(
                f"{name} is only available for a kernel model (solver 'smo'); this one was trained by dcd"
            )
        return self._dual[index]

    @property
    def dual_coef_(self) -> np.ndarray:
        """SVR's dual coefficients (alpha_i - alpha_i*), (1, n_SV): smo's models only."""
        return self._kernel_part(0, "dual_coef_")

    @property
    def support_vectors_(self) -> np.ndarray:
        """SVR's support vectors, dense (n_SV, n_features): smo's models only."""
        return self._kernel_part(1, "support_vectors_")

    def predict(self, X):
        """The predicted values, (n_samples,)."""
        X = self._check_rows(X)
        return self._predict_remote(X)["scores"]
