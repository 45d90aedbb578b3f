"""``HingeRegressor``: scikit-learn's LinearSVR trained by a Hinge service (dcd's epsilon-insensitive losses).

``fit`` uploads the rows with their real-valued targets and trains solver ``dcd`` with ``loss``
``"epsilon_insensitive"`` (LIBLINEAR -s 13, LinearSVR's default) or ``"squared_epsilon_insensitive"`` (-s 12);
``predict`` sends the rows to the model's predict route and returns the predicted values; ``score`` is R²
(scikit-learn's ``RegressorMixin``). ``coef_`` and ``intercept_`` have LinearSVR's shapes, (n_features,) and (1,).

The parameters carry LinearSVR's names: ``C``, ``epsilon``, ``loss``, ``tol``, ``fit_intercept`` and
``intercept_scaling`` (the service's ``bias``: the value of a constant feature whose weight is the intercept,
regularized as LIBLINEAR's), ``max_iter``, ``random_state`` (the job's ``seed``). LinearSVR's ``dual`` and
``verbose`` have no counterpart: dcd always solves the dual. What the service does not take from LinearSVR's
defaults: ``epsilon``, ``tol`` and ``max_iter`` left at None are the service's (epsilon 0.1 as LIBLINEAR's -p,
LinearSVR's is 0.0; see the API's dcd parameters). Anything else dcd takes goes in ``solver_params`` (``tol_rel``,
``shrinking``, ...). Connection, upload, warnings and what a fit leaves on the service are HingeClassifier's
(``hinge_client.remote_estimator``): ``url``, ``api_key``, ``timeout``, ``max_seconds``, ``keep_data``,
``keep_model``.

    from hinge_client import HingeRegressor
    reg = HingeRegressor(C=1.0, epsilon=0.0).fit(X_train, y_train)   # LinearSVR(C=1.0)'s problem, on the service
    reg.predict(X_test), reg.score(X_test, y_test), reg.coef_, reg.intercept_
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from hinge_client.remote_estimator import _RemoteModel

__all__ = ["HingeRegressor", "REGRESSION_LOSSES"]

REGRESSION_LOSSES = ("epsilon_insensitive", "squared_epsilon_insensitive")
"""The losses of a regression: dcd's (and LinearSVR's) names; any other would train a classifier."""


class HingeRegressor(RegressorMixin, _RemoteModel):
    """A linear support vector regression (LinearSVR) trained by a Hinge service: dcd's epsilon-insensitive losses.

    Parameters
    ----------
    C : penalty of the training loss, LIBLINEAR's (and LinearSVR's) convention: minimize
        0.5|w|^2 + C sum loss_i.
    epsilon : half-width of the insensitive zone, in the targets' units (residuals within it cost nothing); None:
        the service's default, 0.1 as LIBLINEAR's -p (LinearSVR's default is 0.0).
    loss : "epsilon_insensitive" (max(0, |w'x - y| - epsilon), LIBLINEAR -s 13, LinearSVR's default) or
        "squared_epsilon_insensitive" (its square, LIBLINEAR -s 12).
    tol, max_iter : dcd's stopping rule (None: the service's defaults). A tol given alone rules alone (the
        service's certified relative gap, ``tol_rel``, is then off unless given in ``solver_params``).
    fit_intercept, intercept_scaling : as LinearSVR's: with fit_intercept, every row gets a constant feature
        intercept_scaling whose weight (regularized like the others) times intercept_scaling is the intercept;
        the service's ``bias`` (None without an intercept).
    random_state : the job's seed.
    max_seconds : the job's deadline (the best model so far is kept).
    solver_params : other parameters of dcd, as the service's schema names them (``tol_rel``, ``shrinking``, ...).
    url, api_key, timeout, keep_data, keep_model : as HingeClassifier.

    Attributes
    ----------
    n_features_in_, model_id_ (the service's model), model_ (its record: ``train_mse``, ``train_r2``, ...), n_iter_.
    coef_ : (n_features,) and intercept_ : (1,), LinearSVR's shapes (intercept_ is [0.0] without an intercept):
        predict(X) is X @ coef_ + intercept_.
    """

    def __init__(
        self,
        C=1.0,
        *,
        epsilon=None,
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
        self.epsilon = epsilon
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

    def service_params(self) -> dict:
        """The params of the dcd job ``fit`` sends. The loss and the intercept are checked here (any other loss would
        train a classifier); the numbers (C, epsilon, tol, ...) by the service, whose refusal is a ValueError."""
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
        params: dict = {
            "C": float(self.C),
            "loss": self.loss,
            "bias": float(scaling) if self.fit_intercept else None,
            **self._job_params(),
        }
        if self.epsilon is not None:
            params["epsilon"] = float(self.epsilon)
        if self.tol is not None:
            params["tol"] = float(self.tol)
        params.update(self.solver_params or {})
        return params

    def fit(self, X, y):
        """Upload X and the targets y, train dcd's regression on the service, keep the model's id and weights."""
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, y_numeric=True)
        params = self.service_params()
        model = self._train(X, y, "dcd", params)
        self._adopt(model)
        linear = self._exported_linear()
        if model.get("task") != "regression" or linear is None:
            raise ValueError(
                f"{type(self).__name__}: the service trained a {model.get('task')} model of kind {model.get('kind')} "
                f"(params {params}); a regression needs dcd with loss epsilon_insensitive or squared_epsilon_insensitive"
            )
        coef, intercept = linear
        self._coef, self._intercept = coef[0], intercept.reshape(1)
        return self

    @property
    def coef_(self) -> np.ndarray:
        """Weights, (n_features,) as LinearSVR's: predict(X) is X @ coef_ + intercept_."""
        check_is_fitted(self, "model_id_")
        return self._coef

    @property
    def intercept_(self) -> np.ndarray:
        """The intercept, (1,) as LinearSVR's ([0.0] when fit_intercept=False)."""
        check_is_fitted(self, "model_id_")
        return self._intercept

    def predict(self, X):
        """The predicted values, (n_samples,)."""
        X = self._check_rows(X)
        return self._predict_remote(X)["scores"]
