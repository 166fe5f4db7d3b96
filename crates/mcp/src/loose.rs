//! `tools/call` whose `arguments` is not a JSON object (an array, a string,
//! a number, a boolean). rmcp's typed `CallToolRequestParams` holds an
//! object map, so such a request does not match that variant of rmcp's
//! untagged `ClientRequest` and arrives as a `CustomRequest` with the method
//! `tools/call` and the raw params (rmcp 3.11, `model.rs`, `ClientRequest`,
//! whose last variant is `CustomRequest`). lovia runs it like any other
//! call, with the argument text as sent: the executor refuses it with its own
//! message (docs/semantics.md §3A), an `isError` result, never a protocol error.

use rmcp::ErrorData;
use rmcp::model::{CallToolRequestParams, CallToolResponse, CustomResult};
use serde_json::Value;

/// The method this module answers among custom requests.
pub(crate) const TOOLS_CALL: &str = "tools/call";

/// The params without their `arguments`, and the argument text as the
/// client sent it (empty when absent: lovia reads it as `{}`). Any other
/// malformed field (a `name` that is not a string, say) leaves the call
/// unroutable: that is a protocol error, `-32602`.
pub(crate) fn split(params: Option<Value>) -> Result<(CallToolRequestParams, String), ErrorData> {
    let Some(Value::Object(mut params)) = params else {
        return Err(ErrorData::invalid_params("tools/call params must be a JSON object", None));
    };
    let arguments = params.remove("arguments").map(|a| a.to_string()).unwrap_or_default();
    let typed = serde_json::from_value(Value::Object(params))
        .map_err(|e| ErrorData::invalid_params(format!("invalid tools/call params: {e}"), None))?;
    Ok((typed, arguments))
}

/// The call's response as the custom result rmcp sends as is; `legacy`
/// peers (before 2026-07-28) get it without `resultType`, as rmcp does for
/// its typed results.
pub(crate) fn custom_result(response: CallToolResponse, legacy: bool) -> Result<CustomResult, ErrorData> {
    let value = match response {
        CallToolResponse::Complete(mut result) => {
            if legacy {
                result.result_type = None;
            }
            serde_json::to_value(result)
        }
        CallToolResponse::InputRequired(input) => serde_json::to_value(input),
        // lovia makes no tasks.
        _ => return Err(ErrorData::internal_error("unexpected tools/call response", None)),
    }
    .map_err(|e| ErrorData::internal_error(format!("cannot encode the tools/call result: {e}"), None))?;
    Ok(CustomResult::new(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_keep_their_text_and_the_rest_must_be_well_formed() {
        let (params, text) = split(Some(json!({"name": "echo", "arguments": [1, "a"]}))).expect("split");
        assert_eq!((params.name.as_ref(), text.as_str()), ("echo", r#"[1,"a"]"#));
        let (_, text) = split(Some(json!({"name": "echo", "arguments": "hi"}))).expect("split");
        assert_eq!(text, r#""hi""#);
        let (_, text) = split(Some(json!({"name": "echo"}))).expect("split");
        assert_eq!(text, "");
        for bad in [json!({"name": 5, "arguments": 1}), json!({"arguments": 1}), json!([1])] {
            let e = split(Some(bad.clone())).expect_err("refused");
            assert_eq!(e.code, rmcp::model::ErrorCode::INVALID_PARAMS, "{bad}");
        }
        assert!(split(None).is_err());
    }
}
