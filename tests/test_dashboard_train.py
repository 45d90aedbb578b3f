"""The dashboard trains, exports and says what a job does, in a real headless Chromium against the real service.

From a data set's train form: a dcd job (a value the schema refuses is caught in the form; the job then
runs, is followed live and its plot drawn), a kernel solver with its gamma and a C and gamma search (one line
per cross-validation fit on a time axis of the fits' own seconds), and a request the API refuses (its 422
message is shown). Export in each format the API writes (the files are read back; a format that cannot hold a
kernel model shows the API's message). The job texts: a canceled job, data set names, the model panel following
the selection, one-vs-one counts, and solvers whose kernels still compile.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tests.browser import ARTIFACTS, offline_page, record_error_answers
from tests.helpers import sparse_problem, to_svmlight, upload, wait_job


@pytest.fixture(scope="module")
def datasets(service):
    """Data sets of this module, by name."""
    with service.client() as http:
        made = {
            "two-class": upload(http, to_svmlight(*sparse_problem(600, 20, 6, seed=51)), name="two-class"),
            "six-class": upload(http, to_svmlight(*sparse_problem(900, 20, 6, seed=52, n_classes=6)), name="six-class"),
        }
        return {name: response.json() for name, response in made.items()}


def open_dashboard(browser, service):  # noqa: F811
    """The dashboard, with the requests it sends and the error answers it gets recorded on the page."""
    page, refused = offline_page(browser, service.base_url)
    page.posts = []
    page.on("request", lambda r: page.posts.append(r) if r.method == "POST" else None)
    record_error_answers(page)
    page.goto(service.base_url + "/ui/")
    page.wait_for_selector("#datasets tbody tr")
    return page, refused


def open_train_form(page, dataset_id: str) -> None:
    page.wait_for_selector(f"#datasets tr[data-id='{dataset_id}']")
    page.click(f"#datasets tr[data-id='{dataset_id}'] button")
    page.wait_for_selector("#train-panel:not([hidden]) #train-param-C")


def wait_status(page, status: str, timeout: float = 90_000) -> None:
    page.wait_for_function(f"document.getElementById('job-status').textContent === '{status}'", timeout=timeout)


def train_and_wait(page, service, timeout: float = 90_000) -> dict:
    """Submit the train form and wait until the page follows the new job to `succeeded`; the job, from the API."""
    before = page.text_content("#job-id")
    page.click("#train-submit")
    page.wait_for_function(
        "before => document.getElementById('job-id').textContent !== before && "
        "document.getElementById('job-status').textContent === 'succeeded'",
        arg=before,
        timeout=timeout,
    )
    with service.client() as http:
        return http.get(f"/v1/jobs/{page.text_content('#job-id')}").json()


def test_train_form_runs_a_job_and_follows_it(service, browser, datasets):  # noqa: F811
    dataset = datasets["two-class"]
    page, refused = open_dashboard(browser, service)
    open_train_form(page, dataset["id"])
    assert page.text_content("#train-dataset") == "two-class"
    assert page.is_hidden("#train-kernel-line")  # dcd is linear: no kernel, no gamma

    # the form checks a value by the schema's constraint and sends nothing
    page.fill("#train-param-C", "-1")
    page.click("#train-submit")
    assert page.text_content("#train-error") == "C: must be greater than 0"
    assert "invalid" in page.get_attribute("#train-param-C", "class")
    assert page.posts == []

    page.fill("#train-param-C", "0.5")
    page.fill("#train-param-max_seconds", "30")
    job = train_and_wait(page, service)
    job_id = job["id"]
    assert job["dataset_id"] == dataset["id"] and job["solver"] == "dcd"
    assert job["params"]["C"] == 0.5 and job["params"]["max_seconds"] == 30
    assert json.loads(page.posts[0].post_data)["params"] == {"C": 0.5, "max_seconds": 30}  # defaults left to the API
    # followed live, its plot drawn, its model shown, its data set named
    page.wait_for_selector("#plot polyline#primal-0")
    assert int(page.text_content("#plot-count")) == len(http_trace(service, job_id))
    page.wait_for_function(f"document.getElementById('model-id').textContent === '{job['model_id']}'")
    assert page.is_visible("#model-detail")
    assert "dcd on two-class" in page.text_content("#job-title")
    page.wait_for_selector(f"#jobs tr[data-id='{job_id}']")
    assert "two-class" in page.text_content(f"#jobs tr[data-id='{job_id}']")
    assert page.text_content("#job-progress-text").startswith("succeeded · converged")
    page.click("#job-params-box summary")
    assert re.search(r"C\s*0\.5", page.inner_text("#job-params"))  # a key: value list, not JSON
    assert "{" not in page.text_content("#job-params")

    # a file uploaded from the page opens the form for the new data set
    page.set_input_files("#upload-file", files=[{"name": "tiny.svm", "mimeType": "text/plain", "buffer": TINY}])
    page.click("#upload-form button")
    page.wait_for_function("document.getElementById('train-dataset').textContent === 'tiny.svm'")
    assert "4 rows · 2 features · 2 labels" in page.text_content("#train-dataset-info")
    assert refused == [] and page.errors == [], (refused, page.errors)
    assert page.failed == [], page.failed
    page.close()


TINY = b"1 1:1 2:0.5\n-1 1:-1\n1 2:2\n-1 1:-0.5 2:-1\n"


def http_trace(service, job_id: str) -> list[dict]:
    with service.client() as http:
        return http.get(f"/v1/jobs/{job_id}/trace").json()["points"]


def test_kernel_solver_with_gamma_and_a_search(service, browser, datasets):  # noqa: F811
    page, refused = open_dashboard(browser, service)
    open_train_form(page, datasets["two-class"]["id"])
    page.select_option("#train-solver", "smo")
    assert page.is_visible("#train-kernel-line")
    assert page.input_value("#train-kernel-type") == "rbf"  # the schema's default kernel
    assert page.input_value("#train-kernel-gamma") == "scale"
    page.fill("#train-kernel-gamma", "0")
    page.click("#train-submit")
    assert page.text_content("#train-error") == "kernel.gamma: must be greater than 0 (or scale)"
    page.fill("#train-kernel-gamma", "0.5")
    page.check("#train-param-probability")
    page.check("#train-search")
    page.fill("#train-search-C", "0.1, 1")
    page.fill("#train-search-gamma", "0.05 0.5")
    page.fill("#train-search-cv_folds", "3")
    job = train_and_wait(page, service)
    job_id = job["id"]
    assert job["solver"] == "smo" and job["params"]["kernel"] == {"type": "rbf", "gamma": 0.5}
    assert job["params"]["probability"] is True
    assert {k: job["params"]["search"][k] for k in ("C", "gamma", "cv_folds")} == {
        "C": [0.1, 1.0],
        "gamma": [0.05, 0.5],
        "cv_folds": 3,
    }
    # the plot: every cross-validation fit its own mark, coloured by setting, the refit on top; a time axis of the
    # fits' own seconds, ending just past the longest fit
    fits = page.eval_on_selector_all("#plot [data-kind=search]", "marks => [...new Set(marks.map(m => m.dataset.fit))]")
    assert len(fits) == 3 * 4, fits
    assert page.query_selector_all("#plot [data-kind=refit]")
    assert page.text_content("#plot-xlabel").startswith("seconds within each fit")
    longest = max(p["elapsed_s"] for p in http_trace(service, job_id))
    axis_end = float(page.eval_on_selector_all("#plot text.tick", "ticks => ticks[ticks.length - 1].textContent"))
    assert longest <= axis_end <= 2.5 * longest, (longest, axis_end)
    assert "12 cross-validation fits" in page.text_content("#plot-legend")
    page.wait_for_selector("#model-search table.search-table tbody tr")
    assert len(page.query_selector_all("#model-search table.search-table tbody tr")) == 4
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard-search.png"), full_page=True)

    # sampled_cuts takes a kernel too; poly shows its own fields
    page.select_option("#train-solver", "sampled_cuts")
    page.select_option("#train-kernel-type", "poly")
    assert page.is_visible("#train-kernel-degree") and page.is_visible("#train-kernel-gamma")
    page.select_option("#train-solver", "ocas")
    assert page.is_hidden("#train-kernel-line") and page.is_hidden("#train-search-gamma-field")

    # a request only the API can refuse (a deadline past the server's ceiling): its 422 message is shown
    open_train_form(page, datasets["six-class"]["id"])
    page.select_option("#train-solver", "smo")
    page.fill("#train-param-max_seconds", "1000000000")
    sent = len(page.posts)
    page.click("#train-submit")
    page.wait_for_selector("#train-error.api-error")
    with service.client() as http:
        answer = http.post("/v1/jobs", json=json.loads(page.posts[sent].post_data))
    assert answer.status_code == 422
    assert page.text_content("#train-error") == answer.json()["error"]["message"]
    assert "ceiling" in page.text_content("#train-error")
    assert refused == [] and page.errors == [], (refused, page.errors)
    page.close()


def test_export_in_every_format(service, browser, datasets, tmp_path):  # noqa: F811
    with service.client() as http:
        ds = datasets["two-class"]["id"]
        linear = wait_job(http, http.post("/v1/jobs", json={"dataset_id": ds, "solver": "dcd"}).json()["id"])
        kernel = wait_job(http, http.post("/v1/jobs", json={"dataset_id": ds, "solver": "smo"}).json()["id"])
        refusal = http.get(f"/v1/models/{kernel['model_id']}/export", params={"format": "liblinear"})
        rows = [[0.0] * 20, [1.0] * 20]
        predicted = http.post(f"/v1/models/{linear['model_id']}/predict", json={"instances": rows}).json()
    page, refused = open_dashboard(browser, service)
    page.wait_for_selector(f"#models tr[data-id='{linear['model_id']}']")
    page.click(f"#models tr[data-id='{linear['model_id']}']")
    page.wait_for_selector("#export-buttons button")
    formats = [b.text_content() for b in page.query_selector_all("#export-buttons button")]
    assert formats == ["json", "liblinear", "libsvm", "onnx"]
    files = {}
    for fmt in formats:
        with page.expect_download() as download:
            page.click(f"#export-{fmt}")
        path = tmp_path / download.value.suggested_filename
        download.value.save_as(path)
        files[fmt] = path.read_bytes()
        assert path.name == f"{linear['model_id']}.{fmt}"
        page.wait_for_function("document.getElementById('export-note').textContent.startsWith('saved')")
    assert json.loads(files["json"])["labels"] == [-1.0, 1.0]
    assert files["liblinear"].startswith(b"solver_type L2R_L1LOSS_SVC_DUAL\n")
    assert files["libsvm"].startswith(b"svm_type c_svc\n")
    onnxruntime = pytest.importorskip("onnxruntime")
    session = onnxruntime.InferenceSession(files["onnx"])
    labels = session.run(["label"], {"X": np.asarray(rows, dtype=np.float32)})[0]
    assert labels.ravel().tolist() == predicted["labels"]

    # a kernel model cannot go to LIBLINEAR: the API's message
    page.click(f"#models tr[data-id='{kernel['model_id']}']")
    page.wait_for_function(f"document.getElementById('model-id').textContent === '{kernel['model_id']}'")
    page.wait_for_selector("#export-liblinear")
    page.click("#export-liblinear")
    page.wait_for_selector("#export-note.error")
    assert refusal.status_code == 409
    assert page.text_content("#export-note") == f"liblinear: {refusal.json()['error']['message']}"
    assert refused == [] and page.errors == [], (refused, page.errors)
    page.close()


def test_job_texts_canceled_names_selection_and_one_vs_one(service, browser, datasets):  # noqa: F811
    with service.client() as http:
        busy = upload(
            http, to_svmlight(*sparse_problem(3000, 200, 10, seed=53, random_labels=True)), name="busy-set"
        ).json()
        done = wait_job(
            http, http.post("/v1/jobs", json={"dataset_id": datasets["two-class"]["id"], "solver": "dcd"}).json()["id"]
        )
        params = {"C": 1000.0, "tol": 1e-12, "max_iter": 10_000_000, "shrinking": False, "max_seconds": 60}
        running = http.post("/v1/jobs", json={"dataset_id": busy["id"], "solver": "dcd", "params": params}).json()
        wait_job(http, running["id"], statuses=("running",), timeout=60)
    page, refused = open_dashboard(browser, service)

    # a model shows the job that trained it; selecting another job drops the model's panel
    page.wait_for_selector(f"#models tr[data-id='{done['model_id']}']")
    page.click(f"#models tr[data-id='{done['model_id']}']")
    page.wait_for_function(f"document.getElementById('job-id').textContent === '{done['id']}'")
    assert page.is_visible("#model-detail")
    page.click(f"#jobs tr[data-id='{running['id']}']")
    # the tables are re-rendered by their polling: under load a click can land on a row just replaced, so the
    # selection is waited for (and clicked again if it was lost) before the model panel is checked
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    try:
        page.wait_for_function(f"document.getElementById('job-id').textContent === '{running['id']}'", timeout=5000)
    except PlaywrightTimeoutError:
        page.click(f"#jobs tr[data-id='{running['id']}']")
        page.wait_for_function(f"document.getElementById('job-id').textContent === '{running['id']}'")
    assert page.is_hidden("#model-detail")
    page.wait_for_function("/% · training/.test(document.getElementById('job-progress-text').textContent)")
    row = f"#jobs tr[data-id='{running['id']}']"
    assert "busy-set" in page.text_content(row) and busy["id"] not in page.text_content(row)

    # canceled: no percentage, no ETA, says why; the kept model is shown, not the earlier one
    page.click("#job-cancel")
    wait_status(page, "canceled", timeout=30_000)
    text = page.text_content("#job-progress-text")
    assert text == "canceled while running: the model reached so far is kept", text
    assert page.is_hidden("#job-bar-box")
    with service.client() as http:
        canceled = http.get(f"/v1/jobs/{running['id']}").json()
    page.wait_for_function(f"document.getElementById('model-id').textContent === '{canceled['model_id']}'")
    page.wait_for_function(f"document.querySelector(\"{row} .pill\").textContent === 'canceled'")
    cell = page.text_content(f"{row} td.progress")
    assert "%" not in cell and "ETA" not in cell and "canceled" in cell, cell

    # one-vs-one, trained from the form (so that the page follows it from the start): K(K-1)/2 pairs of the data
    # set's K labels, counted as they finish
    with service.client() as http:
        letters = upload(http, to_svmlight(*sparse_problem(8000, 30, 8, seed=54, n_classes=26)), name="letters").json()
    assert len(letters["labels"]) == 26
    page.evaluate(
        """() => { window.seen = [];
            new MutationObserver(() => window.seen.push(document.getElementById('job-progress-text').textContent))
              .observe(document.getElementById('job-progress-text'), {childList: true, characterData: true, subtree: true}); }"""
    )
    open_train_form(page, letters["id"])
    page.select_option("#train-solver", "smo")
    page.fill("#train-param-C", "10")
    page.fill("#train-kernel-gamma", "0.5")
    page.click("#train-more summary")
    page.select_option("#train-param-multiclass", "ovo")
    page.fill("#train-param-n_processes", "1")  # one pair after the other
    ovo = train_and_wait(page, service, timeout=120_000)
    assert ovo["params"]["multiclass"] == "ovo" and ovo["progress"]["subtasks_total"] == 325
    seen = page.evaluate("window.seen")
    assert any(re.search(r"\d+ of 325 class pairs \(one-vs-one\) done", t) for t in seen), seen
    assert not any("of 26" in t or "search" in t for t in seen), seen
    assert page.text_content("#job-progress-text") == "succeeded · converged · 325 class pairs (one-vs-one)"
    assert refused == [] and page.errors == [], (refused, page.errors)
    page.close()


def test_solvers_whose_kernels_still_compile(service, browser, datasets):  # noqa: F811
    page, refused = open_dashboard(browser, service)
    # what /readyz answers on a fresh machine while smo and sampled_cuts compile
    warming = {
        "status": "ok",
        "redis": True,
        "workers": 2,
        "solvers_ready": ["cpa", "dcd", "ocas"],
        "solvers_compiling": ["sampled_cuts", "smo"],
        "compile_eta_s": 42.0,
    }
    page.route("**/readyz", lambda route: route.fulfill(status=200, json=warming))
    page.wait_for_function("document.getElementById('health').textContent.includes('compiling')", timeout=10_000)
    assert page.text_content("#health") == "ready · 2 worker(s) · compiling sampled_cuts, smo (about 42 s)"
    open_train_form(page, datasets["two-class"]["id"])
    assert page.is_hidden("#train-compiling")  # dcd is ready
    page.select_option("#train-solver", "smo")
    assert page.text_content("#train-solver option[value=smo]") == "smo (compiling)"
    assert page.text_content("#train-solver option[value=dcd]") == "dcd"
    assert page.text_content("#train-compiling").startswith("smo's code is still compiling on this machine")
    # dcd's C-SVC ready, its other formulations compiling: said so, the C-SVC not said to wait
    partly = dict(warming, solvers_compiling=["dcd"], formulations_compiling={"dcd": "logistic regression, SVR"})
    page.unroute("**/readyz")
    page.route("**/readyz", lambda route: route.fulfill(status=200, json=partly))
    page.wait_for_function("document.getElementById('health').textContent.includes('partly')", timeout=10_000)
    assert page.text_content("#health") == "ready · 2 worker(s) · compiling dcd (partly) (about 42 s)"
    assert page.text_content("#train-solver option[value=dcd]") == "dcd (partly compiling)"
    page.select_option("#train-solver", "dcd")
    assert page.text_content("#train-compiling").startswith(
        "dcd's logistic regression, SVR are still compiling on this machine (about 42 s left for all solvers)"
    )
    assert "its other jobs start at once" in page.text_content("#train-compiling")
    page.unroute("**/readyz")
    page.route("**/readyz", lambda route: route.fulfill(status=200, json=warming))
    page.wait_for_function("!document.getElementById('health').textContent.includes('partly')", timeout=10_000)
    page.select_option("#train-solver", "smo")
    # a job that waits for it (its phase and the unit being compiled, from its progress)
    waiting = page.evaluate(
        """async () => (await import('/static/dashboard/status.js')).describeJob(
             {status: 'running', solver: 'smo', params: {}, progress: {phase: 'waiting for compilation', compiling: 'smo', fraction: 0}},
             {compileEta: 42})"""
    )
    assert waiting == {"fraction": None, "text": "waiting for compilation: compiling smo (about 42 s left)"}
    page.unroute("**/readyz")
    page.wait_for_function("!document.getElementById('health').textContent.includes('compiling')", timeout=10_000)
    assert page.is_hidden("#train-compiling")
    assert refused == [] and page.errors == [], (refused, page.errors)
    page.close()
