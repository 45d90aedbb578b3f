// A model's tools in its panel: predict rows pasted or read from a file (and download the predictions as CSV), and
// evaluate the model on a stored data set (accuracy and the other metrics, the confusion matrix, and for two
// classes the ROC curve; a regression's errors, R² and its predicted values against the true ones). The rows are read here, in the browser, into the API's predict instances: svmlight lines
// become sparse rows numbered as the user wrote them (the API numbers them as the training upload did), other lines
// dense rows of feature values. A label in the rows (svmlight's first token, or a CSV column named `label`) is
// compared with the prediction.

import { $, api, errorMessage, esc, num } from "./util.js";

const CHUNK_ROWS = 2000; // rows per predict request (the server's own limit, max_predict_instances, is far above)
const SHOWN_ROWS = 20;

const tools = { model: null, result: null };

/** Point the tools at ``model`` (the API's ModelOut) and the data sets the page knows (a Map by id). */
export function openTools(model, datasets) {
  tools.model = model;
  tools.result = null;
  $("predict-note").textContent = "";
  $("predict-note").className = "muted";
  $("predict-result").hidden = true;
  $("predict-result").innerHTML = "";
  $("predict-download").hidden = true;
  $("predict-proba-field").hidden = !model.probability;
  $("predict-proba").checked = false;
  $("evaluate-result").innerHTML = "";
  $("evaluate-note").textContent = "";
  const options = [...datasets.values()].filter(Boolean);
  $("evaluate-dataset").innerHTML = options.length
    ? options.map((d) => `<option value="${esc(d.id)}" ${d.id === model.dataset_id ? "selected" : ""}>${esc(d.name)} (${esc(d.id)}` +
        `${d.id === model.dataset_id ? ", its training data" : ""})</option>`).join("")
    : `<option value="">no data set: upload one first</option>`;
}

// -- rows ----------------------------------------------------------------------------------------------------

const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/; // finite: JSON has no NaN or infinity

/** The rows of a text: {instances, labels (null when no row has one), lines (file line of each row)} or {error}. */
export function readRows(text) {
  const lines = text.split(/\r?\n/).map((line, i) => ({ text: line.replace(/#.*$/, "").trim(), number: i + 1 })).filter((l) => l.text);
  if (!lines.length) return { error: "no rows: paste rows or choose a file" };
  const svmlight = lines.some((l) => /(^|\s)\d+:/.test(l.text));
  return svmlight ? svmlightRows(lines) : denseRows(lines);
}

function svmlightRows(lines) {
  const instances = [], labels = [];
  for (const { text, number } of lines) {
    const row = {};
    let label = null;
    for (const [position, token] of text.split(/\s+/).entries()) {
      const colon = token.indexOf(":");
      if (colon < 0) {
        if (position !== 0 || !NUMBER.test(token)) return { error: `line ${number}: ${JSON.stringify(token)} is neither a label (first) nor index:value` };
        label = Number(token);
        continue;
      }
      const [index, value] = [token.slice(0, colon), token.slice(colon + 1)];
      if (index === "qid") continue;
      if (!/^\d+$/.test(index)) return { error: `line ${number}: feature index ${JSON.stringify(index)} is not a whole number` };
      if (!NUMBER.test(value)) return { error: `line ${number}: value ${JSON.stringify(value)} of feature ${index} is not a finite number` };
      row[index] = Number(value);
    }
    instances.push(row);
    labels.push(label);
  }
  return { instances, labels: labels.some((l) => l !== null) ? labels : null, lines: lines.map((l) => l.number) };
}

function denseRows(lines) {
  const split = (text) => text.split(/\s*[,;\t]\s*|\s+/);
  let header = split(lines[0].text);
  let body = lines;
  let labelColumn = -1;
  if (header.some((cell) => !NUMBER.test(cell))) {
    labelColumn = header.indexOf("label");
    body = lines.slice(1);
  } else header = null;
  const instances = [], labels = [];
  for (const { text, number } of body) {
    const cells = split(text);
    if (header && cells.length !== header.length) return { error: `line ${number}: ${cells.length} values; the header names ${header.length} columns` };
    const bad = cells.findIndex((cell) => cell !== "" && !NUMBER.test(cell));
    if (bad >= 0) return { error: `line ${number}, column ${bad + 1}: ${JSON.stringify(cells[bad])} is not a finite number` };
    const values = cells.map((cell) => (cell === "" ? 0 : Number(cell)));
    labels.push(labelColumn >= 0 ? values[labelColumn] : null);
    instances.push(labelColumn >= 0 ? values.filter((_, i) => i !== labelColumn) : values);
  }
  if (!instances.length) return { error: "no rows under the header" };
  return { instances, labels: labelColumn >= 0 ? labels : null, lines: body.map((l) => l.number) };
}

/** A file's text; gzip (by its first two bytes) is inflated here. */
async function fileText(file) {
  const head = new Uint8Array(await file.slice(0, 2).arrayBuffer());
  if (head[0] === 0x1f && head[1] === 0x8b) {
    return new Response(file.stream().pipeThrough(new DecompressionStream("gzip"))).text();
  }
  return file.text();
}

// -- predict -------------------------------------------------------------------------------------------------

async function predict() {
  const note = $("predict-note");
  const model = tools.model;
  note.className = "muted";
  $("predict-download").hidden = true;
  $("predict-result").hidden = true;
  const file = $("predict-file").files[0];
  const source = file ? file.name : "the pasted rows";
  let rows;
  try {
    rows = readRows(file ? await fileText(file) : $("predict-rows").value);
  } catch (error) {
    rows = { error: `could not read ${file ? file.name : "the rows"}: ${error.message}` };
  }
  if (rows.error) {
    note.className = "error";
    note.textContent = `${source}: ${rows.error}`;
    return;
  }
  const probabilities = !$("predict-proba").hidden && $("predict-proba").checked;
  const answer = { labels: [], scores: [], probabilities: probabilities ? [] : null };
  $("predict-run").disabled = true;
  try {
    for (let start = 0; start < rows.instances.length; start += CHUNK_ROWS) {
      note.textContent = `predicting ${source}: ${start} of ${rows.instances.length} rows…`;
      const response = await api(`/v1/models/${encodeURIComponent(model.id)}/predict`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ instances: rows.instances.slice(start, start + CHUNK_ROWS), probabilities }),
      });
      if (!response.ok) {
        // the API names a row by its place in the request (the page names its line) and the upload option by its
        // query parameter (the page's upload form calls it "indices")
        const message = (await errorMessage(response)).replace(/instances\[(\d+)\]/g, (_, k) => `line ${rows.lines[start + Number(k)]}`)
          .replace(/zero_based=true/g, 'indices "zero-based"');
        note.className = "error";
        note.textContent = `${source}: ${message}`;
        return;
      }
      const part = await response.json();
      answer.labels.push(...part.labels);
      answer.scores.push(...part.scores);
      if (probabilities) answer.probabilities.push(...part.probabilities);
    }
  } catch (error) {
    note.className = "error";
    note.textContent = error.message === "unauthorized" ? "" : `could not reach the API: ${error.message}`;
    return;
  } finally {
    $("predict-run").disabled = false;
  }
  tools.result = { ...answer, truth: rows.labels, source, modelId: model.id };
  showPredictions();
}

function accuracyText(result) {
  if (!result.truth || result.labels[0] === null || result.labels[0] === undefined) return "";
  const known = result.truth.map((t, i) => [t, result.labels[i]]).filter(([t]) => t !== null);
  if (tools.model.task === "regression") { // values, not classes: the mean squared error of the labelled rows
    if (!known.length) return "";
    const mse = known.reduce((sum, [t, p]) => sum + (p - t) * (p - t), 0) / known.length;
    return ` · mean squared error ${num(mse, 4)} (${known.length} rows)`;
  }
  const right = known.filter(([t, p]) => t === p).length;
  return ` · accuracy ${(100 * right / known.length).toFixed(1)}% (${right}/${known.length})`;
}

function showPredictions() {
  const result = tools.result;
  const model = tools.model;
  const n = result.scores.length;
  $("predict-note").textContent = `predicted ${n} row${n === 1 ? "" : "s"} of ${result.source}${accuracyText(result)}` +
    (n > SHOWN_ROWS ? ` · the first ${SHOWN_ROWS} below; download them all` : "");
  const columns = predictionColumns(result, model);
  const head = columns.map((c) => `<th>${esc(c.name)}</th>`).join("");
  const body = result.scores.slice(0, SHOWN_ROWS).map((_, i) => `<tr>${columns.map((c) => `<td>${num(c.value(i), 6)}</td>`).join("")}</tr>`).join("");
  $("predict-result").innerHTML = `<thead><tr>${head}</tr></thead><tbody>${body}</tbody>`;
  $("predict-result").hidden = false;
  $("predict-download").hidden = false;
}

/** The columns of the predictions (table and CSV): row, label, true label, the scores, the probabilities. */
function predictionColumns(result, model) {
  const columns = [{ name: "row", value: (i) => i + 1 }];
  const regression = model.task === "regression"; // one column of predicted values (the scores are the same)
  if (regression) {
    columns.push({ name: "predicted", value: (i) => result.labels[i] });
    if (result.truth) columns.push({ name: "true value", value: (i) => result.truth[i] });
    return columns;
  }
  if (result.labels[0] !== null && result.labels[0] !== undefined) columns.push({ name: "label", value: (i) => result.labels[i] });
  if (result.truth) columns.push({ name: "true label", value: (i) => result.truth[i] });
  const labels = model.labels || [];
  const width = Array.isArray(result.scores[0]) ? result.scores[0].length : 1;
  for (let k = 0; k < width; k++) {
    const name = width === 1 ? (labels.length === 2 ? `score (> 0: ${labels[1]})` : "score") : `score ${labels[k] ?? k}`;
    columns.push({ name, value: width === 1 ? (i) => result.scores[i] : (i) => result.scores[i][k] });
  }
  if (result.probabilities) {
    result.probabilities[0].forEach((_, k) => columns.push({ name: `P(${labels[k] ?? k})`, value: (i) => result.probabilities[i][k] }));
  }
  return columns;
}

function download() {
  const result = tools.result;
  const columns = predictionColumns(result, tools.model);
  const quote = (text) => (/[",\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text);
  const lines = [columns.map((c) => quote(c.name)).join(",")];
  for (let i = 0; i < result.scores.length; i++) {
    lines.push(columns.map((c) => { const v = c.value(i); return v === null || v === undefined ? "" : String(v); }).join(","));
  }
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob([lines.join("\n") + "\n"], { type: "text/csv" }));
  link.download = `predictions-${result.modelId}.csv`;
  link.click();
}

// -- evaluate ------------------------------------------------------------------------------------------------

async function evaluate() {
  const datasetId = $("evaluate-dataset").value;
  const note = $("evaluate-note");
  if (!datasetId) return;
  note.className = "muted";
  note.textContent = "evaluating…";
  $("evaluate-result").innerHTML = "";
  const modelId = tools.model.id;
  try {
    const response = await api(`/v1/models/${encodeURIComponent(modelId)}/evaluate`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ dataset_id: datasetId }),
    });
    if (tools.model.id !== modelId) return;
    if (!response.ok) {
      note.className = "error";
      note.textContent = await errorMessage(response);
      return;
    }
    const report = await response.json();
    note.textContent = `${report.n_samples} rows of ${datasetId}`;
    $("evaluate-result").innerHTML = evaluationHtml(report);
  } catch (error) {
    note.className = "error";
    note.textContent = error.message === "unauthorized" ? "" : `could not reach the API: ${error.message}`;
  }
}

const METRICS = [["accuracy", "accuracy"], ["error_rate", "error rate"], ["precision", "precision"], ["recall", "recall"], ["f1", "F1"],
  ["roc_auc", "ROC AUC"], ["prbep", "PRBEP"], ["pairwise_accuracy", "pairwise accuracy"], ["kendall_tau", "Kendall's tau"],
  ["mse", "mean squared error"], ["mae", "mean absolute error"], ["r2", "R²"], ["outlier_fraction", "outlier fraction"]];

function evaluationHtml(report) {
  const shown = METRICS.filter(([key]) => report[key] !== null && report[key] !== undefined);
  let html = `<dl id="evaluate-metrics" class="kv">${shown.map(([key, name]) => `<dt>${esc(name)}</dt><dd data-metric="${key}">${num(report[key], 4)}</dd>`).join("")}</dl>`;
  html += `<div class="evaluate-pictures">`;
  if (report.confusion_matrix) html += confusionHtml(report.confusion_matrix);
  if (report.roc_curve) html += rocSvg(report.roc_curve, report.roc_auc);
  if (report.predicted_vs_true) html += scatterSvg(report.predicted_vs_true, report.r2);
  if (report.score_histogram) html += histogramSvg(report.score_histogram);
  html += `</div>`;
  if (report.per_class && report.per_class.length > 2) {
    html += `<table class="per-class"><thead><tr><th>label</th><th>precision</th><th>recall</th><th>F1</th><th>rows</th></tr></thead><tbody>` +
      report.per_class.map((c) => `<tr><td>${num(c.label)}</td><td>${num(c.precision, 4)}</td><td>${num(c.recall, 4)}</td><td>${num(c.f1, 4)}</td><td>${c.support}</td></tr>`).join("") +
      `</tbody></table>`;
  }
  return html;
}

function confusionHtml(confusion) {
  const labels = confusion.labels;
  const head = `<tr><th>true \\ predicted</th>${labels.map((l) => `<th>${num(l)}</th>`).join("")}</tr>`;
  const rows = confusion.matrix.map((row, i) => `<tr><th>${num(labels[i])}</th>${row.map((count, j) =>
    `<td class="${i === j ? "diagonal" : count ? "off" : ""}">${count}</td>`).join("")}</tr>`).join("");
  return `<table id="confusion" class="confusion"><caption>confusion matrix (rows: true label, columns: predicted)</caption><thead>${head}</thead><tbody>${rows}</tbody></table>`;
}

function rocSvg(curve, auc) {
  const S = 220, M = 34;
  const x = (v) => (M + v * (S - M - 8)).toFixed(1);
  const y = (v) => (S - M - v * (S - M - 8)).toFixed(1);
  const points = curve.fpr.map((f, i) => `${x(f)},${y(curve.tpr[i])}`).join(" ");
  const ticks = [0, 0.5, 1].map((t) => `<text x="${x(t)}" y="${S - M + 14}" text-anchor="middle">${t}</text>` +
    `<text x="${M - 5}" y="${+y(t) + 4}" text-anchor="end">${t}</text>`).join("");
  return `<svg id="roc" viewBox="0 0 ${S} ${S}" width="${S}" height="${S}" role="img" aria-label="ROC curve">` +
    `<rect x="${x(0)}" y="${y(1)}" width="${x(1) - x(0)}" height="${y(0) - y(1)}" class="frame"/>` +
    `<line class="chance" x1="${x(0)}" y1="${y(0)}" x2="${x(1)}" y2="${y(1)}"/>` +
    `<polyline id="roc-curve" points="${points}"/>${ticks}` +
    `<text x="${(M + S) / 2}" y="${S - 4}" text-anchor="middle">false positive rate</text>` +
    `<text x="10" y="${(S - M) / 2}" transform="rotate(-90 10 ${(S - M) / 2})" text-anchor="middle">true positive rate</text>` +
    `<text x="${x(0.95)}" y="${y(0.08)}" text-anchor="end">ROC AUC ${num(auc, 4)}</text></svg>`;
}

// A regression's predictions against the targets, on the same scale on both axes, with the line y = x.
function scatterSvg(points, r2) {
  const S = 260, M = 40;
  const all = points.y_true.concat(points.y_pred);
  let low = Math.min(...all), high = Math.max(...all);
  if (!(high > low)) { low -= 1; high += 1; }
  const span = high - low;
  const x = (v) => (M + ((v - low) / span) * (S - M - 8)).toFixed(1);
  const y = (v) => (S - M - ((v - low) / span) * (S - M - 8)).toFixed(1);
  const dots = points.y_true.map((t, i) => `<circle cx="${x(t)}" cy="${y(points.y_pred[i])}" r="1.8"/>`).join("");
  const ticks = [low, low + span / 2, high].map((t) => `<text x="${x(t)}" y="${S - M + 14}" text-anchor="middle">${num(t, 3)}</text>` +
    `<text x="${M - 5}" y="${+y(t) + 4}" text-anchor="end">${num(t, 3)}</text>`).join("");
  const shown = points.y_true.length < points.n_rows ? ` (${points.y_true.length} of ${points.n_rows} rows)` : "";
  return `<svg id="predicted-vs-true" viewBox="0 0 ${S} ${S}" width="${S}" height="${S}" role="img" aria-label="predicted against true values${shown}">` +
    `<rect x="${x(low)}" y="${y(high)}" width="${x(high) - x(low)}" height="${y(low) - y(high)}" class="frame"/>` +
    `<line class="chance" x1="${x(low)}" y1="${y(low)}" x2="${x(high)}" y2="${y(high)}"/>` +
    `<g id="scatter-points">${dots}</g>${ticks}` +
    `<text x="${(M + S) / 2}" y="${S - 4}" text-anchor="middle">true value${esc(shown)}</text>` +
    `<text x="10" y="${(S - M) / 2}" transform="rotate(-90 10 ${(S - M) / 2})" text-anchor="middle">predicted value</text>` +
    `<text x="${x(low + 0.05 * span)}" y="${y(high - 0.08 * span)}" text-anchor="start">R² ${num(r2, 4)}</text></svg>`;
}

// A one-class model's scores: rows per bin (stacked by their labels when the data set has -1 / 1), the boundary
// at 0 (left of it: outliers).
function histogramSvg(histogram) {
  const W = 320, H = 200, M = 36;
  const edges = histogram.edges, n = histogram.counts.length;
  const top = Math.max(1, ...histogram.counts);
  const x = (v) => M + ((v - edges[0]) / (edges[n] - edges[0])) * (W - M - 8);
  const y = (c) => H - M - (c / top) * (H - M - 8);
  const split = histogram.counts_outliers != null;
  let bars = "";
  for (let k = 0; k < n; k++) {
    const x0 = x(edges[k]).toFixed(1), width = Math.max(0.5, x(edges[k + 1]) - x(edges[k]) - 0.5).toFixed(1);
    const parts = split ? [["outliers", histogram.counts_outliers[k], 0], ["inliers", histogram.counts_inliers[k], histogram.counts_outliers[k]]]
      : [["rows", histogram.counts[k], 0]];
    for (const [cls, count, below] of parts) {
      if (count > 0) bars += `<rect class="${cls}" x="${x0}" y="${y(below + count).toFixed(1)}" width="${width}" height="${(y(below) - y(below + count)).toFixed(1)}"/>`;
    }
  }
  const ticks = [edges[0], 0, edges[n]].map((t) => `<text x="${x(t).toFixed(1)}" y="${H - M + 14}" text-anchor="middle">${num(t, 3)}</text>`).join("");
  const legend = split ? `<text x="${W - 8}" y="14" text-anchor="end">labelled: <tspan class="outliers-key">■ -1</tspan> <tspan class="inliers-key">■ 1</tspan></text>` : "";
  return `<svg id="score-histogram" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="histogram of the one-class scores">` +
    `<g id="histogram-bars">${bars}</g><line class="boundary" x1="${x(0).toFixed(1)}" y1="8" x2="${x(0).toFixed(1)}" y2="${H - M}"/>` +
    `${ticks}<text x="${(M + W) / 2}" y="${H - 4}" text-anchor="middle">score (below 0: outlier)</text>` +
    `<text x="10" y="${(H - M) / 2}" transform="rotate(-90 10 ${(H - M) / 2})" text-anchor="middle">rows (max ${top})</text>${legend}</svg>`;
}

$("predict-run").addEventListener("click", predict);
$("predict-download").addEventListener("click", download);
$("predict-file").addEventListener("change", () => { if ($("predict-file").files[0]) $("predict-rows").value = ""; });
$("predict-rows").addEventListener("input", () => { $("predict-file").value = ""; });
$("evaluate-run").addEventListener("click", evaluate);
