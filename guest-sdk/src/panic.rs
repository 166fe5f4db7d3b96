//! Panics the host can name: a hook that hands a panic's message to the host
//! (`context.panicked`) just before the instance traps, so that the model
//! reads `tool panicked: <message>` and the host never parses stderr.

/// Makes every later panic of this instance report its message to the host
/// before it traps. Without it, a panic reads as a bare trap
/// (``Tool error: trap: wasm trap: wasm `unreachable` instruction executed``).
///
/// [`export!`](crate::export) calls it at the start of every export, so a
/// plugin built with the macros never calls it itself; a hand-written
/// implementation of the contract (through [`crate::bindings`]) calls it the
/// same way. Installing is idempotent. The hook keeps the default one's
/// output on stderr, and off WebAssembly it installs nothing (the SDK's
/// examples also compile, and run, on the host).
pub fn report_panics() {
    #[cfg(target_family = "wasm")]
    {
        static INSTALL: std::sync::Once = std::sync::Once::new();
        INSTALL.call_once(|| {
            let default = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                // The payload of `panic!("…")` is its text; std's own hook
                // names any other payload the same way.
                let message = info.payload_as_str().unwrap_or("Box<dyn Any>");
                crate::bindings::lovia::tools::context::panicked(message);
                default(info);
            }));
        });
    }
}
