// Shared by the dashboard's modules: the API key, requests in the service's one error shape, and text helpers.
// Every API request carries the API key entered above (kept in this browser's localStorage).

export const $ = (id) => document.getElementById(id);

export const session = { key: localStorage.getItem("hinge-api-key") || "" };

export function setKey(key) {
  session.key = key;
  localStorage.setItem("hinge-api-key", key);
}

export function esc(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

export function num(value, digits = 4) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  if (typeof value !== "number") return esc(value);
  return Math.abs(value) >= 1e5 || (Math.abs(value) < 1e-3 && value !== 0) ? value.toExponential(2) : String(+value.toPrecision(digits));
}

export function eta(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const s = Math.round(seconds);
  return s >= 60 ? `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}` : `${s} s`;
}

export function when(iso) { return iso ? iso.replace("T", " ").slice(0, 19) : ""; }

export function notice(text) {
  const box = $("notice");
  box.hidden = !text;
  box.textContent = text || "";
}

function headers(extra = {}) { return session.key ? { ...extra, Authorization: `Bearer ${session.key}` } : extra; }

export async function api(path, options = {}) {
  const response = await fetch(path, { ...options, headers: headers(options.headers || {}) });
  if (response.status === 401) {
    notice("This service needs an API key: enter one above (hinge keys create --tenant NAME prints one).");
    throw new Error("unauthorized");
  }
  return response;
}

/** The message of an answer in the service's error shape {"error": {"code", "message", "details"}}. */
export async function errorMessage(response) {
  const body = await response.json().catch(() => null);
  return body && body.error ? body.error.message : `HTTP ${response.status} ${response.statusText}`;
}

export async function apiJson(path, options) {
  const response = await api(path, options);
  if (!response.ok) throw new Error(await errorMessage(response));
  return response.json();
}

/** A JSON document as a small "key: value" list: nested objects flattened with dots, lists joined, nulls left out.
 *  ``defaults`` (same shape) marks the values a person set: they come first, the defaults follow, muted. */
export function keyValues(object, defaults = {}) {
  const rows = [];
  const walk = (value, fallback, path) => {
    if (value === null || value === undefined) return;
    if (typeof value === "object" && !Array.isArray(value)) {
      for (const [key, inner] of Object.entries(value)) walk(inner, fallback && typeof fallback === "object" ? fallback[key] : undefined, path ? `${path}.${key}` : key);
      return;
    }
    const text = Array.isArray(value) ? value.map((v) => num(v)).join(", ") : typeof value === "number" ? num(value, 6) : esc(value);
    rows.push({ path, text, set: fallback === undefined || JSON.stringify(fallback) !== JSON.stringify(value) });
  };
  walk(object, defaults, "");
  rows.sort((a, b) => Number(b.set) - Number(a.set));
  return `<dl class="kv">${rows.map((r) => `<dt class="${r.set ? "" : "default"}">${esc(r.path)}</dt><dd class="${r.set ? "" : "default"}">${r.text}</dd>`).join("")}</dl>`;
}

/** Ask before something that cannot be undone: the page's dialog with ``text``; resolves true for "delete". */
export function confirmDialog(text) {
  const dialog = $("confirm");
  $("confirm-text").textContent = text;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "yes"), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
  });
}

/** A short line saying what was done, or (``failed``) what could not be (kept until the next one). */
export function done(text, failed = false) {
  const box = $("done-note");
  box.hidden = !text;
  box.textContent = text || "";
  box.className = failed ? "done error" : "done";
}

/** A job's or a model's warnings ({code, message}; absent: none) as a visible list, or "" for none. */
export function warningsHtml(warnings) {
  if (!warnings || !warnings.length) return "";
  const items = warnings.map((w) => `<li><code>${esc(w.code)}</code> ${esc(w.message)}</li>`).join("");
  return `<strong>⚠ ${warnings.length === 1 ? "warning" : `${warnings.length} warnings`}</strong><ul>${items}</ul>`;
}

/** Show ``warnings`` in the box ``id`` (hidden when there are none). */
export function showWarnings(id, warnings) {
  const html = warningsHtml(warnings);
  $(id).innerHTML = html;
  $(id).hidden = !html;
}

/** A data set's labels in a few words: rows per label (the first four), or a regression's range of values (labels
 *  not all integers with more than 20 distinct values, as the API tells classes from targets). */
export function labelsText(dataset) {
  const targets = dataset.targets;
  const counts = Object.entries(dataset.labels || {});
  if (targets && (!counts.length || (!targets.integral && counts.length > 20))) {
    const distinct = targets.n_distinct === null ? "over 1000 distinct" : `${targets.n_distinct} distinct`;
    return `values ${num(targets.min, 4)} to ${num(targets.max, 4)} (mean ${num(targets.mean, 4)}, ${distinct})`;
  }
  return counts.slice(0, 4).map(([k, v]) => `${k}: ${v}`).join(", ") + (counts.length > 4 ? ", …" : "");
}

/** How an svmlight data set's indices were read, in words (the upload's answer); "" for CSV or older records. */
export function indexBaseText(dataset) {
  const guessed = dataset.zero_based_guessed;
  if (guessed === null || guessed === undefined) return "";
  const base = dataset.zero_based ? "zero-based" : "one-based";
  if (!guessed) return `indices ${base}, as chosen`;
  if (dataset.zero_based) return "indices read as zero-based (guessed: index 0 appears in the file)";
  return "indices read as one-based (guessed: no index 0 appears in the file). If the file is zero-based (as " +
    `scikit-learn's dump_svmlight_file writes it), upload it again with indices "zero-based": it then has ${dataset.n_features + 1} features`;
}
