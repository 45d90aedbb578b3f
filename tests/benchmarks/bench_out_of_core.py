"""ocas (and cpa) on a data set larger than the memory the job may use, against the same training in memory.

Issue 34, item 1: a data set of at least 4·10^8 non-zeros trained by ocas under a memory limit of half its CSR,
to the same objective as in memory, at most 2x its in-memory time.

The data set is written as the worker cache writes one (a folder of ``.npy`` files: indptr int64, indices int32,
data float32, y), sparse rows with features drawn at random and labels from a planted weight vector with 10%
of them flipped. Each run is a process of its own:

* ``memory``: the arrays read into memory first (``np.load`` without a map), ``memory_bytes`` None;
* ``out_of_core``: the process in a cgroup (v1 or v2, made here and removed after) whose memory limit is
  ``--limit-share`` (default 0.5) of the CSR's bytes, the files' pages dropped from the page cache first (so
  that none is charged elsewhere), the arrays memory-mapped as the worker cache maps them, and
  ``memory_bytes`` what ``worker.runtime.memory_budget`` gives a job under that limit
  (``HINGE_JOB_MEMORY`` unset: the cgroup's limit is found by the worker itself).

The two kinds alternate ``--repeats`` times, each run's trace points written as they come to
``<folder>/<solver>-<kind>.log``; the JSON has every run (seconds, objective, iterations, gap, bytes
read from disk, the cgroup's peak memory) and the medians' ratio. Needs root for the cgroup (else the
out-of-core runs go without a limit, which the JSON says).

    .venv/bin/python tests/benchmarks/bench_out_of_core.py --rows 2000000 --per-row 200 --features 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results"
CGROUP_V1 = Path("/sys/fs/cgroup/memory")
CGROUP_V2 = Path("/sys/fs/cgroup")


def generate(folder: Path, rows: int, per_row: int, features: int, seed: int) -> dict:
    """Write the data set's arrays into ``folder`` (once: kept when its description matches)."""
    description = {"rows": rows, "per_row": per_row, "features": features, "seed": seed}
    marker = folder / "description.json"
    if marker.exists() and json.loads(marker.read_text()) == description:
        return description
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    nnz = rows * per_row
    np.save(folder / "indptr.npy", np.arange(rows + 1, dtype=np.int64) * per_row)
    indices = np.lib.format.open_memmap(folder / "indices.npy", mode="w+", dtype=np.int32, shape=(nnz,))
    data = np.lib.format.open_memmap(folder / "data.npy", mode="w+", dtype=np.float32, shape=(nnz,))
    planted = rng.normal(size=features)
    y = np.empty(rows)
    step = 100_000
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        block = np.sort(rng.integers(0, features, size=(r1 - r0, per_row), dtype=np.int32), axis=1)
        values = rng.random((r1 - r0, per_row), dtype=np.float32)
        indices[r0 * per_row : r1 * per_row] = block.ravel()
        data[r0 * per_row : r1 * per_row] = values.ravel()
        margin = np.sum(values * planted[block], axis=1)
        labels = np.where(margin >= np.median(margin), 1.0, -1.0)
        flip = rng.random(r1 - r0) < 0.1
        y[r0:r1] = np.where(flip, -labels, labels)
    indices.flush()
    data.flush()
    del indices, data
    np.save(folder / "y.npy", y)
    marker.write_text(json.dumps(description))
    return description


def drop_pages(folder: Path) -> None:
    """Evict the data set's files from the page cache."""
    for path in folder.glob("*.npy"):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


class Cgroup:
    """A memory cgroup made for one run (v1 where mounted, else v2), removed after."""

    def __init__(self, name: str, limit: int) -> None:
        self.path: Path | None = None
        self.version = 0
        for version, base, file in ((1, CGROUP_V1, "memory.limit_in_bytes"), (2, CGROUP_V2, "memory.max")):
            if (base / "cgroup.procs").exists() and os.access(base, os.W_OK):
                try:
                    path = base / name
                    path.mkdir(exist_ok=True)
                    (path / file).write_text(str(limit))
                    self.path, self.version = path, version
                    return
                except OSError:
                    continue

    def peak(self) -> int | None:
        if self.path is None:
            return None
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        try:
            return int((self.path / name).read_text())
        except OSError:
            return None

    def remove(self) -> None:
        if self.path is not None:
            for _ in range(50):
                try:
                    self.path.rmdir()
                    return
                except OSError:
                    time.sleep(0.1)


CHILD = r"""
import json, sys, time
import numpy as np
folder, solver, kind, C, tol_rel = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
from core.schemas.solver_params import CpaParams, OcasParams
from worker.runtime.memory_budget import data_memory_bytes, job_memory_bytes
from worker.solvers.common import SolverControl
from worker.solvers.cpa import solve_cpa
from worker.solvers.ocas import solve_ocas
def progress(point):  # every iteration's trace point on stderr: the run's log (``--log``)
    print(json.dumps(point), file=sys.stderr, flush=True)
mode = None if kind == "memory" else "c"
arrays = {name: np.load(f"{folder}/{name}.npy", mmap_mode=mode) for name in ("indptr", "indices", "data", "y")}
memory_bytes = None if kind == "memory" else data_memory_bytes(0)
if solver == "ocas":
    params, solve = OcasParams(C=C, tol_rel=tol_rel), solve_ocas
else:
    params, solve = CpaParams(C=C, tol_rel=tol_rel), solve_cpa
started = time.perf_counter()
result = solve(arrays["indptr"], arrays["indices"], arrays["data"], arrays["y"], n_features=int(sys.argv[6]),
               params=params, n_processes=None, memory_bytes=memory_bytes,
               control=SolverControl(on_point=progress))
seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "solver_seconds": result.solver_seconds, "objective": result.objective,
                  "n_iter": result.n_iter, "gap_rel": result.extra["gap_rel"], "data": result.extra["data"],
                  "n_cuts": result.extra["n_cuts"], "max_cuts": max((p["n_cuts"] for p in result.trace), default=0),
                  "memory_bytes": memory_bytes, "job_memory": job_memory_bytes(0), "cut_form": result.extra["cut_form"],
                  "phases": result.extra["seconds"]}))
"""


def run(folder: Path, solver: str, kind: str, args, csr: int) -> dict:
    """One training in a process of its own (``kind``: memory or out_of_core)."""
    cgroup = None
    command = [
        sys.executable,
        "-c",
        CHILD,
        str(folder),
        solver,
        kind,
        str(args.C),
        str(args.tol_rel),
        str(args.features),
    ]
    preexec = None
    if kind == "out_of_core":
        drop_pages(folder)
        cgroup = Cgroup(f"hinge-bench-{os.getpid()}", int(args.limit_share * csr))
        if cgroup.path is not None:
            procs = cgroup.path / "cgroup.procs"

            def preexec() -> None:
                procs.write_text(str(os.getpid()))

    # as a worker runs a job (worker.runtime.main): numba's workqueue, one BLAS thread
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_THREADING_LAYER="workqueue", OPENBLAS_NUM_THREADS="1")
    env.pop("HINGE_JOB_MEMORY", None)
    log = folder / f"{solver}-{kind}.log"  # the trace points as they come (a long run can be followed, or stopped)
    try:
        with log.open("w") as stderr:
            out = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True, preexec_fn=preexec)
        if out.returncode != 0:
            return {"kind": kind, "error": log.read_text()[-2000:], "returncode": out.returncode}
        row = json.loads(out.stdout.strip().splitlines()[-1])
        row.update(kind=kind, solver=solver)
        if cgroup is not None:
            row.update(limit_bytes=int(args.limit_share * csr) if cgroup.path else None, peak_bytes=cgroup.peak())
        return row
    finally:
        if cgroup is not None:
            cgroup.remove()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--per-row", type=int, default=200)
    parser.add_argument("--features", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--C", type=float, default=0.01)
    parser.add_argument("--tol-rel", type=float, default=0.01)
    parser.add_argument("--limit-share", type=float, default=0.5)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--solvers", default="ocas")
    parser.add_argument("--kinds", default="memory,out_of_core", help="which runs (a re-run of one kind alone)")
    parser.add_argument("--folder", type=Path, default=Path("/tmp/hinge-out-of-core"))
    parser.add_argument("--out", type=Path, default=RESULTS / "out_of_core.json")
    args = parser.parse_args()
    description = generate(args.folder, args.rows, args.per_row, args.features, args.seed)
    nnz = args.rows * args.per_row
    csr = nnz * (4 + 4)
    runs = []
    for solver in args.solvers.split(","):
        for _ in range(args.repeats):
            for kind in args.kinds.split(","):
                row = run(args.folder, solver, kind, args, csr)
                print(json.dumps(row), flush=True)
                runs.append(row)
    summary = {}
    for solver in args.solvers.split(","):
        times = {
            kind: [r["seconds"] for r in runs if r.get("solver") == solver and r["kind"] == kind and "seconds" in r]
            for kind in ("memory", "out_of_core")
        }
        if all(times.values()):
            summary[solver] = {
                "memory_s": statistics.median(times["memory"]),
                "out_of_core_s": statistics.median(times["out_of_core"]),
                "ratio": statistics.median(times["out_of_core"]) / statistics.median(times["memory"]),
            }
    result = {
        "data": dict(description, nnz=nnz, csr_bytes=csr),
        "C": args.C,
        "tol_rel": args.tol_rel,
        "runs": runs,
        "summary": summary,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
