"""scikit-learn estimators that train and predict on a Hinge service: ``HingeClassifier`` and ``HingeRanker``.

``fit`` uploads the rows (as svmlight, features numbered from 1), trains a job remotely and keeps the
model's id; ``predict``, ``decision_function`` and ``predict_proba`` send the rows to the model's
predict route. ``get_params`` / ``set_params`` are the solver's parameters (``C``, ``kernel``,
``gamma``, ``loss``, ``penalty``, ``bias``, ``tol``, ``max_iter``, ``class_weight``, ``multi_class``, ``nu``,
``probability``; anything else a solver takes goes in ``solver_params``); ``random_state`` is the job's ``seed``.
A parameter the chosen solver does not take, set to anything but its default, is an error at ``fit``.

Solver and kernel: ``solver="auto"`` (the default) trains ``dcd`` (a linear model) unless a kernel other
than linear (or ``nu``: NuSVC) is asked for, then ``smo``; ``solver_`` says which ran. A linear solver (dcd, cpa,
ocas) named together with such a kernel is an error that names the kernel solvers. Linear models (and smo
models with the linear kernel) have ``coef_`` and ``intercept_`` in LinearSVC's (or SVC's) shapes and signs.

More than two classes, as scikit-learn: smo trains one-vs-one (SVC's scheme, ``multiclass="ovo"``) and its
``decision_function`` is SVC's one-vs-rest shape of the votes (``decision_function_shape="ovr"``) or the
pairwise values (``"ovo"``); the linear solvers (and sampled_cuts) train one-vs-rest, as LinearSVC, and ocas
Crammer and Singer's one problem over all classes on request (``multi_class="crammer_singer"``, as LinearSVC's).
``n_jobs`` is the job's ``n_processes``. ``HingeSearchCV`` (``hinge_client.model_selection``) runs a grid
of C and gamma as one job of the service's own search.

Warnings: every entry of the job's and the model's ``warnings`` (a solver stopped by ``max_iter``, a gap
not certified, a model no better than the majority class, ...) is issued after ``fit`` as scikit-learn's
``ConvergenceWarning``, with its message and code.

What a fit leaves on the service: the uploaded data set is deleted once the model exists
(``keep_data=True`` keeps it as long as the model). The model and its job are deleted when the
estimator is refitted or garbage-collected (or the interpreter exits), so GridSearchCV and
cross_val_score leave only the models of the estimators still alive (best_estimator_'s);
``keep_model=True`` keeps them for good, and so does pickling or deep-copying a fitted estimator (the
copy uses the model). Deletions run in a background thread; ``wait_for_cleanup()`` waits for them.

Connection: ``url`` (else ``HINGE_URL``, else http://127.0.0.1:8000) and ``api_key`` (else
``HINGE_API_KEY``). Clients are shared per connection, outside the estimator, so that predicting
changes nothing in the estimator (scikit-learn checks that) and the estimator pickles. What the two estimators
share (connection, upload, training, batched predict, warnings) is ``hinge_client.remote_estimator``.

    from hinge_client import HingeClassifier
    clf = HingeClassifier(kernel="rbf", C=10, gamma=0.5, probability=True).fit(X_train, y_train)  # smo
    clf.predict(X_test), clf.predict_proba(X_test)
    HingeClassifier(C=0.1).fit(X_train, y_train).coef_                                             # dcd
    HingeClassifier(penalty="l1", loss="squared_hinge").fit(X_train, y_train).coef_    # dcd, sparse (LIBLINEAR -s 5)
    HingeClassifier(multi_class="crammer_singer").fit(X, wine_y)           # ocas, one problem (LIBLINEAR -s 4)
    HingeClassifier(kernel="rbf", n_jobs=2).fit(X, digits_y).decision_function(X)  # SVC's ovo, ovr-shaped
    HingeClassifier(nu=0.3, gamma=0.05).fit(X_train, y_train)              # NuSVC(nu=0.3, gamma=0.05): smo, rbf
"""

from __future__ import annotations

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from hinge_client.cleanup import wait_for_cleanup
from hinge_client.regressor import check_nu
from hinge_client.remote_estimator import (
    _RemoteModel,
    kernel_params,
    n_processes_of,
    service_solvers,
    warn_service_warnings,
)
from hinge_client.solvers import SolverInfo, estimator_params_of

__all__ = ["HingeClassifier", "HingeRanker", "wait_for_cleanup", "warn_service_warnings"]

SOLVER_PARAMS = {
    "dcd": ("C", "loss", "penalty", "bias", "tol", "max_iter", "class_weight"),
    "cpa": ("C", "bias", "tol", "max_iter"),
    "ocas": ("C", "bias", "tol", "max_iter"),
    "smo": ("C", "kernel", "gamma", "degree", "coef0", "tol", "max_iter", "class_weight", "nu"),
    "sampled_cuts": ("C", "kernel", "gamma", "degree", "coef0", "bias", "tol", "max_iter"),
}
LINEAR_SOLVERS = ("dcd", "cpa", "ocas")
SERVICE_LOSSES = {"log_loss": "logistic"}
"""scikit-learn's names of a loss that the service names otherwise (SGDClassifier's and LogisticRegression's
``log_loss`` is dcd's ``logistic``); the others go as they are."""
ONE_VS_ONE_SOLVERS = ("smo",)
"""Solvers that train one problem per pair of labels (``multiclass="ovo"``, their default, as SVC's)."""
CRAMMER_SINGER_SOLVERS = ("ocas", "sampled_cuts")
"""Solvers that train Crammer and Singer's one problem over all classes (``multi_class="crammer_singer"``)."""
MULTI_CLASS = (None, "ovr", "crammer_singer")
"""``multi_class`` values: LinearSVC's names (None: ``multiclass``'s scheme, else the solver's default)."""
MULTICLASS = (None, "ovr", "ovo", "crammer_singer")
"""``multiclass`` values (crammer_singer as ``multi_class``'s)."""
LINEAR_KERNELS = (None, "linear")
"""``kernel`` values a linear solver takes (None, the default, is each solver's own: linear, or rbf for smo and sampled_cuts)."""
DEFAULTS = {
    "loss": "hinge",
    "penalty": "l2",
    "bias": 1.0,
    "tol": None,
    "max_iter": None,
    "class_weight": None,
    "gamma": "scale",
    "degree": 3,
    "coef0": 0.0,
    "nu": None,
}
"""Defaults of the parameters that only some solvers take: any other value for another solver is an error."""


def solver_for(
    solver: str,
    kernel: str | None,
    known: dict[str, SolverInfo] | None = None,
    *,
    crammer_singer: bool = False,
    nu: bool = False,
) -> str:
    """The solver a fit trains: ``solver``, or for "auto" smo when a kernel other than linear is asked or ``nu``
    (NuSVC's nu is given), else dcd (when ``crammer_singer``, Crammer and Singer's multi-class problem: ocas, or
    sampled_cuts with a kernel other than linear).

    ``known``: the service's solvers (``service_solvers``), for a solver other than the built-in ones; without it
    such a name is taken as it is (the fit asks the service). A linear solver named together with a kernel other
    than linear is an error naming the kernel solvers.
    """
    if solver == "auto" and crammer_singer:
        if kernel == "precomputed":
            raise ValueError(
                "multi_class='crammer_singer' is trained by ocas (linear) or sampled_cuts (a kernel it computes), not "
                "kernel='precomputed': set multi_class='ovr' or None for a precomputed kernel"
            )
        return "ocas" if kernel in LINEAR_KERNELS else "sampled_cuts"
    if solver == "auto":
        return "dcd" if kernel in LINEAR_KERNELS and not nu else "smo"
    if not isinstance(solver, str) or not solver:
        raise ValueError(f"solver must be 'auto' or a solver's name ({', '.join(SOLVER_PARAMS)}, ...), got {solver!r}")
    if solver not in SOLVER_PARAMS and known is not None and solver not in known:
        raise ValueError(f"solver must be 'auto' or one of the service's: {', '.join(known)}; got {solver!r}")
    linear = solver in LINEAR_SOLVERS or (known is not None and solver in known and not known[solver].kernel)
    if linear and kernel not in LINEAR_KERNELS:
        raise ValueError(
            f"kernel={kernel!r} needs a kernel solver: solver='smo' (or 'sampled_cuts', or 'auto', which picks smo); "
            f"solver={solver!r} trains linear models only (kernel=None or 'linear')"
        )
    return solver


class HingeClassifier(ClassifierMixin, _RemoteModel):
    """A support vector classifier trained by a Hinge service: SVC's schemes with a kernel, LinearSVC's without.

    Parameters
    ----------
    solver : "auto" (default: smo when kernel is "rbf", "poly" or "sigmoid" or nu is given, else dcd), "dcd", "cpa",
        "ocas" (linear: kernel must be None or "linear"), "smo" or "sampled_cuts" (kernel), or any other solver the
        service registers (what it takes is read from the service's OpenAPI document). ``solver_`` is the one used.
    C : penalty of the training loss, LIBLINEAR's convention: minimize 0.5|w|^2 + C sum loss_i (left at 1.0 with nu).
    kernel, gamma, degree, coef0 : the kernel ("linear", "rbf", "poly", "sigmoid"; None: linear for the linear
        solvers, rbf for smo and sampled_cuts; gamma a number or "scale"), or "precomputed" (smo, SVC's): X is the
        kernel matrix, (n_samples, n_samples) to fit and (n, n_samples of the fit) to predict.
    nu : None (default: not used, C-SVC) or a number in (0, 1]: NuSVC (smo's svm_type nu_svc, LIBSVM -s 1), nu in
        place of C: an upper bound on the fraction of margin errors and a lower bound on the fraction of support
        vectors. Solver smo only ("auto" picks it, whatever the kernel; kernel None is rbf, as for smo); C must be
        left at 1.0 and class_weight at None (NuSVC has neither); probability calibrates as for C-SVC; more than two
        classes one-vs-one by default, as NuSVC. Each binary problem needs nu <= 2 min(rows of a class) / rows (the
        service refuses a larger nu naming the largest: a ValueError).
    loss : dcd's loss: "hinge" (LinearSVC's L1 loss), "squared_hinge" (LinearSVC's default) or "log_loss"
        (logistic regression, LIBLINEAR -s 7 as LogisticRegression(solver="liblinear"): predict_proba with no
        calibration).
    penalty : the regularizer: "l2" (default, 0.5|w|^2) or "l1" (|w|_1, whose coef_ is sparse): with
        loss="squared_hinge" LIBLINEAR -s 5, as LinearSVC(penalty="l1", loss="squared_hinge", dual=False); with
        loss="log_loss" L1-regularized logistic regression, LIBLINEAR -s 6, as LogisticRegression(l1_ratio=1,
        solver="liblinear") (penalty="l1" before scikit-learn 1.8; predict_proba with no calibration). "l1" is dcd's
        only (solver "dcd", or "auto" with no
        kernel) and needs one of those two losses (the default loss is "hinge"). With "l1", tol=None is LIBLINEAR's
        0.01.
    bias : value of the constant feature (dcd, cpa, ocas, sampled_cuts); None: no offset.
    tol, max_iter : the solver's stopping rule (None: the service's default; ocas reads tol as tol_rel).
    class_weight : {label: factor on C}, or "balanced" (n_samples / (n_classes * count of the label)).
    multiclass : more than two classes: "ovo" (one problem per pair of classes, predicted by vote: SVC's and
        LIBSVM's; smo only), "ovr" (one problem per class: LinearSVC's) or "crammer_singer" (as multi_class); None
        (default): "ovo" for smo, "ovr" for the other solvers.
    multi_class : LinearSVC's name and values: None (default: as multiclass), "ovr" (one-vs-rest) or
        "crammer_singer": one problem over all classes, Crammer and Singer's multi-class hinge with one weight
        vector per class, predicted by the largest score (LIBLINEAR -s 4, LinearSVC(multi_class="crammer_singer")).
        Solver ocas, or sampled_cuts with a kernel ("auto" picks by the kernel: Crammer and Singer's problem in the
        kernel's feature space); probability=True gives a softmax over the K scores. Setting both
        multi_class and multiclass is an error unless they agree.
    decision_function_shape : "ovr" (default, as SVC): decision_function gives one score per class, for a
        one-vs-one model SVC's votes plus squashed summed pairwise values; "ovo": one score per pair of classes
        (0,1), (0,2), ..., (1,2), ..., positive for the first (one-vs-one models only).
    n_jobs : processes of the job (its binary problems, folds and settings in parallel; the kernel solvers'
        threads within one problem): the job's n_processes. None or -1: the worker's cores.
    probability : calibrate with Platt's sigmoid on 5-fold decision values, so that predict_proba exists
        (one-vs-one: a sigmoid per pair, coupled as LIBSVM's -b 1).
    random_state : the job's seed.
    max_seconds : the job's deadline (the best model so far is kept).
    solver_params : other parameters of the solver, as the service's schema names them.
    url, api_key, timeout : the service; timeout bounds each request and the wait for training.
    keep_data : keep the uploaded training data set on the service (as long as the model).
    keep_model : keep the model and its job on the service when the estimator is refitted or garbage-collected
        (default: they are deleted then, so cross-validation leaves nothing behind).

    Attributes
    ----------
    classes_, n_features_in_, model_id_ (the service's model), model_ (its record), solver_, n_iter_.
    coef_, intercept_ : linear models (and smo with kernel="linear"): LinearSVC's shapes and signs, (1, n_features)
        and (1,) for two labels (positive scores: classes_[1]), (n_classes, n_features) and (n_classes,) for more
        (one-vs-rest, or a vector per class with multi_class="crammer_singer"), and decision_function is
        X @ coef_.T + intercept_; one-vs-one, SVC's: a row per pair of classes, X @ coef_.T + intercept_ being
        decision_function with decision_function_shape="ovo".
    """

    def __init__(
        self,
        solver="auto",
        C=1.0,
        *,
        kernel=None,
        gamma="scale",
        degree=3,
        coef0=0.0,
        loss="hinge",
        penalty="l2",
        bias=1.0,
        tol=None,
        max_iter=None,
        class_weight=None,
        nu=None,
        multiclass=None,
        multi_class=None,
        decision_function_shape="ovr",
        n_jobs=None,
        probability=False,
        random_state=0,
        max_seconds=None,
        solver_params=None,
        url=None,
        api_key=None,
        timeout=600.0,
        keep_data=False,
        keep_model=False,
    ):
        self.solver = solver
        self.C = C
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.loss = loss
        self.penalty = penalty
        self.bias = bias
        self.tol = tol
        self.max_iter = max_iter
        self.class_weight = class_weight
        self.nu = nu
        self.multiclass = multiclass
        self.multi_class = multi_class
        self.decision_function_shape = decision_function_shape
        self.n_jobs = n_jobs
        self.probability = probability
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

    def solver_info(self) -> tuple[str, tuple[str, ...], bool]:
        """The solver a fit trains, the estimator's parameters it takes and whether it trains one-vs-one: from the
        built-in table for the five built-in solvers (no request), else from the service's OpenAPI document (a
        solver registered there, ``HINGE_SOLVER_PLUGINS``, needs no client change)."""
        crammer_singer = self.requested_multiclass() == "crammer_singer"
        nu = self.nu is not None
        solver = solver_for(self.solver, self.kernel, crammer_singer=crammer_singer, nu=nu)
        if solver in SOLVER_PARAMS:
            return solver, SOLVER_PARAMS[solver], solver in ONE_VS_ONE_SOLVERS
        known = service_solvers(self.url, self.api_key, self.timeout)
        solver = solver_for(self.solver, self.kernel, known, crammer_singer=crammer_singer, nu=nu)
        info = known[solver]
        return solver, estimator_params_of(info), "ovo" in info.multiclass

    def requested_multiclass(self) -> str | None:
        """The multi-class scheme asked for: ``multi_class`` (LinearSVC's name) or ``multiclass``, which must agree
        when both are set; None when neither is (the solver's default)."""
        if self.multi_class not in MULTI_CLASS:
            raise ValueError(
                f"multi_class must be None, 'ovr' or 'crammer_singer' (LinearSVC's), got {self.multi_class!r}"
                + ("; one-vs-one is multiclass='ovo'" if self.multi_class == "ovo" else "")
            )
        if self.multiclass not in MULTICLASS:
            raise ValueError(f"multiclass must be None, 'ovr', 'ovo' or 'crammer_singer', got {self.multiclass!r}")
        if None not in (self.multi_class, self.multiclass) and self.multi_class != self.multiclass:
            raise ValueError(
                f"multi_class={self.multi_class!r} and multiclass={self.multiclass!r} conflict: they are one setting "
                "(LinearSVC's name and this estimator's); set one of them, or both to the same value"
            )
        return self.multiclass if self.multi_class is None else self.multi_class

    def _takes_crammer_singer(self, solver: str) -> bool:
        """Whether ``solver`` trains Crammer and Singer's problem (the built-in table, else the service's document)."""
        if solver in SOLVER_PARAMS:
            return solver in CRAMMER_SINGER_SOLVERS
        return "crammer_singer" in service_solvers(self.url, self.api_key, self.timeout)[solver].multiclass

    def multiclass_scheme(self) -> str:
        """The scheme a fit trains for more than two classes: ``multi_class`` or ``multiclass``, or "ovo" for smo
        and "ovr" for the other solvers (scikit-learn's SVC and LinearSVC)."""
        solver, _taken, one_vs_one = self.solver_info()
        scheme = self.requested_multiclass()
        if scheme is None:
            return "ovo" if one_vs_one else "ovr"
        if scheme == "ovo" and not one_vs_one:
            raise ValueError(
                f"multiclass='ovo' needs solver 'smo' (or 'auto' with a kernel such as 'rbf'); solver {solver!r} "
                "trains one-vs-rest only (multiclass='ovr' or None)"
            )
        if scheme == "crammer_singer" and not self._takes_crammer_singer(solver):
            raise ValueError(
                f"multi_class='crammer_singer' needs solver 'ocas', 'sampled_cuts' with a kernel, or 'auto' (which picks "
                f"one of them by the kernel); solver "
                f"{solver!r} does not train Crammer and Singer's problem (set multi_class='ovr' or None)"
            )
        return scheme

    def _check_penalty(self, solver: str, taken: tuple[str, ...]) -> None:
        """penalty="l1" (dcd's L1-regularized squared hinge or logistic regression) needs a solver that takes it and
        loss="squared_hinge" or "log_loss"."""
        if self.penalty not in ("l2", "l1"):
            raise ValueError(f"penalty must be 'l2' or 'l1', got {self.penalty!r}")
        if self.penalty == "l1" and "penalty" not in taken:
            raise ValueError(
                f"penalty='l1' needs solver 'dcd' (or 'auto' with no kernel, which picks dcd); solver {solver!r} "
                "trains the l2 penalty only"
            )
        if self.penalty == "l1" and "loss" in taken and self.loss not in ("squared_hinge", "log_loss"):
            raise ValueError(
                f"penalty='l1' trains the squared hinge (LIBLINEAR -s 5, LinearSVC(penalty='l1', "
                "loss='squared_hinge', dual=False)) or the logistic loss (-s 6): pass loss='squared_hinge' or "
                f"loss='log_loss' (got loss={self.loss!r}; the default loss is 'hinge')"
            )

    def _nu_svc(self) -> float | None:
        """NuSVC's nu (None: C-SVC), checked: a number in (0, 1], with C at its default 1.0 and no class_weight (the
        service's nu_svc refuses both; LIBSVM's nu-SVC and NuSVC have neither)."""
        if self.nu is None:
            return None
        nu = check_nu(self.nu)
        if self.C != 1.0:
            raise ValueError(
                f"C={self.C!r} with nu={self.nu!r}: NuSVC has no C (nu takes its place); leave C at 1.0, or set "
                "nu=None for C-SVC"
            )
        if self.class_weight is not None:
            raise ValueError(
                f"class_weight={self.class_weight!r} with nu={self.nu!r}: NuSVC takes no class_weight (LIBSVM's nu-SVC "
                "has none); leave it None, or set nu=None for C-SVC"
            )
        return nu

    def service_params(self, y_encoded: np.ndarray | None = None) -> dict:
        """The job's ``params`` for the solver ``fit`` trains (``solver_for``; what ``fit`` sends)."""
        solver, taken, one_vs_one = self.solver_info()
        self._check_penalty(solver, taken)
        for name, default in DEFAULTS.items():
            value = getattr(self, name)
            if name not in taken and value != default:
                users = [s for s, names in SOLVER_PARAMS.items() if name in names]
                hint = ""
                if self.solver == "auto" and name in ("gamma", "degree", "coef0"):
                    hint = "; with solver='auto', a kernel other than linear picks smo: set kernel='rbf', 'poly' or 'sigmoid'"
                if name == "nu":
                    hint = "; nu is NuSVC's: it needs solver 'smo' (or 'auto', which picks smo when nu is given)"
                raise ValueError(
                    f"{name}={value!r} does not apply to solver {solver!r} (only to {', '.join(users)}){hint}"
                )
        nu = self._nu_svc()
        params: dict = {"C": float(self.C), **self._job_params(), "probability": bool(self.probability)}
        if nu is not None:  # nu takes C's place: the service's nu_svc has no C
            del params["C"]
            params.update(svm_type="nu_svc", nu=nu)
        scheme = self.multiclass_scheme()  # refuses what the solver does not train
        if one_vs_one or scheme == "crammer_singer":
            params["multiclass"] = scheme
        if self.decision_function_shape not in ("ovr", "ovo"):
            raise ValueError(f"decision_function_shape must be 'ovr' or 'ovo', got {self.decision_function_shape!r}")
        n_processes = n_processes_of(self.n_jobs)
        if n_processes is not None:
            params["n_processes"] = n_processes
        if "loss" in taken:
            params["loss"] = SERVICE_LOSSES.get(self.loss, self.loss)
        if self.penalty != "l2":  # sent when asked for (a service before penalty takes dcd jobs as they were)
            params["penalty"] = self.penalty
        if "bias" in taken:
            params["bias"] = None if self.bias is None else float(self.bias)
        if self.tol is not None and "tol" in taken:
            params["tol_rel" if solver == "ocas" else "tol"] = float(self.tol)
        if "kernel" in taken:
            params["kernel"] = kernel_params(self.kernel or "rbf", self.gamma, self.degree, self.coef0)
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
        return self._fit(X, y)

    def _fit(self, X, y, search: dict | None = None):
        """``fit``; with ``search`` (the job's ``params.search``) the service's search picks the setting
        (``HingeSearchCV``)."""
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64)
        check_classification_targets(y)
        self.classes_, y_encoded = np.unique(y, return_inverse=True)
        if self.classes_.size < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least two classes; the data has 1 class "
                f"({self.classes_[0]!r}) in {y.size} sample{'s' if y.size != 1 else ''}"
            )
        params = self.service_params(y_encoded)
        scheme = self.multiclass_scheme()
        if self.classes_.size > 2 and self.decision_function_shape == "ovo" and scheme != "ovo":
            raise ValueError(
                "decision_function_shape='ovo' needs a one-vs-one model: multiclass='ovo' (solver 'smo'); this fit "
                f"trains {'one-vs-rest' if scheme == 'ovr' else scheme}, whose scores are one per class "
                "(decision_function_shape='ovr')"
            )
        if search is not None:
            params["search"] = search
        solver = self.solver_info()[0]
        model = self._train(X, y_encoded, solver, params)
        self._adopt(model)
        self.solver_ = solver
        self._linear = None
        if model["kind"] == "linear" or (params.get("kernel") or {}).get("type") == "linear":
            self._linear = self._exported_linear()
        return self

    def _linear_part(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        check_is_fitted(self, "model_id_")
        if self._linear is None:
            raise AttributeError(
                f"{name} is only available for linear models (solver 'dcd', 'cpa' or 'ocas', or kernel='linear'); "
                f"this model was trained by {self.solver_} with "
                f"{(self.model_['params'].get('kernel') or {}).get('type', 'a')} kernel"
            )
        return self._linear

    @property
    def coef_(self) -> np.ndarray:
        """Weights: (1, n_features) for two labels (positive: classes_[1]), else (n_classes, n_features) one-vs-rest
        (LinearSVC's) or (n_pairs, n_features) one-vs-one (SVC's)."""
        return self._linear_part("coef_")[0]

    @property
    def intercept_(self) -> np.ndarray:
        """Offsets: (1,) for two labels, else (n_classes,) one-vs-rest or (n_pairs,) one-vs-one."""
        return self._linear_part("intercept_")[1]

    def decision_function(self, X):
        """Scores: (n,) for two classes (positive: classes_[1]); for more, (n, n_classes) (one-vs-rest shape), or
        with decision_function_shape="ovo" (n, n_classes * (n_classes - 1) / 2), one per pair of classes."""
        X = self._check_rows(X)
        return self._predict_remote(X, decision_function_shape=self.decision_function_shape)["scores"]

    def predict(self, X):
        """The predicted classes."""
        X = self._check_rows(X)
        labels = np.asarray(self._predict_remote(X)["labels"], dtype=np.int64)
        return self.classes_[labels]

    def _calibrated(self) -> bool:
        return bool(self.probability) or self.loss == "log_loss"

    @available_if(_calibrated)
    def predict_proba(self, X):
        """Class probabilities (n, n_classes), columns in the order of classes_ (needs probability=True, or
        loss="log_loss": a logistic regression's own)."""
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
    random_state, max_seconds, solver_params, url, api_key, timeout, keep_data, keep_model : as HingeClassifier.
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
        keep_model=False,
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
        self.keep_model = keep_model

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
            **self._job_params(),
            "objective": "ranking" if qid is not None else "ordinal",
        }
        if self.tol is not None:
            params["tol"] = float(self.tol)
        params.update(self.solver_params or {})
        self._adopt(self._train(X, y, "cpa", params, qid=qid))
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
