//! The manifest custom section: the plugin's info and tool specs as JSON,
//! embedded in the component so they can be read without running any of its
//! code. `lovia pack` writes it; `lovia inspect` reads it.

use crate::call::ToolSpec;
pub use crate::error::ManifestError;
use crate::plugin::PluginInfo;
use serde::{Deserialize, Serialize};
use wasmtime::wasmparser::{Parser, Payload};

/// The custom section's name.
pub const SECTION: &str = "lovia:manifest";

/// What the section holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Format version of the manifest; 1.
    pub manifest_version: u32,
    /// The plugin's info.
    pub info: PluginInfo,
    /// Its tools.
    pub tools: Vec<ToolSpec>,
}

/// What a static read of a component finds.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct StaticView {
    /// The parsed manifest, if the section exists.
    pub manifest: Option<Result<Manifest, ManifestError>>,
    /// The component's top-level import names.
    pub imports: Vec<String>,
    /// The component's top-level export names.
    pub exports: Vec<String>,
    /// Where the manifest section starts, if it is the last section.
    trailing_manifest_at: Option<usize>,
}

/// Reads the manifest and the import/export names without compiling or running anything.
pub fn read_static(bytes: &[u8]) -> Result<StaticView, ManifestError> {
    let mut view = StaticView::default();
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload?;
        match payload {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(reader) if depth == 0 => {
                for import in reader {
                    view.imports.push(import?.name.name.to_owned());
                }
            }
            Payload::ComponentExportSection(reader) if depth == 0 => {
                for export in reader {
                    view.exports.push(export?.name.name.to_owned());
                }
            }
            Payload::CustomSection(reader) if depth == 0 && reader.name() == SECTION => {
                view.manifest = Some(serde_json::from_slice(reader.data()).map_err(ManifestError::Unreadable));
                let encoded = encode_section(reader.data());
                view.trailing_manifest_at = (reader.range().end == bytes.len() && bytes.ends_with(&encoded))
                    .then(|| bytes.len() - encoded.len());
            }
            _ => {}
        }
    }
    Ok(view)
}

impl StaticView {
    /// Where the manifest section starts, when it is the component's last
    /// section (as [`embed`] writes it): the bytes before it are the
    /// component without it.
    pub fn trailing_manifest_at(&self) -> Option<usize> {
        self.trailing_manifest_at
    }
}

/// `bytes` with `manifest` as its (only) trailing manifest section. A
/// manifest that `embed` appended earlier is replaced.
pub fn embed(bytes: &[u8], manifest: &Manifest) -> Result<Vec<u8>, ManifestError> {
    let view = read_static(bytes)?;
    let base = match (&view.manifest, view.trailing_manifest_at) {
        (None, _) => bytes,
        (Some(_), Some(at)) => &bytes[..at],
        (Some(_), None) => return Err(ManifestError::NotLast),
    };
    let data = serde_json::to_vec(manifest).map_err(ManifestError::Unwritable)?;
    let mut out = Vec::with_capacity(base.len() + data.len() + 32);
    out.extend_from_slice(base);
    out.extend_from_slice(&encode_section(&data));
    Ok(out)
}

/// A custom section: id 0, size, name, data.
fn encode_section(data: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(data.len() + SECTION.len() + 8);
    leb128(&mut body, SECTION.len() as u64);
    body.extend_from_slice(SECTION.as_bytes());
    body.extend_from_slice(data);
    let mut out = vec![0u8];
    leb128(&mut out, body.len() as u64);
    out.extend_from_slice(&body);
    out
}

fn leb128(out: &mut Vec<u8>, mut n: u64) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}
