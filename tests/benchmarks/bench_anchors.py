"""ocas, cpa and dcd against the original C programs, on the papers' kind of data (issue 10, items 1-3).

    python -m tests.benchmarks.bench_anchors [--sets sector1,a9a,w8a,ijcnn1,syn20k] [--Cs 0.1,1,10,100]
        [--repeats 3] [--big]          # --big adds the 2,000,000 x 10^6 synthetic set (10^8 non-zeros)
        [--sector-all]                 # all 105 classes of sector.scale, one-vs-rest, C = 1

Anchors (``tests/benchmarks/anchors.py``, built by ../shared/tools/build-anchors.sh): libocas
``svmocas`` (TolRel 0.01, its default), SVMperf ``svm_perf_learn -w 9 -e 0.01`` (C_perf = C n / 100),
LIBLINEAR ``train -s 3 -e 0.1`` (its default). Each is run on the same svmlight file as ours, with the
bias as a regularized feature of value 1 (our ``bias`` 1), interleaved with our runs (anchor, ours,
anchor, ours, ...), ``--repeats`` times; medians. Every model, theirs and ours, is scored with the same
objective on the same arrays; precision = (objective - F*) / F*, with F* certified by our ocas at
tol_rel 1e-6 (its lower bound is reported too).

For each (data set, C) and each pair (ocas / svmocas, cpa / SVMperf, dcd / LIBLINEAR):

* ``default``: both with default settings: solver seconds (theirs: their own; ours: ``solver_seconds``,
  threads = the cores, as the service runs a single problem), iterations, precision, our gap_rel;
* ``equal_precision``: our seconds to reach the anchor's objective (read from the trace of a run at a
  tighter tolerance: the first point whose objective is <= theirs), 1 thread and all cores, and the
  ratio ours / theirs (the bars: <= 1);
* ocas only: iterations of ours and libocas at the same TolRel (0.01 and 0.001; bar: within 1.5x).

Data: sector.scale class 1 against the rest ("sector1", 6,412 x 55,197), a9a, w8a, ijcnn1, and the
generator of ``tests/benchmarks/synthetic.py`` (50 non-zeros a row over 10^6 features) at 20,000 rows
("syn20k") and with --big at 2,000,000 rows ("syn2m"). Writes tests/benchmarks/results/bench_anchors.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tests.benchmarks import anchors, synthetic
from tests.benchmarks.environment import DATA_DIR, machine

RESULTS = Path(__file__).resolve().parent / "results" / "bench_anchors.json"
WORK = Path(os.environ.get("HINGE_BENCH_DIR", Path(tempfile.gettempdir()) / "hinge-bench"))
LIMITS = None


def _limits():
    from service.ingest.parser import ParseLimits

    return ParseLimits(max_decompressed_bytes=1 << 40, max_rows=1 << 40, max_features=1 << 31, max_nnz=1 << 40)


def _write_binary(src_gz: Path, dest: Path, positive: str | None = None) -> None:
    """The data set as plain svmlight with labels +1/-1 (class ``positive`` against the rest, or the file's
    two labels with the larger one positive)."""
    if dest.exists():
        return
    with gzip.open(src_gz, "rt") as f:
        lines = f.read().splitlines()
    labels = [line.split(None, 1)[0] for line in lines]
    if positive is None:
        values = sorted({float(v) for v in labels})
        positive_value = values[-1]
        keep = [float(v) == positive_value for v in labels]
    else:
        keep = [v == positive for v in labels]
    with open(dest, "w") as out:
        for line, pos in zip(lines, keep):
            rest = line.split(None, 1)[1] if " " in line.strip() else ""
            out.write(("+1 " if pos else "-1 ") + rest + "\n")


def prepare(name: str) -> Path:
    """Path of the plain binary svmlight file for a data set name (written once under WORK)."""
    WORK.mkdir(parents=True, exist_ok=True)
    path = WORK / f"{name}.svm"
    if name == "sector1":
        _write_binary(DATA_DIR / "sector.scale.svm.gz", path, positive="1")
    elif name.startswith("sector_class"):
        _write_binary(DATA_DIR / "sector.scale.svm.gz", path, positive=name[len("sector_class"):])
    elif name in ("a9a", "w8a", "ijcnn1"):
        _write_binary(DATA_DIR / f"{name}.svm.gz", path)
    elif name == "syn20k" and not path.exists():
        synthetic.write_svmlight(str(path), 0, 20_000)
    elif name == "syn2m" and not path.exists():
        synthetic.write_svmlight(str(path), 0, 2_000_000)
    return path


def load(path: Path):
    """(indptr, indices, data, y, n_features) by the service's parser (float64 values, int32 indices)."""
    from service.ingest.parser import parse_upload

    parsed = parse_upload(str(path), limits=_limits())
    return parsed.indptr, parsed.indices, parsed.data, parsed.y, int(parsed.n_features)


def _first_reaching(trace, target: float, key: str = "primal") -> float | None:
    """elapsed_s of the first trace point whose ``key`` is <= target (None if never)."""
    for point in trace:
        value = point.get(key)
        if value is not None and value <= target:
            return float(point["elapsed_s"])
    return None


def _ours(solver: str, arrays, n_features: int, C: float, threads: int, **params):
    from worker.solvers.cpa import solve_cpa
    from worker.solvers.dcd import solve_dcd
    from worker.solvers.ocas import solve_ocas

    indptr, indices, data, y = arrays
    if solver == "ocas":
        return solve_ocas(indptr, indices, data, y, n_features=n_features, C=C, bias=1.0, n_processes=threads, **params)
    if solver == "cpa":
        return solve_cpa(indptr, indices, data, y, n_features=n_features, C=C, bias=1.0, n_processes=threads, **params)
    return solve_dcd(indptr, indices, data, y, n_features=n_features, C=C, bias=1.0, **params)


PAIRS = {
    "ocas": ("svmocas", {"tol_rel": 1e-4}, "primal"),
    "cpa": ("svm_perf", {"tol_rel": 1e-4}, "best_primal"),
    "dcd": ("liblinear", {"tol": 1e-4, "tol_rel": 1e-5}, "primal"),
}


def _anchor(name: str, path: Path, C: float, n_rows: int, n_features: int) -> dict:
    if name == "svmocas":
        return anchors.svmocas(str(path), C, n_features)
    if name == "svm_perf":
        return anchors.svm_perf(str(path), C, n_rows, n_features, eps=0.01)
    return anchors.liblinear(str(path), C, n_features)


def bench_row(data_name: str, C: float, repeats: int, solvers=("ocas", "cpa", "dcd")) -> dict:
    """One (data set, C) row: optimum, then every pair interleaved ``repeats`` times."""
    from worker.solvers.data_passes import available_cores

    path = prepare(data_name)
    indptr, indices, data, y, n_features = load(path)
    arrays = (indptr, indices, data, y)
    cores = available_cores()
    exact = _ours("ocas", arrays, n_features, C, cores, tol_rel=1e-6, max_iter=100000)
    F_star = exact.objective
    row = {"data": data_name, "C": C, "n_rows": int(len(y)), "n_features": n_features, "nnz": int(indptr[-1]),
           "optimum": F_star, "optimum_lower_bound": exact.extra["lower_bound"], "cores": cores}
    precision = lambda F: (F - F_star) / F_star  # noqa: E731
    for solver in solvers:
        anchor_name, tight, key = PAIRS[solver]
        runs = {"anchor": [], "ours_default": [], "ours_1thread_tight": [], "ours_tight": []}
        for _ in range(repeats):
            a = _anchor(anchor_name, path, C, len(y), n_features)
            F_a = anchors.objective(indptr, indices, data, y, a["w"], a["w_bias"], C)
            runs["anchor"].append({"seconds": a["seconds"], "iterations": a["iterations"], "objective": F_a,
                                   "precision": precision(F_a), **({"hit_iteration_cap": a["hit_iteration_cap"]}
                                                                   if "hit_iteration_cap" in a else {})})
            d = _ours(solver, arrays, n_features, C, cores)
            runs["ours_default"].append({"seconds": d.solver_seconds, "iterations": d.n_iter, "objective": d.objective,
                                         "precision": precision(d.objective), "gap_rel": d.extra.get("gap_rel"),
                                         "stop_reason": d.stop_reason.value})
            for label, threads in (("ours_1thread_tight", 1), ("ours_tight", cores)):
                t = _ours(solver, arrays, n_features, C, threads, **tight)
                runs[label].append({"seconds_to_anchor_objective": _first_reaching(t.trace, F_a, key),
                                    "seconds": t.solver_seconds, "iterations": t.n_iter})
        summary = {}
        for label, values in runs.items():
            summary[label] = {k: (statistics.median([v[k] for v in values]) if all(isinstance(v.get(k), (int, float))
                                  and not isinstance(v.get(k), bool) for v in values) else values[0].get(k))
                              for k in values[0]}
        anchor_s = summary["anchor"]["seconds"]
        for label in ("ours_1thread_tight", "ours_tight"):
            s = summary[label]["seconds_to_anchor_objective"]
            summary[label]["ratio_to_anchor"] = (s / anchor_s) if (s is not None and anchor_s > 0) else None
        row[solver] = {"anchor": anchor_name, "runs": runs, "summary": summary}
        if solver == "ocas":
            iters = {}
            for tol_rel in (0.01, 0.001):
                ours = _ours("ocas", arrays, n_features, C, cores, tol_rel=tol_rel)
                theirs = anchors.svmocas(str(path), C, n_features, tol_rel=tol_rel)
                iters[str(tol_rel)] = {"ours": ours.n_iter, "libocas": theirs["iterations"],
                                       "ratio": ours.n_iter / max(1, theirs["iterations"])}
            row["ocas"]["iterations_same_tol_rel"] = iters
        print(json.dumps({"data": data_name, "C": C, "solver": solver,
                          **{k: {kk: vv for kk, vv in v.items() if kk in ("seconds", "precision", "iterations",
                                                                          "seconds_to_anchor_objective",
                                                                          "ratio_to_anchor")}
                             for k, v in summary.items()}}), flush=True)
    return row


def bench_sector_all(repeats: int, C: float = 1.0) -> dict:
    """sector.scale, all 105 classes one-vs-rest: per-class anchors summed, ours summed (1 thread)."""
    from worker.solvers.ocas import solve_ocas

    classes = [str(k) for k in range(1, 106)]
    totals = {"svmocas_s": [], "ours_ocas_s": [], "ours_ocas_2threads_s": []}
    precision = {"svmocas": 0.0, "ours_ocas": 0.0, "optimum": 0.0}
    for rep in range(repeats):
        sums = {k: 0.0 for k in totals}
        for k in classes:
            path = prepare(f"sector_class{k}")
            indptr, indices, data, y, n_features = load(path)
            a = anchors.svmocas(str(path), C, n_features)
            sums["svmocas_s"] += a["seconds"]
            ours = solve_ocas(indptr, indices, data, y, n_features=n_features, C=C, n_processes=1)
            sums["ours_ocas_s"] += ours.solver_seconds
            sums["ours_ocas_2threads_s"] += solve_ocas(indptr, indices, data, y, n_features=n_features, C=C,
                                                       n_processes=2).solver_seconds
            if rep == 0:
                precision["svmocas"] += anchors.objective(indptr, indices, data, y, a["w"], a["w_bias"], C)
                precision["ours_ocas"] += ours.objective
                precision["optimum"] += solve_ocas(indptr, indices, data, y, n_features=n_features, C=C,
                                                   tol_rel=1e-6, n_processes=2).objective
        for key, value in sums.items():
            totals[key].append(value)
    F = precision.pop("optimum")
    return {"data": "sector_all_ovr", "C": C, "classes": len(classes),
            "seconds": {k: statistics.median(v) for k, v in totals.items()}, "runs": totals,
            "precision_of_summed_objective": {k: (v - F) / F for k, v in precision.items()}, "optimum_sum": F}


def main(argv=None) -> int:
    """Run the benchmark and write its JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default="sector1,a9a,w8a,ijcnn1,syn20k")
    parser.add_argument("--Cs", default="0.1,1,10,100", help="C values for sector1 (the others run at C = 1)")
    parser.add_argument("--solvers", default="ocas,cpa,dcd")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--big", action="store_true", help="add the 2,000,000-row synthetic set")
    parser.add_argument("--sector-all", action="store_true", help="add sector.scale one-vs-rest, 105 classes")
    args = parser.parse_args(argv)
    missing = [k for k, ok in anchors.available().items() if not ok]
    if missing:
        print(f"anchor programs missing in {anchors.BIN}: {missing}; run ../shared/tools/build-anchors.sh",
              file=sys.stderr)
        return 2
    from worker.solvers import cpa, dcd, ocas

    t0 = time.perf_counter()
    ocas.warm_up()
    cpa.warm_up()
    dcd.warm_up()
    warm_s = time.perf_counter() - t0
    solvers = tuple(args.solvers.split(","))
    rows = []
    sets = args.sets.split(",") + (["syn2m"] if args.big else [])
    for name in sets:
        Cs = [float(c) for c in args.Cs.split(",")] if name == "sector1" else [1.0]
        for C in Cs:
            repeats = 1 if name == "syn2m" else args.repeats
            rows.append(bench_row(name, C, repeats, solvers))
    result = {"machine": machine(), "load_average_start": os.getloadavg(), "warm_up_s": warm_s, "rows": rows}
    if args.sector_all:
        result["sector_all"] = bench_sector_all(args.repeats)
    result["load_average_end"] = os.getloadavg()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    keyed = {(r["data"], r["C"]): r for r in previous.get("rows", [])}
    keyed.update({(r["data"], r["C"]): r for r in rows})
    result["rows"] = list(keyed.values())
    if "sector_all" not in result and "sector_all" in previous:
        result["sector_all"] = previous["sector_all"]
    RESULTS.write_text(json.dumps(result, indent=1, default=float) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
