//! Issue 26, items 5 and 6: every guest log line of `lovia serve` names its
//! tenant and the plugin's digest, and one tenant's plugins cannot fill the
//! service's log: a per-tenant budget with a summary of what it dropped,
//! and a level below which a tenant's guest lines are dropped. The real
//! binary, its real stderr, the `chatty` fixture (whose lines claim to come
//! from the plugin `orders`).

use crate::serve::request;
use lovia_tests::{fixtures, load};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// `lovia serve` of `config` with `LOVIA_LOG=info`, its stderr in `log`.
async fn serve_logging_to(config: &Path, store: &Path, log: &Path) -> (tokio::process::Child, SocketAddr) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_lovia"))
        .args(["--no-cache", "serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(config)
        .arg("--store")
        .arg(store)
        .env("LOVIA_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(log).expect("log file"))
        .kill_on_drop(true)
        .spawn()
        .expect("spawn lovia serve");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = lines.next_line().await.expect("read").expect("a first line");
    let addr = first
        .strip_prefix("lovia serve listening on http://")
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("unexpected first line: {first}"));
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, addr.parse().expect("address"))
}

/// Asks `tenant`'s chatty plugin for `lines` log lines of `bytes` at `level`, tagged `tag`.
async fn chatter(addr: SocketAddr, key: &str, lines: u32, bytes: u32, level: &str, tag: &str) {
    let body = format!(r#"{{"lines": {lines}, "bytes": {bytes}, "level": "{level}", "tag": "{tag}"}}"#);
    let (status, answer) = request(addr, "POST", "/api/tools/chatter/call", Some(key), &body).await;
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains(&format!("wrote {lines} lines")), "{answer}");
}

/// Whether a log line has `field` equal to `value` (quoted or not, as the
/// log format writes it).
fn has_field(line: &str, field: &str, value: &str) -> bool {
    line.contains(&format!("{field}=\"{value}\"")) || line.contains(&format!("{field}={value} "))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_log_lines_name_the_tenant_and_are_bounded_per_tenant() {
    let digest = load(fixtures::CHATTY).await.digest()[..12].to_owned();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("serve.toml");
    // acme: 20,000 bytes a minute, warnings and up; globex: the defaults.
    let tenant = |name: &str, extra: &str| {
        format!(
            "[[tenants]]\nname = \"{name}\"\napi_keys = [\"{}\"]\n{extra}[[tenants.plugins]]\npath = {:?}\n",
            lovia_serve::hash_key(&format!("{name}-key")),
            fixtures::CHATTY
        )
    };
    std::fs::write(
        &config,
        tenant("acme", "guest_log_bytes_per_minute = 20000\nguest_log_level = \"warn\"\n") + &tenant("globex", ""),
    )
    .expect("config");
    let log = dir.path().join("serve.log");
    let (mut server, addr) = serve_logging_to(&config, &dir.path().join("sessions.db"), &log).await;

    // Item 6: globex's plugin writes an ERROR line claiming to be `orders`;
    // the line says whose it is.
    chatter(addr, "globex-key", 1, 60, "error", "globex-forged").await;
    // Item 5: acme floods (500 lines of 1,000 bytes, 0.5 MB), below its
    // level first (dropped, not counted), then at its level.
    chatter(addr, "acme-key", 3, 100, "info", "acme-info").await;
    chatter(addr, "acme-key", 500, 1000, "warn", "acme-flood").await;
    // About 1,170 bytes (a line, its fields' values and 128) refill in 3.5 s at 20,000 a minute.
    tokio::time::sleep(Duration::from_secs(4)).await;
    chatter(addr, "acme-key", 1, 100, "warn", "acme-after").await;
    // globex's budget is its own.
    chatter(addr, "globex-key", 1, 60, "info", "globex-after").await;
    server.kill().await.expect("kill");
    let text = std::fs::read_to_string(&log).expect("read the log");
    // A log written to a file has no colour codes (they are for terminals).
    assert!(!text.contains('\x1b'), "colour codes in a log file:\n{}", &text[..text.len().min(500)]);
    let lines: Vec<&str> = text.lines().collect();
    let tagged =
        |tag: &str| lines.iter().copied().filter(|l| l.contains(&format!("{tag} plugin orders"))).collect::<Vec<_>>();

    let forged = tagged("globex-forged");
    assert_eq!(forged.len(), 1, "{text}");
    assert!(forged[0].contains("ERROR"), "{}", forged[0]);
    assert!(has_field(forged[0], "tenant", "globex"), "{}", forged[0]);
    assert!(has_field(forged[0], "digest", &digest), "{}", forged[0]);

    assert!(tagged("acme-info").is_empty(), "below acme's level:\n{text}");
    let flood = tagged("acme-flood");
    let flood_bytes: usize = flood.iter().map(|l| l.len() + 1).sum();
    println!(
        "guest logs: acme's 500 lines of 1000 bytes wrote {} lines, {flood_bytes} bytes of log (budget 20000 bytes a minute)",
        flood.len()
    );
    // 20,000 / 1,170 = 17 lines, and a few more refilled while the call ran.
    assert!((14..=20).contains(&flood.len()), "{} lines:\n{text}", flood.len());
    assert!(flood.iter().all(|l| has_field(l, "tenant", "acme") && has_field(l, "digest", &digest)));
    let spent: Vec<&&str> = lines.iter().filter(|l| l.contains("guest log budget spent")).collect();
    assert_eq!(spent.len(), 1, "{text}");
    assert!(has_field(spent[0], "tenant", "acme"), "{}", spent[0]);
    let summary: Vec<&&str> = lines.iter().filter(|l| l.contains("guest log lines (")).collect();
    assert_eq!(summary.len(), 1, "{text}");
    let suppressed = 500 - flood.len();
    let charged: usize = summary[0]
        .split(&format!("suppressed {suppressed} guest log lines ("))
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the summary names {suppressed} lines and their bytes: {}", summary[0]));
    // Each line is charged at least what it takes in the log as written.
    let longest = flood.iter().map(|l| l.len() + 1).max().unwrap_or(0);
    assert!(charged / suppressed >= longest, "{charged} bytes for {suppressed} lines of up to {longest} bytes");
    assert!(has_field(summary[0], "tenant", "acme"), "{}", summary[0]);
    assert_eq!(tagged("acme-after").len(), 1, "{text}");
    assert_eq!(tagged("globex-after").len(), 1, "{text}");
}
