"""The dashboard and the API docs in a real headless Chromium, offline: no request leaves the service.

A job runs while the page is open: the test waits for its convergence plot to grow from the event
stream, opens a model chosen by a search (table, picture, export formats), saves a screenshot to
tests/artifacts/dashboard.png, and loads /docs and /redoc with every outside request refused.
"""

from __future__ import annotations

from tests.browser import ARTIFACTS, offline_page
from tests.helpers import sparse_problem, to_svmlight, upload, wait_job


def test_dashboard_follows_a_running_job_and_shows_models(service, browser):
    with service.client() as http:
        dataset = upload(
            http, to_svmlight(*sparse_problem(3000, 200, 10, seed=41, random_labels=True)), name="busy"
        ).json()
        small = upload(http, to_svmlight(*sparse_problem(600, 20, 6, seed=42)), name="small").json()
        search = http.post(
            "/v1/jobs",
            json={
                "dataset_id": small["id"],
                "solver": "dcd",
                "params": {"search": {"C": [0.01, 0.1, 1.0, 10.0], "cv_folds": 3}},
            },
        ).json()
        search_model = wait_job(http, search["id"])["model_id"]
        params = {"C": 1000.0, "tol": 1e-12, "max_iter": 10_000_000, "shrinking": False, "max_seconds": 12}
        running = http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd", "params": params}).json()
        wait_job(http, running["id"], statuses=("running",), timeout=60)

        page, refused = offline_page(browser, service.base_url)
        answers: list[tuple[int, str]] = []
        page.on("response", lambda response: answers.append((response.status, response.url)))
        page.goto(service.base_url + "/")  # redirects to /ui/
        assert page.url.endswith("/ui/")
        page.wait_for_selector(f"#jobs tr[data-id='{running['id']}']")
        page.click(f"#jobs tr[data-id='{running['id']}']")
        # the plot grows from the event stream while the job runs
        page.wait_for_function(
            "document.querySelectorAll('#plot polyline#primal-0').length === 1 && "
            "Number(document.getElementById('plot-count').textContent) > 20",
            timeout=30_000,
        )
        first = int(page.text_content("#plot-count"))
        page.wait_for_function(f"Number(document.getElementById('plot-count').textContent) > {first}", timeout=30_000)
        assert http.get(f"/v1/jobs/{running['id']}").json()["status"] == "running"
        assert page.is_visible("#plot polyline#gap-0") and page.is_visible("#plot polyline#dual-0")
        assert "training" in page.text_content("#job-progress-text")
        bar_width = page.eval_on_selector("#job-bar", "e => e.style.width")
        assert bar_width.endswith("%")

        # a model chosen by a search: its metadata, search table and picture, the export formats (read from the
        # OpenAPI document: the page probes no route)
        page.click(f"#models tr[data-id='{search_model}']")
        page.wait_for_selector("#model-search table.search-table tbody tr")
        assert len(page.query_selector_all("#model-search table.search-table tbody tr")) == 4
        page.wait_for_selector("#model-search img")
        assert "stop_reason" in page.text_content("#model-meta")
        page.wait_for_selector("#export-buttons button")
        formats = [button.text_content() for button in page.query_selector_all("#export-buttons button")]
        assert formats == ["json", "liblinear", "libsvm", "onnx"]
        assert page.is_visible("#datasets tbody tr")

        # scroll back to the live job for the picture
        page.click(f"#jobs tr[data-id='{running['id']}']")
        page.wait_for_function("Number(document.getElementById('plot-count').textContent) > 20")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
        assert (ARTIFACTS / "dashboard.png").stat().st_size > 20_000
        assert refused == [], refused
        assert page.errors == [], page.errors
        assert [answer for answer in answers if answer[0] >= 400] == []  # no probe, no 404 in the console
        assert not any("mdl_probe" in url for _, url in answers)
        http.post(f"/v1/jobs/{running['id']}/cancel")
        page.close()


def test_docs_and_redoc_work_offline(service, browser):
    page, refused = offline_page(browser, service.base_url)
    page.goto(service.base_url + "/docs")
    page.wait_for_selector(".swagger-ui .info .title", timeout=30_000)
    assert "Hinge" in page.text_content(".swagger-ui .info .title")
    page.wait_for_selector("text=Follow a job as server-sent events")
    page.goto(service.base_url + "/redoc")
    page.wait_for_selector("h1", timeout=30_000)
    assert "Hinge" in page.text_content("h1")
    page.wait_for_selector("text=Follow a job as server-sent events", state="attached")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "redoc.png"))
    assert refused == [], refused
    page.close()


def test_dashboard_asks_for_the_api_key_and_uses_it(strict_api, browser):  # noqa: F811
    page, refused = offline_page(browser, strict_api)
    page.goto(strict_api + "/ui/")
    page.wait_for_selector("#notice:not([hidden])")
    assert "API key" in page.text_content("#notice")
    page.fill("#api-key", "key-alice")
    page.click("#key-form button")
    page.wait_for_selector("#notice[hidden]", state="attached")
    page.wait_for_function("document.getElementById('datasets-count').textContent !== ''")
    assert page.text_content("#datasets-count").strip().isdigit()
    assert refused == []
    page.close()
