// The code-mode engine (engine.wit): runs a model's program as the body of
// an async function, with `tools` and `console` as its only capabilities.
import host from "lovia:code-mode/host@0.1.0";

/** A nested call's error result; `message` is the text the model reads. */
class ToolError extends Error {
  constructor(message, tool) {
    super(message);
    this.name = "ToolError";
    /** The `tools.` name of the call that failed. */
    this.tool = tool;
  }
}

// The program has no clock: reading it would reach a WASI import the
// component stubs out, which traps. A date from a string or a number needs
// none, so only the clock's readers say why they fail.
const noClock = (what) => new Error(`${what} needs a clock, which code mode does not have; use a time a tool returns, or one from your instructions`);
const WithoutClock = class Date extends globalThis.Date {
  constructor(...args) {
    if (args.length === 0) throw noClock("new Date()");
    super(...args);
  }
  static now() {
    throw noClock("Date.now()");
  }
};
globalThis.Date = WithoutClock;

// `new AsyncFunction(params, code)` puts two lines before the program's
// first: `(async function anonymous(tools,console,ToolError` and `) {`.
const LINES_BEFORE_PROGRAM = 2;

function show(value) {
  if (typeof value === "string") return value;
  if (value instanceof Error) return `${value.name}: ${value.message}`;
  try {
    const text = JSON.stringify(value);
    return text === undefined ? String(value) : text;
  } catch {
    return String(value);
  }
}

/** Where in the program `error` was thrown: its first frame in the
 *  program's own text (QuickJS names it `<input>`), as the program's line
 *  and column, not the engine's. */
function whereInProgram(error, programLines) {
  const stack = typeof error?.stack === "string" ? error.stack : "";
  const found = /<input>:(\d+):(\d+)/.exec(stack);
  if (!found) return "";
  const line = Number(found[1]) - LINES_BEFORE_PROGRAM;
  if (line > programLines) return "\n    at the end of the program";
  if (line < 1) return "\n    at the start of the program";
  return `\n    at line ${line}, column ${found[2]} of the program`;
}

function errorText(error, programLines) {
  if (!(error instanceof Error)) return `Uncaught ${show(error)}`;
  const where = whereInProgram(error, programLines);
  if (error instanceof ToolError) {
    // The tool's text is already an error result's; it is not said twice.
    const text = error.message.startsWith("Tool error: ") ? error.message.slice("Tool error: ".length) : error.message;
    return `Uncaught ToolError from tools.${error.tool}: ${text}${where}`;
  }
  return `Uncaught ${error.name}: ${error.message}${where}`;
}

// Nested calls run concurrently: `host.startCall` starts one and returns
// its id at once, and the pump answers the calls in flight as they end
// (`host.nextEnd` waits for the next). Before it waits, the pump lets the
// program's queued reactions run, so that calls the program starts together
// (`Promise.all`, calls started before their first `await`, or in async
// helpers it runs side by side) are in flight together: it yields until two
// turns of the microtask queue in a row start no call (at most 32 turns), so
// a program that awaits each call in turn pays two turns per call, not 32.
const inFlight = new Map();
let pumping = false;
let started = 0;
const MOST_TURNS_BEFORE_WAITING = 32;
const QUIET_TURNS = 2;

async function pump() {
  pumping = true;
  try {
    while (inFlight.size > 0) {
      let quiet = 0;
      for (let turn = 0; turn < MOST_TURNS_BEFORE_WAITING && quiet < QUIET_TURNS; turn++) {
        const before = started;
        await undefined;
        quiet = started === before ? quiet + 1 : 0;
      }
      // Settled meanwhile by `settle`, at the program's end.
      if (inFlight.size === 0) break;
      const end = host.nextEnd();
      const call = inFlight.get(end.id);
      if (call === undefined) continue;
      inFlight.delete(end.id);
      if (end.output.tag === "ok") {
        const reply = JSON.parse(end.output.val);
        call.resolve("json" in reply ? reply.json : reply.text);
      } else {
        const error = new ToolError(end.output.val, call.ident);
        error.stack = call.site;
        call.reject(error);
      }
    }
  } finally {
    pumping = false;
  }
}

/** Waits for the calls a program started and left behind, so none is cut
 *  off midway when it returns. */
function settle() {
  while (inFlight.size > 0) {
    const end = host.nextEnd();
    inFlight.delete(end.id);
  }
}

export async function run(code, names, maxLogChars) {
  const lines = [];
  let size = 0;
  let cut = false;
  const write = (args) => {
    if (cut) return;
    const line = args.map(show).join(" ");
    if (size + line.length > maxLogChars) {
      lines.push(line.slice(0, Math.max(0, maxLogChars - size)));
      cut = true;
      return;
    }
    lines.push(line);
    size += line.length + 1;
  };
  const console = Object.freeze({ log: (...a) => write(a), info: (...a) => write(a), warn: (...a) => write(a), error: (...a) => write(a), debug: (...a) => write(a) });
  const tools = Object.create(null);
  for (const [ident, name] of names) {
    tools[ident] = (args) => {
      let text;
      try {
        text = JSON.stringify(args === undefined ? {} : args);
      } catch (e) {
        return Promise.reject(new TypeError(`the arguments of tools.${ident} are not JSON: ${e.message}`));
      }
      const id = host.startCall(name, text ?? "null");
      started += 1;
      // Where the program made the call: its error says that line, not the pump's.
      const site = new Error().stack;
      return new Promise((resolve, reject) => {
        inFlight.set(id, { resolve, reject, ident, site });
        if (!pumping) pump();
      });
    };
  }
  Object.freeze(tools);
  // A name that is not a tool says so, with the names that are, instead of
  // QuickJS's bare "not a function".
  const known = Object.keys(tools);
  const offered = new Proxy(tools, {
    get(target, prop) {
      if (typeof prop !== "string" || prop in target || prop === "then" || prop in Object.prototype) return target[prop];
      throw new TypeError(`tools.${prop} is not a tool; the tools are ${known.length ? known.map((k) => `tools.${k}`).join(", ") : "none"}`);
    },
  });
  const outcome = { logs: "", cut: false };
  try {
    const AsyncFunction = (async function () {}).constructor;
    const program = new AsyncFunction("tools", "console", "ToolError", code);
    const value = await program(offered, console, ToolError);
    outcome.returned = value !== undefined;
    if (value !== undefined) outcome.value = show(value);
  } catch (error) {
    outcome.error = errorText(error, code.split("\n").length);
  }
  settle();
  outcome.logs = lines.join("\n");
  outcome.cut = cut;
  return JSON.stringify(outcome);
}
