// Hinge dashboard: lists data sets, jobs and models; uploads (saying how the indices were read) and trains on a data
// set (train.js); follows the selected job's event stream and draws its convergence as it grows (plot.js); shows a
// model, exports it in every format the API writes, predicts and evaluates with it (model_tools.js); shows a job's
// and a model's warnings; deletes data sets, jobs and models after a confirmation. Plain JavaScript modules, no
// framework, nothing loaded from outside this service.
// One selection at a time: a job shows its model once it has one, a model shows the job that trained it.

import { $, api, apiJson, confirmDialog, done, errorMessage, esc, eta, indexBaseText, keyValues, labelsText, notice, num, session, setKey,
  showWarnings, when } from "./util.js";
import { apiSchema } from "./schema.js";
import { describeJob, gapText } from "./status.js";
import { Trace, drawPlot } from "./plot.js";
import { openTrainForm, setReadiness } from "./train.js";
import { openTools } from "./model_tools.js";

const state = { job: null, record: null, model: null, stream: null, trace: new Trace(), drawPending: false,
                datasets: new Map(), allDatasets: false, asked: new Set(), health: null, dataset: null };

// -- data sets by id: names for the jobs and models that name them ---------------------------------------------

function datasetName(id) {
  let dataset = state.datasets.get(id);
  if (dataset === undefined && state.allDatasets) dataset = null; // the list holds every data set: this one is gone
  if (dataset === undefined && !state.asked.has(id)) {
    state.asked.add(id); // beyond the first page of the list: ask once
    apiJson(`/v1/datasets/${encodeURIComponent(id)}`).then((d) => state.datasets.set(id, d), () => state.datasets.set(id, null));
  }
  if (dataset === null) return `<span class="muted" title="${esc(id)}">deleted data set</span>`;
  return dataset ? `<span title="${esc(id)}">${esc(dataset.name || id)}</span>` : `<code>${esc(id)}</code>`;
}

function jobContext(job) {
  const health = state.health || {};
  // a solver compiling only partly (dcd's other formulations) is not said to hold a queued job back: a job of them
  // that does wait says so by its phase once a worker has it
  const partly = health.formulations_compiling || {};
  const compiling = (health.solvers_compiling || []).filter((name) => !(name in partly));
  return { dataset: state.datasets.get(job.dataset_id), compiling, compileEta: health.compile_eta_s };
}

// -- lists -------------------------------------------------------------------------------------------

const rendered = new WeakMap(); // a list row -> the cells last written into it (fill)

// when a pointer held down on the page was pressed (null: none is): the lists wait for its release (fill), for 5 s at
// most (a release the page never saw does not freeze them)
let pressedAt = null;
window.addEventListener("pointerdown", () => { pressedAt = Date.now(); }, true);
for (const type of ["pointerup", "pointercancel", "blur"]) window.addEventListener(type, () => { pressedAt = null; }, true);

/**
 * Write a list's rows, keeping each row's element from one refresh to the next (rows are matched by id): a row whose
 * cells are unchanged is left alone, a changed one gets new cells in the same element, a new one is added, a gone one
 * removed; while a pointer is held down the list is left as it is (the next refresh writes it). So a click whose press
 * and release straddle the 2.5 s refresh lands on the row it was meant for (with the rows rebuilt under it, the
 * release fell on a new element and no click was fired), and a hover or a text selection survives.
 */
function fill(tableId, rows, render, onClick, selected) {
  if (pressedAt !== null && Date.now() - pressedAt < 5000) return;
  const body = $(tableId).querySelector("tbody");
  const old = new Map([...body.children].map((tr) => [tr.dataset.id, tr]));
  let previous = null;
  for (const row of rows) {
    let tr = old.get(row.id);
    if (tr) {
      old.delete(row.id);
    } else {
      tr = document.createElement("tr");
      tr.dataset.id = row.id;
      tr.addEventListener("click", () => onClick(tr.dataset.id));
    }
    tr.className = row.id === selected ? "selected" : "";
    const cells = render(row);
    if (rendered.get(tr) !== cells) {
      tr.innerHTML = cells;
      rendered.set(tr, cells);
    }
    const place = previous ? previous.nextSibling : body.firstChild;
    if (place !== tr) body.insertBefore(tr, place);
    previous = tr;
  }
  old.forEach((tr) => tr.remove());
}

/** A model's solver, or where an imported model came from ("imported (libsvm)"). */
function solverText(model) {
  if (model.solver) return model.solver;
  return model.source === "imported" ? `imported (${model.import_format || "file"})` : "–";
}

/** The start of an id, enough to tell models apart in a list (the whole id in the cell's title and the model's panel). */
function shortId(id) {
  return id.length > 14 ? `${id.slice(0, 12)}…` : id;
}

/** A creation time to the minute (the whole ISO time in the cell's title). */
function createdCell(iso) {
  return `<td class="created" title="${esc(iso)}">${when(iso).slice(0, 16)}</td>`;
}

/** A small mark after a status when a job or model has warnings (absent: none), with their messages as its title. */
function warningMark(record) {
  const warnings = record.warnings || [];
  if (!warnings.length) return "";
  return ` <span class="warn-mark" title="${esc(warnings.map((w) => w.message).join("\n"))}">⚠ ${warnings.length}</span>`;
}

function progressCell(job) {
  const { fraction, text } = describeJob(job, jobContext(job));
  const bar = fraction === null ? "" : `<span class="mini"><div style="width:${(100 * fraction).toFixed(1)}%"></div></span>`;
  return `${bar}<span class="muted">${esc(text)}</span>`;
}

async function refresh() {
  try {
    const [datasets, jobs, models] = await Promise.all([
      apiJson("/v1/datasets?limit=50"), apiJson("/v1/jobs?limit=50"), apiJson("/v1/models?limit=50")]);
    notice("");
    for (const d of datasets.items) state.datasets.set(d.id, d);
    state.allDatasets = datasets.total <= datasets.items.length;
    $("datasets-count").textContent = `${datasets.total}`;
    $("jobs-count").textContent = `${jobs.total}`;
    $("models-count").textContent = `${models.total}`;
    fill("datasets", datasets.items, (d) => `<td><button type="button" class="link">train…</button></td>` +
      `<td class="wrap" title="${esc(d.id)}">${esc(d.name)}</td><td>${d.n_samples}</td>` +
      `<td title="${esc(indexBaseText(d))}">${d.n_features}</td>` +
      `<td class="wrap">${esc(labelsText(d))}</td>${createdCell(d.created_at)}`,
      selectDataset, state.dataset);
    fill("jobs", jobs.items, (j) => `<td><code>${esc(j.id)}</code></td><td>${esc(j.solver)}</td><td>${datasetName(j.dataset_id)}</td>` +
      `<td><span class="pill ${esc(j.status)}">${esc(j.status)}</span>${warningMark(j)}</td><td class="progress">${progressCell(j)}</td>` +
      `<td>${gapText(j.progress || {}).join("").replace("gap ", "") || "–"}</td><td>${j.status === "running" ? eta((j.progress || {}).eta_s) : "–"}</td>`,
      selectJob, state.job);
    fill("models", models.items, (m) => `<td><code title="${esc(m.id)}">${esc(shortId(m.id))}</code></td><td class="wrap">${esc(solverText(m))}</td>` +
      `<td class="wrap">${m.dataset_id ? datasetName(m.dataset_id) : "–"}</td>` +
      `<td>${esc(m.stop_reason ?? "–")}${warningMark(m)}</td><td>${num(m.objective, 6)}</td>` +
      `<td title="${m.train_r2 != null ? "R² on the training data (a regression)" : ""}">${num(m.train_r2 ?? m.train_accuracy, 4)}</td>` +
      createdCell(m.created_at),
      selectModel, state.model);
    if (!state.job && !state.model) {
      const running = jobs.items.find((j) => j.status === "running");
      if (running) selectJob(running.id);
    }
  } catch (error) {
    if (error.message !== "unauthorized") notice(`could not reach the API: ${error.message}`);
  }
  await readiness();
}

async function readiness() {
  try {
    const response = await fetch("/readyz");
    const health = await response.json();
    // ready: {status: "ok", workers, solvers_ready, solvers_compiling, formulations_compiling, compile_eta_s}; not
    // ready: 503 in the error shape, the readiness in error.details (warming: solvers_compiling, compile_eta_s)
    const details = health.error ? health.error.details || {} : health;
    const status = health.error ? details.status || "unavailable" : health.status;
    state.health = { status, workers: details.workers, solvers_compiling: details.solvers_compiling || [],
                     formulations_compiling: details.formulations_compiling || {}, compile_eta_s: details.compile_eta_s };
    const partly = state.health.formulations_compiling;
    const compiling = state.health.solvers_compiling.map((name) => (name in partly ? `${name} (partly)` : name));
    const building = compiling.length ? ` · compiling ${compiling.join(", ")} (about ${eta(state.health.compile_eta_s)})` : "";
    $("health").textContent = status === "ok" ? `ready · ${health.workers} worker(s)${building}` : `${status}: ${health.error ? health.error.message : ""}`;
    $("health").className = `pill ${status}`;
  } catch (error) {
    state.health = null;
    $("health").textContent = "unreachable";
    $("health").className = "pill unavailable";
  }
  setReadiness(state.health);
}

// -- a data set: the train form -----------------------------------------------------------------------------------

async function selectDataset(id) {
  state.dataset = id;
  const dataset = state.datasets.get(id) || (await apiJson(`/v1/datasets/${encodeURIComponent(id)}`));
  document.querySelectorAll("#datasets tbody tr").forEach((tr) => tr.classList.toggle("selected", tr.dataset.id === id));
  await openTrainForm(dataset, (job) => {
    selectJob(job.id);
    refresh();
  });
}

// -- a job: event stream and plot ---------------------------------------------------------------------------------

async function selectJob(id, { keepModel = false } = {}) {
  if (state.stream) state.stream.abort();
  state.job = id;
  state.record = null;
  state.trace = new Trace();
  if (!keepModel) showModel(null);
  $("job-detail").hidden = false;
  $("job-id").textContent = id;
  $("job-title").textContent = "";
  $("job-status").textContent = "";
  $("job-status").className = "pill";
  $("job-progress-text").textContent = "";
  $("job-params").innerHTML = "";
  $("job-cancel").hidden = true;
  $("job-delete").hidden = true;
  showWarnings("job-warnings", []);
  $("job-search").innerHTML = "";
  document.querySelectorAll("#jobs tbody tr").forEach((tr) => tr.classList.toggle("selected", tr.dataset.id === id));
  draw();
  const controller = new AbortController();
  state.stream = controller;
  try {
    await follow(id, controller);
  } catch (error) {
    if (error.name === "AbortError" || error.message === "unauthorized") return;
    $("job-progress-text").textContent = error.message.includes("404") ? "this job was deleted (its model stays)" : `stream stopped: ${error.message}`;
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
      let start = 0, cut;
      while ((cut = buffer.indexOf("\n\n", start)) >= 0) {
        const block = buffer.slice(start, cut);
        start = cut + 2;
        const event = { type: "message", data: "" };
        for (const line of block.split("\n")) {
          if (line.startsWith("event: ")) event.type = line.slice(7);
          else if (line.startsWith("data: ")) event.data += line.slice(6);
          else if (line.startsWith("id: ")) lastId = line.slice(4);
        }
        if (!event.data || state.job !== id) continue;
        if (handle(event.type, JSON.parse(event.data))) return;
      }
      buffer = buffer.slice(start);
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

function handle(type, data) {
  if (type === "trace") {
    state.trace.add(data);
    scheduleDraw();
  } else if (type === "status" || type === "end") {
    if (data.status === "deleted") {
      $("job-progress-text").textContent = "this job was deleted (its model stays)";
      return true;
    }
    state.record = data;
    if (type === "end") draw(); // the whole trace, at once: the job is over
    showJob();
    // the search table shows here while the job runs; once it has a model, the model's panel shows it
    if (data.search_results && !data.model_id) showSearch($("job-search"), data.search_results, null);
    if (data.model_id) $("job-search").innerHTML = "";
    if (type === "end") {
      refresh();
      if (data.model_id && data.model_id !== state.model) selectModel(data.model_id, { fromJob: true });
      return true;
    }
  } else if (type === "progress" && state.record) {
    state.record = { ...state.record, progress: data };
    showJob();
  }
  return false;
}

function showJob() {
  const job = state.record;
  $("job-status").textContent = job.status;
  $("job-status").className = `pill ${job.status}`;
  const dataset = state.datasets.get(job.dataset_id);
  $("job-title").innerHTML = `${esc(job.solver)} on ${datasetName(job.dataset_id)}${dataset ? ` · ${dataset.n_samples} rows` : ""}`;
  const { fraction, text } = describeJob(job, jobContext(job));
  $("job-bar-box").hidden = fraction === null;
  $("job-bar").style.width = `${(100 * (fraction || 0)).toFixed(1)}%`;
  $("job-progress-text").textContent = text;
  $("job-cancel").hidden = !["queued", "running"].includes(job.status);
  $("job-delete").hidden = !$("job-cancel").hidden; // a job still queued or running is canceled first
  showWarnings("job-warnings", job.warnings);
  if (!$("job-params").innerHTML) {
    apiSchema().then((schema) => { $("job-params").innerHTML = keyValues(job.params, defaultsOf(schema, job.solver)); });
  }
}

function defaultsOf(schema, solver) {
  const spec = schema.solvers[solver];
  if (!spec) return {};
  return Object.fromEntries(Object.entries(spec.params.properties).filter(([, p]) => "default" in p).map(([name, p]) => [name, p.default]));
}

async function cancelJob() {
  const response = await api(`/v1/jobs/${encodeURIComponent(state.job)}/cancel`, { method: "POST" });
  if (!response.ok) $("job-progress-text").textContent = `cancel refused: ${await errorMessage(response)}`;
}

function wallSeconds() {
  const job = state.record;
  if (!job || !job.started_at) return null;
  const end = job.finished_at ? Date.parse(job.finished_at) : Date.now();
  return Math.max(0, (end - Date.parse(job.started_at)) / 1000);
}

function scheduleDraw() {
  // at most five pictures a second while points stream in
  if (state.drawPending) return;
  state.drawPending = true;
  setTimeout(() => requestAnimationFrame(() => { state.drawPending = false; draw(); }), 200);
}

function draw() {
  const search = state.record && state.record.search_results;
  const best = search && search.best && search.best.C !== undefined ? search.best : null;
  $("plot-legend").innerHTML = drawPlot($("plot"), state.trace, { wallSeconds: wallSeconds(), best });
  $("plot-count").textContent = String(state.trace.count);
}

// -- a model: metadata, search, export -------------------------------------------------------------------

function showSearch(target, table, modelId) {
  const best = table.best || {};
  const rows = (table.settings || []).map((s) => {
    const isBest = s.C === best.C && (s.gamma ?? null) === (best.gamma ?? null);
    return `<tr><td class="${isBest ? "best" : ""}">${num(s.C)}</td><td>${s.gamma === null || s.gamma === undefined ? "–" : num(s.gamma)}</td>` +
      `<td class="${isBest ? "best" : ""}">${num(s.mean)}</td><td>${num(s.std)}</td><td>${s.folds_done}/${table.cv_folds}</td><td>${s.n_iter}</td><td>${num(s.seconds, 3)}</td></tr>`;
  }).join("");
  target.innerHTML = `<h2>Search <small>${esc(table.metric)}, ${table.cv_folds}-fold${best.C !== undefined ? `; best C = ${num(best.C)}` : ""}` +
    `${best.gamma !== undefined && best.gamma !== null ? `, gamma = ${num(best.gamma)}` : ""}</small></h2>` +
    `<table class="search-table"><thead><tr><th>C</th><th>gamma</th><th>mean</th><th>std</th><th>folds</th><th>iterations</th><th>seconds</th></tr></thead><tbody>${rows}</tbody></table>`;
  if (modelId) {
    api(`/v1/models/${encodeURIComponent(modelId)}/search.svg`).then((r) => (r.ok ? r.blob() : null)).then((blob) => {
      if (!blob || state.model !== modelId) return;
      const img = document.createElement("img");
      img.alt = "cross-validated score against C";
      img.src = URL.createObjectURL(blob);
      target.appendChild(img);
    });
  }
}

function showModel(id) {
  state.model = id;
  $("model-detail").hidden = !id;
  if (!id) return;
  $("model-id").textContent = id;
  $("model-title").textContent = "";
  $("model-meta").innerHTML = "";
  $("model-params").innerHTML = "";
  $("model-search").innerHTML = "";
  $("export-note").textContent = "";
  showWarnings("model-warnings", []);
  $("evaluate-dataset").innerHTML = ""; // filled with the model's tools once it is loaded
  document.querySelectorAll("#models tbody tr").forEach((tr) => tr.classList.toggle("selected", tr.dataset.id === id));
}

async function selectModel(id, { fromJob = false } = {}) {
  showModel(id);
  const [model, schema] = await Promise.all([apiJson(`/v1/models/${encodeURIComponent(id)}`), apiSchema()]);
  if (state.model !== id) return; // another selection came first
  if (!fromJob) {
    if (model.job_id && model.job_id !== state.job) selectJob(model.job_id, { keepModel: true });
    if (!model.job_id) {
      if (state.stream) state.stream.abort();
      state.job = null;
      $("job-detail").hidden = true;
    }
  }
  state.modelRecord = model;
  showWarnings("model-warnings", model.warnings);
  $("model-title").innerHTML = `${esc(solverText(model))}${model.dataset_id ? ` on ${datasetName(model.dataset_id)}` : ""}` +
    `${model.job_id ? ` · job <code>${esc(model.job_id)}</code>` : ""}`;
  const keys = ["source", "kind", "task", "labels", "n_features", "kernel", "n_support", "multiclass", "stop_reason", "converged", "n_iter",
    "objective", "gap_rel", "training_seconds", "train_accuracy", "train_mse", "train_r2", "created_at"];
  $("model-meta").innerHTML = keys.filter((k) => model[k] !== undefined && model[k] !== null).map((k) => {
    const value = model[k];
    const text = Array.isArray(value) ? value.map((v) => num(v)).join(", ")
      : typeof value === "object" ? Object.entries(value).map(([a, b]) => `${a} ${num(b)}`).join(", ") : num(value, 6);
    return `<dt>${esc(k)}</dt><dd>${text}</dd>`;
  }).join("");
  $("model-params").innerHTML = modelParams(model, schema);
  openTools(model, state.datasets);
  if (model.search_results) showSearch($("model-search"), model.search_results, id);
  $("export-buttons").innerHTML = schema.exportFormats.map((format) =>
    `<button type="button" class="export" id="export-${esc(format)}" data-format="${esc(format)}">${esc(format)}</button>`).join(" ");
  $("export-buttons").querySelectorAll("button").forEach((button) => button.addEventListener("click", () => exportModel(id, button.dataset.format)));
  if (!schema.exportFormats.length) $("export-note").textContent = "this server has no export route";
}

/** A model's parameters as it was fitted: for a search's model, the C (and gamma) it chose in place of the request's
 *  (which only seeded the search), shown as set, then the grid it searched. */
function modelParams(model, schema) {
  if (!model.params) return "–";
  const defaults = defaultsOf(schema, model.solver);
  const refit = model.refit_params;
  if (!refit) return keyValues(model.params, defaults);
  const { search, ...params } = model.params;
  params.C = refit.C;
  delete defaults.C;
  if (refit.gamma !== null && refit.gamma !== undefined) {
    params.kernel = { ...(params.kernel || {}), gamma: refit.gamma };
    if (defaults.kernel) defaults.kernel = { ...defaults.kernel, gamma: undefined };
  }
  const chosen = `C${refit.gamma !== null && refit.gamma !== undefined ? " and gamma" : ""}`;
  return `<p class="muted">${chosen} chosen by the search, then refit on all the data</p>${keyValues(params, defaults)}` +
    (search ? `<h3>searched</h3>${keyValues(search)}` : "");
}

async function exportModel(id, format) {
  const note = $("export-note");
  note.className = "muted";
  note.textContent = `exporting ${format}…`;
  const response = await api(`/v1/models/${encodeURIComponent(id)}/export?format=${encodeURIComponent(format)}`);
  if (!response.ok) {
    note.className = "error";
    note.textContent = `${format}: ${await errorMessage(response)}`;
    return;
  }
  const blob = await response.blob();
  const named = /filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") || "");
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = named ? named[1] : `${id}.${format}`;
  link.click();
  note.textContent = `saved ${link.download} (${blob.size} bytes)`;
}

async function uploadFile(event) {
  event.preventDefault();
  const file = $("upload-file").files[0];
  if (!file) return;
  const form = new FormData();
  form.append("file", file);
  $("upload-status").textContent = "uploading…";
  $("upload-status").className = "muted";
  const query = new URLSearchParams({ format: $("upload-format").value, name: file.name });
  if ($("upload-format").value === "svmlight") query.set("zero_based", $("upload-zero-based").value);
  const response = await api(`/v1/datasets?${query}`, { method: "POST", body: form });
  if (!response.ok) {
    $("upload-status").textContent = await errorMessage(response);
    $("upload-status").className = "error";
    return;
  }
  const dataset = await response.json();
  const base = indexBaseText(dataset);
  $("upload-status").textContent = `stored ${dataset.name}: ${dataset.n_samples} rows × ${dataset.n_features} features${base ? ` · ${base}` : ""}`;
  $("upload-status").className = dataset.zero_based_guessed && !dataset.zero_based ? "warn" : "muted";
  state.datasets.set(dataset.id, dataset);
  await refresh();
  selectDataset(dataset.id);
}

// -- deleting, after a confirmation ---------------------------------------------------------------------------

/** DELETE a data set, job or model once the person confirms; true when it is gone. */
async function deleteRecord(path, what, question) {
  if (!(await confirmDialog(question))) return false;
  const response = await api(`/v1/${path}`, { method: "DELETE" });
  if (!response.ok && response.status !== 404) {
    done(`could not delete ${what}: ${await errorMessage(response)}`, true);
    return false;
  }
  done(`deleted ${what}`);
  return true;
}

async function deleteDataset() {
  const id = state.dataset;
  const dataset = state.datasets.get(id);
  const name = dataset ? `"${dataset.name}" (${id})` : id;
  const question = `Delete data set ${name}? Its rows are deleted; models trained on it stay, and jobs still queued on it fail.`;
  if (!(await deleteRecord(`datasets/${encodeURIComponent(id)}`, `data set ${name}`, question))) return;
  state.datasets.set(id, null);
  state.dataset = null;
  $("train-panel").hidden = true;
  refresh();
}

async function deleteJob() {
  const id = state.job;
  if (!(await deleteRecord(`jobs/${encodeURIComponent(id)}`, `job ${id}`, `Delete job ${id} and its trace? Its model stays.`))) return;
  if (state.stream) state.stream.abort();
  state.job = null;
  $("job-detail").hidden = true;
  refresh();
}

async function deleteModel() {
  const id = state.model;
  const question = `Delete model ${id}? It can no longer predict or be exported; the job that trained it stays.`;
  if (!(await deleteRecord(`models/${encodeURIComponent(id)}`, `model ${id}`, question))) return;
  showModel(null);
  refresh();
}

$("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  setKey($("api-key").value.trim());
  refresh();
});
$("api-key").value = session.key;
$("job-cancel").addEventListener("click", cancelJob);
$("upload-form").addEventListener("submit", uploadFile);
$("upload-format").addEventListener("change", () => { $("upload-base-field").hidden = $("upload-format").value !== "svmlight"; });
$("dataset-delete").addEventListener("click", deleteDataset);
$("job-delete").addEventListener("click", deleteJob);
$("model-delete").addEventListener("click", deleteModel);
refresh();
setInterval(refresh, 2500);
