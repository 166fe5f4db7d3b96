//! The parts of the suite beyond cargo (tests/src/parts.rs): a test whose
//! part is missing fails and says how to provide it, a part opted out by
//! name in `LOVIA_SKIP` is reported as such, and `scripts/test` refuses a
//! name that is no part before it provides or runs anything.

use lovia_tests::parts::{Part, parse_skip};
use std::process::{Command, Output};

#[test]
fn skip_lists_name_parts_and_reject_unknown_names() {
    assert_eq!(parse_skip(""), Ok(vec![]));
    assert_eq!(parse_skip(" postgres , browser,"), Ok(vec![Part::Postgres, Part::Browser]));
    assert_eq!(parse_skip("mcp-client,python"), Ok(vec![Part::McpClient, Part::Python]));
    let err = parse_skip("postgres,pg").expect_err("pg is no part");
    assert_eq!(
        err,
        r#"unknown part "pg" in LOVIA_SKIP; the parts are: postgres, mcp-client, python, browser, mcp-fs, registry, ts, telemetry, faults"#
    );
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// One PostgreSQL test of this binary, alone in a child process with no
/// server and `skip` as `LOVIA_SKIP`.
fn postgres_test_with(skip: &str) -> Output {
    Command::new(std::env::current_exe().expect("exe"))
        .args(["--exact", "runner::store::a_postgres_checkpoint_appends_and_loads_back", "--nocapture"])
        .args(["--test-threads=1"])
        .env_remove("LOVIA_TEST_POSTGRES_URL")
        .env("LOVIA_SKIP", skip)
        .output()
        .expect("run the test binary")
}

#[test]
fn a_test_without_its_part_fails_unless_the_part_is_opted_out() {
    let out = postgres_test_with("");
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(all.contains("1 failed"), "{all}");
    assert!(
        all.contains("this test needs a PostgreSQL server (LOVIA_TEST_POSTGRES_URL), which is missing: LOVIA_TEST_POSTGRES_URL is not set"),
        "{all}"
    );
    assert!(all.contains("to provide it: run the tests with scripts/test"), "{all}");
    assert!(all.contains("or opt out of the part by name: LOVIA_SKIP=postgres"), "{all}");

    // Opting out of another part changes nothing.
    let out = postgres_test_with("browser,python");
    assert!(!out.status.success(), "{}", text(&out));

    let out = postgres_test_with(" python, postgres ");
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("opted out: LOVIA_SKIP=postgres"), "{all}");
    assert!(all.contains("1 passed"), "{all}");
    assert!(!all.contains("skipped"), "{all}");

    let out = postgres_test_with("postgres,pg");
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(
        all.contains(
            r#"unknown part "pg" in LOVIA_SKIP; the parts are: postgres, mcp-client, python, browser, mcp-fs, registry, ts, telemetry, faults"#
        ),
        "{all}"
    );
}

#[test]
fn scripts_test_refuses_an_unknown_part_before_doing_anything() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("bash")
        .arg(root.join("scripts/test"))
        .arg("--no-run")
        .env("LOVIA_SKIP", "postgres,bogus")
        .output()
        .expect("run scripts/test");
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "scripts/test: unknown part 'bogus' in LOVIA_SKIP; the parts are: postgres, mcp-client, python, browser, mcp-fs, registry, ts, telemetry, faults\n"
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "", "it provided nothing and ran nothing");
}
