// The name grammars of the contract (docs/semantics.md §2 rule 10, §15).

/** A tool or plugin name. */
export const NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** A named error kind (contract 0.2's `tool-error.kind`); the host drops any other. */
export const ERROR_KIND = /^[A-Za-z][A-Za-z0-9_.]{0,63}$/;
