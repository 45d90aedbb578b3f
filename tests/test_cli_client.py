"""`hingectl` in a subprocess against the running service: every command, its output and its exit code."""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
from datetime import datetime

import numpy as np
import pytest

from hinge_client._cli_hints import flag_hints
from tests.conftest import KEYS
from tests.helpers import sparse_problem, to_svmlight, wait_for


def hingectl(service_url: str, *args: str, env: dict | None = None, timeout: float = 120.0):
    """Run hingectl; returns (exit code, stdout, stderr)."""
    full_env = dict(os.environ, HINGE_URL=service_url, **(env or {}))
    if "HINGE_API_KEY" not in (env or {}):
        full_env.pop("HINGE_API_KEY", None)
    proc = subprocess.run(
        [sys.executable, "-m", "hinge_client.cli", *args], capture_output=True, text=True, env=full_env, timeout=timeout
    )
    return proc.returncode, proc.stdout, proc.stderr


def start_long_job(url: str, dataset: str) -> str:
    """Submit a dcd job that runs for long (a tolerance it cannot reach soon); its id."""
    code, out, err = hingectl(
        url,
        "train",
        dataset,
        "--solver",
        "dcd",
        *("-p", "C=1000", "-p", "tol=1e-12", "-p", "max_iter=10000000"),
        *("-p", "shrinking=false"),
    )
    assert code == 0, err
    return out.strip()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli")
    train = folder / "train.svm"
    train.write_bytes(to_svmlight(*sparse_problem(3000, 40, 8, seed=31)))
    rows = folder / "rows.svm"
    rows.write_bytes(b"".join(train.read_bytes().splitlines(keepends=True)[:7]))
    csv = folder / "rows.csv"
    csv.write_text("a,b,label\n1,0,1\n0,2,-1\n")
    return {"train": str(train), "rows": str(rows), "csv": str(csv), "folder": folder}


def test_upload_train_watch_predict_evaluate_ls_rm(service, files):
    url = service.base_url
    code, out, err = hingectl(url, "upload", files["train"], "--name", "cli-train", "--progress")
    assert code == 0, err
    dataset = out.strip()
    assert dataset.startswith("ds_")
    assert "upload" in err and "3000 rows x 40 features" in err  # the bar was drawn, then the summary

    code, out, err = hingectl(url, "train", dataset, "--solver", "ocas", "-p", "C=1", "-p", "tol_rel=0.001", "--watch")
    assert code == 0, err
    model = out.strip()
    assert model.startswith("mdl_") and "succeeded (converged)" in err and "trace point(s) seen" in err

    code, out, err = hingectl(url, "predict", model, files["rows"])
    assert code == 0, err
    assert len(out.split()) == 7 and set(out.split()) <= {"1", "-1"}
    code, out, _ = hingectl(url, "predict", model, files["rows"], "--scores")
    assert all(len(line.split("\t")) == 2 for line in out.splitlines())

    code, out, err = hingectl(url, "evaluate", model, dataset, "--json")
    assert code == 0, err
    assert json.loads(out)["accuracy"] > 0.8

    code, out, _ = hingectl(url, "ls", "models", "--json")
    assert code == 0 and model in {m["id"] for m in json.loads(out)}
    code, out, _ = hingectl(url, "ls")
    assert code == 0 and "# datasets" in out and dataset in out and model in out

    # a job submitted without --watch prints its id; watch follows it to the end
    code, out, _ = hingectl(url, "train", dataset, "--solver", "smo", "-p", "kernel.gamma=0.1", "-p", "C=0.5")
    assert code == 0 and out.strip().startswith("job_")
    code, out, err = hingectl(url, "watch", out.strip())
    assert code == 0 and out.strip().startswith("mdl_"), err
    assert "training" in err or "succeeded" in err
    # a model stopped by its iteration limit says so on the status line, and what to do
    code, out, err = hingectl(
        url, "train", dataset, "--solver", "dcd", "-p", "max_iter=1", "-p", "tol_rel=1e-9", "--watch"
    )
    assert code == 0 and "(max_iter)" in err and "warning: model mdl_" in err and "max_iter: " in err, err

    code, out, err = hingectl(url, "export", model, "-o", str(files["folder"] / "model.json"))
    if code == 0:  # the export route (issue 11) is there
        assert json.loads((files["folder"] / "model.json").read_text())
    else:
        assert code == 4 and "does not offer model export" in err

    code, _, err = hingectl(url, "rm", model)
    assert code == 0 and f"removed {model}" in err
    code, _, err = hingectl(url, "rm", model)
    assert code == 4 and "no model" in err


def test_exit_codes_scripts_can_use(service, files):
    url = service.base_url
    assert hingectl("http://127.0.0.1:9", "ls")[0] == 3
    code, _, err = hingectl(url, "watch", "job_nope")
    assert code == 4 and "no job" in err
    code, out, _ = hingectl(url, "upload", files["train"])
    dataset = out.strip()
    code, _, err = hingectl(url, "train", dataset, "--solver", "smo", "-p", "gamma=0.5")
    assert code == 6 and "did you mean -p kernel.gamma?" in err and "-p kernel.type=rbf" in err, err
    code, _, err = hingectl(url, "train", dataset, "--solver", "dcd", "-p", "C")
    assert code == 2 and "KEY=VALUE" in err
    assert hingectl(url, "train", dataset)[0] == 2  # argparse: --solver is required
    # a job that ends canceled: watch exits 1
    job = start_long_job(url, dataset)
    watcher = subprocess.Popen(
        [sys.executable, "-m", "hinge_client.cli", "--url", url, "watch", job],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with service.client() as http:
            wait_for(lambda: http.get(f"/v1/jobs/{job}").json()["status"] == "running", timeout=60)
        assert hingectl(url, "cancel", job)[0] == 0
        out, err = watcher.communicate(timeout=60)
    finally:
        watcher.kill()
    assert watcher.returncode == 1 and "canceled" in err


def test_api_key_from_environment(strict_api, files):  # noqa: F811
    code, _, err = hingectl(strict_api, "ls")
    assert code == 5 and "401" in err
    code, out, err = hingectl(strict_api, "ls", "datasets", "--json", env={"HINGE_API_KEY": "key-alice"})
    assert code == 0, err
    assert isinstance(json.loads(out), list)
    assert hingectl(strict_api, "ls", "--api-key", "wrong")[0] == 5
    assert KEYS


def test_csv_rows_predict_dense(service, files):
    url = service.base_url
    code, out, err = hingectl(url, "upload", files["csv"], "--format", "csv")
    assert code == 0, err
    code, out, err = hingectl(url, "train", out.strip(), "--solver", "dcd", "--watch")
    assert code == 0, err
    code, labels, err = hingectl(url, "predict", out.strip(), files["csv"], "--format", "csv")
    assert code == 0, err
    assert len(labels.split()) == 2


def ids_of(url: str, kind: str) -> set[str]:
    code, out, err = hingectl(url, "ls", kind, "--json", "--limit", "1000")
    assert code == 0, err
    return {item["id"] for item in json.loads(out)}


def test_predict_probabilities_accuracy_and_evaluate_a_local_file(service, files):
    url = service.base_url
    dataset = hingectl(url, "upload", files["train"])[1].strip()
    code, model, err = hingectl(url, "train", dataset, "--solver", "dcd", "-p", "probability=true", "--watch")
    assert code == 0, err
    model = model.strip()
    code, out, err = hingectl(url, "predict", model, files["rows"], "--probabilities", "--scores")
    assert code == 0, err
    header, *lines = out.splitlines()
    assert header.split("\t") == ["labels", "-1", "1"] and len(lines) == 7  # as svm-predict -b 1
    for line in lines:
        label, score, *probabilities = line.split("\t")
        assert label in ("-1", "1") and (float(score) > 0) == (label == "1")
        assert len(probabilities) == 2 and abs(sum(map(float, probabilities)) - 1) < 1e-6
    truth = [line.split()[0] for line in open(files["rows"]).read().splitlines()]
    right = sum(a == b for a, b in zip(truth, (line.split("\t")[0] for line in lines)))
    assert re.search(r"^hingectl: Accuracy = [\d.]+% \((\d+)/7\)$", err, re.M).group(1) == str(right), err
    # rows without labels: no accuracy
    unlabelled = files["folder"] / "unlabelled.svm"
    unlabelled.write_text("1:0.5 3:1\n2:-1\n")
    code, out, err = hingectl(url, "predict", model, str(unlabelled))
    assert code == 0 and len(out.split()) == 2 and "Accuracy" not in err, err
    code, out, err = hingectl(url, "predict", model, files["rows"], "--probabilities", "--json")
    assert code == 0 and len(json.loads(out)["probabilities"]) == 7

    # evaluate on a local file: uploaded, evaluated, deleted; the confusion matrix printed
    before = ids_of(url, "datasets")
    code, out, err = hingectl(url, "evaluate", model, files["rows"])
    assert code == 0, err
    assert "confusion matrix (rows: true label, columns: predicted label)" in out and "accuracy" in out
    matrix = out.split("confusion matrix", 1)[1].splitlines()[2:]
    assert [row.split()[0] for row in matrix] == ["-1", "1"] and sum(int(v) for r in matrix for v in r.split()[1:]) == 7
    assert ids_of(url, "datasets") == before
    code, out, err = hingectl(url, "evaluate", model, files["csv"], "--format", "csv", "--json")
    assert code == 0 and json.loads(out)["n_samples"] == 2, err  # the upload's flags: a CSV file
    code, out, err = hingectl(url, "evaluate", model, "nope.svm")
    assert code == 2 and "no such file, nor a data set id" in err
    assert ids_of(url, "datasets") == before


def test_import_export_formats_and_rm_job(service, files):
    url = service.base_url
    dataset = hingectl(url, "upload", files["train"])[1].strip()
    code, model, err = hingectl(url, "train", dataset, "--solver", "dcd", "--watch")
    model = model.strip()
    labels = hingectl(url, "predict", model, files["rows"])[1]
    for fmt in ("json", "liblinear", "libsvm"):
        path = str(files["folder"] / f"model.{fmt}")
        assert hingectl(url, "export", model, "--format", fmt, "-o", path)[0] == 0
        code, out, err = hingectl(url, "import", path)  # the format told from the file
        assert code == 0 and out.strip().startswith("mdl_") and f"imported {fmt} model" in err, err
        assert hingectl(url, "predict", out.strip(), files["rows"])[1] == labels
    code, out, err = hingectl(
        url, "import", str(files["folder"] / "model.libsvm"), "--format", "libsvm", "--json", "--n-features", "50"
    )
    assert code == 0 and json.loads(out)["n_features"] == 50, err
    bad = files["folder"] / "bad.liblinear"
    bad.write_text("solver_type L2R_L1LOSS_SVC_DUAL\nnr_class 2\nlabel 1 -1\nnr_feature 2\nbias -1\nw\n0.5\nabc\n")
    code, _, err = hingectl(url, "import", str(bad))
    assert code == 6 and f"{bad}: " in err and "line 8" in err, err
    code, _, err = hingectl(url, "import", str(files["rows"]))
    assert code == 2 and "--format" in err
    code, _, err = hingectl(url, "export", model, "--format", "xml")
    assert code == 2 and "choose from 'json', 'liblinear', 'libsvm', 'onnx'" in err

    # rm JOB: refused while it runs (cancel first), done once it ended; its model stays
    job = start_long_job(url, dataset)
    with service.client() as http:
        wait_for(lambda: http.get(f"/v1/jobs/{job}").json()["status"] == "running", timeout=60)
        code, _, err = hingectl(url, "rm", job)
        assert code == 6 and f"cancel it first (hingectl cancel {job})" in err, err
        assert hingectl(url, "cancel", job)[0] == 0
        wait_for(lambda: http.get(f"/v1/jobs/{job}").json()["status"] == "canceled", timeout=60)
    code, _, err = hingectl(url, "rm", job)
    assert code == 0 and f"removed {job} (its model stays)" in err
    assert hingectl(url, "rm", job)[0] == 4
    trained_by = hingectl(url, "ls", "models", "--json")[1]
    assert model in trained_by
    code, _, err = hingectl(url, "rm", "whatever")
    assert code == 2 and "job (job_...)" in err


def test_bad_local_files_name_file_line_and_column(service, files):
    url = service.base_url
    folder = files["folder"]
    cases = {
        "value.svm": (b"1 1:0.5\n-1 1:0.25 2:abc\n", "line 2, column 13: bad feature value 'abc': not a number"),
        "index.svm": (b"1 x:0.5\n", "line 1, column 3: bad feature index 'x': expected a non-negative integer"),
        "pair.svm": (b"1 1:2\n1 1:2 7\n", "line 2, column 7: missing ':' in feature '7' (expected index:value)"),
        "label.svm": (b"yes 1:2\n", "line 1, column 1: bad label 'yes': not a number"),
        "nan.svm": (b"1 1:nan\n", "line 1, column 5: feature value 'nan' is not a finite number"),
        "latin1.svm": (b"1 1:2\n1 1:\xe9\n", "line 2, column 5: not UTF-8 text"),
        "value.csv": (
            b"a,b,label\n1,2,1\n3,oops,-1\n",
            "line 3, column 3: bad number 'oops' in column 2 ('b'): not a number",
        ),
        "short.csv": (b"a,b,label\n1,2\n", "line 2, column 1: 2 fields, but the header has 3"),
        "gzip.svm.gz": (gzip.compress(b"1 1:2\n" * 100)[:-20], "cannot decompress"),
    }
    dataset = hingectl(url, "upload", files["train"])[1].strip()
    model = hingectl(url, "train", dataset, "--solver", "dcd", "--watch")[1].strip()
    for name, (content, message) in cases.items():
        path = folder / name
        path.write_bytes(content)
        fmt = ["--format", "csv"] if name.endswith(".csv") else []
        code, out, err = hingectl(url, "predict", model, str(path), *fmt)
        assert code == 6 and f"{path}: " in err and message in err and "Traceback" not in err, (name, err)
    code, _, err = hingectl(url, "predict", model, str(folder / "missing.svm"))
    assert code == 2 and "cannot read" in err and "Traceback" not in err
    # the service's answer about an upload names the file too
    code, _, err = hingectl(url, "evaluate", model, str(folder / "value.svm"))
    assert code == 6 and f"{folder / 'value.svm'}: line 2, column 13" in err, err


def test_hints_name_the_command_line_flags(service, files):
    url = service.base_url
    # a CSV sent as svmlight: the API says "send format=csv (POST /v1/datasets?format=csv, label_column ...)"
    code, _, err = hingectl(url, "upload", files["csv"])
    assert code == 6 and "use --format csv (--label-column names the label)" in err, err
    assert "format=csv" not in err and "/v1/" not in err and "label_column" not in err
    dataset = hingectl(url, "upload", files["train"])[1].strip()
    model = hingectl(url, "train", dataset, "--solver", "dcd", "--watch")[1].strip()
    unknown = files["folder"] / "unknown.svm"
    unknown.write_text("1 1:0.5\n-1 2:1 99:1\n")
    code, _, err = hingectl(url, "predict", model, str(unknown))
    assert code == 6 and f"{unknown}: line 2: feature index 99" in err and "use --ignore-unknown-features" in err, err
    code, out, err = hingectl(url, "predict", model, str(unknown), "--ignore-unknown-features")
    assert code == 0 and len(out.split()) == 2 and "Accuracy = " in err, err
    code, _, err = hingectl(url, "predict", model, files["rows"], "--probabilities")
    assert code == 6 and "train it with -p probability=true" in err, err


def test_train_penalty_l1_and_crammer_singer_pass_through_p(service, files):
    """-p penalty=l1 (dcd's sparse L1-regularized squared hinge) and -p multiclass=crammer_singer (ocas's one problem
    over all classes) reach the service as they are; what it refuses reads as the -p that fixes it."""
    from sklearn.datasets import load_wine
    from sklearn.preprocessing import StandardScaler

    from hinge_client.data import to_svmlight as arrays_to_svmlight

    url = service.base_url
    X, y = load_wine(return_X_y=True)
    wine = files["folder"] / "wine.svm"
    wine.write_bytes(arrays_to_svmlight(StandardScaler().fit_transform(X), y))
    code, out, err = hingectl(url, "upload", str(wine))
    assert code == 0, err
    dataset = out.strip()

    code, _, err = hingectl(url, "train", dataset, "--solver", "dcd", "-p", "penalty=l1")
    assert code == 6 and "use -p loss=squared_hinge" in err, err
    code, out, err = hingectl(
        url,
        "train",
        dataset,
        "--solver",
        "dcd",
        *("-p", "penalty=l1", "-p", "loss=squared_hinge", "-p", "C=0.1"),
        "--watch",
    )
    assert code == 0 and "succeeded" in err, err
    l1 = out.strip()

    code, _, err = hingectl(
        url, "train", dataset, "--solver", "ocas", "-p", "multiclass=crammer_singer", "-p", "distributed.nodes=2"
    )
    assert code == 6 and "HINGE_DASK_SCHEDULER" in err and "distributed" in err, err  # no cluster here
    code, out, err = hingectl(url, "train", dataset, "--solver", "ocas", "-p", "multiclass=crammer_singer", "--watch")
    assert code == 0 and "succeeded" in err, err
    crammer_singer = out.strip()
    with service.client() as http:
        l1_model = http.get(f"/v1/models/{l1}").json()
        cs_model = http.get(f"/v1/models/{crammer_singer}").json()
    assert l1_model["params"]["penalty"] == "l1" and l1_model["params"]["loss"] == "squared_hinge"
    assert cs_model["params"]["multiclass"] == "crammer_singer" and cs_model["labels"] == [0.0, 1.0, 2.0]
    code, out, err = hingectl(url, "evaluate", crammer_singer, dataset, "--json")
    assert code == 0 and json.loads(out)["accuracy"] > 0.95, err


def test_flag_hints_map_parameters_to_the_commands_flags():
    upload = argparse.Namespace(format=None, label_column=None, zero_based=None, value_dtype=None)
    assert (
        flag_hints(
            "line 1: a 0 index (zero_based=False: indices start at 1); value_dtype=float32 was asked for", upload
        )
        == "line 1: a 0 index (--zero-based false: indices start at 1); --value-dtype float32 was asked for"
    )
    predict = argparse.Namespace(probabilities=False, ignore_unknown_features=False, format="svmlight")
    assert flag_hints('send "ignore_unknown_features": true; "probabilities": true', predict) == (
        "use --ignore-unknown-features; --probabilities"
    )
    # a parameter the command has no flag for stays the API's; training parameters are -p's
    assert flag_hints("send format=csv; params.C: bad", argparse.Namespace()) == "send format=csv; -p C: bad"
    assert flag_hints("cancel it first (POST /v1/jobs/j/cancel), then", argparse.Namespace()) == "cancel it first, then"
    # smo's problem types read as the -p that asks for them
    assert flag_hints("nu is the parameter of `svm_type: one_class`; or smo with svm_type: epsilon_svr", upload) == (
        "nu is the parameter of `-p svm_type=one_class`; or --solver smo -p svm_type=epsilon_svr"
    )
    # penalty l1's and crammer_singer's "use <parameter> <value>" read as the -p that sets it
    assert flag_hints("penalty l1 trains the squared hinge loss: use loss squared_hinge, not `hinge`", upload) == (
        "penalty l1 trains the squared hinge loss: use -p loss=squared_hinge, not `hinge`"
    )
    assert (
        flag_hints("not available with it (use multiclass ovr)", upload)
        == "not available with it (use -p multiclass=ovr)"
    )


def test_watch_shows_the_relative_gap_when_the_service_sends_it():
    """The bar's gap is the relative gap (what tol_rel is compared with), for ocas too; the absolute one without it."""
    from hinge_client._cli_jobs import _fmt_gap

    assert _fmt_gap({"gap": 12.5, "gap_rel": 0.0123}) == "gap 1.23%"
    assert _fmt_gap({"gap": 0.001, "gap_rel": 2e-6}) == "gap 2.0e-06"
    assert _fmt_gap({"gap": 12.5}) == "gap 12.5"
    assert _fmt_gap({}) == "gap -"


def test_a_canceled_job_is_said_to_have_run_as_long_as_it_ran(service, files):
    """Issue 32, item 7: watching a job that was canceled (after it ended, too) gives its own running time, not
    the watch's ("canceled after 0.0 s" for a job that ran for seconds)."""
    url = service.base_url
    dataset = hingectl(url, "upload", files["train"])[1].strip()
    job = start_long_job(url, dataset)
    with service.client() as http:
        # until the solver has run 2 s by its own clock (a watch after the end takes far less)
        wait_for(
            lambda: any(p["elapsed_s"] >= 2.0 for p in http.get(f"/v1/jobs/{job}/trace").json()["points"]), timeout=120
        )
        assert hingectl(url, "cancel", job)[0] == 0
        ended = wait_for(
            lambda: (lambda j: j if j["status"] not in ("queued", "running") else None)(
                http.get(f"/v1/jobs/{job}").json()
            ),
            timeout=60,
        )
    assert ended["status"] == "canceled", ended
    code, _, err = hingectl(url, "watch", job)
    assert code == 1, err
    ran = (datetime.fromisoformat(ended["finished_at"]) - datetime.fromisoformat(ended["started_at"])).total_seconds()
    assert f"job {job} canceled (canceled) after {ran:.1f} s," in err, (ran, err)


def test_job_duration_reads_the_jobs_own_times():
    from hinge_client._cli_jobs import job_duration

    ran = {"created_at": "2026-01-01T00:00:00.000000Z", "started_at": "2026-01-01T00:00:01.000000Z"}
    assert job_duration(dict(ran, finished_at="2026-01-01T00:00:03.300000Z"), 0.0) == "after 2.3 s"
    queued = {"created_at": "2026-01-01T00:00:00.000000Z", "started_at": None, "finished_at": "2026-01-01T00:00:04Z"}
    assert job_duration(queued, 0.0) == "before it started, after 4.0 s in the queue"
    assert job_duration({"status": "canceled"}, 1.25) == "after 1.2 s"  # no times: the watch's


def test_regression_uploads_trains_predicts_values_and_their_error(service, files):
    """Issue 33: an upload of real-valued targets says so; classification on them is refused with the command line's
    way to a regression (-p loss=epsilon_insensitive); a regression's predict prints one value per line (the digits
    that read back as the service's number) and, for labelled rows, its mean squared error and R² on stderr, as
    scikit-learn computes them; evaluate prints the API's mse, mae and r2."""
    from sklearn.datasets import load_diabetes
    from sklearn.metrics import mean_squared_error, r2_score

    from hinge_client.data import to_svmlight as arrays_to_svmlight

    url = service.base_url
    X, y = load_diabetes(return_X_y=True)
    y = y / 100.0
    train, held_out = files["folder"] / "diabetes.svm", files["folder"] / "diabetes-test.svm"
    train.write_bytes(arrays_to_svmlight(X[:300], y[:300]))
    held_out.write_bytes(arrays_to_svmlight(X[300:], y[300:]))
    code, out, err = hingectl(url, "upload", str(train))
    assert code == 0, err
    assert f"300 rows x 10 features (real-valued targets from {y[:300].min():g} to {y[:300].max():g}, mean " in err
    dataset = out.strip()

    code, _, err = hingectl(url, "train", dataset, "--solver", "dcd")
    assert code == 6 and "real-valued labels" in err and "--solver dcd -p loss=epsilon_insensitive" in err, err
    code, _, err = hingectl(url, "train", dataset, "--solver", "dcd", "-p", "epsilon=0.2")
    assert code == 6 and "use -p loss=epsilon_insensitive or squared_epsilon_insensitive" in err, err
    code, out, err = hingectl(
        url, "train", dataset, "--solver", "dcd", "-p", "loss=epsilon_insensitive", "-p", "epsilon=0.1", "--watch"
    )
    assert code == 0 and "succeeded" in err, err
    model = out.strip()

    code, out, err = hingectl(url, "predict", model, str(held_out))
    assert code == 0, err
    values = [float(line) for line in out.splitlines()]
    code, answer, _ = hingectl(url, "predict", model, str(held_out), "--json")
    assert code == 0 and values == json.loads(answer)["labels"] == json.loads(answer)["scores"]
    mse, r2 = re.search(
        r"^hingectl: Mean squared error = (\S+), R² = (\S+) \(regression, 142 rows\)$", err, re.M
    ).groups()
    assert float(mse) == pytest.approx(mean_squared_error(y[300:], values), rel=1e-5)
    assert float(r2) == pytest.approx(r2_score(y[300:], values), rel=1e-5) and float(r2) > 0.3
    assert "Accuracy" not in err
    code, out, _ = hingectl(url, "predict", model, str(held_out), "--scores")
    assert [float(line.split("\t")[1]) for line in out.splitlines()] == pytest.approx(values, rel=1e-5)
    unlabelled = files["folder"] / "diabetes-rows.svm"
    unlabelled.write_text("1:0.01 2:-0.04\n3:0.05\n")
    code, out, err = hingectl(url, "predict", model, str(unlabelled))
    assert code == 0 and len(out.split()) == 2 and "Mean squared error" not in err, err

    code, out, err = hingectl(url, "evaluate", model, str(held_out))
    assert code == 0, err
    metrics = dict(line.split(None, 1) for line in out.splitlines() if line.strip())
    assert metrics["task"] == "regression" and float(metrics["r2"]) == pytest.approx(float(r2), rel=1e-5)
    assert float(metrics["mse"]) == pytest.approx(float(mse), rel=1e-5) and "mae" in metrics
    assert "confusion matrix" not in out


def test_one_class_and_kernel_regression_train_predict_and_evaluate(service, files):
    """Issue 33: a one-class SVM trained on rows all labelled 1 (-p svm_type=one_class) predicts 1 (inlier) or -1
    (outlier) per line and says the fraction of outliers on stderr, with the accuracy on rows labelled 1 / -1; evaluate
    prints the outlier fraction and the scores' histogram. A regression with a kernel (-p svm_type=epsilon_svr)
    predicts values and their error as dcd's regression does."""
    from sklearn.datasets import load_breast_cancer, load_diabetes

    from hinge_client.data import to_svmlight as arrays_to_svmlight

    url = service.base_url
    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    labels = np.where(y == 1, 1.0, -1.0)
    inliers, held_out = files["folder"] / "benign.svm", files["folder"] / "cancer-test.svm"
    benign = X[:400][labels[:400] > 0]
    inliers.write_bytes(arrays_to_svmlight(benign, np.ones(len(benign))))
    held_out.write_bytes(arrays_to_svmlight(X[400:], labels[400:]))
    code, out, err = hingectl(url, "upload", str(inliers))
    assert code == 0, err
    code, out, err = hingectl(
        url, "train", out.strip(), "--solver", "smo", *("-p", "svm_type=one_class", "-p", "nu=0.1"),
        *("-p", "kernel.gamma=0.05", "--watch"),
    )  # fmt: skip
    assert code == 0 and "succeeded" in err, err
    model = out.strip()

    code, out, err = hingectl(url, "predict", model, str(held_out))
    assert code == 0, err
    predicted = np.array([float(line) for line in out.splitlines()])
    assert len(predicted) == 169 and set(predicted.tolist()) == {-1.0, 1.0}
    outliers = int(np.sum(predicted < 0))
    right = int(np.sum(predicted == labels[400:]))
    assert (
        f"hingectl: Outliers = {100 * outliers / 169:g}% ({outliers}/169) (one-class), "
        f"Accuracy = {100 * right / 169:g}% ({right}/169)" in err
    ), err
    assert right / 169 > 0.7
    code, out, _ = hingectl(url, "predict", model, str(held_out), "--scores")
    scores = np.array([float(line.split("\t")[1]) for line in out.splitlines()])
    np.testing.assert_array_equal(np.where(scores > 0, 1.0, -1.0), predicted)
    unlabelled = files["folder"] / "cancer-rows.svm"
    unlabelled.write_text("1:0.5 2:-0.4\n3:9 4:9 5:9\n")
    code, out, err = hingectl(url, "predict", model, str(unlabelled))
    assert code == 0 and len(out.split()) == 2 and "(one-class)" in err and "Accuracy" not in err, err

    code, out, err = hingectl(url, "evaluate", model, str(held_out))
    assert code == 0, err
    head, _, rest = out.partition("\n\n")  # the scalars first, then the tables
    metrics = dict(line.split(None, 1) for line in head.splitlines())
    assert metrics["task"] == "one_class"
    assert float(metrics["outlier_fraction"]) == pytest.approx(outliers / 169, rel=1e-5)
    histogram = re.search(r"^scores from \S+ to \S+ \(negative: outliers\), rows per bin:\n(.*)$", out, re.M)
    assert histogram and sum(map(int, histogram.group(1).split())) == 169, out

    X, y = load_diabetes(return_X_y=True)
    train, test = files["folder"] / "diabetes-svr.svm", files["folder"] / "diabetes-svr-test.svm"
    train.write_bytes(arrays_to_svmlight(X[:300], y[:300] / 100.0))
    test.write_bytes(arrays_to_svmlight(X[300:], y[300:] / 100.0))
    code, out, err = hingectl(url, "upload", str(train))
    assert code == 0, err
    code, out, err = hingectl(
        url, "train", out.strip(), "--solver", "smo", *("-p", "svm_type=epsilon_svr", "-p", "C=10"), "--watch"
    )
    assert code == 0 and "succeeded" in err, err
    code, out, err = hingectl(url, "predict", out.strip(), str(test))
    assert code == 0, err
    assert len(out.splitlines()) == 142 and all(float(line) == float(line) for line in out.splitlines())
    r2 = float(re.search(r"R² = (\S+) \(regression, 142 rows\)", err).group(1))
    assert r2 > 0.3, err
