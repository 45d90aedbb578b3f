// The convergence plot of a job, drawn as SVG from its trace points: primal (solid) and dual or lower bound
// (dashed) above, the gap below, log scales. Every fit is a line of its own: a class of one-vs-rest, a retry. A
// search's cross-validation fits (often dozens, each a few points) are drawn faint and grey, primal and gap only;
// once the job has chosen, the fits of the best setting are drawn in colour and its refit on all the data in black
// with its dual. A trace point's elapsed_s counts from the start of its own fit, so a search's time axis is "seconds
// within a fit"; a line that would go back in time or in iterations starts a new line instead of a saw-tooth. The
// time axis spans the points' seconds (from a round value at or below the first), not from 0.

import { esc, num } from "./util.js";

const GREY = "#aab2bd";
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"];
const INK = "#1d2430";
const W = 760, H = 420, LEFT = 64, RIGHT = 16, PANELS = [[14, 250], [280, 390]];

const positive = (v) => (typeof v === "number" && v > 0 ? v : null);
const dualOf = (p) => positive(p.dual ?? p.lower_bound);
const SERIES = [["primal", (p) => positive(p.primal), 0, ""], ["dual", dualOf, 0, "5 4"], ["gap", (p) => positive(p.gap), 1, ""]];

const CAP = 600; // points kept per line (the plot is 680 px wide): a long trace is thinned as it grows

/** A segment of a fit: every stride-th point it received (the stride doubles when CAP is passed) and its last. */
function segment() {
  return { kept: [], stride: 1, seen: 0, last: null };
}

/** The points of a segment to draw. */
function pointsOf(seg) {
  return seg.last && seg.kept[seg.kept.length - 1] !== seg.last ? [...seg.kept, seg.last] : seg.kept;
}

/** A job's trace as it arrives: its fits, one per (stage, fold, C, gamma, class, attempt), each cut into a new
 *  line where it restarts, thinned to at most CAP points a line, with the ranges of the axes. Memory and drawing
 *  stay bounded however many points the job records (a search of many fits can record hundreds of thousands). */
export class Trace {
  constructor() {
    this.fits = new Map();
    this.count = 0;
    this.xMax = 0;
    this.xMin = Infinity;
    this.low = [Infinity, Infinity];
    this.high = [0, 0];
  }

  add(p) {
    this.count += 1;
    const search = p.stage === "search";
    const key = [p.stage || "fit", search ? p.fold : "", search ? p.C : "", search ? p.gamma : "", p.subproblem || 0, p.attempt || 1].join("|");
    let fit = this.fits.get(key);
    if (!fit) {
      fit = { search, refit: p.stage === "refit", k: p.subproblem || 0, attempt: p.attempt || 1, fold: p.fold, C: p.C, gamma: p.gamma, segments: [segment()] };
      this.fits.set(key, fit);
    }
    let seg = fit.segments[fit.segments.length - 1];
    if (seg.last && ((p.elapsed_s || 0) < (seg.last.elapsed_s || 0) || p.iteration < seg.last.iteration)) fit.segments.push((seg = segment()));
    if (seg.seen % seg.stride === 0) {
      seg.kept.push(p);
      if (seg.kept.length > CAP) {
        seg.kept = seg.kept.filter((_, i) => i % 2 === 0);
        seg.stride *= 2;
      }
    }
    seg.seen += 1;
    seg.last = p;
    this.xMax = Math.max(this.xMax, p.elapsed_s || 0);
    this.xMin = Math.min(this.xMin, p.elapsed_s || 0);
    for (const [, value, panel] of SERIES) {
      const v = value(p);
      if (v) {
        this.low[panel] = Math.min(this.low[panel], v);
        this.high[panel] = Math.max(this.high[panel], v);
      }
    }
  }
}

function settingName(fit) {
  return `C ${num(fit.C)}${fit.gamma === null || fit.gamma === undefined ? "" : `, gamma ${num(fit.gamma)}`}`;
}

/** Round ticks (1, 2, 5 x 10^n), about five, from the last one at or below ``low`` to the first at or above ``high``. */
export function ticks(low, high) {
  const raw = (high - low) / 5 || Math.abs(high) / 5 || 1;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((v) => v >= raw * (1 - 1e-9));
  const out = [];
  for (let t = Math.floor(low / step + 1e-9) * step; out.length < 50; t += step) {
    out.push(+t.toPrecision(12));
    if (t >= high - step * 1e-9) break;
  }
  if (out.length < 2) out.push(+(out[0] + step).toPrecision(12));
  return out;
}

function logScale(low, high, [top, bottom]) {
  const lo = high > 0 ? Math.log10(low) : 0, hi = high > 0 ? Math.log10(high) : 1;
  const a = Math.floor(lo), b = Math.max(Math.ceil(hi), a + 1);
  return { a, b, y: (v) => bottom - ((Math.log10(v) - a) / (b - a)) * (bottom - top) };
}

function sameSetting(fit, best) {
  return best && fit.C === best.C && (fit.gamma ?? null) === (best.gamma ?? null);
}

/** Draw the trace into ``svg``; returns the legend (HTML). ``wallSeconds``: how long the job has run; ``best``: the
 *  setting a search chose ({C, gamma}), once it has. */
export function drawPlot(svg, trace, { wallSeconds = null, best = null } = {}) {
  const fits = [...trace.fits.values()];
  const searching = fits.some((f) => f.search);
  const xMax = Math.max(1e-6, trace.xMax);
  const axis = ticks(Math.min(trace.xMin, xMax), xMax);
  const [xStart, xEnd] = [axis[0], axis[axis.length - 1]];
  const x = (s) => LEFT + ((s - xStart) / (xEnd - xStart)) * (W - LEFT - RIGHT);
  const scales = PANELS.map((panel, i) => logScale(trace.low[i], trace.high[i], panel));
  let out = "";
  PANELS.forEach(([top, bottom], i) => {
    const { a, b, y } = scales[i];
    const step = Math.max(1, Math.ceil((b - a) / 6));
    for (let e = a; e <= b; e += step) {
      out += `<line class="grid" x1="${LEFT}" x2="${W - RIGHT}" y1="${y(10 ** e)}" y2="${y(10 ** e)}"/>`;
      out += `<text x="${LEFT - 6}" y="${y(10 ** e) + 4}" text-anchor="end">1e${e}</text>`;
    }
    out += `<line class="axis" x1="${LEFT}" x2="${LEFT}" y1="${top}" y2="${bottom}"/><line class="axis" x1="${LEFT}" x2="${W - RIGHT}" y1="${bottom}" y2="${bottom}"/>`;
    out += `<text x="14" y="${(top + bottom) / 2}" transform="rotate(-90 14 ${(top + bottom) / 2})" text-anchor="middle">${i ? "gap" : "primal, dual"}</text>`;
  });
  for (const t of axis) out += `<text class="tick" x="${x(t)}" y="${H - 16}" text-anchor="middle">${num(t, 3)}</text>`;
  out += `<text id="plot-xlabel" x="${W - RIGHT}" y="${H - 2}" text-anchor="end">${searching ? "seconds within each fit (every fit starts at 0)" : "solver seconds"}</text>`;
  // grey search fits first, then the best setting's, then the refit and ordinary fits over them
  const rank = (f) => (f.search ? (sameSetting(f, best) ? 1 : 0) : 2);
  for (const fit of [...fits].sort((a, b) => rank(a) - rank(b))) {
    const chosen = fit.search && sameSetting(fit, best);
    const color = fit.search ? (chosen ? COLORS[0] : GREY) : searching && fit.refit ? INK : COLORS[fit.k % COLORS.length];
    const base = fit.search ? `search-f${fit.fold}-${settingName(fit).replace(/[^0-9a-z.]+/gi, "_")}-k${fit.k}` : `${fit.k}${fit.attempt > 1 ? `-a${fit.attempt}` : ""}`;
    const title = fit.search ? `fold ${fit.fold} · ${settingName(fit)}${fit.k ? ` · class ${fit.k + 1}` : ""}` : `${fit.refit ? "refit · " : ""}class ${fit.k + 1}${fit.attempt > 1 ? ` · attempt ${fit.attempt}` : ""}`;
    const kind = fit.search ? (chosen ? "search-best" : "search") : fit.refit ? "refit" : "fit";
    const attrs = `data-kind="${fit.search ? "search" : kind}" data-fit="${esc(title)}"${chosen ? " data-best" : ""} stroke="${color}" opacity="${fit.search && !chosen ? 0.6 : 1}"`;
    fit.segments.forEach((seg, s) => {
      const points = pointsOf(seg);
      for (const [name, value, panel, dash] of SERIES) {
        if (fit.search && name === "dual") continue; // a search's fits: primal and gap only (the refit has its dual)
        const shown = points.filter((p) => value(p));
        if (!shown.length) continue;
        const id = esc(`${name}-${base}${s ? `-s${s}` : ""}`);
        const coords = shown.map((p) => [x(p.elapsed_s || 0).toFixed(1), scales[panel].y(value(p)).toFixed(1)]);
        out += coords.length === 1
          ? `<circle id="${id}" data-series="${name}" ${attrs} fill="${color}" cx="${coords[0][0]}" cy="${coords[0][1]}" r="${fit.search ? 1.6 : 2.5}"><title>${esc(title)}</title></circle>`
          : `<polyline id="${id}" data-series="${name}" ${attrs} class="${kind}" stroke-dasharray="${dash}" points="${coords.map((c) => c.join(",")).join(" ")}"><title>${esc(title)}</title></polyline>`;
      }
    });
  }
  if (!trace.count) out += `<text x="${W / 2}" y="${H / 2}" text-anchor="middle">waiting for trace points…</text>`;
  svg.innerHTML = out;
  return legend(fits, best, xMax, wallSeconds);
}

function swatch(color) {
  return `<span class="swatch" style="background:${color}"></span>`;
}

function legend(fits, best, xMax, wallSeconds) {
  const wall = wallSeconds ? `; the job has run ${num(wallSeconds, 3)} s (wall clock)` : "";
  const search = fits.filter((f) => f.search);
  if (!search.length) {
    const classes = new Set(fits.map((f) => f.k)).size;
    return `solid: primal · dashed: dual or lower bound · lower panel: gap${classes > 1 ? " · one colour per class" : ""}${wall}`;
  }
  const cellOf = (f) => `${f.fold}|${settingName(f)}`;
  const cells = new Set(search.map(cellOf)).size;
  const settings = new Set(search.map(settingName)).size;
  const folds = new Set(search.map((f) => f.fold)).size;
  const classes = new Set(search.map((f) => f.k)).size;
  const counted = `${cells} cross-validation fits (${settings} setting${settings === 1 ? "" : "s"} × ${folds} fold${folds === 1 ? "" : "s"}` +
    `${classes > 1 ? `, ${classes} classes each` : ""})`;
  const dots = new Set(search.filter((f) => f.segments.every((seg) => pointsOf(seg).length <= 1)).map(cellOf)).size;
  const parts = [`${swatch(GREY)}grey: the ${counted}, primal above and gap below, each from its own 0 s` +
    (dots ? `; ${dots} of them recorded a single point (a dot)` : "")];
  const chosen = new Set(search.filter((f) => sameSetting(f, best)).map(cellOf)).size;
  if (chosen) parts.push(`${swatch(COLORS[0])}blue: the ${chosen} fits of the best setting, ${esc(settingName(best))}`);
  else parts.push("the best setting is coloured once the search has chosen it");
  if (fits.some((f) => f.refit)) parts.push(`${swatch(INK)}black: its refit on all the data (solid: primal, dashed: dual, lower panel: gap)`);
  parts.push(`the longest fit took ${num(xMax, 3)} s${wall}`);
  return parts.join(" · ");
}
