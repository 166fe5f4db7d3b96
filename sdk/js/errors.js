// The errors a tool throws. Each call-ending error maps onto one case of the
// contract's `call-error` (docs/semantics.md §5); the mapping itself is in
// plugin.js, the only module that knows the contract.

/** An ordinary tool failure. The model reads `Tool error: <message>`, plus
 * `\n  hint: <hint>` when a hint is given. Retried per the tool's `retries`.
 * A subclass's name is the error's kind (`class ConnectError extends ToolError`),
 * unless `kind` is given. */
export class ToolError extends Error {
  constructor(message = "", options = {}) {
    super(String(message));
    const { hint, kind } = options ?? {};
    this.hint = hint === undefined || hint === null ? undefined : String(hint);
    this.kind = kind === undefined || kind === null ? undefined : String(kind);
  }

  get name() {
    return this.constructor.name || "ToolError";
  }
}

/** A semantic check of the arguments failed inside the tool. Never retried. */
export class InvalidToolArguments extends ToolError {}

/** Ends the whole run; the call leaves no result (docs/semantics.md §6). */
export class RunCancelled extends Error {
  constructor(reason = "") {
    super(String(reason) || "run cancelled");
  }

  get name() {
    return "RunCancelled";
  }
}

/** A budget the tool manages (a sub-run's) was exceeded: an ordinary error
 * result for the model, never retried (docs/semantics.md §7). */
export class BudgetExceeded extends Error {
  constructor(message = "") {
    super(String(message) || "BudgetExceeded");
  }

  get name() {
    return "BudgetExceeded";
  }
}

/** A `tool()` or `plugin()` declaration that cannot become a tool: thrown
 * when the tool file is evaluated, which `lovia build` does before it
 * writes a component. The message names the tool and, when it is about
 * one, the option. */
export class DeclarationError extends TypeError {
  constructor(tool, message) {
    super(`tool '${tool}': ${message}`);
    this.tool = tool;
  }

  get name() {
    return "DeclarationError";
  }
}
