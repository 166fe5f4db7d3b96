// The binding glue: the only module that knows the WIT contract
// (lovia:tools@0.2.0, world `async-tool-plugin`: `wit/lovia.wit` in the
// repository). componentize-qjs binds these imports and this export while it
// builds the component; `lovia build` bundles the tool file with this module
// as the component's entry.
//
// `call` and `needs-approval` are async exports of the component-model async
// ABI, so a handler's promises are driven to completion inside the one call.
// Nothing thrown escapes as a trap: every failure becomes a `call-error`.

import context from "lovia:tools/context@0.2.0";
import store from "lovia:tools/store@0.2.0";
import { current } from "./info.js";
import { REGISTRY, call, failureOf, needsApproval } from "./tool.js";

const some = (value) => (value === null ? undefined : value);

/** What `RunContext` asks the host, through the `context` and `store` imports. */
const backend = {
  runId: () => context.runId(),
  sessionId: () => some(context.sessionId()),
  callId: () => context.callId(),
  agent: () => context.agent(),
  turn: () => context.turn(),
  dependency: (key) => some(context.dependency(key)),
  cancelled: () => context.cancelled(),
  progress: (message) => context.progress(message),
  log: (level, message) => context.log(level, message),
  storeGet: (key) => some(store.get(key)),
  storeSet(key, value) {
    try {
      store.set(key, value);
      return undefined;
    } catch (e) {
      // The import throws its `err` payload, the host's reason.
      return typeof e === "string" ? e : String(e?.payload ?? e?.message ?? e);
    }
  },
  storeDelete: (key) => store.delete(key),
  storeKeys: (prefix) => store.keys(prefix),
};

function spec(s) {
  return {
    name: s.name,
    title: s.title,
    description: s.description,
    parameters: s.parameters,
    outputSchema: undefined,
    strict: s.strict,
    parallel: s.parallel,
    retries: s.retries,
    timeoutMs: s.timeoutMs,
    maxOutputChars: s.maxOutputChars,
    approval: s.approval,
    hints: s.hints,
  };
}

function part(p) {
  if (p.type === "text") return { tag: "text", val: p.text };
  if (p.type === "image") return { tag: "image", val: { mimeType: p.mimeType, data: p.data } };
  return { tag: "resource-link", val: { uri: p.uri, name: p.name, mimeType: p.mimeType } };
}

function output(out) {
  if (out.kind === "text") return { tag: "text", val: out.value };
  if (out.kind === "parts") return { tag: "parts", val: out.value.map(part) };
  return { tag: "json", val: out.value };
}

function callError(error) {
  const f = failureOf(error);
  if (f.case === "tool") return { tag: "tool", val: { message: f.message, hint: f.hint, kind: f.kind } };
  return { tag: f.case, val: f.message };
}

export const asyncPlugin = {
  info() {
    const i = current();
    return { name: i.name, version: i.version, instructions: i.instructions };
  },

  tools() {
    return [...REGISTRY.values()].map((t) => spec(t.spec));
  },

  async call(tool, args) {
    let out;
    try {
      out = output(await call(tool, args, backend));
    } catch (error) {
      // `payload` is the `err` case as it is, whatever the thrown value looked like.
      throw { payload: callError(error) };
    }
    return out;
  },

  async needsApproval(tool, args) {
    try {
      return await needsApproval(tool, args, backend);
    } catch (error) {
      // An error denies the call (the contract); the host says the check failed.
      const f = failureOf(error);
      throw { payload: f.message || "needs-approval failed" };
    }
  },
};

