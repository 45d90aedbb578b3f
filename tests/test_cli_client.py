"""`hingectl` in a subprocess against the running service: every command, its output and its exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import sparse_problem, to_svmlight
from tests.test_service_limits_auth import KEYS, strict_api  # noqa: F401  (fixture: an API with keys)


def hingectl(service_url: str, *args: str, env: dict | None = None, timeout: float = 120.0):
    """Run hingectl; returns (exit code, stdout, stderr)."""
    full_env = dict(os.environ, HINGE_URL=service_url, **(env or {}))
    if "HINGE_API_KEY" not in (env or {}):
        full_env.pop("HINGE_API_KEY", None)
    proc = subprocess.run(
        [sys.executable, "-m", "hinge_client.cli", *args], capture_output=True, text=True, env=full_env, timeout=timeout
    )
    return proc.returncode, proc.stdout, proc.stderr


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
    assert code == 0 and "(max_iter)" in err and "raise params.max_iter" in err, err

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
    assert code == 6 and "did you mean params.kernel.gamma" in err
    code, _, err = hingectl(url, "train", dataset, "--solver", "dcd", "-p", "C")
    assert code == 2 and "KEY=VALUE" in err
    assert hingectl(url, "train", dataset)[0] == 2  # argparse: --solver is required
    # a job that ends canceled: watch exits 1
    code, out, _ = hingectl(
        url,
        "train",
        dataset,
        "--solver",
        "dcd",
        "-p",
        "C=1000",
        "-p",
        "tol=1e-12",
        "-p",
        "max_iter=10000000",
        "-p",
        "shrinking=false",
    )
    job = out.strip()
    watcher = subprocess.Popen(
        [sys.executable, "-m", "hinge_client.cli", "--url", url, "watch", job],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        from tests.helpers import wait_for

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
