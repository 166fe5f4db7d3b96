// The TypeScript guest fixture: the behaviour tools tests/all/typescript.rs
// runs, built with `lovia build` into a real component together with the
// examples of example-tools/js (imported below).

import { BudgetExceeded, Content, InvalidToolArguments, RunCancelled, ToolError, plugin, tool } from "lovia";
import { z } from "zod";
import "../../example-tools/js/docs.ts";
import "../../example-tools/js/orders.ts";

plugin({ name: "tstools", version: "0.2.0", instructions: "TypeScript fixture tools." });

class ConnectError extends ToolError {}

// The golden signature, declared the same way in Rust (tests/fixtures/py-twins) and Python (tests/python/twins.py).
tool(
  {
    name: "scalars",
    description: "Plain scalars.",
    parameters: z.object({ text: z.string(), count: z.number().int(), ratio: z.number(), flag: z.boolean() }),
  },
  ({ text, count, ratio, flag }) => `${text} ${count} ${ratio} ${flag}`,
);

tool(
  {
    name: "plain_schema",
    description: "A JSON Schema instead of zod.",
    parameters: {
      type: "object",
      properties: { word: { type: "string" }, times: { type: "integer", default: 2 } },
      required: ["word"],
    },
  },
  (args) => String(args.word).repeat(Number(args.times)),
);

tool(
  { name: "async_add", parameters: z.object({ a: z.number().int(), b: z.number().int() }) },
  async ({ a, b }) => {
    // Promises, microtasks and chained awaits settle inside the one call.
    const x = await Promise.resolve(a);
    const y = await new Promise<number>((resolve) => queueMicrotask(() => resolve(b)));
    const [p, q] = await Promise.all([x, Promise.resolve(y)]);
    return p + q + 2;
  },
);

tool({ name: "fail_hint" }, async () => {
  throw new ToolError("db down", { hint: "retry later" });
});
tool({ name: "fail_named", title: "Fail with a named error", parameters: z.object({ message: z.string() }) }, ({ message }) => {
  throw new ConnectError(message);
});
tool({ name: "fail_kind" }, () => {
  throw new ToolError("quota", { kind: "QuotaError" });
});
tool({ name: "fail_empty" }, () => {
  throw new RangeError("");
});
tool({ name: "fail_plain", parameters: z.object({ message: z.string() }) }, ({ message }) => {
  throw new Error(message);
});
tool({ name: "fail_value" }, () => {
  throw "a bare string";
});
tool({ name: "fail_invalid", parameters: z.object({ amount: z.number().int() }) }, ({ amount }) => {
  throw new InvalidToolArguments(`amount ${amount} exceeds the order total 990`);
});
tool(
  {
    name: "async_refined",
    parameters: z.object({ word: z.string().refine(async (w) => (await Promise.resolve(w)) !== "no", "must not be no") }),
  },
  ({ word }) => word,
);
tool({ name: "fail_refined", parameters: z.object({ even: z.number().int().refine((n) => n % 2 === 0, "must be even") }) }, ({ even }) => `${even}`);
tool({ name: "fail_budget" }, () => {
  throw new BudgetExceeded("total tokens 2 exceeds budget 1");
});
tool({ name: "fail_cancel" }, () => {
  throw new RunCancelled("operator pressed stop");
});
tool({ name: "bad_result" }, () => ({ big: 10n }));

tool(
  { name: "whoami", parameters: z.object({ greeting: z.string().default("hi") }) },
  async ({ greeting }, ctx) => {
    ctx.progress("looking");
    ctx.log("info", "who am I");
    return {
      greeting, run_id: ctx.runId, session_id: ctx.sessionId ?? null, call_id: ctx.callId, agent: ctx.agent,
      turn: ctx.turn, config: ctx.dependency("config"), missing: ctx.dependency("nope", "absent"),
      cancelled: ctx.cancelled(),
    };
  },
);

tool({ name: "count_up", parameters: z.object({ by: z.number().int().default(1) }) }, async ({ by }, ctx) => {
  const n = Number(ctx.store.getText("n") ?? "0") + by;
  ctx.store.set("n", String(n));
  return `n=${n} keys=${JSON.stringify(ctx.store.keys())}`;
});

tool({ name: "flaky", retries: 2 }, (_args, ctx) => {
  const n = Number(ctx.store.getText("attempts") ?? "0") + 1;
  ctx.store.set("attempts", String(n));
  if (n < 3) throw new ToolError(`attempt ${n} failed`);
  return `succeeded on attempt ${n}`;
});

tool({ name: "spin", timeoutMs: 200 }, async () => {
  await Promise.resolve();
  for (;;) {}
});

tool({ name: "steps", parameters: z.object({ n: z.number().int().min(1).max(10) }) }, async ({ n }, ctx) => {
  for (let i = 1; i <= n; i++) {
    await Promise.resolve();
    ctx.progress(`step ${i} of ${n}`);
  }
  return `done in ${n} steps`;
});

tool({ name: "rich", parameters: z.object({ label: z.string(), size: z.number().int().min(8) }) }, ({ label, size }) => {
  const data = new Uint8Array(size);
  data.set([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  for (let i = 8; i < size; i++) data[i] = (i - 8) % 256;
  return new Content()
    .text(`${label}: ${size} bytes`)
    .image("image/png", data)
    .link("https://example.com/a.csv", "a.csv", "text/csv")
    .link("data:,x", "x");
});

tool({ name: "hog", parameters: z.object({ mib: z.number().int().min(1) }) }, ({ mib }) => {
  const chunks: Uint8Array[] = [];
  for (let i = 0; i < mib; i++) chunks.push(new Uint8Array(1 << 20).fill(1));
  return `held ${chunks.reduce((n, c) => n + c.length, 0)} bytes`;
});

tool({ name: "chatty", maxOutputChars: 20, parameters: z.object({ n: z.number().int() }) }, ({ n }) => "x".repeat(n));

tool(
  {
    name: "gated_refund",
    parallel: false,
    parameters: z.object({ amount: z.number().int() }),
    needsApproval: async ({ amount }) => amount > 100,
    hints: { destructive: true },
  },
  ({ amount }) => `refunded ${amount}`,
);
tool({ name: "always_gated", needsApproval: true }, () => "ran");
tool({ name: "broken_gate", needsApproval: () => { throw new Error("no rule"); } }, () => "ran");
