"""``HingeSearchCV``: GridSearchCV over C (and gamma, NuSVC's nu, a regressor's epsilon or NuSVR's nu) run as one
job of the service's own search.

GridSearchCV over a ``HingeClassifier`` makes a round trip per fit (upload, job, wait, predict, delete):
25 of them for 5 values of C x 5 folds. ``HingeSearchCV`` uploads once and sends one job whose
``params.search`` the service runs in parallel processes, with warm starts along C for dcd, ocas and smo, then
refits the best setting on all the data; ``best_estimator_`` is a ``HingeClassifier`` on that model.

What it takes: a ``HingeClassifier``; a grid over ``C`` and, for the kernel solvers with a kernel other than
linear, ``gamma`` (numbers); or over ``nu`` (in (0, 1]; NuSVC's, smo's nu_svc, which has no C) and gamma; ``cv`` an int (or None: 5); ``scoring`` accuracy (default), roc_auc or f1
(two classes; f1 of classes_[1]), f1_macro (more). The folds are the service's: stratified by class, each
class's rows shuffled with ``random_state`` and dealt round robin (as StratifiedKFold(shuffle=True), not
its exact draw). What the service's search cannot express (another parameter in the grid, a list of grids,
a splitter object or iterable of folds, another scoring, a callable) is a ValueError that says so and points to
GridSearchCV, which takes them. An estimator with multi_class="crammer_singer" is searched as the service runs it:
the whole problem fitted per fold and C.

Over a ``HingeOneClassSVM`` the grid holds nu and gamma, ``y`` labels the rows 1 (inlier) or -1 (outlier) (the training
ignores them), and the folds are scored by the F1 of the outliers (``score`` too). Over a ``HingeRegressor`` the
search is a regressor: the grid holds C, gamma (a kernel other than linear) and
epsilon (numbers >= 0: SVR's and LinearSVR's tube) or NuSVR's nu (with C); ``scoring`` r2 (default) or
neg_mean_squared_error; the service deals the folds at random (KFold(shuffle=True)'s way, not its exact draw).

    from hinge_client import HingeClassifier, HingeSearchCV
    search = HingeSearchCV(HingeClassifier(kernel="rbf"), {"C": [1, 10], "gamma": [0.001, 0.01]}, cv=3)
    search.fit(X, y).best_params_, search.best_score_, search.cv_results_["mean_test_score"]
    search.predict(X_test)                                   # best_estimator_'s
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone
from sklearn.model_selection import ParameterGrid
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from hinge_client.estimators import LINEAR_SOLVERS, SOLVER_PARAMS, HingeClassifier, solver_for
from hinge_client.one_class import HingeOneClassSVM
from hinge_client.regressor import HingeRegressor

__all__ = ["HingeSearchCV"]

SEARCHED = ("C", "gamma", "nu", "epsilon")
"""The parameters the service's search varies (``params.search.C``, ``.gamma``, ``.nu`` and ``.epsilon``)."""
KERNEL_SOLVERS = tuple(name for name in SOLVER_PARAMS if name not in LINEAR_SOLVERS)
"""Solvers whose grid may hold gamma (the estimators' lists, checked against the service's registry by a test)."""
SCORINGS = {"accuracy": ("accuracy", None), "roc_auc": ("roc_auc", 2), "f1": ("f1", 2), "f1_macro": ("f1", 3)}
REGRESSION_SCORINGS = {"r2": "r2", "neg_mean_squared_error": "neg_mean_squared_error"}
"""scikit-learn's scoring name -> the search's metric, for a HingeRegressor (r2 its default, as the service's)."""
"""scikit-learn's scoring name -> (the search's metric, classes it applies to: 2, 3 meaning "more than two", or any)."""
GRID_SEARCH = "use scikit-learn's GridSearchCV over the estimator for that (one job per fit)"


def _grid(param_grid) -> dict[str, list[float]]:
    """The grid as {"C": [...], "gamma": [...]} (keys present only when given), checked against what the search takes."""
    if isinstance(param_grid, (list, tuple)):
        if len(param_grid) != 1:
            raise ValueError(
                f"param_grid: the service's search runs one grid (the product of C and gamma values); a list of "
                f"{len(param_grid)} grids cannot be one job: {GRID_SEARCH}"
            )
        param_grid = param_grid[0]
    if not isinstance(param_grid, dict):
        raise ValueError(f"param_grid must be a dict of lists (C and gamma), got {type(param_grid).__name__}")
    other = sorted(set(param_grid) - set(SEARCHED))
    if other:
        raise ValueError(
            f"param_grid: the service's search varies C, gamma, nu and epsilon only, not {', '.join(other)}: "
            f"{GRID_SEARCH}, "
            "or fix them in the estimator"
        )
    grid: dict[str, list[float]] = {}
    for name, values in param_grid.items():
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise ValueError(f"param_grid[{name!r}] must be a list of values, got {values!r}")
        values = list(values)
        if not values or len(values) > 100:
            raise ValueError(f"param_grid[{name!r}]: the search takes 1 to 100 values, got {len(values)}")
        lowest = "0" if name == "epsilon" else "> 0"  # a tube of width 0 is LinearSVR's default
        for value in values:
            if (
                isinstance(value, bool)
                or not isinstance(value, numbers.Real)
                or not math.isfinite(value)
                or value < 0
                or (value == 0 and name != "epsilon")
            ):
                raise ValueError(
                    f"param_grid[{name!r}]: the service's search takes finite numbers {'>= 0' if lowest == '0' else lowest}, got {value!r}"
                    + (
                        "; 'scale' is the estimator's default gamma, fix it there or give numbers"
                        if name == "gamma"
                        else ""
                    )
                )
        if name == "nu" and any(value > 1 for value in values):
            raise ValueError(f"param_grid['nu']: nu is a fraction in (0, 1], got {values}")
        if len(set(values)) != len(values):
            raise ValueError(f"param_grid[{name!r}] lists a value twice: {values}")
        grid[name] = [float(v) for v in values]
    return grid


class HingeSearchCV(MetaEstimatorMixin, BaseEstimator):
    """Cross-validated grid search over C (and gamma) of a ``HingeClassifier`` or a ``HingeRegressor``, as one job of
    the service; a classifier or a regressor as its estimator is (scikit-learn's tags and ``score``).

    Parameters
    ----------
    estimator : a HingeClassifier or a HingeRegressor; its other parameters (solver, kernel, loss, n_jobs, url, ...)
        are every fit's.
    param_grid : {"C": [...], "gamma": [...]} (either may be left out: the estimator's value), numbers > 0; gamma
        needs a kernel solver with kernel "rbf", "poly" or "sigmoid". Or {"nu": [...], "gamma": [...]}: NuSVC's nu
        in (0, 1] (the fit trains smo's nu_svc, which has no C, whatever the estimator's nu). A HingeRegressor's grid:
        C, gamma, and "epsilon" (SVR's and LinearSVR's tube, numbers >= 0; not with nu) or "nu" (NuSVR's, with C). A
        list holding one such dict is accepted.
    scoring : None or "accuracy" (default), "roc_auc" or "f1" (two classes; positive: classes_[1]), "f1_macro"
        (more than two classes); a regressor's: None or "r2" (default), "neg_mean_squared_error".
    cv : number of folds (None: 5), drawn by the service with ``random_state`` (stratified by class for a
        classifier).
    refit : keep the best setting's model, refitted on all the data, as ``best_estimator_`` (the service always
        refits it; with refit=False it is deleted after the fit).
    random_state : seed of the folds (an int).

    Attributes
    ----------
    best_params_, best_score_, best_index_, best_estimator_ (refit=True), cv_results_ (params, param_C /
    param_gamma / param_nu / param_epsilon, split<k>_test_score, mean_test_score, std_test_score, rank_test_score, mean_fit_time: the
    service's seconds per fold), n_splits_, classes_ (a classifier's), search_results_ (the service's table),
    model_id_.
    Ties go to the smaller C, then the smaller gamma, as GridSearchCV's first best in a grid listed in ascending
    order.
    """

    def __init__(self, estimator, param_grid, *, scoring=None, cv=None, refit=True, random_state=0):
        self.estimator = estimator
        self.param_grid = param_grid
        self.scoring = scoring
        self.cv = cv
        self.refit = refit
        self.random_state = random_state

    def search_params(self, n_classes: int) -> dict:
        """The job's ``params.search`` for this grid (ValueError for what the service's search cannot run);
        ``n_classes``: the labels' count (a regressor's: ignored)."""
        if not isinstance(self.estimator, (HingeClassifier, HingeRegressor, HingeOneClassSVM)):
            raise ValueError(
                f"estimator must be a HingeClassifier, a HingeRegressor or a HingeOneClassSVM (the service's search "
                f"cross-validates its own models), got {type(self.estimator).__name__}: {GRID_SEARCH}"
            )
        grid = _grid(self.param_grid)
        if isinstance(self.estimator, HingeRegressor):
            self._check_regression_grid(grid)
        elif isinstance(self.estimator, HingeOneClassSVM):
            self._check_one_class_grid(grid)
        else:
            self._check_classification_grid(grid)
        cv = 5 if self.cv is None else self.cv
        if isinstance(cv, bool) or not isinstance(cv, numbers.Integral):
            raise ValueError(
                f"cv must be a number of folds (the service draws its own stratified folds), got {cv!r}: for "
                f"folds of your own (a splitter or a list of splits) {GRID_SEARCH}"
            )
        if not 2 <= int(cv) <= 50:
            raise ValueError(f"cv: the service's search takes 2 to 50 folds, got {cv}")
        if isinstance(self.estimator, HingeRegressor):
            metric = self._regression_metric()
        elif isinstance(self.estimator, HingeOneClassSVM):
            if self.scoring not in (None, "f1"):
                raise ValueError(
                    f"scoring: the service's one-class search scores by the F1 of the outliers (label -1): None or "
                    f"'f1', got {self.scoring!r}: {GRID_SEARCH}"
                )
            metric = "f1"
        else:
            metric = self._classification_metric(n_classes)
        if not isinstance(self.random_state, numbers.Integral) or self.random_state < 0:
            raise ValueError(f"random_state must be an int >= 0 (the folds' seed), got {self.random_state!r}")
        search: dict = {"cv_folds": int(cv), "metric": metric, "seed": int(self.random_state)}
        search.update(grid)
        return search

    def _classification_metric(self, n_classes: int) -> str:
        scoring = "accuracy" if self.scoring is None else self.scoring
        if not isinstance(scoring, str) or scoring not in SCORINGS:
            raise ValueError(
                f"scoring: the service's search scores by {', '.join(SCORINGS)}, got {scoring!r}: {GRID_SEARCH}"
            )
        metric, classes = SCORINGS[scoring]
        if classes == 2 and n_classes != 2:
            raise ValueError(f"scoring={scoring!r} applies to two classes; the data has {n_classes} (use 'f1_macro')")
        if classes == 3 and n_classes <= 2:
            raise ValueError(f"scoring={scoring!r} is the macro average over more than two classes; use 'f1'")
        return metric

    def _regression_metric(self) -> str:
        scoring = "r2" if self.scoring is None else self.scoring
        if not isinstance(scoring, str) or scoring not in REGRESSION_SCORINGS:
            raise ValueError(
                f"scoring: the service's search scores a regression by {', '.join(REGRESSION_SCORINGS)}, got "
                f"{scoring!r}: {GRID_SEARCH}"
            )
        return REGRESSION_SCORINGS[scoring]

    def _check_classification_grid(self, grid: dict[str, list[float]]) -> None:
        """What a HingeClassifier's grid may hold: C or nu (NuSVC), gamma with a kernel solver; no epsilon."""
        if "epsilon" in grid:
            raise ValueError("param_grid['epsilon']: epsilon is a regression's (HingeRegressor); a classifier has none")
        if "nu" in grid and "C" in grid:
            raise ValueError(
                "param_grid: nu makes the estimator NuSVC, which has no C (nu takes its place): search nu (and gamma)"
            )
        if "C" in grid and self.estimator.nu is not None:
            raise ValueError(
                f"param_grid['C']: the estimator is NuSVC (nu={self.estimator.nu!r}), which has no C: search nu instead"
            )
        if "gamma" in grid:
            nu = self.estimator.nu is not None or "nu" in grid
            solver = solver_for(self.estimator.solver, self.estimator.kernel, nu=nu)
            kernel = self.estimator.kernel or ("rbf" if solver in KERNEL_SOLVERS else "linear")
            if solver not in KERNEL_SOLVERS or kernel == "linear":
                raise ValueError(
                    f"param_grid['gamma']: gamma applies to a kernel solver ({', '.join(KERNEL_SOLVERS)}) with kernel "
                    f"'rbf', 'poly' or 'sigmoid'; the estimator trains {solver} with the {kernel} kernel"
                )

    def _check_one_class_grid(self, grid: dict[str, list[float]]) -> None:
        """What a HingeOneClassSVM's grid may hold: nu, and gamma with a kernel other than linear (no C, no
        epsilon)."""
        for name in ("C", "epsilon"):
            if name in grid:
                raise ValueError(f"param_grid[{name!r}]: a one-class SVM has no {name} (nu takes C's place)")
        if "gamma" in grid and self.estimator.kernel in ("linear", "precomputed"):
            raise ValueError(
                f"param_grid['gamma']: gamma applies to kernel 'rbf', 'poly' or 'sigmoid'; the estimator's is "
                f"{self.estimator.kernel!r}"
            )

    def _check_regression_grid(self, grid: dict[str, list[float]]) -> None:
        """What a HingeRegressor's grid may hold: C, gamma with a kernel other than linear, and epsilon (SVR,
        LinearSVR) or nu (NuSVR) as the estimator's own formulation allows."""
        estimator = self.estimator
        if "epsilon" in grid and ("nu" in grid or estimator.nu is not None):
            raise ValueError(
                "param_grid['epsilon']: NuSVR (nu) learns epsilon; search epsilon with nu=None, or nu instead"
            )
        if "nu" in grid and estimator.epsilon is not None:
            raise ValueError(
                f"param_grid['nu']: the estimator sets epsilon={estimator.epsilon!r}, which NuSVR learns: leave "
                "epsilon=None to search nu"
            )
        if "gamma" in grid and estimator.kernel in ("linear", "precomputed"):
            raise ValueError(
                f"param_grid['gamma']: gamma applies to kernel 'rbf', 'poly' or 'sigmoid'; the estimator's is "
                f"{estimator.kernel!r}"
            )

    def _regression(self) -> bool:
        return isinstance(self.estimator, HingeRegressor)

    def _one_class(self) -> bool:
        return isinstance(self.estimator, HingeOneClassSVM)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = self.estimator.__sklearn_tags__()
        tags.estimator_type = inner.estimator_type
        tags.classifier_tags = inner.classifier_tags
        tags.regressor_tags = inner.regressor_tags
        tags.input_tags.sparse = inner.input_tags.sparse
        return tags

    def score(self, X, y, sample_weight=None):
        """best_estimator_'s score: accuracy for a classifier, R² for a regressor (scikit-learn's defaults); for a
        one-class SVM the search's own measure, the F1 of the outliers (label -1) it predicts."""
        check_is_fitted(self, "best_estimator_")
        if self._one_class():
            from sklearn.metrics import f1_score

            return float(f1_score(y, self.best_estimator_.predict(X), pos_label=-1, sample_weight=sample_weight))
        return self.best_estimator_.score(X, y, sample_weight=sample_weight)

    def fit(self, X, y):
        """Upload X and y once, run the grid as one job of the service's search, keep the best setting's model."""
        n_classes = 0 if self._regression() else np.unique(np.asarray(y)).size
        search = self.search_params(n_classes)
        if self._one_class() and not set(np.unique(np.asarray(y, dtype=float)).tolist()) <= {-1.0, 1.0}:
            raise ValueError(
                "y: a one-class search scores its folds by the F1 of the outliers, which needs labels -1 (outlier) "
                f"and 1 (inlier); got {np.unique(np.asarray(y))[:5].tolist()}"
            )
        grid = {name: search[name] for name in SEARCHED if name in search}
        fitted = clone(self.estimator)
        if "nu" in grid and fitted.nu is None:  # a grid over nu trains NuSVC: the estimator takes its first value
            fitted.set_params(nu=grid["nu"][0])
        fitted._fit(X, np.asarray(y, dtype=float) if self._one_class() else y, search=search)  # the best, refitted
        table = fitted.model_["search_results"]
        chosen = fitted.model_.get("refit_params") or table["best"]
        best_params = {name: float(chosen[name]) for name in grid}
        fitted.set_params(**best_params)
        self.search_results_ = table
        self.cv_results_ = self._cv_results(table, grid)
        self.best_index_ = int(
            next(i for i, p in enumerate(self.cv_results_["params"]) if p == best_params) if best_params else 0
        )
        self.best_params_ = best_params
        self.best_score_ = float(table["best"]["mean"])
        self.n_splits_ = int(table["cv_folds"])
        default_scoring = "r2" if self._regression() else "f1" if self._one_class() else "accuracy"
        self.scorer_ = default_scoring if self.scoring is None else self.scoring
        self.multimetric_ = False
        if not self._regression() and not self._one_class():
            self.classes_ = fitted.classes_
        self.n_features_in_ = fitted.n_features_in_
        self.model_id_ = fitted.model_id_
        if self.refit:
            self.best_estimator_ = fitted
        elif fitted.__dict__.get("_cleanup") is not None:
            fitted._cleanup()  # the model and its job go now (unless the estimator keeps its models)
        return self

    @staticmethod
    def _cv_results(table: dict, grid: dict[str, list[float]]) -> dict:
        """scikit-learn's cv_results_ from the service's table, settings in ParameterGrid's order."""

        def key(setting: dict) -> tuple:
            return tuple(None if setting.get(name) is None else float(setting[name]) for name in SEARCHED)

        rows = {key(s): s for s in table["settings"]}
        params = list(ParameterGrid(grid)) if grid else [{}]
        n_folds = int(table["cv_folds"])
        only_C = {key_[0] for key_ in rows}
        results: dict = {"params": params}
        scores = np.full((len(params), n_folds), np.nan)
        fit_time = np.full(len(params), np.nan)
        for i, setting in enumerate(params):
            C = setting.get("C", next(iter(only_C)) if len(only_C) == 1 else None)
            gamma, nu, epsilon = setting.get("gamma"), setting.get("nu"), setting.get("epsilon")
            row = rows.get((C, gamma, nu, epsilon)) or next(
                (
                    r
                    for (c, g, n, e), r in rows.items()
                    if c == C
                    and (gamma is None or g == gamma)
                    and (n == nu or (nu is None and "nu" not in grid))
                    and (epsilon is None or e == epsilon)
                ),
                None,
            )
            if row is None:
                continue
            folds = [np.nan if v is None else v for v in row["fold_scores"]]
            scores[i, : len(folds)] = folds
            fit_time[i] = row["seconds"] / max(1, row["folds_done"])
        for name in grid:
            results[f"param_{name}"] = np.ma.MaskedArray([p[name] for p in params], mask=False, dtype=object)
        for k in range(n_folds):
            results[f"split{k}_test_score"] = scores[:, k]
        results["mean_test_score"] = scores.mean(axis=1)
        results["std_test_score"] = scores.std(axis=1)
        means = np.where(np.isnan(results["mean_test_score"]), -np.inf, results["mean_test_score"])
        results["rank_test_score"] = np.array([1 + int(np.sum(means > m)) for m in means], dtype=np.int32)
        results["mean_fit_time"] = fit_time
        return results

    def _refitted(self) -> bool:
        return bool(self.refit)

    @available_if(_refitted)
    def predict(self, X):
        """best_estimator_'s predictions."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict(X)

    @available_if(_refitted)
    def decision_function(self, X):
        """best_estimator_'s decision_function."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.decision_function(X)

    def _calibrated(self) -> bool:
        return bool(self.refit) and bool(getattr(self.estimator, "probability", False))

    @available_if(_calibrated)
    def predict_proba(self, X):
        """best_estimator_'s predict_proba (the estimator needs probability=True)."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict_proba(X)
