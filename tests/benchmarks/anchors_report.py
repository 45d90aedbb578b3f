"""The tables of ``bench_anchors``' results (``python -m tests.benchmarks.bench_anchors --report``)."""

from __future__ import annotations

SECTOR_ALL_PAIRS = (("ours_ocas", "ocas", "svmocas"), ("ours_cpa", "cpa", "svm_perf"), ("ours_dcd", "dcd", "liblinear"))
"""(our key, our solver, the anchor) of the one-vs-rest comparison."""


def _fmt(value, digits=3):
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def report(result: dict) -> str:
    """Markdown tables of a results JSON: one row per (data set, C) and pair."""
    lines = [
        "| data | C | pair | anchor s (it., above opt.) | ours default s (it., above opt., gap_rel) "
        "| ours to anchor's objective: 1 thread / all cores | ratio (1 thread) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in result.get("rows", []):
        for solver in ("ocas", "cpa", "dcd"):
            if solver not in row:
                continue
            sm = row[solver]["summary"]
            a, d = sm["anchor"], sm["ours_default"]
            t1, t2 = sm["ours_1thread_tight"], sm["ours_tight"]
            lines.append(
                f"| {row['data']} | {_fmt(row['C'])} | {solver} / {row[solver]['anchor']} "
                f"| {_fmt(a['seconds'])} ({_fmt(a['iterations'])}, {_fmt(100 * a['precision'], 2)}%) "
                f"| {_fmt(d['seconds'])} ({_fmt(d['iterations'])}, {_fmt(100 * d['precision'], 2)}%, "
                f"{_fmt(100 * d['gap_rel'], 2)}%) "
                f"| {_fmt(t1['seconds_to_anchor_objective'])} / {_fmt(t2['seconds_to_anchor_objective'])} "
                f"| {_fmt(t1['ratio_to_anchor'], 2)} |"
            )
    iters = ["", "| data | C | ocas iterations / libocas, TolRel 0.01 | TolRel 0.001 |", "| --- | --- | --- | --- |"]
    for row in result.get("rows", []):
        same = row.get("ocas", {}).get("iterations_same_tol_rel")
        if same:
            iters.append(
                f"| {row['data']} | {_fmt(row['C'])} | {same['0.01']['ours']} / {same['0.01']['libocas']} "
                f"| {same['0.001']['ours']} / {same['0.001']['libocas']} |"
            )
    out = lines + iters
    blocks = [("sector", C, block) for C, block in (result.get("sector_all") or {}).items()]
    blocks += [(name, C, block) for name, by_C in (result.get("ovr") or {}).items() for C, block in by_C.items()]
    for name, C, block in blocks:
        m = block["seconds_median"]
        p = block["precision_of_summed_objective"]
        out += [
            "",
            f"{name}, {block['classes']} classes one-vs-rest, C = {C} (summed solver seconds, precision of the summed "
            "objective):",
            "",
            "| pair | anchor | ours default (1 thread) | ratio | ours to the anchor's objective, per class | ratio |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        reach = block.get("seconds_to_anchor_objective_median", {})
        for ours, _, theirs in SECTOR_ALL_PAIRS:
            if ours not in m:
                continue
            out.append(
                f"| {ours[5:]} / {theirs} | {_fmt(m[theirs])} s ({_fmt(100 * p[theirs], 2)}%) "
                f"| {_fmt(m[ours])} s ({_fmt(100 * p[ours], 2)}%) | {_fmt(m[ours] / m[theirs], 2)} "
                f"| {_fmt(reach.get(ours))} s | {_fmt(reach[ours] / m[theirs] if ours in reach else None, 2)} |"
            )
    return "\n".join(out)
