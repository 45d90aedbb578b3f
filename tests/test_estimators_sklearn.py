"""The estimators as scikit-learn users know them: SVC's and LinearSVC's defaults and scores, HingeSearchCV.

Against a real service (the ``service`` fixture): the multi-class schemes and decision-function shapes of
SVC, cross-validated scores equal to SVC's and LinearSVC's on the same folds, NuSVC's predictions with ``nu``, and
HingeSearchCV choosing what GridSearchCV over the estimator chooses. Without a service: the service's warnings become
ConvergenceWarnings, nu maps to smo's nu_svc, and what the service's search cannot run (or NuSVC does not take) is a
ValueError.
"""

from __future__ import annotations

import gc
import inspect
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold, PredefinedSplit, StratifiedKFold, cross_val_score
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, LinearSVC, NuSVC
from sklearn.utils.multiclass import _ovr_decision_function

from hinge_client import Client, HingeClassifier, HingeError, HingeSearchCV, wait_for_cleanup
from hinge_client.remote_estimator import warn_service_warnings
from tests.test_client import wine
from worker.training.folds import make_folds

BREAST_CANCER_GRID = {"C": [0.001, 0.01, 0.1, 1.0, 10.0]}
"""The issue's GridSearchCV case on breast_cancer (linear): 5 values of C x 5 folds."""
DIGITS_GRID = {"C": [1.0, 10.0], "gamma": [0.001, 0.01]}
"""The issue's case on digits (rbf): 4 settings x 3 folds."""


def digits():
    X, y = load_digits(return_X_y=True)
    return X, y


def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X), y


# -- warnings ------------------------------------------------------------------------------------------


def test_service_warnings_become_convergence_warnings():
    job = {"id": "j", "warnings": [{"code": "max_iter", "message": "dcd stopped at max_iter = 10 before tol"}]}
    model = {
        "id": "m",
        "warnings": [
            {"code": "max_iter", "message": "dcd stopped at max_iter = 10 before tol"},  # the job's, once
            {"code": "no_better_than_majority", "message": "train accuracy 0.62 <= 0.76 of the majority class"},
        ],
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        issued = warn_service_warnings(job, model)
    assert [w.category for w in caught] == [ConvergenceWarning, ConvergenceWarning]
    assert [w.message.code for w in caught] == ["max_iter", "no_better_than_majority"]
    assert str(caught[0].message) == "dcd stopped at max_iter = 10 before tol [Hinge: max_iter]"
    assert "0.62" in str(caught[1].message) and len(issued) == 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert warn_service_warnings({"id": "j"}, {"id": "m", "warnings": []}) == []  # absent and empty: none
    assert caught == []
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # as a user makes them fatal
        with pytest.raises(ConvergenceWarning, match="max_iter"):
            warn_service_warnings(job)


def test_a_fit_issues_the_warnings_of_its_job_and_model(service):
    """Whatever the service reports after a real fit is issued (none for a converged fit; max_iter's, once the
    service reports warnings, for a fit stopped at one iteration)."""
    X, y = cancer()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf = HingeClassifier(C=1.0, max_iter=1, solver_params={"tol_rel": None}, url=service.base_url).fit(X, y)
    reported = [dict(w) for w in (clf.model_.get("warnings") or [])]
    with Client(service.base_url) as client:
        reported += [dict(w) for w in (client.get_job(clf.model_["job_id"]).get("warnings") or [])]
    issued = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert {w.message.code for w in issued} == {entry["code"] for entry in reported}


# -- parameters and shapes -----------------------------------------------------------------------------


def test_multiclass_decision_function_shape_and_n_jobs_are_parameters():
    clf = HingeClassifier(kernel="rbf", multiclass="ovo", decision_function_shape="ovo", n_jobs=2)
    params = clf.get_params()
    assert (params["multiclass"], params["decision_function_shape"], params["n_jobs"]) == ("ovo", "ovo", 2)
    assert clone(clf).get_params() == params
    assert clf.set_params(n_jobs=-1).n_jobs == -1
    assert HingeClassifier(kernel="rbf").service_params()["multiclass"] == "ovo"  # SVC's scheme by default
    assert HingeClassifier(kernel="rbf", multiclass="ovr").service_params()["multiclass"] == "ovr"
    assert "multiclass" not in HingeClassifier().service_params()  # dcd: one-vs-rest, LinearSVC's
    assert HingeClassifier(n_jobs=3).service_params()["n_processes"] == 3
    assert "n_processes" not in HingeClassifier(n_jobs=-1).service_params()
    with pytest.raises(ValueError, match="multiclass='ovo' needs solver 'smo'"):
        HingeClassifier(multiclass="ovo").service_params()
    with pytest.raises(ValueError, match="n_jobs must be"):
        HingeClassifier(n_jobs=0).service_params()
    with pytest.raises(ValueError, match="decision_function_shape must be"):
        HingeClassifier(decision_function_shape="ovx").service_params()


def test_penalty_and_multi_class_are_parameters_mapped_to_the_service():
    """penalty="l1" (dcd's L1-regularized squared hinge, LinearSVC(penalty="l1", dual=False)) and
    multi_class="crammer_singer" (ocas's one problem over all classes, LinearSVC's name; multiclass takes it too)
    are constructor parameters that go to the job's params; what the service cannot train is a ValueError that says
    what to set, before any request."""
    clf = HingeClassifier(penalty="l1", loss="squared_hinge", multi_class="ovr")
    params = clf.get_params()
    assert (params["penalty"], params["multi_class"]) == ("l1", "ovr")
    assert clone(clf).get_params() == params
    assert clf.set_params(penalty="l2", multi_class="crammer_singer").multi_class == "crammer_singer"
    assert HingeClassifier().get_params()["penalty"] == "l2" and HingeClassifier().get_params()["multi_class"] is None
    sent = HingeClassifier(penalty="l1", loss="squared_hinge").service_params()
    assert (sent["penalty"], sent["loss"]) == ("l1", "squared_hinge")
    assert "penalty" not in HingeClassifier().service_params()  # l2: the service's default, as before
    crammer_singer = HingeClassifier(multi_class="crammer_singer")
    assert crammer_singer.solver_info()[0] == "ocas"  # "auto" picks ocas, and sampled_cuts for a kernel
    assert HingeClassifier(multi_class="crammer_singer", kernel="rbf").solver_info()[0] == "sampled_cuts"
    assert crammer_singer.service_params()["multiclass"] == "crammer_singer"
    for synonym in (
        HingeClassifier(solver="ocas", multiclass="crammer_singer"),
        HingeClassifier(solver="ocas", multi_class="crammer_singer", multiclass="crammer_singer"),
    ):
        assert synonym.service_params()["multiclass"] == "crammer_singer" and synonym.solver_info()[0] == "ocas"
    assert "multiclass" not in HingeClassifier(solver="ocas", multi_class="ovr").service_params()


@pytest.mark.parametrize(
    "params,message",
    [
        ({"penalty": "l1"}, r"pass loss='squared_hinge'.*default loss is 'hinge'"),
        ({"penalty": "l1", "loss": "hinge"}, r"pass loss='squared_hinge' or loss='log_loss' \(got loss='hinge'"),
        ({"penalty": "l1", "loss": "squared_hinge", "solver": "ocas"}, r"penalty='l1' needs solver 'dcd'.*'ocas'"),
        ({"penalty": "l1", "loss": "squared_hinge", "kernel": "rbf"}, r"penalty='l1' needs solver 'dcd'.*'smo'"),
        ({"penalty": "elasticnet"}, "penalty must be 'l2' or 'l1'"),
        ({"multi_class": "crammer_singer", "solver": "dcd"}, r"multi_class='crammer_singer' needs solver 'ocas'"),
        ({"multi_class": "crammer_singer", "solver": "cpa"}, r"needs solver 'ocas'.*solver 'cpa'"),
        ({"multiclass": "crammer_singer", "solver": "smo"}, r"needs solver 'ocas'.*solver 'smo'"),
        (
            {"multi_class": "crammer_singer", "kernel": "precomputed"},
            r"trained by ocas \(linear\) or sampled_cuts.*not kernel='precomputed'",
        ),
        ({"multi_class": "crammer_singer", "multiclass": "ovr"}, "conflict: they are one setting"),
        ({"multi_class": "ovr", "multiclass": "ovo", "kernel": "rbf"}, "conflict: they are one setting"),
        ({"multi_class": "ovo"}, "multi_class must be None, 'ovr' or 'crammer_singer'.*multiclass='ovo'"),
        ({"multiclass": "one_vs_all"}, "multiclass must be None, 'ovr', 'ovo' or 'crammer_singer'"),
    ],
)
def test_penalty_and_multi_class_the_service_cannot_train_are_refused(params, message):
    with pytest.raises(ValueError, match=message):
        HingeClassifier(**params).service_params()
    X, y = cancer()
    with pytest.raises(ValueError, match=message):  # at fit, before any request (no service at this url)
        HingeClassifier(url="http://127.0.0.1:9", **params).fit(X, y)


def test_kernel_estimator_is_svc_one_vs_one(service):
    X, y = digits()
    X, y = X[:600], y[:600]
    ours = HingeClassifier(kernel="rbf", n_jobs=2, url=service.base_url).fit(X, y)
    assert ours.model_["params"]["multiclass"] == "ovo" and ours.model_["params"]["n_processes"] == 2
    reference = SVC(decision_function_shape="ovo").fit(X, y)
    ovo = ours.set_params(decision_function_shape="ovo").decision_function(X)  # as SVC's, settable after the fit
    ours.set_params(decision_function_shape="ovr")
    theirs = reference.decision_function(X)
    assert ovo.shape == theirs.shape == (600, 45)
    assert np.mean(np.sign(ovo) == np.sign(theirs)) > 0.99
    assert np.max(np.abs(ovo - theirs)) < 0.05, np.max(np.abs(ovo - theirs))
    # the default shape is SVC's one-vs-rest shape of the votes, computed from the pairs as scikit-learn does
    ovr = ours.decision_function(X)
    np.testing.assert_allclose(ovr, _ovr_decision_function(ovo < 0, -ovo, 10), atol=1e-9)
    assert np.array_equal(ours.classes_[np.argmax(ovr, axis=1)], ours.predict(X))
    assert np.mean(ours.predict(X) == reference.predict(X)) > 0.99

    # one-vs-rest on request; its scores have no pairs
    one_vs_rest = HingeClassifier(kernel="rbf", multiclass="ovr", url=service.base_url).fit(X, y)
    assert one_vs_rest.model_["params"]["multiclass"] == "ovr"
    with Client(service.base_url) as client, pytest.raises(HingeError) as caught:
        client.predict(one_vs_rest.model_id_, X[:2].tolist(), decision_function_shape="ovo")
    assert caught.value.status == 409 and caught.value.code == "model_not_one_vs_one"
    with pytest.raises(ValueError, match="needs a one-vs-one model"):
        HingeClassifier(kernel="rbf", multiclass="ovr", decision_function_shape="ovo", url=service.base_url).fit(X, y)

    # with the linear kernel, SVC's coef_: a row per pair, X @ coef_.T + intercept_ the pairwise values
    linear = HingeClassifier(solver="smo", kernel="linear", decision_function_shape="ovo", url=service.base_url)
    linear.fit(X[:300], y[:300])
    assert linear.coef_.shape == (45, 64) and linear.intercept_.shape == (45,)
    np.testing.assert_allclose(X @ linear.coef_.T + linear.intercept_, linear.decision_function(X), atol=1e-8)


# -- cross-validated scores ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data,ours,reference",
    [
        # SVC's defaults: C = 1, gamma 'scale', one-vs-one
        (digits, lambda url: HingeClassifier(kernel="rbf", url=url), lambda: SVC()),
        # LIBLINEAR's C convention on both sides (0.5|w|^2 + C sum loss, the bias regularized as intercept_scaling=1)
        (cancer, lambda url: HingeClassifier(url=url), lambda: LinearSVC(loss="hinge", max_iter=100_000)),
        # LinearSVC's default loss is the squared hinge (L2-SVM); Hinge's dcd default is the hinge (L1-SVM)
        (cancer, lambda url: HingeClassifier(loss="squared_hinge", url=url), lambda: LinearSVC(max_iter=100_000)),
    ],
    ids=["digits-rbf-SVC", "breast_cancer-LinearSVC-hinge", "breast_cancer-LinearSVC-default"],
)
def test_cross_validated_scores_equal_scikit_learn(service, data, ours, reference):
    X, y = data()
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    hinge = cross_val_score(ours(service.base_url), X, y, cv=folds)
    sklearn = cross_val_score(reference(), X, y, cv=folds)
    assert abs(hinge.mean() - sklearn.mean()) <= 0.005, (hinge, sklearn)
    assert np.max(np.abs(hinge - sklearn)) <= 0.02, (hinge, sklearn)


def test_log_loss_is_liblinear_logistic_regression(service):
    """loss="log_loss" is LogisticRegression(solver="liblinear") (LIBLINEAR's convention on both sides: the
    intercept regularized, intercept_scaling=1): the same cross-validated log-loss and accuracy, and predict_proba
    with no calibration asked for."""
    from sklearn.linear_model import LogisticRegression

    X, y = cancer()
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    ours = HingeClassifier(loss="log_loss", C=0.5, tol=1e-5, url=service.base_url)
    reference = LogisticRegression(solver="liblinear", C=0.5, tol=1e-8, max_iter=10_000)
    for scoring, within in (("neg_log_loss", 1e-4), ("accuracy", 1e-9)):
        hinge = cross_val_score(ours, X, y, cv=folds, scoring=scoring)
        sklearn = cross_val_score(reference, X, y, cv=folds, scoring=scoring)
        assert np.max(np.abs(hinge - sklearn)) <= within, (scoring, hinge, sklearn)
    ours.fit(X, y)
    np.testing.assert_allclose(ours.predict_proba(X), reference.fit(X, y).predict_proba(X), atol=1e-4)
    del ours
    gc.collect()
    assert wait_for_cleanup()


# -- NuSVC: nu ------------------------------------------------------------------------------------------


def test_nu_is_nu_svc_on_smo():
    """nu is NuSVC: smo (auto picks it whatever the kernel; kernel None is rbf, as for smo) with svm_type nu_svc and
    nu in place of C (no C sent), one-vs-one by default, probability as asked; a keyword parameter that get_params,
    set_params and clone carry (None: not used, the solver as before)."""
    clf = HingeClassifier(nu=0.3)
    assert clf.solver_info()[0] == "smo" and clf.multiclass_scheme() == "ovo"
    assert clf.service_params() == {
        "seed": 0,
        "probability": False,
        "svm_type": "nu_svc",
        "nu": 0.3,
        "multiclass": "ovo",
        "kernel": {"type": "rbf", "gamma": "scale"},
    }
    linear = HingeClassifier(nu=1, kernel="linear", probability=True, multiclass="ovr").service_params()
    assert (linear["kernel"], linear["nu"], linear["probability"], linear["multiclass"]) == (
        {"type": "linear"},
        1.0,
        True,
        "ovr",
    )
    assert HingeClassifier().get_params()["nu"] is None
    assert clone(clf).get_params() == clf.get_params() and clone(clf).nu == 0.3
    assert clf.set_params(nu=None).solver_info()[0] == "dcd"
    assert clf.set_params(nu=0.5, kernel="poly").service_params()["svm_type"] == "nu_svc"
    assert inspect.signature(HingeClassifier).parameters["nu"].kind == inspect.Parameter.KEYWORD_ONLY


@pytest.mark.parametrize(
    "params,message",
    [
        ({"nu": 0.3, "C": 10.0}, r"C=10.0 with nu=0.3: NuSVC has no C"),
        ({"nu": 0.3, "C": 0.5, "kernel": "rbf"}, "NuSVC has no C"),
        ({"nu": 0.3, "class_weight": "balanced"}, "NuSVC takes no class_weight"),
        ({"nu": 0.3, "class_weight": {0: 2.0}}, "NuSVC takes no class_weight"),
        ({"nu": 0.3, "solver": "dcd"}, r"nu=0.3 does not apply to solver 'dcd' \(only to smo\); nu is NuSVC's"),
        ({"nu": 0.3, "solver": "sampled_cuts", "kernel": "rbf"}, "nu=0.3 does not apply to solver 'sampled_cuts'"),
        ({"nu": 0.3, "multi_class": "crammer_singer"}, "nu=0.3 does not apply to solver 'ocas'"),
        ({"nu": 0.0}, r"nu must be a number in \(0, 1\], got 0.0"),
        ({"nu": 1.5, "kernel": "rbf"}, r"nu must be a number in \(0, 1\]"),
        ({"nu": "0.3"}, r"nu must be a number in \(0, 1\]"),
    ],
)
def test_what_nu_svc_does_not_take_is_refused_before_any_request(params, message):
    with pytest.raises(ValueError, match=message):
        HingeClassifier(**params).service_params()
    X, y = cancer()
    with pytest.raises(ValueError, match=message):  # at fit, before any request (no service at this url)
        HingeClassifier(url="http://127.0.0.1:9", **params).fit(X, y)


def test_nu_predictions_equal_nu_svc(service):
    """NuSVC(nu=0.3, gamma=0.05) (LIBSVM -s 1) on standardized breast cancer and on wine (three classes, one-vs-one):
    the same predictions on at least 99.5% of the rows, decision values close (LIBSVM's scaling by 1 / rho); a nu
    larger than the classes allow is the service's refusal, naming the largest; probability is calibrated."""
    X, y = cancer()
    ours = HingeClassifier(nu=0.3, gamma=0.05, url=service.base_url).fit(X, y)
    reference = NuSVC(nu=0.3, gamma=0.05).fit(X, y)
    assert ours.solver_ == "smo" and ours.model_["params"]["svm_type"] == "nu_svc"
    assert ours.model_["params"]["nu"] == 0.3 and ours.model_["params"]["kernel"]["type"] == "rbf"
    assert np.mean(ours.predict(X) == reference.predict(X)) >= 0.995
    assert np.max(np.abs(ours.decision_function(X) - reference.decision_function(X))) < 0.01
    X, y = wine()
    ours = HingeClassifier(nu=0.3, gamma=0.05, decision_function_shape="ovo", url=service.base_url).fit(X, y)
    reference = NuSVC(nu=0.3, gamma=0.05, decision_function_shape="ovo").fit(X, y)
    assert ours.model_["params"]["multiclass"] == "ovo"
    assert np.mean(ours.predict(X) == reference.predict(X)) >= 0.995
    assert np.max(np.abs(ours.decision_function(X) - reference.decision_function(X))) < 0.01
    calibrated = HingeClassifier(nu=0.3, gamma=0.05, probability=True, url=service.base_url).fit(X, y)
    proba = calibrated.predict_proba(X)
    assert proba.shape == (X.shape[0], 3) and np.allclose(proba.sum(axis=1), 1.0)
    assert np.mean(calibrated.classes_[np.argmax(proba, axis=1)] == calibrated.predict(X)) >= 0.95
    X, y = cancer()  # 212 and 357 rows: nu at most 2 * 212 / 569
    with pytest.raises(ValueError, match=r"refused the training request: params\.nu: 0.8 is infeasible.*0\.745167"):
        HingeClassifier(nu=0.8, url=service.base_url).fit(X, y)


# -- HingeSearchCV -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data,estimator,grid,cv",
    [(cancer, {}, BREAST_CANCER_GRID, 5), (digits, {"kernel": "rbf"}, DIGITS_GRID, 3)],
    ids=["breast_cancer-linear", "digits-rbf"],
)
def test_hinge_search_cv_chooses_what_grid_search_chooses(service, data, estimator, grid, cv):
    X, y = data()
    with Client(service.base_url) as client:
        # earlier tests' deletions: their estimators collected now (a collection during the fit below deleted
        # their jobs inside the count, once in the full suite), then the deletions waited for
        gc.collect()
        assert wait_for_cleanup(60)
        jobs_before = client.list_jobs(limit=1)["total"]
        search = HingeSearchCV(HingeClassifier(url=service.base_url, **estimator), grid, cv=cv).fit(X, y)
        assert wait_for_cleanup(60)
        assert client.list_jobs(limit=1)["total"] == jobs_before + 1  # one job
    grid_search = GridSearchCV(HingeClassifier(url=service.base_url, **estimator), grid, cv=cv).fit(X, y)
    assert search.best_params_ == grid_search.best_params_, (search.cv_results_, grid_search.cv_results_)
    assert search.best_estimator_.get_params()["C"] == search.best_params_["C"]
    assert [p for p in search.cv_results_["params"]] == grid_search.cv_results_["params"]
    assert np.mean(search.predict(X) == grid_search.predict(X)) > 0.99
    # on the service's folds, the scores GridSearchCV computes setting by setting
    same_folds = PredefinedSplit(make_folds(np.unique(y, return_inverse=True)[1], None, cv, 0))
    reference = GridSearchCV(HingeClassifier(url=service.base_url, **estimator), grid, cv=same_folds).fit(X, y)
    np.testing.assert_allclose(
        search.cv_results_["mean_test_score"], reference.cv_results_["mean_test_score"], atol=0.005
    )
    assert search.best_params_ == reference.best_params_
    assert search.best_score_ == pytest.approx(reference.best_score_, abs=0.005)
    assert list(search.cv_results_["rank_test_score"]) == list(reference.cv_results_["rank_test_score"])


def test_hinge_search_cv_without_refit_leaves_nothing(service):
    X, y = cancer()
    with Client(service.base_url) as client:
        gc.collect()  # earlier tests' estimators, whose deletions would otherwise run inside the count
        assert wait_for_cleanup(60)
        before = client.list_models(limit=1)["total"]
        search = HingeSearchCV(HingeClassifier(url=service.base_url), {"C": [0.1, 1.0]}, cv=3, refit=False).fit(X, y)
        assert not hasattr(search, "best_estimator_") and not hasattr(search, "predict")
        assert search.best_params_["C"] in (0.1, 1.0)
        assert wait_for_cleanup(60)
        assert client.list_models(limit=1)["total"] == before


@pytest.mark.parametrize(
    "estimator,grid,kwargs,message",
    [
        (HingeClassifier(), {"loss": ["hinge", "squared_hinge"]}, {}, "varies C, gamma, nu and epsilon only, not loss"),
        (HingeClassifier(), {"nu": [0.1, 0.5], "C": [1.0]}, {}, "NuSVC, which has no C"),
        (HingeClassifier(nu=0.3), {"C": [1.0, 10.0]}, {}, r"is NuSVC \(nu=0.3\), which has no C: search nu"),
        (HingeClassifier(), {"nu": [0.5, 1.5]}, {}, r"nu is a fraction in \(0, 1\]"),
        (HingeClassifier(), [{"C": [1.0]}, {"C": [2.0]}], {}, "a list of 2 grids"),
        (HingeClassifier(), {"C": [1.0], "gamma": [0.1]}, {}, "gamma applies to a kernel solver"),
        (HingeClassifier(kernel="rbf"), {"gamma": ["scale", 0.1]}, {}, "finite numbers > 0"),
        (HingeClassifier(), {"C": [1.0]}, {"cv": KFold(3)}, "cv must be a number of folds"),
        (HingeClassifier(), {"C": [1.0]}, {"scoring": "balanced_accuracy"}, "scores by accuracy"),
        (HingeClassifier(), {"C": [1.0]}, {"scoring": "f1_macro"}, "macro average over more than two"),
        (SVC(), {"C": [1.0]}, {}, "must be a HingeClassifier, a HingeRegressor or a HingeOneClassSVM"),
        (HingeClassifier(), {"epsilon": [0.1]}, {}, "epsilon is a regression's"),
    ],
)
def test_what_the_service_search_cannot_run_is_refused_before_any_request(estimator, grid, kwargs, message):
    X, y = cancer()
    with pytest.raises(ValueError, match=message):
        HingeSearchCV(estimator, grid, **kwargs).fit(X, y)


def test_search_cv_of_a_nu_classifier_varies_gamma():
    """HingeSearchCV over gamma of HingeClassifier(nu=...) with no kernel: smo (NuSVC's) with rbf, its search's
    gamma accepted (no request: the params the service would get)."""
    search = HingeSearchCV(HingeClassifier(nu=0.3), {"gamma": [0.01, 0.1]}, cv=3)
    sent = search.search_params(2)
    assert sent["gamma"] == [0.01, 0.1]


def test_hinge_search_cv_over_nu_scores_as_grid_search_on_the_same_folds(service):
    """A grid over NuSVC's nu (and gamma) runs as one job (smo's nu_svc, a search per nu on the same folds): the
    same best setting and scores as GridSearchCV over HingeClassifier(nu=...) on the service's folds; the best
    estimator is NuSVC at the chosen nu."""
    X, y = cancer()
    grid = {"nu": [0.1, 0.3, 0.5], "gamma": [0.01, 0.05]}
    search = HingeSearchCV(HingeClassifier(url=service.base_url), grid, cv=3).fit(X, y)
    assert set(search.best_params_) == {"nu", "gamma"} and search.best_params_["nu"] in grid["nu"]
    assert search.best_estimator_.nu == search.best_params_["nu"]
    assert search.best_estimator_.model_["params"]["svm_type"] == "nu_svc"
    assert list(search.cv_results_["param_nu"]) == [p["nu"] for p in search.cv_results_["params"]]
    same_folds = PredefinedSplit(make_folds(np.unique(y, return_inverse=True)[1], None, 3, 0))
    reference = GridSearchCV(HingeClassifier(nu=0.5, url=service.base_url), grid, cv=same_folds).fit(X, y)
    assert search.cv_results_["params"] == reference.cv_results_["params"]
    np.testing.assert_allclose(
        search.cv_results_["mean_test_score"], reference.cv_results_["mean_test_score"], atol=0.005
    )
    assert search.best_params_ == reference.best_params_
