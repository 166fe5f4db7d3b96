// Who the plugin is: `plugin({...})` in a tool file, else the tool file's
// name (which `lovia build` defines as `__LOVIA_PLUGIN_NAME__`).

import { NAME } from "./grammar.js";

const OPTIONS = ["name", "version", "instructions"];
let declared;

/* global __LOVIA_PLUGIN_NAME__ */
function defaultName() {
  return typeof __LOVIA_PLUGIN_NAME__ === "string" ? __LOVIA_PLUGIN_NAME__ : "tools";
}

/** Names the plugin (default: the tool file's name), its version (default
 * 0.1.0) and extra instructions for the model (default none). */
export function plugin(options = {}) {
  const unknown = Object.keys(options).filter((k) => !OPTIONS.includes(k));
  if (unknown.length > 0) {
    throw new TypeError(`plugin(): unknown option '${unknown[0]}'; expected one of: ${OPTIONS.join(", ")}`);
  }
  const { name, version = "0.1.0", instructions } = options;
  if (name !== undefined && (typeof name !== "string" || !NAME.test(name))) {
    throw new TypeError(`plugin(): invalid plugin name '${name}': a name must match ^[a-zA-Z0-9_-]{1,64}$`);
  }
  if (typeof version !== "string" || version === "") {
    throw new TypeError(`plugin(): invalid version '${version}': expected a semver string such as 0.1.0`);
  }
  if (instructions !== undefined && typeof instructions !== "string") {
    throw new TypeError("plugin(): instructions must be a string");
  }
  declared = { name: name ?? defaultName(), version, instructions };
}

/** The plugin's info as declared, or the defaults. */
export function current() {
  return declared ?? { name: defaultName(), version: "0.1.0", instructions: undefined };
}
