// Hinge dashboard: lists data sets, jobs and models; follows the selected job's event stream and draws its
// convergence as it grows. Plain JavaScript, no framework, nothing loaded from outside this service.
// Every API request carries the API key entered above (kept in this browser's localStorage).
"use strict";

const state = { key: localStorage.getItem("hinge-api-key") || "", job: null, model: null, stream: null,
                points: [], progress: null, exportRoute: null, drawPending: false };
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"];
const $ = (id) => document.getElementById(id);

function esc(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
function num(value, digits = 4) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  if (typeof value !== "number") return esc(value);
  return Math.abs(value) >= 1e5 || (Math.abs(value) < 1e-3 && value !== 0) ? value.toExponential(2) : String(+value.toPrecision(digits));
}
function eta(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const s = Math.round(seconds);
  return s >= 60 ? `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}` : `${s} s`;
}
function when(iso) { return iso ? iso.replace("T", " ").slice(0, 19) : ""; }
function headers(extra = {}) { return state.key ? { ...extra, Authorization: `Bearer ${state.key}` } : extra; }

function notice(text) {
  const box = $("notice");
  box.hidden = !text;
  box.textContent = text || "";
}

async function api(path, options = {}) {
  const response = await fetch(path, { ...options, headers: headers(options.headers || {}) });
  if (response.status === 401) {
    notice("This service needs an API key: enter one above (hinge keys create --tenant NAME prints one).");
    throw new Error("unauthorized");
  }
  return response;
}
async function apiJson(path, options) {
  const response = await api(path, options);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error ? body.error.message : response.statusText);
  return body;
}

// -- lists -------------------------------------------------------------------------------------------

function fill(tableId, rows, render, onClick, selected) {
  const body = $(tableId).querySelector("tbody");
  body.innerHTML = rows.map((row) => `<tr data-id="${esc(row.id)}" class="${row.id === selected ? "selected" : ""}">${render(row)}</tr>`).join("");
  body.querySelectorAll("tr").forEach((tr) => tr.addEventListener("click", () => onClick(tr.dataset.id)));
}

function progressCell(job) {
  const p = job.progress || {};
  const fraction = p.fraction ?? (job.status === "succeeded" ? 1 : 0);
  const phase = job.status === "running" ? (p.phase || "running") : job.status;
  return `<span class="mini"><div style="width:${(100 * fraction).toFixed(1)}%"></div></span>${(100 * fraction).toFixed(0)}% <span class="muted">${esc(phase)}</span>`;
}

async function refresh() {
  try {
    const [datasets, jobs, models] = await Promise.all([
      apiJson("/v1/datasets?limit=50"), apiJson("/v1/jobs?limit=50"), apiJson("/v1/models?limit=50")]);
    notice("");
    $("datasets-count").textContent = `${datasets.total}`;
    $("jobs-count").textContent = `${jobs.total}`;
    $("models-count").textContent = `${models.total}`;
    fill("datasets", datasets.items, (d) => `<td><code>${esc(d.id)}</code></td><td>${esc(d.name)}</td><td>${d.n_samples}</td>` +
      `<td>${d.n_features}</td><td>${esc(Object.entries(d.labels || {}).slice(0, 4).map(([k, v]) => `${k}: ${v}`).join(", "))}</td><td>${when(d.created_at)}</td>`,
      () => {}, null);
    fill("jobs", jobs.items, (j) => `<td><code>${esc(j.id)}</code></td><td>${esc(j.solver)}</td><td><code>${esc(j.dataset_id)}</code></td>` +
      `<td><span class="pill ${esc(j.status)}">${esc(j.status)}</span></td><td>${progressCell(j)}</td>` +
      `<td>${num((j.progress || {}).gap, 3)}</td><td>${j.status === "running" ? eta((j.progress || {}).eta_s) : "–"}</td>`,
      selectJob, state.job);
    fill("models", models.items, (m) => `<td><code>${esc(m.id)}</code></td><td>${esc(m.solver)}</td><td>${esc(m.stop_reason)}</td>` +
      `<td>${num(m.objective, 6)}</td><td>${num(m.train_accuracy, 4)}</td><td>${when(m.created_at)}</td>`, selectModel, state.model);
    if (!state.job) {
      const running = jobs.items.find((j) => j.status === "running");
      if (running) selectJob(running.id);
    }
  } catch (error) {
    if (error.message !== "unauthorized") notice(`could not reach the API: ${error.message}`);
  }
  try {
    const response = await fetch("/readyz");
    const health = await response.json();
    // ready: {status: "ok", workers}; not ready: 503 in the error shape, the readiness in error.details
    const status = health.error ? (health.error.details || {}).status || "unavailable" : health.status;
    const label = status === "ok" ? `ready · ${health.workers} worker(s)` : `${status}: ${health.error ? health.error.message : ""}`;
    $("health").textContent = label;
    $("health").className = `pill ${status}`;
  } catch (error) {
    $("health").textContent = "unreachable";
    $("health").className = "pill unavailable";
  }
}

// -- a job: event stream and plot ---------------------------------------------------------------------

async function selectJob(id) {
  if (state.stream) state.stream.abort();
  state.job = id;
  state.points = [];
  $("job-detail").hidden = false;
  $("job-id").textContent = id;
  $("job-search").innerHTML = "";
  draw();
  const controller = new AbortController();
  state.stream = controller;
  try {
    await follow(id, controller);
  } catch (error) {
    if (error.name !== "AbortError" && error.message !== "unauthorized") $("job-progress-text").textContent = `stream stopped: ${error.message}`;
  }
}

async function follow(id, controller) {
  // fetch, not EventSource: EventSource cannot send the Authorization header.
  let lastId = null;
  for (let attempt = 0; attempt < 20; attempt++) {
    const extra = { Accept: "text/event-stream" };
    if (lastId !== null) extra["Last-Event-ID"] = lastId;
    const response = await api(`/v1/jobs/${encodeURIComponent(id)}/events`, { headers: extra, signal: controller.signal });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const event = { type: "message", data: "" };
        for (const line of block.split("\n")) {
          if (line.startsWith("event: ")) event.type = line.slice(7);
          else if (line.startsWith("data: ")) event.data += line.slice(6);
          else if (line.startsWith("id: ")) lastId = line.slice(4);
        }
        if (!event.data) continue;
        if (handle(event.type, JSON.parse(event.data))) return;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

function handle(type, data) {
  if (type === "trace") {
    state.points.push(data);
    scheduleDraw();
  } else if (type === "status" || type === "end") {
    showStatus(data.status, data.progress || {});
    if (data.search_results) showSearch($("job-search"), data.search_results, null);
    if (type === "end") {
      scheduleDraw();
      refresh();
      return true;
    }
  } else if (type === "progress") {
    showStatus(null, data);
  }
  return false;
}

function showStatus(status, progress) {
  if (status) {
    $("job-status").textContent = status;
    $("job-status").className = `pill ${status}`;
  }
  state.progress = progress;
  const fraction = progress.fraction ?? 0;
  $("job-bar").style.width = `${(100 * fraction).toFixed(1)}%`;
  const parts = [`${(100 * fraction).toFixed(1)}%`, progress.phase || status || ""];
  if (progress.gap !== undefined && progress.gap !== null) parts.push(`gap ${num(progress.gap, 3)}`);
  if (progress.eta_s !== undefined && progress.eta_s !== null) parts.push(`ETA ${eta(progress.eta_s)}`);
  if (progress.subproblems > 1) parts.push(`class ${progress.subproblem + 1} of ${progress.subproblems}`);
  if (progress.subtasks_total) parts.push(`${progress.subtasks_done}/${progress.subtasks_total} search subtasks`);
  $("job-progress-text").textContent = parts.filter(Boolean).join(" · ");
}

function scheduleDraw() {
  if (state.drawPending) return;
  state.drawPending = true;
  requestAnimationFrame(() => { state.drawPending = false; draw(); });
}

function draw() {
  const svg = $("plot");
  const W = 760, H = 420, left = 64, right = 16, panels = [[14, 250], [280, 390]];
  const refit = state.points.some((p) => p.stage === "refit");
  const shown = state.points.filter((p) => (refit ? p.stage === "refit" : true));
  $("plot-count").textContent = String(state.points.length);
  const groups = new Map();
  for (const p of shown) {
    const search = p.stage === "search";
    const key = search ? `s${p.subproblem || 0}-f${p.fold}-C${p.C}-g${p.gamma}` : `${p.subproblem || 0}${p.attempt > 1 ? `-a${p.attempt}` : ""}`;
    if (!groups.has(key)) groups.set(key, { k: p.subproblem || 0, search, points: [] });
    groups.get(key).points.push(p);
  }
  const xs = shown.map((p) => p.elapsed_s || 0);
  const xMax = Math.max(1e-3, ...xs);
  const positive = (v) => (typeof v === "number" && v > 0 ? v : null);
  const dualOf = (p) => positive(p.dual ?? p.lower_bound);
  const ranges = [[], []];
  for (const p of shown) {
    for (const v of [positive(p.primal), dualOf(p)]) if (v) ranges[0].push(v);
    if (positive(p.gap)) ranges[1].push(positive(p.gap));
  }
  const scales = ranges.map((values, i) => {
    const lo = values.length ? Math.log10(Math.min(...values)) : 0, hi = values.length ? Math.log10(Math.max(...values)) : 1;
    const a = Math.floor(lo), b = Math.max(Math.ceil(hi), a + 1);
    const [top, bottom] = panels[i];
    return { a, b, y: (v) => bottom - ((Math.log10(v) - a) / (b - a)) * (bottom - top) };
  });
  const x = (s) => left + (s / xMax) * (W - left - right);
  let out = "";
  panels.forEach(([top, bottom], i) => {
    const { a, b, y } = scales[i];
    const step = Math.max(1, Math.ceil((b - a) / 6));
    for (let e = a; e <= b; e += step) {
      out += `<line class="grid" x1="${left}" x2="${W - right}" y1="${y(10 ** e)}" y2="${y(10 ** e)}"/>`;
      out += `<text x="${left - 6}" y="${y(10 ** e) + 4}" text-anchor="end">1e${e}</text>`;
    }
    out += `<line class="axis" x1="${left}" x2="${left}" y1="${top}" y2="${bottom}"/><line class="axis" x1="${left}" x2="${W - right}" y1="${bottom}" y2="${bottom}"/>`;
    out += `<text x="14" y="${(top + bottom) / 2}" transform="rotate(-90 14 ${(top + bottom) / 2})" text-anchor="middle">${i ? "gap" : "primal, dual"}</text>`;
  });
  for (let t = 0; t <= 4; t++) out += `<text x="${x((xMax * t) / 4)}" y="${H - 12}" text-anchor="middle">${num((xMax * t) / 4, 3)}</text>`;
  out += `<text x="${W - right}" y="${H}" text-anchor="end">solver seconds</text>`;
  for (const [key, group] of groups) {
    const color = group.search ? "#9aa3ad" : COLORS[group.k % COLORS.length];
    const series = [["primal", (p) => positive(p.primal), 0, ""], ["dual", dualOf, 0, "5 4"], ["gap", (p) => positive(p.gap), 1, ""]];
    for (const [name, value, panel, dash] of series) {
      const coords = group.points.filter((p) => value(p)).map((p) => `${x(p.elapsed_s || 0).toFixed(1)},${scales[panel].y(value(p)).toFixed(1)}`);
      if (!coords.length) continue;
      const id = group.search ? `${name}-search-${key}` : `${name}-${key}`;
      out += `<polyline id="${esc(id)}" data-series="${name}" stroke="${color}" stroke-dasharray="${dash}" opacity="${group.search ? 0.5 : 1}" points="${coords.join(" ")}"/>`;
    }
  }
  if (!shown.length) out += `<text x="${W / 2}" y="${H / 2}" text-anchor="middle">waiting for trace points…</text>`;
  svg.innerHTML = out;
}

// -- a model: metadata, search, export -------------------------------------------------------------------

function showSearch(target, table, modelId) {
  const best = table.best || {};
  const rows = (table.settings || []).map((s) => {
    const isBest = s.C === best.C && (s.gamma ?? null) === (best.gamma ?? null);
    return `<tr><td class="${isBest ? "best" : ""}">${num(s.C)}</td><td>${s.gamma === null || s.gamma === undefined ? "–" : num(s.gamma)}</td>` +
      `<td class="${isBest ? "best" : ""}">${num(s.mean)}</td><td>${num(s.std)}</td><td>${s.folds_done}/${table.cv_folds}</td><td>${s.n_iter}</td><td>${num(s.seconds, 3)}</td></tr>`;
  }).join("");
  target.innerHTML = `<h2>Search <small>${esc(table.metric)}, ${table.cv_folds}-fold${best.C !== undefined ? `; best C = ${num(best.C)}` : ""}</small></h2>` +
    `<table class="search-table"><thead><tr><th>C</th><th>gamma</th><th>mean</th><th>std</th><th>folds</th><th>iterations</th><th>seconds</th></tr></thead><tbody>${rows}</tbody></table>`;
  if (modelId) {
    api(`/v1/models/${encodeURIComponent(modelId)}/search.svg`).then((r) => (r.ok ? r.blob() : null)).then((blob) => {
      if (!blob) return;
      const img = document.createElement("img");
      img.alt = "cross-validated score against C";
      img.src = URL.createObjectURL(blob);
      target.appendChild(img);
    });
  }
}

async function probeExport() {
  // The export route may not exist on this server: a request for a model that does not exist tells us
  // (404 "model_not_found": the route is there; 404 "not_found" or 405: it is not).
  try {
    const response = await api("/v1/models/mdl_probe/export?format=json");
    const body = await response.json().catch(() => ({}));
    state.exportRoute = response.status !== 405 && !(body.error && body.error.code === "not_found");
  } catch (error) {
    state.exportRoute = null;
  }
}

async function selectModel(id) {
  state.model = id;
  const model = await apiJson(`/v1/models/${encodeURIComponent(id)}`);
  $("model-detail").hidden = false;
  $("model-id").textContent = id;
  const keys = ["solver", "dataset_id", "job_id", "kind", "task", "labels", "n_features", "n_support", "stop_reason", "converged",
    "n_iter", "objective", "training_seconds", "train_accuracy", "refit_params", "params", "created_at"];
  $("model-meta").innerHTML = keys.filter((k) => model[k] !== undefined).map((k) =>
    `<dt>${esc(k)}</dt><dd>${esc(typeof model[k] === "object" ? JSON.stringify(model[k]) : model[k])}</dd>`).join("");
  $("model-search").innerHTML = "";
  if (model.search_results) showSearch($("model-search"), model.search_results, id);
  if (state.exportRoute === null) await probeExport();
  const button = $("export-button");
  button.disabled = !state.exportRoute;
  $("export-note").textContent = state.exportRoute ? "" : "this server has no export route";
  refresh();
}

async function exportModel() {
  const response = await api(`/v1/models/${encodeURIComponent(state.model)}/export?format=json`);
  if (!response.ok) {
    $("export-note").textContent = `export failed (HTTP ${response.status})`;
    return;
  }
  const link = document.createElement("a");
  link.href = URL.createObjectURL(await response.blob());
  link.download = `${state.model}.json`;
  link.click();
}

async function uploadFile(event) {
  event.preventDefault();
  const file = $("upload-file").files[0];
  if (!file) return;
  const form = new FormData();
  form.append("file", file);
  $("upload-status").textContent = "uploading…";
  const response = await api(`/v1/datasets?format=${$("upload-format").value}&name=${encodeURIComponent(file.name)}`, { method: "POST", body: form });
  const body = await response.json();
  $("upload-status").textContent = response.ok ? `stored ${body.id}` : body.error.message;
  refresh();
}

$("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  state.key = $("api-key").value.trim();
  localStorage.setItem("hinge-api-key", state.key);
  state.exportRoute = null;
  refresh();
});
$("api-key").value = state.key;
$("export-button").addEventListener("click", exportModel);
$("upload-form").addEventListener("submit", uploadFile);
refresh();
setInterval(refresh, 2500);
