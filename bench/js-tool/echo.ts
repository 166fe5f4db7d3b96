// The TypeScript plugin of `lovia bench --js`: one trivial tool, written with
// lovia's TypeScript SDK and built with esbuild and componentize-qjs
// (bench/run does it):
//
//     lovia build bench/js-tool/echo.ts --node-modules sdk/js/node_modules -o target/bench/jsecho.wasm
//
// QuickJS and a snapshot of the evaluated module are inside it, so its cold
// start and its per-call costs differ from a Rust plugin's; `lovia bench`
// measures both. It uses a JSON Schema, not zod, so the figure is QuickJS's
// and the SDK's, not zod's.

import { plugin, tool } from "lovia";

plugin({ name: "jsecho", version: "0.2.0" });

tool(
  {
    name: "echo",
    description: "Return the text unchanged.",
    parameters: { type: "object", properties: { text: { type: "string", description: "Text to return" } }, required: ["text"] },
    hints: { readOnly: true, idempotent: true },
  },
  ({ text }) => String(text),
);
