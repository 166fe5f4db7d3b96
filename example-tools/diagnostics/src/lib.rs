//! Tools for operators checking a deployment's limits: echo, sleeping,
//! spinning, failing on purpose, large outputs and progress events.

use std::time::{Duration, Instant};

/// Return the text unchanged.
#[lovia::tool(read_only, idempotent)]
fn echo(#[arg(description = "Text to return")] text: String) -> String {
    text
}

/// Sleep for the given milliseconds through the WASI clock (no CPU use).
#[lovia::tool(read_only)]
fn sleep_ms(#[arg(description = "Milliseconds to sleep", max = 3_600_000)] ms: u64) -> String {
    std::thread::sleep(Duration::from_millis(ms));
    format!("slept {ms} ms")
}

/// Busy-loop for the given milliseconds (uses a full core).
#[lovia::tool(read_only)]
fn spin_ms(#[arg(description = "Milliseconds to spin", max = 3_600_000)] ms: u64) -> String {
    let start = Instant::now();
    let mut spins: u64 = 0;
    while start.elapsed() < Duration::from_millis(ms) {
        spins = std::hint::black_box(spins.wrapping_add(1));
    }
    format!("spun {ms} ms")
}

/// Fail the first `times` calls of a session, then succeed (needs a store grant).
#[lovia::tool]
fn fail_times(
    ctx: &lovia::Context,
    #[arg(description = "How many calls fail before one succeeds")] times: u32,
) -> Result<String, lovia::ToolError> {
    let store = ctx.store();
    let seen: u32 = store.get_string("fail_times/count").and_then(|s| s.parse().ok()).unwrap_or(0);
    store.set("fail_times/count", (seen + 1).to_string())?;
    if seen < times {
        return Err(lovia::ToolError::new(format!("failure {} of {times}", seen + 1)));
    }
    Ok(format!("succeeded after {times} failures"))
}

/// Return a string of exactly `count` characters.
#[lovia::tool(read_only)]
fn emit_chars(
    #[arg(description = "How many characters")] count: u64,
    #[arg(description = "The character to repeat", min_length = 1, max_length = 1, default = "x")] ch: String,
) -> String {
    ch.repeat(count as usize)
}

/// Report `steps` progress messages, then finish.
#[lovia::tool(read_only)]
fn progress(ctx: &lovia::Context, #[arg(min = 1, max = 1000)] steps: u32) -> String {
    for i in 1..=steps {
        ctx.progress(&format!("step {i} of {steps}"));
    }
    format!("done in {steps} steps")
}

/// Counts its own calls in instance memory: always 1 with a fresh instance
/// per call, 1, 2, 3, … within a session when the plugin runs in session mode.
#[lovia::tool(read_only)]
fn count_calls() -> u64 {
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
}

lovia::export!(echo, sleep_ms, spin_ms, fail_times, emit_chars, progress, count_calls);
