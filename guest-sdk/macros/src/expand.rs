//! Expansion: the original function, plus a module of the same name (modules
//! and functions live in different namespaces) holding the argument struct and
//! the `__LOVIA_TOOL` definition that `lovia::export!` collects.

use crate::ast::{Approval, Output, Param, Tool, option_inner};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};

pub(crate) fn expand(tool: &Tool) -> TokenStream {
    let func = &tool.func;
    let vis = &func.vis;
    let fn_ident = &func.sig.ident;
    let o = &tool.options;
    let name = o.name.as_ref().map_or_else(|| fn_ident.to_string(), syn::LitStr::value);
    let description = match (&o.description, &tool.doc) {
        (Some(d), _) => d.value(),
        (None, Some(doc)) => doc.clone(),
        (None, None) => String::new(),
    };
    let p = quote!(::lovia::__private);
    let title = match &o.title {
        Some(t) => quote!(::core::option::Option::Some(#t)),
        None => quote!(::core::option::Option::None),
    };
    let strict = o.strict;
    let deny_unknown = strict.then(|| quote!(#[serde(deny_unknown_fields)]));

    let mut fields = Vec::new();
    let mut defaults = Vec::new();
    let mut schema_args = Vec::new();
    let mut call_args = Vec::new();
    for param in &tool.params {
        match param {
            Param::Context { .. } => call_args.push(quote!(&::lovia::Context::__new())),
            Param::Unsupported { .. } => {}
            Param::Arg { ident, ty, options } => {
                let key = ident.to_string().trim_start_matches("r#").to_owned();
                let is_option = option_inner(ty).is_some();
                let serde_default = match &options.default {
                    Some(expr) => {
                        let default_fn = format_ident!("__default_{}", key);
                        // `default = 5` on an `Option<u32>` means `Some(5)`; a string literal becomes a `String`.
                        let value = match (option_inner(ty), expr) {
                            (Some(_), syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(_), .. })) => {
                                quote!(::core::option::Option::Some(::core::convert::Into::into(#expr)))
                            }
                            (Some(_), _) => quote!(::core::option::Option::Some(#expr)),
                            (None, syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(_), .. })) => {
                                quote!(::core::convert::Into::into(#expr))
                            }
                            (None, _) => quote!(#expr),
                        };
                        defaults.push(quote! {
                            fn #default_fn() -> #ty { #value }
                        });
                        let path = default_fn.to_string();
                        Some((
                            quote!(#[serde(default = #path)]),
                            quote!(::core::option::Option::Some(
                                #p::serde_json::to_value(&#default_fn()).unwrap_or(#p::serde_json::Value::Null)
                            )),
                        ))
                    }
                    None if is_option => Some((quote!(#[serde(default)]), quote!(::core::option::Option::None))),
                    None => None,
                };
                let optional = serde_default.is_some();
                let (serde_attr, default_value) =
                    serde_default.unwrap_or_else(|| (quote!(), quote!(::core::option::Option::None)));
                fields.push(quote! { #serde_attr #[serde(rename = #key)] pub #ident: #ty });
                let opt_str = |s: &Option<syn::LitStr>| match s {
                    Some(s) => quote!(::core::option::Option::Some(#s)),
                    None => quote!(::core::option::Option::None),
                };
                let opt_json = |e: &Option<syn::Expr>| match e {
                    Some(e) => quote!(::core::option::Option::Some(#p::serde_json::json!(#e))),
                    None => quote!(::core::option::Option::None),
                };
                let opt_int = |e: &Option<syn::LitInt>| match e {
                    Some(e) => quote!(::core::option::Option::Some(#e)),
                    None => quote!(::core::option::Option::None),
                };
                let (description, minimum, maximum, pattern, min_length, max_length) = (
                    opt_str(&options.description),
                    opt_json(&options.min),
                    opt_json(&options.max),
                    opt_str(&options.pattern),
                    opt_int(&options.min_length),
                    opt_int(&options.max_length),
                );
                schema_args.push(quote! {
                    builder.arg::<#ty>(#p::ArgMeta {
                        name: #key,
                        description: #description,
                        minimum: #minimum,
                        maximum: #maximum,
                        pattern: #pattern,
                        min_length: #min_length,
                        max_length: #max_length,
                        default: #default_value,
                        optional: #optional,
                    });
                });
                call_args.push(quote!(args.#ident));
            }
        }
    }

    let convert = convert_output(&tool.output, &p);
    let flag_int = |lit: &Option<syn::LitInt>| match lit {
        Some(l) => quote!(::core::option::Option::Some(#l)),
        None => quote!(::core::option::Option::None),
    };
    let (retries, timeout_ms, max_output_chars) =
        (flag_int(&o.retries), flag_int(&o.timeout_ms), flag_int(&o.max_output_chars));
    let parallel = o.parallel;
    let (read_only, destructive, idempotent, open_world) = (o.read_only, o.destructive, o.idempotent, o.open_world);
    let (approval, predicate) = match &o.approval {
        Approval::Never => (quote!(Never), quote!(::core::option::Option::None)),
        Approval::Always => (quote!(Always), quote!(::core::option::Option::None)),
        Approval::Predicate(path) => (
            quote!(AskPlugin),
            quote!(::core::option::Option::Some(|arguments: &str| {
                let args: Args = #p::parse_args(#name, arguments).map_err(|_| {
                    ::std::string::String::from("the arguments could not be parsed for the approval check")
                })?;
                ::core::result::Result::Ok(#path(&args))
            })),
        ),
    };

    quote! {
        #func

        #[doc(hidden)]
        #[allow(non_snake_case, non_upper_case_globals, dead_code, clippy::all)]
        #vis mod #fn_ident {
            use super::*;

            /// The arguments of this tool, as the model sends them.
            #[derive(#p::serde::Deserialize)]
            #[serde(crate = "::lovia::__private::serde")]
            #deny_unknown
            pub struct Args { #(#fields,)* }

            #(#defaults)*

            fn __spec() -> #p::__Spec {
                let mut builder = #p::ParametersBuilder::new(#strict);
                #(#schema_args)*
                #p::spec(#name, #title, #description, builder.finish(), #p::Flags {
                    strict: #strict,
                    parallel: #parallel,
                    retries: #retries,
                    timeout_ms: #timeout_ms,
                    max_output_chars: #max_output_chars,
                    approval: #p::ApprovalMode::#approval,
                    hints: #p::Hints {
                        read_only: #read_only,
                        destructive: #destructive,
                        idempotent: #idempotent,
                        open_world: #open_world,
                    },
                })
            }

            fn __call(arguments: &str) -> ::core::result::Result<#p::__Output, #p::__CallError> {
                let args: Args = #p::parse_args(#name, arguments)?;
                let value = super::#fn_ident(#(#call_args),*);
                #convert
            }

            pub const __LOVIA_TOOL: #p::ToolDef = #p::ToolDef {
                name: #name,
                spec: __spec,
                call: __call,
                needs_approval: #predicate,
            };
        }
    }
}

fn convert_output(output: &Output, p: &TokenStream) -> TokenStream {
    match output {
        Output::Text => quote!(#p::text_output(value)),
        Output::Json => quote!(#p::json_output(&value)),
        Output::Parts => quote!(#p::parts_output(value)),
        Output::Unit => quote!({ let () = value; #p::json_output(&()) }),
        Output::Result(ok) => {
            let inner = convert_output(ok, p);
            quote!(match value {
                ::core::result::Result::Ok(value) => #inner,
                ::core::result::Result::Err(e) => ::core::result::Result::Err(#p::tool_error(e)),
            })
        }
    }
}
