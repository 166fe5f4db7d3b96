//! The server side: [`McpServer`] serves an executor's tools over stdio and
//! streamable HTTP (the crate's `server` feature).

use crate::tasks::{self, TaskMark, TaskOptions, Tasks, wire};
use crate::{CallHook, CallPermit, CallStart, CatalogError, McpQuestions, PROGRESS_INTERVAL, RedeemedStates, StateKey};
use crate::{approve, call, catalog, hook, live, logging, loose, question};
use lovia_host::{Executor, RunState, ToolCall};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock, CreateTaskResult,
    CustomRequest, CustomResult, ErrorCode, GetTaskParams, GetTaskResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
    UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Why serving stopped or could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The MCP session could not start (the client's `initialize` failed or
    /// the transport closed first).
    #[error("the MCP session did not start: {reason}")]
    Start {
        /// What went wrong.
        reason: String,
    },
    /// The session's task ended abnormally.
    #[error("the MCP session ended abnormally: {reason}")]
    Session {
        /// What went wrong.
        reason: String,
    },
}

/// Why a server could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NewServerError {
    /// A tool cannot be described to MCP clients.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The operating system gave no randomness for the key that seals
    /// approval request states.
    #[error("no randomness for the approval key: {reason}")]
    Randomness {
        /// What the operating system said.
        reason: String,
    },
    /// The sealing key was refused by the codec.
    #[error("the approval key was refused: {reason}")]
    Key {
        /// What the codec said.
        reason: String,
    },
}

/// How many tools one `tools/list` page holds; the next page is behind an
/// opaque `nextCursor`.
pub const TOOLS_PAGE: usize = 100;

/// The longest an approval may wait for the client: one hour.
pub const MAX_APPROVAL_TIMEOUT: Duration = Duration::from_secs(3600);

/// Options of [`McpServer::with_options`].
#[derive(Clone)]
#[non_exhaustive]
pub struct McpOptions {
    /// How long a call that needs approval waits for the client's answer
    /// (2025-11-25), and how long an `input_required` request state stays
    /// valid (2026-07-28); past it the call is not approved. Default: 600 s,
    /// as `approval_timeout_secs` in `lovia serve`; at most
    /// [`MAX_APPROVAL_TIMEOUT`] (a longer value is cut to it).
    pub approval_timeout: Duration,
    /// Plugin names by digest, shown in the approval prompt beside the
    /// digest. Default: empty (the prompt shows the digest only).
    pub plugin_names: HashMap<String, String>,
    /// The least time between two `notifications/progress` of one call: the
    /// first message goes at once, then the latest of each interval when it
    /// ends, and the last before the result always (docs/mcp.md,
    /// "Progress"). Default: [`PROGRESS_INTERVAL`], 100 ms; zero sends
    /// every message.
    pub progress_interval: Duration,
    /// Whether the tool list may change while serving ([`McpServer::replace`]):
    /// declares `tools.listChanged` and sends `notifications/tools/list_changed`
    /// to every client after each replacement. Default: false (the list is
    /// fixed, and nothing is announced).
    pub list_changed: bool,
    /// The tenant every call runs for (`RunState::tenant`: its fuel budget
    /// is charged), also bound into every sealed request state, so a state
    /// of one tenant never opens for another. Default: none.
    pub tenant: Option<String>,
    /// Admits each call before it runs and hears how it ended (quotas,
    /// metrics). Default: none, every call is admitted.
    pub hook: Option<Arc<dyn CallHook>>,
    /// The key that seals 2026-07-28 request states, shared by the
    /// replicas behind one load balancer so a state opens on any of them.
    /// Default: a random key per server, so a state opens only on the
    /// server that sealed it.
    pub state_key: Option<StateKey>,
    /// Where redeemed request states are remembered, shared by the replicas
    /// that share [`state_key`](Self::state_key). Default: this server's
    /// memory, at most [`crate::MAX_REDEEMED_IN_MEMORY`] at once.
    pub redeemed: Option<Arc<dyn RedeemedStates>>,
    /// Text the server's `instructions` carry after lovia's one-line
    /// introduction and before each plugin's instructions, such as a
    /// workspace's `## Workspace` section. Default: none.
    pub instructions: Option<String>,
    /// The questions of the `ask_human` tool this server serves
    /// ([`McpQuestions::tool`], in the executor's toolset): each is asked of
    /// the client whose call asks it (docs/mcp.md, "Questions"). Default:
    /// none (a served `ask_human` of another channel asks that channel).
    pub questions: Option<Arc<McpQuestions>>,
    /// The tasks this server keeps for its 2025-11-25 clients (docs/mcp.md,
    /// "Tasks"): how many at most, and where. Default:
    /// [`TaskOptions::default`], 100 in this process's memory.
    pub tasks: TaskOptions,
}

impl std::fmt::Debug for McpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpOptions")
            .field("approval_timeout", &self.approval_timeout)
            .field("plugin_names", &self.plugin_names)
            .field("progress_interval", &self.progress_interval)
            .field("list_changed", &self.list_changed)
            .field("tenant", &self.tenant)
            .field("hook", &self.hook.is_some())
            .field("state_key", &self.state_key)
            .field("redeemed", &self.redeemed.is_some())
            .field("questions", &self.questions)
            .field("tasks", &self.tasks)
            .finish()
    }
}

impl Default for McpOptions {
    fn default() -> Self {
        Self {
            approval_timeout: Duration::from_secs(600),
            plugin_names: HashMap::new(),
            progress_interval: PROGRESS_INTERVAL,
            list_changed: false,
            tenant: None,
            hook: None,
            state_key: None,
            redeemed: None,
            instructions: None,
            questions: None,
            tasks: TaskOptions::default(),
        }
    }
}

/// An MCP server over one executor's tools. Cheap to clone: every clone
/// shares the executor and the tool catalog, and sees a [`replace`](Self::replace).
#[derive(Clone)]
pub struct McpServer {
    /// The executor and its listing, swapped whole on a replacement.
    live: Arc<live::Live>,
    /// Numbers the calls: lovia call ids must be unique within a run, and
    /// the run of each call is its own.
    next_call: Arc<AtomicU64>,
    /// Seals and redeems `input_required` request states (one key per server).
    states: Arc<approve::States>,
    options: Arc<McpOptions>,
    /// The level of tool log lines this session's client asked for
    /// (`logging/setLevel`); each HTTP session gets its own.
    log_level: logging::SessionLevel,
    /// The tools this session's person allowed for the session; each HTTP
    /// session gets its own.
    allowed: Arc<approve::SessionAllowed>,
    /// The server's tasks, shared by every session.
    tasks: Arc<Tasks>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer").field("tools", &self.live.current().tools.len()).finish_non_exhaustive()
    }
}

impl McpServer {
    /// A server for the tools of `exec`, listed in the toolset's order.
    /// Approvals wait [`McpOptions::default`]'s 600 s.
    pub fn new(exec: Executor) -> Result<Self, NewServerError> {
        Self::with_options(exec, McpOptions::default())
    }

    /// A server with `options`.
    pub fn with_options(exec: Executor, mut options: McpOptions) -> Result<Self, NewServerError> {
        let plugin_names = std::mem::take(&mut options.plugin_names);
        let catalog = live::Catalog {
            tools: Arc::new(catalog::describe(exec.tools())?),
            task_tools: Arc::new(catalog::task_tools(&exec)),
            exec,
            plugin_names: Arc::new(plugin_names),
        };
        options.approval_timeout = options.approval_timeout.min(MAX_APPROVAL_TIMEOUT);
        let states = approve::States::new(
            options.approval_timeout,
            options.state_key.as_ref(),
            options.redeemed.clone(),
            options.tenant.clone(),
        )?;
        let tasks = Arc::new(Tasks::new(&options.tasks, options.tenant.as_deref()));
        Ok(Self {
            tasks,
            live: Arc::new(live::Live::new(catalog)),
            next_call: Arc::new(AtomicU64::new(1)),
            states: Arc::new(states),
            options: Arc::new(options),
            log_level: logging::SessionLevel::default(),
            allowed: Arc::default(),
        })
    }

    /// The tools as `tools/list` gives them now.
    pub fn tools(&self) -> Arc<Vec<Tool>> {
        self.live.current().tools.clone()
    }

    /// Serves `exec`'s tools from now on, to every clone of this server and
    /// every connected client: a listing or a call that has started keeps the
    /// old catalog to its end, the next one gets the new. With
    /// [`McpOptions::list_changed`], each client is sent
    /// `notifications/tools/list_changed`. `plugin_names` replaces
    /// [`McpOptions::plugin_names`]. On an error nothing changes.
    pub fn replace(&self, exec: Executor, plugin_names: HashMap<String, String>) -> Result<(), CatalogError> {
        let tools = catalog::describe(exec.tools())?;
        let task_tools = Arc::new(catalog::task_tools(&exec));
        self.live.replace(live::Catalog {
            exec,
            tools: Arc::new(tools),
            plugin_names: Arc::new(plugin_names),
            task_tools,
        });
        Ok(())
    }

    /// Serves one client on this process's stdin and stdout until the client
    /// closes them. Nothing else may write to stdout: it is the protocol.
    /// A client that closes them before starting a session (one that only
    /// probed with `server/discover` or `ping`, as the Python SDK and fastmcp
    /// do, or that sent nothing) ends it normally: that is not an error.
    pub async fn serve_stdio(self) -> Result<(), ServeError> {
        // When both are pipes (as an MCP client starts a server), rmcp reads
        // and writes them on tokio's reactor; tokio's own stdin and stdout
        // hand every read and write to a blocking thread and back, which
        // was most of a lone call's cost over stdio (docs/performance.md).
        let (read, write) = rmcp::transport::stdio_pipes();
        // 2025-11-25 tasks, which rmcp does not model, around its transport (tasks/wire.rs).
        let transport = wire::TaskWire::new(
            rmcp::transport::async_rw::AsyncRwTransport::new_server(wire::LiftTasks::new(read), write),
            self.task_offer(),
        );
        let service = match self.serve(transport).await {
            Ok(service) => service,
            Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => {
                tracing::debug!("the client closed stdin before starting a session");
                return Ok(());
            }
            Err(e) => return Err(ServeError::Start { reason: e.to_string() }),
        };
        service.waiting().await.map_err(|e| ServeError::Session { reason: e.to_string() })?;
        Ok(())
    }
}

impl McpServer {
    /// A clone for a new session: the same tools and keys, a level of its own.
    pub(crate) fn for_session(&self) -> Self {
        Self { log_level: logging::SessionLevel::default(), allowed: Arc::default(), ..self.clone() }
    }

    /// Whether a 2026-07-28 call runs as a task (SEP-2663, where the server
    /// decides): the client declared the extension, the tool may run long,
    /// and it asks nothing of a person (approvals and questions are that
    /// revision's round trips, which a plain call answers).
    fn runs_as_sep2663_task(&self, request: &CallToolRequestParams, context: &RequestContext<RoleServer>) -> bool {
        if !(self.tasks.on() && stateless(context) && request.request_state.is_none()) {
            return false;
        }
        if !context.client_capabilities().is_some_and(|c| c.supports_tasks()) {
            return false;
        }
        let catalog = self.live.current();
        catalog.task_tools.contains(request.name.as_ref())
            && catalog
                .exec
                .tools()
                .get(&request.name)
                .is_some_and(|t| !t.may_need_approval() && t.spec().name != lovia_host::human::ASK_HUMAN)
    }

    /// What a session's transport needs to declare tasks, when they are on.
    pub(crate) fn task_offer(&self) -> Option<wire::TaskOffer> {
        self.tasks.on().then(|| wire::TaskOffer { live: self.live.clone() })
    }

    /// A `tools/call` that asked for a task, or a `tasks/*` request, as
    /// tasks/wire.rs renamed them: answered here, since rmcp does not know
    /// 2025-11-25 tasks. A 2026-07-28 request, or any when tasks are off, is
    /// answered as before: the call runs plainly, the others are not found.
    async fn task_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<Value, ErrorData> {
        let method = request.method.as_str();
        let params = request.params.unwrap_or(Value::Null);
        if !self.tasks.on() || stateless(&context) {
            if method == wire::TASK_CALL {
                let legacy = !stateless(&context);
                let (call, arguments) = loose::split(Some(params))?;
                return Ok(loose::custom_result(self.call(call, arguments, context, None).await?, legacy)?.0);
            }
            return Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, wire::original(method).to_owned(), None));
        }
        let task_id = || {
            params.get("taskId").and_then(Value::as_str).ok_or_else(|| {
                ErrorData::invalid_params(format!("{} needs a taskId string", wire::original(method)), None)
            })
        };
        match method {
            wire::TASK_CALL => {
                let ttl = params.get("task").and_then(|t| t.get("ttl")).and_then(Value::as_u64);
                let (call, arguments) = loose::split(Some(params.clone()))?;
                if !self.live.current().task_tools.contains(call.name.as_ref()) {
                    return Err(ErrorData::new(
                        ErrorCode::METHOD_NOT_FOUND,
                        format!(
                            "tool {:?} does not run as a task (it offers no execution.taskSupport); call it without `task`",
                            call.name
                        ),
                        None,
                    ));
                }
                let row = self.tasks.create(&call.name, ttl).await?;
                // The call outlives its request: its own token, which
                // `tasks/cancel` cancels (and so lovia's cancel of its run).
                let cancel = CancellationToken::new();
                let mut detached = context;
                detached.ct = cancel.clone();
                let server = self.clone();
                let mark = TaskMark { tasks: self.tasks.clone(), id: row.id.clone() };
                self.tasks.spawn(&row, cancel, async move { server.call(call, arguments, detached, Some(mark)).await });
                Ok(tasks::created_json(&row))
            }
            wire::GET => self.tasks.get(task_id()?).await,
            wire::RESULT => self.tasks.result(task_id()?, &context.ct).await,
            wire::LIST => self.tasks.list(params.get("cursor").and_then(Value::as_str)).await,
            wire::CANCEL => self.tasks.cancel(task_id()?).await,
            other => Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, wire::original(other).to_owned(), None)),
        }
    }

    /// One `tools/call` with its argument text as the client sent it.
    async fn call(
        &self,
        request: CallToolRequestParams,
        arguments: String,
        context: RequestContext<RoleServer>,
        task: Option<TaskMark>,
    ) -> Result<CallToolResponse, ErrorData> {
        // The whole call runs against the catalog of its start.
        let catalog = self.live.current();
        let n = self.next_call.fetch_add(1, Ordering::Relaxed);
        let token =
            context.meta.get_progress_token().or_else(|| request.meta.as_ref().and_then(|m| m.get_progress_token()));
        let span = crate::trace::server_call(
            &catalog.exec.settings().telemetry,
            &request.name,
            &context,
            request.meta.as_ref(),
            self.options.tenant.as_deref(),
        );
        let call = ToolCall::new(format!("mcp_{n}"), request.name.into_owned(), arguments);
        let state = RunState {
            run_id: format!("mcp-{n}"),
            turn: 1,
            tenant: self.options.tenant.clone(),
            ..RunState::default()
        };
        let permit: Box<dyn CallPermit> = match &self.options.hook {
            None => Box::new(hook::Unhooked),
            Some(hook) => match hook
                .admit(&CallStart { call: &call, run: &state, tool: catalog.exec.tools().get(&call.name) })
                .await
            {
                Ok(permit) => permit,
                Err(message) => return Ok(CallToolResult::error(vec![ContentBlock::text(message)]).into()),
            },
        };
        let able = approve::can_elicit(context.client_capabilities().as_ref());
        // 2026-07-28 forbids server-to-client requests: approval is a round
        // trip the client drives. Older revisions ask in the middle of the call.
        let approval = Arc::new(if stateless(&context) {
            approve::Approval::RoundTrip {
                states: self.states.clone(),
                able,
                retry: request.request_state.map(|state| (state, request.input_responses)),
            }
        } else {
            approve::Approval::Elicit {
                peer: context.peer.clone(),
                able,
                timeout: self.options.approval_timeout,
                allowed: self.allowed.clone(),
                task,
            }
        });
        // A call of `ask_human` asks its question of this same client, and
        // so does a program's (`run_code`'s nested `ask_human`, whose call id
        // is `<this call>/<n>`): every call is registered while it runs.
        let question = match &self.options.questions {
            Some(questions) => {
                let asking = Arc::new(question::QuestionCall {
                    approval: approval.clone(),
                    tool: call.name.clone(),
                    arguments: call.arguments.clone(),
                    outcome: std::sync::Mutex::new(None),
                });
                Some((questions.register(&call.id, asking.clone()), asking))
            }
            None => None,
        };
        let (_registered, question) = question.unzip();
        // A 2026-07-28 request names its level in `_meta`; a session keeps the one it set.
        let log = context.meta.log_level().map(logging::Threshold::of).or_else(|| self.log_level.get());
        let call = call::Request {
            call,
            state,
            permit,
            log: log.map(|threshold| (context.peer.clone(), threshold)),
            cancelled: context.ct.clone(),
            progress: token.map(|t| (context.peer.clone(), t, self.options.progress_interval)),
            approval,
            question,
            plugin_names: catalog.plugin_names.clone(),
        };
        let answer = span.within(call::run(&catalog.exec, call)).await;
        if let Err(error) = &answer {
            span.fail(error.code.0.to_string(), error.message.to_string());
        }
        answer
    }
}

/// Whether the request's revision is 2026-07-28 or later (no sessions, no
/// server-to-client requests).
fn stateless(context: &RequestContext<RoleServer>) -> bool {
    context.protocol_version().is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
}

impl ServerHandler for McpServer {
    #[expect(deprecated, reason = "MCP logging (SEP-2577); see logging.rs")]
    fn get_info(&self) -> ServerConfig {
        let tools = ServerCapabilities::builder().enable_logging().enable_tools();
        // 2026-07-28 tasks (SEP-2663) are rmcp's extension; 2025-11-25's
        // capability goes on the wire (tasks/wire.rs).
        let tools = if self.tasks.on() { tools.enable_tasks() } else { tools };
        let capabilities =
            if self.options.list_changed { tools.enable_tool_list_changed().build() } else { tools.build() };
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("lovia", env!("CARGO_PKG_VERSION")))
            .with_instructions(catalog::instructions(
                self.live.current().exec.tools(),
                self.options.instructions.as_deref(),
            ))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.live.current().tools.clone();
        let cursor = request.and_then(|r| r.cursor);
        let start = match cursor.as_deref() {
            None => 0,
            Some(c) => catalog::page_start(c, tools.len())
                .ok_or_else(|| ErrorData::invalid_params(format!("unknown tools/list cursor {c:?}"), None))?,
        };
        let end = start.saturating_add(TOOLS_PAGE).min(tools.len());
        let mut page = ListToolsResult::with_all_items(tools[start..end].to_vec());
        page.next_cursor = (end < tools.len()).then(|| catalog::cursor_at(end));
        Ok(page)
    }

    #[expect(deprecated, reason = "MCP logging (SEP-2577); see logging.rs")]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.log_level.set(request.level);
        Ok(())
    }

    // No `get_tool`: rmcp would validate arguments against the schema itself
    // and answer with a protocol error; lovia validates, and an invalid call
    // is an `isError` result with lovia's exact message.
    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // The argument text as the client sent it, re-serialised: an absent
        // `arguments` is the empty text lovia reads as `{}`.
        let arguments = request.arguments.take().map(|a| serde_json::Value::Object(a).to_string()).unwrap_or_default();
        if self.runs_as_sep2663_task(&request, &context) {
            let row = self.tasks.create(&request.name, None).await?;
            let cancel = CancellationToken::new();
            let mut detached = context;
            detached.ct = cancel.clone();
            let server = self.clone();
            self.tasks.spawn(&row, cancel, async move { server.call(request, arguments, detached, None).await });
            return Ok(CallToolResponse::Task(CreateTaskResult::new(tasks::sep2663_task(&row))));
        }
        self.call(request, arguments, context, None).await
    }

    /// SEP-2663 `tasks/get`: the task, its result inline once it ended.
    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        Ok(GetTaskResult::new(self.tasks.detailed(&request.task_id).await?))
    }

    /// SEP-2663 `tasks/cancel`: `cancelled` at once, the call stopped.
    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks.cancel(&request.task_id).await.map(drop)
    }

    /// SEP-2663 `tasks/update`: lovia's tasks ask nothing of the client (a
    /// call that needs a person runs as a plain call, whose round trip asks).
    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // Known or not, the answer is the same: nothing to update.
        let _ = self.tasks.get(&request.task_id).await?;
        Err(ErrorData::invalid_params(format!("task {:?} asks for no input", request.task_id), None))
    }

    /// A `tools/call` whose `arguments` is not an object arrives here
    /// (loose.rs); every other unknown method is not found, as in rmcp.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        if wire::is_lifted(&request.method) {
            return self.task_request(request, context).await.map(CustomResult::new);
        }
        if request.method != loose::TOOLS_CALL {
            return Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, request.method, None));
        }
        let (params, arguments) = loose::split(request.params)?;
        let legacy = !stateless(&context);
        loose::custom_result(self.call(params, arguments, context, None).await?, legacy)
    }

    // 2026-07-28: `list_changed` goes on `subscriptions/listen` streams that
    // ask for it; while the list cannot change, listening is not offered.
    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        let wants = requested.tools_list_changed == Some(true);
        self.options.list_changed.then(|| {
            if wants { SubscriptionFilter::builder().tools_list_changed().build() } else { SubscriptionFilter::new() }
        })
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        live::announce_to_subscription(&subscription, self.live.changes()).await;
        Ok(())
    }

    // 2025-11-25 and older: a session that completed `initialize` gets
    // `list_changed` on its own stream, unasked, as the capability says.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if self.options.list_changed {
            tokio::spawn(live::announce_to_session(context.peer, self.live.changes()));
        }
    }
}
