"""The search's table: a held-out fold scored as a stored model would score it, the rows of (fold, setting)
cells gathered per setting with the best setting, and what a search that could not rank its settings says
(``search_warnings``, ``incomplete_message``, ``SearchIncomplete``)."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np

from core.schemas.enums import Task, WarningCode
from core.schemas.search_params import SearchParams
from core.scoring import metrics
from core.scoring.metrics import predicted_ranks
from core.scoring.models import one_vs_one_votes
from core.scoring.probability import logistic_probabilities, probability_scores
from core.scoring.quality import warning
from worker.solvers.common import StopReason

STOP_SEVERITY = (
    StopReason.CONVERGED.value,
    StopReason.DEADLINE.value,
    StopReason.CANCELED.value,
    StopReason.MAX_ITER.value,
)
"""Order in which a setting's worst stop reason is chosen (the last one present wins)."""


def default_metric(task: str) -> str:
    """accuracy for classification, r2 for regression, pairwise_accuracy otherwise."""
    if task == Task.regression:
        return "r2"
    if task == Task.one_class:
        return "f1"
    return "accuracy" if task == Task.classification else "pairwise_accuracy"


def score_decisions(
    metric: str,
    task: str,
    labels: np.ndarray | None,
    decisions: np.ndarray,
    y: np.ndarray,
    qid: np.ndarray | None = None,
    ranking: dict | None = None,
    one_vs_one: bool = False,
) -> float:
    """The metric of held-out decision values (rows x problems) as a stored model would score them.

    Two labels: one column, positive means ``labels[1]``; more: one column per label, argmax, or with
    ``one_vs_one`` one column per pair of labels, the vote (and the one-vs-rest shaped scores for roc_auc).
    Pairwise tasks: one column of scores (ordinal models also predict ranks through ``ranking``'s thresholds).
    nan when the metric is undefined on these rows (e.g. one class only).
    """
    value = None
    if task == Task.classification:
        assert labels is not None, "classification scores need the labels"
        if one_vs_one and decisions.shape[1] > 1:
            votes, scores = one_vs_one_votes(decisions, labels.size)
            predicted = labels[np.argmax(votes, axis=1)]
        elif decisions.shape[1] == 1:
            scores = decisions[:, 0]
            predicted = np.where(scores > 0, labels[1], labels[0])
        else:
            scores = decisions
            predicted = labels[np.argmax(decisions, axis=1)]
        if metric == "accuracy":
            value = float(np.mean(predicted == y))
        elif metric == "neg_log_loss":  # logistic regression: the scores are log-odds (check_search)
            value = -probability_scores(logistic_probabilities(decisions), y, labels)["log_loss"]
        elif metric == "pairwise_accuracy":
            value = metrics.pairwise_accuracy(scores, y, None)
        else:
            value = metrics.classification_report(y, predicted, scores, labels)[metric]
    elif task == Task.one_class:  # F1 of the outliers (-1): the rows the model leaves out that are labelled so
        predicted = np.where(decisions[:, 0] > 0.0, 1.0, -1.0)
        value = metrics.classification_report(-y, -predicted, -decisions[:, 0], np.array([-1.0, 1.0]))["f1"]
    elif task == Task.regression:  # the decision values are the predictions
        report = metrics.regression_report(decisions[:, 0], y)
        value = -report["mse"] if metric == "neg_mean_squared_error" else report["r2"]
    else:
        scores = decisions[:, 0]
        if metric == "pairwise_accuracy":
            value = metrics.pairwise_accuracy(scores, y, qid if task == Task.ranking else None)
        elif metric == "roc_auc":
            value = metrics.roc_auc(scores, y == y.max())
        elif metric == "accuracy" and ranking is not None and ranking.get("thresholds") is not None:
            predicted = predicted_ranks(scores, np.asarray(ranking["ranks"]), np.asarray(ranking["thresholds"]))
            value = float(np.mean(predicted == y))
    return float("nan") if value is None else float(value)


class SearchIncomplete(Exception):
    """No setting of a search could be evaluated (``table``): the job fails with code ``search_incomplete``."""


def _setting_name(setting: dict) -> str:
    return f"C {setting['C']:g}" + (f", gamma {setting['gamma']:g}" if setting.get("gamma") is not None else "")


def _why_unsettled(settings: list[dict]) -> str:
    reasons: Counter = Counter()
    for setting in settings:
        reasons.update({k: v for k, v in setting["stop_reasons"].items() if k != StopReason.CONVERGED.value})
    words = {"deadline": "the deadline (max_seconds)", "max_iter": "max_iter", "canceled": "a cancel"}
    return ", ".join(f"{n} by {words.get(reason, reason)}" for reason, n in reasons.most_common())


def search_warnings(results_table: dict) -> list[dict]:
    """A ``search_incomplete`` warning when some settings could not be evaluated (their fits not settled)."""
    settings = results_table["settings"]
    missing = [setting for setting in settings if not setting.get("evaluated", True)]
    if not missing:
        return []
    shown = "; ".join(_setting_name(setting) for setting in missing[:8]) + ("; ..." if len(missing) > 8 else "")
    return [
        warning(
            WarningCode.search_incomplete,
            f"{len(missing)} of {len(settings)} settings could not be evaluated ({shown}): fits stopped before their "
            f"stopping rule held ({_why_unsettled(missing)}); the best of the "
            f"{len(settings) - len(missing)} evaluated settings was refit. Give the search more time (max_seconds) or "
            "iterations to rank them all",
        )
    ]


def incomplete_message(results_table: dict, max_seconds: float | None, n_processes: int) -> str:
    """Why a search has no setting to refit, and what it would have needed (the deadline, or max_iter)."""
    settings = results_table["settings"]
    if not settings:
        return "the search scored no setting before it stopped: give it more time (max_seconds)"
    fits = int(sum(setting["folds_done"] for setting in settings))
    unsettled = int(sum(setting.get("unsettled_fits", 0) for setting in settings))
    if not unsettled:
        return f"no setting could be scored with metric {results_table['metric']!r} (every fold lacked what it needs)"
    seconds = float(sum(setting["seconds"] for setting in settings))
    message = (
        f"no setting of the search could be evaluated: {unsettled} of its {fits} cross-validation fits (fold x "
        f"setting) stopped before their stopping rule held ({_why_unsettled(settings)}), and a setting is ranked only "
        "when the fits of all its folds settled"
    )
    if max_seconds is not None and "deadline" in _why_unsettled(settings):
        per_process = seconds / max(1, n_processes)
        message += (
            f". The fits ran {seconds:.1f} s of solver time on {n_processes} process(es) under max_seconds "
            f"{max_seconds:g} and were still unfinished: the search needs more than that; try max_seconds "
            f"{max(4 * max_seconds, 4 * per_process):.0f} or more, fewer settings, or fewer folds (search.cv_folds)"
        )
    else:
        message += ". Raise max_iter, or check that the grid's C values are not far larger than the data needs"
    return message


RULED_OUT_STANDARD_ERRORS = 2.0
"""The grid's largest C is ruled out when its predecessor trails the best by more than this many standard errors."""


def largest_c_ruled_out(rows: list[dict], cv_folds: int) -> bool:
    """Whether the fold scores known so far make the grid's largest C unlikely to win.

    Among the settings scored on every fold, the largest C is compared with the best: it is ruled out when
    its mean trails the best's by more than ``RULED_OUT_STANDARD_ERRORS`` standard errors of the paired
    per-fold differences (scores past their peak, and clearly so). While the scores still rise, or are flat
    within their noise, the largest C may yet win. Rows are the table's (one per fold and setting)."""
    by_C: dict[float, dict[int, float]] = {}
    for row in rows:
        by_C.setdefault(row["C"], {})[row["fold"]] = row["score"]
    complete = {
        C: scores
        for C, scores in by_C.items()
        if len(scores) == cv_folds and all(math.isfinite(score) for score in scores.values())
    }
    if len(complete) < 2:
        return False
    means = {C: float(np.mean(list(scores.values()))) for C, scores in complete.items()}
    best = max(means, key=lambda C: (means[C], -C))
    largest = max(complete)
    if largest == best:
        return False
    folds = sorted(complete[best])
    differences = np.array([complete[largest][f] - complete[best][f] for f in folds])
    standard_error = float(differences.std(ddof=1)) / math.sqrt(differences.size)
    return float(differences.mean()) < -RULED_OUT_STANDARD_ERRORS * standard_error


def worst_stop_reason(reasons: Counter | dict) -> str:
    """The most telling stop reason among fits: max_iter over canceled over deadline over converged."""
    present = [reason for reason in STOP_SEVERITY if reasons.get(reason)]
    return present[-1] if present else StopReason.CONVERGED.value


class FitCount:
    """The fraction of a search's cross-validation done: (fold, setting) cells scored over all cells."""

    def __init__(self, total: int):
        self.total = max(1, total)
        self.done = 0

    def fraction(self) -> float:
        """Cells scored over all."""
        return min(1.0, self.done / self.total)


def table(rows: list[dict], metric: str, search: SearchParams, warm: bool) -> dict:
    """Per setting over the folds scored so far: mean, standard deviation, cost, stop reasons; and the best setting.

    Only *evaluated* settings are ranked: scored on every fold, each of their fits settled (its stopping rule
    held, or its certified gap is at most ``core.scoring.quality.SETTLED_GAP_REL``). A fit cut by the deadline
    after one iteration scores whatever its first step gave, and such scores once chose the "best" setting of a
    search that ran out of time; ``unsettled_fits`` counts the fits that were not settled.

    ``iterations_saved`` is measured (``search.measure_cold``): fold 0's cold fits minus its warm fits;
    otherwise it is null and ``iterations_saved_basis`` says so.
    """
    settings = []
    key = lambda row: (row["C"], row["gamma"] if row["gamma"] is not None else -1.0)  # noqa: E731
    for (C, gamma), grouped in itertools.groupby(sorted(rows, key=key), key=key):
        group = sorted(grouped, key=lambda row: row["fold"])
        scores = np.array([row["score"] for row in group], dtype=np.float64)
        finite = scores[np.isfinite(scores)]
        reasons: Counter = Counter()
        for row in group:
            reasons.update(row.get("stop_reasons") or {row["stop_reason"]: 1})
        measured = [row for row in group if row.get("cold_n_iter") is not None]
        unsettled = int(sum(row.get("unsettled", 0) for row in group))
        settings.append(
            {
                "C": C,
                "gamma": None if gamma == -1.0 else gamma,
                "mean": float(finite.mean()) if finite.size else None,
                "std": float(finite.std()) if finite.size else None,
                "fold_scores": [None if not math.isfinite(s) else float(s) for s in scores],
                "folds_done": len(group),
                "n_iter": int(sum(row["n_iter"] for row in group)),
                "seconds": float(sum(row["seconds"] for row in group)),
                "warm_started_fits": int(sum(row["warm_started"] for row in group)),
                "stop_reason": worst_stop_reason(reasons),
                "stop_reasons": dict(sorted(reasons.items())),
                "unsettled_fits": unsettled,
                "evaluated": bool(finite.size) and len(group) == search.cv_folds and unsettled == 0,
                "cold_n_iter": int(sum(row["cold_n_iter"] for row in measured)) if measured else None,
                "iterations_saved": int(sum(row["cold_n_iter"] - row["n_iter"] for row in measured))
                if measured
                else None,
                "iterations_saved_basis": (
                    f"measured: fold {', '.join(str(r['fold']) for r in measured)} refitted cold"
                    if measured
                    else "not measured (set search.measure_cold)"
                ),
            }
        )
    complete = [s for s in settings if s["evaluated"]]
    best = None
    if complete:
        best_row = min(complete, key=lambda s: (-s["mean"], s["C"], s["gamma"] if s["gamma"] is not None else 0.0))
        best = {"C": best_row["C"], "gamma": best_row["gamma"], "mean": best_row["mean"], "std": best_row["std"]}
    return {"metric": metric, "cv_folds": search.cv_folds, "warm_start": warm, "settings": settings, "best": best}
