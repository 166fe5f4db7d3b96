//! `lovia audit`: the audit trail of a `lovia serve` store
//! (docs/supply-chain.md, "The audit trail").

use crate::CliError;
use lovia_runner::StoreUrl;
use lovia_serve::{AuditEntry, ServeConfig};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The service config whose store to read.
    #[arg(long, value_name = "FILE", default_value = "examples/serve.toml", conflicts_with = "store")]
    config: PathBuf,
    /// The store itself instead: a SQLite file or a postgres:// URL.
    #[arg(long, value_name = "FILE|URL")]
    store: Option<StoreUrl>,
    /// Only this tenant's entries.
    #[arg(long, value_name = "NAME")]
    tenant: Option<String>,
    /// The newest N entries (1 to 1000).
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u16).range(1..=1000))]
    limit: u16,
    /// One JSON object per line instead of the table.
    #[arg(long)]
    json: bool,
}

pub(crate) async fn run(args: Args) -> Result<ExitCode, CliError> {
    let store = match args.store {
        Some(store) => store,
        None => {
            let config = ServeConfig::load(&args.config)
                .map_err(|e| CliError::new(e.to_string()).hint("pass the service config with --config, or --store"))?;
            config.store.unwrap_or_else(|| "lovia.db".into())
        }
    };
    let entries =
        lovia_serve::read_trail(&store, args.tenant.as_deref(), usize::from(args.limit)).await.map_err(|e| {
            CliError::new(e.to_string()).hint("check the store; lovia serve creates the trail at its first start")
        })?;
    for entry in entries.iter().rev() {
        println!("{}", if args.json { serde_json::to_string(entry).unwrap_or_default() } else { line(entry) });
    }
    Ok(ExitCode::SUCCESS)
}

fn line(e: &AuditEntry) -> String {
    let at = humantime_ms(e.at_ms);
    let digest = e.digest.as_deref().map_or_else(|| "-".to_owned(), |d| format!("sha256:{}", &d[..d.len().min(12)]));
    let signer = e.signer.as_deref().unwrap_or("unsigned");
    format!(
        "{at}  {:<12} {:<7} {:<40} {digest:<19} {signer:<28} {}",
        e.tenant,
        format!("{:?}", e.action).to_lowercase(),
        e.source,
        e.outcome
    )
}

/// `YYYY-MM-DD hh:mm:ss` (UTC) of milliseconds since the Unix epoch.
fn humantime_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}", rest / 3600, rest % 3600 / 60, rest % 60)
}

#[cfg(test)]
mod tests {
    #[test]
    fn dates_are_utc_calendar_dates() {
        assert_eq!(super::humantime_ms(0), "1970-01-01 00:00:00");
        assert_eq!(super::humantime_ms(1_796_300_000_000), "2026-12-03 12:13:20");
    }
}
