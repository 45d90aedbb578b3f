"""`hinge serve` in a terminal of its own, to stop it the ways people and process managers do.

``ServeRun`` starts `hinge serve` as the session leader of a new pseudo-terminal, the way a shell
runs it in a terminal window: the pty is its controlling terminal and its process group is the
terminal's foreground group. Then ``ctrl_c()`` types ^C (the kernel sends SIGINT to the foreground
group), ``close_terminal()`` closes the terminal (the kernel sends SIGHUP), ``signal_group()`` is
``kill -SIG -- -PGID`` and ``signal_supervisor()`` signals the supervisor alone. The terminal's output
is collected (the supervisor's log lines), and ``wait_gone()`` records when each process of the
service disappeared.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

from tests.cluster import alive, descendants
from tests.conftest import ROOT
from tests.helpers import service_ready


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def role(cmdline: str) -> str:
    """What a child of the supervisor is, from its command line: redis, api, worker or other."""
    if "redis-server" in cmdline:
        return "redis"
    if "service.cli api" in cmdline:
        return "api"
    if "-m worker" in cmdline:
        return "worker"
    return "other"


class ServeRun:
    """One `hinge serve` process in its own pseudo-terminal."""

    def __init__(
        self,
        data_dir: Path,
        port: int,
        workers: int = 1,
        env_extra: dict | None = None,
        extra_args: tuple[str, ...] = (),
        root: Path = ROOT,
        preload_kernels: bool = True,
    ):
        """``root``: the checkout whose code runs (another one compares a version before a change).
        ``preload_kernels=False``: the workers load a solver's kernels with its first job instead of all five at their
        start (HINGE_PRELOAD_KERNELS; about 1.2 CPU-s a worker), for a test whose service lives seconds and trains one
        solver."""
        env = dict(os.environ)
        env.pop("REDIS_URL", None)
        env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
        if not preload_kernels:
            env["HINGE_PRELOAD_KERNELS"] = "false"
        env.update(env_extra or {})
        self.base_url = f"http://127.0.0.1:{port}"
        master, slave = os.openpty()
        self.master = master

        def become_terminal_owner():
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "service.cli",
                "serve",
                "--port",
                str(port),
                "--workers",
                str(workers),
                "--data-dir",
                str(data_dir),
                "--log-level",
                "warning",
                *extra_args,
            ],
            env=env,
            cwd=root,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            preexec_fn=become_terminal_owner,
        )
        os.close(slave)
        self.output = bytearray()
        self._closing = False
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        self.family: dict[int, str] = {}

    def _drain(self) -> None:
        # select() with a timeout, not a blocking read: a thread blocked in read() would keep the
        # pty's master open after close_terminal() closed it, and the kernel would not hang it up.
        while not self._closing:
            try:
                ready, _, _ = select.select([self.master], [], [], 0.05)
                if not ready:
                    continue
                piece = os.read(self.master, 65536)
            except (OSError, ValueError):
                return
            if not piece:
                return
            self.output.extend(piece)

    def text(self) -> str:
        """Everything the service wrote to its terminal so far."""
        return self.output.decode(errors="replace")

    def supervisor_lines(self) -> list[str]:
        """The supervisor's own log lines (`hinge: ...`; the terminal may have echoed ^C before one)."""
        return [line[line.index("hinge:") :].strip() for line in self.text().splitlines() if "hinge:" in line]

    def wait_ready(self, timeout: float = 600.0, *, all_kernels: bool = False) -> None:
        """Wait until /readyz answers 200 (a worker is warm); with ``all_kernels``, until no solver's kernels
        are still compiling either (``tests.helpers.service_ready``)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"hinge serve exited with {self.proc.returncode}:\n{self.text()[-3000:]}")
            if service_ready(self.base_url, all_kernels=all_kernels) == []:
                return
            time.sleep(0.2)
        raise AssertionError(f"hinge serve not ready after {timeout} s:\n{self.text()[-3000:]}")

    def snapshot(self) -> dict[int, str]:
        """Every live process of the service (the supervisor and its descendants) and its role."""
        family = {self.proc.pid: "supervisor"}
        for pid in sorted(descendants(self.proc.pid)):
            if not alive(pid):
                continue
            top = pid  # the supervisor's child this process descends from gives its role
            while _parent(top) not in (self.proc.pid, 0, 1):
                top = _parent(top)
            name = role(_cmdline(top))
            family[pid] = name if top == pid else f"{name} (child)"
        self.family = family
        return dict(family)

    # -- ways to stop it ------------------------------------------------------------------------

    def ctrl_c(self) -> None:
        """Type ^C in the terminal: SIGINT to its foreground process group."""
        os.write(self.master, b"\x03")

    def close_terminal(self) -> None:
        """Close the terminal window: the kernel hangs up the pty and sends SIGHUP."""
        self._stop_reader()

    def _stop_reader(self) -> None:
        self._closing = True
        self._reader.join(5)
        if self.master >= 0:
            os.close(self.master)
            self.master = -1

    def signal_group(self, sig: int) -> None:
        """`kill -SIG -- -PGID` of hinge serve's process group."""
        os.killpg(os.getpgid(self.proc.pid), sig)

    def signal_supervisor(self, sig: int) -> None:
        """Signal the supervisor process alone."""
        os.kill(self.proc.pid, sig)

    WAYS = ("ctrl_c", "ctrl_c_twice", "sigint_group", "sigterm_group", "sigterm_supervisor", "sighup")
    """The ways of stopping that ``stop_by`` knows."""

    def stop_by(self, how: str) -> None:
        """Stop the service one of the ``WAYS`` (``ctrl_c_twice``: ^C, then ^C again 0.3 s later)."""
        if how == "ctrl_c":
            self.ctrl_c()
        elif how == "ctrl_c_twice":
            self.ctrl_c()
            time.sleep(0.3)
            self.ctrl_c()
        elif how == "sigint_group":
            self.signal_group(signal.SIGINT)
        elif how == "sigterm_group":
            self.signal_group(signal.SIGTERM)
        elif how == "sigterm_supervisor":
            self.signal_supervisor(signal.SIGTERM)
        elif how == "sighup":
            self.close_terminal()
        else:
            raise ValueError(f"unknown way of stopping: {how!r}")

    def wait_gone(self, timeout: float = 60.0, since: float | None = None) -> dict[int, float]:
        """Seconds from ``since`` until each process of the last snapshot was gone (missing: still alive)."""
        since = time.monotonic() if since is None else since
        gone: dict[int, float] = {}
        end = since + timeout
        while time.monotonic() < end:
            self.proc.poll()
            tick = time.monotonic() - since  # one instant per look: processes found gone in one look tie
            for pid in self.family:
                if pid not in gone and not alive(pid):
                    gone[pid] = tick
            if len(gone) == len(self.family):
                break
            time.sleep(0.01)
        return gone

    def close(self) -> None:
        """Make sure nothing is left (test clean-up): SIGKILL every process still alive."""
        for pid in list(self.family) + [self.proc.pid]:
            if alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self._stop_reader()


def aof_check(redis_dir: Path) -> tuple[bool, str]:
    """Redis's own append-only file check (redis-server run as redis-check-aof) on ``redis_dir``."""
    import tempfile

    from service.embedded_redis import redis_server_binary

    with tempfile.TemporaryDirectory() as tmp:
        checker = Path(tmp) / "redis-check-aof"  # redis-server turns into the checker under this name
        checker.symlink_to(redis_server_binary())
        done = subprocess.run(
            [str(checker), str(redis_dir / "appendonly.aof")], capture_output=True, text=True, timeout=120
        )
    return done.returncode == 0 and "AOF is valid" in done.stdout, done.stdout.strip()


def stored_job(redis_dir: Path, job_id: str) -> dict:
    """The job's record as the stopped service left it (read by a Redis started on its append-only file)."""
    import redis

    from service.embedded_redis import EmbeddedRedis

    server = EmbeddedRedis(redis_dir).start()
    try:
        client = redis.Redis.from_url(server.url)
        raw = client.hgetall(f"hinge:job:{job_id}")
        record = {k.decode(): v.decode() for k, v in raw.items()}
        if record.get("model_id"):
            record["model_stored"] = bool(client.exists(f"hinge:model:{record['model_id']}"))
        client.close()
        return record
    finally:
        server.stop()
