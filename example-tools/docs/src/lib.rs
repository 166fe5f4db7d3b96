//! Search over a small built-in documentation set.

use serde::Deserialize;

/// Which part of the documentation to search.
#[derive(Deserialize, schemars::JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Section {
    Guide,
    Reference,
    Faq,
}

/// Narrows a search.
#[derive(Deserialize, schemars::JsonSchema)]
struct Filter {
    /// Only this section.
    section: Option<Section>,
    /// Only pages updated in or after this year.
    since_year: Option<u16>,
}

const PAGES: &[(&str, Section, u16, &str)] = &[
    ("Installing lovia", Section::Guide, 2026, "install the lovia binary and add the wasm32-wasip2 target"),
    ("Writing a tool", Section::Guide, 2026, "a tool is a function with #[lovia::tool]; build it for wasm32-wasip2"),
    ("Limits", Section::Reference, 2026, "memory, time and output limits of a call"),
    ("Approvals", Section::Reference, 2025, "tools that need approval ask a human before running"),
    ("Why WebAssembly?", Section::Faq, 2025, "a component can touch nothing it was not granted"),
    ("Timeouts", Section::Faq, 2026, "a timed out call is interrupted, not abandoned"),
];

/// Search internal documentation.
///
/// Returns the titles of matching pages, best match first.
#[lovia::tool(strict, read_only)]
fn search_docs(
    #[arg(description = "Search terms", min_length = 1)] query: String,
    #[arg(description = "How many titles to return", min = 1, max = 10, default = 5)] limit: Option<u32>,
    #[arg(description = "Optional filter")] filter: Option<Filter>,
) -> Vec<String> {
    let terms: Vec<String> = query.to_lowercase().split_whitespace().map(str::to_owned).collect();
    let mut hits: Vec<(usize, &str)> = PAGES
        .iter()
        .filter(|(_, section, year, _)| match &filter {
            Some(f) => f.section.is_none_or(|s| s == *section) && f.since_year.is_none_or(|y| *year >= y),
            None => true,
        })
        .map(|(title, _, _, body)| {
            let text = format!("{title} {body}").to_lowercase();
            (terms.iter().filter(|t| text.contains(t.as_str())).count(), *title)
        })
        .filter(|(score, _)| *score > 0)
        .collect();
    hits.sort_by_key(|b| std::cmp::Reverse(b.0));
    hits.into_iter().take(limit.unwrap_or(5) as usize).map(|(_, t)| t.to_owned()).collect()
}

lovia::export!(search_docs);
