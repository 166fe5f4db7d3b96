//! Head/tail truncation of a tool's output (docs/semantics.md §12).

/// The output cap when neither the tool nor the host sets one (docs/semantics.md §18).
pub const DEFAULT_MAX_OUTPUT_CHARS: u64 = 200_000;

/// Cuts `text` to `limit` characters (code points): the first 80 % and the
/// last 20 %, joined by a marker that says how much was kept. Returns `None`
/// when `text` fits.
///
/// ```
/// let out = lovia_host::truncate(&"x".repeat(10_000), 1_000).expect("truncated");
/// assert!(out.contains("[... tool output truncated: kept 1,000 of 10,000 chars ...]"));
/// ```
pub fn truncate(text: &str, limit: u64) -> Option<String> {
    let len = text.chars().count();
    if (len as u64) <= limit {
        return None;
    }
    // L = max(1, limit); head = max(1, floor(0.8 L)); tail = L - head.
    let l = limit.max(1) as usize;
    let head = (l * 4 / 5).max(1);
    let tail = l.saturating_sub(head);
    let head_end = text.char_indices().nth(head).map_or(text.len(), |(i, _)| i);
    let tail_start =
        if tail == 0 { text.len() } else { text.char_indices().nth(len - tail).map_or(text.len(), |(i, _)| i) };
    Some(format!(
        "{}\n\n[... tool output truncated: kept {} of {} chars ...]\n\n{}",
        &text[..head_end],
        thousands(head + tail),
        thousands(len),
        &text[tail_start..]
    ))
}

/// [`super::text::thousands`] of a character count.
fn thousands(n: usize) -> String {
    super::text::thousands(n as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_per_spec_examples() {
        let text: String = "0123456789".repeat(2);
        let t = truncate(&text, 9).expect("truncated");
        assert_eq!(t, "0123456\n\n[... tool output truncated: kept 9 of 20 chars ...]\n\n89");
        let t = truncate(&text, 2).expect("truncated");
        assert_eq!(t, "0\n\n[... tool output truncated: kept 2 of 20 chars ...]\n\n9");
        let t = truncate(&text, 1).expect("truncated");
        assert_eq!(t, "0\n\n[... tool output truncated: kept 1 of 20 chars ...]\n\n");
        assert_eq!(truncate(&text, 0), truncate(&text, 1));
        assert_eq!(truncate(&text, 20), None);
    }

    #[test]
    fn counts_code_points_and_groups_thousands() {
        let text = "é".repeat(250_000);
        let t = truncate(&text, 200_000).expect("truncated");
        assert!(t.starts_with(&"é".repeat(160_000)));
        assert!(t.contains("kept 200,000 of 250,000 chars"));
        assert!(t.ends_with(&format!("\n\n{}", "é".repeat(40_000))));
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(999), "999");
    }
}
