//! Knowing what runs (docs/supply-chain.md): a pinned digest, signatures
//! made with `lovia keygen` and `lovia sign` and checked by `lovia verify`,
//! by every command that loads plugins under `--signatures require`, and by
//! `lovia serve` for its configured plugins and a tenant's uploads.

use lovia_host::LoadError;
use lovia_host::plugin::config::PluginConfig;
use lovia_tests::{fixtures, host};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn lovia(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lovia")).arg("--no-cache").args(args).output().expect("run lovia")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn digest_of(path: &str) -> String {
    lovia_host::plugin::sha256_hex(&std::fs::read(path).expect("fixture"))
}

#[tokio::test]
async fn a_pinned_digest_loads_that_component_and_refuses_any_other() {
    let right = digest_of(fixtures::DOCS);
    let config = PluginConfig::default().with_digest(Some(format!("sha256:{}", right.to_uppercase())));
    let plugin = host().load_file_with(fixtures::DOCS, config.clone()).await.expect("the pinned component loads");
    assert_eq!(plugin.digest(), right);

    let err = host().load_file_with(fixtures::ORDERS, config).await.expect_err("refused");
    assert!(matches!(err, LoadError::DigestMismatch { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains(&format!("has digest sha256:{}", digest_of(fixtures::ORDERS)))
            && message.contains(&format!("its config pins sha256:{}", right.to_uppercase())),
        "{message}"
    );
    let bad = PluginConfig::default().with_digest(Some("md5:abc".into()));
    let err = host().load_file_with(fixtures::DOCS, bad).await.expect_err("refused");
    assert_eq!(
        err.to_string(),
        format!("{}: digest \"md5:abc\" must be sha256: followed by 64 hex digits", fixtures::DOCS)
    );
}

/// A directory with a copy of the DOCS fixture, packed, and a key pair.
struct Signing {
    dir: tempfile::TempDir,
}

impl Signing {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let o = lovia(&["pack", fixtures::DOCS, "-o", &dir.path().join("docs.wasm").display().to_string()]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        for name in ["acme", "mallory"] {
            let o = lovia(&["keygen", &dir.path().join(name).display().to_string()]);
            assert!(o.status.success(), "{}", text(&o.stderr));
        }
        Self { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    fn copy(&self, name: &str) -> String {
        let to = self.path(name);
        std::fs::copy(self.path("docs.wasm"), &to).expect("copy");
        to
    }
}

fn call_with(trust: &[&str], plugin: &str) -> Output {
    let mut args = vec!["call"];
    args.extend_from_slice(trust);
    args.extend([plugin, "search_docs", r#"{"query": "timeouts"}"#]);
    lovia(&args)
}

#[test]
fn signed_plugins_load_under_require_and_nothing_else_does() {
    let s = Signing::new();
    let (acme_key, acme_pub, mallory_key) = (s.path("acme.key"), s.path("acme.pub"), s.path("mallory.key"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&acme_key).expect("key").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the secret key is private");
    }
    let again = lovia(&["keygen", &s.path("acme")]);
    assert_eq!(again.status.code(), Some(2), "keygen never overwrites a key");

    let signed = s.copy("signed.wasm");
    assert!(lovia(&["sign", "--key", &acme_key, &signed]).status.success());
    let by_mallory = s.copy("mallory.wasm");
    assert!(lovia(&["sign", "--key", &mallory_key, &by_mallory]).status.success());
    let detached = s.copy("detached.wasm");
    assert!(lovia(&["sign", "--key", &acme_key, "--detached", &detached]).status.success());
    assert_eq!(std::fs::read(&detached).ok(), std::fs::read(s.path("docs.wasm")).ok(), "left as it was");
    let unsigned = s.path("docs.wasm");
    // Changed after signing: one byte of the last section.
    let tampered = s.path("tampered.wasm");
    let mut bytes = std::fs::read(&signed).expect("signed");
    if let Some(last) = bytes.last_mut() {
        *last ^= 0x20;
    }
    std::fs::write(&tampered, bytes).expect("write");

    // lovia verify: 0 with the signer, 1 with the reason.
    let o = lovia(&["verify", "--key", &acme_pub, &signed]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("signed by acme ("), "{}", text(&o.stdout));
    assert!(text(&o.stdout).ends_with("(embedded)\n"));
    assert!(text(&lovia(&["verify", "--key", &acme_pub, &detached]).stdout).ends_with("(detached)\n"));
    for (plugin, reason) in [
        (&unsigned, "it is not signed"),
        (&by_mallory, "no trusted key signed it"),
        (&tampered, "no trusted key signed it"),
    ] {
        let o = lovia(&["verify", "--key", &acme_pub, plugin]);
        assert_eq!(o.status.code(), Some(1), "{plugin}");
        assert!(text(&o.stdout).contains(&format!("not verified: {reason}")), "{}", text(&o.stdout));
    }

    // Every command that loads plugins: `lovia call` here.
    let require = ["--signatures", "require", "--trusted-key", acme_pub.as_str()];
    for plugin in [&signed, &detached] {
        let o = call_with(&require, plugin);
        assert_eq!(o.status.code(), Some(0), "{plugin}: {}", text(&o.stderr));
        assert_eq!(text(&o.stdout), "[\"Timeouts\"]\n");
    }
    for (plugin, reason) in [
        (&unsigned, "it is not signed"),
        (&by_mallory, "no trusted key signed it"),
        (&tampered, "no trusted key signed it"),
    ] {
        let o = call_with(&require, plugin);
        assert_eq!(o.status.code(), Some(2), "{plugin}");
        let err = text(&o.stderr);
        assert!(err.starts_with(&format!("error: {plugin} is refused: {reason}")), "{err}");
        assert!(err.contains("\n  hint: "), "{err}");
    }
    // warn loads it; off (the default) does not look.
    let warn = ["--signatures", "warn", "--trusted-key", acme_pub.as_str()];
    assert_eq!(call_with(&warn, &unsigned).status.code(), Some(0));
    assert_eq!(call_with(&[], &unsigned).status.code(), Some(0));
    let o = call_with(&["--signatures", "require"], &signed);
    assert!(text(&o.stderr).contains("signatures = require needs at least one trusted key"), "{}", text(&o.stderr));
    let o = call_with(&["--signatures", "always"], &signed);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("expected require, warn or off"), "{}", text(&o.stderr));

    // Pack, then sign: packing a signed plugin is refused.
    let o = lovia(&["pack", &signed]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("is signed; packing it would break the signature"), "{}", text(&o.stderr));
    // inspect says what it is.
    let shown = text(&lovia(&["inspect", &signed]).stdout);
    let digest = lovia_host::plugin::sha256_hex(&std::fs::read(&signed).expect("signed"));
    assert!(shown.contains(&format!("digest: sha256:{digest}\nsigned: embedded")), "{shown}");
}

/// `lovia serve --signatures require --trusted-key K`: the global flags are
/// the config's `[signatures]` spelled on the command line, so an unsigned
/// configured plugin stops the start exactly as `mode = "require"` does (the
/// flags were once in serve's help and silently ignored).
#[test]
fn serve_obeys_the_signature_flags() {
    let s = Signing::new();
    let signed = s.copy("signed.wasm");
    assert!(lovia(&["sign", "--key", &s.path("acme.key"), &signed]).status.success());
    let config = |plugin: &str, name: &str| {
        let path = s.path(name);
        let toml = format!(
            "listen = \"127.0.0.1:0\"\nstore = \"{}\"\n[[tenants]]\nname = \"acme\"\napi_keys = [\"{}\"]\n[[tenants.plugins]]\npath = \"{plugin}\"\n",
            s.path(&format!("{name}.db")),
            lovia_serve::hash_key("acme-key"),
        );
        std::fs::write(&path, toml).expect("config");
        path
    };
    let unsigned = config(&s.path("docs.wasm"), "unsigned.toml");
    let acme_pub = s.path("acme.pub");
    let require = ["--signatures", "require", "--trusted-key", acme_pub.as_str()];
    let o = lovia(&[&require[..], &["serve", "--config", &unsigned]].concat());
    assert_eq!(o.status.code(), Some(2), "refused: {}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains("docs.wasm is refused: it is not signed (signatures = require)"), "{err}");
    // Without a key, require is refused as the config's would be.
    let o = lovia(&["serve", "--config", &unsigned, "--signatures", "require"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("needs trusted_keys"), "{}", text(&o.stderr));
    // A signed plugin starts: the service listens (and is stopped here).
    let signed_config = config(&signed, "signed.toml");
    let mut child = Command::new(env!("CARGO_BIN_EXE_lovia"))
        .args(["--no-cache", "serve", "--config", &signed_config])
        .args(require)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("lovia serve");
    let mut first = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().expect("stdout")), &mut first)
        .expect("read");
    let _ = child.kill();
    let _ = child.wait();
    assert!(first.starts_with("lovia serve listening on http://"), "{first}");
}

/// `lovia serve`: `[signatures] mode = "require"` stops the start on an
/// unsigned configured plugin; a tenant's `upload_signers` and
/// `upload_digests` refuse uploads before they are compiled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_what_its_policies_do_not_allow() {
    let s = Signing::new();
    let signed = s.copy("signed.wasm");
    assert!(lovia(&["sign", "--key", &s.path("acme.key"), &signed]).status.success());
    let mallory = s.copy("mallory.wasm");
    assert!(lovia(&["sign", "--key", &s.path("mallory.key"), &mallory]).status.success());

    let mut config = lovia_serve::ServeConfig::new(vec![crate::serve::tenant("acme", "acme-key", &[])]);
    config.tenants[0].plugins = vec![crate::serve::plugin(&s.path("docs.wasm"))];
    config.signatures.mode = lovia_supply::SignatureMode::Require;
    config.signatures.trusted_keys = vec![PathBuf::from(s.path("acme.pub"))];
    config.store = Some(s.dir.path().join("a.db").into());
    config.resolve(Path::new(".")).expect("valid");
    let err = lovia_serve::Service::new(&host(), &config).await.err().expect("refused").to_string();
    assert!(err.contains("docs.wasm is refused: it is not signed (signatures = require)"), "{err}");
    config.tenants[0].plugins = vec![crate::serve::plugin(&signed)];
    assert!(lovia_serve::Service::new(&host(), &config).await.is_ok(), "a signed plugin starts");
    // Both starts are in the trail that `lovia audit` reads.
    let o = lovia(&["audit", "--store", &s.path("a.db"), "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let entries: Vec<serde_json::Value> =
        text(&o.stdout).lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert_eq!((entries[0]["action"].as_str(), entries[0]["tenant"].as_str()), (Some("load"), Some("acme")));
    assert!(entries[0]["outcome"].as_str().unwrap_or_default().starts_with("refused: tenant acme: "), "{entries:?}");
    assert!(entries[0]["outcome"].as_str().unwrap_or_default().contains("it is not signed"), "{entries:?}");
    assert_eq!(entries[1]["outcome"], "ok");
    assert!(entries[1]["signer"].as_str().unwrap_or_default().starts_with("acme ("), "{entries:?}");
    assert_eq!(entries[1]["digest"].as_str(), Some(digest_of(&signed).as_str()));

    // Uploads: signers, then digests.
    let mut acme = crate::serve::tenant("acme", "acme-key", &[]);
    acme.upload_signers = vec![PathBuf::from(s.path("acme.pub"))];
    let mut globex = crate::serve::tenant("globex", "globex-key", &[]);
    globex.upload_digests = vec![format!("sha256:{}", digest_of(fixtures::ORDERS))];
    let mut config = lovia_serve::ServeConfig::new(vec![acme, globex]);
    config.metrics_token = Some(lovia_serve::hash_key("operator-token"));
    config.store = Some(s.dir.path().join("b.db").into());
    let addr = crate::serve::start_with(config).await;
    let upload = |key: &'static str, path: String| async move {
        let body = std::fs::read(path).expect("component");
        crate::threat::serve::post_bytes(addr, "/api/plugins", key, &body).await
    };
    let error = |body: &serde_json::Value| body["error"].as_str().unwrap_or_default().to_owned();
    let (status, body) = upload("acme-key", s.path("docs.wasm")).await;
    assert_eq!(
        (status, error(&body).as_str()),
        (403, "upload refused: it is not signed (this tenant's uploads must be signed by one of its upload_signers)")
    );
    let (status, body) = upload("acme-key", mallory.clone()).await;
    assert_eq!(status, 403, "{body}");
    assert!(error(&body).starts_with("upload refused: no trusted key signed it"), "{body}");
    let (status, body) = upload("acme-key", signed.clone()).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = upload("globex-key", fixtures::DOCS.to_owned()).await;
    assert_eq!(status, 403, "{body}");
    let digests = format!("sha256:{} is not one of this tenant's upload_digests", digest_of(fixtures::DOCS));
    assert!(error(&body).contains(&digests), "{body}");
    let (status, body) = upload("globex-key", fixtures::ORDERS.to_owned()).await;
    assert_eq!(status, 201, "{body}");

    // The audit trail: a tenant reads its own, the operator everyone's.
    let (status, body) = crate::serve::request(addr, "GET", "/api/audit", Some("acme-key"), "").await;
    assert_eq!(status, 200, "{body}");
    let acme: serde_json::Value = serde_json::from_str(&body).expect("json");
    let outcomes: Vec<&str> = acme["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["outcome"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(outcomes.len(), 3, "{acme}");
    assert_eq!(outcomes[0], "ok", "newest first");
    assert!(outcomes[1].starts_with("refused: upload refused: no trusted key signed it"), "{outcomes:?}");
    assert!(outcomes[2].starts_with("refused: upload refused: it is not signed"), "{outcomes:?}");
    let newest = &acme["entries"][0];
    assert_eq!((newest["action"].as_str(), newest["source"].as_str()), (Some("upload"), Some("POST /api/plugins")));
    assert!(newest["signer"].as_str().unwrap_or_default().starts_with("acme ("), "{newest}");
    assert!(acme["entries"].as_array().expect("entries").iter().all(|e| e["tenant"] == "acme"), "only its own");
    let (status, body) = crate::serve::request(addr, "GET", "/audit", Some("operator-token"), "").await;
    assert_eq!(status, 200, "{body}");
    let all: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(all["entries"].as_array().map(Vec::len), Some(5), "{all}");
    let (status, _) = crate::serve::request(addr, "GET", "/api/audit?limit=x", Some("acme-key"), "").await;
    assert_eq!(status, 400);
}

/// A registry on loopback (Debian's docker-registry), storing in a
/// temporary directory, stopped when dropped.
struct Registry {
    child: std::process::Child,
    port: u16,
    root: tempfile::TempDir,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Registry {
    fn start() -> Option<Registry> {
        let bin = lovia_tests::parts::registry_bin()?;
        let root = tempfile::tempdir().expect("tempdir");
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
        let config = root.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
                root.path().join("data").display()
            ),
        )
        .expect("config");
        let child = Command::new(bin)
            .arg("serve")
            .arg(&config)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start the registry");
        let registry = Registry { child, port, root };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(std::time::Instant::now() < deadline, "the registry did not listen on {port}");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Some(registry)
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The blob files the registry stores (`…/blobs/sha256/ab/<hex>/data`).
    fn blob(&self, hex: &str) -> PathBuf {
        self.root.path().join("data/docker/registry/v2/blobs/sha256").join(&hex[..2]).join(hex).join("data")
    }
}

#[test]
fn oci_plugins_are_pushed_pulled_by_tag_and_digest_verified_and_cached() {
    let Some(mut registry) = Registry::start() else { return };
    let s = Signing::new();
    let signed = s.copy("signed.wasm");
    assert!(lovia(&["sign", "--key", &s.path("acme.key"), &signed]).status.success());
    let mallory = s.copy("mallory.wasm");
    assert!(lovia(&["sign", "--key", &s.path("mallory.key"), &mallory]).status.success());
    let cache = s.path("cache");
    let reg = registry.host();
    let with = |args: &[&str]| {
        let mut all = vec!["--cache-dir", cache.as_str(), "--insecure-registry", reg.as_str()];
        all.extend_from_slice(args);
        lovia(&all)
    };
    let docs = format!("oci://{reg}/tools/docs:1.0");
    let evil = format!("oci://{reg}/tools/evil:1.0");
    let o = with(&["push", &docs, &signed]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let printed = text(&o.stdout);
    let pinned = printed.split("pin it as ").nth(1).map(str::trim).unwrap_or_default().to_owned();
    assert!(pinned.starts_with(&format!("oci://{reg}/tools/docs@sha256:")), "{printed}");
    assert!(with(&["push", &evil, &mallory]).status.success());
    let o = with(&["push", &docs, &s.path("docs.wasm")]);
    assert_eq!(o.status.code(), Some(0), "an unsigned push is allowed, with a warning");
    assert!(text(&o.stderr).contains("is not signed"), "{}", text(&o.stderr));
    // Back to the signed one under the tag.
    assert!(with(&["push", &docs, &signed]).status.success());

    let require = ["--signatures", "require", "--trusted-key", &s.path("acme.pub")].map(str::to_owned);
    let call = |plugin: &str| {
        let mut args: Vec<&str> = require.iter().map(String::as_str).collect();
        args.extend(["call", plugin, "search_docs", r#"{"query": "timeouts"}"#]);
        with(&args)
    };
    // By tag and by digest.
    for plugin in [&docs, &pinned] {
        let o = call(plugin);
        assert_eq!(o.status.code(), Some(0), "{plugin}: {}", text(&o.stderr));
        assert_eq!(text(&o.stdout), "[\"Timeouts\"]\n");
    }
    // Signed by a key nobody trusts: refused, naming why.
    let o = call(&evil);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains(&format!("{evil} is refused: no trusted key signed it")), "{}", text(&o.stderr));
    // A digest that is not the manifest's.
    let wrong = format!("oci://{reg}/tools/docs@sha256:{}", "0".repeat(64));
    let o = call(&wrong);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains(&format!("cannot pull {wrong}")), "{}", text(&o.stderr));

    // A layer changed in the registry's storage: refused, never run.
    let layer = lovia_host::plugin::sha256_hex(&std::fs::read(&mallory).expect("mallory"));
    let blob = registry.blob(&layer);
    let mut bytes = std::fs::read(&blob).expect("the stored layer");
    if let Some(last) = bytes.last_mut() {
        *last ^= 1;
    }
    std::fs::write(&blob, bytes).expect("tamper");
    let o = with(&["call", &evil, "search_docs", r#"{"query": "x"}"#]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(err.contains(&format!("cannot pull {evil}")) && err.to_lowercase().contains("digest"), "{err}");

    // lovia serve: a configured plugin by reference, pulled at start into
    // its [oci] cache and in the audit trail.
    let serve_config = || {
        let mut acme = crate::serve::tenant("acme", "acme-key", &[]);
        acme.plugins = vec![crate::serve::plugin(&pinned)];
        let mut config = lovia_serve::ServeConfig::new(vec![acme]);
        config.oci.cache_dir = Some(PathBuf::from(s.path("serve-oci")));
        config.oci.insecure_registries = vec![reg.clone()];
        config.store = Some(s.dir.path().join("serve.db").into());
        config.resolve(Path::new(".")).expect("valid");
        config
    };
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let listed = || {
        runtime.block_on(async {
            let addr = crate::serve::start_with(serve_config()).await;
            crate::serve::request(addr, "GET", "/api/tools", Some("acme-key"), "").await.1
        })
    };
    let tools = listed();
    assert!(tools.contains("search_docs"), "{tools}");

    // The registry is down: what was pulled still loads, by tag and digest.
    registry.child.kill().expect("stop the registry");
    let _ = registry.child.wait();
    let tools = listed();
    assert!(tools.contains("search_docs"), "lovia serve starts from its cache: {tools}");
    let o = lovia(&["audit", "--store", &s.path("serve.db"), "--json"]);
    let pulls: Vec<serde_json::Value> =
        text(&o.stdout).lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    assert_eq!(pulls.len(), 2, "{pulls:?}");
    assert!(
        pulls.iter().all(|e| e["action"] == "pull" && e["outcome"] == "ok" && e["source"] == pinned.as_str()),
        "{pulls:?}"
    );
    for plugin in [&docs, &pinned] {
        let o = call(plugin);
        assert_eq!(o.status.code(), Some(0), "{plugin}: {}", text(&o.stderr));
        assert_eq!(text(&o.stdout), "[\"Timeouts\"]\n");
    }
    // Said once, by tag; never by digest, which needs no registry to ask.
    let said = |plugin: &str| text(&call(plugin).stderr).matches("the registry cannot be reached").count();
    assert_eq!(said(&docs), 1, "{}", text(&call(&docs).stderr));
    assert_eq!(said(&pinned), 0, "{}", text(&call(&pinned).stderr));
    // Never pulled: no cache to fall back on.
    let o = call(&format!("oci://{reg}/tools/never:1.0"));
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("cannot pull"), "{}", text(&o.stderr));
}
