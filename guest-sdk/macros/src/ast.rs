//! Parsing: the attribute's options, the function and its arguments.

use proc_macro2::{Span, TokenStream};
use syn::{Expr, FnArg, Ident, ItemFn, LitBool, LitInt, LitStr, Pat, Path, ReturnType, Type, spanned::Spanned};

/// When the host must ask for approval.
pub(crate) enum Approval {
    Never,
    Always,
    /// `needs_approval = path`: a predicate over the parsed arguments.
    Predicate(Path),
}

/// The options of `#[tool(...)]`.
pub(crate) struct Options {
    pub(crate) name: Option<LitStr>,
    pub(crate) title: Option<LitStr>,
    pub(crate) description: Option<LitStr>,
    pub(crate) strict: bool,
    pub(crate) parallel: bool,
    pub(crate) retries: Option<LitInt>,
    pub(crate) timeout_ms: Option<LitInt>,
    pub(crate) max_output_chars: Option<LitInt>,
    pub(crate) approval: Approval,
    pub(crate) read_only: bool,
    pub(crate) destructive: bool,
    pub(crate) idempotent: bool,
    pub(crate) open_world: bool,
}

/// The options of `#[arg(...)]` on one argument.
#[derive(Default)]
pub(crate) struct ArgOptions {
    pub(crate) description: Option<LitStr>,
    pub(crate) min: Option<Expr>,
    pub(crate) max: Option<Expr>,
    pub(crate) pattern: Option<LitStr>,
    pub(crate) min_length: Option<LitInt>,
    pub(crate) max_length: Option<LitInt>,
    pub(crate) default: Option<Expr>,
    /// The span of the whole `#[arg]` attribute, for diagnostics.
    pub(crate) span: Option<Span>,
}

/// One parameter of the function.
#[expect(clippy::large_enum_variant, reason = "a handful per function, at compile time")]
pub(crate) enum Param {
    /// A model-visible argument.
    Arg { ident: Ident, ty: Type, options: ArgOptions },
    /// The injected `&lovia::Context`.
    Context { span: Span, arg_span: Option<Span> },
    /// Something else (`self`, a pattern): rejected by validation.
    Unsupported { span: Span, what: &'static str },
}

/// How the function's return value reaches the model.
pub(crate) enum Output {
    Text,
    Json,
    /// `lovia::Content`: content parts (contract 0.2).
    Parts,
    Unit,
    Result(Box<Output>),
}

pub(crate) struct Tool {
    pub(crate) options: Options,
    pub(crate) func: ItemFn,
    pub(crate) params: Vec<Param>,
    pub(crate) output: Output,
    pub(crate) doc: Option<String>,
}

impl Tool {
    pub(crate) fn parse(attr: TokenStream, item: TokenStream) -> syn::Result<Tool> {
        let mut func: ItemFn = syn::parse2(item)?;
        let options = parse_options(attr)?;
        let mut params = Vec::new();
        for input in &mut func.sig.inputs {
            params.push(parse_param(input)?);
        }
        let output = match &func.sig.output {
            ReturnType::Default => Output::Unit,
            ReturnType::Type(_, ty) => classify(ty),
        };
        let doc = doc_comment(&func.attrs);
        Ok(Tool { options, func, params, output, doc })
    }
}

fn parse_options(attr: TokenStream) -> syn::Result<Options> {
    let mut o = Options {
        name: None,
        title: None,
        description: None,
        strict: false,
        parallel: true,
        retries: None,
        timeout_ms: None,
        max_output_chars: None,
        approval: Approval::Never,
        read_only: false,
        destructive: false,
        idempotent: false,
        open_world: false,
    };
    let parser = syn::meta::parser(|meta| {
        let flag = |meta: &syn::meta::ParseNestedMeta<'_>| -> syn::Result<bool> {
            if meta.input.peek(syn::Token![=]) { Ok(meta.value()?.parse::<LitBool>()?.value) } else { Ok(true) }
        };
        let key = meta.path.get_ident().map(ToString::to_string).unwrap_or_default();
        match key.as_str() {
            "name" => o.name = Some(meta.value()?.parse()?),
            "title" => o.title = Some(meta.value()?.parse()?),
            "description" => o.description = Some(meta.value()?.parse()?),
            "strict" => o.strict = flag(&meta)?,
            "parallel" => o.parallel = flag(&meta)?,
            "retries" => o.retries = Some(meta.value()?.parse()?),
            "timeout_ms" => o.timeout_ms = Some(meta.value()?.parse()?),
            "max_output_chars" => o.max_output_chars = Some(meta.value()?.parse()?),
            "read_only" => o.read_only = flag(&meta)?,
            "destructive" => o.destructive = flag(&meta)?,
            "idempotent" => o.idempotent = flag(&meta)?,
            "open_world" => o.open_world = flag(&meta)?,
            "needs_approval" => {
                o.approval = if meta.input.peek(syn::Token![=]) {
                    let value = meta.value()?;
                    if value.peek(LitBool) {
                        if value.parse::<LitBool>()?.value { Approval::Always } else { Approval::Never }
                    } else {
                        Approval::Predicate(value.parse()?)
                    }
                } else {
                    Approval::Always
                }
            }
            _ => {
                return Err(meta.error(
                    "unknown tool option; expected one of: name, title, description, strict, parallel, retries, \
                     timeout_ms, max_output_chars, needs_approval, read_only, destructive, idempotent, open_world",
                ));
            }
        }
        Ok(())
    });
    syn::parse::Parser::parse2(parser, attr)?;
    Ok(o)
}

fn parse_param(input: &mut FnArg) -> syn::Result<Param> {
    let FnArg::Typed(pat_type) = input else {
        return Ok(Param::Unsupported { span: input.span(), what: "a `self` receiver" });
    };
    let mut options = ArgOptions::default();
    let mut arg_span = None;
    let mut error: Option<syn::Error> = None;
    pat_type.attrs.retain(|attr| {
        if !attr.path().is_ident("arg") {
            return true;
        }
        arg_span = Some(attr.span());
        options.span = Some(attr.span());
        if let Err(e) = parse_arg_options(attr, &mut options) {
            error.get_or_insert(e);
        }
        false
    });
    if let Some(e) = error {
        return Err(e);
    }
    if is_context(&pat_type.ty) {
        return Ok(Param::Context { span: pat_type.span(), arg_span });
    }
    match &*pat_type.pat {
        Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => {
            Ok(Param::Arg { ident: p.ident.clone(), ty: (*pat_type.ty).clone(), options })
        }
        other => Ok(Param::Unsupported { span: other.span(), what: "a pattern (use a plain identifier)" }),
    }
}

fn parse_arg_options(attr: &syn::Attribute, o: &mut ArgOptions) -> syn::Result<()> {
    attr.parse_nested_meta(|meta| {
        let key = meta.path.get_ident().map(ToString::to_string).unwrap_or_default();
        match key.as_str() {
            "description" => o.description = Some(meta.value()?.parse()?),
            "min" => o.min = Some(meta.value()?.parse()?),
            "max" => o.max = Some(meta.value()?.parse()?),
            "pattern" => o.pattern = Some(meta.value()?.parse()?),
            "min_length" => o.min_length = Some(meta.value()?.parse()?),
            "max_length" => o.max_length = Some(meta.value()?.parse()?),
            "default" => o.default = Some(meta.value()?.parse()?),
            _ => {
                return Err(meta.error(
                    "unknown argument option; expected one of: description, min, max, pattern, min_length, \
                     max_length, default",
                ));
            }
        }
        Ok(())
    })
}

/// `&Context`, `&lovia::Context` or `&mut ...`: recognised by type, never by name.
fn is_context(ty: &Type) -> bool {
    match ty {
        Type::Reference(r) => matches!(&*r.elem, Type::Path(p) if p.qself.is_none()
            && p.path.segments.last().is_some_and(|s| s.ident == "Context" && s.arguments.is_none())),
        _ => false,
    }
}

/// The last path segment of a type and its generic arguments.
pub(crate) fn last_segment(ty: &Type) -> Option<&syn::PathSegment> {
    match ty {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last(),
        _ => None,
    }
}

/// The `T` of `Option<T>`, when `ty` is one.
pub(crate) fn option_inner(ty: &Type) -> Option<&Type> {
    let seg = last_segment(ty)?;
    if seg.ident != "Option" {
        return None;
    }
    match &seg.arguments {
        syn::PathArguments::AngleBracketed(a) if a.args.len() == 1 => match a.args.first() {
            Some(syn::GenericArgument::Type(t)) => Some(t),
            _ => None,
        },
        _ => None,
    }
}

fn classify(ty: &Type) -> Output {
    if let Type::Tuple(t) = ty
        && t.elems.is_empty()
    {
        return Output::Unit;
    }
    let Some(seg) = last_segment(ty) else { return Output::Json };
    if seg.ident == "String" {
        return Output::Text;
    }
    // Only the SDK's type, by its path: a tool's own `Content` type stays JSON.
    if let Type::Path(p) = ty
        && p.path.segments.len() == 2
        && p.path.segments[0].ident == "lovia"
        && seg.ident == "Content"
    {
        return Output::Parts;
    }
    if seg.ident == "Result"
        && let syn::PathArguments::AngleBracketed(a) = &seg.arguments
        && let Some(syn::GenericArgument::Type(ok)) = a.args.first()
    {
        return Output::Result(Box::new(classify(ok)));
    }
    Output::Json
}

/// The doc comment, dedented and trimmed (docs/semantics.md §2 rule 10).
fn doc_comment(attrs: &[syn::Attribute]) -> Option<String> {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .flat_map(|s| s.split('\n').map(str::to_owned).collect::<Vec<_>>())
        .collect();
    if lines.is_empty() {
        return None;
    }
    let indent =
        lines.iter().filter(|l| !l.trim().is_empty()).map(|l| l.len() - l.trim_start().len()).min().unwrap_or(0);
    let text = lines.iter().map(|l| l.get(indent..).unwrap_or("").trim_end()).collect::<Vec<_>>().join("\n");
    Some(text.trim().to_owned())
}
