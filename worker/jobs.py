"""The queue's entry point under the name versions before ``worker.runtime`` wrote into queued jobs.

RQ stores a job's function as a dotted name; a job enqueued by an older API (``worker.jobs.train``) and
picked up by this worker, during a rolling upgrade, must still run. New jobs name
``worker.runtime.jobs.train`` (``core.queueing.TRAIN_FUNCTION``).
"""

from worker.runtime.jobs import train

__all__ = ["train"]
