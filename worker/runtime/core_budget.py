"""The machine's cores, shared through Redis by the jobs its workers run: a lone job uses every core, jobs
side by side share them, and at no moment do their processes x threads exceed the cores.

Why
---
``hinge serve`` starts 2 workers on a 2-core machine. Giving each worker ``cores // workers`` (1) kept
workers x threads <= cores, but a lone search, one-vs-rest or smo job then ran on one core while the
other worker idled, and ``n_processes: 2`` was cut to 1 without a word. Here the cores are a budget that
running jobs lease.

The budget
----------
The machine is the kernel's boot id (``/proc/sys/kernel/random/boot_id``), the same in every container
of one host, so compose's workers share their host's cores. Its size is the cores a worker may run on
(``core.processes.usable_cores``). Redis holds who holds how many (``keys.core_leases``) and who waits
(``keys.core_waiters``), each entry with its job; one Lua script reads and changes both atomically, and
drops the entries of workers whose heartbeat key is gone (a worker killed while it held cores) and of
jobs no longer running (a work horse killed while its job held cores: the worker lives on, idle).

* **Lease.** A job asks, when it starts, for the cores it can use (``wanted_cores``: 1 for one dcd
  problem, and for one-vs-rest or probability on a few hundred rows; every core for a search, one-vs-rest,
  probability or a problem whose solver has threads; at most its ``n_processes`` and ``HINGE_WORKER_CORES``
  when set) and gets the free ones. With none free it
  waits (progress phase ``waiting for a core``), asking again every ``WAIT_POLL_S``, and is listed as
  waiting.
* **Follow.** While it runs it asks again (``CoreLease.allowed``, at most every ``REFRESH_S``, or at
  once when it has just stopped using cores it held): between tasks (the subtask runner starts tasks
  only within its share) and between passes over the data (``SolverControl.check`` sets numba's
  threads; smo's row team follows between slices). When a job waits, a job's share is the cores over
  the jobs (at least one); else it grows into the free cores. It keeps holding what its running tasks
  use until they end, so a waiting job gets a core only once it is really free.
* **Release** when it ends, however it ends.

A running task (one fit of a search, one class of one-vs-rest) keeps its process to its end, so a job
that arrives waits at most that long for its core.

The job record's ``cores`` says what the job got and why (``JobCores`` in the API).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import redis

from core.config import get_settings
from core.processes import usable_cores
from core.solvers import spec_of
from core.storage import keys

log = logging.getLogger("hinge.worker")

WAIT_POLL_S = 0.05
"""How often a job waiting for a core asks again."""
REFRESH_S = 0.2
"""How often a running job asks again for its share (more often only to give cores back)."""

_LEASE = """
local me, mode = ARGV[1], ARGV[2]
local want, in_use, total = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local worker_prefix, job, job_prefix = ARGV[6], ARGV[7], ARGV[8]
if mode == 'release' then
  redis.call('HDEL', KEYS[1], me)
  redis.call('HDEL', KEYS[2], me)
  return {0, 0, 0}
end
-- an entry is "cores:job id"; it counts while its worker beats and its job runs there (no job id: a
-- distributed search's setting, whose job names no worker)
local function others(key)
  local entries = redis.call('HGETALL', key)
  local count, sum = 0, 0
  for i = 1, #entries, 2 do
    local worker = entries[i]
    if worker ~= me then
      local cores, owner = string.match(entries[i + 1], '^(%d+):(.*)$')
      local live = cores ~= nil and redis.call('EXISTS', worker_prefix .. worker) == 1
      if live and owner ~= '' then
        local job = redis.call('HMGET', job_prefix .. owner, 'status', 'worker')
        live = job[1] == 'running' and job[2] == worker
      end
      if live then
        count = count + 1
        sum = sum + tonumber(cores)
      else
        redis.call('HDEL', key, worker)
      end
    end
  end
  return count, sum
end
local holders, held = others(KEYS[1])
local waiting = others(KEYS[2])
local free = total - held
local share
if mode == 'lease' then
  share = math.min(want, free)
  if share < 1 then
    redis.call('HSET', KEYS[2], me, want .. ':' .. job)
    redis.call('HDEL', KEYS[1], me)
    return {0, held, waiting}
  end
  redis.call('HDEL', KEYS[2], me)
elseif waiting > 0 then
  share = math.max(1, math.min(want, free, math.floor(total / (holders + waiting + 1))))
else
  share = math.max(1, math.min(want, free))
end
redis.call('HSET', KEYS[1], me, math.max(share, in_use) .. ':' .. job)
return {share, held, waiting}
"""


def machine_id() -> str:
    """The kernel's boot id: one budget per host, whichever container a worker runs in."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip()
    except OSError:  # pragma: no cover - not Linux
        import socket

        return socket.gethostname()


SMALL_JOB_ROWS = 1_000
"""A job on fewer rows than this and fewer than ``SMALL_JOB_NONZEROS`` stored values runs on one core (unless its
``n_processes`` asks for more, or it is a search): side by side, each of its problems or calibration folds would
start a process (a fork of the worker, with its memory: several ms of its CPU, then the result sent back), more
than such a problem takes to fit (30-row blobs and iris's 3 classes fitted alternately: the worker's CPU per fit
55.7 -> 32.1 ms). A search still runs its fits side by side: it has many to share the processes' cost."""
SMALL_JOB_NONZEROS = 20_000
"""See ``SMALL_JOB_ROWS``."""


def wanted_cores(
    solver: str, params, n_problems: int, machine_cores: int, *, rows: int | None = None, nonzeros: int | None = None
) -> tuple[int, str]:
    """The cores a job can use, and why: its parallel pieces, capped by ``n_processes`` and ``HINGE_WORKER_CORES``;
    one core for data too small to gain from processes (``rows`` and ``nonzeros``, when given: ``SMALL_JOB_ROWS``)."""
    small = rows is not None and nonzeros is not None and rows < SMALL_JOB_ROWS and nonzeros < SMALL_JOB_NONZEROS
    if params.search is not None:
        useful, why = machine_cores, "a search runs its fits side by side"
    elif small and params.n_processes is None and (n_problems > 1 or params.probability):
        useful, why = 1, f"{rows} rows, too few to gain from a process per problem"
    elif n_problems > 1:
        useful, why = min(machine_cores, n_problems), f"{n_problems} binary problems side by side"
    elif params.probability:
        useful, why = machine_cores, "probability calibration fits its folds side by side"
    elif spec_of(solver).threads is not None:
        useful, why = machine_cores, f"{solver} splits its passes over the data over threads"
    else:
        useful, why = 1, f"one binary problem: {solver} runs on one core"
    if params.n_processes is not None and params.n_processes < useful:
        useful, why = params.n_processes, f"n_processes {params.n_processes} requested"
    cap = get_settings().worker_cores
    if cap is not None and cap < useful:
        useful, why = cap, f"HINGE_WORKER_CORES is {cap}"
    return max(1, useful), why


@dataclass(frozen=True)
class Share:
    """One answer of the budget: the cores a job may use now, those other jobs hold, the jobs waiting."""

    cores: int
    held_by_others: int
    waiting: int


class CoreLease:
    """One job's lease on its machine's cores (see the module docstring)."""

    def __init__(
        self,
        client: redis.Redis,
        worker: str,
        wanted: int,
        why: str,
        *,
        job_id: str = "",
        machine_cores: int | None = None,
        machine: str | None = None,
        on_change: Callable[[dict], None] | None = None,
    ) -> None:
        self.client = client
        self.worker = worker
        self.job_id = job_id
        self.machine_cores = machine_cores or usable_cores()
        self.wanted = max(1, min(wanted, self.machine_cores))
        self.why = why if wanted <= self.machine_cores else f"{why}; the machine has {self.machine_cores}"
        machine = machine or machine_id()
        self.keys = [keys.core_leases(machine), keys.core_waiters(machine)]
        self.on_change = on_change
        self.share = 0
        self.holding = 0  # what Redis has us hold: max(share, cores still in use)
        self._next_look = 0.0
        self._script = client.register_script(_LEASE)

    def _call(self, mode: str, in_use: int) -> Share:
        answer = self._script(
            keys=self.keys,
            args=[
                self.worker,
                mode,
                self.wanted,
                in_use,
                self.machine_cores,
                keys.worker_alive(""),
                self.job_id,
                keys.job(""),
            ],
        )
        return Share(*(int(value) for value in answer))

    def acquire(self, should_stop: Callable[[], bool], on_wait: Callable[[Share], None]) -> bool:
        """Lease the free cores (at least one), waiting while none is free; False when ``should_stop`` said stop."""
        waited = False
        while True:
            share = self._call("lease", 0)
            if share.cores >= 1:
                self._changed(share, share.cores)
                return True
            if not waited:
                on_wait(share)
                waited = True
            if should_stop():
                self.release()
                return False
            time.sleep(WAIT_POLL_S)

    def allowed(self, in_use: int | None = None) -> int:
        """The cores the job may use now; ``in_use``: what it still uses (default: its share so far)."""
        in_use = self.share if in_use is None else in_use
        now = time.monotonic()
        giving_back = self.holding > max(self.share, in_use)
        if now >= self._next_look or giving_back:
            self._next_look = now + REFRESH_S
            try:
                share = self._call("refresh", in_use)
            except redis.exceptions.RedisError:  # Redis away: keep the share we have
                log.warning("the core budget could not be read; keeping %d core(s)", self.share)
                return self.share
            self._changed(share, max(share.cores, in_use))
        return self.share

    def release(self) -> None:
        """Give every core back (and leave the waiting list)."""
        try:
            self._call("release", 0)
        except redis.exceptions.RedisError:  # the entry goes when the worker's heartbeat key does
            log.warning("the core budget could not be released")
        self.share = self.holding = 0

    def _changed(self, share: Share, holding: int) -> None:
        self.holding = holding
        if share.cores == self.share:
            return
        self.share = share.cores
        if self.on_change is not None:
            self.on_change(self.describe(share))

    def describe(self, share: Share) -> dict:
        """The job record's ``cores``: what it may use now, what it wanted, the machine's cores, and why."""
        if share.cores >= self.wanted:
            reason = f"wanted {self.wanted} ({self.why}): free"
        elif share.waiting:
            reason = (
                f"wanted {self.wanted} ({self.why}); {share.waiting} other job(s) wait for a core, so the "
                f"{self.machine_cores} cores are shared"
            )
        else:
            reason = f"wanted {self.wanted} ({self.why}); other jobs hold {share.held_by_others}"
        return {"cores": share.cores, "wanted": self.wanted, "machine_cores": self.machine_cores, "reason": reason}


def release_worker(client: redis.Redis, worker: str, machine: str | None = None) -> None:
    """Drop whatever a worker holds or waits for (its work horse died with the lease)."""
    machine = machine or machine_id()
    with client.pipeline(transaction=False) as pipe:
        pipe.hdel(keys.core_leases(machine), worker)
        pipe.hdel(keys.core_waiters(machine), worker)
        pipe.execute()


_current: CoreLease | None = None


def current() -> CoreLease | None:
    """The lease of the job this process runs (None in subtask processes and outside jobs)."""
    return _current


def forget() -> None:
    """Drop the lease in a forked subtask process: the job's process follows it, not its children."""
    global _current
    _current = None


def follow() -> Callable[[int | None], int] | None:
    """What a solver in this process calls to follow the budget (``SolverControl``'s ``cores``), or None."""
    lease = _current
    return None if lease is None else lease.allowed


@contextlib.contextmanager
def leased(
    client: redis.Redis,
    jobs,
    job_id: str,
    worker: str,
    wanted: int,
    why: str,
    should_stop: Callable[[], bool],
    *,
    unit: bool = False,
) -> Iterator[bool]:
    """Run the block with the job's lease on its machine's cores: True once it has at least one (its record's
    ``cores`` follows the lease), False when ``should_stop`` said stop while it waited for a core (the block
    then must not train). Always True, without a lease, when ``HINGE_CORE_BUDGET`` is off.

    ``unit``: a setting of a distributed search (several run at once for one job, which names no worker):
    the lease is the worker's alone and the job's record does not follow it."""
    if not get_settings().core_budget:
        yield True
        return
    machine_cores = usable_cores()
    lease = CoreLease(
        client,
        worker,
        wanted,
        why,
        job_id="" if unit else job_id,
        machine_cores=machine_cores,
        on_change=None if unit else (lambda cores: jobs.update(job_id, cores=cores)),
    )

    def waiting(share: Share) -> None:
        log.info("every core is in use by other jobs: waiting for one")
        if not unit:
            jobs.update(job_id, progress={"phase": "waiting for a core", "fraction": 0.0})

    if not lease.acquire(should_stop, on_wait=waiting):
        yield False
        return
    with held(lease):
        yield True


@contextlib.contextmanager
def held(lease: CoreLease) -> Iterator[CoreLease]:
    """Make ``lease`` this process's for the block, then release it and restore numba's threads."""
    global _current
    import numba

    threads = numba.get_num_threads()
    _current = lease
    try:
        yield lease
    finally:
        _current = None
        lease.release()
        numba.set_num_threads(threads)
