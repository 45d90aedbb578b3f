"""Crammer-Singer ocas split over two nodes of a Dask cluster against the same training on one machine, on real
multi-class data (issue 33's Crammer-Singer with issue 34's split): objective, iterations, time per iteration and
the network's share (``comm_s``).

What runs: a Dask scheduler and two ``dask worker`` processes started here (the second on 127.0.0.2, as in
``bench_split.py``; both share this machine's cores), the data set written as shards to a local object store both
nodes read, then ``solve_crammer_singer_split`` over ``DaskNodes`` (the worker's own path) and
``solve_crammer_singer`` in this process, interleaved ``--repeats`` times, C = 1, bias 1, ``tol_rel`` 0.01 (the
default).

    .venv/bin/python tests/benchmarks/bench_split_crammer_singer.py --data ../shared/data/dna.scale.svm.gz,../shared/data/letter.scale.svm.gz
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
RESULTS = Path(__file__).resolve().parent / "results"

from tests.benchmarks.bench_split import cluster_env, shard_record, start_cluster, stop_cluster  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="svmlight files (gzip allowed), comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--C", type=float, default=1.0)
    parser.add_argument("--out", type=Path, default=RESULTS / "bench_split_crammer_singer.json")
    args = parser.parse_args()
    env = cluster_env("hinge-split-cs-")
    from sklearn.datasets import load_svmlight_file

    from core.config import get_settings
    from core.schemas.solver_params import OcasParams
    from core.storage.objects import object_store
    from worker.runtime.cluster import DaskNodes
    from worker.solvers.distributed_ocas_multiclass import solve_crammer_singer_split
    from worker.solvers.ocas_multiclass import solve_crammer_singer

    address, procs = start_cluster(env)
    rows = []
    try:
        store = object_store(get_settings())
        for path in args.data.split(","):
            X, y = load_svmlight_file(path)
            X.sort_indices()
            indptr, indices, data = X.indptr.astype(np.int64), X.indices.astype(np.int32), X.data
            labels = np.unique(y)
            classes = np.searchsorted(labels, y)
            d = X.shape[1]
            # shards small enough that both nodes hold some: a third of the arrays' bytes each, about
            third = (indices.nbytes + data.nbytes + y.nbytes + indptr.nbytes) // 3 + 1
            name = Path(path).name.split(".")[0]
            record = shard_record(store, name, indptr, indices, data, y, third, step=2_000)
            params = OcasParams(C=args.C, multiclass="crammer_singer")
            runs: dict[str, list] = {"split": [], "one": []}
            for _ in range(args.repeats):
                started = time.perf_counter()
                with DaskNodes(address, 2, record, d, 1.0) as nodes:
                    load = time.perf_counter() - started
                    nodes.begin_classes(labels)
                    split = solve_crammer_singer_split(nodes, n_classes=labels.size, n_features=d, params=params)
                    n_nodes = nodes.n_nodes
                one = solve_crammer_singer(indptr, indices, data, classes, n_classes=labels.size, n_features=d,
                                           params=params)  # fmt: skip
                comm = sum(p["comm_s"] for p in split.trace)
                runs["split"].append((split.solver_seconds, comm, load, split))
                runs["one"].append((one.solver_seconds, one))
            split = runs["split"][0][3]
            one = runs["one"][0][1]
            split_s = statistics.median(r[0] for r in runs["split"])
            one_s = statistics.median(r[0] for r in runs["one"])
            row = {
                "data": Path(path).name,
                "rows": int(indptr.size - 1),
                "features": int(d),
                "classes": int(labels.size),
                "nodes": int(n_nodes),
                "iterations_split": split.n_iter,
                "iterations_one_machine": one.n_iter,
                "objective_split": split.objective,
                "objective_one_machine": one.objective,
                "objective_rel_diff": abs(split.objective - one.objective) / one.objective,
                "gap_rel_split": split.extra["gap_rel"],
                "gap_rel_one_machine": one.extra["gap_rel"],
                "split_s_median": split_s,
                "comm_s_median": statistics.median(r[1] for r in runs["split"]),
                "nodes_load_s_median": statistics.median(r[2] for r in runs["split"]),
                "one_machine_s_median": one_s,
                "split_over_one_machine": split_s / one_s,
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        stop_cluster(procs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": os.uname().nodename, "cores": os.cpu_count(), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
