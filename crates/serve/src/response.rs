//! The service's JSON refusals: `{"error": "…"}` with a status, and the
//! 401 of a missing or unknown key.

use axum::Json;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// 401 with `WWW-Authenticate: Bearer`.
pub(crate) fn unauthorized() -> Response {
    let mut response = error(StatusCode::UNAUTHORIZED, "missing or unknown API key");
    response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
    response
}

/// `status` with `{"error": message}`.
pub(crate) fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}
