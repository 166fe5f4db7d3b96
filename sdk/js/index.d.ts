// Types of the lovia tool SDK for TypeScript (docs/typescript.md).

/** A zod (v4) schema, as far as the SDK needs one: it converts itself to
 * JSON Schema and parses arguments. */
export interface ZodLike<T = unknown> {
  readonly _zod: unknown;
  toJSONSchema(params?: unknown): unknown;
  safeParseAsync(
    value: unknown,
  ): Promise<{ success: true; data: T } | { success: false; error: { issues: { path: PropertyKey[]; message: string }[] } }>;
}

/** A JSON Schema of the argument object (`"type": "object"`). */
export interface JsonObjectSchema {
  type: "object";
  properties?: Record<string, unknown>;
  required?: string[];
  additionalProperties?: false;
  [keyword: string]: unknown;
}

/** Hints for clients and operators (the MCP tool annotations); never trusted for security. */
export interface ToolHints {
  readOnly?: boolean;
  destructive?: boolean;
  idempotent?: boolean;
  openWorld?: boolean;
}

type ArgsOf<P> = P extends ZodLike<infer T> ? T : Record<string, unknown>;

/** A tool's declaration; every option but `name` has a default. */
export interface ToolOptions<P extends ZodLike | JsonObjectSchema | undefined = undefined> {
  /** `^[a-zA-Z0-9_-]{1,64}$`, unique in the plugin. */
  name: string;
  /** A display title for people, at most 128 bytes [none]. */
  title?: string;
  /** The model's guidance on when to call the tool [""]. */
  description?: string;
  /** The arguments: a zod object schema or a JSON Schema object [none]. */
  parameters?: P;
  /** Every argument required, unknown keys refused [false]. */
  strict?: boolean;
  /** False makes every call an execution barrier [true]. */
  parallel?: boolean;
  /** Retries after the first attempt [the host's default, 0]. */
  retries?: number;
  /** Per-attempt timeout in milliseconds [the host's default]. */
  timeoutMs?: number;
  /** Output cap in characters [the host's default, 200,000]. */
  maxOutputChars?: number;
  /** Whether a call needs a person's approval first [false]. */
  needsApproval?: boolean | ((args: ArgsOf<P>, ctx: RunContext) => boolean | Promise<boolean>);
  /** Client hints [all false]. */
  hints?: ToolHints;
}

/** What a handler may return: text (shown verbatim), `Content`, or any JSON value. */
export type ToolResult = string | Content | unknown;

/** A declared tool. */
export interface Tool<A> {
  readonly name: string;
  readonly handler: (args: A, ctx: RunContext) => ToolResult | Promise<ToolResult>;
}

/** Declares a tool. */
export function tool<P extends ZodLike | JsonObjectSchema | undefined = undefined>(
  options: ToolOptions<P>,
  handler: (args: ArgsOf<P>, ctx: RunContext) => ToolResult | Promise<ToolResult>,
): Tool<ArgsOf<P>>;

/** Names the plugin [the tool file's name], its version [0.1.0] and instructions for the model [none]. */
export function plugin(options: { name?: string; version?: string; instructions?: string }): void;

/** An ordinary tool failure: the model reads `Tool error: <message>` and the hint. A subclass's name is its kind. */
export class ToolError extends Error {
  constructor(message?: string, options?: { hint?: string; kind?: string });
  readonly hint?: string;
  readonly kind?: string;
}
/** A semantic check of the arguments failed; never retried. */
export class InvalidToolArguments extends ToolError {}
/** Ends the whole run; the call leaves no result. */
export class RunCancelled extends Error {
  constructor(reason?: string);
}
/** A budget the tool manages was exceeded; never retried. */
export class BudgetExceeded extends Error {
  constructor(message?: string);
}
/** A declaration that cannot become a tool. */
export class DeclarationError extends TypeError {
  readonly tool: string;
}

/** A rich result of text, images and links, in order. */
export class Content {
  text(text: string): this;
  image(mimeType: "image/png" | "image/jpeg" | "image/gif" | "image/webp" | string, data: Uint8Array): this;
  link(uri: string, name: string, mimeType?: string): this;
  readonly parts: ReadonlyArray<unknown>;
}

/** The plugin's key-value namespace in the session, when granted. */
export class Store {
  get(key: string): Uint8Array | undefined;
  getText(key: string): string | undefined;
  set(key: string, value: string | Uint8Array): void;
  delete(key: string): void;
  keys(prefix?: string): string[];
}

/** The context of the current call. */
export class RunContext {
  readonly runId: string;
  readonly sessionId: string | undefined;
  readonly callId: string;
  readonly agent: string;
  readonly turn: number;
  readonly store: Store;
  dependency<T = unknown>(key: string, fallback?: T): T | undefined;
  cancelled(): boolean;
  progress(message: string): void;
  log(level: "trace" | "debug" | "info" | "warn" | "error", message: string): void;
}
