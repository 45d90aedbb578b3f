"""The `hinge` command: serve (Redis + API + workers), api, worker, keys, store, openapi.

`hinge keys create --tenant T [--name N] | list [--json] | revoke KEY_ID` manages the API keys kept
(hashed) in Redis (see core/storage/apikeys.py): REDIS_URL's, or else the embedded Redis of the
`hinge serve` running with the same data directory (it writes ``serve.json`` there).

`hinge serve` runs a small supervisor (service/supervisor.py): it starts an embedded Redis (unless
REDIS_URL is set), the API (uvicorn) and the worker processes, replaces a worker that dies, and on
Ctrl-C, SIGTERM or SIGHUP stops the workers (they checkpoint their jobs), then the API, then Redis.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from service.supervisor import SERVE_FILE, SUPERVISED_ENV

OPENAPI_PATH = Path(__file__).resolve().parent.parent / "openapi" / "openapi.json"


def _log(message: str) -> None:
    print(f"hinge: {message}", file=sys.stderr, flush=True)


def openapi_document() -> dict:
    """The OpenAPI document of the application (no Redis needed)."""
    from core.config import Settings
    from service.api.app import create_app

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
        from core.processes import die_with_parent

        die_with_parent()
    import uvicorn

    from core.config import get_settings
    from core.logs import uvicorn_log_config
    from service.supervisor import API_GRACE_S

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
        # under `hinge serve` its "ready" line says where the API is: no uvicorn banner before it
        log_config=uvicorn_log_config(args.log_level, settings.log_format, banner=not os.environ.get(SUPERVISED_ENV)),
        access_log=not args.no_access_log,
        workers=args.processes if args.processes > 1 else None,
        timeout_graceful_shutdown=API_GRACE_S,
    )
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    """Create, list or revoke API keys (kept hashed in Redis)."""
    import redis

    from core.config import get_settings
    from core.storage.apikeys import ApiKeyStore

    url = get_settings().redis_url or running_serve_redis(Path(args.data_dir))
    if not url:
        _log(
            f"no Redis to keep keys in: start `hinge serve` (it writes {Path(args.data_dir) / SERVE_FILE}, found "
            "from the same directory or --data-dir), or set REDIS_URL to the service's Redis"
        )
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


def cmd_store(args: argparse.Namespace) -> int:
    """`hinge store check | migrate [--dry-run] | gc [--grace-s S]`: the object store of these settings."""
    import redis

    from core.config import get_settings
    from core.storage.objects import StoreError, object_store

    settings = get_settings()
    objects = object_store(settings)
    if args.store_command == "check":
        try:
            objects.ping()
        except StoreError as exc:
            _log(f"the object store does not serve: {exc}")
            return 1
        _log(f"the object store answers: {objects.name()}")
        return 0
    url = settings.redis_url or running_serve_redis(Path(args.data_dir))
    if not url:
        _log("no Redis: set REDIS_URL, or start `hinge serve` with the same data directory (--data-dir)")
        return 2
    client = redis.Redis.from_url(url)
    try:
        if args.store_command == "gc":
            from core.storage.garbage import collect_garbage

            deleted = collect_garbage(
                client, objects, args.grace_s if args.grace_s is not None else settings.store_gc_grace_s
            )
            _log(f"deleted {deleted} object(s) that no data set or model owns")
            return 0
        from core.storage.migration import legacy_datasets, migrate_dataset
        from core.storage.records import dataset_store

        store = dataset_store(client, settings)
        found = legacy_datasets(client)
        _log(f"{len(found)} data set(s) keep their arrays in Redis; the object store is {objects.name()}")
        moved = 0
        for dataset_id, tenant in found:
            record = store.get(dataset_id, tenant)
            if record is None:
                continue
            if args.dry_run:
                print(f"{dataset_id}\t{record.name}\t{record.nnz} non-zeros")
                continue
            try:
                done = migrate_dataset(store, record, settings.shard_bytes)
            except StoreError as exc:
                _log(f"{dataset_id}: the object store did not take it ({exc}); it stays in Redis, run this again")
                return 1
            moved += done
            print(f"{dataset_id}\t{'moved' if done else 'changed meanwhile, left as it is'}")
        if not args.dry_run:
            _log(f"{moved} data set(s) moved to the object store")
        return 0
    finally:
        client.close()


def cmd_worker_health(args: argparse.Namespace) -> int:
    """Exit 0 while a worker of this host (container, pod) has a current heartbeat in REDIS_URL's Redis: the
    health check of docker/compose*.yaml and the Kubernetes liveness probe of the workers. A worker compiling its
    kernels beats already (so it is never reported unhealthy for that); /readyz says when it takes jobs."""
    import socket

    import redis

    from core.config import get_settings
    from core.lifecycle import worker_beats

    url = get_settings().redis_url
    if not url:
        _log("REDIS_URL is not set")
        return 2
    client = redis.Redis.from_url(url, socket_timeout=3, socket_connect_timeout=3)
    try:
        beats = worker_beats(client)
    except redis.exceptions.RedisError as exc:
        _log(f"Redis does not answer: {exc}")
        return 1
    finally:
        client.close()
    host = socket.gethostname()
    if any(beat.get("host") == host for beat in beats.values()):
        return 0
    _log(f"no current heartbeat of a worker on {host}")
    return 1


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


def cmd_compile(rest: list[str], prog: str = "hinge compile") -> int:
    """`hinge compile [--build] [--json]`: the upload parser's compiled code (here) and the solvers' (`python -m
    worker.runtime.warmup`, run as a child: the service never imports the worker). `hinge kernels` is its
    earlier name, still accepted."""
    import subprocess

    from core.compile_command import run_command, show
    from service.ingest.entry import PARSER_UNITS

    parser = argparse.ArgumentParser(
        prog=prog,
        description="Show which compiled code (numba) this machine's cache holds, for the solvers and the upload "
        "parser; --build compiles what is missing (what a Docker build runs, and what workers do in the background).",
    )
    parser.add_argument("--build", action="store_true", help="Compile every missing unit, then show the cache.")
    parser.add_argument("--json", action="store_true", help="Print the state as JSON.")
    args = parser.parse_args(rest)
    solvers = subprocess.run(
        [sys.executable, "-m", "worker.runtime.warmup", "--json", *(["--build"] if args.build else [])],
        stdout=subprocess.PIPE,
        text=True,
    )
    if not solvers.stdout.strip():
        print(f"{prog}: the solvers' part failed (python -m worker.runtime.warmup)", file=sys.stderr)
        return 1
    solver_state = json.loads(solvers.stdout)
    state = run_command({"service.ingest": PARSER_UNITS}, args.build)
    state["caches"] = {**solver_state["caches"], **state["caches"]}
    state["units"] = {**solver_state["units"], **state["units"]}
    state["solvers_ready"] = solver_state["solvers_ready"]
    if args.json:
        print(json.dumps(state, indent=2))
    else:
        show(state)
    missing = [name for name, info in state["units"].items() if not info["built"]]
    return 1 if args.build and (missing or solvers.returncode) else 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the whole service in the foreground (see service/supervisor.py for the stop sequence)."""
    from service.supervisor import serve

    return serve(args)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `hinge`."""
    parser = argparse.ArgumentParser(prog="hinge", description="Hinge: an HTTP service that trains SVMs.")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="Run Redis (embedded unless REDIS_URL is set), the API and workers.")
    serve.add_argument("--host", default="127.0.0.1", help="Address the API listens on (default 127.0.0.1).")
    serve.add_argument("--port", type=int, default=8000, help="Port of the API (default 8000).")
    serve.add_argument("--workers", type=int, default=2, help="Worker processes (default 2; 0 runs the API alone).")
    serve.add_argument(
        "--data-dir",
        default=os.environ.get("HINGE_DATA_DIR", "hinge-data"),
        help="Where Redis keeps its data and workers cache data sets (default ./hinge-data).",
    )
    serve.add_argument("--redis-port", type=int, default=None, help="Port of the embedded Redis (default: a free one).")
    serve.add_argument("--api-processes", type=int, default=1, help="API processes sharing the port (default 1).")
    serve.add_argument(
        "--log-level",
        default=os.environ.get("HINGE_LOG_LEVEL", "info"),
        help="Log level of the API and workers (default: HINGE_LOG_LEVEL, else info); RQ's own lines show at "
        "warning and above, or at debug.",
    )

    api = sub.add_parser("api", help="Run the API only (needs REDIS_URL).")
    api.add_argument("--host", default="127.0.0.1")
    api.add_argument("--port", type=int, default=8000)
    api.add_argument("--log-level", default="info")
    api.add_argument("--no-access-log", action="store_true", help="Do not log every request.")
    api.add_argument("--processes", type=int, default=1, help="API processes sharing the port (default 1).")
    api.add_argument("--die-with-parent", action="store_true", help=argparse.SUPPRESS)

    sub.add_parser(
        "worker", help="Run one worker (needs REDIS_URL); options: see `hinge worker --help`.", add_help=False
    )

    sub.add_parser(
        "compile",
        help="Show which solver and parser code this machine has compiled; --build compiles the rest (see `hinge "
        "compile --help`; `hinge kernels`, its earlier name, still works).",
        add_help=False,
    )

    keys_parser = sub.add_parser(
        "keys", help="Manage API keys (the Redis of a running `hinge serve`, or REDIS_URL): create, list, revoke."
    )
    keys_parser.add_argument(
        "--data-dir",
        default=os.environ.get("HINGE_DATA_DIR", "hinge-data"),
        help="Data directory of the running `hinge serve` (default ./hinge-data).",
    )
    keys_sub = keys_parser.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="Create a key for a tenant; prints the key once.")
    create.add_argument("--tenant", required=True, help="Tenant the key acts for (letters, digits, _ . -).")
    create.add_argument("--name", default="", help="A note to recognise the key by in listings.")
    create.add_argument("--json", action="store_true", help="Print {key_id, tenant, key} as JSON.")
    listing = keys_sub.add_parser("list", help="List keys (never the secrets).")
    listing.add_argument("--json", action="store_true", help="Print JSON.")
    revoke = keys_sub.add_parser("revoke", help="Revoke a key by its id.")
    revoke.add_argument("key_id", help="The key's id (as `list` shows it).")

    sub.add_parser(
        "worker-health",
        help="Exit 0 while a worker of this host has a current heartbeat (a container's or pod's health check).",
    )

    store_parser = sub.add_parser(
        "store",
        help="The object store of these settings (HINGE_OBJECT_STORE, HINGE_S3_*): check it, move data sets stored in "
        "Redis into it (migrate), delete what no record owns (gc).",
    )
    store_parser.add_argument(
        "--data-dir",
        default=os.environ.get("HINGE_DATA_DIR", "hinge-data"),
        help="Data directory of the running `hinge serve` (default ./hinge-data), when REDIS_URL is not set.",
    )
    store_sub = store_parser.add_subparsers(dest="store_command", required=True)
    store_sub.add_parser("check", help="Say whether the object store answers and takes our requests (exit 1 if not).")
    migrate = store_sub.add_parser(
        "migrate", help="Move data sets whose arrays are in Redis (stored by an older version) to the object store."
    )
    migrate.add_argument("--dry-run", action="store_true", help="List them; move nothing.")
    gc = store_sub.add_parser("gc", help="Delete the objects no data set or model owns (uploads cut short).")
    gc.add_argument(
        "--grace-s",
        type=float,
        default=None,
        help="Only owners whose newest object is this old (default: the setting).",
    )

    openapi = sub.add_parser("openapi", help="Write the OpenAPI document to openapi/openapi.json.")
    openapi.add_argument("--output", default=str(OPENAPI_PATH), help="Where to write it.")
    openapi.add_argument("--check", action="store_true", help="Fail if the file differs from the document.")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `hinge` command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["worker"]:
        return cmd_worker(argparse.Namespace(), argv[1:])
    if argv[:1] == ["compile"]:
        return cmd_compile(argv[1:])
    if argv[:1] == ["kernels"]:  # the earlier name, kept for scripts and images that use it
        return cmd_compile(argv[1:], prog="hinge kernels")
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return cmd_serve(args)
    if args.command == "api":
        return cmd_api(args)
    if args.command == "openapi":
        return cmd_openapi(args)
    if args.command == "keys":
        return cmd_keys(args)
    if args.command == "store":
        return cmd_store(args)
    if args.command == "worker-health":
        return cmd_worker_health(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
