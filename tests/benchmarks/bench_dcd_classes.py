"""dcd against LIBLINEAR -s 3 class by class on real text, with and without dcd's feature renumbering (issue 36, item 2).

    python -m tests.benchmarks.bench_dcd_classes [--C 10] [--classes 1,7] [--text-source PATH]

The 20 Newsgroups one-vs-rest files that ``bench_anchors --ovr news20`` writes (``text_corpus``: uni+bigram TF-IDF,
1.18·10^6 features), one binary problem per class: LIBLINEAR's ``train -s 3 -c C -B 1 -e 0.1`` on the class's file
(solver seconds from strace, as bench_anchors), then our dcd at tol 0.01 with a trace point at every pass (their cost
outside the clock), timed to the first pass at or below LIBLINEAR's objective of that class, twice: as the service
runs it (features renumbered by frequency past ``feature_order.MIN_FEATURES``, the copy's cost inside the clock) and
with the renumbering off. Both walk the same passes (the same problem); the sums over the classes and their ratios
to LIBLINEAR's go to ``results/bench_dcd_classes.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from core.schemas.solver_params import DcdParams
from tests.benchmarks import anchors, bench_anchors
from tests.benchmarks.bench_anchors import OVR_SETS, WORK, _ovr_file, _write_binary, load
from tests.benchmarks.environment import machine
from tests.helpers import with_params
from worker.solvers.common import SolverControl

RESULTS = Path(__file__).resolve().parent / "results" / "bench_dcd_classes.json"
MAX_PASSES = 200
"""The tight runs stop here if they never reach the target (LIBLINEAR's -e 0.1 takes 11-41 iterations here)."""


def seconds_to(arrays, n_features: int, C: float, target: float) -> tuple[float, int | None]:
    """(solver seconds, pass) of dcd's first pass at or below ``target``: a run at tol 0.01 with a point at every
    pass (outside its clock), stopped there; its whole time and None if it never gets there."""
    reached: list[dict] = []

    def on_point(point: dict) -> None:
        if point["primal"] <= target and not reached:
            reached.append(point)

    from worker.solvers.dcd import solve_dcd

    params = with_params(
        DcdParams, {"C": C, "bias": 1.0, "tol": 0.01, "tol_rel": 1e-5, "trace_budget": None, "max_iter": MAX_PASSES}
    )
    run = solve_dcd(
        *arrays, n_features=n_features, control=SolverControl(on_point=on_point, cancel_requested=lambda: bool(reached)),
        **params,
    )  # fmt: skip
    if not reached:
        return run.solver_seconds, None
    return float(reached[0]["elapsed_s"]), int(reached[0]["iteration"])


def main(argv=None) -> int:
    """Run the comparison and write its JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--C", type=float, default=10.0)
    parser.add_argument("--classes", default="", help="comma-separated labels (default: all 20)")
    parser.add_argument("--text-source", default=None, help="20news-bydate folder or tarball (else downloaded)")
    args = parser.parse_args(argv)
    if args.text_source:
        bench_anchors.TEXT_SOURCE[0] = args.text_source
    import worker.solvers.dcd as dcd

    multi = _ovr_file("news20")
    classes = args.classes.split(",") if args.classes else [str(k) for k in range(1, OVR_SETS["news20"] + 1)]
    rows, sums = [], {"liblinear": 0.0, "renumbered": 0.0, "data_numbering": 0.0}
    renumber_from = dcd.MIN_FEATURES
    for k in classes:
        path = WORK / f"news20_class{k}.svm"
        _write_binary(multi, path, positive=k)
        indptr, indices, data, y, n_features = load(path)
        arrays = (indptr, indices, data, y)
        lib = anchors.liblinear(str(path), args.C, n_features)
        target = anchors.objective(*arrays, lib["w"], lib["w_bias"], args.C)
        row = {"class": k, "liblinear_s": lib["seconds"], "liblinear_iterations": lib["iterations"]}
        for name, limit in (("renumbered", renumber_from), ("data_numbering", 1 << 62)):
            dcd.MIN_FEATURES = limit
            seconds, at = seconds_to(arrays, n_features, args.C, target)
            row[f"{name}_s"], row[f"{name}_pass"] = seconds, at
            sums[name] += seconds
        dcd.MIN_FEATURES = renumber_from
        sums["liblinear"] += lib["seconds"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    result = {
        "C": args.C,
        "classes": rows,
        "sums_s": sums,
        "ratio_renumbered": sums["renumbered"] / sums["liblinear"],
        "ratio_data_numbering": sums["data_numbering"] / sums["liblinear"],
        "machine": machine(),
        "measured_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "load_average": os.getloadavg(),
    }
    print(json.dumps({key: result[key] for key in ("C", "sums_s", "ratio_renumbered", "ratio_data_numbering")}))
    runs = json.loads(RESULTS.read_text())["runs"] if RESULTS.exists() else []
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"runs": [*runs, result]}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
