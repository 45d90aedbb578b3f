"""A Python client of the Hinge service, and scikit-learn estimators on it.

    from hinge_client import HingeClassifier
    clf = HingeClassifier(C=1.0, probability=True)                  # url: HINGE_URL, key: HINGE_API_KEY; dcd
    clf.fit(X_train, y_train)                                      # uploads, trains remotely
    clf.predict(X_test), clf.predict_proba(X_test)                 # the service's predict route
    Client().export_model(clf.model_id_, "onnx")                   # the model, for onnxruntime

- ``Client`` / ``AsyncClient`` (``hinge_client.client``): one method per operation of the OpenAPI
  document, plus ``train`` (submit, wait, return the model), ``wait_job`` and ``export_to``; answers
  are dicts typed in ``hinge_client.types``; 429 and 503 are retried with backoff (``Retry-After``
  honoured); errors raise ``HingeError`` (status, code, message, details); ``JobFailed`` for a job that
  ended without a model.
- ``HingeClassifier`` / ``HingeRanker`` (``hinge_client.estimators``, needs scikit-learn): estimators
  whose fit, predict, decision_function and predict_proba run on the service; the models their fits
  make go when the estimators do (``keep_model=True`` keeps them); ``wait_for_cleanup`` waits for that.
- ``HingeRegressor`` (``hinge_client.regressor``, needs scikit-learn): LinearSVR on the service (dcd's
  epsilon-insensitive losses), or SVR with a kernel (smo's epsilon_svr); predict returns values, score is R².
- ``HingeOneClassSVM`` (``hinge_client.one_class``, needs scikit-learn): OneClassSVM on the service (smo's
  one_class); predict returns +1 / -1, decision_function the service's scores.
- ``HingeSearchCV`` (``hinge_client.model_selection``): a grid of C (and gamma) cross-validated by the
  service's own search, as one job.

- ``hingectl`` (``hinge_client.cli``): the command line.

The package talks to the service over HTTP only; it shares no code with ``service`` or ``worker``.
"""

from __future__ import annotations

from hinge_client.cleanup import wait_for_cleanup
from hinge_client.client import AsyncClient, Client, RetryPolicy
from hinge_client.errors import HingeError, JobFailed, ResultWarning

__all__ = [
    "Client",
    "AsyncClient",
    "RetryPolicy",
    "HingeError",
    "JobFailed",
    "ResultWarning",
    "HingeClassifier",
    "HingeRanker",
    "HingeRegressor",
    "HingeOneClassSVM",
    "HingeSearchCV",
    "wait_for_cleanup",
]


def __getattr__(name: str):
    # the estimators need scikit-learn; the client does not, so they load on first use
    if name in ("HingeClassifier", "HingeRanker"):
        from hinge_client import estimators

        return getattr(estimators, name)
    if name == "HingeRegressor":
        from hinge_client import regressor

        return regressor.HingeRegressor
    if name == "HingeOneClassSVM":
        from hinge_client import one_class

        return one_class.HingeOneClassSVM
    if name == "HingeSearchCV":
        from hinge_client import model_selection

        return model_selection.HingeSearchCV
    raise AttributeError(f"module 'hinge_client' has no attribute {name!r}")
