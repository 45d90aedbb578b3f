"""Pictures of training: the convergence trace of a job and the score table of a search (matplotlib, Agg).

``trace_figure`` draws two panels against solver seconds, both on a log scale: the primal objective
and the dual objective (or the lower bound of cutting-plane solvers) above, the gap below; one
colour per binary problem (one-vs-rest), one line per series. ``search_figure`` draws the
cross-validated score against C (log scale) with the standard deviation over the folds as error
bars, one line per gamma, the best setting starred.

Every line carries an SVG id (``gid``) that names what it shows, so a test or a script can read
the series from the SVG: ``primal-<k>``, ``dual-<k>``, ``gap-<k>`` for binary problem k (``-a<n>``
appended for the points of attempt n of a retried job), ``search-gamma-<gamma>`` (``search-C`` without
gamma) and ``search-best``. Only matplotlib's object API is used (no pyplot state), so figures can be
drawn in several threads at once; matplotlib is imported on the first picture, not with the API.
"""

from __future__ import annotations

import io
import math

MAX_POINTS_PER_LINE = 2000
"""Longer lines are thinned evenly (first and last points kept) so that pictures stay small."""

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]


def _figure(width: float, height: float, rows: int = 1):
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    axes = figure.subplots(rows, 1, sharex=True, squeeze=False)[:, 0]
    return figure, axes


def render(figure, fmt: str) -> bytes:
    """The figure as SVG text or PNG bytes."""
    buffer = io.BytesIO()
    if fmt == "svg":
        from matplotlib.backends.backend_svg import FigureCanvasSVG

        FigureCanvasSVG(figure).print_svg(buffer, metadata={"Date": None})
    else:
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(figure).print_png(buffer)
    return buffer.getvalue()


def _thin(points: list[dict]) -> list[dict]:
    if len(points) <= MAX_POINTS_PER_LINE:
        return points
    step = (len(points) - 1) / (MAX_POINTS_PER_LINE - 1)
    return [points[round(i * step)] for i in range(MAX_POINTS_PER_LINE)]


def _positive(value) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) and value > 0 else None


def plotted_points(points: list[dict]) -> list[dict]:
    """The points a trace picture shows: a search's refit when it has one, else every point."""
    refit = [p for p in points if p.get("stage") == "refit"]
    if refit:
        return refit
    return points


def trace_figure(points: list[dict], title: str):
    """Primal and dual (or lower bound) above, gap below, against seconds; log-scale values."""
    figure, (top, bottom) = _figure(8.0, 5.5, rows=2)
    shown = plotted_points(points)
    groups: dict[tuple, list[dict]] = {}
    for point in shown:
        key = (
            int(point.get("attempt", 1) or 1),
            int(point.get("subproblem", 0) or 0),
            point.get("fold"),
            point.get("C"),
            point.get("gamma"),
        )
        groups.setdefault(key, []).append(point)
    search_fits = any(key[2] is not None for key in groups)
    many = len({key[1] for key in groups}) > 1
    for (attempt, k, fold, C, gamma), group in sorted(groups.items(), key=lambda item: str(item[0])):
        group = _thin(group)
        suffix = f"-{k}" + (f"-a{attempt}" if attempt > 1 else "")
        if search_fits:
            suffix += f"-fold{fold}-C{C}" + (f"-g{gamma}" if gamma is not None else "")
        color = COLORS[k % len(COLORS)]
        label_of = (lambda name, k=k: f"{name} (class {k})") if many else (lambda name: name)
        if attempt > 1:
            label_of = (lambda base, n=attempt: lambda name: f"{base(name)}, attempt {n}")(label_of)
        seconds = [float(p.get("elapsed_s") or 0.0) for p in group]
        series = [
            (top, "primal", [_positive(p.get("primal")) for p in group], "-"),
            (top, "dual", [_positive(p.get("dual", p.get("lower_bound"))) for p in group], "--"),
            (bottom, "gap", [_positive(p.get("gap")) for p in group], "-"),
        ]
        for axes, name, values, style in series:
            xs = [x for x, v in zip(seconds, values) if v is not None]
            ys = [v for v in values if v is not None]
            if not ys:
                continue
            label = (
                None
                if search_fits
                else label_of("lower bound" if name == "dual" and "lower_bound" in group[0] else name)
            )
            (line,) = axes.plot(
                xs,
                ys,
                style,
                color=color,
                linewidth=0.8 if search_fits else 1.4,
                alpha=0.5 if search_fits else 1.0,
                label=label,
                marker="." if len(ys) < 30 else None,
            )
            line.set_gid(f"{name}{suffix}")
    top.set_yscale("log")
    bottom.set_yscale("log")
    top.set_ylabel("objective")
    bottom.set_ylabel("gap (primal - dual)")
    bottom.set_xlabel("solver seconds")
    top.set_title(title, fontsize=10)
    if not shown:
        top.text(0.5, 0.5, "no trace points yet", transform=top.transAxes, ha="center", va="center", color="#666")
    elif any(p.get("primal") is not None or p.get("gap") is not None for p in shown):
        handles, labels = top.get_legend_handles_labels()
        if handles:
            top.legend(fontsize=8, ncol=2 if len(handles) > 6 else 1)
    for axes in (top, bottom):
        axes.grid(True, which="both", alpha=0.25)
    return figure


def search_figure(table: dict, title: str):
    """Mean score against C with the folds' standard deviation as error bars; one line per gamma."""
    figure, (axes,) = _figure(7.0, 4.2)
    settings = [s for s in table.get("settings", []) if s.get("mean") is not None]
    by_gamma: dict = {}
    for setting in settings:
        by_gamma.setdefault(setting.get("gamma"), []).append(setting)
    for index, (gamma, group) in enumerate(sorted(by_gamma.items(), key=lambda item: (item[0] is None, item[0] or 0))):
        group.sort(key=lambda s: s["C"])
        container = axes.errorbar(
            [s["C"] for s in group],
            [s["mean"] for s in group],
            yerr=[s.get("std") or 0.0 for s in group],
            marker="o",
            capsize=3,
            color=COLORS[index % len(COLORS)],
            label=f"gamma = {gamma:g}" if gamma is not None else None,
        )
        container.lines[0].set_gid(f"search-gamma-{gamma:g}" if gamma is not None else "search-C")
    best = table.get("best")
    if best:
        (star,) = axes.plot(
            [best["C"]],
            [best["mean"]],
            "*",
            markersize=16,
            color="#ffbf00",
            markeredgecolor="#333",
            label=f"best: C = {best['C']:g}",
        )
        star.set_gid("search-best")
    axes.set_xscale("log")
    axes.set_xlabel("C")
    axes.set_ylabel(f"{table.get('metric', 'score')} ({table.get('cv_folds', '?')}-fold mean ± std)")
    axes.set_title(title, fontsize=10)
    axes.grid(True, which="both", alpha=0.25)
    if settings:
        axes.legend(fontsize=8)
    else:
        axes.text(0.5, 0.5, "no setting scored yet", transform=axes.transAxes, ha="center", va="center", color="#666")
    return figure
