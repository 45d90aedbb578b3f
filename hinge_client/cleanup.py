"""Deleting what the estimators' fits left on the service once the estimators are gone.

A fitted estimator owns what its fit made: the model, the model's job and, with ``keep_data=True``, the
uploaded data set (``Leftovers``). They are deleted when the estimator is refitted, garbage-collected or
still alive when the interpreter exits, unless the fit had ``keep_model=True`` or the estimator was
pickled or deep-copied (the copy uses the model, so ``keep`` gives the ownership up).

The garbage collector can run a finalizer anywhere, even inside an HTTP call of the very client that
would send the DELETE, so the finalizer only puts the leftovers on a ``queue.SimpleQueue`` (whose ``put``
is safe there) and a daemon thread of this process sends the requests. At exit, every live estimator's
leftovers are queued and the exit handler waits for the deletions (at most ``EXIT_WAIT_S``).
"""

from __future__ import annotations

import atexit
import itertools
import os
import queue
import threading
import weakref
from dataclasses import dataclass

import httpx

from hinge_client.client import Client
from hinge_client.errors import HingeError

EXIT_WAIT_S = 10.0
"""How long the exit handler waits for the last deletions."""


@dataclass(frozen=True)
class Leftovers:
    """What one fit left on the service: its model, the model's job and, when kept, its data set."""

    client: Client
    model_id: str | None
    job_id: str | None
    dataset_id: str | None = None

    def delete(self) -> None:
        """Delete them; any already gone (or a service gone) is skipped."""
        for delete, ident in (
            (self.client.delete_model, self.model_id),  # the model first: deleting a job leaves its model
            (self.client.delete_job, self.job_id),
            (self.client.delete_dataset, self.dataset_id),
        ):
            if ident is not None:
                try:
                    delete(ident)
                except (HingeError, httpx.HTTPError):
                    pass


class Janitor:
    """Deletes the leftovers of estimators that went away, in a thread of its own."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._owned: dict[int, tuple[int, Leftovers]] = {}  # token -> (owning process, leftovers)
        self._tokens = itertools.count()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._exit_hook = False

    def own(self, owner: object, leftovers: Leftovers) -> weakref.finalize:
        """Delete ``leftovers`` when ``owner`` is garbage-collected; calling the result deletes them now."""
        self._start()
        token = next(self._tokens)
        self._owned[token] = (os.getpid(), leftovers)
        finalizer = weakref.finalize(owner, self._release, token)
        finalizer.atexit = False  # the exit handler releases what is still owned, then waits for the deletions
        return finalizer

    def keep(self, finalizer: weakref.finalize) -> None:
        """Give up the ownership: what ``finalizer`` would delete stays on the service."""
        detached = finalizer.detach()
        if detached is not None:
            self._owned.pop(detached[2][0], None)

    def _release(self, token: int) -> None:
        # run by the garbage collector: no lock, no I/O; dict.pop and SimpleQueue.put are safe here.
        # A forked child holds its parent's tokens: only the process that made the fit deletes.
        owned = self._owned.pop(token, None)
        if owned is not None and owned[0] == os.getpid():
            self._queue.put(owned[1])

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every deletion queued so far is done; False if ``timeout`` seconds passed first."""
        self._start()
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout)

    def _start(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():  # not started, or lost in a fork
                self._thread = threading.Thread(target=self._run, name="hinge-client-cleanup", daemon=True)
                self._thread.start()
            if not self._exit_hook:
                atexit.register(self._at_exit)
                self._exit_hook = True

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if isinstance(item, threading.Event):
                item.set()
                continue
            try:
                item.delete()
            except Exception:  # a failed deletion leaves a model that `hingectl ls` lists; the thread goes on
                pass

    def _at_exit(self) -> None:
        pid = os.getpid()
        for token, (owner_pid, _) in list(self._owned.items()):
            if owner_pid == pid:
                self._release(token)
        self.wait(EXIT_WAIT_S)


janitor = Janitor()
"""The process's one janitor (its thread starts with the first fit)."""


def wait_for_cleanup(timeout: float | None = 60.0) -> bool:
    """Wait until the deletions of models, jobs and data sets of estimators gone so far are done.

    Returns False if ``timeout`` seconds passed first. Deletions otherwise run in the background (and at
    exit, for at most ``EXIT_WAIT_S``).
    """
    return janitor.wait(timeout)
