"""What a training runs under, handed from the job to the solver call as one value (``FitContext``).

A job's training is told six things besides its solver, parameters and data: when it must stop (the
deadline), how to learn that it was canceled, where its progress and trace points go, how many
processes it may use, how much memory its data may take, and, for a training split over nodes, how to
reach them. They travel together, from ``worker.runtime.jobs`` through a model, a search, its
refit and the calibration, down to the ``SolverControl`` each solve call gets; a function that changes
one of them (a search's share of the deadline, the processes a refit may use) makes a new context with
``dataclasses.replace``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.schemas.solver_params import SolverParams
from worker.runtime.subtasks import available_cores

if TYPE_CHECKING:
    from worker.runtime.cluster import DaskNodes as SplitNodes
    from worker.runtime.progress import TraceSink


def never_canceled() -> bool:
    """The cancel poll of a training nobody can cancel (a direct call, a test)."""
    return False


@dataclass(frozen=True)
class FitContext:
    """A training's deadline, cancel poll, progress sink, processes and data memory (see the module docstring)."""

    sink: TraceSink | None = None
    """Where progress (phase, fraction) and trace points go, the job's hash in Redis (``progress_sink``); None for
    work that reports none (a distributed search's setting, calibration folds)."""
    deadline: float | None = None
    """``time.monotonic()`` at which the training stops and returns what it has; None: no deadline."""
    cancel_requested: Callable[[], bool] = never_canceled
    """Polled by the solvers and between subtasks: True once the job was asked to stop."""
    n_processes: int | None = None
    """Processes the training may use; None: the params' ``n_processes``, else every core the job may use."""
    data_memory: int | None = None
    """Bytes the data may take in this training's memory (``worker.runtime.memory_budget``), shared by its
    processes; past them, the solvers that stream read the data from its files in passes. None: no limit."""
    open_nodes: Callable[..., SplitNodes] | None = None
    """The job's data set on the nodes of a split training (``params.distributed``): called with the bias feature's
    value (and ``exclude``, the nodes lost so far, when it regroups), it returns the nodes' handle (a context manager:
    ``worker.runtime.cluster.DaskNodes``); None: one machine."""

    def processes(self, params: SolverParams) -> int:
        """The processes this training uses (``n_processes``, resolved)."""
        return self.n_processes or params.n_processes or available_cores()

    def progress_sink(self) -> TraceSink:
        """The sink of a training that reports its progress (a model, a search, a refit); an error without one."""
        if self.sink is None:
            raise ValueError("this training reports its progress: its FitContext needs a sink")
        return self.sink
