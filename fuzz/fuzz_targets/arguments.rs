//! Argument coercion and validation against the example tools' real
//! schemas: any text the model sends must give a value or a rejection,
//! never a panic, and an accepted value must be an object the schema accepts.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lovia_host::ArgumentValidator;
use std::sync::OnceLock;

fn validators() -> &'static [ArgumentValidator] {
    static V: OnceLock<Vec<ArgumentValidator>> = OnceLock::new();
    V.get_or_init(|| {
        let mut out = Vec::new();
        for golden in [
            include_str!("../../tests/golden/orders.json"),
            include_str!("../../tests/golden/docs.json"),
            include_str!("../../tests/golden/notes.json"),
            include_str!("../../tests/golden/ops.json"),
            include_str!("../../tests/golden/diagnostics.json"),
        ] {
            let specs: Vec<serde_json::Value> = serde_json::from_str(golden).expect("golden specs");
            for spec in specs {
                let name = spec["name"].as_str().expect("name");
                let strict = spec["strict"].as_bool().unwrap_or(false);
                out.push(ArgumentValidator::new(name, &spec["parameters"], strict).expect("schema"));
            }
        }
        out
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else { return };
    let all = validators();
    let validator = &all[pick as usize % all.len()];
    let Ok(text) = std::str::from_utf8(rest) else { return };
    if let Ok(value) = validator.prepare(text) {
        assert!(value.is_object(), "an accepted value is an object");
        // What preflight accepted must be accepted again unchanged (policies re-validate it).
        assert_eq!(validator.prepare(&value.to_string()).as_ref(), Ok(&value), "validation is idempotent");
    }
});
