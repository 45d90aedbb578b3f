"""The `hinge` command: serve (Redis + API + workers), api, worker, keys, openapi.

`hinge keys create --tenant T [--name N] | list [--json] | revoke KEY_ID` manages the API keys kept
(hashed) in Redis (see service/storage/apikeys.py): REDIS_URL's, or else the embedded Redis of the
`hinge serve` running with the same data directory (it writes ``serve.json`` there).

`hinge serve` is a small supervisor: it starts an embedded Redis (unless REDIS_URL is set), the
API (uvicorn) and the worker processes, restarts a worker that dies, and on Ctrl-C or SIGTERM
stops all of them: workers and API get SIGTERM and a grace period, then SIGKILL (their whole
process group, work horses included), and Redis last, so its append-only file is complete.
Every child also asks the kernel to terminate it if the supervisor itself dies.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

GRACE_S = 30.0  # as docker/compose.yaml's stop_grace_period: a stopping worker checkpoints its job
OPENAPI_PATH = Path(__file__).resolve().parent.parent / "openapi" / "openapi.json"


def _log(message: str) -> None:
    print(f"hinge: {message}", file=sys.stderr, flush=True)


def openapi_document() -> dict:
    """The OpenAPI document of the application (no Redis needed)."""
    from service.api.app import create_app
    from service.config import Settings

    return create_app(Settings(redis_url=None)).openapi()


def openapi_text() -> str:
    """The OpenAPI document as the exact text kept in openapi/openapi.json."""
    return json.dumps(openapi_document(), indent=2, ensure_ascii=False) + "\n"


def cmd_openapi(args: argparse.Namespace) -> int:
    """Write (or with --check, compare) openapi/openapi.json."""
    text = openapi_text()
    path = Path(args.output)
    if args.check:
        current = path.read_text() if path.exists() else ""
        if current != text:
            _log(f"{path} is stale: run `hinge openapi`")
            return 1
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    _log(f"wrote {path}")
    return 0


def cmd_api(args: argparse.Namespace) -> int:
    """Run the API alone (needs REDIS_URL)."""
    if args.die_with_parent:
        from service.ingest.entry import die_with_parent

        die_with_parent()
    import uvicorn

    from service.config import get_settings
    from service.logs import uvicorn_log_config

    settings = get_settings()
    if not settings.redis_url:
        _log("REDIS_URL is not set: use `hinge serve` for an embedded Redis, or set REDIS_URL")
        return 2
    uvicorn.run(
        "service.api.app:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        log_level=args.log_level.lower(),
        log_config=uvicorn_log_config(args.log_level, settings.log_format),
        access_log=not args.no_access_log,
    )
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    """Create, list or revoke API keys (kept hashed in Redis)."""
    import redis

    from service.config import get_settings
    from service.storage.apikeys import ApiKeyStore

    url = get_settings().redis_url or running_serve_redis(Path(args.data_dir))
    if not url:
        _log(f"no Redis to keep keys in: start `hinge serve` (it writes {Path(args.data_dir) / SERVE_FILE}, found "
             "from the same directory or --data-dir), or set REDIS_URL to the service's Redis")
        return 2
    client = redis.Redis.from_url(url)
    store = ApiKeyStore(client)
    try:
        if args.keys_command == "create":
            try:
                key_id, key = store.create(args.tenant, args.name or "")
            except ValueError as exc:
                _log(str(exc))
                return 2
            if args.json:
                print(json.dumps({"key_id": key_id, "tenant": args.tenant, "key": key}))
            else:
                print(key)
                _log(f"key {key_id} for tenant {args.tenant!r} created; it is shown only this once")
            return 0
        if args.keys_command == "list":
            records = store.list()
            if args.json:
                print(json.dumps(records))
            else:
                print(f"{'key_id':<18}{'tenant':<20}{'status':<10}{'created_at':<30}name")
                for r in records:
                    status = "active" if r["active"] else "revoked"
                    print(f"{r['key_id']:<18}{r['tenant']:<20}{status:<10}{r['created_at']:<30}{r.get('name', '')}")
            return 0
        if args.keys_command == "revoke":
            if not store.revoke(args.key_id):
                _log(f"no key with id {args.key_id!r}")
                return 1
            _log(f"key {args.key_id} revoked")
            return 0
    finally:
        client.close()
    return 2


SERVE_FILE = "serve.json"
"""Written by `hinge serve` in its data directory while it runs: {pid, redis_url, api_url}."""


def running_serve_redis(data_dir: Path) -> str | None:
    """The Redis URL of the `hinge serve` running with this data directory, if one runs."""
    try:
        info = json.loads((data_dir / SERVE_FILE).read_text())
        os.kill(int(info["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info.get("redis_url")


def cmd_worker(args: argparse.Namespace, rest: list[str]) -> int:
    """Replace this process with one worker (`python -m worker`)."""
    os.execv(sys.executable, [sys.executable, "-m", "worker", *rest])
    return 0  # pragma: no cover


class Supervisor:
    """Starts and stops Redis, the API and the workers of `hinge serve`."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.data_dir = Path(args.data_dir).resolve()
        self.redis = None
        self.api: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self.stopping = False
        self.env = dict(os.environ)

    def _spawn(self, argv: list[str]) -> subprocess.Popen:
        return subprocess.Popen(argv, env=self.env, start_new_session=True, stdin=subprocess.DEVNULL)

    def _spawn_worker(self) -> subprocess.Popen:
        # The worker gets SIGTERM from stop() and forwards it to its running solver (checkpoint).
        return self._spawn([sys.executable, "-m", "worker", "--die-with-parent"])

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.env["HINGE_DATA_DIR"] = str(self.data_dir)
        self.env.setdefault("NUMBA_THREADING_LAYER", "workqueue")
        # workers x threads <= cores: each worker's jobs get an equal share of the machine
        self.env.setdefault("HINGE_WORKER_CORES", str(max(1, len(os.sched_getaffinity(0)) // max(1, self.args.workers))))
        if not self.env.get("REDIS_URL"):
            from service.embedded_redis import EmbeddedRedis

            from service.config import get_settings

            self.redis = EmbeddedRedis(self.data_dir / "redis", port=self.args.redis_port,
                                       appendfsync=get_settings().redis_appendfsync).start()
            self.env["REDIS_URL"] = self.redis.url
            _log(f"embedded Redis on {self.redis.url}, append-only file in {self.data_dir / 'redis'}")
        else:
            _log(f"using Redis at {self.env['REDIS_URL']}")
        self.api = self._spawn([
            sys.executable, "-m", "service.cli", "api", "--host", self.args.host, "--port", str(self.args.port),
            "--die-with-parent", "--log-level", self.args.log_level,
        ])
        self.workers = [self._spawn_worker() for _ in range(self.args.workers)]
        self.api_url = f"http://{self.args.host}:{self.args.port}"
        (self.data_dir / SERVE_FILE).write_text(json.dumps(
            {"pid": os.getpid(), "redis_url": self.env["REDIS_URL"], "api_url": self.api_url}))
        _log(f"starting the API on {self.api_url} and {self.args.workers} worker(s)")
        self.readiness = Readiness(self)

    def watch(self) -> int:
        restarts: list[float] = []
        while not self.stopping:
            time.sleep(0.5)
            self.readiness.poll()
            if self.api is not None and self.api.poll() is not None:
                _log(f"the API exited with code {self.api.returncode}; stopping")
                return 1
            for i, proc in enumerate(self.workers):
                if proc.poll() is not None and not self.stopping:
                    now = time.monotonic()
                    restarts = [t for t in restarts if now - t < 60] + [now]
                    if len(restarts) > 10:
                        _log("workers keep dying (more than 10 restarts in a minute); stopping")
                        return 1
                    _log(f"worker {proc.pid} exited with code {proc.returncode}; starting another")
                    self.workers[i] = self._spawn_worker()
        return 0

    def stop(self) -> None:
        children = [p for p in [self.api, *self.workers] if p is not None]
        for proc in children:
            _signal_group(proc, signal.SIGTERM)
        end = time.monotonic() + GRACE_S
        for proc in children:
            try:
                proc.wait(max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for proc in children:
            _signal_group(proc, signal.SIGKILL)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        if self.redis is not None:
            self.redis.stop()
        try:
            (self.data_dir / SERVE_FILE).unlink()
        except OSError:
            pass
        _log("stopped")


class Readiness:
    """Tells the person at the terminal what `hinge serve` is doing until it can train, then says so once.

    Reads the workers' heartbeats in Redis (``warming``: kernels done and left, see worker/heartbeat.py)
    and asks the API's /healthz. Lines: "compiling solver kernels (first run only, about N s)" when a
    worker is still compiling after a second, one line per solver as the slowest worker finishes it,
    then "ready: API on ..., N workers". N is the last measured compile time (kept in the data
    directory), or KERNEL_SECONDS_GUESS before any.
    """

    KERNEL_SECONDS_GUESS = 90  # a cold compile of every solver on 2 quiet cores; a busy machine takes longer
    TIMES_FILE = "kernel-seconds.json"

    def __init__(self, supervisor: "Supervisor"):
        self.supervisor = supervisor
        self.started = time.monotonic()
        self.ready = False
        self.announced = False
        self.reported: set[str] = set()
        self.slowest: dict[str, float] = {}
        self._client = None

    def _beats(self) -> dict:
        import redis

        from service.lifecycle import worker_beats

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

    def _guess(self) -> int:
        try:
            return int(round(json.loads((self.supervisor.data_dir / self.TIMES_FILE).read_text())["seconds"]))
        except (OSError, ValueError, KeyError, TypeError):
            return self.KERNEL_SECONDS_GUESS

    def poll(self) -> None:
        """Look once; print what changed."""
        if self.ready:
            return
        wanted = len(self.supervisor.workers)
        beats = self._beats() if wanted else {}
        warming = [b["warming"] for b in beats.values() if not b.get("ready") and b.get("warming")]
        elapsed = time.monotonic() - self.started
        if warming and not self.announced and elapsed > 1.0:
            self.announced = True
            _log(f"compiling solver kernels (first run only, about {self._guess()} s; cached afterwards)")
        if self.announced:
            for state in warming:
                for name, seconds in state.get("done", {}).items():
                    self.slowest[name] = max(self.slowest.get(name, 0.0), seconds)
            still = {name for state in warming for name in state.get("left", [])}
            total = len(self.slowest) + len(still - set(self.slowest))
            for name in list(self.slowest):
                if name not in still and name not in self.reported:
                    self.reported.add(name)
                    _log(f"  kernels of {name} ready ({self.slowest[name]:.1f} s) [{len(self.reported)}/{max(total, 1)}]")
        ready_workers = sum(1 for b in beats.values() if b.get("ready"))
        if ready_workers >= wanted and self._api_up():
            self.ready = True
            if self.announced:
                try:
                    (self.supervisor.data_dir / self.TIMES_FILE).write_text(json.dumps({"seconds": elapsed}))
                except OSError:
                    pass
            url = self.supervisor.api_url
            _log(f"ready: API on {url}, {wanted} worker{'s' if wanted != 1 else ''} "
                 f"(dashboard {url}/ui/, API docs {url}/docs; started in {elapsed:.0f} s); Ctrl-C stops")
            if self._client is not None:
                self._client.close()


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the whole service in the foreground."""
    supervisor = Supervisor(args)

    def _stop(signum, frame):
        supervisor.stopping = True

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    code = 0
    try:
        supervisor.start()
        code = supervisor.watch()
    finally:
        supervisor.stop()
    return code


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `hinge`."""
    parser = argparse.ArgumentParser(prog="hinge", description="Hinge: an HTTP service that trains SVMs.")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="Run Redis (embedded unless REDIS_URL is set), the API and workers.")
    serve.add_argument("--host", default="127.0.0.1", help="Address the API listens on (default 127.0.0.1).")
    serve.add_argument("--port", type=int, default=8000, help="Port of the API (default 8000).")
    serve.add_argument("--workers", type=int, default=2, help="Worker processes (default 2; 0 runs the API alone).")
    serve.add_argument("--data-dir", default=os.environ.get("HINGE_DATA_DIR", "hinge-data"),
                       help="Where Redis keeps its data and workers cache data sets (default ./hinge-data).")
    serve.add_argument("--redis-port", type=int, default=None, help="Port of the embedded Redis (default: a free one).")
    serve.add_argument("--log-level", default="info", help="Log level of the API and workers.")

    api = sub.add_parser("api", help="Run the API only (needs REDIS_URL).")
    api.add_argument("--host", default="127.0.0.1")
    api.add_argument("--port", type=int, default=8000)
    api.add_argument("--log-level", default="info")
    api.add_argument("--no-access-log", action="store_true", help="Do not log every request.")
    api.add_argument("--die-with-parent", action="store_true", help=argparse.SUPPRESS)

    sub.add_parser("worker", help="Run one worker (needs REDIS_URL); options: see `hinge worker --help`.", add_help=False)

    keys_parser = sub.add_parser("keys", help="Manage API keys (the Redis of a running `hinge serve`, or REDIS_URL): "
                                              "create, list, revoke.")
    keys_parser.add_argument("--data-dir", default=os.environ.get("HINGE_DATA_DIR", "hinge-data"),
                             help="Data directory of the running `hinge serve` (default ./hinge-data).")
    keys_sub = keys_parser.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="Create a key for a tenant; prints the key once.")
    create.add_argument("--tenant", required=True, help="Tenant the key acts for (letters, digits, _ . -).")
    create.add_argument("--name", default="", help="A note to recognise the key by in listings.")
    create.add_argument("--json", action="store_true", help="Print {key_id, tenant, key} as JSON.")
    listing = keys_sub.add_parser("list", help="List keys (never the secrets).")
    listing.add_argument("--json", action="store_true", help="Print JSON.")
    revoke = keys_sub.add_parser("revoke", help="Revoke a key by its id.")
    revoke.add_argument("key_id", help="The key's id (as `list` shows it).")

    openapi = sub.add_parser("openapi", help="Write the OpenAPI document to openapi/openapi.json.")
    openapi.add_argument("--output", default=str(OPENAPI_PATH), help="Where to write it.")
    openapi.add_argument("--check", action="store_true", help="Fail if the file differs from the document.")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `hinge` command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["worker"]:
        return cmd_worker(argparse.Namespace(), argv[1:])
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return cmd_serve(args)
    if args.command == "api":
        return cmd_api(args)
    if args.command == "openapi":
        return cmd_openapi(args)
    if args.command == "keys":
        return cmd_keys(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
