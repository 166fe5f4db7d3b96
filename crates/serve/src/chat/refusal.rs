//! [`RunRefusal`]: why a run of a chat session does not start, typed, so
//! that a background takeover matches on what happened instead of on a
//! status code, and a request gets the status the refusal maps to.

use crate::workspace::WorkspaceError;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// Why a chat request, or a run's start or resume, is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum RunRefusal {
    /// The request's JSON body does not parse into what the route takes.
    #[error("invalid request body: {0}")]
    Body(#[source] serde_json::Error),
    /// This replica runs the session now.
    #[error("a run is in progress for this session")]
    InProgress,
    /// Another replica holds the session's lease.
    #[error("a run is in progress for this session on another replica")]
    HeldElsewhere,
    /// A resume found no unfinished run (ended by the replica that held it).
    #[error("input is required (there is no run to resume in this session)")]
    NothingToResume,
    /// An attach without input met a run stopped by a cancel or a budget:
    /// only `"resume": true` resumes it.
    #[error(
        "the session's run was stopped (cancelled, or out of budget); send \"resume\": true without input to resume it, or input to start a new run"
    )]
    Stopped,
    /// The tenant's `max_concurrent_runs` is reached.
    #[error("too many runs in progress for this tenant")]
    TooManyRuns,
    /// The run store (leases, checkpoints, events) did not answer.
    #[error("the run store is unreachable; retry later")]
    StoreUnreachable,
    /// The tenant's model cannot be reached; the reason is the operator's
    /// configuration, said at start too.
    #[error("{0}")]
    NoModel(String),
    /// The tenant's workspaces hold as many files as they may.
    #[error("{0}; delete files in existing sessions' workspaces or wait for idle ones to be removed")]
    WorkspaceFull(#[source] WorkspaceError),
    /// The session's workspace cannot be opened (logged with its cause).
    #[error("the session's workspace cannot be opened; retry later")]
    WorkspaceUnavailable,
}

impl RunRefusal {
    /// The HTTP status a request refused this way gets.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Self::Body(_) | Self::NothingToResume => StatusCode::BAD_REQUEST,
            Self::InProgress | Self::HeldElsewhere | Self::Stopped => StatusCode::CONFLICT,
            Self::TooManyRuns | Self::WorkspaceFull(_) => StatusCode::TOO_MANY_REQUESTS,
            Self::StoreUnreachable | Self::NoModel(_) | Self::WorkspaceUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// Whether a takeover that met it has nothing to do: another replica
    /// took the run first, or ended it meanwhile.
    pub(crate) fn taken_or_ended(&self) -> bool {
        matches!(self, Self::InProgress | Self::HeldElsewhere | Self::NothingToResume)
    }
}

impl IntoResponse for RunRefusal {
    fn into_response(self) -> Response {
        crate::response::error(self.status(), &self.to_string())
    }
}
