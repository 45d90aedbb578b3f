// The train form of a data set: solver, C, kernel and its gamma (kernel solvers), a C (and gamma) search,
// probabilities, a deadline, and every other parameter of the solver under "more parameters". Each field is
// built from the solver's params schema in the OpenAPI document and checked by its constraints before the
// request; a value left at its default is not sent (the API fills defaults in). When the API refuses the job
// (422, its one error shape) the form shows the API's message.

import { $, api, errorMessage, esc, labelsText } from "./util.js";
import { apiSchema, defaultText, parseList, parseValue, variants } from "./schema.js";

const MAIN = ["C", "max_seconds", "probability"]; // on the first line; kernel and search have controls of their own
const OWN = ["kernel", "search"];
const MAPS = ["class_weight"]; // {label: factor}: not a form field (send it through the API or hingectl)
const LABELS = { max_seconds: "deadline, s", probability: "probabilities", cv_folds: "folds" };

const form = { dataset: null, schema: null, compiling: [], partly: {}, compilingEta: null, onSubmitted: () => {} };

/** "N labels", or a regression's range of values (``labelsText``: loss epsilon_insensitive or svm_type epsilon_svr). */
function labelsSummary(dataset) {
  const count = Object.keys(dataset.labels || {}).length;
  const text = labelsText(dataset);
  return text.startsWith("values") ? `real-valued labels: ${text}` : `${count} labels`;
}

/** Show the form for a data set; ``onSubmitted(job)`` is called with the job the API accepted. */
export async function openTrainForm(dataset, onSubmitted) {
  form.dataset = dataset;
  form.onSubmitted = onSubmitted;
  $("train-panel").hidden = false;
  $("train-dataset").textContent = dataset.name || dataset.id;
  $("train-dataset-info").textContent = `${dataset.id} · ${dataset.n_samples} rows · ${dataset.n_features} features · ` +
    `${labelsSummary(dataset)}${dataset.has_qid ? " · qid" : ""}` +
    (typeof dataset.zero_based_guessed === "boolean"
      ? ` · indices ${dataset.zero_based ? "zero" : "one"}-based${dataset.zero_based_guessed ? " (guessed)" : ""}` : "");
  $("train-error").textContent = "";
  $("train-status").textContent = "";
  if (!form.schema) {
    form.schema = await apiSchema();
    $("train-solver").innerHTML = Object.keys(form.schema.solvers).map((name) => `<option value="${esc(name)}">${esc(name)}</option>`).join("");
    render({});
    markCompiling();
  }
}

/** What /readyz says about the solvers' compiled code: the form names the solvers still compiling, and for one whose
 * default formulation is ready (dcd's C-SVC) what still compiles of it. */
export function setReadiness(health) {
  form.compiling = (health && health.solvers_compiling) || [];
  form.partly = (health && health.formulations_compiling) || {};
  form.compilingEta = health ? health.compile_eta_s : null;
  if (form.schema) markCompiling();
}

function markCompiling() {
  for (const option of $("train-solver").options) {
    const state = !form.compiling.includes(option.value) ? "" : option.value in form.partly ? " (partly compiling)" : " (compiling)";
    option.textContent = `${option.value}${state}`;
  }
  const solver = form.schema.solvers[$("train-solver").value];
  const compiling = form.compiling.includes(solver.name);
  const left = form.compilingEta ? ` (about ${Math.max(1, Math.round(form.compilingEta))} s left for all solvers)` : "";
  const partly = form.partly[solver.name];
  const note = partly
    ? `${esc(solver.name)}'s ${esc(partly)} are still compiling on this machine${esc(left)}: a job of them waits in the ` +
      "queue (waiting for compilation) and starts when they are ready; its other jobs start at once."
    : `${esc(solver.name)}'s code is still compiling on this machine${esc(left)}: ` +
      "a job waits in the queue (waiting for compilation) and starts when it is ready.";
  $("train-note").innerHTML = `${esc(solver.description)}` + (compiling ? `<br><span id="train-compiling" class="warn">${note}</span>` : "");
}

// -- fields built from the schema ---------------------------------------------------------------------------

function control(prefix, name, prop, text) {
  const id = `${prefix}-${name}`;
  const title = esc(prop.description || "");
  const label = LABELS[name] ? `${LABELS[name]} <code>${esc(name)}</code>` : `<code>${esc(name)}</code>`;
  const options = variants(prop);
  const data = `id="${id}" data-name="${esc(name)}" data-default="${esc(defaultText(prop))}"`;
  if (options.some((v) => v.type === "boolean")) {
    return `<label class="field" title="${title}"><input type="checkbox" ${data} ${text === "true" ? "checked" : ""}> ${label}</label>`;
  }
  const words = options.flatMap((v) => (v.const !== undefined ? [v.const] : v.enum || []));
  const numeric = options.some((v) => v.type === "number" || v.type === "integer");
  if (words.length && !numeric) {
    const choices = (options.some((v) => v.type === "null") ? [""] : []).concat(words);
    return `<label class="field" title="${title}">${label} <select ${data}>${choices.map((w) =>
      `<option value="${esc(w)}" ${w === text ? "selected" : ""}>${w === "" ? "default" : esc(w)}</option>`).join("")}</select></label>`;
  }
  const placeholder = options.some((v) => v.type === "null") ? "none" : "";
  return `<label class="field" title="${title}">${label} <input ${data} value="${esc(text)}" placeholder="${placeholder}" size="8" inputmode="decimal"></label>`;
}

function textOf(element) {
  return element.type === "checkbox" ? String(element.checked) : element.value;
}

/** The values a person changed, by element id, to carry over when the solver or kernel changes (a default of one
 *  solver is not carried to another, whose default may differ). */
function typed() {
  const values = {};
  $("train-form").querySelectorAll("[data-name]").forEach((element) => {
    if (textOf(element) !== element.dataset.default) values[element.id] = textOf(element);
  });
  if ($("train-kernel-type").value) values["train-kernel-type"] = $("train-kernel-type").value;
  return values;
}

function render(kept) {
  const solver = form.schema.solvers[$("train-solver").value];
  const props = solver.params.properties;
  const keep = (prefix, name, prop) => control(prefix, name, prop, kept[`${prefix}-${name}`] ?? defaultText(prop));
  $("train-main").innerHTML = MAIN.filter((name) => props[name]).map((name) => keep("train-param", name, props[name])).join("");
  const kernel = props.kernel;
  $("train-kernel-line").hidden = !kernel;
  if (kernel) {
    const types = Object.keys(form.schema.kernels);
    const fallback = types.find((type) => (kernel.description || "").includes(`default ${type}`)) || types[0];
    const chosen = kept["train-kernel-type"] ?? (kernel.default ? kernel.default.type : fallback);
    $("train-kernel-type").innerHTML = types.map((type) => `<option value="${esc(type)}" ${type === chosen ? "selected" : ""}>${esc(type)}</option>`).join("");
    $("train-kernel-type").title = kernel.description || "";
    renderKernel(kept);
  }
  const search = form.schema.search.properties;
  $("train-search-gamma-field").hidden = !kernel;
  $("train-search-more").innerHTML = ["cv_folds", "metric"].filter((name) => search[name]).map((name) => keep("train-search", name, search[name])).join("");
  $("train-search-C").title = search.C.description || "";
  $("train-search-gamma").title = search.gamma.description || "";
  const rest = Object.keys(props).filter((name) => !MAIN.includes(name) && !OWN.includes(name) && !MAPS.includes(name));
  $("train-more-solver").textContent = solver.name;
  $("train-more-fields").innerHTML = rest.map((name) => keep("train-param", name, props[name])).join("");
  markCompiling();
}

function renderKernel(kept) {
  const kernel = form.schema.kernels[$("train-kernel-type").value];
  $("train-kernel-fields").innerHTML = Object.entries(kernel.properties).filter(([name]) => name !== "type")
    .map(([name, prop]) => control("train-kernel", name, prop, kept[`train-kernel-${name}`] ?? defaultText(prop))).join("");
}

// -- reading, checking and sending ----------------------------------------------------------------------------

/** The request's params from the form, and the problems found (each names its field). */
function collect() {
  const solver = form.schema.solvers[$("train-solver").value];
  const params = {};
  const problems = [];
  const check = (element, prop, into, key, where) => {
    element.classList.remove("invalid");
    if (element.type === "checkbox") {
      if (String(element.checked) !== element.dataset.default) into[key] = element.checked;
      return;
    }
    if (element.value.trim() === element.dataset.default) return; // the default: the API fills it in
    const read = parseValue(prop, element.value);
    if (read.error) {
      element.classList.add("invalid");
      problems.push(`${where}${key}: ${read.error}`);
    } else into[key] = read.value;
  };
  document.querySelectorAll("#train-main [data-name], #train-more-fields [data-name]").forEach((element) => {
    check(element, solver.params.properties[element.dataset.name], params, element.dataset.name, "");
  });
  if (solver.params.properties.kernel) {
    const type = $("train-kernel-type").value;
    const kernel = form.schema.kernels[type];
    params.kernel = { type };
    $("train-kernel-fields").querySelectorAll("[data-name]").forEach((element) => {
      check(element, kernel.properties[element.dataset.name], params.kernel, element.dataset.name, "kernel.");
    });
  }
  if ($("train-search").checked) {
    const schema = form.schema.search.properties;
    const search = {};
    const lists = solver.params.properties.kernel ? ["C", "gamma"] : ["C"];
    for (const name of lists) {
      const element = $(`train-search-${name}`);
      element.classList.remove("invalid");
      if (!element.value.trim()) continue;
      const read = parseList(schema[name], element.value);
      if (read.error) {
        element.classList.add("invalid");
        problems.push(`search.${name}: ${read.error}`);
      } else search[name] = read.value;
    }
    if (!lists.some((name) => $(`train-search-${name}`).value.trim())) {
      problems.push(`search: give the values of ${lists.join(" or ")} to cross-validate`);
    }
    $("train-search-more").querySelectorAll("[data-name]").forEach((element) => {
      check(element, schema[element.dataset.name], search, element.dataset.name, "search.");
    });
    params.search = search;
  }
  return { solver: solver.name, params, problems };
}

async function submit(event) {
  event.preventDefault();
  const { solver, params, problems } = collect();
  $("train-error").textContent = problems.join("\n");
  $("train-error").className = "error";
  $("train-status").textContent = "";
  if (problems.length) return;
  const button = $("train-submit");
  button.disabled = true;
  try {
    const response = await api("/v1/jobs", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ dataset_id: form.dataset.id, solver, params }),
    });
    if (!response.ok) {
      $("train-error").textContent = await errorMessage(response);
      $("train-error").className = "error api-error";
      return;
    }
    const job = await response.json();
    $("train-status").textContent = `submitted ${job.id}`;
    form.onSubmitted(job);
  } catch (error) {
    if (error.message !== "unauthorized") $("train-error").textContent = `could not reach the API: ${error.message}`;
  } finally {
    button.disabled = false;
  }
}

$("train-solver").addEventListener("change", () => render(typed()));
$("train-kernel-type").addEventListener("change", () => renderKernel(typed()));
$("train-search").addEventListener("change", () => { $("train-search-fields").hidden = !$("train-search").checked; });
$("train-form").addEventListener("submit", submit);
$("train-close").addEventListener("click", () => { $("train-panel").hidden = true; });
