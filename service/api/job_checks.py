"""Checks of a training request that need the data set and the settings (the schema alone cannot know them)."""

from __future__ import annotations

from core.config import Settings
from core.labels import MAX_COUNTED_LABELS, MAX_REAL_CLASSES
from core.schemas.enums import Task
from core.scoring.quality import c_out_of_range
from core.solvers import KERNEL_SOLVERS, spec_of
from core.storage.documents import DatasetRecord
from service.api.errors import unprocessable


def check_request_against_dataset(body, dataset: DatasetRecord, settings: Settings) -> None:
    """Labels, class weights, objective-specific needs (qid, two ranks) and the time ceiling."""
    labels = dataset.labels
    spec = spec_of(body.solver)
    if body.params.probability and not spec.calibration:
        raise unprocessable(
            f"params.probability: solver {spec.name} does not calibrate probabilities",
            ["body", "params", "probability"],
        )
    if body.params.search is not None and not spec.search:
        raise unprocessable(f"params.search: solver {spec.name} does not run searches", ["body", "params", "search"])
    objective = body.params.task  # the request's `objective` (cpa), which the code calls a model's task
    if objective == Task.one_class and dataset.n_samples < 2:
        raise unprocessable(
            f"data set {dataset.id} has 1 row; a one-class SVM needs at least 2", ["body", "dataset_id"]
        )
    if dataset.labelled is False and objective != Task.one_class:
        raise unprocessable(
            f"data set {dataset.id} was uploaded without labels (labels=none): it trains a one-class SVM (solver smo, "
            f'"svm_type": "one_class"), not `{objective.value}`; upload it with its labels for that',
            ["body", "dataset_id"],
        )
    if objective in (Task.regression, Task.one_class):
        check_no_classes(body)
    else:
        check_class_labels(body, dataset)
        check_nu_feasible(body, dataset)
    class_weight = getattr(body.params, "class_weight", None) or {}
    for label in class_weight:
        if label not in labels:
            raise unprocessable(
                f"params.class_weight: label {label!r} is not in the data set (its labels: {', '.join(labels)})",
                ["body", "params", "class_weight", label],
            )
    if objective == Task.ranking and not dataset.has_qid:
        raise unprocessable(
            f"params.objective: `ranking` compares rows within a query, but data set {dataset.id} has no qid",
            ["body", "params", "objective"],
        )
    if objective != Task.classification and body.params.probability:
        raise unprocessable(
            f"params.probability: class probabilities apply to classification; objective `{objective}` only scores or ranks",
            ["body", "params", "probability"],
        )
    if objective == Task.roc_area and len(labels) != 2:
        raise unprocessable(
            f"params.objective: `roc_area` needs exactly two labels; data set {dataset.id} has {len(labels)}",
            ["body", "params", "objective"],
        )
    check_search(body, dataset)
    check_distributed(body, dataset, settings)
    if dataset.max_row_norm_sq is not None:
        found = c_out_of_range(
            body.params.model_dump(mode="json", by_alias=True), dataset.n_samples, dataset.max_row_norm_sq
        )
        if found is not None:
            raise unprocessable(found[1], ["body", *found[0]], code="parameter_out_of_range")
    max_seconds = body.params.max_seconds
    if max_seconds is not None and max_seconds > settings.max_seconds_ceiling:
        raise unprocessable(
            f"params.max_seconds: {max_seconds} exceeds this server's ceiling of {settings.max_seconds_ceiling} seconds "
            "(HINGE_MAX_SECONDS_CEILING)",
            ["body", "params", "max_seconds"],
        )


REGRESSION_HINT = "regression is dcd with loss: epsilon_insensitive (or squared_epsilon_insensitive)"


def check_class_labels(body, dataset: DatasetRecord) -> None:
    """Classification and the pairwise objectives need labels that are classes (or ranks): at least two, and not
    real-valued targets (which a regression fits): more than ``MAX_REAL_CLASSES`` distinct values not all integers,
    or too many to count."""
    labels, targets = dataset.labels, dataset.targets or {}
    if not labels or (targets.get("integral") is False and len(labels) > MAX_REAL_CLASSES):
        distinct = targets.get("n_distinct")
        how_many = (
            f"{distinct} distinct values, not all integers"
            if distinct is not None
            else f"more than {MAX_COUNTED_LABELS} distinct values"
        )
        raise unprocessable(
            f"data set {dataset.id} has real-valued labels ({how_many} from {targets.get('min')} to "
            f"{targets.get('max')}): `{body.params.task.value}` needs class labels; {REGRESSION_HINT}",
            ["body", "dataset_id"],
        )
    if len(labels) < 2:
        raise unprocessable(
            f"data set {dataset.id} has a single label ({next(iter(labels))}); training needs at least two",
            ["body", "dataset_id"],
        )


def check_nu_feasible(body, dataset: DatasetRecord) -> None:
    """smo's nu_svc has a solution only for nu <= 2 min(n_+, n_-) / n in each of its binary problems (LIBSVM refuses
    the same as "specified nu is infeasible"): the largest nu is named."""
    params = body.params
    if getattr(params, "svm_type", None) != "nu_svc":
        return
    counts = [int(count) for count in dataset.labels.values()]
    total = sum(counts)
    if len(counts) == 2:
        problems, scheme = [(counts[0], counts[1])], ""
    elif params.multiclass == "ovo":
        problems = [(a, b) for k, a in enumerate(counts) for b in counts[k + 1 :]]
        scheme = " over the rows of each pair of labels (multiclass ovo)"
    else:
        problems, scheme = [(count, total - count) for count in counts], " in each one-vs-rest problem"
    largest = min(2.0 * min(a, b) / (a + b) for a, b in problems)
    if params.nu > largest:
        raise unprocessable(
            f"params.nu: {params.nu} is infeasible for nu_svc on data set {dataset.id}: nu must be at most 2 min(rows "
            f"of a class) / rows{scheme}, here {largest:.6g}",
            ["body", "params", "nu"],
        )


def check_no_classes(body) -> None:
    """A regression fits every label as a real target, a one-class SVM ignores the labels: no classes to weigh, no
    class probabilities."""
    what = "a regression (its labels are real-valued targets)"
    if body.params.task == Task.one_class:
        what = "a one-class SVM (it trains on the rows alone, whatever their labels)"
    if getattr(body.params, "class_weight", None):
        raise unprocessable(
            f"params.class_weight: there are no classes to weigh in {what}", ["body", "params", "class_weight"]
        )
    if body.params.probability:
        raise unprocessable(
            f"params.probability: class probabilities apply to classification, not to {what}",
            ["body", "params", "probability"],
        )


def check_distributed(body, dataset: DatasetRecord, settings: Settings) -> None:
    """A training split over nodes (``params.distributed``) needs a cluster, shards to hand out, and one model."""
    if getattr(body.params, "distributed", None) is None:
        return
    where = ["body", "params", "distributed"]
    if not settings.dask_scheduler:
        raise unprocessable(
            "params.distributed: this deployment has no Dask cluster to split trainings over (HINGE_DASK_SCHEDULER is "
            "not set); train on one worker (distributed: null)",
            where,
        )
    if not dataset.shards:
        raise unprocessable(
            f"params.distributed: data set {dataset.id} is stored in Redis, not as shards in the object store; "
            "`hinge store migrate` moves it",
            where,
        )
    if body.params.task != Task.classification:
        raise unprocessable(
            f"params.distributed: a split training is a classifier; objective `{body.params.task}` trains on one "
            "machine (distributed: null)",
            ["body", "params", "objective"],
        )
    for name, active in (
        ("search", body.params.search is not None),
        ("probability", bool(body.params.probability)),
        ("multiclass", getattr(body.params, "multiclass", None) == "ovo" and len(dataset.labels) > 2),
    ):
        if active:
            raise unprocessable(
                f"params.distributed: a split training fits one model (one-vs-rest over its labels, or Crammer and "
                f"Singer's one problem); it does not run with {name}",
                ["body", "params", name],
            )


METRICS_BY_TASK = {
    "classification": ("accuracy", "roc_auc", "f1", "neg_log_loss"),
    "ordinal": ("accuracy", "pairwise_accuracy"),
    "roc_area": ("roc_auc", "pairwise_accuracy"),
    "ranking": ("pairwise_accuracy",),
    "regression": ("r2", "neg_mean_squared_error"),
    "one_class": ("f1",),
}


def check_search(body, dataset: DatasetRecord) -> None:
    """A search's grid and metric must fit the solver and the task, and its folds the data set.

    Folds are stratified by label (``worker.training.folds``), so every held-out fold holds a row of each label
    only when each label has at least ``cv_folds`` rows: that is checked. Ranking folds are whole
    queries, and the data set's record does not count its queries: there only ``cv_folds <= n_samples``
    is checked here.
    """
    search = body.params.search
    if search is None:
        return
    kernel = getattr(body.params, "kernel", None)
    if search.gamma is not None and kernel is not None and kernel.type == "precomputed":
        raise unprocessable(
            "params.search.gamma: a precomputed kernel has no gamma; search C", ["body", "params", "search", "gamma"]
        )
    if search.gamma is not None and body.solver not in KERNEL_SOLVERS:
        raise unprocessable(
            f"params.search.gamma: solver {body.solver} has no kernel; gamma applies to {', '.join(KERNEL_SOLVERS)}",
            ["body", "params", "search", "gamma"],
        )
    params = body.params
    nu_form = getattr(params, "svm_type", None) in ("nu_svc", "nu_svr", "one_class") or params.task == Task.one_class
    epsilon_form = getattr(params, "svm_type", None) == "epsilon_svr" or getattr(params, "loss", None) in (
        "epsilon_insensitive",
        "squared_epsilon_insensitive",
    )
    for name, applies, which in (
        ("nu", nu_form, "the nu formulations (smo's nu_svc, nu_svr, one_class; dcd's one_class)"),
        ("epsilon", epsilon_form, "the epsilon-SVRs (smo's epsilon_svr; dcd's epsilon-insensitive losses)"),
    ):
        if getattr(search, name) is None:
            continue
        if not applies:
            raise unprocessable(
                f"params.search.{name}: this job has no {name}; a grid over {name} applies to {which}",
                ["body", "params", "search", name],
            )
    task = body.params.task
    allowed = METRICS_BY_TASK[task]
    if search.metric == "neg_log_loss" and getattr(body.params, "loss", None) != "logistic":
        raise unprocessable(
            "params.search.metric: neg_log_loss scores probabilities, which only dcd's logistic regression has "
            '(params.loss: "logistic"); use accuracy, roc_auc or f1',
            ["body", "params", "search", "metric"],
        )
    if search.metric is not None and search.metric not in allowed:
        raise unprocessable(
            f"params.search.metric: {search.metric} does not apply to {task}; use one of {', '.join(allowed)}",
            ["body", "params", "search", "metric"],
        )
    if search.cv_folds > dataset.n_samples:
        raise unprocessable(
            f"params.search.cv_folds: {search.cv_folds} folds for {dataset.n_samples} rows",
            ["body", "params", "search", "cv_folds"],
        )
    if task == Task.one_class and search.C is not None:
        raise unprocessable(
            "params.search.C: a one-class SVM has no C (its box is [0, 1]); search its kernel's gamma",
            ["body", "params", "search", "C"],
        )
    if getattr(body.params, "svm_type", None) == "nu_svc" and search.C is not None:
        raise unprocessable(
            "params.search.C: nu_svc has no C (nu takes its place); search its kernel's gamma",
            ["body", "params", "search", "C"],
        )
    if task == Task.one_class and not set(dataset.labels) <= {"-1", "1"}:
        raise unprocessable(
            "params.search: a one-class search scores its folds by the F1 of the outliers, which needs labels -1 "
            f"(outlier) and 1 (inlier); data set {dataset.id} has {', '.join(list(dataset.labels)[:5])}",
            ["body", "params", "search"],
        )
    if task not in (Task.ranking, Task.regression, Task.one_class):  # not stratified by class
        label, count = min(dataset.labels.items(), key=lambda item: item[1])
        if count < search.cv_folds:
            remedy = f"use cv_folds <= {count}" if count >= 2 else "a search needs at least 2 rows of every label"
            raise unprocessable(
                f"params.search.cv_folds: {search.cv_folds} folds stratified by label need at least {search.cv_folds} "
                f"rows of each label, but label {label} has {count} in data set {dataset.id} ({remedy})",
                ["body", "params", "search", "cv_folds"],
            )


def stored_params(body) -> dict:
    """The parameters as stored with the job and shown back: defaults filled in, JSON names (`lambda`)."""
    return body.params.model_dump(mode="json", by_alias=True)
