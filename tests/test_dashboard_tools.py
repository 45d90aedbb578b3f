"""The dashboard predicts, evaluates and deletes, in a real headless Chromium against the real service (issue 32).

Predict on pasted rows (svmlight and dense) and on a file (CSV, gzip), with the predictions downloaded as CSV and
compared with the API's own answer; evaluate a model on a data set (the metrics, the confusion matrix and, for two
classes, the ROC curve, each equal to the API's answer); delete a data set, a job and a model, each only once the
confirmation says so. And the fixes: the upload's index base (chosen, or guessed and said), a searched model's
chosen parameters, an imported model's origin, a search's plot and legend, a time axis that starts at the data,
tables whose `created` column fits at 1280 and 1400 px, and a job's and a model's warnings.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import time

import numpy as np
import pytest

from tests.browser import ARTIFACTS, offline_page, record_error_answers
from tests.helpers import sparse_problem, to_svmlight, upload, wait_job


@pytest.fixture(scope="module")
def made(service):
    """A noisy two-class data set and a six-class one, with a dcd model of each."""
    with service.client() as http:
        binary = upload(http, to_svmlight(*sparse_problem(600, 20, 6, seed=61, noise=1.5)), name="noisy-two").json()
        six = upload(http, to_svmlight(*sparse_problem(900, 20, 6, seed=62, n_classes=6)), name="six").json()
        models = {}
        for name, dataset in (("binary", binary), ("six", six)):
            job = http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd"}).json()
            models[name] = wait_job(http, job["id"])["model_id"]
    return {"binary": binary, "six": six, "models": models}


def open_dashboard(browser, service, width: int = 1400):
    """The dashboard, with the error answers it gets recorded on the page."""
    page, refused = offline_page(browser, service.base_url)
    page.set_viewport_size({"width": width, "height": 1000})
    record_error_answers(page)
    page.goto(service.base_url + "/ui/")
    page.wait_for_selector("#datasets tbody tr")
    return page, refused


def open_model(page, model_id: str) -> None:
    page.wait_for_selector(f"#models tr[data-id='{model_id}']")
    page.click(f"#models tr[data-id='{model_id}']")
    page.wait_for_function(
        "id => document.getElementById('model-id').textContent === id && "
        "document.getElementById('evaluate-dataset').options.length > 0",
        arg=model_id,
    )


def rows_of(text: bytes, count: int) -> str:
    return "\n".join(text.decode().splitlines()[:count])


def test_predict_pasted_rows_and_a_file_then_download(service, browser, made, tmp_path):
    model_id = made["models"]["binary"]
    indptr, indices, data, y = sparse_problem(600, 20, 6, seed=61, noise=1.5)
    text = to_svmlight(indptr, indices, data, y)
    dense = np.zeros((30, 20))
    for i in range(30):
        dense[i, indices[indptr[i] : indptr[i + 1]]] = data[indptr[i] : indptr[i + 1]]
    with service.client() as http:
        answer = http.post(f"/v1/models/{model_id}/predict", json={"instances": dense.tolist()}).json()
    page, refused = open_dashboard(browser, service)
    open_model(page, model_id)

    # svmlight rows with their labels: predicted, with the accuracy on them
    page.fill("#predict-rows", rows_of(text, 30))
    page.click("#predict-run")
    page.wait_for_selector("#predict-result:not([hidden]) tbody tr")
    right = sum(a == b for a, b in zip(answer["labels"], y[:30].tolist(), strict=True))
    note = page.text_content("#predict-note")
    assert (
        note.startswith("predicted 30 rows of the pasted rows")
        and f"accuracy {100 * right / 30:.1f}% ({right}/30)" in note
    )
    assert len(page.query_selector_all("#predict-result tbody tr")) == 20  # the first 20; the download has all
    with page.expect_download() as download:
        page.click("#predict-download")
    assert download.value.suggested_filename == f"predictions-{model_id}.csv"
    table = list(csv.DictReader(io.StringIO(open(download.value.path()).read())))
    assert len(table) == 30
    assert [float(r["label"]) for r in table] == answer["labels"]
    assert [float(r["true label"]) for r in table] == y[:30].tolist()
    np.testing.assert_allclose([float(r["score (> 0: 1)"]) for r in table], answer["scores"], rtol=1e-12)

    # a CSV file (gzip) with a header and a label column, then dense pasted rows without labels
    out = io.StringIO()
    out.write(",".join([f"f{j}" for j in range(20)] + ["label"]) + "\n")
    for i in range(30):
        out.write(",".join([repr(float(v)) for v in dense[i]] + [str(int(y[i]))]) + "\n")
    page.set_input_files(
        "#predict-file",
        files=[
            {"name": "rows.csv.gz", "mimeType": "application/gzip", "buffer": gzip.compress(out.getvalue().encode())}
        ],
    )
    page.click("#predict-run")
    page.wait_for_function("document.getElementById('predict-note').textContent.includes('of rows.csv.gz')")
    assert f"accuracy {100 * right / 30:.1f}% ({right}/30)" in page.text_content("#predict-note")
    with page.expect_download() as download:
        page.click("#predict-download")
    table = list(csv.DictReader(io.StringIO(open(download.value.path()).read())))
    assert [float(r["label"]) for r in table] == answer["labels"]

    page.fill("#predict-rows", "\n".join(", ".join(repr(float(v)) for v in row) for row in dense[:3]))
    page.click("#predict-run")
    page.wait_for_function(
        "document.getElementById('predict-note').textContent.startsWith('predicted 3 rows of the pasted')"
    )
    assert "accuracy" not in page.text_content("#predict-note")  # no labels to compare with

    # a row the API refuses: its message, naming the line of the text
    page.fill("#predict-rows", "# a comment\n" + ", ".join(["1"] * 20) + "\n" + ", ".join(["1"] * 22))
    page.click("#predict-run")
    page.wait_for_selector("#predict-note.error")
    assert page.text_content("#predict-note") == "the pasted rows: line 3 has 22 values; the model has 20 features"
    # one value too many, on a model whose data set was guessed one-based: how to upload it again, in the page's terms
    page.fill("#predict-rows", ", ".join(["1"] * 21))
    page.click("#predict-run")
    page.wait_for_function("document.getElementById('predict-note').textContent.includes('21 values')")
    note = page.text_content("#predict-note")
    assert f"data set {made['binary']['id']} was read as one-based" in note
    assert 'upload it again with indices "zero-based" and train again: the model then has 21 features' in note
    page.fill("#predict-rows", "1 3:x")
    page.click("#predict-run")
    page.wait_for_function("document.getElementById('predict-note').textContent.includes('is not a finite number')")
    assert (
        page.text_content("#predict-note") == 'the pasted rows: line 1: value "x" of feature 3 is not a finite number'
    )
    assert refused == [] and page.errors == [], (refused, page.errors)
    assert [f for f in page.failed if "/predict" not in f[1]] == [], page.failed
    page.close()


def test_evaluate_shows_metrics_confusion_matrix_and_roc(service, browser, made):
    model_id, dataset_id = made["models"]["binary"], made["binary"]["id"]
    with service.client() as http:
        report = http.post(f"/v1/models/{model_id}/evaluate", json={"dataset_id": dataset_id}).json()
        six_report = http.post(
            f"/v1/models/{made['models']['six']}/evaluate", json={"dataset_id": made["six"]["id"]}
        ).json()
    assert 0.6 < report["accuracy"] < 1.0  # noisy: a real curve, off-diagonal counts
    page, refused = open_dashboard(browser, service)
    open_model(page, model_id)
    assert page.input_value("#evaluate-dataset") == dataset_id  # its training data, preselected
    page.click("#evaluate-run")
    page.wait_for_selector("#evaluate-result #roc")
    metric = lambda key: page.text_content(f"#evaluate-metrics dd[data-metric={key}]")  # noqa: E731
    assert float(metric("accuracy")) == pytest.approx(report["accuracy"], abs=1e-4)
    assert float(metric("roc_auc")) == pytest.approx(report["roc_auc"], abs=1e-4)
    cells = page.eval_on_selector_all(
        "#confusion tbody tr", "rows => rows.map(r => [...r.querySelectorAll('td')].map(c => +c.textContent))"
    )
    assert cells == report["confusion_matrix"]["matrix"]
    points = page.get_attribute("#roc-curve", "points").split()
    assert len(points) == len(report["roc_curve"]["fpr"]) > 10
    assert points[0] == "34.0,186.0" and points[-1] == "212.0,8.0"  # from (0, 0) to (1, 1)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard-evaluate.png"), full_page=True)

    # six classes: the 6 x 6 matrix, no ROC curve
    open_model(page, made["models"]["six"])
    page.select_option("#evaluate-dataset", made["six"]["id"])
    page.click("#evaluate-run")
    page.wait_for_selector("#evaluate-result #confusion")
    cells = page.eval_on_selector_all(
        "#confusion tbody tr", "rows => rows.map(r => [...r.querySelectorAll('td')].map(c => +c.textContent))"
    )
    assert cells == six_report["confusion_matrix"]["matrix"] and len(cells) == 6
    assert page.query_selector("#roc") is None
    assert len(page.query_selector_all("#evaluate-result table.per-class tbody tr")) == 6
    assert refused == [] and page.errors == [] and page.failed == [], (refused, page.errors, page.failed)
    page.close()


def test_delete_asks_first(service, browser):
    with service.client() as http:
        dataset = upload(http, to_svmlight(*sparse_problem(200, 10, 4, seed=63)), name="to-delete").json()
        job = wait_job(http, http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd"}).json()["id"])
    page, refused = open_dashboard(browser, service)

    # a data set: "keep" keeps it, "delete" deletes it
    page.wait_for_selector(f"#datasets tr[data-id='{dataset['id']}']")
    page.click(f"#datasets tr[data-id='{dataset['id']}'] button")
    page.wait_for_selector("#train-panel:not([hidden])")
    page.click("#dataset-delete")
    page.wait_for_selector("#confirm[open]")
    assert page.text_content("#confirm-text").startswith(f'Delete data set "to-delete" ({dataset["id"]})?')
    page.click("#confirm-no")
    page.wait_for_selector("#confirm:not([open])", state="attached")
    with service.client() as http:
        assert http.get(f"/v1/datasets/{dataset['id']}").status_code == 200
    page.click("#dataset-delete")
    page.click("#confirm-yes")
    page.wait_for_selector(f"#datasets tr[data-id='{dataset['id']}']", state="detached")
    assert page.text_content("#done-note") == f'deleted data set "to-delete" ({dataset["id"]})'
    assert page.is_hidden("#train-panel")
    with service.client() as http:
        assert http.get(f"/v1/datasets/{dataset['id']}").status_code == 404

    # a finished job (its model stays), then the model
    page.click(f"#jobs tr[data-id='{job['id']}']")
    page.wait_for_selector("#job-delete:not([hidden])")
    page.click("#job-delete")
    assert page.text_content("#confirm-text") == f"Delete job {job['id']} and its trace? Its model stays."
    page.click("#confirm-yes")
    page.wait_for_selector(f"#jobs tr[data-id='{job['id']}']", state="detached")
    assert page.is_hidden("#job-detail")
    page.click(f"#models tr[data-id='{job['model_id']}']")
    page.wait_for_function(f"document.getElementById('model-id').textContent === '{job['model_id']}'")
    page.click("#model-delete")
    page.click("#confirm-yes")
    page.wait_for_selector(f"#models tr[data-id='{job['model_id']}']", state="detached")
    assert page.is_hidden("#model-detail")
    with service.client() as http:
        assert http.get(f"/v1/jobs/{job['id']}").status_code == 404
        assert http.get(f"/v1/models/{job['model_id']}").status_code == 404
    assert refused == [] and page.errors == [], (refused, page.errors)
    page.close()


def test_upload_chooses_or_says_the_index_base(service, browser, made):
    # (made: the dashboard is opened once its list shows a data set; alone, this test would have none)
    zero_based = b"1 1:0.5 3:1\n-1 2:1\n1 3:2\n"  # zero-based, and column 0 always zero: never written
    page, refused = open_dashboard(browser, service)
    assert page.input_value("#upload-zero-based") == "auto"
    page.set_input_files("#upload-file", files=[{"name": "guess.svm", "mimeType": "text/plain", "buffer": zero_based}])
    page.click("#upload-form button[type=submit]")
    page.wait_for_function("document.getElementById('upload-status').textContent.startsWith('stored guess.svm')")
    status = page.text_content("#upload-status")
    assert status.startswith("stored guess.svm: 3 rows × 3 features · indices read as one-based (guessed: no index 0")
    assert 'upload it again with indices "zero-based": it then has 4 features' in status
    assert "warn" in page.get_attribute("#upload-status", "class")
    page.wait_for_function("document.getElementById('train-dataset').textContent === 'guess.svm'")
    assert "3 features · 2 labels · indices one-based (guessed)" in page.text_content("#train-dataset-info")

    page.select_option("#upload-zero-based", "true")
    page.set_input_files("#upload-file", files=[{"name": "given.svm", "mimeType": "text/plain", "buffer": zero_based}])
    page.click("#upload-form button[type=submit]")
    page.wait_for_function("document.getElementById('upload-status').textContent.startsWith('stored given.svm')")
    assert (
        page.text_content("#upload-status") == "stored given.svm: 3 rows × 4 features · indices zero-based, as chosen"
    )
    page.select_option("#upload-format", "csv")
    assert page.is_hidden("#upload-base-field")  # CSV has no indices
    assert refused == [] and page.errors == [] and page.failed == [], (refused, page.errors, page.failed)
    page.close()


def test_searched_and_imported_models_and_the_search_plot(service, browser, made):
    with service.client() as http:
        params = {"C": 1.0, "search": {"C": [0.01, 10.0], "gamma": [0.05, 2.0], "cv_folds": 3}}
        job = http.post("/v1/jobs", json={"dataset_id": made["binary"]["id"], "solver": "smo", "params": params}).json()
        job = wait_job(http, job["id"])
        model = http.get(f"/v1/models/{job['model_id']}").json()
        libsvm = http.get(f"/v1/models/{job['model_id']}/export", params={"format": "libsvm"}).content
        imported = http.post(
            "/v1/models", params={"format": "libsvm", "n_features": 20}, files={"file": ("m.txt", libsvm)}
        ).json()
    chosen = model["refit_params"]
    page, refused = open_dashboard(browser, service)
    open_model(page, job["model_id"])
    page.wait_for_function(f"document.getElementById('job-id').textContent === '{job['id']}'")
    params_text = page.inner_text("#model-params")
    assert "C and gamma chosen by the search" in params_text
    shown = dict(
        zip(
            page.eval_on_selector_all("#model-params dl.kv:first-of-type dt", "e => e.map(x => x.textContent)"),
            page.eval_on_selector_all("#model-params dl.kv:first-of-type dd", "e => e.map(x => x.textContent)"),
            strict=True,
        )
    )
    assert float(shown["C"]) == chosen["C"] and float(shown["kernel.gamma"]) == chosen["gamma"]
    assert "scale" not in shown.values()
    assert "searched" in params_text  # the grid, apart

    # the search's plot: grey fits, the best setting's 3 folds in colour, the refit in black; a legend that says so
    page.wait_for_function("document.getElementById('plot-legend').textContent.includes('blue: the 3 fits')")
    legend = page.text_content("#plot-legend")
    assert "grey: the 12 cross-validation fits (4 settings × 3 folds)" in legend
    assert "one line each" not in legend and "coloured by setting" not in legend
    best = page.eval_on_selector_all("#plot [data-best]", "marks => [...new Set(marks.map(m => m.dataset.fit))]")
    assert len(best) == 3 and all(f"C {chosen['C']:g}" in fit for fit in best), best
    colours = page.eval_on_selector_all(
        "#plot [data-kind=search]", "marks => [...new Set(marks.map(m => m.getAttribute('stroke')))]"
    )
    assert len(colours) == 2, colours  # grey, and the best setting's blue
    assert not page.query_selector_all("#plot [data-kind=search][data-series=dual]")
    assert page.query_selector_all("#plot [data-kind=refit][data-series=dual]")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard-searched-model.png"), full_page=True)

    # an imported model says so
    page.wait_for_selector(f"#models tr[data-id='{imported['id']}']")
    assert "imported (libsvm)" in page.text_content(f"#models tr[data-id='{imported['id']}'] td:nth-child(2)")
    open_model(page, imported["id"])
    assert page.text_content("#model-title").startswith("imported (libsvm)")
    assert refused == [] and page.errors == [] and page.failed == [], (refused, page.errors, page.failed)
    page.close()


def test_time_axis_starts_at_the_data(service, browser):
    page, refused = offline_page(browser, service.base_url)
    page.goto(service.base_url + "/ui/")
    ticks = page.evaluate(
        """async () => {
            const { Trace, drawPlot } = await import('/static/dashboard/plot.js');
            const trace = new Trace();
            [0.0059, 0.0062, 0.0068, 0.0074, 0.008].forEach((t, i) =>
                trace.add({ elapsed_s: t, iteration: i, primal: 10 - i, dual: 5 + i / 2, gap: 5 - 1.5 * i }));
            const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
            drawPlot(svg, trace);
            return [...svg.querySelectorAll('text.tick')].map(t => +t.textContent);
        }"""
    )
    first, last = ticks[0], ticks[-1]
    assert first <= 0.0059 and last >= 0.008, ticks
    assert (0.0059 - first) / (last - first) < 0.25, ticks  # not three quarters empty
    assert page.errors == [] and refused == []
    page.close()


@pytest.mark.parametrize("width", [1280, 1400])
def test_tables_fit_with_their_created_column(service, browser, made, width):
    page, refused = open_dashboard(browser, service, width)
    page.wait_for_selector("#models tbody tr")
    for panel, table in (("#datasets-panel", "#datasets"), ("#models-panel", "#models")):
        fits = page.eval_on_selector(panel, "p => p.scrollWidth <= p.clientWidth")
        right = page.eval_on_selector(panel, "p => p.getBoundingClientRect().right")
        created = page.eval_on_selector_all(
            f"{table} td.created", "cells => cells.map(c => c.getBoundingClientRect().right)"
        )
        assert fits and created and max(created) <= right, (panel, width, created, right)
    page.close()


def test_a_refresh_keeps_the_rows_elements_so_a_click_across_it_is_not_lost(service, browser, made):
    """The lists are refreshed every 2.5 s; each row keeps its element (unchanged cells are left alone, changed ones
    rewritten in place) and a list waits while a pointer is held down, so a press and release that straddle a refresh
    land on one element: with the rows rebuilt the release fell on a new element and the click was lost (CI's
    warnings test once timed out on it)."""
    model_id = made["models"]["binary"]
    page, refused = open_dashboard(browser, service)
    row = f"#models tr[data-id='{model_id}']"
    page.wait_for_selector(row)
    page.eval_on_selector(row, "tr => { tr.dataset.marked = 'yes'; }")

    def refreshed() -> None:
        with page.expect_response(lambda response: "/v1/models?limit" in response.url):
            pass
        page.wait_for_timeout(100)  # the answer written into the table

    refreshed()
    assert page.eval_on_selector(row, "tr => tr.dataset.marked") == "yes"  # unchanged: the same element

    def changed(route) -> None:  # the model's objective as if it had changed since
        listing = route.fetch().json()
        for item in listing["items"]:
            if item["id"] == model_id:
                item["objective"] = 12345.678
        route.fulfill(json=listing)

    page.route("**/v1/models?limit*", changed)
    box = page.locator(row).bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()  # pressed on the row, a refresh that would change its cells, released
    refreshed()
    assert "12345.7" not in page.text_content(row)  # the list waits for the release
    page.mouse.up()
    page.wait_for_function("id => document.getElementById('model-id').textContent === id", arg=model_id)
    assert page.eval_on_selector_all("#models tbody tr.selected", "rows => rows.map(r => r.dataset.id)") == [model_id]
    refreshed()  # then the change is written, into the same element
    assert "12345.7" in page.text_content(row) and page.eval_on_selector(row, "tr => tr.dataset.marked") == "yes"
    # a press whose release the page never sees (outside the window) holds the lists back for 5 s at most
    page.unroute("**/v1/models?limit*")
    page.evaluate("() => window.dispatchEvent(new PointerEvent('pointerdown'))")
    began = time.monotonic()
    page.wait_for_function(
        "row => !document.querySelector(row).textContent.includes('12345.7')", arg=row, timeout=15_000
    )
    assert time.monotonic() - began >= 4.0
    assert refused == [] and page.errors == [], (refused, page.errors)
    page.close()


def test_warnings_are_shown_in_the_job_and_model_views(service, browser, made):
    """Until the service sends `warnings` the page's requests are answered with them added (absent means none)."""
    model_id = made["models"]["binary"]
    warning = {"code": "max_iter", "message": "stopped at max_iter = 1000 before the stopping rule was met"}
    with service.client() as http:
        model = http.get(f"/v1/models/{model_id}").json()
        job = http.get(f"/v1/jobs/{model['job_id']}").json()
    page, refused = open_dashboard(browser, service)
    # absent: nothing shown
    open_model(page, model_id)
    assert page.is_hidden("#model-warnings")
    page.route(f"**/v1/models/{model_id}", lambda route: route.fulfill(json={**model, "warnings": [warning]}))
    ended = json.dumps({**job, "warnings": [warning]})
    page.route(
        f"**/v1/jobs/{job['id']}/events*",
        lambda route: route.fulfill(
            status=200, content_type="text/event-stream", body=f"event: end\ndata: {ended}\n\n"
        ),
    )
    page.click(f"#jobs tr[data-id='{job['id']}']")
    page.wait_for_selector("#job-warnings:not([hidden])")
    assert "max_iter" in page.text_content("#job-warnings") and warning["message"] in page.text_content("#job-warnings")
    page.wait_for_selector("#model-warnings:not([hidden])")
    assert page.text_content("#model-warnings") == f"⚠ warningmax_iter {warning['message']}"
    assert refused == [] and page.errors == [], (refused, page.errors)
    page.close()


def test_a_regression_is_evaluated_with_its_errors_and_a_scatter_of_predicted_against_true(service, browser):
    """A regression model (dcd's epsilon_insensitive loss): evaluate shows MSE, MAE and R² as the API answers them,
    and a scatter plot with a point per row (up to the API's sample); predict on labelled rows says their mean
    squared error, not an accuracy."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 4))
    y = X @ np.array([1.0, -0.5, 2.0, 0.0]) + 3.0 + rng.normal(scale=0.3, size=300)
    text = b"".join(
        f"{t:.6g} ".encode() + " ".join(f"{j + 1}:{v:.6g}" for j, v in enumerate(row)).encode() + b"\n"
        for row, t in zip(X, y)
    )
    with service.client() as http:
        dataset = upload(http, text, name="linear-targets").json()
        body = {"dataset_id": dataset["id"], "solver": "dcd", "params": {"loss": "epsilon_insensitive", "C": 10}}
        job = wait_job(http, http.post("/v1/jobs", json=body).json()["id"])
        model_id = job["model_id"]
        report = http.post(f"/v1/models/{model_id}/evaluate", json={"dataset_id": dataset["id"]}).json()
        answer = http.post(f"/v1/models/{model_id}/predict", json={"instances": X[:20].tolist()}).json()
    assert report["r2"] > 0.9
    page, refused = open_dashboard(browser, service)
    row = page.text_content(f"#datasets tr[data-id='{dataset['id']}']")
    assert "values" in row and "300 distinct" in row, row  # a range of values, not 300 label counts
    page.click(f"#datasets tr[data-id='{dataset['id']}'] button")  # its train form says so too
    page.wait_for_selector("#train-panel:not([hidden]) #train-param-C")
    assert "real-valued labels: values" in page.text_content("#train-dataset-info")
    open_model(page, model_id)
    assert "classes" not in page.text_content(f"#jobs tr[data-id='{job['id']}']")  # one problem, not one per target
    page.select_option("#evaluate-dataset", dataset["id"])
    page.click("#evaluate-run")
    page.wait_for_selector("#evaluate-result #predicted-vs-true")
    metric = lambda key: page.text_content(f"#evaluate-metrics dd[data-metric={key}]")  # noqa: E731
    for key in ("mse", "mae", "r2"):
        assert float(metric(key)) == pytest.approx(report[key], rel=1e-3)
    assert page.query_selector("#evaluate-metrics dd[data-metric=accuracy]") is None
    assert len(page.query_selector_all("#scatter-points circle")) == 300
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard-regression.png"), full_page=True)

    page.fill("#predict-rows", rows_of(text, 20))
    page.click("#predict-run")
    page.wait_for_selector("#predict-result:not([hidden]) tbody tr")
    mse = float(np.mean((np.array(answer["labels"]) - y[:20]) ** 2))
    note = page.text_content("#predict-note")
    shown = float(note.split("mean squared error ")[1].split()[0])  # 4 significant digits, as num() writes them
    assert shown == pytest.approx(mse, rel=1e-3), note
    heads = page.eval_on_selector_all("#predict-result thead th", "cells => cells.map(c => c.textContent)")
    assert heads == ["row", "predicted", "true value"]
    assert refused == [] and page.errors == [] and page.failed == [], (refused, page.errors, page.failed)
    page.close()


def test_a_one_class_model_is_evaluated_with_a_score_histogram(service, browser):
    """A one-class model (smo's svm_type one_class) evaluated on rows labelled 1 / -1: the outlier fraction as the
    API answers it, and a histogram of the scores whose bars add up to the rows, stacked by label."""
    rng = np.random.default_rng(7)
    inliers = rng.normal(size=(200, 2))
    X = np.vstack([inliers, rng.normal(size=(40, 2)) * 0.5 + 4.0])
    y = np.concatenate([np.ones(200), -np.ones(40)])
    text = to_svmlight(*_csr_of(X), y)
    with service.client() as http:
        training = upload(http, to_svmlight(*_csr_of(inliers), np.ones(200)), name="inliers").json()
        mixed = upload(http, text, name="inliers-and-outliers").json()
        body = {"dataset_id": training["id"], "solver": "smo", "params": {"svm_type": "one_class", "nu": 0.05}}
        model_id = wait_job(http, http.post("/v1/jobs", json=body).json()["id"])["model_id"]
        report = http.post(f"/v1/models/{model_id}/evaluate", json={"dataset_id": mixed["id"]}).json()
    histogram = report["score_histogram"]
    assert sum(histogram["counts"]) == 240 and sum(histogram["counts_outliers"]) == 40
    assert report["outlier_fraction"] > 0.1  # the far cluster is left out
    page, refused = open_dashboard(browser, service)
    open_model(page, model_id)
    page.select_option("#evaluate-dataset", mixed["id"])
    page.click("#evaluate-run")
    page.wait_for_selector("#evaluate-result #score-histogram")
    shown = float(page.text_content("#evaluate-metrics dd[data-metric=outlier_fraction]"))
    assert shown == pytest.approx(report["outlier_fraction"], abs=1e-4)
    heights = page.eval_on_selector_all("#histogram-bars rect.outliers", "bars => bars.length")
    assert heights == sum(1 for count in histogram["counts_outliers"] if count > 0)
    page.screenshot(path=str(ARTIFACTS / "dashboard-one-class.png"), full_page=True)
    assert refused == [] and page.errors == [] and page.failed == [], (refused, page.errors, page.failed)
    page.close()


def _csr_of(X):
    import scipy.sparse as sp

    matrix = sp.csr_matrix(X)
    return matrix.indptr, matrix.indices, matrix.data
