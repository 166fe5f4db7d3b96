//! Notes kept per session in the host's store (needs a store grant).

/// Save a note under a title in the current session.
#[lovia::tool]
fn save_note(
    ctx: &lovia::Context,
    #[arg(description = "A short title", min_length = 1, max_length = 80)] title: String,
    #[arg(description = "The note's text")] body: String,
) -> Result<String, lovia::ToolError> {
    let session = ctx
        .session_id()
        .ok_or_else(|| lovia::ToolError::new("notes need a session").hint("run the call with a session id"))?;
    ctx.store().set(&format!("note/{title}"), body.as_bytes())?;
    Ok(format!("Saved note '{title}' in session {session}"))
}

/// List the titles of the notes saved in this session.
#[lovia::tool(read_only)]
fn list_notes(ctx: &lovia::Context) -> Vec<String> {
    ctx.store().keys("note/").into_iter().map(|k| k.trim_start_matches("note/").to_owned()).collect()
}

/// Read one note.
#[lovia::tool(read_only)]
fn read_note(ctx: &lovia::Context, title: String) -> Result<String, lovia::ToolError> {
    ctx.store()
        .get_string(&format!("note/{title}"))
        .ok_or_else(|| lovia::ToolError::new(format!("no note titled '{title}'")).hint("list_notes shows the titles"))
}

lovia::export!(save_note, list_notes, read_note);
