// The code-mode engine (engine.wit): runs a model's program as the body of
// an async function, with `tools` and `console` as its only capabilities.
import host from "lovia:code-mode/host@0.1.0";

/** A nested call's error result; `message` is the text the model reads. */
class ToolError extends Error {
  constructor(message) {
    super(message);
    this.name = "ToolError";
  }
}

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

function errorText(error) {
  if (!(error instanceof Error)) return `Uncaught ${show(error)}`;
  const where = typeof error.stack === "string" ? error.stack.split("\n").find((l) => l.trim().startsWith("at ")) : "";
  return `Uncaught ${error.name}: ${error.message}${where ? `\n    ${where.trim()}` : ""}`;
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
    tools[ident] = async (args) => {
      let text;
      try {
        text = JSON.stringify(args === undefined ? {} : args);
      } catch (e) {
        throw new TypeError(`the arguments of ${name} are not JSON: ${e.message}`);
      }
      let reply;
      try {
        reply = JSON.parse(host.callTool(name, text ?? "null"));
      } catch (error) {
        // The import throws its `err` payload, the error result's text, as an Error.
        throw new ToolError(typeof error === "string" ? error : error.message);
      }
      return "json" in reply ? reply.json : reply.text;
    };
  }
  Object.freeze(tools);
  const outcome = { logs: "", cut: false };
  try {
    const AsyncFunction = (async function () {}).constructor;
    const program = new AsyncFunction("tools", "console", "ToolError", code);
    const value = await program(tools, console, ToolError);
    outcome.returned = value !== undefined;
    if (value !== undefined) outcome.value = show(value);
  } catch (error) {
    outcome.error = errorText(error);
  }
  outcome.logs = lines.join("\n");
  outcome.cut = cut;
  return JSON.stringify(outcome);
}
