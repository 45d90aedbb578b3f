"""Uploads say what they guessed: the index base of an svmlight file, guessed or given, in the answer, in hingectl,
and in the 422 of a predict row that looks zero-based on a model whose data set was guessed one-based.

The case of issue 32: digits as scikit-learn's ``dump_svmlight_file`` writes it (zero-based, and column 0 is
always zero so index 0 never appears) is read by ``zero_based=auto`` as one-based with 63 features.
"""

from __future__ import annotations

import io
import json

import pytest
from sklearn.datasets import dump_svmlight_file, load_digits

from tests.helpers import assert_error, upload, wait_job
from tests.test_cli_client import hingectl


@pytest.fixture(scope="module")
def digits_text() -> bytes:
    """Digits (two classes: 0 against the rest, so that dcd fits fast), zero-based as scikit-learn writes it."""
    X, y = load_digits(return_X_y=True)
    assert (X[:, 0] == 0).all()  # what makes the guess go wrong
    out = io.BytesIO()
    dump_svmlight_file(X, (y == 0).astype(int) * 2 - 1, out)  # zero_based=True is scikit-learn's default
    return out.getvalue()


def test_guessed_and_given_bases_in_the_answer(http, digits_text):
    guessed = upload(http, digits_text, filename="digits.svm").json()
    assert (guessed["zero_based"], guessed["zero_based_guessed"], guessed["n_features"]) == (False, True, 63)
    given = upload(http, digits_text, filename="digits.svm", zero_based="true").json()
    assert (given["zero_based"], given["zero_based_guessed"], given["n_features"]) == (True, False, 64)
    one = upload(http, b"1 1:1\n-1 2:1\n", zero_based="false").json()
    assert (one["zero_based"], one["zero_based_guessed"], one["n_features"]) == (False, False, 2)
    zero = upload(http, b"1 0:1\n-1 2:1\n").json()  # auto, with an index 0: zero-based, guessed
    assert (zero["zero_based"], zero["zero_based_guessed"], zero["n_features"]) == (True, True, 3)
    csv = upload(http, b"a,b,label\n1,0,1\n0,2,-1\n", filename="x.csv", format="csv").json()
    assert csv["zero_based_guessed"] is None  # no indices to number
    # stored: the data set's description says the same later
    assert http.get(f"/v1/datasets/{guessed['id']}").json()["zero_based_guessed"] is True
    assert http.get(f"/v1/datasets/{given['id']}").json()["zero_based_guessed"] is False


def test_predict_row_one_value_too_long_says_how_to_reupload(http, digits_text):
    X, _ = load_digits(return_X_y=True)
    guessed = upload(http, digits_text, filename="digits.svm").json()
    job = wait_job(http, http.post("/v1/jobs", json={"dataset_id": guessed["id"], "solver": "dcd"}).json()["id"])
    model = http.get(f"/v1/models/{job['model_id']}").json()
    assert (model["n_features"], model["zero_based"], model["zero_based_guessed"]) == (63, False, True)
    url = f"/v1/models/{job['model_id']}/predict"
    # a row as the user holds it: 64 values
    error = assert_error(
        http.post(url, json={"instances": [X[0].tolist()]}),
        422,
        "validation_error",
        "has 64 values; the model has 63 features",
        f"data set {guessed['id']} was read as one-based",
        "upload it again with zero_based=true",
        "then has 64 features",
    )
    assert error["details"][0]["loc"] == ["body", "instances", 0]
    # a sparse row numbered from 0, as the file is
    assert_error(http.post(url, json={"instances": [{"0": 0.0, "5": 1.0}]}), 422, "validation_error", "zero_based=true")
    # a row of 63 values (the model's own numbering) is scored; one of 62 is only too short: no hint
    assert http.post(url, json={"instances": [X[0, 1:].tolist()]}).status_code == 200
    short = http.post(url, json={"instances": [X[0, 2:].tolist()]}).json()["error"]["message"]
    assert short == "instances[0] has 62 values; the model has 63 features"

    # uploaded with the base given, the 64-value row is scored and a 65-value row gets no re-upload hint
    given = upload(http, digits_text, filename="digits.svm", zero_based="true").json()
    job = wait_job(http, http.post("/v1/jobs", json={"dataset_id": given["id"], "solver": "dcd"}).json()["id"])
    url = f"/v1/models/{job['model_id']}/predict"
    assert http.post(url, json={"instances": [X[0].tolist()]}).status_code == 200
    long = http.post(url, json={"instances": [X[0].tolist() + [0.0]]}).json()["error"]["message"]
    assert long == "instances[0] has 65 values; the model has 64 features"


def test_hingectl_upload_states_the_base(service, digits_text, tmp_path):
    path = tmp_path / "digits.svm"
    path.write_bytes(digits_text)
    code, out, err = hingectl(service.base_url, "upload", str(path))
    assert code == 0, err
    assert "1797 rows x 63 features" in err
    assert "feature indices: one-based (guessed: no index 0 appears in the file)" in err
    assert "upload it again with --zero-based true: it then has 64 features" in err
    code, out, err = hingectl(service.base_url, "upload", str(path), "--zero-based", "true")
    assert code == 0, err
    assert "1797 rows x 64 features" in err and "feature indices: zero-based (--zero-based true, as given)" in err
    code, out, err = hingectl(service.base_url, "upload", str(path), "--json")
    assert code == 0, err
    assert '"zero_based_guessed": true' in out

    # a predict of the rows as the user holds them (64 columns): how to upload again, in hingectl's terms
    X, y = load_digits(return_X_y=True)
    rows = tmp_path / "rows.csv"
    rows.write_text(",".join([f"f{j}" for j in range(64)] + ["label"]) + "\n" + ",".join(map(str, [*X[0], 1])) + "\n")
    guessed = json.loads(out)
    with service.client() as http:
        job = http.post("/v1/jobs", json={"dataset_id": guessed["id"], "solver": "dcd"}).json()
        model_id = wait_job(http, job["id"])["model_id"]
    code, out, err = hingectl(service.base_url, "predict", model_id, str(rows), "--format", "csv")
    assert code == 6, err
    assert "has 64 values; the model has 63 features" in err
    assert "upload it again with `hingectl upload --zero-based true` and train again" in err
