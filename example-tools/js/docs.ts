// Search over a small built-in documentation set.
//
// The TypeScript version of example-tools/docs (the same tool and answers;
// tests/all/typescript.rs checks both). Build it with
//
//     lovia build example-tools/js/docs.ts --node-modules sdk/js/node_modules -o target/plugins/docs-ts.wasm

import { plugin, tool } from "lovia";
import { z } from "zod";

plugin({ name: "docs" });

const Section = z.enum(["guide", "reference", "faq"]).describe("Which part of the documentation to search.");

const PAGES: [string, string, number, string][] = [
  ["Installing lovia", "guide", 2026, "install the lovia binary and add the wasm32-wasip2 target"],
  ["Writing a tool", "guide", 2026, "a tool is a function with #[lovia::tool]; build it for wasm32-wasip2"],
  ["Limits", "reference", 2026, "memory, time and output limits of a call"],
  ["Approvals", "reference", 2025, "tools that need approval ask a human before running"],
  ["Why WebAssembly?", "faq", 2025, "a component can touch nothing it was not granted"],
  ["Timeouts", "faq", 2026, "a timed out call is interrupted, not abandoned"],
];

export const searchDocs = tool(
  {
    name: "search_docs",
    description: "Search internal documentation.\n\nReturns the titles of matching pages, best match first.",
    strict: true,
    parameters: z.object({
      query: z.string().min(1).describe("Search terms"),
      limit: z.number().int().min(1).max(10).nullable().default(5).describe("How many titles to return"),
      filter: z
        .object({
          section: Section.nullable().default(null).describe("Only this section."),
          since_year: z.number().int().min(0).max(65535).nullable().default(null).describe("Only pages updated in or after this year."),
        })
        .nullable()
        .default(null)
        .describe("Optional filter"),
    }),
    hints: { readOnly: true },
  },
  async ({ query, limit, filter }) => {
    const terms = query.toLowerCase().split(/\s+/).filter((t) => t !== "");
    const hits: [number, string][] = [];
    for (const [title, section, year, body] of PAGES) {
      if (filter?.section != null && filter.section !== section) continue;
      if (filter?.since_year != null && year < filter.since_year) continue;
      const text = `${title} ${body}`.toLowerCase();
      const score = terms.filter((t) => text.includes(t)).length;
      if (score > 0) hits.push([score, title]);
    }
    // A stable sort by score, best first, like the Rust version's sort_by_key(Reverse).
    hits.sort((a, b) => b[0] - a[0]);
    return hits.slice(0, limit ?? 5).map(([, title]) => title);
  },
);
