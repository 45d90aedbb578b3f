"""What the fits of a search work on and send back: a path of fits along the C grid (``FitPath``), a fit's
record (``FitRecord``), the folds' subsets a process builds once (``FoldCache``) and the warm state a fit hands
to the next (``warm_state``, ``restored``)."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from core.schemas.enums import Task
from core.scoring.kernel import KernelExpansion
from worker.runtime.subtasks import SharedRows
from worker.solvers.common import SolverResult
from worker.training.folds import subset
from worker.training.problems import binary_problems, one_vs_one_problems

FOLD_CACHE_BYTES = 256 << 20
"""A process keeps the fold subsets it built while they take at most this much (or one data set's size)."""
HELD_KERNEL_BYTES = 128 << 20
"""A process keeps the kernel values between a fold's held-out and training rows (per kernel setting) while they
take at most this much; a fold whose matrix alone is larger scores each fit with its own kernel expansion."""
ALL_ROWS = -1
"""The fold number of the paths on all the data (the refit's), which run with the search when its fits are tasks."""


@dataclass(frozen=True)
class FitPath:
    """The fits of one binary problem of one fold (and gamma) along the C grid, in order (see the module docstring)."""

    fold: int
    gamma_index: int
    gamma: float | str | None  # a number, `scale` or `auto` (resolved by the kernel), or None
    problem: int
    Cs: tuple
    warm: bool
    cold_reference: bool = False


@dataclass
class FitRecord:
    """What a fit sends back to the parent: its cost, why it stopped, its held-out decision values."""

    C: float
    n_iter: int
    seconds: float
    stop_reason: str
    warm_started: bool
    decisions: np.ndarray | None
    ranking: dict | None = None
    result: SolverResult | None = None  # the whole result, for the fits on all the data (the refit's path)
    score: float | None = None  # a cell of one problem, scored where the fit ran (then ``decisions`` is None)
    gap_rel: float | None = None  # its certified relative gap, when the solver certifies one


class FoldCache:
    """The training and held-out subsets of the folds a process has worked on (built on first use).

    Subsets are kept while they take at most ``max(FOLD_CACHE_BYTES, data set bytes)``, the least
    recently used dropped first, so small data sets build each fold once per process and large ones
    hold about one fold at a time.
    """

    def __init__(self, arrays: dict, n_features: int, folds: np.ndarray, task: str, one_vs_one: bool = False) -> None:
        self.arrays = arrays
        self.one_vs_one = one_vs_one
        self.n_features = n_features
        self.folds = folds
        self.task = task
        data_bytes = sum(np.asarray(arrays[k]).nbytes for k in ("indptr", "indices", "data"))
        self.budget = max(FOLD_CACHE_BYTES, data_bytes)
        self.entries: OrderedDict[int, tuple[dict, int]] = OrderedDict()
        self.held_kernels: OrderedDict[tuple, np.ndarray] = OrderedDict()

    def held_kernel(self, fold: int, kernel: dict) -> np.ndarray | None:
        """K(training row, held-out row) of the fold, dense (n_train, n_held), built on first use and kept while
        the matrices take at most ``HELD_KERNEL_BYTES``; None when this one alone would take more.

        The fits of a fold and gamma (the C grid; one-vs-rest classes or one-vs-one pairs: 45 on digits) then
        score the held-out rows from rows of one matrix instead of each recomputing its kernel rows: a fit's
        support vectors pick contiguous rows (digits: 0.03 ms a fit, 0.3 ms from the columns of the transpose)."""
        entry = self.get(fold)
        n_train = entry["train"]["indptr"].size - 1
        n_held = entry["held"]["indptr"].size - 1
        if n_train * n_held * 8 > HELD_KERNEL_BYTES:
            return None
        key = (fold, tuple(sorted(kernel.items())))
        if key in self.held_kernels:
            self.held_kernels.move_to_end(key)
            return self.held_kernels[key]
        while self.held_kernels and (len(self.held_kernels) + 1) * n_train * n_held * 8 > HELD_KERNEL_BYTES:
            self.held_kernels.popitem(last=False)
        train = entry["train"]
        expansion = KernelExpansion(
            train["indptr"], train["indices"], train["data"], np.zeros(n_train), 0.0, kernel, n_features=self.n_features
        )
        held = entry["held_matrix"]
        values = expansion.kernel_values(held.indptr, held.indices, held.data)  # (n_held, n_train)
        self.held_kernels[key] = np.ascontiguousarray(values.T)
        return self.held_kernels[key]

    def get(self, fold: int) -> dict:
        """The fold's train subset, held-out CSR matrix and rows, labels and binary problems (ALL_ROWS: the data).

        One-vs-one: ``members`` are the training rows of each pair (``pair_train`` its subsets, built on first use)."""
        if fold == ALL_ROWS:
            assert not self.one_vs_one, "the refit's path runs with the search for warm-started solvers only"
            entry: dict[str, Any] = {"train": self.arrays}
            entry["labels"], entry["problems"] = binary_problems(np.asarray(self.arrays["y"]))
            return entry
        if fold in self.entries:
            self.entries.move_to_end(fold)
            return self.entries[fold][0]
        train = subset(self.arrays, np.flatnonzero(self.folds != fold), self.n_features)
        held = subset(self.arrays, np.flatnonzero(self.folds == fold), self.n_features)
        entry = {
            "train": train,
            "held": held,
            "held_matrix": sp.csr_matrix(
                (held["data"], held["indices"], held["indptr"]), shape=(held["indptr"].size - 1, self.n_features)
            ),
        }
        if self.task == Task.classification and self.one_vs_one:
            entry["labels"], entry["members"], entry["problems"] = one_vs_one_problems(np.asarray(train["y"]))
            entry["pair_train"] = {}
        elif self.task == Task.classification:
            entry["labels"], entry["problems"] = binary_problems(np.asarray(train["y"]))
        size = sum(a.nbytes for part in (train, held) for a in part.values())
        while self.entries and sum(s for _, s in self.entries.values()) + size > self.budget:
            self.entries.popitem(last=False)
        self.entries[fold] = (entry, size)
        return entry


WARM_ROW = "warm_row"
"""Key of a warm state's ``extra`` whose dual variables wait in the search's shared rows (the path's row)."""


WARM_KEYS = ("alpha", "gradient", "gradient_bar", "n_sv", "n_bounded_sv")
"""What of a result's ``extra`` a warm start takes (``worker.training.registry.warm_start_arguments``)."""


def warm_state(result: SolverResult, rows: SharedRows | None = None, row: int = 0) -> SolverResult:
    """The part of a result a warm start needs (dcd: alpha; smo: alpha and its gradient; ocas: w and bias), small
    enough to pickle: with ``rows``, dcd's dual variables go into row ``row`` of the shared rows and the state only
    names it."""
    extra = {key: result.extra[key] for key in WARM_KEYS if result.extra.get(key) is not None}
    if (
        "alpha" in extra
        and "gradient" not in extra
        and rows is not None
        and rows.put(row, np.asarray(extra["alpha"], dtype=np.float64))
    ):
        extra = {key: value for key, value in extra.items() if key != "alpha"} | {WARM_ROW: row}
    return dataclasses.replace(result, trace=(), extra=extra)


def restored(state: SolverResult, rows: SharedRows | None) -> SolverResult:
    """A warm state with its dual variables back from the shared rows (as it was when ``warm_state`` made it)."""
    if WARM_ROW not in state.extra:
        return state
    assert rows is not None, "a warm state in shared rows needs the rows"
    extra = {key: value for key, value in state.extra.items() if key != WARM_ROW}
    return dataclasses.replace(state, extra=extra | {"alpha": rows.take(state.extra[WARM_ROW])})
