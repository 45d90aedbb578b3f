"""How much memory a job's data may take (``data_memory_bytes``), and the refusal of a solver that needs more.

A job may use ``job_memory`` bytes (``HINGE_JOB_MEMORY``; 0: the limit of the worker's cgroup, v1 or v2, else the
machine's memory). Of what is left of it once the worker process itself is counted (its resident set:
Python, numba's code), DATA_SHARE is the training's: the data set's indices and values, the solver's vectors
(about 16 numbers a row and 8 a feature) and its cuts; the rest is slack for temporaries and the model. A data
set that does not fit in it:

* trains out of core with the solvers whose spec ``streams`` (ocas, cpa): they keep the first rows in memory
  and read the others from the worker cache's files on every pass (``worker.solvers.streamed_data``), giving
  pinned rows back to disk as their cuts grow;
* fails the job with `data_exceeds_memory` with the others (dcd, smo, sampled_cuts), which visit the rows in
  random order and would read the disk at every step: the message names the sizes and what to do.

Several workers on one machine each count the whole ``job_memory``: give each its share
(``HINGE_JOB_MEMORY`` = the machine's memory / workers) when they may train large data sets at once.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from core.solvers import SOLVERS, spec_of
from worker.solvers.streamed_data import csr_bytes

DATA_SHARE = 0.7
"""The share of the job's memory left after the worker process that its training may take (data, vectors, cuts)."""
CGROUP_ROOT = Path("/sys/fs/cgroup")


class DataExceedsMemory(Exception):
    """A solver that needs its data in memory got a data set larger than the job's memory allows."""


def _cgroup_limit() -> int | None:
    """The smallest memory limit of this process's cgroup and its parents (v2 ``memory.max``, v1
    ``memory.limit_in_bytes``); None without one."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    limits = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2
            base, name = CGROUP_ROOT, "memory.max"
        elif "memory" in controllers.split(","):
            base, name = CGROUP_ROOT / "memory", "memory.limit_in_bytes"
        else:
            continue
        folder = base / path.lstrip("/")
        while True:
            try:
                text = (folder / name).read_text().strip()
                if text != "max":
                    limits.append(int(text))
            except (OSError, ValueError):
                pass
            if folder == base or folder.parent == folder:
                break
            folder = folder.parent
    return min(limits) if limits else None


def machine_memory_bytes() -> int:
    """The machine's physical memory."""
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def job_memory_bytes(configured: int) -> int:
    """What a job may use: ``configured`` (``job_memory``) when set, else the cgroup's limit or the machine's memory."""
    if configured:
        return int(configured)
    physical = machine_memory_bytes()
    limit = _cgroup_limit()
    return min(physical, limit) if limit else physical


def _resident_bytes() -> int:
    """This process's resident set."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def data_memory_bytes(configured: int) -> int:
    """The bytes a job's training may take in memory: its data, the solver's vectors and cuts (module docstring)."""
    return max(0, int(DATA_SHARE * (job_memory_bytes(configured) - _resident_bytes())))


def check_fits(solver: str, arrays: dict, data_memory: int) -> None:
    """Raise ``DataExceedsMemory`` when ``solver`` needs its data in memory and the data takes more than
    ``data_memory`` bytes."""
    needed = csr_bytes(np.asarray(arrays["indices"]), np.asarray(arrays["data"]))
    if needed <= data_memory or spec_of(solver).streams:
        return
    streaming = " or ".join(name for name, spec in SOLVERS.items() if spec.streams)
    raise DataExceedsMemory(
        f"{solver} needs the data set in memory: its indices and values take {needed} bytes and this job's training "
        f"may hold {data_memory} (70% of what the job's memory, HINGE_JOB_MEMORY, leaves after the worker process); "
        "train it with "
        f"{streaming}, which read data larger than memory from disk in passes, or give the workers more memory"
    )
