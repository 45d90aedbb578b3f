"""Process helpers that the service and the workers share: standard library only, cheap to import.

``die_with_parent`` is what keeps a killed supervisor, API or worker from leaving orphans (the
kernel signals the child when its parent dies); ``in_own_process_group`` keeps a child of `hinge serve` out of the
terminal's signals; ``lower_priority`` puts batch work (parsing, training) behind the API's
requests; ``usable_cores`` is the one count of the cores a process may
run on (``hinge serve`` divides it among its workers, a worker caps it with ``worker_cores``).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Ask Linux to send ``sig`` to this process when its parent dies (elsewhere: nothing).

    SIGTERM by default (the process stops in order); a forked work horse asks for SIGKILL, and
    the embedded redis-server for SIGINT (its other shutdown signal: append-only file flushed).
    """
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)
        except OSError:
            pass


def in_own_process_group() -> None:
    """Run in a child before it execs (``preexec_fn``): it leads a process group of its own, in its parent's
    session, out of reach of the terminal's signals to the parent's group; and it ignores SIGTTOU, so that its
    log lines to the terminal never stop it (a background process group writing to a terminal set to ``tostop``
    is stopped; an ignored SIGTTOU stays ignored across exec and the write goes through)."""
    os.setpgid(0, 0)
    signal.signal(signal.SIGTTOU, signal.SIG_IGN)


def lower_priority(nice: int) -> None:
    """Add ``nice`` to this process's niceness (batch work: parsing, training), so that the API's
    requests go first when they compete for the cores; on an otherwise idle machine it changes nothing."""
    if nice > 0:
        try:
            os.nice(nice)
        except OSError:
            pass


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity; the machine's count where there is none)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


_M_MMAP_THRESHOLD = -3


def map_large_blocks(threshold: int = 8 << 20) -> None:
    """Have glibc map every block of ``threshold`` bytes or more by itself, so that freeing it gives it back at once
    (elsewhere: nothing). For a process that allocates large buffers from several threads and is then idle for a
    long time (an upload's parser): glibc's own threshold rises to 32 MB as large blocks are freed, and the blocks
    kept in its per-thread arenas are not all returned even by ``malloc_trim`` (a 10^8-non-zero upload left 90 MB
    more this way). Not for a solver that allocates and frees large arrays every iteration."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").mallopt(_M_MMAP_THRESHOLD, int(threshold))
        except (OSError, AttributeError):
            pass


def release_freed_memory() -> None:
    """Give the memory this process freed back to the machine (glibc's ``malloc_trim``; elsewhere: nothing).

    glibc keeps freed blocks below its mmap threshold, which rises to 32 MB as large arrays are freed, so a
    parser process that held a few hundred MB of buffers during an upload keeps them mapped afterwards unless
    asked (281 MiB of the ingest process at 10^8 non-zeros, when the workers train next)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass
