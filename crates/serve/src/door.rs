//! The front door of every `/api` route: the API key is checked from the
//! headers before a byte of the body is read, and a body is read only into
//! a reservation of the tenant's and the service's body budgets.
//!
//! Without it, an anonymous client could make the service read (and hold)
//! any number of uploads of `max_plugin_bytes` before telling it 401: the
//! body extractors run before the handler that checks the key.

use crate::Service;
use crate::auth::{self, Authenticated};
use crate::listener::Connection;
use crate::response::error;
use crate::response::unauthorized;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use http_body::Body as _;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Body budgets count in units of this many bytes, so that a semaphore's
/// `u32` acquisitions cover any configured size.
const UNIT: usize = 1024;

/// The front door of one group of routes, whose bodies may be `limit` bytes.
#[derive(Clone)]
pub(crate) struct Door {
    pub(crate) service: Service,
    pub(crate) limit: usize,
    /// Uploads say their limit as the upload route always has.
    pub(crate) upload: bool,
}

/// A budget of body bytes, as a semaphore of [`UNIT`]s.
pub(crate) fn budget(bytes: usize) -> Arc<Semaphore> {
    Arc::new(Semaphore::new(units(bytes).min(Semaphore::MAX_PERMITS)))
}

fn units(bytes: usize) -> usize {
    bytes.div_ceil(UNIT).max(1)
}

pub(crate) async fn admit(State(door): State<Door>, mut request: Request, next: Next) -> Response {
    let service = &door.service;
    let Some(index) = auth::tenant_index(service, request.headers()) else { return unauthorized() };
    let tenant = &service.inner.tenants[index];
    // The handler's `Caller` takes the tenant from here.
    request.extensions_mut().insert(Authenticated(index));
    // The connection presented a valid key: it may use the connection
    // places kept for authenticated traffic (`listener`).
    if let Some(ConnectInfo(connection)) = request.extensions().get::<ConnectInfo<Connection>>() {
        connection.authenticated();
    }
    let (parts, body) = request.into_parts();
    let hint = body.size_hint();
    if hint.upper() == Some(0) {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let too_large = || {
        let message = if door.upload {
            format!("a plugin may be at most {} bytes", door.limit)
        } else {
            format!("a request body may be at most {} bytes", door.limit)
        };
        error(StatusCode::PAYLOAD_TOO_LARGE, &message)
    };
    // A declared length over the limit is refused unread.
    if usize::try_from(hint.lower()).map_or(true, |n| n > door.limit) {
        return too_large();
    }
    // The reservation is the declared length, or the route's limit for a
    // body of unknown length (chunked), taken before reading: what is read
    // can never pass it.
    let declared = hint.upper().and_then(|n| usize::try_from(n).ok()).unwrap_or(door.limit).min(door.limit);
    let wanted = u32::try_from(units(declared)).unwrap_or(u32::MAX);
    let Ok(mut tenant_permit) = tenant.bodies.clone().try_acquire_many_owned(wanted) else {
        service.inner.metrics.refuse(&tenant.name, "max_body_bytes_in_flight");
        return error(StatusCode::TOO_MANY_REQUESTS, "too many request bytes in flight for this tenant");
    };
    let Ok(mut service_permit) = service.inner.bodies.clone().try_acquire_many_owned(wanted) else {
        service.inner.metrics.refuse(&tenant.name, "service_body_bytes_in_flight");
        return error(StatusCode::SERVICE_UNAVAILABLE, "the service is reading too many request bodies; retry shortly");
    };
    let timeout = service.inner.limits.body_read_timeout;
    let bytes = match tokio::time::timeout(timeout, Limited::new(body, door.limit).collect()).await {
        Err(_) => {
            return error(
                StatusCode::REQUEST_TIMEOUT,
                &format!("the request body did not arrive within {} s", timeout.as_secs()),
            );
        }
        Ok(Err(e)) if e.is::<LengthLimitError>() => return too_large(),
        Ok(Err(_)) => return error(StatusCode::BAD_REQUEST, "the request body could not be read"),
        Ok(Ok(collected)) => collected.to_bytes(),
    };
    // The request keeps holding what it read until it is answered (an
    // upload holds its bytes while it compiles); a reservation larger than
    // the body is given back now.
    let used = units(bytes.len());
    shrink(&mut tenant_permit, used);
    shrink(&mut service_permit, used);
    let response = next.run(Request::from_parts(parts, Body::from(bytes))).await;
    drop((tenant_permit, service_permit));
    response
}

fn shrink(permit: &mut OwnedSemaphorePermit, keep: usize) {
    let extra = permit.num_permits().saturating_sub(keep);
    if extra > 0 {
        drop(permit.split(extra));
    }
}
