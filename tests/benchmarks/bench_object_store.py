"""Uploads into the object store against uploads into Redis, side by side (issue 31, item 7).

Three services run at once on neighbouring ports, each ``hinge serve --workers 0`` with its own data directory:

* ``redis``: the code before the object store (a git worktree at ``--base``, default 37445a3), which stores a
  data set's arrays in its embedded Redis: the "upload into Redis today";
* ``s3``: this checkout with ``HINGE_OBJECT_STORE=s3``, writing shards to a SeaweedFS (``weed mini``, started
  here as the tests start it) over HTTP on loopback;
* ``local``: this checkout with its default, the local directory store.

Every repeat uploads every file (``tests.benchmarks.bench_upload``'s a9a-like and TF-IDF-like, plain and gzip)
to every service in turn, so the ratios come from the same minutes of the same machine. Each upload is timed by
its wall seconds (curl's start to the answer, the data set then deleted) and by the CPU seconds the service's
processes used meanwhile (the SeaweedFS process counted with the ``s3`` service).

    python -m tests.benchmarks.bench_object_store [--workdir /tmp/hinge-upload] [--repeats 3] [--port 8420]
        [--base 37445a3] [--arms redis,s3,local]

writes ``results/bench_object_store.json``; rates are medians over the repeats, ratios are against ``redis``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tests.benchmarks.bench_scale import ROOT, stop_serve
from tests.benchmarks.bench_upload import ensure_files, upload_once, wait_warm
from tests.benchmarks.environment import machine
from tests.s3_server import SeaweedS3

RESULTS = Path(__file__).resolve().parent / "results" / "bench_object_store.json"


def worktree(base: str, workdir: Path) -> Path:
    """A checkout of ``base`` beside this one (made once)."""
    path = workdir / f"worktree-{base}"
    if not (path / "service").exists():
        subprocess.run(["git", "worktree", "add", "--detach", str(path), base], cwd=ROOT, check=True)
    return path


def start(code: Path, data_dir: Path, port: int, env_extra: dict[str, str]) -> subprocess.Popen:
    """``hinge serve --workers 0`` of the code at ``code`` (on PYTHONPATH, before the installed one)."""
    shutil.rmtree(data_dir, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(code), HINGE_LOG_FORMAT="text", **env_extra)
    env.pop("REDIS_URL", None)
    argv = [sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--workers", "0"]
    argv += ["--data-dir", str(data_dir), "--log-level", "warning"]
    return subprocess.Popen(argv, cwd=code, env=env, start_new_session=True)


def process_cpu(pid: int) -> float:
    """CPU seconds of one process and its children so far (from /proc; 0 once it is gone)."""
    from tests.benchmarks.bench_scale import cpu_seconds, process_tree

    return sum(cpu_seconds(p) or 0.0 for p in process_tree(pid))


def main(argv=None) -> int:
    """Run the comparison; write the JSON and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/hinge-upload"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--port", type=int, default=8420)
    ap.add_argument("--base", default="37445a3", help="the commit whose uploads go to Redis")
    ap.add_argument("--arms", default="redis,s3,local")
    ap.add_argument("--a9a-copies", type=int, default=128)
    ap.add_argument("--tfidf-rows", type=int, default=60_000)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    arms = [a for a in args.arms.split(",") if a]
    files = ensure_files(args.workdir, args.a9a_copies, args.tfidf_rows)
    s3 = SeaweedS3(args.workdir / "seaweedfs")
    shutil.rmtree(s3.root, ignore_errors=True)
    services: dict[str, subprocess.Popen] = {}
    result: dict = {"machine": machine(), "base": args.base, "files": {k: p.stat().st_size for k, p in files.items()}}
    uploads: dict[str, list[dict]] = {}
    try:
        if "s3" in arms:
            s3.start()
        for i, arm in enumerate(arms):
            code = worktree(args.base, args.workdir) if arm == "redis" else ROOT
            extra = s3.env() if arm == "s3" else {}
            services[arm] = start(code, args.workdir / f"service-{arm}", args.port + i, extra)
        sample = args.workdir / "warm-up-object-store.svm"
        with open(files["a9a plain"], "rb") as src:
            head = src.read(1 << 20)
        sample.write_bytes(head[: head.rfind(b"\n") + 1])
        for i, arm in enumerate(arms):
            wait_warm(f"http://127.0.0.1:{args.port + i}", services[arm].pid, sample)
        result["load_before"] = os.getloadavg()
        time.sleep(2.0)
        for rep in range(args.repeats):
            for label, path in files.items():
                for i, arm in enumerate(arms):
                    store_cpu = process_cpu(s3.proc.pid) if arm == "s3" and s3.proc else 0.0
                    run = upload_once(f"http://127.0.0.1:{args.port + i}", services[arm].pid, path)
                    if arm == "s3" and s3.proc:
                        run["cpu_s"]["seaweedfs"] = round(process_cpu(s3.proc.pid) - store_cpu, 2)
                        run["cpu_total_s"] = round(sum(run["cpu_s"].values()), 2)
                    rate = run["text_bytes"] / run["wall_s"] / 1e6
                    uploads.setdefault(f"{label} / {arm}", []).append(run)
                    print(f"[{rep}] {label} / {arm}: {rate:.1f} MB/s (cpu {run['cpu_s']}, load {run['load_1min']:.1f})")
        result["load_after"] = os.getloadavg()
    finally:
        for serve in services.values():
            stop_serve(serve)
        s3.stop()
    table: dict = {}
    for key, runs in uploads.items():
        rates = [r["text_bytes"] / r["wall_s"] / 1e6 for r in runs]
        cpu = [r["cpu_total_s"] / (r["text_bytes"] / 1e6) for r in runs]
        table[key] = {
            "mb_per_s": round(statistics.median(rates), 1),
            "mb_per_s_all": [round(x, 1) for x in rates],
            "cpu_ms_per_mb": round(1000 * statistics.median(cpu), 2),
            "runs": runs,
        }
    for label in files:
        base = table.get(f"{label} / redis")
        for arm in arms:
            row = table.get(f"{label} / {arm}")
            if base and row and arm != "redis":
                row["ratio_to_redis"] = round(row["mb_per_s"] / base["mb_per_s"], 3)
                # per repeat, as they ran side by side
                row["ratios_per_repeat"] = [
                    round(a["wall_s"] and (b["wall_s"] / a["wall_s"]), 3) for a, b in zip(row["runs"], base["runs"])
                ]
    result["uploads"] = table
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nload {result.get('load_before')} -> {result.get('load_after')}")
    print(f"{'file / arm':24s} {'MB/s':>7s} {'x redis':>8s} {'CPU ms/MB':>9s}  all")
    for key, row in table.items():
        ratio = row.get("ratio_to_redis")
        print(
            f"{key:24s} {row['mb_per_s']:7.1f} {ratio if ratio is not None else '':>8} {row['cpu_ms_per_mb']:9.2f}  "
            f"{row['mb_per_s_all']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
