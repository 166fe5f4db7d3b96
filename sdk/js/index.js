// The lovia tool SDK for TypeScript and JavaScript (docs/typescript.md).
//
//   import { tool } from "lovia";
//   import { z } from "zod";
//
//   export const greet = tool(
//     { name: "greet", description: "Greets someone.", parameters: z.object({ name: z.string() }) },
//     async ({ name }) => `Hello, ${name}!`,
//   );
//
// `lovia build tool.ts -o tool.wasm` makes it a component.

export { tool } from "./tool.js";
export { plugin } from "./info.js";
export { Content } from "./content.js";
export { RunContext, Store } from "./context.js";
export { BudgetExceeded, DeclarationError, InvalidToolArguments, RunCancelled, ToolError } from "./errors.js";
