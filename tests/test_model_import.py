"""Models trained by LIBLINEAR and LIBSVM imported and predicting as those programs do (labels, decision values,
probabilities), and model files that cannot be read: a 422 that names the line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits

from tests.helpers import upload
from tests.model_files import export, import_model, predict, saved, split, svmlight

liblinearutil = pytest.importorskip("liblinear.liblinearutil")
svmutil = pytest.importorskip("libsvm.svmutil")


# -- Importing models trained by LIBLINEAR and LIBSVM ----------------------------------------------


@pytest.mark.parametrize("options", ["-s 0 -B 1", "-s 1 -B 1", "-s 4", "-s 5 -B 1"])
@pytest.mark.parametrize("multiclass", [False, True])
def test_liblinear_trained_models_predict_as_liblinear(http, options, multiclass):
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    if not multiclass:
        X, y = X[y < 2], np.where(y[y < 2] == 0, 3, -3)  # the file lists 3 or -3 first, whichever comes first
    X_train, y_train, X_test, _ = split(X, y.astype(float))
    problem = liblinearutil.problem(y_train, sp.csr_matrix(X_train))
    model = liblinearutil.train(problem, liblinearutil.parameter(options + " -q"))
    path = saved(b"", ".liblinear")
    liblinearutil.save_model(path, model)
    imported = import_model(http, Path(path).read_bytes(), "liblinear")
    assert imported.status_code == 201, imported.text
    copy = imported.json()
    theirs_labels, _, theirs_values = liblinearutil.predict([], sp.csr_matrix(X_test), model, "-q")
    ours = predict(http, copy["id"], X_test, probabilities=options.startswith("-s 0"))
    assert ours["labels"] == theirs_labels
    theirs_values = np.array(theirs_values)
    order = np.argsort(model.get_labels())
    if options.startswith("-s 4") and not multiclass:
        pass  # Crammer-Singer with two labels: ours is the difference of its two scores (the wrapper shows one)
    elif theirs_values.shape[1] == 1:  # ours are positive for the larger label, LIBLINEAR's for the first listed
        sign = 1.0 if model.get_labels()[0] > model.get_labels()[1] else -1.0
        assert np.max(np.abs(sign * theirs_values[:, 0] - np.array(ours["scores"]))) <= 1e-12
    else:
        assert np.max(np.abs(theirs_values[:, order] - np.array(ours["scores"]))) <= 1e-12
    if options.startswith("-s 0"):
        _, _, probabilities = liblinearutil.predict([], sp.csr_matrix(X_test), model, "-q -b 1")
        assert np.max(np.abs(np.array(probabilities)[:, order] - np.array(ours["probabilities"]))) <= 1e-12


def test_libsvm_trained_binary_nu_svc_predicts_as_libsvm(http):
    # binary only: libsvm-official's Python svm_predict sizes the decision buffer of nu_svc for one value
    X, y = load_digits(return_X_y=True)
    keep = (y == 3) | (y == 8)
    X_train, y_train, X_test, _ = split(X[keep] / 16.0, np.where(y[keep] == 3, 1.0, 2.0))
    problem = svmutil.svm_problem(y_train, sp.csr_matrix(X_train))
    model = svmutil.svm_train(problem, svmutil.svm_parameter("-s 1 -t 2 -g 0.02 -n 0.1 -q"))
    path = saved(b"", ".libsvm")
    svmutil.svm_save_model(path, model)
    imported = import_model(http, Path(path).read_bytes(), "libsvm", n_features=64)
    assert imported.status_code == 201, imported.text
    theirs, _, values = svmutil.svm_predict([], sp.csr_matrix(X_test), model, "-q")
    ours = predict(http, imported.json()["id"], X_test)
    assert ours["labels"] == theirs
    sign = 1.0 if model.get_labels()[0] > model.get_labels()[1] else -1.0
    assert np.max(np.abs(sign * np.array(values)[:, 0] - np.array(ours["scores"]))) <= 1e-9


@pytest.mark.parametrize("options", ["-t 2 -g 0.02 -c 10", "-t 1 -g 0.05 -r 1 -d 2 -c 1 -b 1"])
def test_libsvm_trained_one_vs_one_models_predict_as_libsvm(http, options):
    X, y = load_digits(return_X_y=True)
    X_train, y_train, X_test, y_test = split(X / 16.0, y.astype(float))
    problem = svmutil.svm_problem(y_train, sp.csr_matrix(X_train))  # kept alive: the model points into it
    model = svmutil.svm_train(problem, svmutil.svm_parameter(options + " -q"))
    path = saved(b"", ".libsvm")
    svmutil.svm_save_model(path, model)
    imported = import_model(http, Path(path).read_bytes(), "libsvm", n_features=64)
    assert imported.status_code == 201, imported.text
    copy = imported.json()
    assert copy["multiclass"] == "ovo" and copy["labels"] == list(range(10))
    theirs, _, _ = svmutil.svm_predict([], sp.csr_matrix(X_test), model, "-q")
    calibrated = "-b 1" in options
    ours = predict(http, copy["id"], X_test, probabilities=calibrated)
    assert ours["labels"] == theirs
    # labels 0..9 are the score columns; their argmax is the vote unless the vote is tied
    assert np.mean(np.argmax(ours["scores"], axis=1) == np.array(theirs).astype(int)) >= 0.98
    if calibrated:
        _, _, probabilities = svmutil.svm_predict([], sp.csr_matrix(X_test), model, "-q -b 1")
        order = np.argsort(model.get_labels())
        assert np.max(np.abs(np.array(probabilities)[:, order] - np.array(ours["probabilities"]))) <= 1e-6
    evaluation = http.post(
        f"/v1/models/{copy['id']}/evaluate", json={"dataset_id": upload(http, svmlight(X_test, y_test)).json()["id"]}
    )
    assert evaluation.status_code == 200 and evaluation.json()["accuracy"] == pytest.approx(
        np.mean(np.array(theirs) == y_test)
    )
    # written back, LIBSVM reads the same model
    again = svmutil.svm_load_model(saved(export(http, copy["id"], "libsvm"), ".libsvm"))
    assert svmutil.svm_predict([], sp.csr_matrix(X_test), again, "-q")[0] == theirs


# -- Bad files ----------------------------------------------------------------------------------------


LIBLINEAR_OK = "solver_type L2R_L1LOSS_SVC_DUAL\nnr_class 2\nlabel 1 -1\nnr_feature 3\nbias -1\nw\n0.5\n-0.25\n1\n"


@pytest.mark.parametrize(
    "format,content,needle",
    [
        ("liblinear", LIBLINEAR_OK.replace("-0.25", "abc"), "line 8: weight: 'abc' is not a number"),
        (
            "liblinear",
            LIBLINEAR_OK.replace("nr_class 2", "nr_class 2\nflavour sweet"),
            "line 3: unknown header field 'flavour'",
        ),
        (
            "liblinear",
            LIBLINEAR_OK.replace("L2R_L1LOSS_SVC_DUAL", "L2R_L2LOSS_SVR"),
            "line 3: a L2R_L2LOSS_SVR model has no labels",
        ),
        (
            "liblinear",
            LIBLINEAR_OK.replace("L2R_L1LOSS_SVC_DUAL", "ONECLASS_SVM"),
            "line 6: the header has no rho line",
        ),
        ("liblinear", LIBLINEAR_OK.replace("\n1\n", "\n"), "line 9: the file ends after 2 weight lines"),
        ("liblinear", LIBLINEAR_OK.replace("-0.25", "-0.25 7"), "line 8: expected 1 weight on this line, found 2"),
        (
            "libsvm",
            "svm_type c_svc\nkernel_type rbf\ngamma 0.5\nnr_class 2\ntotal_sv 2\nrho 0.1\nlabel 1 -1\nnr_sv 1 1\nSV\n1 1:0.5 3:1\n-1 3:0.5 2:1\n",
            "line 11: feature index 2 after 3: indices must ascend",
        ),
        ("libsvm", "svm_type nu_svm\nkernel_type rbf\nSV\n", "line 1: unknown svm_type 'nu_svm'"),
        (
            "libsvm",
            "svm_type c_svc\nkernel_type rbf\nnr_class 2\ntotal_sv 0\nrho 0\nlabel 1 -1\nnr_sv 0 0\nSV\n",
            "line 8: the header has no gamma line",
        ),
        ("json", '{"format": "hinge-model",\n "format_version": 1,\n "kind": }', "line 3"),
        (
            "json",
            '{"format": "hinge-model", "format_version": 1, "kind": "linear", "task": "classification", "labels": [-1, 1], '
            '"n_features": 2, "zero_based": false, "weights": [[1.0]], "offsets": [0.0]}',
            "weights[0] has 1 entries; n_features is 2",
        ),
        ("libsvm", "\x00\x01\x02garbage", "line 1"),
    ],
)
def test_bad_model_files_get_422_naming_the_line(http, format, content, needle):
    before = http.get("/v1/models").json()["total"]
    response = import_model(http, content.encode(), format)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_model_file" and needle in error["message"], error
    assert http.get("/v1/models").json()["total"] == before  # nothing stored


def test_imports_of_a_valid_file_with_the_wrong_options_are_refused(http):
    assert import_model(http, LIBLINEAR_OK.encode(), "liblinear", n_features=5).status_code == 422
    assert import_model(http, LIBLINEAR_OK.encode(), "xgboost").status_code == 422
    ok = import_model(http, LIBLINEAR_OK.encode(), "liblinear")
    assert ok.status_code == 201
    answer = predict(http, ok.json()["id"], [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    assert answer["labels"] == [1, -1] and answer["scores"] == [0.5, -0.25]
