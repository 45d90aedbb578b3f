"""`hinge serve`'s supervisor: starts embedded Redis, the API and the workers, and stops them in order.

Process arrangement. The supervisor is the only process of `hinge serve` left in the process group it
was started in. Redis, the API and every worker run in process groups of their own (``in_own_process_group``),
so a Ctrl-C (SIGINT to the terminal's foreground process group), the SIGHUP of a closing terminal and a
SIGTERM to the process group (``kill -- -PGID``) reach the supervisor alone, and it stops the others one
after the other. They stay in the supervisor's session: Linux's scheduler (autogroups, the default of most
distributions) shares the cores between sessions first, so children in sessions of their own would each
weigh as much as any other program the user runs (five or more shares against one for, say, the clients of
the service on the same machine), and the workers' lower priority (``HINGE_BATCH_NICE``) would order them
behind nothing; in one session the service weighs as one program, and within it the API's requests go
before the workers' training. Leaving them in the terminal's group would let
every process act on the signal at the same moment: Redis would exit first and the workers could
not store the jobs they were checkpointing (what happened before this design). Every child asks the
kernel for a signal when the supervisor dies (PR_SET_PDEATHSIG), so even a SIGKILL of the
supervisor leaves no process behind.

A process manager may also signal every process of the service at once (systemd's default
``KillMode=control-group``). Two rules keep that an orderly stop too: Redis runs with SIGTERM
blocked (see ``service.embedded_redis``) and is stopped by the supervisor with Redis's SHUTDOWN
command; a worker takes a repeated SIGTERM as the same request (``worker.runtime.main``).

Orderly stop, on the first SIGINT, SIGTERM or SIGHUP, one log line per step saying what it waits for:

1. the workers: SIGTERM to each worker process. Its running solver stops at its next check (within
   a second) and the job stores its best model (``stop_reason: interrupted``) or goes back to the
   queue (``HINGE_SHUTDOWN_POLICY``). A worker still running after ``shutdown_grace_s`` is killed
   with its process group and its job is handed back to the queue (no retry is used up).
2. the API: SIGTERM; uvicorn finishes the requests in flight (for at most ``API_GRACE_S``).
3. Redis, last, once nothing writes to it: SHUTDOWN fsyncs the append-only file, then it exits.

A second signal while stopping forces the stop: workers and API are killed with their process
groups (work horses, subtask and ingest processes included), the jobs they ran go back to the
queue, and Redis is stopped as in step 3. While the service runs, a worker that exits is replaced
and an embedded Redis that dies is restarted from its append-only file on the same port.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from core.processes import in_own_process_group, usable_cores

if TYPE_CHECKING:
    import redis

    from service.embedded_redis import EmbeddedRedis

SERVE_FILE = "serve.json"
"""Written by `hinge serve` in its data directory while it runs: {pid, redis_url, api_url} (`hinge keys` finds
the service's Redis through it)."""
SUPERVISED_ENV = "HINGE_SUPERVISED"
"""Set by `hinge serve` for the processes it starts (the API then leaves out uvicorn's start-up banner)."""
API_GRACE_S = 2  # seconds (uvicorn takes an int)
"""How long the API gets to finish the requests in flight when it is stopped."""
POLL_S = 0.05

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def log(message: str) -> None:
    """One line on stderr; a terminal that went away (SIGHUP) must not stop the shutdown."""
    try:
        print(f"hinge: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        try:
            sys.stderr = open(os.devnull, "w")
        except OSError:
            pass


class Supervisor:
    """Starts and stops Redis, the API and the workers of `hinge serve` (see the module docstring)."""

    def __init__(self, args: argparse.Namespace):
        from core.config import get_settings

        self.args = args
        self.settings = get_settings()
        self.data_dir = Path(args.data_dir).resolve()
        self.redis: EmbeddedRedis | None = None
        self.api: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self.signals = 0  # stop signals received: 1 orderly stop, 2 or more force it
        self.env = dict(os.environ)
        self._client: redis.Redis | None = None

    # -- signals ------------------------------------------------------------------------------

    def install_signal_handlers(self) -> None:
        """SIGINT, SIGTERM and SIGHUP stop the service; a second one forces the stop."""
        logging.getLogger("hinge").addHandler(logging.NullHandler())  # the supervisor says it with log()
        for number in STOP_SIGNALS:
            signal.signal(number, self._on_signal)

    def _on_signal(self, signum, frame) -> None:
        self.signals += 1
        self.last_signal = signal.Signals(signum).name
        if self.signals == 2:
            log(f"{self.last_signal} again: stopping at once")

    @property
    def stopping(self) -> bool:
        """A stop was requested."""
        return self.signals >= 1

    @property
    def forced(self) -> bool:
        """A second stop signal arrived: stop without waiting."""
        return self.signals >= 2

    # -- start --------------------------------------------------------------------------------

    def _spawn(self, argv: list[str]) -> subprocess.Popen:
        return subprocess.Popen(argv, env=self.env, preexec_fn=in_own_process_group, stdin=subprocess.DEVNULL)

    def _spawn_worker(self) -> subprocess.Popen:
        return self._spawn([sys.executable, "-m", "worker", "--die-with-parent", "--log-level", self.args.log_level])

    def start(self) -> None:
        """Start Redis (embedded unless REDIS_URL is set), the API and the workers."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.env["HINGE_DATA_DIR"] = str(self.data_dir)
        self.env.setdefault("NUMBA_THREADING_LAYER", "workqueue")
        # workers x threads <= cores: the workers' jobs lease the machine's cores (worker.runtime.core_budget)
        self.env["HINGE_LOCAL_WORKERS"] = str(self.args.workers)  # kernel compiles that run at once (estimates)
        self.env[SUPERVISED_ENV] = "1"  # the API leaves out uvicorn's banner: the "ready" line says it
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # no spinning BLAS pools
            self.env.setdefault(name, "1")
        if not self.env.get("REDIS_URL"):
            from service.embedded_redis import EmbeddedRedis

            self.redis = EmbeddedRedis(
                self.data_dir / "redis",
                port=self.args.redis_port,
                appendfsync=self.settings.redis_appendfsync,
                maxmemory=self.settings.redis_maxmemory,
            ).start()
            self.env["REDIS_URL"] = self.redis.url
            limit = f"{self.settings.redis_maxmemory / 2**20:.0f} MiB" if self.settings.redis_maxmemory else "none"
            log(
                f"embedded Redis on {self.redis.url} (maxmemory {limit}), append-only file in {self.data_dir / 'redis'}"
            )
        else:
            log(f"using Redis at {self.env['REDIS_URL']}")
        if self.stopping:
            return
        self.api = self._spawn(
            [
                sys.executable,
                "-m",
                "service.cli",
                "api",
                "--host",
                self.args.host,
                "--port",
                str(self.args.port),
                "--die-with-parent",
                "--log-level",
                self.args.log_level,
                "--processes",
                str(getattr(self.args, "api_processes", 1)),
            ]
        )
        self.workers = [self._spawn_worker() for _ in range(self.args.workers)]
        self.api_url = f"http://{self.args.host}:{self.args.port}"
        (self.data_dir / SERVE_FILE).write_text(
            json.dumps({"pid": os.getpid(), "redis_url": self.env["REDIS_URL"], "api_url": self.api_url})
        )
        log(f"starting the API on {self.api_url} and {self.args.workers} worker(s)")
        log(f"data sets are stored in the object store: {self._object_store()}")
        self.readiness = Readiness(self)

    def _object_store(self) -> str:
        """Where the data sets go, as the API and the workers will read the settings (never a credential)."""
        from core.config import get_settings
        from core.storage.objects import object_store

        settings = get_settings().model_copy(update={"data_dir": self.data_dir})
        return object_store(settings).name()

    # -- run ----------------------------------------------------------------------------------

    def watch(self) -> int:
        """Replace workers that exit and an embedded Redis that dies, until a stop is requested."""
        worker_restarts = RestartBudget(10)
        redis_restarts = RestartBudget(3)
        next_look = 0.0
        while not self.stopping:
            time.sleep(0.1)
            if self.stopping:
                break
            if time.monotonic() >= next_look:
                self.readiness.poll()
                next_look = time.monotonic() + 0.5
            if self.api is not None and self.api.poll() is not None:
                log(f"the API exited with code {self.api.returncode}; stopping")
                return 1
            if self.redis is not None and not self.redis.running():
                if not redis_restarts.take():
                    log("Redis keeps dying (more than 3 restarts in a minute); stopping")
                    return 1
                code = self.redis.process.returncode if self.redis.process is not None else None
                log(f"Redis exited with code {code}; restarting it from its append-only file")
                try:
                    self.redis.start()
                except RuntimeError as exc:
                    log(f"Redis did not restart ({exc}); stopping")
                    return 1
            for i, proc in enumerate(self.workers):
                if proc.poll() is not None and not self.stopping:
                    if not worker_restarts.take():
                        log("workers keep dying (more than 10 restarts in a minute); stopping")
                        return 1
                    log(f"worker {proc.pid} exited with code {proc.returncode}; starting another")
                    _kill_group(proc)  # its heartbeat or subtask processes, if any are left
                    self.workers[i] = self._spawn_worker()
        return 0

    # -- stop ---------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop workers, then the API, then Redis (see the module docstring); a second signal forces it."""
        begin = time.monotonic()
        reason = getattr(self, "last_signal", None)
        workers = [p for p in self.workers if p.poll() is None]
        if workers:
            jobs = self._running_jobs(workers)
            what = ", ".join(f"{p.pid} ({'job ' + jobs[p.pid] if p.pid in jobs else 'idle'})" for p in workers)
            log(
                f"stopping{f' ({reason})' if reason else ''}: waiting up to {self.settings.shutdown_grace_s:g} s "
                f"for worker(s) {what} to checkpoint their jobs and exit"
                + ("; Ctrl-C again stops at once" if not self.forced else "")
            )
            for proc in workers:
                _signal(proc, signal.SIGTERM)
            self._wait(workers, begin + self.settings.shutdown_grace_s)
            stuck = [p for p in workers if p.poll() is None]
            for proc in workers:
                _kill_group(proc)  # what is left of each: heartbeat, work horse, subtask processes
            for proc in workers:
                _wait_quietly(proc, 5)
                _wait_group_gone(proc.pid, 5)
            if stuck:
                log(
                    f"worker(s) {', '.join(str(p.pid) for p in stuck)} "
                    f"{'killed' if self.forced else 'did not stop in time: killed'}"
                )
                self._hand_back_jobs(stuck)
            else:
                log(f"workers stopped ({time.monotonic() - begin:.1f} s)")
        if self.api is not None and self.api.poll() is None:
            step = time.monotonic()
            log(f"waiting up to {API_GRACE_S:g} s for the API (pid {self.api.pid}) to finish the requests in flight")
            _signal(self.api, signal.SIGTERM)
            self._wait([self.api], step + API_GRACE_S + 1.0)
            killed = self.api.poll() is None
            _kill_group(self.api)  # ingest processes
            _wait_quietly(self.api, 5)
            _wait_group_gone(self.api.pid, 5)  # an ingest process may write to Redis until it is gone
            log("API killed" if killed else f"API stopped ({time.monotonic() - step:.1f} s)")
        if self.redis is not None and self.redis.running():
            step = time.monotonic()
            log("stopping Redis last: waiting for it to write its append-only file and exit")
            self._close_client()
            self.redis.stop()
            log(f"Redis stopped ({time.monotonic() - step:.1f} s)")
        self._close_client()
        try:
            (self.data_dir / SERVE_FILE).unlink()
        except OSError:
            pass
        log(f"stopped in {time.monotonic() - begin:.1f} s")

    def _wait(self, procs: list[subprocess.Popen], until: float) -> None:
        """Wait until every process exited, the time is up, or a second signal forces the stop."""
        while any(p.poll() is None for p in procs):
            if self.forced:
                for proc in procs:
                    _kill_group(proc)
                return
            if time.monotonic() >= until:
                return
            time.sleep(POLL_S)

    # -- Redis look-ups for the stop ------------------------------------------------------------

    def _redis_client(self):
        if self._client is None:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry

            self._client = redis.Redis.from_url(
                self.env["REDIS_URL"], socket_timeout=2.0, socket_connect_timeout=1.0, retry=Retry(NoBackoff(), 0)
            )
        return self._client

    def _close_client(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            except Exception:
                pass
            self._client = None

    def _running_jobs(self, workers: list[subprocess.Popen]) -> dict[int, str]:
        """pid -> id of the job the worker runs now (from the running jobs' records); empty if Redis is away."""
        from core.lifecycle import worker_pid
        from core.storage.jobs import JobStore

        pids = {p.pid for p in workers}
        found: dict[int, str] = {}
        try:
            jobs = JobStore(self._redis_client())
            for job_id in jobs.running_ids():
                job = jobs.get(job_id)
                pid = worker_pid(job.worker or "") if job is not None else None
                if pid in pids:
                    found[pid] = job_id
        except Exception:
            return {}
        return found

    def _hand_back_jobs(self, killed: list[subprocess.Popen]) -> None:
        """Put the running jobs of killed workers back in the queue (no retry used up: they were stopped, not lost)."""
        from core.lifecycle import hand_back_jobs_of_workers

        try:
            moved = hand_back_jobs_of_workers(
                self._redis_client(),
                self.settings,
                {p.pid for p in killed},
                "hinge serve was stopped before the worker could checkpoint the job",
            )
        except Exception as exc:
            log(f"could not hand back the jobs of the killed workers ({exc}); the reaper will requeue them")
            return
        for job_id in moved:
            log(f"job {job_id} handed back to the queue")


def _still_compiling(left: list[str], partly: list[str]) -> list[str]:
    """The solvers still compiling, as the readiness lines name them: one whose default formulation is built
    (``partly``: dcd once its C-SVC is, which the workers take first) by what is left of it, its spec's
    ``formulation_names``."""
    from core.solvers import SOLVERS

    return [f"{name}'s {SOLVERS[name].formulation_names}" if name in partly else name for name in left]


class Readiness:
    """Tells the person at the terminal what `hinge serve` is doing until every solver can train.

    Reads the workers' heartbeats in Redis (``solvers`` ready and ``warming``: the solvers left and an
    estimate, from the machine's kernel cache; see worker/runtime/heartbeat.py) and asks the API's /healthz.
    Lines: "compiling the solvers' code ..." once, when the cache lacks some (the first run, or changed
    solver code), with the estimate; one line per solver as its code is compiled; a line at least every
    PROGRESS_EVERY_S while they compile, with what is left and the estimate; "ready: API on ..." once the
    workers take jobs (dcd's code is compiled first); "every solver ready" at the end.
    """

    PROGRESS_EVERY_S = 14.0  # looked at every 0.5 s: a line at least every 15 s

    def __init__(self, supervisor: Supervisor):
        self.supervisor = supervisor
        self.started = time.monotonic()
        self.ready = False
        self.complete = False
        self.announced = False
        self.reported: set[str] = set()
        self.last_line = self.started
        self.last_eta: float | None = None
        self._client: redis.Redis | None = None

    def steady_eta(self, estimate: float) -> float:
        """The estimate to print: within a factor of 2 of the one printed before (a first run on a loaded
        machine printed "about 49 s for all", then "about 441 s left" 17 s later: the workers' estimates
        follow the compile times they measure, which jump while a machine's load does)."""
        if self.last_eta is not None and self.last_eta > 0:
            estimate = min(max(estimate, self.last_eta / 2.0), self.last_eta * 2.0)
        self.last_eta = estimate
        return estimate

    def _beats(self) -> dict:
        import redis

        from core.lifecycle import worker_beats

        if self._client is None:
            self._client = redis.Redis.from_url(self.supervisor.env["REDIS_URL"], socket_timeout=1.0)
        pids = {proc.pid for proc in self.supervisor.workers}
        try:
            return {k: v for k, v in worker_beats(self._client).items() if v.get("pid") in pids}
        except redis.exceptions.RedisError:
            return {}

    def _api_up(self) -> bool:
        import urllib.request

        try:
            with urllib.request.urlopen(self.supervisor.api_url + "/healthz", timeout=1.0) as answer:
                return answer.status == 200
        except OSError:
            return False

    def _say(self, message: str) -> None:
        log(message)
        self.last_line = time.monotonic()

    def poll(self) -> None:
        """Look once; print what changed."""
        if self.ready and self.complete:
            return
        from core.lifecycle import solver_readiness

        wanted = len(self.supervisor.workers)
        beats = self._beats() if wanted else {}
        elapsed = time.monotonic() - self.started
        solvers = solver_readiness(beats)
        left, partly, ready_solvers, eta = solvers["left"], solvers["partly"], solvers["ready"], solvers["eta_s"]
        if left and not self.announced:
            self.announced = True
            eta = self.steady_eta(eta)
            self._say(
                f"compiling the solvers' code (first run on this machine, cached afterwards; about {eta:.0f} s for all "
                f"on {usable_cores()} core(s) at this load; dcd first, the others in the background)"
            )
        if self.announced:
            for name in ready_solvers:
                if name not in self.reported:
                    self.reported.add(name)
                    self._say(f"  {name} compiled ({elapsed:.0f} s)")
            if left and time.monotonic() - self.last_line >= self.PROGRESS_EVERY_S:
                eta = self.steady_eta(eta)
                compiling = ", ".join(_still_compiling(left, partly))
                self._say(f"  still compiling {compiling} ({elapsed:.0f} s so far, about {eta:.0f} s left)")
        taking_jobs = sum(1 for b in beats.values() if b.get("ready"))
        if not self.ready and beats and taking_jobs >= wanted and self._api_up():
            self.ready = True
            url = self.supervisor.api_url
            later = (
                f"; {', '.join(_still_compiling(left, partly))} still compiling (their jobs wait in the queue)"
                if left
                else ""
            )
            self._say(
                f"ready: API on {url}, {wanted} worker{'s' if wanted != 1 else ''} "
                f"(dashboard {url}/ui/, API docs {url}/docs; started in {elapsed:.0f} s){later}; Ctrl-C stops"
            )
        if self.ready and not left and beats and not self.complete:
            self.complete = True
            if solvers["failed"]:
                self._say(
                    f"compiling {', '.join(solvers['failed'])} failed ({elapsed:.0f} s after start; the workers' log says why): "
                    "their jobs compile it again and fail with the error if it fails again; every other solver is ready"
                )
            elif self.announced:
                self._say(f"every solver ready ({elapsed:.0f} s after start)")
            if self._client is not None:
                self._client.close()
                self._client = None


class RestartBudget:
    """At most ``per_minute`` restarts in any minute (a child that dies at once must not spin forever)."""

    def __init__(self, per_minute: int):
        self.per_minute = per_minute
        self.times: list[float] = []

    def take(self) -> bool:
        """Count a restart; False when it is one too many."""
        now = time.monotonic()
        self.times = [t for t in self.times if now - t < 60] + [now]
        return len(self.times) <= self.per_minute


def _signal(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.kill(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group the child leads (a group of its own: no other child of the service is in it)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    """Whether a process group still has a member that is not a zombie."""
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():  # not Linux: a zombie counts as alive
        try:
            os.killpg(pgid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False
    for entry in proc_dir.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _wait_group_gone(pgid: int, timeout: float) -> None:
    end = time.monotonic() + timeout
    while _group_alive(pgid) and time.monotonic() < end:
        time.sleep(0.01)


def _wait_quietly(proc: subprocess.Popen, timeout: float) -> None:
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        pass


def serve(args: argparse.Namespace) -> int:
    """Run the whole service in the foreground until a stop signal (the body of `hinge serve`)."""
    supervisor = Supervisor(args)
    supervisor.install_signal_handlers()
    code = 0
    try:
        supervisor.start()
        code = supervisor.watch()
    finally:
        supervisor.stop()
    # Everything is stopped: leave without the interpreter's finalization (up to two seconds on a busy
    # machine), the last wait of whoever stopped the service.
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)
