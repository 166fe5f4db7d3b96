//! The names spans and attributes use: OpenTelemetry's GenAI and MCP
//! conventions where they name a thing, `lovia.` for lovia's own.
//! docs/telemetry.md lists which span carries which.

// --- GenAI conventions -------------------------------------------------------

/// `gen_ai.operation.name`: `invoke_agent`, `chat`, `execute_tool`.
pub const GEN_AI_OPERATION: &str = "gen_ai.operation.name";
/// `gen_ai.provider.name`: the model provider.
pub const GEN_AI_PROVIDER: &str = "gen_ai.provider.name";
/// `gen_ai.request.model`.
pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
/// `gen_ai.response.finish_reasons` (an array).
pub const GEN_AI_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
/// `gen_ai.usage.input_tokens`.
pub const GEN_AI_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// `gen_ai.usage.output_tokens`.
pub const GEN_AI_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// `gen_ai.agent.name`.
pub const GEN_AI_AGENT_NAME: &str = "gen_ai.agent.name";
/// `gen_ai.conversation.id`: the session.
pub const GEN_AI_CONVERSATION: &str = "gen_ai.conversation.id";
/// `gen_ai.tool.name`.
pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
/// `gen_ai.tool.call.id`.
pub const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
/// `gen_ai.tool.type`: `function` (a plugin's or a host tool), `extension`
/// (an MCP source's).
pub const GEN_AI_TOOL_TYPE: &str = "gen_ai.tool.type";
/// `gen_ai.tool.call.arguments` (content: only when captured).
pub const GEN_AI_TOOL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
/// `gen_ai.tool.call.result` (content: only when captured).
pub const GEN_AI_TOOL_RESULT: &str = "gen_ai.tool.call.result";
/// `gen_ai.input.messages` (content: only when captured).
pub const GEN_AI_INPUT_MESSAGES: &str = "gen_ai.input.messages";
/// `gen_ai.output.messages` (content: only when captured).
pub const GEN_AI_OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
/// `error.type`: why a span failed.
pub const ERROR_TYPE: &str = "error.type";

// --- MCP conventions ---------------------------------------------------------

/// `mcp.method.name`: `tools/call`, `tools/list`, …
pub const MCP_METHOD: &str = "mcp.method.name";
/// `mcp.session.id`.
pub const MCP_SESSION: &str = "mcp.session.id";
/// `mcp.protocol.version`.
pub const MCP_PROTOCOL_VERSION: &str = "mcp.protocol.version";
/// `jsonrpc.request.id`.
pub const JSONRPC_REQUEST_ID: &str = "jsonrpc.request.id";
/// `network.transport`: `pipe` (stdio) or `tcp` (HTTP).
pub const NETWORK_TRANSPORT: &str = "network.transport";

// --- HTTP and processes --------------------------------------------------------

/// `url.full` of a web tool's fetch (content: only when captured).
pub const URL_FULL: &str = "url.full";
/// `server.address` of a fetch.
pub const SERVER_ADDRESS: &str = "server.address";
/// `http.response.status_code`.
pub const HTTP_STATUS: &str = "http.response.status_code";
/// `process.exit.code` of a workspace command.
pub const PROCESS_EXIT_CODE: &str = "process.exit.code";
/// `process.command_line` (content: only when captured).
pub const PROCESS_COMMAND_LINE: &str = "process.command_line";

// --- lovia's own ---------------------------------------------------------------

/// `lovia.tenant`: the tenant a span's work is charged to.
pub const TENANT: &str = "lovia.tenant";
/// `lovia.run.id`.
pub const RUN_ID: &str = "lovia.run.id";
/// `lovia.run.resumed`: the run continues after its replica stopped.
pub const RUN_RESUMED: &str = "lovia.run.resumed";
/// `lovia.run.turn`: the 1-based turn of a model request or tool call.
pub const TURN: &str = "lovia.run.turn";
/// `lovia.plugin.name`.
pub const PLUGIN_NAME: &str = "lovia.plugin.name";
/// `lovia.plugin.version`.
pub const PLUGIN_VERSION: &str = "lovia.plugin.version";
/// `lovia.plugin.digest`: the component's SHA-256.
pub const PLUGIN_DIGEST: &str = "lovia.plugin.digest";
/// `lovia.instance.mode`: `fresh`, `session` or `pooled`.
pub const INSTANCE_MODE: &str = "lovia.instance.mode";
/// `lovia.fuel.used`: Wasm fuel an attempt burnt (with fuel metering on).
pub const FUEL_USED: &str = "lovia.fuel.used";
/// `lovia.memory.bytes`: the linear memory an attempt's instance ended with.
pub const MEMORY_BYTES: &str = "lovia.memory.bytes";
/// `lovia.limit`: the limit that ended an attempt (`timeout`, `fuel`, `memory`, …).
pub const LIMIT: &str = "lovia.limit";
/// `lovia.attempt`: the 1-based attempt of a call.
pub const ATTEMPT: &str = "lovia.attempt";
/// `lovia.output.truncated`: the result was cut to the output cap.
pub const TRUNCATED: &str = "lovia.output.truncated";
/// `lovia.tool.parent_call.id`: the call whose program made a nested call.
pub const PARENT_CALL_ID: &str = "lovia.tool.parent_call.id";
/// `lovia.approval.decision`: `approved`, `denied` or `cancelled`.
pub const APPROVAL_DECISION: &str = "lovia.approval.decision";
/// `lovia.approval.via`: how it was decided: `consumer` (whoever holds the
/// run's events: a console, an MCP elicitation, an API client; which one is
/// [`APPROVAL_BY`]), `handler`, `timeout`, `always_allow`, `default_deny`.
pub const APPROVAL_VIA: &str = "lovia.approval.via";
/// `lovia.approval.by`: who decided, where the deciding door says:
/// `http_api` (`POST /api/chat/approve`: the console or an API client),
/// `mcp_elicitation`, `mcp_session_allowance`, `mcp_input_required`,
/// `mcp_unavailable` (the client cannot be asked), `script` (`lovia run`).
pub const APPROVAL_BY: &str = "lovia.approval.by";
/// `lovia.confinement`: how a workspace command was confined.
pub const CONFINEMENT: &str = "lovia.confinement";
/// `lovia.bytes`: bytes a fetch read.
pub const BYTES: &str = "lovia.bytes";
