//! The `#[lovia::tool]` attribute. Use it through the `lovia` crate, which
//! documents it; this crate only holds the procedural macro.
//!
//! The macro works in three steps, one module each: `ast` parses the
//! attribute and the function, `valid` rejects what cannot become a tool
//! with a span on the user's code, and `expand` emits the tool definition.

use proc_macro::TokenStream;

mod ast;
mod expand;
mod valid;

/// Turns a function into a lovia tool. See the `lovia` crate for the options.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let result = ast::Tool::parse(attr.into(), item.into())
        .and_then(|tool| valid::check(&tool).map(|()| tool))
        .map(|tool| expand::expand(&tool));
    match result {
        Ok(tokens) => tokens.into(),
        Err(err) => err.into_compile_error().into(),
    }
}
