// `RunContext`: what the host tells a call about its run, and the session
// store. Every method reaches the host through a backend that plugin.js
// (the only module that knows the contract) supplies, so this module stays
// the same when the contract moves on.

import { ToolError } from "./errors.js";
import { decode, encode } from "./utf8.js";

export const LEVELS = ["trace", "debug", "info", "warn", "error"];


/** This plugin's key-value namespace in the current session, when the plugin
 * is granted a store. Without a grant `set` throws `ToolError` (the host's
 * "not granted" message), `get` finds nothing and `keys` is empty. */
export class Store {
  #backend;

  constructor(backend) {
    this.#backend = backend;
  }

  /** The bytes under `key`, or undefined. */
  get(key) {
    return this.#backend.storeGet(String(key));
  }

  /** The value under `key` as UTF-8 text; undefined when absent or not UTF-8. */
  getText(key) {
    const raw = this.get(key);
    if (raw === undefined) return undefined;
    return decode(raw);
  }

  /** Stores bytes or text (as UTF-8) under `key`; throws `ToolError` when not granted or over quota. */
  set(key, value) {
    const data = typeof value === "string" ? encode(value) : value;
    if (!(data instanceof Uint8Array)) throw new TypeError("Store.set: the value must be a string or a Uint8Array");
    const problem = this.#backend.storeSet(String(key), data);
    if (problem !== undefined) throw new ToolError(problem);
  }

  /** Removes `key`; removing a missing key is not an error. */
  delete(key) {
    this.#backend.storeDelete(String(key));
  }

  /** The keys starting with `prefix`, sorted. */
  keys(prefix = "") {
    return [...this.#backend.storeKeys(String(prefix))];
  }
}

/** The context of the current call: the handler's second argument. */
export class RunContext {
  #backend;

  constructor(backend) {
    this.#backend = backend;
    /** The session store (see `Store`). */
    this.store = new Store(backend);
  }

  /** The id of the run this call belongs to. */
  get runId() {
    return this.#backend.runId();
  }

  /** The session id, when the run belongs to a session. */
  get sessionId() {
    return this.#backend.sessionId();
  }

  /** The id the model gave this call. */
  get callId() {
    return this.#backend.callId();
  }

  /** The name of the agent that requested the call. */
  get agent() {
    return this.#backend.agent();
  }

  /** The 1-based turn of the run; 0 outside a run. */
  get turn() {
    return this.#backend.turn();
  }

  /** The JSON value the application granted this plugin under `key`, parsed; `fallback` when absent. */
  dependency(key, fallback = undefined) {
    const text = this.#backend.dependency(String(key));
    if (text === undefined) return fallback;
    try {
      return JSON.parse(text);
    } catch {
      return fallback;
    }
  }

  /** True once the run was cancelled or the call's deadline passed. */
  cancelled() {
    return this.#backend.cancelled();
  }

  /** Reports progress: the application sees a `ToolProgress` event. */
  progress(message) {
    this.#backend.progress(String(message));
  }

  /** A log line tagged with plugin, tool and call id; `level` is one of trace, debug, info, warn, error. */
  log(level, message) {
    if (!LEVELS.includes(level)) {
      throw new TypeError(`unknown log level '${level}'; expected one of: ${LEVELS.join(", ")}`);
    }
    this.#backend.log(level, String(message));
  }
}
