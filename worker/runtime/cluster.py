"""A training split over the nodes of a Dask cluster (``HINGE_DASK_SCHEDULER``): the nodes' side and the driver's.

Why Dask (issue 34, measured on this kind of machine, 2 nodes over a veth at about 1.1 GB/s): Ray's gloo
allreduce is 4x faster per iteration (26 against 100 ms at d = 10^6) but needs torch (+870 MB on every node)
and 1.1 GB idle a node, 7-9 s to start its head; Dask starts in 3.5-4.3 s, takes 450 MB idle, is pure Python
(the same image as the workers) and has a Kubernetes operator. A split OCAS iteration sends w_t to every node
and gets back one vector of d + 1 numbers from each (its part of the cut) plus a few numbers: what Dask's
own scatter / submit / gather does.

* ``NodeRows`` is a Dask actor, one per node (a ``dask worker`` started with Hinge's code and settings, so
  that it reaches the object store as the workers do): it fetches its consecutive shards of the data set
  from the object store (``core.storage.shards.load_rows``), holds them in memory across the iterations and
  the binary problems, and answers the driver through a ``RowPart`` for the current problem (a ``ClassRowPart`` for
  Crammer and Singer's one problem over every label).
* ``DaskNodes`` is the driver's handle (in the job's process): it connects to the scheduler, places one actor
  on each of ``n_nodes`` workers with its share of the shards, calls them all at once (``call_all``), and
  closes the connection, which releases the actors and their memory.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection

import numpy as np

from core.config import get_settings
from core.storage import shards
from core.storage.objects import object_store
from worker.solvers.class_row_part import ClassRowPart
from worker.solvers.distributed_ocas import CallStopped, NodeLost
from worker.solvers.row_part import RowPart

log = logging.getLogger("hinge.cluster")

CONNECT_TIMEOUT_S = 30.0
"""How long the driver waits for the scheduler and for the actors to load their rows (per 10^8 non-zeros: the
load itself can take longer; see ``DaskNodes``)."""


WAIT_SLICE_S = 0.2
"""A call's answer is waited for in slices this long, the job's cancel and deadline looked at between them."""
HUNG_FACTOR = 10.0
"""A call unanswered for HINGE_NODE_TIMEOUT plus this many times the slowest answer so far counts its node lost."""


class ClusterError(Exception):
    """The cluster cannot run this training: no scheduler, too few nodes, a node lost."""


class NodeCodeError(Exception):
    """A node's own code raised during a split training (the node answered: it is not lost). The job fails with
    the node's exception (``solver_error``), as a training on one machine would, instead of trying the other nodes
    with the same code."""


def is_node_gone(exc: BaseException) -> bool:
    """Whether a failed call to a node's actor means the node is gone (its connection closed or refused, its worker
    or its actor lost, the call cancelled with it) rather than an exception of the node's own code."""
    from concurrent.futures import CancelledError

    from distributed.scheduler import KilledWorker

    if isinstance(exc, OSError | TimeoutError | CancelledError | KilledWorker):  # CommClosedError is an OSError
        return True
    return isinstance(exc, RuntimeError) and str(exc).startswith("Worker holding Actor was lost")


class NodeRows:
    """A node's rows of a data set, and the ``RowPart`` of the binary problem being trained (a Dask actor)."""

    def __init__(self, arrays: dict, entries: list[dict], n_features: int, B: float, n_threads: int) -> None:
        started = time.perf_counter()
        store = object_store(get_settings())
        self.arrays = shards.load_rows(store, arrays, [shards.ShardEntry.from_document(e) for e in entries])
        self.n_features = int(n_features)
        self.B = float(B)
        self.n_threads = int(n_threads)
        self.part: RowPart | ClassRowPart | None = None
        self.load_seconds = time.perf_counter() - started

    def describe(self) -> tuple[int, int, float, float]:
        """(rows, non-zeros, seconds it took to load them, 0.0 seconds of this call)."""
        return int(self.arrays["indptr"].shape[0] - 1), int(self.arrays["indptr"][-1]), self.load_seconds, 0.0

    def begin(self, positive: float | None) -> tuple[float]:
        """Start a binary problem: the rows whose label is ``positive`` are +1, the others -1 (None: the labels are
        already -1 and +1)."""
        started = time.perf_counter()
        y = self.arrays["y"]
        signs = y if positive is None else np.where(y == positive, 1.0, -1.0)
        a = self.arrays
        self.part = RowPart(a["indptr"], a["indices"], a["data"], signs, self.n_features, self.B, self.n_threads)
        return (time.perf_counter() - started,)

    def begin_classes(self, labels) -> tuple[float]:
        """Start a Crammer-Singer problem over every label: each row's class is its label's index in ``labels``
        (sorted, the job's)."""
        started = time.perf_counter()
        a = self.arrays
        classes = np.searchsorted(np.asarray(labels), a["y"])
        self.part = ClassRowPart(a["indptr"], a["indices"], a["data"], classes, len(labels), self.n_features, self.B)
        return (time.perf_counter() - started,)

    def _part(self) -> RowPart | ClassRowPart:
        if self.part is None:
            raise RuntimeError("begin() first")
        return self.part

    def start(self, w_b):
        return self._part().start(w_b)

    def step_outputs(self, w_t, C, n_pivots):
        return self._part().step_outputs(w_t, C, n_pivots)

    def line_count(self, lo, hi, n_pivots):
        return self._part().line_count(lo, hi, n_pivots)

    def line_evaluate(self, lo, hi, pivots):
        return self._part().line_evaluate(lo, hi, pivots)

    def line_gather(self, lo, hi):
        return self._part().line_gather(lo, hi)

    def step_update(self, k, lam):
        return self._part().step_update(k, lam)

    def step_cpa(self, w_t):
        part = self._part()
        assert isinstance(part, RowPart)
        return part.step_cpa(w_t)

    def loss(self, w):
        return self._part().loss(w)


class DaskNodes:
    """The driver's handle on ``n_nodes`` nodes holding a data set's rows (module docstring); a context manager."""

    def __init__(
        self,
        address: str,
        n_nodes: int,
        record,
        n_features: int,
        B: float,
        n_threads: int = 0,
        *,
        exclude: Collection[str] = (),
        stop=None,
    ) -> None:
        """``exclude``: workers (addresses) of nodes lost earlier in the job; when given (a regroup), the nodes left
        are used even if they are fewer than ``n_nodes`` (a ``ClusterError`` when none is left). ``stop``: a
        callable giving the job's stop reason (a cancel, its deadline) or None, looked at every ``WAIT_SLICE_S``
        while the nodes load their shards (``CallStopped`` then)."""
        from distributed import Client

        if record.shards is None:
            raise ClusterError("a split training needs the data set's shards in the object store (hinge store migrate)")
        self.node_timeout = float(get_settings().node_timeout)
        self.slowest_call = 0.0
        self.interrupt = None
        """The solver's ``control.check`` (set by ``distributed_ocas._Timed``): a stop seen while a call waits."""
        self.lost: str | None = None
        """The worker (address) of the node whose call failed or went unanswered, once ``NodeLost`` was raised."""
        self.stop = stop
        try:
            self.client = Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        except OSError as exc:
            raise ClusterError(
                f"the Dask scheduler at {address} (HINGE_DASK_SCHEDULER) does not answer: {exc}"
            ) from exc
        try:
            workers = sorted(set(self.client.scheduler_info()["workers"]) - set(exclude))
            if exclude and workers:
                n_nodes = min(n_nodes, len(workers))
            if len(workers) < n_nodes or not workers:
                left = " left (the others were lost)" if exclude else ""
                raise ClusterError(
                    f"the job asks for {n_nodes} nodes and the cluster at {address} has {len(workers)}{left}"
                )
            entries = shards.shard_entries(record.shards)
            groups = shards.shard_groups(entries, n_nodes)
            futures = [
                self.client.submit(
                    NodeRows,
                    record.arrays,
                    [entry.to_document() for entry in group],
                    n_features,
                    B,
                    n_threads or 1,
                    actor=True,
                    workers=[worker],
                    allow_other_workers=False,
                    pure=False,
                )
                for worker, group in zip(workers, groups, strict=False)
            ]
            self._futures = futures
            self.actors = [self._placed(future) for future in futures]
            self.workers = workers[: len(self.actors)]
            self.n_nodes = len(self.actors)
            self.data_bytes = sum(int(np.dtype(record.arrays[n]["dtype"]).itemsize) for n in ("indices", "data")) * int(
                record.nnz
            )
            self.layout = [tuple(answer[:3]) for answer in self.call_all("describe")]
            self.n_rows = sum(int(rows) for rows, _, _ in self.layout)
        except BaseException:
            self.client.close()
            raise

    def _placed(self, future):
        """An actor once its node has loaded its shards, waited for in slices between which ``stop`` is looked at."""
        while True:
            try:
                return future.result(timeout=WAIT_SLICE_S)
            except TimeoutError:
                reason = self.stop() if self.stop is not None else None
                if reason is not None:
                    raise CallStopped(reason) from None

    def call_all(self, method: str, *args) -> list:
        """Every node's answer to ``method(*args)``, the calls made at once."""
        started = time.monotonic()
        limit = self.node_timeout + HUNG_FACTOR * self.slowest_call
        answers = []
        try:
            with self.client.as_current():  # the actors' handles reach their nodes through this client
                pending = [getattr(actor, method)(*args) for actor in self.actors]
                for node, future in enumerate(pending):
                    self.lost = self.workers[node]  # named lost if this answer does not come
                    answers.append(self._answer(future, method, started + limit))
                self.lost = None
        except CallStopped:
            self.lost = None
            raise
        except NodeLost:
            raise
        except Exception as exc:
            if not is_node_gone(exc):  # the node answered, with its own code's exception: a bug, not a lost node
                failed, self.lost = self.lost, None
                raise NodeCodeError(
                    f"a node of the split training ({failed}) raised {type(exc).__name__} during {method}: {exc}"
                ) from exc
            raise NodeLost(
                f"a node of the split training ({self.lost}) failed during {method}: {type(exc).__name__}: {exc}",
                node=self.lost,
            ) from exc
        self.slowest_call = max(self.slowest_call, time.monotonic() - started)
        return answers

    def _answer(self, future, method: str, give_up_at: float):
        """A call's answer, waited for in slices of WAIT_SLICE_S: between them a stop of the job (``interrupt``,
        the solver's ``control.check``) ends the wait (CallStopped), and past ``give_up_at`` the node is lost."""
        while True:
            now = time.monotonic()
            try:
                return future.result(timeout=max(0.001, min(WAIT_SLICE_S, give_up_at - now)))
            except TimeoutError:
                pass
            reason = self.interrupt() if self.interrupt is not None else None
            if reason is not None:
                raise CallStopped(reason)
            if time.monotonic() >= give_up_at:  # no answer: a hung node, or one cut off with its connection open
                raise NodeLost(
                    f"a node of the split training ({self.lost}) did not answer {method} within HINGE_NODE_TIMEOUT "
                    f"{self.node_timeout:g} s + {HUNG_FACTOR:g} x its slowest answer so far ({self.slowest_call:.2f} s)",
                    node=self.lost,
                )

    def begin(self, positive: float | None) -> None:
        """Start the next binary problem on every node."""
        self.call_all("begin", positive)

    def begin_classes(self, labels) -> None:
        """Start a Crammer-Singer problem over ``labels`` (sorted) on every node."""
        self.call_all("begin_classes", [float(label) for label in labels])

    def close(self) -> None:
        """Release the actors (and their rows) and the connection."""
        self._futures = []
        self.actors = []
        self.client.close()

    def __enter__(self) -> DaskNodes:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
