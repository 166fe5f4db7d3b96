//! A chart tool: a rich result (contract 0.2) with a summary, a PNG image
//! and a link to the data, for clients that show images.

mod png;

/// Draw a bar chart of a series of values and return it as a PNG image.
#[lovia::tool(read_only, idempotent, title = "Bar chart")]
fn bar_chart(
    #[arg(description = "The values to draw, one bar each", max_length = 64)] values: Vec<u32>,
    #[arg(description = "What the values measure", max_length = 64)] label: Option<String>,
) -> Result<lovia::Content, lovia::ToolError> {
    if values.is_empty() {
        // No message: the model reads the kind, `Tool error: EmptySeries`.
        return Err(lovia::ToolError::of_kind("EmptySeries"));
    }
    let label = label.unwrap_or_else(|| "value".into());
    let max = values.iter().copied().max().unwrap_or(0);
    let image = png::bar_chart(&values);
    let csv: String = values.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    Ok(lovia::Content::new()
        .text(format!("{} bars of {label}, the highest {max}.", values.len()))
        .image("image/png", image)
        .link(format!("data:text/csv,{label}%0A{}", csv.replace(',', "%0A")), format!("{label}.csv"), Some("text/csv")))
}

lovia::export!(bar_chart);
