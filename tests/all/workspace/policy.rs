//! The policy through the executor (spec §1.5, §1.9): asks go through the
//! ordinary approval channel, denials fail with the reason and are never
//! asked, and the bundle follows the mode.

use super::{asked, builder, call_deciding, call_one, dirs, executor, out};
use lovia_workspace::{CommandRule, ConfigError, Decision, Mode, Op, PathRule, Workspace, WorkspacePolicy};
use serde_json::json;
use std::fs;

const OUTSIDE_HINT: &str = "Access beyond the workspace root is controlled by the workspace's policy, which only the user can change: a less restrictive mode (--mode trusted, or mode = \"trusted\" in [tenants.workspace]) or, in Rust, Workspace::builder(..).readable(..) / .writable(..). Otherwise work within the workspace.";

#[tokio::test]
async fn coding_mode_asks_for_outside_reads_and_denies_outside_writes() {
    let d = dirs();
    fs::write(d.root.join("inside.txt"), "in").expect("write");
    fs::write(d.outside.join("secret.txt"), "s").expect("write");
    let exec = executor(&builder(&d.root, Mode::Coding).build().expect("workspace"));

    let inside = call_one(&exec, "read_file", json!({"path": "inside.txt"})).await;
    assert!(!asked(&inside), "a read inside the root is not asked");
    assert_eq!(inside.output("c"), "inside.txt (lines 1-1 of 1)\nin");

    let hosts = call_deciding(&exec, "read_file", json!({"path": "/etc/hosts"}), false).await;
    assert!(asked(&hosts), "a read outside the root asks");
    assert_eq!(hosts.output("c"), "Tool read_file was not approved.");
    let approved = call_one(&exec, "read_file", json!({"path": d.outside.join("secret.txt")})).await;
    assert!(asked(&approved));
    assert_eq!(approved.output("c"), format!("{} (lines 1-1 of 1)\ns", d.outside.join("secret.txt").display()));

    let evil = d.outside.join("evil.txt");
    let write = call_one(&exec, "write_file", json!({"path": evil, "content": "x"})).await;
    assert!(!asked(&write), "a denied write is not asked");
    assert_eq!(
        write.output("c"),
        format!(
            "Tool error: Writing outside the workspace is not permitted: {}\n  hint: {OUTSIDE_HINT}",
            evil.display()
        )
    );
    assert!(!evil.exists());
}

#[tokio::test]
async fn denied_paths_and_rules_fail_with_the_reason() {
    let d = dirs();
    fs::write(d.root.join(".env"), "KEY=1").expect("write");
    fs::create_dir(d.root.join("vendor")).expect("mkdir");
    fs::write(d.root.join("vendor/lib.rs"), "x").expect("write");
    let workspace = builder(&d.root, Mode::Coding)
        .denied_path(".env")
        .path_rule(PathRule::new("vendor/", [Op::Write], Decision::Deny))
        .build()
        .expect("workspace");
    let exec = executor(&workspace);
    assert_eq!(
        out(&exec, "read_file", json!({"path": ".env"})).await,
        "Tool error: Path '.env' is denied by workspace policy."
    );
    assert_eq!(
        out(&exec, "write_file", json!({"path": "vendor/lib.rs", "content": "y"})).await,
        "Tool error: Path 'vendor/lib.rs' is denied by workspace policy."
    );
    assert_eq!(fs::read_to_string(d.root.join("vendor/lib.rs")).expect("read"), "x");
    assert_eq!(out(&exec, "grep_files", json!({"pattern": "x", "path": "vendor"})).await, "vendor/lib.rs:1: x");
}

#[tokio::test]
async fn readonly_mode_leaves_out_the_writers_and_the_shell() {
    let d = dirs();
    let names = |w: &Workspace| w.tools().iter().map(|t| t.name().to_owned()).collect::<Vec<_>>();
    let readonly = builder(&d.root, Mode::Readonly).build().expect("workspace");
    assert_eq!(names(&readonly), ["read_file", "view_image", "list_files", "grep_files"]);
    let exec = executor(&readonly);
    assert_eq!(
        out(&exec, "write_file", json!({"path": "a", "content": "b"})).await,
        "Tool 'write_file' is not available."
    );
    let writable = builder(&d.root, Mode::Readonly).writable("out/").build().expect("workspace");
    assert!(names(&writable).contains(&"write_file".to_owned()), "a writable rule brings the writers");
    let coding = builder(&d.root, Mode::Coding).vision(false).build().expect("workspace");
    assert_eq!(
        names(&coding),
        [
            "read_file",
            "list_files",
            "grep_files",
            "write_file",
            "edit_file",
            "shell",
            "read_process_output",
            "kill_process"
        ]
    );
    for tool in coding.tools() {
        let mutator = ["write_file", "edit_file", "shell", "kill_process"].contains(&tool.name());
        assert_eq!(tool.is_barrier(), mutator, "{}", tool.name());
        assert_eq!(tool.spec().parameters["additionalProperties"], json!(false), "{}", tool.name());
    }
    let readonly_exec = executor(&readonly);
    assert_eq!(
        out(&readonly_exec, "read_file", json!({"path": "/etc/hosts"})).await,
        format!("Tool error: Reading outside the workspace is not permitted: /etc/hosts\n  hint: {OUTSIDE_HINT}")
    );
    let inside_write = builder(&d.root, Mode::Readonly).writable("/nonexistent-elsewhere").build().expect("workspace");
    assert_eq!(
        out(&executor(&inside_write), "write_file", json!({"path": "x.txt", "content": "b"})).await,
        "Tool error: Workspace policy denies writing to 'x.txt'.\n  hint: This workspace is read-only. The user can allow writes with --mode coding (or mode = \"coding\" in [tenants.workspace]), or, in Rust, a writable rule."
    );
}

#[tokio::test]
async fn the_schemas_are_exact() {
    let d = dirs();
    let workspace = builder(&d.root, Mode::Coding).build().expect("workspace");
    let tools = workspace.tools();
    let schema = |name: &str| tools.iter().find(|t| t.name() == name).expect("tool").spec().parameters.clone();
    assert_eq!(
        schema("read_file")["properties"]["start"]["anyOf"],
        json!([{"type": "integer", "minimum": 1}, {"type": "null"}])
    );
    assert_eq!(schema("read_file")["required"], json!(["path"]));
    assert_eq!(
        schema("list_files")["properties"]["max_results"]["anyOf"],
        json!([{"type": "integer", "minimum": 1, "maximum": 1000}, {"type": "null"}])
    );
    assert_eq!(schema("grep_files")["required"], json!(["pattern"]));
    assert_eq!(
        schema("shell")["properties"]["timeout"]["anyOf"],
        json!([{"type": "number", "minimum": 1}, {"type": "null"}])
    );
    assert_eq!(schema("edit_file")["properties"]["replace_all"]["default"], json!(false));
    assert_eq!(schema("write_file")["properties"]["create_only"]["default"], json!(false));
    assert_eq!(schema("kill_process")["required"], json!(["process_id"]));
}

#[test]
fn a_policy_and_shorthands_together_are_refused() {
    let d = dirs();
    let both = Workspace::builder(&d.root)
        .policy(WorkspacePolicy::default())
        .command_rule(CommandRule::new("git", Decision::Allow))
        .build();
    let Err(error) = both else { panic!("both were accepted") };
    assert!(matches!(error, ConfigError::PolicyAndShorthands));
    assert_eq!(
        error.to_string(),
        "Pass either .policy(..) or the rule shorthands (.readable, .writable, .denied_path, .path_rule, .command_rule), not both."
    );
}

#[test]
fn the_prompt_fragment_states_the_policy() {
    let d = dirs();
    let name = d.root.file_name().expect("name").to_string_lossy().into_owned();
    let workspace = builder(&d.root, Mode::Coding).denied_path(".env").build().expect("workspace");
    assert_eq!(
        workspace.prompt_fragment(),
        format!(
            "## Workspace\nYou work in a workspace named '{name}'. Its root directory is '.' — relative paths start there, and the file tools and the shell take paths relative to it.\n\
             You can read and write files inside the workspace. Reading outside it needs the user's approval; writing outside it is not permitted. These paths are always denied: .env.\n\
             Shell commands need the user's approval unless a rule allows them; background processes end with the session."
        )
    );
    let readonly = Workspace::builder(&d.root).mode(Mode::Readonly).build().expect("workspace");
    assert!(readonly.prompt_fragment().ends_with("There is no shell in this workspace."));
    // Confined by default, the shell is there as in the unconfined case.
    let confined = Workspace::builder(&d.root).denied_path(".env").build().expect("workspace");
    assert_eq!(confined.prompt_fragment(), workspace.prompt_fragment());
}

/// Round two of the confinement, item 6: in trusted mode a write outside
/// the root is asked about, and a command cannot slip one past the policy by
/// a `cd`, an expansion or a nested shell: what it cannot know, it asks
/// about. What it can follow (`cd` into the root) it does not ask about.
#[tokio::test]
async fn trusted_mode_asks_where_a_write_cannot_be_known() {
    let d = dirs();
    std::fs::create_dir(d.root.join("sub")).expect("sub");
    let exec = executor(&builder(&d.root, Mode::Trusted).build().expect("workspace"));
    let outside = d.outside.display();
    for command in [
        format!("echo x > {outside}/f"),
        format!("cd {outside} && echo x > f"),
        format!("pushd {outside}; echo x > f"),
        "cd && echo x > f".to_owned(),
        "cd - ; echo x > f".to_owned(),
        "echo x > $HOME/f".to_owned(),
        "echo x > \"$(dirname /etc/x)/f\"".to_owned(),
        "echo x > `echo /etc/f`".to_owned(),
        "eval 'echo x > /etc/f'".to_owned(),
        "sh -c 'echo x > /etc/f'".to_owned(),
        "bash -c 'echo x > /etc/f'".to_owned(),
        format!("(cd {outside}; echo x > f)"),
    ] {
        let turn = call_deciding(&exec, "shell", json!({"command": command}), false).await;
        assert!(asked(&turn), "not asked: {command}");
    }
    for command in ["echo x > f", "cd sub && echo x > f", "cd sub; ls > list.txt", "git status", "echo $HOME"] {
        let turn = call_deciding(&exec, "shell", json!({"command": command}), false).await;
        assert!(!asked(&turn), "asked: {command}");
    }
    assert!(!d.outside.join("f").exists());
}
