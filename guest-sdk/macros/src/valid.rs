//! Validation: everything that cannot become a tool is an error that points
//! at the user's code.

use crate::ast::{Param, Tool};
use syn::Error;

pub(crate) fn check(tool: &Tool) -> syn::Result<()> {
    let sig = &tool.func.sig;
    if let Some(a) = &sig.asyncness {
        return Err(Error::new_spanned(a, "a lovia tool cannot be `async`; components run calls synchronously"));
    }
    if !sig.generics.params.is_empty() {
        return Err(Error::new_spanned(
            &sig.generics,
            "a lovia tool cannot be generic: its schema needs concrete types",
        ));
    }
    if let Some(u) = &sig.unsafety {
        return Err(Error::new_spanned(u, "a lovia tool cannot be `unsafe`"));
    }
    let name = match &tool.options.name {
        Some(lit) => (lit.value(), lit.span()),
        None => (sig.ident.to_string(), sig.ident.span()),
    };
    if !valid_name(&name.0) {
        return Err(Error::new(
            name.1,
            format!("invalid tool name `{}`: a name must match ^[a-zA-Z0-9_-]{{1,64}}$", name.0),
        ));
    }
    for lit in [&tool.options.retries].into_iter().flatten() {
        lit.base10_parse::<u32>()?;
    }
    for lit in [&tool.options.timeout_ms, &tool.options.max_output_chars].into_iter().flatten() {
        lit.base10_parse::<u64>()?;
    }
    let mut context_seen = false;
    for param in &tool.params {
        match param {
            Param::Context { span, arg_span } => {
                if context_seen {
                    return Err(Error::new(
                        *span,
                        "a lovia tool can have at most one `&lovia::Context` parameter; remove this one",
                    ));
                }
                if let Some(s) = arg_span {
                    return Err(Error::new(
                        *s,
                        "`#[arg]` does not apply to the context parameter: it is not part of the schema",
                    ));
                }
                context_seen = true;
            }
            Param::Unsupported { span, what } => {
                return Err(Error::new(*span, format!("a lovia tool cannot take {what}")));
            }
            Param::Arg { options, .. } => {
                for lit in [&options.min_length, &options.max_length].into_iter().flatten() {
                    lit.base10_parse::<u64>()?;
                }
                if let Some(p) = &options.pattern
                    && p.value().is_empty()
                {
                    return Err(Error::new_spanned(p, "an empty pattern matches everything; remove it"));
                }
            }
        }
    }
    Ok(())
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
