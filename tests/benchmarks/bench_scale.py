"""10^8 non-zeros end to end: upload, train (ocas on 2 processes, dcd), evaluate and predict through a real
`hinge serve`, sampling the memory (PSS) of every process of the service (issue 10, item 4).

    nice python -m tests.benchmarks.bench_scale [--rows 2000000] [--test-rows 100000] [--workdir /tmp/hinge-scale]
        [--port 8400] [--solvers ocas,dcd] [--value-dtype auto] [--keep-data]

The data come from ``tests.benchmarks.synthetic`` (seed 0: 50 non-zeros a row over 10^6 features, values
with four decimals): ``--rows`` training rows and ``--test-rows`` held-out rows (the rows that follow, same
seed). The files are written to ``--workdir`` once and reused.

What is measured:

* the parser alone on the training file, in a fresh process (MB/s of text, no Redis);
* the upload through HTTP: curl streams the file as multipart to ``POST /v1/datasets``; wall seconds
  from the first byte sent to the 201 answer, and MB/s of text;
* each solver's job: wall seconds from submit to ``succeeded`` and the model's solver seconds,
  iterations, stop reason, gap; evaluation on the held-out set (accuracy) and a predict request;
* memory: every 0.5 s, the PSS of every process in the tree of ``hinge serve`` (Redis and its
  append-only-file rewrite child, the API, the ingest process, workers, heartbeats, solver helpers),
  read from /proc/PID/smaps_rollup. The peak of the sum, per phase, with what each process held then,
  against 3x the binary CSR at 12 bytes a non-zero (int32 index + float64 value).

Writes tests/benchmarks/results/bench_scale.json.

The data sets in an S3 server (issue 31, item 7): ``--object-store s3`` starts a SeaweedFS (``weed mini``, as the
tests do) and points the service at it; its process is sampled with the service's (the deployment's memory).
Each job's ``data_load`` (seconds, bytes fetched, from the cache) is recorded: the first job fetches the data set
from the store, ``--repeat-first`` runs the first solver again to see a cache hit::

    python -m tests.benchmarks.bench_scale --object-store s3 --solvers ocas,dcd --repeat-first \
        --output tests/benchmarks/results/bench_scale_s3.json

Paper 003's Checkers at 10^6 rows through the service (issue 22, item 5)::

    python -m tests.benchmarks.bench_scale --data checkers --rows 1000000 --test-rows 100000 \
        --solvers sampled_cuts --params '{"kernel": {"type": "rbf", "gamma": 10}, "variant": "constant"}' \
        --skip-parser-alone --output tests/benchmarks/results/bench_scale_checkers.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from tests.benchmarks.environment import machine
from tests.helpers import service_ready, terminate_group

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results" / "bench_scale.json"
SAMPLE_S = 0.5
CSR_BYTES_PER_NNZ = 12


# ---------------------------------------------------------------------------------------------
# the process tree and its PSS


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # the command name is in parentheses and may contain spaces: the ppid follows the last ')'
        fields = stat[stat.rfind(b")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants."""
    children = _children_map()
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def pss_parts_kib(pid: int) -> dict[str, int] | None:
    """Proportional set size of a process in KiB: total, and its anonymous, file-mapped and shared-memory parts."""
    out = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                name = line.split(":", 1)[0]
                if name in ("Pss", "Pss_Anon", "Pss_File", "Pss_Shmem"):
                    out[name] = int(line.split()[1])
    except OSError:
        return None
    return out if "Pss" in out else None


def pss_kib(pid: int) -> int | None:
    """Proportional set size of a process in KiB (None when it is gone)."""
    parts = pss_parts_kib(pid)
    return None if parts is None else parts["Pss"]


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds a process has used so far (None when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def role(pid: int, parent_roles: dict[int, str]) -> str:
    """A short name for a process of the service tree, from its command line and its parent."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        ppid = int(stat[stat.rfind(b")") + 2 :].split()[1])
    except OSError:
        return "gone"
    text = " ".join(argv)
    parent = parent_roles.get(ppid, "")
    if "weed" in text and " mini " in f" {text} ":
        return "s3 server"
    if "redis" in text and ("redis-server" in text or "redis-rdb" in text or "redis-aof" in text):
        return "redis" if not parent.startswith("redis") else "redis rewrite child"
    if "spawn_main" in text or "multiprocessing" in text:
        if "resource_tracker" in text:
            return "resource tracker"
        if parent == "api":
            return "ingest"
        if parent == "worker":
            return "heartbeat"
        return f"{parent} spawned child"
    if " serve" in text:
        return "supervisor"
    if " api" in text:
        return "api"
    if "worker" in text:
        if parent.startswith("worker"):
            return "worker child" if parent == "worker" else parent
        return "worker"
    return text[:40]


class PssSampler(threading.Thread):
    """Samples the PSS of every process under ``root`` every SAMPLE_S seconds, tagged by phase."""

    def __init__(self, root: int, extra_roots: tuple[int, ...] = ()):
        super().__init__(daemon=True)
        self.root = root
        self.extra_roots = extra_roots  # other processes of the deployment (an S3 server)
        self.phase = "start"
        self.samples: list[dict] = []
        self._halt = threading.Event()
        self._roles: dict[int, str] = {}
        self._cpu: dict[int, float] = {}  # last CPU seconds seen per process (kept after it exits)

    def run(self) -> None:
        start = time.monotonic()
        while not self._halt.is_set():
            tick = time.monotonic()
            pids = [pid for root in (self.root, *self.extra_roots) for pid in process_tree(root)]
            per: dict[str, float] = {}
            kinds: dict[str, dict[str, float]] = {}
            total = 0
            for pid in pids:
                parts = pss_parts_kib(pid)
                if parts is None:
                    continue
                if pid not in self._roles:
                    self._roles[pid] = role(pid, self._roles)
                name = self._roles[pid]
                per[name] = per.get(name, 0.0) + parts["Pss"] / 1024.0
                split = kinds.setdefault(name, {"anon": 0.0, "file": 0.0, "shmem": 0.0})
                for key, field in (("anon", "Pss_Anon"), ("file", "Pss_File"), ("shmem", "Pss_Shmem")):
                    split[key] += parts.get(field, 0) / 1024.0
                total += parts["Pss"]
                used = cpu_seconds(pid)
                if used is not None:
                    self._cpu[pid] = used
            cpu: dict[str, float] = {}
            for pid, used in self._cpu.items():
                name = self._roles.get(pid, "?")
                cpu[name] = cpu.get(name, 0.0) + used
            self.samples.append(
                {
                    "cpu_s": {k: round(v, 2) for k, v in sorted(cpu.items())},
                    "t": round(tick - start, 2),
                    "phase": self.phase,
                    "total_mib": round(total / 1024.0, 1),
                    "by_role_mib": {k: round(v, 1) for k, v in sorted(per.items())},
                    "by_role_kind_mib": {
                        k: {kk: round(vv, 1) for kk, vv in v.items()} for k, v in sorted(kinds.items())
                    },
                }
            )
            self._halt.wait(max(0.0, SAMPLE_S - (time.monotonic() - tick)))

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join()

    def cpu_by_phase(self) -> dict:
        """CPU seconds each kind of process used during each phase (from the samples that open and close it)."""
        out: dict = {}
        starts: dict = {}
        last: dict = {}
        for s in self.samples:
            starts.setdefault(s["phase"], s["cpu_s"])
            last[s["phase"]] = s["cpu_s"]
        phases = list(starts)
        for i, phase in enumerate(phases):
            end = starts[phases[i + 1]] if i + 1 < len(phases) else last[phase]
            begin = starts[phase]
            out[phase] = {k: round(v - begin.get(k, 0.0), 2) for k, v in end.items() if v - begin.get(k, 0.0) > 0.05}
        return out

    def peaks(self) -> dict:
        """The largest total per phase and overall, with the per-process figures of that sample."""
        out: dict = {}
        for s in self.samples:
            for key in (s["phase"], "overall"):
                if key not in out or s["total_mib"] > out[key]["total_mib"]:
                    out[key] = s
        return out


# ---------------------------------------------------------------------------------------------
# the service


def start_serve(port: int, workers: int, data_dir: Path) -> subprocess.Popen:
    """`hinge serve` of this checkout in a session of its own, from an empty ``data_dir`` (its embedded Redis, never
    a ``REDIS_URL`` of the caller's), logging warnings only."""
    shutil.rmtree(data_dir, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("REDIS_URL", None)
    command = [sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--workers", str(workers)]
    return subprocess.Popen(
        [*command, "--data-dir", str(data_dir), "--log-level", "warning"], cwd=ROOT, env=env, start_new_session=True
    )


def stop_serve(serve: subprocess.Popen) -> None:
    """Stop a `hinge serve` started in its own session: SIGTERM to its group, SIGKILL after 60 s."""
    terminate_group(serve, 60)


def wait_ready(base: str, timeout: float = 900.0, *, all_kernels: bool = False) -> None:
    """Until /readyz answers 200; with ``all_kernels``, until no solver's kernels are still compiling either
    (``tests.helpers.service_ready``)."""
    end = time.monotonic() + timeout
    announced = False
    while time.monotonic() < end:
        compiling = service_ready(base, all_kernels=all_kernels)
        if compiling == []:
            return
        if compiling and not announced:
            print(f"waiting for the kernels of {', '.join(compiling)} to compile", flush=True)
            announced = True
        time.sleep(0.5)
    raise SystemExit("the service did not become ready")


def upload(base: str, path: Path, name: str, value_dtype: str | None) -> tuple[dict, float]:
    """Upload with curl (multipart, streamed from the file); returns the answer and the wall seconds."""
    url = f"{base}/v1/datasets?name={name}"
    if value_dtype:
        url += f"&value_dtype={value_dtype}"
    start = time.perf_counter()
    out = subprocess.run(
        ["curl", "-sS", "--fail-with-body", "-F", f"file=@{path}", url], capture_output=True, text=True
    )
    seconds = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"upload of {path} failed: {out.stdout} {out.stderr}")
    return json.loads(out.stdout), seconds


def train(http: httpx.Client, dataset_id: str, solver: str, params: dict) -> dict:
    start = time.perf_counter()
    job = http.post("/v1/jobs", json={"dataset_id": dataset_id, "solver": solver, "params": params}).json()
    while True:
        state = http.get(f"/v1/jobs/{job['id']}").json()
        if state["status"] not in ("queued", "running"):
            break
        time.sleep(1.0)
    wall = time.perf_counter() - start
    if state["status"] != "succeeded":
        raise SystemExit(f"{solver} job ended {state['status']}: {state.get('error')}")
    model = http.get(f"/v1/models/{state['model_id']}").json()
    return {
        "job_id": job["id"],
        "model_id": state["model_id"],
        "wall_s": round(wall, 2),
        "solver_s": model.get("training_seconds"),
        "n_iter": model.get("n_iter"),
        "stop_reason": model.get("stop_reason"),
        "objective": model.get("objective"),
        "gap_rel": model.get("gap_rel"),
        "train_accuracy": model.get("train_accuracy"),
        "data_load": state.get("data_load"),
    }


def redis_memory(data_dir: Path) -> dict:
    """The embedded Redis's memory figures (used, peak, maxmemory) of the `hinge serve` on ``data_dir``."""
    import redis

    url = json.loads((data_dir / "serve.json").read_text())["redis_url"]
    client = redis.Redis.from_url(url)
    try:
        info = client.info("memory")
    finally:
        client.close()
    return {key: int(info[key]) for key in ("used_memory", "used_memory_peak", "maxmemory")}


def parser_alone(path: Path, value_dtype: str | None) -> dict:
    """The parser on its own, in a fresh process, its arrays dropped as they come (no Redis, no copies kept)."""
    code = (
        "import json, resource, sys, time\n"
        "from service.ingest import parser\n"
        "parser.warm_up()\n"
        "class Drop:\n"
        "    def reset(self): pass\n"
        "    def append(self, name, piece): pass\n"
        "limits = parser.ParseLimits(1 << 34, 1 << 40, 1 << 30, 1 << 40)\n"
        "t, c = time.perf_counter(), time.process_time()\n"
        "s = parser.parse_into(Drop(), lambda: open(sys.argv[1], 'rb'), value_dtype=sys.argv[2], limits=limits)\n"
        "d, cpu = time.perf_counter() - t, time.process_time() - c\n"
        "print(json.dumps({'seconds': round(d, 2), 'mb_per_s': round(s.text_bytes / d / 1e6, 1), 'nnz': s.nnz,"
        " 'cpu_s': round(cpu, 2), 'mb_per_cpu_s': round(s.text_bytes / cpu / 1e6, 1),"
        " 'value_dtype': s.value_dtype, 'max_rss_mib': round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path), value_dtype or "auto"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def write_checkers(path: Path, rows: int, seed: int, data: str = "checkers") -> None:
    """Paper 003's Checkers (``bench_sampled_cuts_accuracy.checkers``), or issue 36's noisy board (``board`` with
    2% of the labels flipped), as svmlight text, 6 decimals."""
    from tests.benchmarks.bench_sampled_cuts_accuracy import board, checkers

    X, y = checkers(rows, seed) if data == "checkers" else board(rows, seed, flipped=0.02)
    with open(path, "w") as out:
        for start in range(0, rows, 100_000):
            block = slice(start, min(rows, start + 100_000))
            out.writelines(
                f"{int(label):+d} 1:{a:.6f} 2:{b:.6f}\n" for label, (a, b) in zip(y[block], X[block], strict=True)
            )


def ensure_data(workdir: Path, rows: int, test_rows: int, data: str = "synthetic") -> tuple[Path, Path]:
    workdir.mkdir(parents=True, exist_ok=True)
    if data in ("checkers", "board"):
        train_path, test_path = workdir / f"{data}-{rows}.svm", workdir / f"{data}-{test_rows}-test.svm"
        for path, n, seed in ((train_path, rows, 0), (test_path, test_rows, 10_000)):
            if not path.exists():
                write_checkers(Path(str(path) + ".part"), n, seed, data)
                os.rename(str(path) + ".part", path)
        return train_path, test_path
    train_path = workdir / f"synthetic-{rows}.svm"
    test_path = workdir / f"synthetic-{test_rows}-from-{rows}.svm"
    for path, n, first in ((train_path, rows, 0), (test_path, test_rows, rows)):
        if not path.exists():
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "tests.benchmarks.synthetic",
                    str(path) + ".part",
                    "--rows",
                    str(n),
                    "--first-row",
                    str(first),
                ],
                cwd=ROOT,
                check=True,
            )
            os.rename(str(path) + ".part", path)
    return train_path, test_path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--test-rows", type=int, default=100_000)
    ap.add_argument("--workdir", default="/tmp/hinge-scale")
    ap.add_argument("--port", type=int, default=8400)
    ap.add_argument("--solvers", default="ocas,dcd")
    ap.add_argument(
        "--data",
        default="synthetic",
        choices=("synthetic", "checkers", "board"),
        help="synthetic: sparse text-like rows; checkers: paper 003's Checkers (2 features); board: issue 36's "
        "noisy 4 x 4 checkerboard (2% of the labels flipped)",
    )
    ap.add_argument("--params", default="{}", help="JSON merged into every training request's params")
    ap.add_argument("--value-dtype", default=None, help="upload option value_dtype (default: the server's default)")
    ap.add_argument("--C", type=float, default=1.0)
    ap.add_argument("--skip-parser-alone", action="store_true")
    ap.add_argument("--keep-data", action="store_true", help="keep the service's data directory afterwards")
    ap.add_argument("--output", default=str(RESULTS))
    ap.add_argument("--object-store", default="local", choices=("local", "s3"), help="s3: a SeaweedFS started here")
    ap.add_argument("--repeat-first", action="store_true", help="train the first solver a second time (a cache hit)")
    ap.add_argument("--redis-maxmemory", default=None, help="HINGE_REDIS_MAXMEMORY of the service (e.g. 256mb)")
    args = ap.parse_args(argv)

    workdir = Path(args.workdir)
    train_path, test_path = ensure_data(workdir, args.rows, args.test_rows, args.data)
    text_bytes = train_path.stat().st_size
    result: dict = {
        "machine": machine(),
        "rows": args.rows,
        "test_rows": args.test_rows,
        "train_file_bytes": text_bytes,
        "test_file_bytes": test_path.stat().st_size,
        "C": args.C,
        "value_dtype": args.value_dtype,
        "data": args.data,
        "params": json.loads(args.params),
    }
    load_before = os.getloadavg()
    if not args.skip_parser_alone:
        result["parser_alone"] = parser_alone(train_path, args.value_dtype)
        print("parser alone:", result["parser_alone"], flush=True)

    data_dir = workdir / "service-data"
    shutil.rmtree(data_dir, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT), HINGE_LOG_FORMAT="text")
    env.pop("REDIS_URL", None)
    s3 = None
    if args.object_store == "s3":
        from tests.s3_server import SeaweedS3

        s3 = SeaweedS3(workdir / "seaweedfs")
        shutil.rmtree(s3.root, ignore_errors=True)
        s3.start()
        env.update(s3.env())
    result["object_store"] = args.object_store
    if args.redis_maxmemory:
        env["HINGE_REDIS_MAXMEMORY"] = args.redis_maxmemory
        result["redis_maxmemory"] = args.redis_maxmemory
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "service.cli",
            "serve",
            "--port",
            str(args.port),
            "--workers",
            "2",
            "--data-dir",
            str(data_dir),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{args.port}"
    sampler = PssSampler(serve.pid, (s3.proc.pid,) if s3 is not None and s3.proc is not None else ())
    try:
        wait_ready(base, all_kernels=True)
        time.sleep(2.0)
        sampler.start()
        time.sleep(2.0)
        http = httpx.Client(base_url=base, timeout=600)

        sampler.phase = "upload"
        train_ds, upload_s = upload(base, train_path, "synthetic-train", args.value_dtype)
        result["upload"] = {
            "seconds": round(upload_s, 2),
            "mb_per_s": round(text_bytes / upload_s / 1e6, 1),
            "dataset": {k: train_ds.get(k) for k in ("id", "n_samples", "n_features", "nnz", "value_dtype", "bytes")},
        }
        print("upload:", result["upload"], flush=True)
        sampler.phase = "upload test"
        test_ds, test_s = upload(base, test_path, "synthetic-test", args.value_dtype)
        result["upload_test"] = {"seconds": round(test_s, 2)}
        nnz = int(train_ds["nnz"])
        result["csr_bytes"] = nnz * CSR_BYTES_PER_NNZ
        result["budget_mib"] = round(3 * nnz * CSR_BYTES_PER_NNZ / 2**20, 1)

        result["solvers"] = {}
        solvers = [s for s in args.solvers.split(",") if s]
        if args.repeat_first and solvers:
            solvers.insert(1, solvers[0])
        for index, solver in enumerate(solvers):
            sampler.phase = f"train {solver}" if solver not in solvers[:index] else f"train {solver} again"
            params = {"C": args.C}
            if solver == "ocas":
                params["n_processes"] = 2
            params.update(json.loads(args.params))
            fit = train(http, train_ds["id"], solver, params)
            sampler.phase = f"evaluate {solver}"
            t = time.perf_counter()
            evaluation = http.post(f"/v1/models/{fit['model_id']}/evaluate", json={"dataset_id": test_ds["id"]}).json()
            fit["evaluate_s"] = round(time.perf_counter() - t, 2)
            fit["test_accuracy"] = evaluation.get("accuracy")
            sampler.phase = f"predict {solver}"
            rows = [{"1": 0.1, "2": 0.2}, {"1": 2.5, "2": 0.25}]
            t = time.perf_counter()
            answer = http.post(f"/v1/models/{fit['model_id']}/predict", json={"instances": rows})
            fit["predict_ms"] = round((time.perf_counter() - t) * 1000, 1)
            fit["predict_status"] = answer.status_code
            result["solvers"][solver if solver not in solvers[:index] else f"{solver} again"] = fit
            print(solver, fit, flush=True)
        sampler.phase = "idle"
        time.sleep(2.0)
        result["redis"] = redis_memory(data_dir)
    finally:
        try:
            sampler.stop()
        finally:
            stop_serve(serve)
            if s3 is not None:
                s3.stop()
        aof = data_dir / "redis"
        result["aof_bytes"] = sum(f.stat().st_size for f in aof.rglob("*") if f.is_file()) if aof.exists() else None
        if not args.keep_data:
            shutil.rmtree(data_dir, ignore_errors=True)

    peaks = sampler.peaks()
    result["memory"] = {
        "sample_s": SAMPLE_S,
        "peak_mib": peaks["overall"]["total_mib"],
        "peak_phase": peaks["overall"]["phase"],
        "peak_over_csr": round(peaks["overall"]["total_mib"] * 2**20 / result["csr_bytes"], 2),
        "peaks_by_phase": {k: v for k, v in peaks.items() if k != "overall"},
        "cpu_s_by_phase": sampler.cpu_by_phase(),
        # the totals as "t phase total" every 2 s, the per-process figures every 60 s (peaks: from all samples)
        "samples_t_phase_total_mib": [f"{x['t']} {x['phase']} {x['total_mib']}" for x in sampler.samples[::4]],
        "samples_by_role_every_60s": [x for x in sampler.samples if int(x["t"] / 60) != int((x["t"] - SAMPLE_S) / 60)],
    }
    result["load_average_before"] = load_before
    result["load_average_after"] = os.getloadavg()
    print(
        "peak PSS",
        result["memory"]["peak_mib"],
        "MiB in",
        result["memory"]["peak_phase"],
        f"({result['memory']['peak_over_csr']}x the 12-byte CSR; budget {result['budget_mib']} MiB)",
    )
    for phase, sample in result["memory"]["peaks_by_phase"].items():
        print(f"  {phase:<16} {sample['total_mib']:>8.0f} MiB  {sample['by_role_mib']}")
        print(f"  {'':<16} CPU s {result['memory']['cpu_s_by_phase'].get(phase)}")
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
