"""A job's model arrays written to Redis while the job is still at work, then committed with the model.

Storing a large linear model is work for Redis more than for the job: sector.scale's 105 classes one-vs-rest
is 19.7 MB (46 MB of weights, ``core.storage.arrays``' non-zero encoding), which Redis receives, appends to its
append-only file and syncs before it answers: 60-80 ms a job, in which the job's cores waited. Once every
binary problem is fitted the weights are final, while the job still scores its training rows (in the subtask
processes, or in the job's process). ``ModelStaging.start`` writes them then, in a thread of the job's
process (the staged chunks have the staging time-to-live, see ``core.storage.records``); ``worker.runtime.runs.
record_outcome`` claims them and commits the model's metadata with them, as ``RecordStore.create`` would.

Arrays are claimed only when the outcome's model arrays are the very ones staged (the same array objects):
any other outcome (a model assembled otherwise, no model, a job handed back or failed) has what was staged
removed by ``discard``, which the job calls in any case when it ends.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

import numpy as np

from core.storage.keys import new_id
from core.storage.records import RecordStore

log = logging.getLogger("hinge.worker")


class ModelStaging:
    """Write one model's arrays to Redis ahead of its record (see the module docstring); ``store`` is the model
    store, ``tenant`` the job's."""

    def __init__(self, store: RecordStore, tenant: str) -> None:
        self.store = store
        self.tenant = tenant
        self.model_id: str | None = None
        self._arrays: Mapping[str, np.ndarray] | None = None
        self._manifest: dict | None = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._claimed = False

    def start(self, model_arrays: Mapping[str, np.ndarray]) -> None:
        """Begin writing these arrays under a new model id, in a thread (only the first call of a job counts)."""
        if self._thread is not None:
            return
        self.model_id = new_id("mdl")
        self._arrays = model_arrays
        self._thread = threading.Thread(target=self._write, name="model-staging", daemon=True)
        self._thread.start()

    def _write(self) -> None:
        assert self.model_id is not None and self._arrays is not None
        try:
            self._manifest = self.store.stage(self.model_id, self.tenant, self._arrays)
        except BaseException as exc:  # raised again by ``claim`` in the job's thread
            self._error = exc

    def claim(self, model_arrays: Mapping[str, np.ndarray] | None) -> tuple[str, dict] | None:
        """(model id, manifest) of the staged arrays when ``model_arrays`` are those very arrays, once written
        (an error of the write, such as ``StorageFull``, is raised here); else None, and what was staged is
        removed."""
        if self._thread is None:
            return None
        staged = self._arrays or {}
        if (
            model_arrays is None
            or set(model_arrays) != set(staged)
            or any(model_arrays[name] is not staged[name] for name in staged)
        ):
            self.discard()
            return None
        self._thread.join()
        if self._error is not None:
            error, self._error, self._thread = self._error, None, None
            raise error
        assert self.model_id is not None and self._manifest is not None
        self._claimed = True
        return self.model_id, self._manifest

    def discard(self) -> None:
        """Remove what was staged and not claimed (waits for the write first); does nothing otherwise."""
        if self._thread is None or self._claimed:
            return
        self._thread.join()
        self._thread = None
        if self._manifest is not None and self.model_id is not None:
            try:
                self.store.discard_staged(self.model_id, self._manifest)
            except Exception:  # the chunks expire with their staging time-to-live anyway
                log.warning("could not remove the staged arrays of %s; they expire by themselves", self.model_id)
            self._manifest = None
