//! Who a request comes from: a tenant, by the SHA-256 of its API key (only
//! the hash is configured or kept in memory), or the operator, by the
//! metrics token.
//!
//! Handlers take these as extractors and never read `Authorization`
//! themselves: [`Caller`] is the tenant the `/api` door ([`crate::door`])
//! let in, and [`Operator`] admits the operator's routes (`/metrics`,
//! `/audit`).

use crate::Service;
use crate::Tenant;
use crate::response::error;
use crate::response::unauthorized;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use sha2::{Digest, Sha256};

/// The lower-case hex SHA-256 of `key`, as `api_keys` in the config holds it.
///
/// ```
/// assert_eq!(
///     lovia_serve::hash_key("test"),
///     "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
/// );
/// ```
pub fn hash_key(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// The key of an `Authorization: Bearer <key>` header value.
pub(crate) fn bearer(header: &str) -> Option<&str> {
    let (scheme, key) = header.split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") && !key.trim().is_empty()).then(|| key.trim())
}

/// The bearer token of a request's headers, if it has one.
pub(crate) fn token(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer)
}

/// The tenant the door authenticated, left in the request's extensions so
/// that the handler does not hash the key again.
#[derive(Clone, Copy)]
pub(crate) struct Authenticated(pub(crate) usize);

/// The index of the tenant whose API key `headers` carry.
pub(crate) fn tenant_index(service: &Service, headers: &HeaderMap) -> Option<usize> {
    token(headers).and_then(|key| service.inner.keys.get(&hash_key(key)).copied())
}

/// The tenant a request comes from: the extractor of every `/api` handler.
/// Without a known key the request is answered 401 `missing or unknown API
/// key` before the handler runs.
#[derive(Clone)]
pub(crate) struct Caller {
    service: Service,
    index: usize,
}

impl Caller {
    /// The calling tenant.
    pub(crate) fn tenant(&self) -> &Tenant {
        &self.service.inner.tenants[self.index]
    }

    /// The service the tenant is served by.
    pub(crate) fn service(&self) -> &Service {
        &self.service
    }
}

impl FromRequestParts<Service> for Caller {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, service: &Service) -> Result<Self, Response> {
        // Every `/api` route is behind the door; a route that is not still
        // checks the key here.
        let index = match parts.extensions.get::<Authenticated>() {
            Some(&Authenticated(index)) => Some(index),
            None => tenant_index(service, &parts.headers),
        };
        let index = index.ok_or_else(unauthorized)?;
        Ok(Caller { service: service.clone(), index })
    }
}

/// Who may read what only the operator may (every tenant's metrics and
/// audit trail): `metrics_token`; and `/metrics` alone also anyone, with
/// `metrics_public`. The audit trail of every tenant is never public.
pub(crate) struct OperatorAccess {
    /// SHA-256 (hex) of the token.
    pub(crate) token_hash: Option<String>,
    pub(crate) public: bool,
}

impl OperatorAccess {
    /// The refusal, if any: 401 without the right token, 403 when the
    /// operator routes are not enabled (`what` names the route in it).
    fn refusal(&self, headers: &HeaderMap, route: OperatorRoute) -> Option<Response> {
        if route == OperatorRoute::Metrics && self.public {
            return None;
        }
        let what = match route {
            OperatorRoute::Metrics => "metrics are",
            OperatorRoute::Audit => "the operator's audit route is",
        };
        match &self.token_hash {
            Some(hash) => match token(headers) {
                Some(t) if hash_key(t) == *hash => None,
                _ => {
                    let mut response = error(StatusCode::UNAUTHORIZED, "missing or wrong metrics token");
                    response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
                    Some(response)
                }
            },
            None if route == OperatorRoute::Audit => Some(error(
                StatusCode::FORBIDDEN,
                "the operator's audit route is not enabled: set metrics_token in the service config (metrics_public makes /metrics public, never every tenant's audit trail; `lovia audit --store` reads it too)",
            )),
            None => Some(error(
                StatusCode::FORBIDDEN,
                &format!("{what} not enabled: set metrics_token (or metrics_public = true) in the service config"),
            )),
        }
    }
}

/// The routes only the operator reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OperatorRoute {
    Metrics,
    Audit,
}

/// An operator's request: the extractor of `/metrics` and `/audit`.
pub(crate) struct Operator;

impl FromRequestParts<Service> for Operator {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, service: &Service) -> Result<Self, Response> {
        // The refusal names the route the operator asked for.
        let route = match parts.uri.path() {
            "/metrics" => OperatorRoute::Metrics,
            _ => OperatorRoute::Audit,
        };
        match service.inner.operator.refusal(&parts.headers, route) {
            Some(refusal) => Err(refusal),
            None => Ok(Operator),
        }
    }
}
