//! The fuzz smoke: the two cargo-fuzz targets' bodies (fuzz/fuzz_targets/bodies/) run in
//! the test build, over their seeds and then over mutations of them for a
//! bounded time, so that CI needs no nightly build of its own
//! (docs/contributing.md, "Fuzzing").
//!
//! It is a smoke test and not coverage-guided: a campaign is
//! `cargo +nightly fuzz run`, whose corpus (fuzz/corpus/<target>, when a
//! local campaign left one) is replayed here first. An input that fails is
//! written to target/fuzz-smoke/ and named in the failure, to be replayed with
//! `cargo +nightly fuzz run <target> <file>`.

#[path = "../../fuzz/fuzz_targets/bodies/arguments.rs"]
mod arguments;
#[path = "../../fuzz/fuzz_targets/bodies/component.rs"]
mod component;

use lovia_tests::fixtures;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long each target mutates after its seeds: `LOVIA_FUZZ_SECONDS`, 10 by default.
fn budget() -> Duration {
    let seconds = std::env::var("LOVIA_FUZZ_SECONDS")
        .ok()
        .map(|s| s.parse::<u64>().unwrap_or_else(|_| panic!("LOVIA_FUZZ_SECONDS is a number of seconds, not {s:?}")));
    Duration::from_secs(seconds.unwrap_or(10))
}

/// splitmix64: a seeded generator in eight lines, so that a failing run can be
/// repeated with its seed (`LOVIA_FUZZ_SEED`); no crate needed for that.
struct Rng(u64);

impl Rng {
    fn seeded() -> Rng {
        let seed = match std::env::var("LOVIA_FUZZ_SEED") {
            Ok(s) => s.parse::<u64>().unwrap_or_else(|_| panic!("LOVIA_FUZZ_SEED is a number, not {s:?}")),
            Err(_) => {
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
            }
        };
        println!("fuzz smoke: LOVIA_FUZZ_SEED={seed}");
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn byte(&mut self) -> u8 {
        self.next() as u8
    }

    fn bytes(&mut self, max: usize) -> Vec<u8> {
        (0..self.below(max + 1)).map(|_| self.byte()).collect()
    }
}

/// One of libFuzzer's simpler mutations, applied to a copy of `seed`:
/// flip, overwrite with an interesting byte, insert, erase, duplicate or
/// truncate. `alphabet` biases inserted bytes toward what the input is made of.
fn mutate(rng: &mut Rng, seed: &[u8], alphabet: &[u8]) -> Vec<u8> {
    let mut out = seed.to_vec();
    for _ in 0..=rng.below(4) {
        let at = if out.is_empty() { 0 } else { rng.below(out.len()) };
        match rng.below(7) {
            0 if !out.is_empty() => out[at] ^= 1 << rng.below(8),
            1 if !out.is_empty() => out[at] = [0, 0x7f, 0x80, 0xff, b'0', b'"'][rng.below(6)],
            2 => out.insert(at, alphabet[rng.below(alphabet.len())]),
            3 if !out.is_empty() => {
                let end = (at + 1 + rng.below(16)).min(out.len());
                out.drain(at..end);
            }
            4 if !out.is_empty() => {
                let end = (at + 1 + rng.below(64)).min(out.len());
                let copy = out[at..end].to_vec();
                let to = rng.below(out.len() + 1);
                out.splice(to..to, copy);
            }
            5 => out.truncate(at),
            _ => out.push(alphabet[rng.below(alphabet.len())]),
        }
    }
    out
}

/// Runs `body` on `input`; on a panic, writes the input where it can be
/// replayed and fails the test naming it.
fn run_one(target: &str, body: fn(&[u8]), input: &[u8]) {
    if catch_unwind(AssertUnwindSafe(|| body(input))).is_err() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/fuzz-smoke");
        std::fs::create_dir_all(&dir).expect("target/fuzz-smoke");
        let file = dir.join(format!("{target}-{:016x}", fnv1a(input)));
        std::fs::write(&file, input).expect("write the failing input");
        panic!(
            "the {target} fuzz body failed (the panic is above) on {} bytes, saved at {}; replay: cd fuzz && cargo +nightly fuzz run {target} {}",
            input.len(),
            file.display(),
            file.display()
        );
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// The files of a local campaign's corpus for `target`, if one is there.
fn campaign_corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    files
}

/// Seeds, the campaign corpus, then mutations until the budget is spent.
/// Returns how many inputs ran.
fn smoke(
    target: &str,
    body: fn(&[u8]),
    seeds: &[Vec<u8>],
    alphabet: &[u8],
    mut fresh: impl FnMut(&mut Rng) -> Vec<u8>,
) -> usize {
    let mut rng = Rng::seeded();
    let mut ran = 0;
    for seed in seeds {
        run_one(target, body, seed);
        ran += 1;
    }
    for file in campaign_corpus(target) {
        let input = std::fs::read(&file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        run_one(target, body, &input);
        ran += 1;
    }
    let deadline = Instant::now() + budget();
    while Instant::now() < deadline {
        let input = if seeds.is_empty() || rng.below(4) == 0 {
            fresh(&mut rng)
        } else {
            let seed = &seeds[rng.below(seeds.len())];
            mutate(&mut rng, seed, alphabet)
        };
        run_one(target, body, &input);
        ran += 1;
    }
    println!("fuzz smoke: {target}: {ran} inputs");
    ran
}

/// Argument texts for the real schemas' half (first byte below 0x80), random
/// schema programs (0x80..0xc0) and arbitrary JSON schemas (0xc0..).
#[test]
fn the_arguments_body_holds_over_seeds_and_mutations() {
    let texts = [
        r#"{}"#,
        r#"{"order_id": "A-17", "quantity": "3", "express": "true"}"#,
        r#"{"query": "refund policy", "limit": 5, "tags": ["a", "b"]}"#,
        r#"{"title": "x", "body": null, "pinned": false, "due": "2026-12-04"}"#,
        r#"{"items": [{"sku": "k", "qty": 2.5}], "note": "\u00e9\n"}"#,
        r#"[1, "2", {"a": -0}]"#,
        r#""{\"nested\": \"json text\"}""#,
    ];
    let schemas = [
        r#"{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}"#,
        r##"{"$defs": {"n": {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "null"}]}}, "properties": {"a": {"$ref": "#/$defs/n"}}}"##,
        r#"{"properties": {"a": {"type": "array", "prefixItems": [{"type": "number"}], "items": false}}}"#,
        r#"{"properties": {"b": {"oneOf": [{"type": "string", "pattern": "^(a+)+$"}, {"enum": [1, "1"]}]}}}"#,
    ];
    let mut seeds = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        for pick in [i as u8, 0x3f - i as u8] {
            seeds.push([&[pick][..], text.as_bytes()].concat());
        }
    }
    for (i, schema) in schemas.iter().enumerate() {
        let length = u8::try_from(schema.len()).expect("a seed schema is under 256 bytes");
        seeds.push([&[0xc0 | i as u8, length][..], schema.as_bytes(), texts[i % texts.len()].as_bytes()].concat());
    }
    let alphabet = br#"{}[]":,.-+eE0123456789 truefalsnul\abx"#;
    let ran = smoke("arguments", arguments::run, &seeds, alphabet, |rng| {
        // A random schema program: the body reads these bytes as choices.
        let mut input = vec![0x80 | (rng.byte() & 0x3f)];
        input.extend(rng.bytes(256));
        input
    });
    assert!(ran > seeds.len(), "the budget ran no mutation");
}

/// Every guest fixture, then mutations of them: the loader's answer to a
/// damaged component is a typed error, never a panic.
#[test]
fn the_component_body_holds_over_the_fixtures_and_mutations() {
    let seeds: Vec<Vec<u8>> = [
        fixtures::ORDERS,
        fixtures::DOCS,
        fixtures::NOTES,
        fixtures::DIAGNOSTICS,
        fixtures::HOSTILE,
        fixtures::CONTRACT_0_1,
        fixtures::BAD_NAME,
        fixtures::DUP_NAME,
        fixtures::SCHEMA_INVALID,
        fixtures::SCHEMA_HUGE,
        fixtures::UNION_BOMB,
        fixtures::REF_BOMB,
        fixtures::HUGE_DESCRIPTION,
        fixtures::MANY_TOOLS,
        fixtures::TRAP_INFO,
        fixtures::BAD_PLUGIN_NAME,
    ]
    .iter()
    .map(|path| std::fs::read(path).unwrap_or_else(|e| panic!("reading {path}: {e}")))
    .collect();
    // Mutations land mostly in the section headers and the first bytes of the
    // component, where the loader's own parsing is; a flip deep in code only
    // exercises wasmtime's validator.
    let headers: Vec<Vec<u8>> = seeds.iter().map(|s| s[..s.len().min(4096)].to_vec()).collect();
    let alphabet = [0x00, 0x01, 0x0d, 0x7f, 0x80, 0xff, b'a', b'{'];
    let ran = smoke("component", component::run, &seeds, &alphabet, |rng| {
        let seed = &seeds[rng.below(seeds.len())];
        if rng.below(2) == 0 {
            // A damaged header on an intact body.
            let header = &headers[rng.below(headers.len())];
            let header = mutate(rng, header, &alphabet);
            [&header[..], seed.get(header.len()..).unwrap_or_default()].concat()
        } else {
            [&b"\0asm\x0d\0\x01\0"[..], &rng.bytes(512)].concat()
        }
    });
    assert!(ran > seeds.len(), "the budget ran no mutation");
}
