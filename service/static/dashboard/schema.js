// What the API takes, read from its OpenAPI document (GET /openapi.json): each solver's parameters, the kernels,
// the search, the export formats. The train form is built from it and checks values by the same constraints,
// so that the page never invents a parameter name or a bound.

let loaded = null;

/** The document's pieces the dashboard uses (fetched once). */
export function apiSchema() {
  if (!loaded) {
    loaded = fetch("/openapi.json").then((response) => response.json()).then(read);
    loaded.catch(() => { loaded = null; }); // asked again next time
  }
  return loaded;
}

function read(doc) {
  const named = (ref) => doc.components.schemas[ref.split("/").pop()];
  const resolve = (node) => (node && node.$ref ? { ...named(node.$ref), ...node, $ref: undefined } : node);
  const body = doc.paths["/v1/jobs"].post.requestBody.content["application/json"].schema;
  const solvers = {};
  for (const [name, ref] of Object.entries(body.discriminator.mapping)) {
    const request = named(ref);
    solvers[name] = { name, description: request.description || "", params: resolve(request.properties.params) };
  }
  const kernels = {};
  const withKernel = Object.values(solvers).find((s) => s.params.properties.kernel);
  if (withKernel) {
    for (const [type, ref] of Object.entries(withKernel.params.properties.kernel.discriminator.mapping)) kernels[type] = named(ref);
  }
  const exportPath = doc.paths["/v1/models/{model_id}/export"];
  const formatParam = exportPath ? exportPath.get.parameters.find((p) => p.name === "format") : null;
  return {
    solvers,
    kernels,
    search: resolve(variants(Object.values(solvers)[0].params.properties.search, resolve).find((v) => v.properties)),
    exportFormats: formatParam ? resolve(formatParam.schema).enum : [],
    resolve,
  };
}

/** The alternatives of a property (anyOf), references resolved. */
export function variants(prop, resolve = (node) => node) {
  return (prop.anyOf || prop.oneOf || [prop]).map(resolve);
}

/** The default of a property as the form shows it ("" for none or null). */
export function defaultText(prop) {
  if (prop.default === undefined || prop.default === null) return "";
  return String(prop.default);
}

function bounds(v) {
  if (v.exclusiveMinimum !== undefined) return [`greater than ${v.exclusiveMinimum}`, (x) => x > v.exclusiveMinimum];
  if (v.minimum !== undefined) return [`at least ${v.minimum}`, (x) => x >= v.minimum];
  return null;
}

/** Read ``text`` as the property says: {value} or {error} (a sentence without the field's name).
 *  Blank is null when the property may be null, else an error; "null" or "none" also give null there. */
export function parseValue(prop, text) {
  const options = variants(prop);
  const trimmed = String(text).trim();
  const nullable = options.some((v) => v.type === "null");
  if (trimmed === "" || /^(null|none)$/i.test(trimmed)) {
    return nullable ? { value: null } : { error: "give a value" };
  }
  const words = options.flatMap((v) => (v.const !== undefined ? [v.const] : v.enum || [])).filter((w) => typeof w === "string");
  if (words.includes(trimmed)) return { value: trimmed };
  const numeric = options.find((v) => v.type === "number" || v.type === "integer");
  if (!numeric) return { error: `must be one of ${words.join(", ")}` };
  const value = Number(trimmed);
  const alternatives = words.length ? ` (or ${words.join(", ")})` : "";
  if (!Number.isFinite(value)) return { error: `must be a number${alternatives}` };
  if (numeric.type === "integer" && !Number.isInteger(value)) return { error: "must be a whole number" };
  const low = bounds(numeric);
  if (low && !low[1](value)) return { error: `must be ${low[0]}${alternatives}` };
  if (numeric.exclusiveMaximum !== undefined && !(value < numeric.exclusiveMaximum)) return { error: `must be less than ${numeric.exclusiveMaximum}` };
  if (numeric.maximum !== undefined && !(value <= numeric.maximum)) return { error: `must be at most ${numeric.maximum}` };
  return { value };
}

/** Read a list of values ("0.1, 1, 10") for an array property: {value} or {error}. */
export function parseList(prop, text) {
  const array = variants(prop).find((v) => v.type === "array");
  const words = String(text).split(/[\s,;]+/).filter(Boolean);
  if (array.minItems && words.length < array.minItems) return { error: `give at least ${array.minItems} value(s)` };
  if (array.maxItems && words.length > array.maxItems) return { error: `at most ${array.maxItems} values` };
  const values = [];
  for (const word of words) {
    const one = parseValue(array.items, word);
    if (one.error) return { error: `${word} ${one.error}` };
    values.push(one.value);
  }
  return { value: values };
}
