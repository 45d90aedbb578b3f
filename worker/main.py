"""`hinge worker`: warm the numba kernels, then take jobs from the RQ queue.

By default a job runs inside the worker process (RQ's SimpleWorker): the kernels compiled at
warm-up stay loaded and a job starts in about 10 ms. ``--execution fork`` uses RQ's forking
Worker instead (a fresh work horse per job: more isolation, about 50 ms more per job). numba's
default threading layer (GNU OpenMP) is not fork-safe, so the worker selects the 'workqueue'
layer before numba is imported, which keeps both modes and process pools inside jobs working.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys


def main(argv: list[str] | None = None) -> int:
    """Start one worker process."""
    os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")
    parser = argparse.ArgumentParser(prog="hinge worker", description="Run one training worker.")
    parser.add_argument("--burst", action="store_true", help="Quit when the queue is empty.")
    parser.add_argument("--name", default=None, help="Worker name (default: host and pid).")
    parser.add_argument(
        "--execution",
        choices=("inline", "fork"),
        default=os.environ.get("HINGE_WORKER_EXECUTION", "inline"),
        help="Run each job inside the worker process (inline, default) or in a forked work horse (fork).",
    )
    parser.add_argument("--die-with-parent", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--log-level", default=os.environ.get("HINGE_LOG_LEVEL", "INFO"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    log = logging.getLogger("hinge.worker")

    if args.die_with_parent:
        from service.ingest.entry import die_with_parent

        die_with_parent()

    import redis
    from rq import Queue, SimpleWorker, Worker
    from rq.serializers import JSONSerializer

    from service.config import get_settings
    from worker.registry import warm_up_all

    os.environ["HINGE_WORKER_PID"] = str(os.getpid())
    settings = get_settings()
    if not settings.redis_url:
        print("hinge worker: REDIS_URL is not set", file=sys.stderr)
        return 2
    seconds = warm_up_all()
    import worker.jobs  # noqa: F401  (imported once here, so every forked work horse has it loaded)
    log.info("kernels ready in %.2f s: %s", sum(seconds.values()), seconds)
    client = redis.Redis.from_url(settings.redis_url)
    queue = Queue(settings.queue_name, connection=client, serializer=JSONSerializer)
    worker_class = SimpleWorker if args.execution == "inline" else Worker
    worker = worker_class([queue], connection=client, serializer=JSONSerializer, name=args.name)
    worker.work(burst=args.burst, logging_level=args.log_level.upper(), with_scheduler=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
