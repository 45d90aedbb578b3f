"""ocas, cpa and dcd against the original C programs, on the papers' kind of data (issue 10, items 1-3).

    python -m tests.benchmarks.bench_anchors [--sets sector1,a9a,w8a,ijcnn1,syn20k] [--Cs 0.1,1,10,100]
        [--repeats 3] [--solvers ocas,cpa,dcd] [--threads N] [--optimum-by ocas|dcd]
        [--big]          # --big adds the 2,000,000 x 10^6 synthetic set (10^8 non-zeros)
        [--sector-all [--sector-all-Cs 0.1,1,10,100]]   # sector.scale, 105 classes one-vs-rest
        [--ovr news20 [--ovr-Cs 1,10] [--text-source PATH]]   # real text: 20 Newsgroups uni+bigram TF-IDF, 20 classes one-vs-rest

Anchors (``tests/benchmarks/anchors.py``, built by ../shared/tools/build-anchors.sh): libocas
``svmocas`` (TolRel 0.01, its default), SVMperf ``svm_perf_learn -w 9 -e 0.01`` (C_perf = C n / 100),
LIBLINEAR ``train -s 3 -e 0.1`` (its default). Each is run on the same svmlight file as ours, with the
bias as a regularized feature of value 1 (our ``bias`` 1), interleaved with our runs (anchor, ours,
anchor, ours, ...), ``--repeats`` times; medians. Every model, theirs and ours, is scored with the same
objective on the same arrays; precision = (objective - F*) / F*, with F* certified by our ocas at
tol_rel 1e-6 (1e-4 on syn2m; its lower bound is reported too), or with ``--optimum-by dcd`` by our dcd at
tol_rel 1e-6 on one thread (its dual value is the lower bound).

For each (data set, C) and each pair (ocas / svmocas, cpa / SVMperf, dcd / LIBLINEAR):

* ``default``: both with default settings: solver seconds (theirs: their own; ours: ``solver_seconds``,
  with the threads a job gets from ``./dev serve`` by default: cores // 2 workers, one on this machine;
  ``--threads`` changes it), iterations, precision, our gap_rel;
* ``equal_precision``: our seconds to reach the anchor's objective (read from the trace of a run at a
  tighter tolerance: the first point whose objective is <= theirs), 1 thread and all cores, and the
  ratio ours / theirs (the bars: <= 1); dcd is sequential, so its all-cores figure is its 1-thread run's;
* ocas only: iterations of ours and libocas at the same TolRel (0.01 and 0.001; bar: within 1.5x).

Data: sector.scale class 1 against the rest ("sector1", 6,412 x 55,197), a9a, w8a, ijcnn1, and the generator
of ``tests/benchmarks/synthetic.py`` (50 non-zeros a row over 10^6 features) at 20,000 rows ("syn20k") and
with --big at 2,000,000 rows ("syn2m"); TF-IDF-like text (issue 22, item 6), 300 non-zeros a row over 10^6
features with 6 significant digits, at 20,000 and 30,000 rows ("tfidf20k", "tfidf30k": 6 and 9 M non-zeros,
stored as float32 as an upload is by default; "tfidf20k_f64", "tfidf30k_f64": the same files with float64
values, as ``value_dtype=float64`` stores them), run at every ``--Cs``. The dcd / LIBLINEAR pair alone, on one
thread: ``--sets tfidf20k,tfidf30k --Cs 0.1,1,10 --solvers dcd --threads 1 --optimum-by dcd``.
Writes tests/benchmarks/results/bench_anchors.json.
On syn2m the cpa pair takes 2.5 hours this way (SVMperf alone runs 80 minutes):
``bench_cpa_side_by_side`` measures it in SVMperf's time and merges its entry into the same file.
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

from core.schemas.solver_params import CpaParams, DcdParams, OcasParams
from tests.benchmarks import anchors, synthetic, text_corpus
from tests.benchmarks.anchors_report import SECTOR_ALL_PAIRS, report
from tests.benchmarks.environment import DATA_DIR, machine
from tests.helpers import with_params

RESULTS = Path(__file__).resolve().parent / "results" / "bench_anchors.json"
WORK = Path(os.environ.get("HINGE_BENCH_DIR", Path(tempfile.gettempdir()) / "hinge-bench"))
LIMITS = None
TFIDF = {"tfidf20k": 20_000, "tfidf30k": 30_000}
"""TF-IDF-like text (issue 22, item 6): rows of 300 non-zeros over 10^6 features, 6 significant digits."""
TFIDF |= {f"{name}_f64": rows for name, rows in TFIDF.items()}
"""The same files stored with float64 values (an upload with ``value_dtype=float64``; 12 bytes a non-zero)."""
BIG_NNZ = 10**7  # above this many non-zeros the optimum is certified to 1e-4 instead of 1e-6


def _limits():
    from service.ingest.parser import ParseLimits

    return ParseLimits(max_decompressed_bytes=1 << 40, max_rows=1 << 40, max_features=1 << 31, max_nnz=1 << 40)


def _write_binary(src_gz: Path, dest: Path, positive: str | None = None) -> None:
    """The data set as plain svmlight with labels +1/-1 (class ``positive`` against the rest, or the file's
    two labels with the larger one positive)."""
    if dest.exists():
        return
    with gzip.open(src_gz, "rt") if src_gz.suffix == ".gz" else open(src_gz) as f:
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
    name = name.removesuffix("_f64")  # the same file, another storage of its values (see ``load``)
    path = WORK / f"{name}.svm"
    if name == "sector1":
        _write_binary(DATA_DIR / "sector.scale.svm.gz", path, positive="1")
    elif name.startswith("sector_class"):
        _write_binary(DATA_DIR / "sector.scale.svm.gz", path, positive=name[len("sector_class") :])
    elif name in ("a9a", "w8a", "ijcnn1"):
        _write_binary(DATA_DIR / f"{name}.svm.gz", path)
    elif name == "syn20k" and not path.exists():
        synthetic.write_svmlight(str(path), 0, 20_000)
    elif name == "syn2m" and not path.exists():
        synthetic.write_svmlight(str(path), 0, 2_000_000)
    elif name in TFIDF and not path.exists():
        synthetic.write_svmlight(str(path), 0, TFIDF[name], nnz_per_row=300, significant_digits=6)
    return path


def load(path: Path, value_dtype: str = "auto"):
    """(indptr, indices, data, y, n_features) by the service's parser, stored as the service stores an
    upload by default (``value_dtype=auto``: float32 when the text holds every value exactly)."""
    from service.ingest.parser import parse_upload

    parsed = parse_upload(str(path), limits=_limits(), value_dtype=value_dtype)
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
        return solve_ocas(
            indptr,
            indices,
            data,
            y,
            n_features=n_features,
            n_processes=threads,
            **with_params(OcasParams, {"C": C, "bias": 1.0, **params}),
        )
    if solver == "cpa":
        return solve_cpa(
            indptr,
            indices,
            data,
            y,
            n_features=n_features,
            n_processes=threads,
            **with_params(CpaParams, {"C": C, "bias": 1.0, **params}),
        )
    return solve_dcd(
        indptr, indices, data, y, n_features=n_features, **with_params(DcdParams, {"C": C, "bias": 1.0, **params})
    )


ANCHOR_PROGRAM = {"ocas": "svmocas", "cpa": "svm_perf_learn", "dcd": "liblinear-train"}
"""The anchor program each of our solvers is timed against (what ``PAIRS`` runs)."""

PAIRS = {
    "ocas": ("svmocas", {"tol_rel": 1e-4}, "primal"),
    "cpa": ("svm_perf", {"tol_rel": 1e-4}, "best_primal"),
    "dcd": ("liblinear", {"tol": 1e-4, "tol_rel": 1e-5, "trace_budget": None}, "primal"),
}


def _anchor(name: str, path: Path, C: float, n_rows: int, n_features: int) -> dict:
    if name == "svmocas":
        return anchors.svmocas(str(path), C, n_features)
    if name == "svm_perf":
        return anchors.svm_perf(str(path), C, n_rows, n_features, eps=0.01)
    return anchors.liblinear(str(path), C, n_features)


def _optimum(by: str, arrays, n_features: int, C: float, cores: int, tol_rel: float):
    """(F*, its lower bound): ocas on every core (the default), or dcd, which certifies 1e-6 on the
    TF-IDF-like sets in 1-2 s on one thread where ocas takes 30-170 s on both cores."""
    if by == "dcd":
        run = _ours("dcd", arrays, n_features, C, 1, tol=1e-6, tol_rel=tol_rel, trace_every=10**9)
        return run.objective, run.extra["dual"]
    run = _ours("ocas", arrays, n_features, C, cores, tol_rel=tol_rel, max_iter=100000)
    return run.objective, run.extra["lower_bound"]


def bench_row(
    data_name: str, C: float, repeats: int, solvers=("ocas", "cpa", "dcd"), threads: int = 1, optimum_by: str = "ocas"
) -> dict:
    """One (data set, C) row: optimum, then every pair interleaved ``repeats`` times."""
    from worker.solvers.data_passes import available_cores

    path = prepare(data_name)
    indptr, indices, data, y, n_features = load(path, "float64" if data_name.endswith("_f64") else "auto")
    arrays = (indptr, indices, data, y)
    cores = available_cores()
    # the optimum to 1e-6 (1e-4 at 10^8 non-zeros, where 1e-6 would take thousands of passes and a dense cut
    # of 8 MB each: precisions are then known to +-1e-4; the ratios do not use the optimum)
    certify_tol_rel = 1e-6 if indptr[-1] <= BIG_NNZ else 1e-4
    F_star, lower_bound = _optimum(optimum_by, arrays, n_features, C, cores, certify_tol_rel)
    row = {
        "data": data_name,
        "C": C,
        "n_rows": int(len(y)),
        "n_features": n_features,
        "nnz": int(indptr[-1]),
        "optimum": F_star,
        "optimum_lower_bound": lower_bound,
        "optimum_tol_rel": certify_tol_rel,
        "optimum_by": optimum_by,
        "cores": cores,
        "default_threads": threads,
        "load_average": os.getloadavg(),
    }
    precision = lambda F: (F - F_star) / F_star  # noqa: E731
    for solver in solvers:
        anchor_name, tight, key = PAIRS[solver]
        runs = {"anchor": [], "ours_default": [], "ours_1thread_tight": [], "ours_tight": []}
        for _ in range(repeats):
            a = _anchor(anchor_name, path, C, len(y), n_features)
            F_a = anchors.objective(indptr, indices, data, y, a["w"], a["w_bias"], C)
            runs["anchor"].append(
                {
                    "seconds": a["seconds"],
                    "iterations": a["iterations"],
                    "objective": F_a,
                    "precision": precision(F_a),
                    **({"hit_iteration_cap": a["hit_iteration_cap"]} if "hit_iteration_cap" in a else {}),
                }
            )
            d = _ours(solver, arrays, n_features, C, threads)
            runs["ours_default"].append(
                {
                    "seconds": d.solver_seconds,
                    "iterations": d.n_iter,
                    "objective": d.objective,
                    "precision": precision(d.objective),
                    "gap_rel": d.extra.get("gap_rel"),
                    "stop_reason": d.stop_reason.value,
                }
            )
            for label, threads in (("ours_1thread_tight", 1), ("ours_tight", cores)):
                if solver == "dcd" and label == "ours_tight":  # dcd is sequential: the same run again
                    runs[label].append(dict(runs["ours_1thread_tight"][-1]))
                    continue
                t = _ours(solver, arrays, n_features, C, threads, **tight)
                runs[label].append(
                    {
                        "seconds_to_anchor_objective": _first_reaching(t.trace, F_a, key),
                        "seconds": t.solver_seconds,
                        "iterations": t.n_iter,
                    }
                )
        summary = {}
        for label, values in runs.items():
            summary[label] = {
                k: (
                    statistics.median([v[k] for v in values])
                    if all(isinstance(v.get(k), (int, float)) and not isinstance(v.get(k), bool) for v in values)
                    else values[0].get(k)
                )
                for k in values[0]
            }
        anchor_s = summary["anchor"]["seconds"]
        for label in ("ours_1thread_tight", "ours_tight"):
            s = summary[label]["seconds_to_anchor_objective"]
            summary[label]["ratio_to_anchor"] = (s / anchor_s) if (s is not None and anchor_s > 0) else None
        row[solver] = {
            "anchor": anchor_name,
            "runs": runs,
            "summary": summary,
            "measured_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
            "load_average": os.getloadavg(),
        }
        if solver == "ocas":
            iters = {}
            for tol_rel in (0.01, 0.001):
                ours = _ours("ocas", arrays, n_features, C, cores, tol_rel=tol_rel)
                theirs = anchors.svmocas(str(path), C, n_features, tol_rel=tol_rel)
                iters[str(tol_rel)] = {
                    "ours": ours.n_iter,
                    "libocas": theirs["iterations"],
                    "ratio": ours.n_iter / max(1, theirs["iterations"]),
                }
            row["ocas"]["iterations_same_tol_rel"] = iters
        print(
            json.dumps(
                {
                    "data": data_name,
                    "C": C,
                    "solver": solver,
                    **{
                        k: {
                            kk: vv
                            for kk, vv in v.items()
                            if kk
                            in ("seconds", "precision", "iterations", "seconds_to_anchor_objective", "ratio_to_anchor")
                        }
                        for k, v in summary.items()
                    },
                }
            ),
            flush=True,
        )
    return row


OVR_CERTIFY_TOL_REL = [1e-6]
"""``--ovr-certify-tol-rel``: how tightly the one-vs-rest runs certify each class's optimum."""
TEXT_SOURCE: list[Path | None] = [None]
"""``--text-source``: a copy of 20news-bydate (``text_corpus``), else it is downloaded."""
OVR_SETS = {"sector": 105, "news20": 20}
"""The multi-class sets of the one-vs-rest comparison and their classes (labels 1..k): sector.scale and 20
Newsgroups as uni+bigram TF-IDF (``text_corpus``: 11,314 posts, 1.18·10^6 features, real text, issue 36)."""


def _ovr_file(data_name: str) -> Path:
    """The plain multi-class svmlight file of a one-vs-rest set (written once under WORK)."""
    if data_name == "news20":
        return text_corpus.build(WORK / "text", TEXT_SOURCE[0])[0]
    multi = WORK / "sector_all.svm"
    if not multi.exists():
        with gzip.open(DATA_DIR / "sector.scale.svm.gz", "rt") as f, open(multi, "w") as out:
            out.write(f.read())
    return multi


def bench_ovr(
    repeats: int,
    C: float = 1.0,
    threads: int = 1,
    data_name: str = "sector",
    solvers=("ocas", "cpa", "dcd"),
    optimum_by: str = "ocas",
) -> dict:
    """A multi-class set (``OVR_SETS``), every class one-vs-rest at C: per-class binary problems for svmocas,
    SVMperf and ours (summed solver seconds, ``threads`` threads each), LIBLINEAR's own one-vs-rest in one run;
    the precision of each summed objective against the summed certified optima; and, at equal precision, the
    sum over classes of the seconds our 1-thread run at a tight tolerance took to reach the anchor's objective
    of that class (``PAIRS``, with a trace point at every dcd pass; a class whose objective it never reached
    counts its whole run, and is counted in ``not_reached``)."""
    multi = _ovr_file(data_name)
    classes = [str(k) for k in range(1, OVR_SETS[data_name] + 1)]
    problems = {}
    for k in classes:
        path = WORK / f"{data_name}_class{k}.svm"
        _write_binary(multi, path, positive=k)
        problems[k] = (path, load(path))
    pairs = tuple(p for p in SECTOR_ALL_PAIRS if p[1] in solvers)
    seconds: dict[str, list] = {key: [] for _, solver, theirs in pairs for key in (f"ours_{solver}", theirs)}
    to_anchor: dict[str, list] = {ours: [] for ours, _, _ in pairs}
    not_reached = {ours: 0 for ours, _, _ in pairs}
    objective = {key: 0.0 for key in seconds}
    optimum = 0.0
    for rep in range(repeats):
        sums = {key: 0.0 for key in seconds}
        reach = {key: 0.0 for key in to_anchor}
        lib = anchors.liblinear(str(multi), C, problems["1"][1][4]) if "dcd" in solvers else None
        if lib is not None:
            sums["liblinear"] = lib["seconds"]
        for k in classes:
            path, (indptr, indices, data, y, n_features) = problems[k]
            args = (indptr, indices, data, y)
            anchor_objective = {"liblinear": anchors.objective(*args, *lib["per_class"][k], C) if lib else None}
            for _, _, theirs in pairs:
                if theirs != "liblinear":
                    out = _anchor(theirs, path, C, len(y), n_features)
                    sums[theirs] += out["seconds"]
                    anchor_objective[theirs] = anchors.objective(*args, out["w"], out["w_bias"], C)
            for ours, solver, theirs in pairs:
                default = _ours(solver, args, n_features, C, threads)
                sums[ours] += default.solver_seconds
                _, tight, key = PAIRS[solver]
                run = _ours(solver, args, n_features, C, 1, **tight)
                reached = _first_reaching(run.trace, anchor_objective[theirs], key)
                reach[ours] += run.solver_seconds if reached is None else reached
                if rep == 0:
                    objective[ours] += default.objective
                    not_reached[ours] += reached is None
            if rep == 0:
                for _, _, theirs in pairs:
                    objective[theirs] += anchor_objective[theirs]
                optimum += _optimum(optimum_by, args, n_features, C, 2, OVR_CERTIFY_TOL_REL[0])[0]
        for key, value in sums.items():
            seconds[key].append(value)
        for key, value in reach.items():
            to_anchor[key].append(value)
        print(
            json.dumps(
                {f"{data_name}_ovr_rep": rep, **{k: round(v, 3) for k, v in sums.items()}, "to_anchor": reach},
                default=float,
            ),
            flush=True,
        )
    median = {k: statistics.median(v) for k, v in seconds.items()}
    to_anchor_median = {k: statistics.median(v) for k, v in to_anchor.items()}
    return {
        "data": f"{data_name}_all_ovr",
        "C": C,
        "classes": len(classes),
        "threads": threads,
        "seconds_median": median,
        "runs": seconds,
        "ratios": {f"{solver}_to_{theirs}": median[ours] / median[theirs] for ours, solver, theirs in pairs},
        "seconds_to_anchor_objective_median": to_anchor_median,
        "seconds_to_anchor_objective_runs": to_anchor,
        "ratios_at_equal_precision": {
            f"{solver}_to_{theirs}": to_anchor_median[ours] / median[theirs] for ours, solver, theirs in pairs
        },
        "not_reached": not_reached,
        "precision_of_summed_objective": {k: (v - optimum) / optimum for k, v in objective.items()},
        "optimum_sum": optimum,
        "measured_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "load_average": os.getloadavg(),
    }


def main(argv=None) -> int:
    """Run the benchmark and write its JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default="sector1,a9a,w8a,ijcnn1,syn20k")
    parser.add_argument(
        "--Cs", default="0.1,1,10,100", help="C values for sector1 and the tfidf sets (the others run at C = 1)"
    )
    parser.add_argument(
        "--solvers", default="ocas,cpa,dcd", help="pairs to run (the JSON keeps the other pairs' earlier results)"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads of our default runs (default: cores // 2, what ./dev serve gives a job)",
    )
    parser.add_argument(
        "--optimum-by",
        choices=("ocas", "dcd"),
        default="ocas",
        help="the solver that certifies F* (ocas on every core; dcd on one thread, quicker on text-like sets)",
    )
    parser.add_argument("--big", action="store_true", help="add the 2,000,000-row synthetic set")
    parser.add_argument("--sector-all", action="store_true", help="add sector.scale one-vs-rest, 105 classes")
    parser.add_argument("--sector-all-Cs", default="1", help="C values of the one-vs-rest runs")
    parser.add_argument("--ovr", default="", help="one-vs-rest sets (sector, news20): every class, summed")
    parser.add_argument("--ovr-Cs", default="1", help="C values of the --ovr runs")
    parser.add_argument("--text-source", type=Path, default=None, help="20news-bydate.tar.gz or its folder")
    parser.add_argument(
        "--dcd-tight-tol",
        type=float,
        default=1e-4,
        help="tol of the dcd runs read for the time to LIBLINEAR's objective (their trace has a point at every pass)",
    )
    parser.add_argument(
        "--ovr-certify-tol-rel", type=float, default=1e-6, help="tol_rel of the --ovr runs' certified optima"
    )
    parser.add_argument(
        "--tight-tol-rel",
        type=float,
        default=1e-4,
        help="tol_rel of the ocas and cpa runs read for the time to the anchor's objective (1e-3 reaches the anchors' "
        "1%% on text in a fraction of 1e-4's passes)",
    )
    parser.add_argument("--report", action="store_true", help="print the tables of the last results and exit")
    args = parser.parse_args(argv)
    TEXT_SOURCE[0] = args.text_source
    for solver in ("ocas", "cpa"):
        PAIRS[solver][1]["tol_rel"] = args.tight_tol_rel
    PAIRS["dcd"][1]["tol"] = args.dcd_tight_tol
    OVR_CERTIFY_TOL_REL[0] = args.ovr_certify_tol_rel
    if args.report:
        print(report(json.loads(RESULTS.read_text())))
        return 0
    solvers = tuple(args.solvers.split(","))
    needed = {ANCHOR_PROGRAM[solver] for solver in solvers}  # msvmocas and svm-train are other benchmarks' anchors
    missing = [k for k, ok in anchors.available().items() if not ok and k in needed]
    if missing:
        print(
            f"anchor programs missing in {anchors.BIN}: {missing}; run ../shared/tools/build-anchors.sh",
            file=sys.stderr,
        )
        return 2
    from worker.solvers import cpa, dcd, ocas

    t0 = time.perf_counter()
    ocas.warm_up()
    cpa.warm_up()
    dcd.warm_up()
    warm_s = time.perf_counter() - t0
    from worker.solvers.data_passes import available_cores

    threads = args.threads or max(1, available_cores() // 2)
    rows = []
    load_start = os.getloadavg()
    sets = [name for name in args.sets.split(",") if name] + (["syn2m"] if args.big else [])  # --sets "": none
    for name in sets:
        Cs = [float(c) for c in args.Cs.split(",")] if name == "sector1" or name in TFIDF else [1.0]
        for C in Cs:
            repeats = 1 if name == "syn2m" else args.repeats
            rows.append(bench_row(name, C, repeats, solvers, threads, args.optimum_by))
    result = {"machine": machine(), "load_average_start": load_start, "warm_up_s": warm_s, "rows": rows}
    if args.sector_all:
        result["sector_all"] = {
            str(C): bench_ovr(args.repeats, C, threads, "sector", solvers, args.optimum_by)
            for C in [float(c) for c in args.sector_all_Cs.split(",")]
        }
    for name in [x for x in args.ovr.split(",") if x]:
        result.setdefault("ovr", {})[name] = {
            str(C): bench_ovr(args.repeats, C, threads, name, solvers, args.optimum_by)
            for C in [float(c) for c in args.ovr_Cs.split(",")]
        }
    result["load_average_end"] = os.getloadavg()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    keyed = {(r["data"], r["C"]): r for r in previous.get("rows", [])}
    for r in rows:  # a run of some solvers (--solvers) keeps the other solvers' earlier results of the row
        keyed[(r["data"], r["C"])] = {**keyed.get((r["data"], r["C"]), {}), **r}
    result["rows"] = list(keyed.values())
    # a run of some C values (--sector-all-Cs) keeps the other C values' earlier one-vs-rest results
    result["sector_all"] = {**previous.get("sector_all", {}), **result.get("sector_all", {})}
    if not result["sector_all"]:
        del result["sector_all"]
    ovr = previous.get("ovr", {})
    for name, by_C in result.get("ovr", {}).items():
        for C, block in by_C.items():  # a run of some pairs (--solvers) keeps the other pairs' earlier figures
            merged = dict(ovr.setdefault(name, {}).get(C, {}))
            for key, value in block.items():
                both = isinstance(value, dict) and isinstance(merged.get(key), dict)
                merged[key] = {**merged[key], **value} if both else value
            ovr[name][C] = merged
    if ovr:
        result["ovr"] = ovr
    RESULTS.write_text(json.dumps(result, indent=1, default=float) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
