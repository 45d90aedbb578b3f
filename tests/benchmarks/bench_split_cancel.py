"""How long a cancel takes to stop ocas split over two Dask nodes (issue 34, item 3: "cancel and deadline reach
every node within 1 s"): the split solve runs on 10^6 rows x 50 non-zeros at d = 10^6 over the cluster
``bench_split`` starts, a thread sets the cancel flag after a few seconds, and the time from the flag to the
solve's return is measured, five times. Nothing runs on the nodes between the driver's calls, so this is the
time of the call in flight (in the service, add the worker's cancel poll, ``HINGE_CANCEL_POLL_S``).

    .venv/bin/python tests/benchmarks/bench_split_cancel.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    sys.path.insert(0, str(ROOT))
    folder = Path(tempfile.mkdtemp(prefix="hinge-cancel-"))
    os.environ["HINGE_OBJECT_STORE_DIR"] = str(folder / "objects")
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_THREADING_LAYER="workqueue")
    from core.config import get_settings
    from core.schemas.solver_params import OcasParams
    from core.storage.objects import object_store
    from tests.benchmarks.bench_split import start_cluster, stop_cluster, write_shards
    from worker.runtime.cluster import DaskNodes
    from worker.solvers.common import SolverControl
    from worker.solvers.distributed_ocas import solve_ocas_split

    address, procs = start_cluster(env)
    latencies = []
    try:
        record, _ = write_shards(object_store(get_settings()), 1_000_000, 1_000_000, 50, seed=3)
        with DaskNodes(address, 2, record, 1_000_000, 1.0) as nodes:
            for delay in (2.0, 3.3, 4.1, 5.7, 6.2):
                nodes.begin(None)
                flag = threading.Event()
                asked: dict[str, float] = {}

                def cancel(delay: float = delay, flag: threading.Event = flag, asked: dict = asked) -> None:
                    time.sleep(delay)
                    asked["t"] = time.perf_counter()
                    flag.set()

                threading.Thread(target=cancel).start()
                params = OcasParams(C=1.0, tol_rel=1e-12, max_iter=100000)
                control = SolverControl(cancel_requested=flag.is_set)
                result = solve_ocas_split(nodes, n_features=1_000_000, params=params, control=control)
                latency = time.perf_counter() - asked["t"]
                latencies.append(latency)
                row = {"delay": delay, "stop_reason": result.stop_reason.value, "n_iter": result.n_iter}
                print(json.dumps({**row, "latency_s": latency}), flush=True)
    finally:
        stop_cluster(procs)
    summary = {"latencies_s": latencies, "median_s": statistics.median(latencies), "max_s": max(latencies)}
    print(json.dumps(summary))
    (RESULTS / "split_cancel.json").write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
