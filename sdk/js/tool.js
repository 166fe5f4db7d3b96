// `tool()`: a declaration becomes a tool spec and a way to call it.
//
// Everything a declaration can get wrong is a `DeclarationError` thrown by
// `tool()`, that is while the tool file is evaluated: `lovia build`
// evaluates it in the component before it writes one, so a bad declaration
// never becomes a component. Nothing here knows the WIT contract;
// plugin.js maps specs, outputs and failures onto it.

import { Content } from "./content.js";
import { RunContext } from "./context.js";
import { BudgetExceeded, DeclarationError, InvalidToolArguments, RunCancelled, ToolError } from "./errors.js";
import { ERROR_KIND, NAME } from "./grammar.js";
import { isZod, parametersSchema } from "./schema.js";
import { encode } from "./utf8.js";

const U32_MAX = 2 ** 32 - 1;
const OPTIONS = [
  "name", "title", "description", "parameters", "strict", "parallel", "retries", "timeoutMs",
  "maxOutputChars", "needsApproval", "hints",
];
const HINTS = ["readOnly", "destructive", "idempotent", "openWorld"];

/** Every tool declared in this component, in declaration order. */
export const REGISTRY = new Map();

function flag(name, key, value, fallback) {
  if (value === undefined) return fallback;
  if (typeof value !== "boolean") throw new DeclarationError(name, `option ${key} must be true or false, got ${JSON.stringify(value)}`);
  return value;
}

function count(name, key, value, max, min = 0) {
  if (value === undefined) return undefined;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new DeclarationError(name, `option ${key} must be an integer from ${min} to ${max}, got ${JSON.stringify(value)}`);
  }
  return value;
}

/** Declares a tool and returns it (its handler stays callable as `.handler`).
 *
 * Options (defaults in brackets): `name` (required, `^[a-zA-Z0-9_-]{1,64}$`),
 * `title` [none; at most 128 bytes], `description` [""], `parameters` [no
 * arguments; a zod object schema or a JSON Schema object], `strict` [false],
 * `parallel` [true; false makes every call a barrier], `retries` [the host's
 * default, 0], `timeoutMs` [the host's default], `maxOutputChars` [the host's
 * default, 200,000], `needsApproval` [false; true, or a function `(args,
 * ctx)` returning a boolean or a promise of one], and `hints` `{ readOnly,
 * destructive, idempotent, openWorld }` [all false]. */
export function tool(options, handler) {
  if (options === null || typeof options !== "object" || Array.isArray(options)) {
    throw new TypeError("tool(options, handler): options must be an object with at least a name");
  }
  const name = options.name;
  if (typeof name !== "string" || !NAME.test(name)) {
    throw new DeclarationError(String(name), "invalid tool name: a name must match ^[a-zA-Z0-9_-]{1,64}$");
  }
  const unknown = Object.keys(options).filter((k) => !OPTIONS.includes(k));
  if (unknown.length > 0) {
    throw new DeclarationError(name, `unknown tool option '${unknown[0]}'; expected one of: ${OPTIONS.join(", ")}`);
  }
  if (typeof handler !== "function") throw new DeclarationError(name, "the second argument must be the handler function (args, ctx) => result");
  if (REGISTRY.has(name)) throw new DeclarationError(name, `a tool named '${name}' is already declared`);

  const description = options.description ?? "";
  if (typeof description !== "string") throw new DeclarationError(name, "option description must be a string");
  const title = options.title;
  if (title !== undefined && (typeof title !== "string" || encode(title).length > 128 || /[\u0000-\u001f\u007f-\u009f]/.test(title))) {
    throw new DeclarationError(name, "option title must be a string of at most 128 bytes without control characters");
  }
  const strict = flag(name, "strict", options.strict, false);
  const parallel = flag(name, "parallel", options.parallel, true);
  const retries = count(name, "retries", options.retries, U32_MAX);
  const timeoutMs = count(name, "timeoutMs", options.timeoutMs, Number.MAX_SAFE_INTEGER, 1);
  const maxOutputChars = count(name, "maxOutputChars", options.maxOutputChars, Number.MAX_SAFE_INTEGER);
  const hints = options.hints ?? {};
  if (hints === null || typeof hints !== "object" || Array.isArray(hints)) throw new DeclarationError(name, "option hints must be an object");
  const unknownHint = Object.keys(hints).filter((k) => !HINTS.includes(k));
  if (unknownHint.length > 0) {
    throw new DeclarationError(name, `unknown hint '${unknownHint[0]}'; expected one of: ${HINTS.join(", ")}`);
  }
  const flags = Object.fromEntries(HINTS.map((k) => [k, flag(name, `hints.${k}`, hints[k], false)]));

  const needs = options.needsApproval ?? false;
  let approval;
  let predicate;
  if (typeof needs === "boolean") {
    approval = needs ? "always" : "never";
  } else if (typeof needs === "function") {
    approval = "ask-plugin";
    predicate = needs;
  } else {
    throw new DeclarationError(name, "option needsApproval must be a boolean or a function (args, ctx) => boolean");
  }

  const made = parametersSchema(options.parameters, strict);
  if (typeof made === "string") throw new DeclarationError(name, made);

  const declared = {
    spec: {
      name, title, description, parameters: made.text, strict, parallel, retries, timeoutMs, maxOutputChars,
      approval, hints: flags,
    },
    parameters: options.parameters,
    properties: made.schema.properties,
    handler,
    predicate,
  };
  REGISTRY.set(name, declared);
  return Object.freeze({ name, handler });
}

function find(name) {
  const t = REGISTRY.get(name);
  // The host's wording for an unknown tool (docs/semantics.md §15).
  if (t === undefined) throw new ToolError(`Tool '${name}' is not available.`);
  return t;
}

function parse(name, text) {
  let value;
  try {
    value = JSON.parse(text.trim() === "" ? "{}" : text);
  } catch (e) {
    throw new InvalidToolArguments(`Invalid arguments for tool '${name}': arguments: ${e.message}`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new InvalidToolArguments(`Invalid arguments for tool '${name}': arguments: expected a JSON object`);
  }
  return value;
}

/** The arguments as the handler gets them: a zod schema's parse (its
 * defaults, transforms and refinements), else the JSON with the schema's
 * top-level defaults filled in (fresh copies, so no call sees another's). */
async function argumentsOf(t, name, text) {
  const args = parse(name, text);
  if (isZod(t.parameters)) {
    // Async, so that an async refinement is awaited like the handler.
    const parsed = await t.parameters.safeParseAsync(args);
    if (!parsed.success) {
      const detail = parsed.error.issues
        .map((i) => (i.path.length > 0 ? `${i.path.join(".")}: ${i.message}` : i.message))
        .join("; ");
      throw new InvalidToolArguments(`Invalid arguments for tool '${name}': ${detail}`);
    }
    return parsed.data;
  }
  for (const [key, property] of Object.entries(t.properties)) {
    if (!(key in args) && property !== null && typeof property === "object" && "default" in property) {
      args[key] = structuredClone(property.default);
    }
  }
  return args;
}

/** A successful result: `kind` "text" (`value` a string), "json" (`value`
 * the JSON text) or "parts" (`value` Content's parts). */
function outputOf(result) {
  if (typeof result === "string") return { kind: "text", value: result };
  if (result instanceof Content) return { kind: "parts", value: result.parts };
  let text;
  try {
    text = JSON.stringify(result === undefined ? null : result);
  } catch (e) {
    throw new ToolError(`the result could not be serialised as JSON: ${e.message}`);
  }
  if (text === undefined) throw new ToolError(`the result could not be serialised as JSON: a ${typeof result} is not JSON`);
  return { kind: "json", value: text };
}

/** Runs tool `name` on the argument text (the host validated it against the
 * schema already); throws what the tool threw, for `failureOf` to map. */
export async function call(name, text, backend) {
  const t = find(name);
  const args = await argumentsOf(t, name, text);
  return outputOf(await t.handler(args, new RunContext(backend)));
}

/** Whether this call needs approval; a thrown error denies it. */
export async function needsApproval(name, text, backend) {
  const t = find(name);
  if (t.predicate === undefined) return false;
  return Boolean(await t.predicate(parse(name, text), new RunContext(backend)));
}

/** What the model reads of an error that escaped a tool: `{ case, message,
 * hint, kind }`, where case is "tool", "invalid-arguments", "cancel-run" or
 * "budget-exceeded", and kind the error's kind (a ToolError subclass's name,
 * its `kind` option, or another Error's name). */
export function failureOf(error) {
  if (error instanceof RunCancelled) return { case: "cancel-run", message: error.message };
  if (error instanceof BudgetExceeded) return { case: "budget-exceeded", message: error.message };
  if (error instanceof InvalidToolArguments) {
    // One string in the contract: the hint is folded in as the host renders it.
    const message = error.hint === undefined ? error.message : `${error.message}\n  hint: ${error.hint}`;
    return { case: "invalid-arguments", message: message || "InvalidToolArguments" };
  }
  if (error instanceof ToolError) {
    const named = error.kind ?? (error.constructor === ToolError ? undefined : error.name);
    const kind = named !== undefined && ERROR_KIND.test(named) ? named : undefined;
    let message = error.message;
    // A name outside the kind grammar still names the failure.
    if (!message && error.hint === undefined && kind === undefined && named !== undefined) message = named;
    return { case: "tool", message, hint: error.hint, kind };
  }
  if (error instanceof Error) {
    const kind = error.name && error.name !== "Error" && ERROR_KIND.test(error.name) ? error.name : undefined;
    return { case: "tool", message: error.message || (kind === undefined ? error.name || "Error" : ""), kind };
  }
  // A thrown value that is not an Error: its text.
  let message;
  try {
    message = typeof error === "string" ? error : JSON.stringify(error) ?? String(error);
  } catch {
    message = String(error);
  }
  return { case: "tool", message };
}
