"""Checks of a training request that need the data set and the settings (the schema alone cannot know them)."""

from __future__ import annotations

from service.api.errors import unprocessable
from service.config import Settings

PAIRWISE_OBJECTIVES = ("ordinal", "roc_area", "ranking")


def check_request_against_dataset(body, dataset: dict, settings: Settings) -> None:
    """Labels, class weights, objective-specific needs (qid, two ranks) and the time ceiling."""
    labels = dataset["labels"]
    if len(labels) < 2:
        raise unprocessable(
            f"data set {dataset['id']} has a single label ({next(iter(labels))}); training needs at least two",
            ["body", "dataset_id"],
        )
    class_weight = getattr(body.params, "class_weight", None) or {}
    for label in class_weight:
        if label not in labels:
            raise unprocessable(
                f"params.class_weight: label {label!r} is not in the data set (its labels: {', '.join(labels)})",
                ["body", "params", "class_weight", label],
            )
    objective = getattr(body.params, "objective", "classification")
    if objective == "ranking" and not dataset.get("has_qid"):
        raise unprocessable(
            f"params.objective: `ranking` compares rows within a query, but data set {dataset['id']} has no qid",
            ["body", "params", "objective"],
        )
    if objective == "roc_area" and len(labels) != 2:
        raise unprocessable(
            f"params.objective: `roc_area` needs exactly two labels; data set {dataset['id']} has {len(labels)}",
            ["body", "params", "objective"],
        )
    check_search(body, dataset)
    max_seconds = body.params.max_seconds
    if max_seconds is not None and max_seconds > settings.max_seconds_ceiling:
        raise unprocessable(
            f"params.max_seconds: {max_seconds} exceeds this server's ceiling of {settings.max_seconds_ceiling} seconds "
            "(HINGE_MAX_SECONDS_CEILING)",
            ["body", "params", "max_seconds"],
        )


KERNEL_SOLVERS = ("smo", "sampled_cuts")
METRICS_BY_TASK = {
    "classification": ("accuracy", "roc_auc", "f1"),
    "ordinal": ("accuracy", "pairwise_accuracy"),
    "roc_area": ("roc_auc", "pairwise_accuracy"),
    "ranking": ("pairwise_accuracy",),
}


def check_search(body, dataset: dict) -> None:
    """A search's grid and metric must fit the solver and the task; every fold must be able to hold a row of each label."""
    search = body.params.search
    if search is None:
        return
    if search.gamma is not None and body.solver not in KERNEL_SOLVERS:
        raise unprocessable(
            f"params.search.gamma: solver {body.solver} has no kernel; gamma applies to {', '.join(KERNEL_SOLVERS)}",
            ["body", "params", "search", "gamma"],
        )
    task = getattr(body.params, "objective", "classification")
    allowed = METRICS_BY_TASK[task]
    if search.metric is not None and search.metric not in allowed:
        raise unprocessable(
            f"params.search.metric: {search.metric} does not apply to {task}; use one of {', '.join(allowed)}",
            ["body", "params", "search", "metric"],
        )
    if search.cv_folds > dataset["n_samples"]:
        raise unprocessable(
            f"params.search.cv_folds: {search.cv_folds} folds for {dataset['n_samples']} rows",
            ["body", "params", "search", "cv_folds"],
        )


def stored_params(body) -> dict:
    """The parameters as stored with the job and shown back: defaults filled in, JSON names (`lambda`)."""
    return body.params.model_dump(mode="json", by_alias=True)
