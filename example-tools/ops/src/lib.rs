//! Operations tools: a migration that must run alone, and a flaky lookup that retries.

/// Apply a schema migration. Runs alone: calls before it finish first.
#[lovia::tool(parallel = false, destructive, needs_approval)]
fn apply_migration(
    #[arg(description = "The migration's version number", min = 1)] version: u32,
    #[arg(description = "Only report what would change")] dry_run: Option<bool>,
) -> String {
    if dry_run.unwrap_or(false) {
        format!("Migration {version} would apply 3 statements")
    } else {
        format!("Applied migration {version}")
    }
}

/// Look a key up in an upstream service that fails now and then.
#[lovia::tool(retries = 2, timeout_ms = 10000, read_only)]
fn flaky_lookup(ctx: &lovia::Context, key: String) -> Result<String, lovia::ToolError> {
    // About one call in three fails, like an overloaded upstream would.
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    if nanos % 3 == 0 {
        ctx.log(lovia::Level::Warn, "upstream returned 503");
        return Err(lovia::ToolError::new("upstream unavailable (503)").hint("the host retries this tool"));
    }
    Ok(format!("{key} = {}", key.len() * 7))
}

lovia::export!(apply_migration, flaky_lookup);
