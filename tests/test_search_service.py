"""Model selection through the service: a search job over HTTP, its validation, and a search spread over
the workers."""

from __future__ import annotations

import pytest

from tests.helpers import cancer_arrays, to_svmlight, upload, wait_job


def test_search_over_http(http):
    arrays, n_features = cancer_arrays()
    content = to_svmlight(arrays["indptr"], arrays["indices"], arrays["data"], arrays["y"])
    dataset = upload(http, content).json()
    body = {
        "dataset_id": dataset["id"],
        "solver": "dcd",
        "params": {"search": {"C": [0.01, 0.1, 1.0], "cv_folds": 3, "metric": "f1"}},
    }
    job = http.post("/v1/jobs", json=body).json()
    done = wait_job(http, job["id"], timeout=120)
    assert done["status"] == "succeeded", done
    results = done["search_results"]
    assert results["metric"] == "f1" and len(results["settings"]) == 3 and results["best"] is not None
    assert done["progress"]["subtasks_done"] == done["progress"]["subtasks_total"] >= 3
    model = http.get(f"/v1/models/{done['model_id']}").json()
    assert model["search_results"]["best"] == results["best"]
    # the best setting is the one with the highest mean score (ties: the smaller C), and the model is refit at it
    best_row = min(
        (row for row in results["settings"] if row["mean"] is not None), key=lambda row: (-row["mean"], row["C"])
    )
    assert results["best"]["C"] == best_row["C"]
    assert model["refit_params"] == {"C": best_row["C"], "gamma": None}

    kernel = {
        "dataset_id": dataset["id"],
        "solver": "smo",
        "params": {"kernel": {"type": "rbf"}, "search": {"C": [0.1, 1.0], "gamma": [0.01, 0.1], "cv_folds": 3}},
    }
    done = wait_job(http, http.post("/v1/jobs", json=kernel).json()["id"], timeout=300)
    assert done["status"] == "succeeded", done
    assert {(row["C"], row["gamma"]) for row in done["search_results"]["settings"]} == {
        (0.1, 0.01),
        (0.1, 0.1),
        (1.0, 0.01),
        (1.0, 0.1),
    }


def test_logistic_regression_searched_by_log_loss(http):
    """A search of dcd's logistic regression scored by neg_log_loss: each setting's score is minus the log-loss of
    its held-out probabilities, the same as scikit-learn's LogisticRegression(solver="liblinear") gives on the
    same folds."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import log_loss

    from worker.training.folds import make_folds

    arrays, n_features = cancer_arrays()
    content = to_svmlight(arrays["indptr"], arrays["indices"], arrays["data"], arrays["y"])
    dataset = upload(http, content).json()
    grid = [0.01, 1.0, 100.0]
    body = {
        "dataset_id": dataset["id"],
        "solver": "dcd",
        "params": {"loss": "logistic", "tol": 1e-6, "search": {"C": grid, "cv_folds": 3, "metric": "neg_log_loss"}},
    }
    done = wait_job(http, http.post("/v1/jobs", json=body).json()["id"], timeout=120)
    assert done["status"] == "succeeded", done
    results = done["search_results"]
    assert results["metric"] == "neg_log_loss"
    import scipy.sparse as sp

    X = sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]), shape=(arrays["y"].size, n_features))
    y = arrays["y"]
    folds = make_folds(y, None, 3, 0)
    for row in results["settings"]:
        scores = []
        for fold in range(3):
            train, test = folds != fold, folds == fold
            model = LogisticRegression(solver="liblinear", C=row["C"], tol=1e-10, max_iter=10**5).fit(
                X[train], y[train]
            )
            scores.append(-log_loss(y[test], model.predict_proba(X[test])))
        assert row["mean"] == pytest.approx(sum(scores) / 3, abs=2e-3), row
    assert results["best"]["C"] == max(results["settings"], key=lambda row: row["mean"])["C"]


@pytest.mark.parametrize(
    "params,field",
    [
        ({"search": {"gamma": [0.1]}}, "gamma"),
        ({"search": {"metric": "pairwise_accuracy"}}, "metric"),
        ({"search": {"metric": "neg_log_loss"}}, "metric"),  # the hinge loss's scores are no log-odds
        ({"search": {"cv_folds": 1}}, "cv_folds"),
        ({"search": {"C": []}}, "C"),
        ({"search": {"C": [-1]}}, "C"),
    ],
)
def test_search_validation(http, params, field):
    dataset = upload(http, b"1 1:1\n-1 1:-1\n1 1:2\n-1 1:-2\n").json()
    response = http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd", "params": params})
    assert response.status_code == 422, response.text
    assert field in response.json()["error"]["message"]


def test_search_folds_must_hold_a_row_of_each_label(http):
    """Stratified folds: a label with fewer rows than cv_folds leaves a fold without it, refused up front."""
    dataset = upload(http, b"1 1:1\n-1 1:-1\n1 1:2\n-1 1:-2\n1 1:3\n1 1:4\n").json()
    body = {"dataset_id": dataset["id"], "solver": "dcd", "params": {"search": {"C": [0.1, 1.0], "cv_folds": 3}}}
    response = http.post("/v1/jobs", json=body)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert "label -1 has 2" in error["message"] and "cv_folds <= 2" in error["message"], error
    assert error["details"][0]["loc"] == ["body", "params", "search", "cv_folds"]
    body["params"]["search"]["cv_folds"] = 2
    assert http.post("/v1/jobs", json=body).status_code == 202


def test_distributed_search_spreads_over_the_workers(service, http):
    from tests.helpers import sparse_problem

    # from idle workers: a job an earlier test left running would keep one worker from taking any unit
    service.wait_workers_idle()
    problem = sparse_problem(3000, 200, 20, seed=21, noise=1.0)
    dataset = upload(http, to_svmlight(*problem)).json()
    grid = [0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0]
    body = {
        "dataset_id": dataset["id"],
        "solver": "dcd",
        "params": {"tol": 0.01, "search": {"C": grid, "cv_folds": 4, "distribute": True}},
    }
    job = http.post("/v1/jobs", json=body).json()
    done = wait_job(http, job["id"], timeout=300)
    assert done["status"] == "succeeded", done
    results = done["search_results"]
    assert results["distributed"] is True and len(results["settings"]) == len(grid)
    assert all(row["folds_done"] == 4 for row in results["settings"])
    assert done["progress"]["subtasks_done"] == done["progress"]["subtasks_total"] == 4, "one unit per fold"
    assert len(results["workers"]) == len(service.workers), results["workers"]
    assert [row["warm_started_fits"] for row in results["settings"]] == [0] + [4] * (len(grid) - 1)
    model = http.get(f"/v1/models/{done['model_id']}").json()
    assert model["refit_params"]["C"] == results["best"]["C"]

    in_process = dict(body, params=dict(body["params"], search=dict(body["params"]["search"], distribute=False)))
    local = wait_job(http, http.post("/v1/jobs", json=in_process).json()["id"], timeout=300)
    keys = ("C", "mean", "std", "fold_scores", "n_iter", "warm_started_fits", "stop_reasons")
    strip = lambda table: [{k: row[k] for k in keys} for row in table["settings"]]  # noqa: E731
    assert strip(local["search_results"]) == strip(results), "same folds, same warm paths, same table"
