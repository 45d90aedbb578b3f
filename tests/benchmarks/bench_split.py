"""ocas split over two nodes of a Dask cluster: time per iteration, compute against communication, at d = 10^6 and
10^7, against Dask's own broadcast-and-gather at the same d, and the objective against one machine (issue 34,
items 2 and 5).

What runs: a Dask scheduler and two ``dask worker`` processes started here, the second bound to 127.0.0.2 (as a
second machine would be; on this machine both share its 2 cores, so the compute is not twice as fast: the point
is the communication), a data set written as shards to a local object store both nodes read, and:

* ``split``: ``solve_ocas_split`` over ``DaskNodes`` (the worker's own path), ``--iterations`` iterations, each
  trace point's ``comm_s`` (the seconds of the calls that the nodes did not spend computing) against the rest;
* ``engine``: Dask's own round trip at that d, as the issue's table measured it: scatter w (d floats) to both
  nodes, submit a task on each that returns a vector of d floats, gather both and add them (the
  allreduce-and-broadcast an iteration needs), ``--rounds`` times, median;
* ``one_machine``: the same data and parameters with ``solve_ocas`` in this process: objective and iterations.

    .venv/bin/python tests/benchmarks/bench_split.py --features 1000000,10000000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from service.embedded_redis import free_port

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
RESULTS = Path(__file__).resolve().parent / "results"


def start_cluster(env: dict) -> tuple[str, list[subprocess.Popen]]:
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    dask = [sys.executable, "-m"]
    procs = [
        subprocess.Popen([*dask, "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port),
                          "--no-dashboard"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    ]  # fmt: skip
    for host in ("127.0.0.1", "127.0.0.2"):
        procs.append(
            subprocess.Popen([*dask, "distributed.cli.dask_worker", address, "--host", host, "--nworkers", "1",
                              "--nthreads", "1", "--memory-limit", "0", "--no-dashboard"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        )  # fmt: skip
    from distributed import Client

    deadline = time.monotonic() + 120
    while True:
        try:
            with Client(address, timeout=10, set_as_default=False) as client:
                client.wait_for_workers(2, timeout=60)
            return address, procs
        except (OSError, TimeoutError):
            if time.monotonic() > deadline:
                raise


def stop_cluster(procs: list[subprocess.Popen]) -> None:
    """SIGTERM the scheduler and nodes ``start_cluster`` started (each its own process group)."""
    for proc in procs:
        try:
            os.killpg(proc.pid, 15)
        except ProcessLookupError:
            pass


def cluster_env(prefix: str) -> dict:
    """The environment of the cluster's processes and of this one: a local object store in a new folder."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    env = dict(os.environ, PYTHONPATH=str(ROOT), HINGE_OBJECT_STORE_DIR=str(folder / "objects"),
               NUMBA_THREADING_LAYER="workqueue")  # fmt: skip
    os.environ.update(HINGE_OBJECT_STORE_DIR=env["HINGE_OBJECT_STORE_DIR"])
    return env


def shard_record(store, name: str, indptr, indices, data, y, shard_bytes: int, step: int = 50_000):
    """The rows written as shards of about ``shard_bytes``, ``step`` rows at a time; the record ``DaskNodes``
    reads."""
    from core.storage.shards import ShardWriter

    writer = ShardWriter(store, name, shard_bytes)
    n = indptr.size - 1
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        writer.append("indptr", indptr[r0 : r1 + 1] if r0 == 0 else indptr[r0 + 1 : r1 + 1])
        writer.append("indices", indices[indptr[r0] : indptr[r1]])
        writer.append("data", data[indptr[r0] : indptr[r1]])
        writer.append("y", y[r0:r1])
    arrays, shards = writer.manifest()
    writer.close()
    return SimpleNamespace(shards=[s.to_document() for s in shards], arrays=arrays, nnz=int(indptr[-1]))


def write_shards(store, n: int, d: int, per_row: int, seed: int):
    """A random sparse data set as shards of about 64 MB; returns (record, arrays for one machine)."""
    from tests.test_out_of_core import random_csr

    indptr, indices, data, y = random_csr(n, d, per_row, seed=seed)
    return shard_record(store, f"bench-{d}", indptr, indices, data, y, 64 << 20), (indptr, indices, data, y)


def engine_round_trip(address: str, d: int, rounds: int) -> float:
    """Median seconds of Dask's scatter of w + a task per node returning d floats + gather + sum."""
    from distributed import Client

    def partial_cut(w):
        return w * 0.5

    times = []
    with Client(address, timeout=30, set_as_default=False) as client:
        workers = sorted(client.scheduler_info()["workers"])
        w = np.random.default_rng(0).normal(size=d + 1)
        for _ in range(rounds):
            started = time.perf_counter()
            shared = client.scatter(w, broadcast=True)
            futures = [client.submit(partial_cut, shared, workers=[worker], pure=False) for worker in workers]
            parts = client.gather(futures)
            total = parts[0] + parts[1]
            times.append(time.perf_counter() - started)
            assert total.shape == w.shape
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--features", default="1000000,10000000")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--per-row", type=int, default=50)
    parser.add_argument("--iterations", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", type=Path, default=RESULTS / "split.json")
    args = parser.parse_args()
    env = cluster_env("hinge-split-")
    from core.config import get_settings
    from core.schemas.solver_params import OcasParams
    from core.storage.objects import object_store
    from worker.runtime.cluster import DaskNodes
    from worker.solvers.distributed_ocas import solve_ocas_split
    from worker.solvers.ocas import solve_ocas

    address, procs = start_cluster(env)
    rows = []
    try:
        store = object_store(get_settings())
        for d in (int(x) for x in args.features.split(",")):
            record, (indptr, indices, data, y) = write_shards(store, args.rows, d, args.per_row, seed=d % 97)
            params = OcasParams(C=1.0, tol_rel=1e-9, max_iter=args.iterations)
            engine = engine_round_trip(address, d, args.rounds)
            started = time.perf_counter()
            with DaskNodes(address, 2, record, d, 1.0) as nodes:
                load = time.perf_counter() - started
                nodes.begin(None)
                split = solve_ocas_split(nodes, n_features=d, params=params)
            one = solve_ocas(indptr, indices, data, y, n_features=d, params=params, n_processes=1)
            points = split.trace
            comm = [p["comm_s"] for p in points]
            total = [sum(p[f"{k}_s"] for k in ("qp", "output", "line_search", "update", "cut")) for p in points]
            row = {
                "d": d,
                "rows": args.rows,
                "nnz": int(indptr[-1]),
                "nodes_load_s": load,
                "iterations": split.n_iter,
                "iteration_s_median": statistics.median(total),
                "comm_s_median": statistics.median(comm),
                "compute_s_median": statistics.median([t - c for t, c in zip(total, comm, strict=True)]),
                "engine_round_trip_s": engine,
                "comm_over_engine": statistics.median(comm) / engine,
                "objective_split": split.objective,
                "objective_one_machine": one.objective,
                "objective_rel_diff": abs(split.objective - one.objective) / one.objective,
                "iterations_one_machine": one.n_iter,
                "one_machine_iteration_s": one.solver_seconds / max(1, one.n_iter),
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        stop_cluster(procs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": os.uname().nodename, "cores": os.cpu_count(), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
