// A tool's `parameters` (a zod object schema or a JSON Schema object) made
// into the JSON Schema the host and the model see, by the rules the Rust and
// Python SDKs follow: an object schema, closed (`additionalProperties:
// false`), every argument required under `strict`, laid out as they lay it
// out (`layout`), and no `$schema` (the contract says JSON Schema 2020-12).

// Values written as data, whose object keys and array order are the author's.
const LITERAL_KEYS = new Set(["enum", "const", "default", "examples", "required"]);

/** True for a zod (v4) schema: it converts itself with zod's own converter. */
export function isZod(value) {
  return value !== null && typeof value === "object" && "_zod" in value && typeof value.toJSONSchema === "function";
}

/** Object keys sorted recursively, literal values and arrays left in their
 * order (the Rust SDK's `sort_keys`). */
export function sortKeys(value) {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== "object") return value;
  const out = {};
  for (const key of Object.keys(value).sort()) {
    out[key] = LITERAL_KEYS.has(key) ? value[key] : sortKeys(value[key]);
  }
  return out;
}

/** The argument schema of a tool as JSON text, or a string saying why it
 * cannot be one (the caller makes it a `DeclarationError`). */
export function parametersSchema(parameters, strict) {
  let schema;
  if (parameters === undefined) {
    schema = { type: "object", properties: {} };
  } else if (isZod(parameters)) {
    try {
      // `input`: what the model sends, so a field with a default is optional.
      schema = parameters.toJSONSchema({ io: "input", target: "draft-2020-12" });
    } catch (e) {
      return `zod cannot express this schema as JSON Schema: ${e?.message ?? e}`;
    }
  } else if (parameters !== null && typeof parameters === "object" && !Array.isArray(parameters)) {
    try {
      schema = JSON.parse(JSON.stringify(parameters));
    } catch (e) {
      return `the JSON Schema is not JSON: ${e?.message ?? e}`;
    }
  } else {
    return "parameters must be a zod object schema (z.object({...})) or a JSON Schema object";
  }
  if (schema === null || typeof schema !== "object" || schema.type !== "object") {
    return 'parameters must describe an object (z.object({...}), or a JSON Schema with "type": "object"): the arguments are named';
  }
  delete schema.$schema;
  if (schema.properties === undefined) schema.properties = {};
  if (typeof schema.properties !== "object" || schema.properties === null || Array.isArray(schema.properties)) {
    return '"properties" must be an object';
  }
  if (schema.additionalProperties !== undefined && schema.additionalProperties !== false) {
    return "the argument object must be closed (additionalProperties: false): an unknown argument is the model's mistake";
  }
  schema.additionalProperties = false;
  const names = Object.keys(schema.properties);
  if (strict) {
    schema.required = names;
  } else if (Array.isArray(schema.required) && schema.required.length === 0) {
    delete schema.required;
  }
  for (const name of schema.required ?? []) {
    if (!names.includes(name)) return `"required" names '${name}', which is not a property`;
  }
  dropSafeIntegerBounds(schema);
  return { text: JSON.stringify(layout(schema)), schema };
}

/** The top level as the Rust and Python SDKs write it: `$defs`, the
 * properties in declaration order (each one's keys sorted), `required`, any
 * other keyword sorted, then `type` and `additionalProperties`; one
 * signature gives one schema text in every SDK. */
function layout(schema) {
  const { $defs, properties, required, type, additionalProperties, ...rest } = schema;
  const out = {};
  if ($defs !== undefined) out.$defs = sortKeys($defs);
  out.properties = Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, sortKeys(v)]));
  if (required !== undefined) out.required = required;
  Object.assign(out, sortKeys(rest));
  out.type = type;
  out.additionalProperties = additionalProperties;
  return out;
}

/** zod's `.int()` bounds an integer to JavaScript's safe range; that is
 * zod's representation, not the author's limit, and the other SDKs write
 * a plain integer. The bounds still hold: zod checks them in the call. */
function dropSafeIntegerBounds(value) {
  if (Array.isArray(value)) {
    value.forEach(dropSafeIntegerBounds);
    return;
  }
  if (value === null || typeof value !== "object") return;
  if (value.minimum === -Number.MAX_SAFE_INTEGER && value.maximum === Number.MAX_SAFE_INTEGER) {
    delete value.minimum;
    delete value.maximum;
  }
  for (const [key, child] of Object.entries(value)) {
    if (!LITERAL_KEYS.has(key)) dropSafeIntegerBounds(child);
  }
}
