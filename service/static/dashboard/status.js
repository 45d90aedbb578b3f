// What a job is doing, in words, for its line in the jobs table and its panel: the phase and fraction while it
// runs (with its classes, class pairs or cross-validation fits), and for a job that ended, how it ended and why,
// without a percentage or an ETA.

import { eta, num } from "./util.js";

/** The binary problems of a job: {count, unit}, or null when it is one problem (two labels, a pairwise objective).
 *  One-vs-one makes K(K-1)/2 pairs of the data set's K labels; one-vs-rest one problem per label. */
export function problemsOf(job, dataset) {
  const params = job.params || {};
  if (params.objective && params.objective !== "classification") return null;
  if (["epsilon_insensitive", "squared_epsilon_insensitive"].includes(params.loss)) return null; // a regression
  if (["epsilon_svr", "one_class"].includes(params.svm_type)) return null; // smo's regression, one-class: one problem
  const progress = job.progress || {};
  const labels = dataset && dataset.labels ? Object.keys(dataset.labels).length : null;
  if (params.multiclass === "ovo") {
    const pairs = labels ? (labels * (labels - 1)) / 2 : params.search ? null : progress.subtasks_total;
    return pairs > 1 ? { count: pairs, unit: "class pairs (one-vs-one)" } : null;
  }
  const classes = labels ?? progress.subproblems;
  return classes > 2 ? { count: classes, unit: "classes (one-vs-rest)" } : null;
}

function searchFits(params) {
  const search = params.search;
  if (!search) return null;
  return (search.cv_folds || 0) * (search.C || [params.C]).length * (search.gamma || [null]).length;
}

/** How the job is doing: {fraction (null: no bar), text}. ``context``: {dataset, compiling, compileEta}. */
export function describeJob(job, context = {}) {
  const progress = job.progress || {};
  const params = job.params || {};
  const problems = problemsOf(job, context.dataset);
  if (job.status === "queued") {
    const compiling = (context.compiling || []).includes(job.solver);
    return { fraction: null, text: compiling ? `queued · ${job.solver}'s code is still compiling` : "queued" };
  }
  if (job.status === "running" && progress.phase === "waiting for compilation") {
    const left = context.compileEta ? ` (about ${eta(context.compileEta)} left)` : "";
    return { fraction: null, text: `waiting for compilation: compiling ${progress.compiling || job.solver}${left}` };
  }
  if (job.status === "running") {
    const fraction = progress.fraction ?? 0;
    const parts = [`${(100 * fraction).toFixed(1)}%`, progress.phase || "running"];
    const cross = params.search && progress.phase === "cross-validating";
    if (progress.subtasks_total && problems && !cross && progress.subtasks_total === problems.count) {
      parts.push(`${progress.subtasks_done} of ${problems.count} ${problems.unit} done`);
    } else if (progress.subtasks_total && params.search && (cross || progress.subtasks_total === searchFits(params))) {
      parts.push(`${progress.subtasks_done}/${progress.subtasks_total} cross-validation fits`);
    } else if (problems) {
      parts.push(`${problems.count} ${problems.unit}`);
    }
    parts.push(...gapText(progress));
    if (progress.eta_s !== undefined && progress.eta_s !== null) parts.push(`ETA ${eta(progress.eta_s)}`);
    return { fraction, text: parts.join(" · ") };
  }
  return { fraction: job.status === "succeeded" ? 1 : null, text: ended(job, problems) };
}

function ended(job, problems) {
  const params = job.params || {};
  if (job.status === "failed") return `failed: ${job.error ? job.error.message : "no reason given"}`;
  if (job.status === "canceled") {
    if (job.error && job.error.message) return `canceled: ${job.error.message}`;
    if (!job.started_at) return "canceled while queued: it never ran";
    return job.model_id
      ? "canceled while running: the model reached so far is kept"
      : "canceled while running: no model (not every class had one yet)";
  }
  const deadline = params.max_seconds ? `its deadline (max_seconds ${num(params.max_seconds)})` : "the server's deadline";
  const reasons = {
    converged: "converged",
    deadline: `stopped at ${deadline}: the best model so far`,
    max_iter: "stopped at max_iter: not converged",
    interrupted: "interrupted (its worker stopped): the best model so far",
  };
  const parts = [job.status, reasons[job.stop_reason] || job.stop_reason];
  const fits = searchFits(params);
  if (fits) parts.push(`${fits} cross-validation fits, then the refit`);
  if (problems) parts.push(`${problems.count} ${problems.unit}`);
  return parts.filter(Boolean).join(" · ");
}

// The relative gap (what tol_rel is compared with) when the service sends it, else the absolute one.
export function gapText(progress) {
  const relative = progress.gap_rel;
  if (relative !== undefined && relative !== null) {
    return [relative >= 1e-4 ? `gap ${(100 * relative).toPrecision(3)}%` : `gap ${relative.toExponential(1)}`];
  }
  return progress.gap !== undefined && progress.gap !== null ? [`gap ${num(progress.gap, 3)}`] : [];
}
