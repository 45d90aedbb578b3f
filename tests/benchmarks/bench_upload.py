"""Uploads end to end through a real ``hinge serve``: MB/s of text, plain and gzip, per inflater (issue 22, item 4).

Three files: a9a-like (a9a itself repeated to about 300 MB), TF-IDF-like (``tests.benchmarks.synthetic``
with 300 non-zeros a row over 10^6 features and values with 6 significant digits, about 290 MB) and real
TF-IDF text (20 Newsgroups' training and test posts as uni+bigram TF-IDF, ``tests.benchmarks.text_corpus``:
18,846 rows, 1.18·10^6 features, 29-14,059 non-zeros a row, 122 MB), each plain
and gzip (``gzip -6``, one member). One ``hinge serve --workers 0`` runs per inflater (``HINGE_GZIP_INFLATER``
= zlib, isal, zlib-ng), all at once on neighbouring ports, and every repeat uploads every file to every
service in turn (curl, multipart, streamed), so the ratios come from the same minutes of the same machine.
Each upload is timed by its wall seconds (curl's start to the answer) and by the CPU seconds the service's
processes used meanwhile (API, ingest process, Redis), which depend less on what else the machine runs.
The parser alone (a fresh process, arrays dropped as produced, no HTTP, no Redis) runs on every file with
every inflater in the same run.

    python -m tests.benchmarks.bench_upload [--workdir /tmp/hinge-upload] [--repeats 3] [--port 8410]
        [--inflaters zlib,isal,zlib-ng] [--batch-nice N] [--kinds a9a,tfidf,news20] [--text-source PATH]

writes ``results/bench_upload.json``; rates are medians over the repeats.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.benchmarks import text_corpus
from tests.benchmarks.bench_scale import ROOT, cpu_seconds, process_tree, role, stop_serve
from tests.benchmarks.environment import DATA_DIR, machine

RESULTS = Path(__file__).resolve().parent / "results" / "bench_upload.json"
INFLATERS = ("zlib", "isal", "zlib-ng")
KINDS = ("a9a", "tfidf", "news20")
"""The files: a9a repeated, generated TF-IDF-like text, and real TF-IDF text (20 Newsgroups, ``text_corpus``)."""


def ensure_files(
    workdir: Path, a9a_copies: int, tfidf_rows: int, text_source: Path | None = None, kinds: tuple[str, ...] = KINDS
) -> dict[str, Path]:
    """The plain and gzip files of the ``kinds`` under ``workdir`` (made once)."""
    workdir.mkdir(parents=True, exist_ok=True)
    a9a = workdir / f"a9a-x{a9a_copies}.svm"
    if not a9a.exists():
        with gzip.open(DATA_DIR / "a9a.svm.gz", "rb") as fh:
            one = fh.read()
        with open(str(a9a) + ".part", "wb") as out:
            for _ in range(a9a_copies):
                out.write(one)
        os.rename(str(a9a) + ".part", a9a)
    tfidf = workdir / f"tfidf-{tfidf_rows}.svm"
    if not tfidf.exists():
        subprocess.run(
            [sys.executable, "-m", "tests.benchmarks.synthetic", str(tfidf) + ".part", "--rows", str(tfidf_rows)]
            + ["--nnz", "300", "--significant-digits", "6"],
            cwd=ROOT,
            check=True,
        )
        os.rename(str(tfidf) + ".part", tfidf)
    news20 = workdir / "news20-all.svm"
    if "news20" in kinds and not news20.exists():
        parts = text_corpus.build(workdir / "text", text_source)
        with open(str(news20) + ".part", "wb") as out:
            for part in parts:
                out.write(part.read_bytes())
        os.rename(str(news20) + ".part", news20)
    files = {}
    for kind, plain in (("a9a", a9a), ("tfidf", tfidf), ("news20", news20)):
        if kind not in kinds:
            continue
        packed = Path(str(plain) + ".gz")
        if not packed.exists():
            with open(plain, "rb") as src, open(str(packed) + ".part", "wb") as dst:
                subprocess.run(["gzip", "-6", "-c"], stdin=src, stdout=dst, check=True)
            os.rename(str(packed) + ".part", packed)
        files[f"{kind} plain"] = plain
        files[f"{kind} gzip"] = packed
    return files


PARSER_ALONE = """
import inspect, json, sys, time
from service.ingest import parser
parser.warm_up()
class Drop:
    def reset(self): pass
    def append(self, name, piece): pass
limits = parser.ParseLimits(1 << 34, 1 << 40, 1 << 30, 1 << 40)
t, c = time.perf_counter(), time.process_time()
kw = {'inflater': sys.argv[2]} if 'inflater' in inspect.signature(parser.parse_into).parameters else {}  # older checkouts: zlib
s = parser.parse_into(Drop(), lambda: open(sys.argv[1], 'rb'), limits=limits, value_dtype='auto', **kw)
d, cpu = time.perf_counter() - t, time.process_time() - c
print(json.dumps({'seconds': d, 'cpu_s': cpu, 'text_bytes': s.text_bytes}))
"""


def parser_alone(path: Path, inflater: str) -> dict:
    """The parser on its own in a fresh process (value_dtype auto, the server's default)."""
    out = subprocess.run(
        [sys.executable, "-c", PARSER_ALONE, str(path), inflater], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def tree_cpu(root: int) -> dict[str, float]:
    """CPU seconds used so far by each role of the service's process tree."""
    roles: dict[int, str] = {}
    out: dict[str, float] = {}
    for pid in sorted(process_tree(root)):
        roles[pid] = role(pid, roles)
        seconds = cpu_seconds(pid)
        if seconds is not None:
            out[roles[pid]] = out.get(roles[pid], 0.0) + seconds
    return out


def upload_once(base: str, serve_pid: int, path: Path) -> dict:
    """One upload with curl; wall and CPU seconds of the service's processes, then the data set is deleted."""
    before = tree_cpu(serve_pid)
    load = os.getloadavg()[0]
    start = time.perf_counter()
    out = subprocess.run(
        ["curl", "-sS", "--fail-with-body", "-F", f"file=@{path}", f"{base}/v1/datasets?name={path.name}"],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"upload of {path} failed: {out.stdout} {out.stderr}")
    after = tree_cpu(serve_pid)
    record = json.loads(out.stdout)
    httpx.delete(f"{base}/v1/datasets/{record['id']}", timeout=60).raise_for_status()
    wait_rewrite(serve_pid)
    cpu = {k: round(after.get(k, 0.0) - before.get(k, 0.0), 2) for k in after}
    return {
        "wall_s": round(wall, 3),
        "cpu_s": {k: v for k, v in cpu.items() if v > 0},
        "cpu_total_s": round(sum(cpu.values()), 2),
        "text_bytes": record.get("text_bytes"),
        "nnz": record.get("nnz"),
        "value_dtype": record.get("value_dtype"),
        "load_1min": load,
    }


def wait_rewrite(serve_pid: int, timeout: float = 120.0) -> None:
    """Wait while Redis rewrites its append-only file (started by the upload's growth), so it does not run into the next."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        roles: dict[int, str] = {}
        for pid in sorted(process_tree(serve_pid)):
            roles[pid] = role(pid, roles)
        if "redis rewrite child" not in roles.values():
            return
        time.sleep(0.2)


def wait_warm(base: str, serve_pid: int, sample: Path, timeout: float = 900.0) -> None:
    """Wait until the API answers, then upload ``sample`` once (the ingest process has its kernels after it)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if httpx.get(base + "/healthz", timeout=2).status_code == 200:
                upload_once(base, serve_pid, sample)
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"the service at {base} did not start")


def start_service(workdir: Path, port: int, inflater: str, batch_nice: int | None) -> subprocess.Popen:
    """``hinge serve --workers 0`` with its own data directory, parsing gzip with ``inflater``."""
    data_dir = workdir / f"service-{inflater}"
    shutil.rmtree(data_dir, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT), HINGE_LOG_FORMAT="text", HINGE_GZIP_INFLATER=inflater)
    if batch_nice is not None:
        env["HINGE_BATCH_NICE"] = str(batch_nice)
    env.pop("REDIS_URL", None)
    argv = [sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--workers", "0"]
    argv += ["--data-dir", str(data_dir), "--log-level", "warning"]
    return subprocess.Popen(argv, cwd=ROOT, env=env, start_new_session=True)


def summarize(runs: list[dict]) -> dict:
    """Medians of MB/s (wall) and CPU seconds per MB over the repeats."""
    rates = [r["text_bytes"] / r["seconds"] / 1e6 for r in runs]
    cpu_per_mb = [r["cpu_s"] / (r["text_bytes"] / 1e6) for r in runs]
    return {
        "mb_per_s": round(statistics.median(rates), 1),
        "mb_per_s_all": [round(x, 1) for x in rates],
        "cpu_ms_per_mb": round(1000 * statistics.median(cpu_per_mb), 2),
    }


def main(argv=None) -> int:
    """Run the benchmark; write results/bench_upload.json and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/hinge-upload"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--port", type=int, default=8410)
    ap.add_argument("--inflaters", default=",".join(INFLATERS))
    ap.add_argument("--a9a-copies", type=int, default=128)
    ap.add_argument("--tfidf-rows", type=int, default=60_000)
    ap.add_argument("--batch-nice", type=int, default=None, help="HINGE_BATCH_NICE of the services (default: theirs)")
    ap.add_argument("--skip-parser-alone", action="store_true")
    ap.add_argument("--kinds", default=",".join(KINDS), help="which files: a9a, tfidf, news20")
    ap.add_argument("--text-source", type=Path, default=None, help="20news-bydate.tar.gz or its folder (text_corpus)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the services on the way out
    inflaters = [x for x in args.inflaters.split(",") if x]
    kinds = tuple(k for k in args.kinds.split(",") if k)
    files = ensure_files(args.workdir, args.a9a_copies, args.tfidf_rows, args.text_source, kinds)
    result: dict = {"machine": machine(), "files": {k: p.stat().st_size for k, p in files.items()}, "load_before": None}
    result["load_before"] = os.getloadavg()
    services = {
        name: start_service(args.workdir, args.port + i, name, args.batch_nice) for i, name in enumerate(inflaters)
    }
    alone: dict[str, list[dict]] = {}
    uploads: dict[str, list[dict]] = {}
    try:
        sample = args.workdir / "warm-up.svm.gz"
        with open(next(p for k, p in files.items() if k.endswith(" plain")), "rb") as src:
            head = src.read(1 << 20)
            sample.write_bytes(gzip.compress(head[: head.rfind(b"\n") + 1]))
        for i, name in enumerate(inflaters):
            wait_warm(f"http://127.0.0.1:{args.port + i}", services[name].pid, sample)
        time.sleep(2.0)
        for rep in range(args.repeats):
            for label, path in files.items():
                for i, name in enumerate(inflaters):
                    key = f"{label} / {name}"
                    if not args.skip_parser_alone:
                        a = parser_alone(path, name)
                        alone.setdefault(key, []).append(a)
                    u = upload_once(f"http://127.0.0.1:{args.port + i}", services[name].pid, path)
                    u["seconds"] = u["wall_s"]
                    u["cpu_s_by_role"] = u.pop("cpu_s")
                    uploads.setdefault(key, []).append(u)
                    line = f"[{rep}] {key}: upload {u['text_bytes'] / u['wall_s'] / 1e6:.1f} MB/s"
                    line += f" (cpu {u['cpu_s_by_role']}, load {u['load_1min']:.1f})"
                    if not args.skip_parser_alone:
                        line += f", parser alone {a['text_bytes'] / a['seconds'] / 1e6:.1f} MB/s"
                    print(line, flush=True)
    finally:
        for serve in services.values():
            stop_serve(serve)
    result["load_after"] = os.getloadavg()
    result["uploads"] = {
        k: dict(summarize([dict(r, cpu_s=r["cpu_total_s"]) for r in v]), runs=v) for k, v in uploads.items()
    }
    result["parser_alone"] = {k: dict(summarize(v), runs=v) for k, v in alone.items()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nload {result['load_before']} -> {result['load_after']}")
    print(f"{'file / inflater':28s} {'upload MB/s':>11s} {'CPU ms/MB':>9s} {'parser MB/s':>11s} {'CPU ms/MB':>9s}")
    for key, u in result["uploads"].items():
        a = result["parser_alone"].get(key, {})
        print(
            f"{key:28s} {u['mb_per_s']:11.1f} {u['cpu_ms_per_mb']:9.2f} "
            f"{a.get('mb_per_s', float('nan')):11.1f} {a.get('cpu_ms_per_mb', float('nan')):9.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
