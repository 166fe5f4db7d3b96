//! Approvals over MCP (docs/mcp.md, "Approvals"): the prompt a client shows,
//! the capability check, and the sealed request state that carries an
//! `input_required` round trip on 2026-07-28.
//!
//! The request state comes back from the client, so it is attacker-controlled
//! input: it is sealed with HMAC-SHA256 under the server's key (rmcp's
//! [`RequestStateCodec`]; random per server unless the host shares one
//! between replicas), bound to the exact call (tenant, tool, argument text,
//! plugin digest) as associated data, stamped with an expiry, and redeemed at
//! most once (`redeemed`). Anything that fails one of those checks is refused, and the
//! call gets lovia's not-approved result.

use crate::NewServerError;
use crate::redeemed::{InMemory, RedeemedStates, StateKey};
use lovia_host::ApprovalRequest;
use rmcp::RoleServer;
use rmcp::model::{
    BooleanSchema, ClientCapabilities, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationSchema, InputRequest, InputRequests, InputRequiredResult, InputResponses, PrimitiveSchemaDefinition,
    RequestStateCodec, RequestStateError, SealOptions,
};
use rmcp::service::Peer;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The key of lovia's one input request in an `input_required` result.
pub(crate) const INPUT_KEY: &str = "approval";

/// The text the client shows its user: the tool, the exact argument text the
/// call would run with, and the plugin (name and SHA-256) that would run it.
pub(crate) fn prompt(request: &ApprovalRequest, plugin_name: Option<&str>) -> String {
    let plugin = match (&request.plugin_digest, plugin_name) {
        (Some(digest), Some(name)) => format!("plugin {name}, sha256 {digest}"),
        (Some(digest), None) => format!("plugin sha256 {digest}"),
        (None, _) => "a native tool of the host".to_owned(),
    };
    let arguments = if request.arguments.is_empty() { "{}" } else { request.arguments.as_str() };
    format!(
        "lovia asks before running the tool {tool}.\nArguments (exact): {arguments}\nRuns in: {plugin}\nAccept to run it; decline or cancel and it does not run.",
        tool = request.tool,
    )
}

/// The form elicitation lovia sends. Without `always`: no fields, only
/// accept, decline or cancel, so nothing the user types can change the call.
/// With `always` (a tool name, on a session that can remember it): one
/// optional checkbox, "Always allow <tool> in this MCP session", which
/// changes nothing of this call either.
pub(crate) fn elicitation(message: String, always: Option<&str>) -> ElicitRequestParams {
    let mut fields = BTreeMap::new();
    if let Some(tool) = always {
        fields.insert(
            ALWAYS_FIELD.to_owned(),
            PrimitiveSchemaDefinition::Boolean(
                BooleanSchema::new().title(format!("Always allow {tool} in this MCP session")).with_default(false),
            ),
        );
    }
    ElicitRequestParams::FormElicitationParams { meta: None, message, requested_schema: ElicitationSchema::new(fields) }
}

/// The checkbox of [`elicitation`] that allows a tool for the session.
pub(crate) const ALWAYS_FIELD: &str = "always";

/// Whether an accepted answer also ticked "always allow".
pub(crate) fn always(result: &ElicitResult) -> bool {
    accepted(result)
        && result.content.as_ref().and_then(|c| c.get(ALWAYS_FIELD)).and_then(serde_json::Value::as_bool) == Some(true)
}

/// The tools one MCP session's person allowed for the rest of the session
/// (2025-11-25 and older, which have sessions), each with the plugin digest
/// it was allowed for: a replaced plugin is asked about again. Never shared
/// between sessions or servers.
#[derive(Debug, Default)]
pub(crate) struct SessionAllowed(std::sync::Mutex<std::collections::HashSet<(String, Option<String>)>>);

impl SessionAllowed {
    pub(crate) fn allows(&self, request: &ApprovalRequest) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&(request.tool.clone(), request.plugin_digest.clone()))
    }

    pub(crate) fn allow(&self, request: &ApprovalRequest) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).insert((request.tool.clone(), request.plugin_digest.clone()));
    }
}

/// Whether the client declared form elicitation (an `elicitation`
/// capability naming neither mode means form, as the spec reads it).
pub(crate) fn can_elicit(capabilities: Option<&ClientCapabilities>) -> bool {
    capabilities
        .and_then(|c| c.elicitation.as_ref())
        .is_some_and(|e| e.form.is_some() || (e.form.is_none() && e.url.is_none()))
}

/// Only an explicit accept approves; decline, cancel or anything unreadable denies.
pub(crate) fn accepted(result: &ElicitResult) -> bool {
    matches!(result.action, ElicitationAction::Accept)
}

/// How this request's client can be asked: to approve a call, and the
/// question of an `ask_human` call (question.rs).
pub(crate) enum Approval {
    /// 2025-11-25 and older: an `elicitation/create` request in the middle of
    /// the call, while the executor holds the call before it runs.
    Elicit {
        /// The client's session.
        peer: Peer<RoleServer>,
        /// Whether it declared form elicitation.
        able: bool,
        /// How long to wait for its answer.
        timeout: Duration,
        /// The tools this session's person allowed for the session.
        allowed: Arc<SessionAllowed>,
        /// The task the call runs as, if any: `input_required` while its
        /// client is asked.
        task: Option<crate::tasks::TaskMark>,
    },
    /// 2026-07-28: the first `tools/call` answers `input_required`; the
    /// retry brings the answer and the sealed request state back.
    RoundTrip {
        /// Seals and redeems the states.
        states: Arc<States>,
        /// Whether the client declared form elicitation.
        able: bool,
        /// On a retry: the request state and the client's responses.
        retry: Option<(String, Option<InputResponses>)>,
    },
}

/// Why a returned request state was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum StateRefused {
    /// Forged, tampered with, for another call, expired or malformed.
    #[error("request state refused: {0}")]
    Seal(#[from] RequestStateError),
    /// Sealed by lovia but not a payload lovia writes.
    #[error("request state refused: unreadable payload")]
    Payload,
    /// Already redeemed once.
    #[error("request state refused: already used")]
    Replayed,
    /// The redeemed states cannot be checked (too many remembered, or the
    /// shared store failed).
    #[error("request state refused: {0}")]
    Unchecked(String),
}

/// Seals and redeems the request states of one server.
pub(crate) struct States {
    codec: RequestStateCodec,
    ttl: Duration,
    /// Bound into every state: a state of one tenant never opens for another.
    tenant: Option<String>,
    /// Nonces redeemed, each until it would have expired.
    redeemed: Arc<dyn RedeemedStates>,
}

impl std::fmt::Debug for States {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("States").field("ttl", &self.ttl).finish_non_exhaustive()
    }
}

/// What the associated data of a state binds: the call exactly as the
/// executor is about to run it. JSON keeps the parts unambiguous.
fn binding(tenant: Option<&str>, request: &ApprovalRequest) -> Vec<u8> {
    serde_json::json!(["lovia-mcp approval v2", tenant, request.tool, request.arguments, request.plugin_digest])
        .to_string()
        .into_bytes()
}

fn random_bytes<const N: usize>() -> Result<[u8; N], getrandom::Error> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes)?;
    Ok(bytes)
}

impl States {
    /// Without a `key`, a fresh one: a state sealed by another server (or an
    /// earlier run of this one) never opens here. Without `redeemed`, this
    /// server's memory.
    pub(crate) fn new(
        ttl: Duration,
        key: Option<&StateKey>,
        redeemed: Option<Arc<dyn RedeemedStates>>,
        tenant: Option<String>,
    ) -> Result<Self, NewServerError> {
        let key = match key {
            Some(key) => key.bytes().to_vec(),
            None => random_bytes::<32>().map_err(|e| NewServerError::Randomness { reason: e.to_string() })?.to_vec(),
        };
        let codec = RequestStateCodec::try_new(key).map_err(|e| NewServerError::Key { reason: e.to_string() })?;
        let redeemed = redeemed.unwrap_or_else(|| Arc::new(InMemory::default()));
        Ok(Self { codec, ttl, tenant, redeemed })
    }

    /// The `input_required` result asking the client to approve `request`.
    pub(crate) fn ask(
        &self,
        request: &ApprovalRequest,
        message: String,
    ) -> Result<InputRequiredResult, getrandom::Error> {
        let state = self.seal(&binding(self.tenant.as_deref(), request))?;
        let mut requests = InputRequests::new();
        requests
            .insert(INPUT_KEY.to_owned(), InputRequest::Elicitation(ElicitRequest::new(elicitation(message, None))));
        Ok(InputRequiredResult::new(Some(requests), Some(state)))
    }

    /// Opens `state` for exactly `request` and redeems it; then whether the
    /// client's answer is an explicit accept.
    pub(crate) async fn redeem(
        &self,
        state: &str,
        responses: Option<&InputResponses>,
        request: &ApprovalRequest,
    ) -> Result<bool, StateRefused> {
        self.open(state, &binding(self.tenant.as_deref(), request)).await?;
        let answer = responses
            .and_then(|r| r.get(INPUT_KEY))
            .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok());
        Ok(answer.as_ref().is_some_and(accepted))
    }

    /// The tenant every state of this server is bound to.
    pub(crate) fn tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    /// A fresh state: a random nonce sealed under `binding` (associated
    /// data) with this server's time to live.
    pub(crate) fn seal(&self, binding: &[u8]) -> Result<String, getrandom::Error> {
        let nonce = hex::encode(random_bytes::<16>()?);
        Ok(self.codec.seal_with(nonce.as_bytes(), &SealOptions::new().associated_data(binding).ttl(self.ttl)))
    }

    /// Opens `state` under `binding` and redeems its nonce: a state opens
    /// once, for the call it was sealed for.
    pub(crate) async fn open(&self, state: &str, binding: &[u8]) -> Result<(), StateRefused> {
        let nonce = self.codec.open_with(state, binding)?;
        let nonce = String::from_utf8(nonce).map_err(|_| StateRefused::Payload)?;
        // Remembered for a whole TTL from now: the state expires sooner.
        let expires = SystemTime::now() + self.ttl;
        match self.redeemed.redeem(&nonce, expires).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(StateRefused::Replayed),
            Err(reason) => Err(StateRefused::Unchecked(reason)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(arguments: &str) -> ApprovalRequest {
        ApprovalRequest {
            call_id: "mcp_1".into(),
            tool: "launch".into(),
            arguments: arguments.into(),
            plugin_digest: Some("ab".repeat(32)),
        }
    }

    fn accept() -> InputResponses {
        let mut r = InputResponses::new();
        r.insert(INPUT_KEY.into(), serde_json::json!({"action": "accept", "content": {}}));
        r
    }

    /// The in-memory store answers at once: the future is ready when first polled.
    fn now<T>(future: impl std::future::Future<Output = T>) -> T {
        let mut future = std::pin::pin!(future);
        match future.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
            std::task::Poll::Ready(value) => value,
            std::task::Poll::Pending => panic!("the in-memory store never waits"),
        }
    }

    fn state_of(result: &InputRequiredResult) -> String {
        result.request_state.clone().unwrap_or_default()
    }

    #[test]
    fn a_state_opens_once_for_its_own_call_only() {
        let states = States::new(Duration::from_secs(60), None, None, None).expect("key");
        let asked = states.ask(&request(r#"{"target":"a"}"#), "m".into()).expect("ask");
        let state = state_of(&asked);
        // Another call's arguments: the binding differs.
        assert!(matches!(
            now(states.redeem(&state, Some(&accept()), &request(r#"{"target":"b"}"#))),
            Err(StateRefused::Seal(RequestStateError::IntegrityCheckFailed))
        ));
        assert!(now(states.redeem(&state, Some(&accept()), &request(r#"{"target":"a"}"#))).expect("opens"));
        assert!(matches!(
            now(states.redeem(&state, Some(&accept()), &request(r#"{"target":"a"}"#))),
            Err(StateRefused::Replayed)
        ));
    }

    #[test]
    fn another_process_key_or_a_stale_state_is_refused() {
        let a = States::new(Duration::from_secs(60), None, None, None).expect("key");
        let b = States::new(Duration::from_secs(60), None, None, None).expect("key");
        let state = state_of(&a.ask(&request("{}"), "m".into()).expect("ask"));
        assert!(matches!(now(b.redeem(&state, Some(&accept()), &request("{}"))), Err(StateRefused::Seal(_))));
        let short = States::new(Duration::from_millis(1), None, None, None).expect("key");
        let state = state_of(&short.ask(&request("{}"), "m".into()).expect("ask"));
        std::thread::sleep(Duration::from_millis(20));
        assert!(matches!(
            now(short.redeem(&state, Some(&accept()), &request("{}"))),
            Err(StateRefused::Seal(RequestStateError::Expired))
        ));
    }

    #[test]
    fn only_an_explicit_accept_approves() {
        let states = States::new(Duration::from_secs(60), None, None, None).expect("key");
        for (answer, approved) in [
            (Some(serde_json::json!({"action": "accept"})), true),
            (Some(serde_json::json!({"action": "decline"})), false),
            (Some(serde_json::json!({"action": "cancel"})), false),
            (Some(serde_json::json!({"action": "ACCEPT"})), false),
            (Some(serde_json::json!("accept")), false),
            (None, false),
        ] {
            let state = state_of(&states.ask(&request("{}"), "m".into()).expect("ask"));
            let mut responses = InputResponses::new();
            if let Some(a) = answer.clone() {
                responses.insert(INPUT_KEY.into(), a);
            }
            assert_eq!(
                now(states.redeem(&state, Some(&responses), &request("{}"))).expect("opens"),
                approved,
                "{answer:?}"
            );
        }
    }

    #[test]
    fn a_state_of_one_tenant_does_not_open_for_another() {
        let key = StateKey::new(vec![7; 32]);
        let shared: Arc<dyn RedeemedStates> = Arc::new(InMemory::default());
        let a = States::new(Duration::from_secs(60), Some(&key), Some(shared.clone()), Some("a".into())).expect("key");
        let b = States::new(Duration::from_secs(60), Some(&key), Some(shared.clone()), Some("b".into())).expect("key");
        let a2 = States::new(Duration::from_secs(60), Some(&key), Some(shared), Some("a".into())).expect("key");
        let state = state_of(&a.ask(&request("{}"), "m".into()).expect("ask"));
        assert!(matches!(now(b.redeem(&state, Some(&accept()), &request("{}"))), Err(StateRefused::Seal(_))));
        // Another server of the same tenant with the shared key and store: once.
        assert!(now(a2.redeem(&state, Some(&accept()), &request("{}"))).expect("opens"));
        assert!(matches!(now(a.redeem(&state, Some(&accept()), &request("{}"))), Err(StateRefused::Replayed)));
    }

    #[test]
    fn the_prompt_names_tool_arguments_and_plugin() {
        let text = prompt(&request(r#"{"target":"prod"}"#), Some("gated"));
        assert!(text.contains("the tool launch."), "{text}");
        assert!(text.contains(r#"Arguments (exact): {"target":"prod"}"#), "{text}");
        assert!(text.contains(&format!("plugin gated, sha256 {}", "ab".repeat(32))), "{text}");
    }
}
