"""The first run as a user meets it: a fresh clone, `./dev serve`, a dcd job sent as soon as the API answers.

    python -m tests.benchmarks.bench_first_run [--repo .] [--workers 2] [--keep]

1. Clone the repository (``--repo``, default this checkout's committed HEAD) into a temporary folder.
2. Install: ``./dev serve --help`` runs the install step of ``./dev serve`` (a fresh ``.venv``) and stops;
   its seconds are reported apart, as the issue's bars start after the install.
3. Cold start: ``./dev serve`` on a free port with a fresh data folder and no kernel cache (a fresh clone
   has none: the cache is ``__pycache__/hinge-kernels`` next to the sources). As soon as ``/healthz``
   answers, upload a 400-row data set and send a dcd job, then one job per other solver (cpa, ocas, smo,
   sampled_cuts). Record, in seconds from the start of ``./dev serve``: the API's first answer, each
   job's end (it must succeed with a model), ``/readyz`` first 200, and every solver ready
   (``solvers_compiling`` empty). The lines `hinge serve` printed are kept with their times, to check that
   it said something at least every 15 s while it compiled and how close its estimate was.
4. Warm restart: stop it (SIGINT, orderly), start it again on the same folders, and record the same
   figures (ready within 5 s is the bar).

Bars (issue 19, 2 cores): first dcd model <= 30 s, every solver <= 120 s, warm restart ready <= 5 s.
Writes ``results/bench_first_run.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from service.embedded_redis import free_port
from tests.benchmarks.environment import machine

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RESULTS = HERE / "results" / "bench_first_run.json"
SOLVER_PARAMS = {
    "dcd": {"C": 1.0},
    "cpa": {"C": 1.0},
    "ocas": {"C": 1.0},
    "smo": {"C": 1.0, "kernel": {"type": "rbf", "gamma": 0.5}},
    "sampled_cuts": {"C": 1.0, "kernel": {"type": "rbf", "gamma": 0.5}},
}


def demo_file(path: Path, rows: int = 400) -> None:
    rng = random.Random(0)
    with path.open("w") as out:
        for _ in range(rows):
            x = [rng.gauss(0, 1) for _ in range(5)]
            label = 1 if x[0] + 0.5 * x[1] - x[2] + rng.gauss(0, 0.3) > 0 else -1
            out.write(f"{label} " + " ".join(f"{j + 1}:{v:.4f}" for j, v in enumerate(x)) + "\n")


class Serve:
    """`./dev serve` in a clone, its stderr lines kept with their times."""

    def __init__(self, clone: Path, port: int, workers: int, data_dir: Path):
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        env = dict(os.environ)
        for name in ("REDIS_URL", "HINGE_KERNEL_CACHE_DIR", "NUMBA_CACHE_DIR", "VIRTUAL_ENV", "PYTHONPATH"):
            env.pop(name, None)
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            ["./dev", "serve", "--port", str(port), "--workers", str(workers), "--data-dir", str(data_dir)],
            cwd=clone,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.lines: list[tuple[float, str]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append((round(self.elapsed(), 2), line.rstrip()))

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def run_start(serve: Serve, data: Path, *, deadline_s: float = 600.0) -> dict:
    """Time one start of the service, as described in the module docstring."""
    client = httpx.Client(base_url=serve.base, timeout=30.0)
    out: dict = {}
    while True:
        if serve.proc.poll() is not None:
            raise RuntimeError(f"hinge serve exited ({serve.proc.returncode}): {serve.lines[-10:]}")
        try:
            if client.get("/healthz").status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if serve.elapsed() > deadline_s:
            raise RuntimeError("the API never answered")
        time.sleep(0.05)
    out["api_s"] = round(serve.elapsed(), 2)
    with data.open("rb") as handle:
        dataset = client.post("/v1/datasets", files={"file": ("demo.svm", handle)}, params={"name": "demo"})
    dataset.raise_for_status()
    out["upload_s"] = round(serve.elapsed(), 2)
    jobs = {}
    for solver, params in SOLVER_PARAMS.items():
        answer = client.post("/v1/jobs", json={"dataset_id": dataset.json()["id"], "solver": solver, "params": params})
        answer.raise_for_status()
        jobs[solver] = answer.json()["id"]
    out["jobs_s"] = {}
    phases: dict[str, set] = {solver: set() for solver in jobs}
    readyz_first = None
    all_ready = None
    while len(out["jobs_s"]) < len(jobs) or all_ready is None:
        if serve.elapsed() > deadline_s:
            raise RuntimeError(f"not done after {deadline_s} s: {out}")
        for solver, job_id in jobs.items():
            if solver in out["jobs_s"]:
                continue
            job = client.get(f"/v1/jobs/{job_id}").json()
            phases[solver].add((job.get("progress") or {}).get("phase"))
            if job["status"] in ("succeeded", "failed", "canceled"):
                if job["status"] != "succeeded" or not job.get("model_id"):
                    raise RuntimeError(f"{solver} job ended {job['status']}: {job.get('error')}")
                out["jobs_s"][solver] = round(serve.elapsed(), 2)
        ready = client.get("/readyz")
        if ready.status_code == 200:
            readyz_first = readyz_first or round(serve.elapsed(), 2)
            if not ready.json().get("solvers_compiling") and all_ready is None:
                all_ready = round(serve.elapsed(), 2)
        time.sleep(0.2)
    out["readyz_s"] = readyz_first
    out["all_solvers_ready_s"] = all_ready
    out["phases_seen"] = {solver: sorted(p for p in seen if p) for solver, seen in phases.items()}
    client.close()
    return out


def silences(lines: list[tuple[float, str]], until: float) -> float:
    """The longest stretch without a line of `hinge serve` itself (``hinge: ...``, not the workers' logs)
    while it compiled (up to ``until``)."""
    times = [t for t, line in lines if t <= until and line.startswith("hinge: ")]
    return round(max((b - a for a, b in zip(times, times[1:])), default=0.0), 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=str(ROOT), help="Repository to clone (default: this checkout).")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="Keep the clone (its path is printed).")
    parser.add_argument(
        "--working-tree",
        action="store_true",
        help="Copy this checkout's files as they are (uncommitted changes included) instead of cloning HEAD.",
    )
    parser.add_argument(
        "--background-load",
        type=int,
        default=0,
        metavar="N",
        help="Run N busy processes (pure Python loops at normal priority) for the whole run: a laptop running other "
        "things (the issue's loaded case is N = 6 on 2 cores).",
    )
    parser.add_argument("--output", default=str(RESULTS), help="Where the JSON goes (default results/...).")
    args = parser.parse_args()
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.background_load)]
    scratch = Path(tempfile.mkdtemp(prefix="hinge-first-run-"))
    clone = scratch / "hinge"
    result: dict = {"environment": machine(), "workers": args.workers, "background_load": args.background_load}
    try:
        if args.working_tree:
            listed = subprocess.run(
                ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                cwd=args.repo,
                capture_output=True,
                check=True,
            ).stdout.split(b"\0")
            for name in filter(None, (item.decode() for item in listed)):
                source = Path(args.repo) / name
                if source.is_file():
                    (clone / name).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(source, clone / name)
            result["commit"] = "working tree"
        else:
            subprocess.run(["git", "clone", "--quiet", args.repo, str(clone)], check=True)
            result["commit"] = subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True, check=True
            ).stdout.strip()
        begin = time.monotonic()
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        subprocess.run(["./dev", "serve", "--help"], cwd=clone, env=env, check=True, capture_output=True)
        result["install_s"] = round(time.monotonic() - begin, 1)
        data = scratch / "demo.svm"
        demo_file(data)
        data_dir = scratch / "data"
        for label in ("cold", "warm"):
            load_before = os.getloadavg()[0]
            serve = Serve(clone, free_port(), args.workers, data_dir)
            try:
                figures = run_start(serve, data)
                end = time.monotonic() + 10.0  # hinge serve's last line of the start, before stopping it
                while time.monotonic() < end and not any("every solver ready" in line for _, line in serve.lines):
                    if label == "warm":
                        break  # nothing compiled: no such line
                    time.sleep(0.1)
            except BaseException:
                print("\n".join(f"{t:7.2f} {line}" for t, line in serve.lines), file=sys.stderr)
                raise
            finally:
                serve.stop()
            figures["load_before"] = round(load_before, 2)
            figures["lines"] = serve.lines
            figures["longest_silence_s"] = silences(serve.lines, figures["all_solvers_ready_s"] or 0.0)
            estimates = [
                float(m.group(1)) for _, line in serve.lines if (m := re.search(r"about (\d+) s for all", line))
            ]
            figures["estimate_s"] = estimates[0] if estimates else None
            # every estimate printed ("about N s for all", "about N s left"): consecutive ones within 2x
            printed = [float(m.group(1)) for _, line in serve.lines if (m := re.search(r"about (\d+) s", line))]
            figures["estimates_printed_s"] = printed
            figures["largest_estimate_swing"] = round(
                max((max(a, b) / max(min(a, b), 1.0) for a, b in zip(printed, printed[1:])), default=1.0), 2
            )
            result[label] = figures
            print(
                f"{label}: API {figures['api_s']} s, first dcd model {figures['jobs_s']['dcd']} s, "
                f"jobs {figures['jobs_s']}, readyz {figures['readyz_s']} s, every solver ready "
                f"{figures['all_solvers_ready_s']} s (estimate {figures['estimate_s']}), longest silence "
                f"{figures['longest_silence_s']} s",
                flush=True,
            )
    finally:
        for burner in burners:
            burner.kill()
        if args.keep:
            print(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
