//! `lovia bench --only code`: code mode's engine (its size and compile),
//! one program's cost (an empty one; ten nested calls beside ten direct
//! calls; ten 10 ms calls at once beside one model turn making them), and a scripted support task run tool by tool and as one program:
//! the model turns, the tokens of tool results the model reads, and the
//! wall time of the tools (docs/performance.md, "Code mode").

use super::{Latency, turn};
use crate::CliError;
use lovia_host::{
    ApprovalRequest, CallContext, ExecSettings, Executor, HandlerAnswer, Host, NeedsApproval, RunState, Tool, ToolCall,
    ToolOutput, ToolSource, Toolset,
};
use serde::Serialize;
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

/// The code-mode rows.
#[derive(Serialize)]
pub(super) struct CodeFigure {
    /// The engine component's size.
    engine_bytes: usize,
    /// Compiling it (once per process).
    compile_ms: f64,
    /// `return 1`: a fresh instance, the program parsed and run.
    empty_program: Latency,
    /// A program that calls `echo` ten times.
    ten_calls_program: Latency,
    /// The floor: the same ten `echo` calls as ten direct one-call turns.
    ten_direct_calls: Latency,
    /// A program that calls `nap` (a 10 ms sleep) ten times at once
    /// (`Promise.all`).
    ten_naps_program: Latency,
    /// The same ten calls as the parallel calls of one model turn.
    ten_naps_turn: Latency,
    /// The support task, tool by tool.
    task_tool_by_tool: Task,
    /// The support task as one program.
    task_code_mode: Task,
}

/// One way of doing the support task.
#[derive(Serialize)]
pub(super) struct Task {
    /// Model turns that call tools.
    model_turns: u32,
    /// Tool results the model reads.
    results: usize,
    /// Their characters, and the tokens they make at 4 characters a token
    /// (the runner's estimate).
    result_chars: usize,
    result_tokens: usize,
    /// The wall time of the tool calls (the model's own time excluded).
    tools: Latency,
}

/// The orders of the task: 20, each a JSON object of about 200 characters.
fn order(id: usize) -> serde_json::Value {
    let customers = ["ada", "grace", "linus", "barbara", "ken"];
    json!({
        "id": format!("A-{}", 1000 + id),
        "customer": customers[id % customers.len()],
        "status": if id % 7 == 3 { "cancelled" } else { "delivered" },
        "total_cents": (id * 1_237) % 9_000 + 500,
        "items": [{"sku": format!("SKU-{id:04}"), "qty": 1 + id % 3}],
        "shipping": {"carrier": "post", "tracking": format!("TRK{id:08}")}
    })
}

fn tools() -> Result<Vec<Tool>, CliError> {
    let error = |e: lovia_host::InvalidTool| CliError::new(e.to_string());
    let lookup = Tool::builder("lookup_order")
        .description("Look up an order by its id.")
        .parameters(json!({"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"], "additionalProperties": false}))
        .invoke(|args: serde_json::Value, _| async move {
            let id = args["order_id"].as_str().and_then(|s| s.strip_prefix("A-")).and_then(|n| n.parse::<usize>().ok());
            Ok(ToolOutput::Json(order(id.unwrap_or(1000) - 1000)))
        })
        .map_err(error)?;
    let refund = Tool::builder("refund")
        .description("Refund an order; needs approval.")
        .parameters(json!({"type": "object", "properties": {"order_id": {"type": "string"}, "amount_cents": {"type": "integer"}}, "required": ["order_id", "amount_cents"], "additionalProperties": false}))
        .invoke(|args: serde_json::Value, _| async move {
            Ok(ToolOutput::Text(format!("Refunded {} cents on {}", args["amount_cents"], args["order_id"].as_str().unwrap_or_default())))
        })
        .map_err(error)?
        .with_approval(NeedsApproval::Always);
    let echo = Tool::builder("echo")
        .parameters(json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}))
        .invoke(|args: serde_json::Value, _| async move {
            Ok(ToolOutput::Text(args["text"].as_str().unwrap_or_default().to_owned()))
        })
        .map_err(error)?;
    let nap = Tool::builder("nap")
        .description("Waits 10 ms.")
        .invoke(|_: serde_json::Value, _| async move {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            Ok(ToolOutput::Text("rested".into()))
        })
        .map_err(error)?;
    Ok(vec![lookup, refund, echo, nap])
}

/// The task as a program: look up 20 orders, total those over $30 that
/// are not cancelled, refund the largest (asked, and allowed).
const TASK: &str = r#"
const orders = [];
for (let n = 0; n < 20; n++) orders.push(await tools.lookup_order({ order_id: `A-${1000 + n}` }));
const open = orders.filter((o) => o.status !== "cancelled" && o.total_cents > 3000);
const total = open.reduce((sum, o) => sum + o.total_cents, 0);
const biggest = open.reduce((a, b) => (b.total_cents > a.total_cents ? b : a));
const refund = await tools.refund({ order_id: biggest.id, amount_cents: biggest.total_cents });
return `${open.length} orders over $30 total ${total} cents; ${refund}`;
"#;

pub(super) async fn code(host: &Host) -> Result<CodeFigure, CliError> {
    let started = Instant::now();
    let engine = Arc::new(lovia_code::CodeEngine::new(host).map_err(|e| CliError::new(e.to_string()))?);
    let compile_ms = started.elapsed().as_secs_f64() * 1e3;
    let tools = tools()?;
    let run_code = lovia_code::run_code(engine, &tools, lovia_code::CodeLimits::default())
        .map_err(|e| CliError::new(e.to_string()))?;
    let toolset = Toolset::new()
        .with(ToolSource::AgentTools, tools.into_iter().chain([run_code]))
        .map_err(|e| CliError::new(e.to_string()))?;
    // The person always allows the refund: the approval's wait is not measured.
    let allow = |_: &ApprovalRequest, _: &CallContext| Ok(HandlerAnswer::Allow);
    let settings = ExecSettings::default().with_approval_handler(Some(Arc::new(allow)));
    let exec = Executor::new(toolset, settings);
    let run = RunState::default();
    let program = |code: &str| ToolCall::new("p", "run_code", json!({ "code": code }).to_string());

    let empty_program = sample(10, 200, &exec, &run, || vec![vec![program("return 1")]]).await;
    let ten = "for (let i = 0; i < 10; i++) await tools.echo({ text: `t${i}` });";
    let ten_calls_program = sample(10, 200, &exec, &run, || vec![vec![program(ten)]]).await;
    let direct = || {
        (0..10)
            .map(|i| vec![ToolCall::new(format!("e{i}"), "echo", json!({"text": format!("t{i}")}).to_string())])
            .collect()
    };
    let ten_direct_calls = sample(10, 200, &exec, &run, direct).await;
    let naps = "await Promise.all(Array.from({ length: 10 }, () => tools.nap()));";
    let ten_naps_program = sample(3, 50, &exec, &run, || vec![vec![program(naps)]]).await;
    let nap_turn = || vec![(0..10).map(|i| ToolCall::new(format!("n{i}"), "nap", "{}")).collect()];
    let ten_naps_turn = sample(3, 50, &exec, &run, nap_turn).await;

    // Tool by tool: one turn of 20 lookups, then one turn with the refund.
    let lookups: Vec<ToolCall> = (0..20)
        .map(|n| {
            ToolCall::new(format!("l{n}"), "lookup_order", json!({"order_id": format!("A-{}", 1000 + n)}).to_string())
        })
        .collect();
    let refund = vec![ToolCall::new("r", "refund", json!({"order_id": "A-1007", "amount_cents": 9159}).to_string())];
    let mut read = Vec::new();
    for calls in [&lookups, &refund] {
        let (results, _) = outputs(&exec, calls, &run).await;
        read.extend(results);
    }
    let task_tool_by_tool = Task {
        model_turns: 2,
        results: read.len(),
        result_chars: read.iter().map(|r| r.chars().count()).sum(),
        result_tokens: read.iter().map(|r| r.chars().count().div_ceil(4)).sum(),
        tools: sample(5, 100, &exec, &run, || vec![lookups.clone(), refund.clone()]).await,
    };
    let (read, _) = outputs(&exec, &[program(TASK)], &run).await;
    let task_code_mode = Task {
        model_turns: 1,
        results: read.len(),
        result_chars: read.iter().map(|r| r.chars().count()).sum(),
        result_tokens: read.iter().map(|r| r.chars().count().div_ceil(4)).sum(),
        tools: sample(5, 100, &exec, &run, || vec![vec![program(TASK)]]).await,
    };
    Ok(CodeFigure {
        engine_bytes: lovia_code::ENGINE_BYTES.len(),
        compile_ms,
        empty_program,
        ten_calls_program,
        ten_direct_calls,
        ten_naps_program,
        ten_naps_turn,
        task_tool_by_tool,
        task_code_mode,
    })
}

/// The outputs the model reads for `calls`, and whether any is an error.
async fn outputs(exec: &Executor, calls: &[ToolCall], run: &RunState) -> (Vec<String>, bool) {
    let results = exec.run_turn(calls, run, &lovia_host::EventSink::none()).await.unwrap_or_default();
    let failed = results.iter().any(|r| r.is_error);
    (results.into_iter().map(|r| r.output).collect(), failed)
}

/// `samples` runs after `warm_up`: each runs the turns `turns()` gives, in order.
async fn sample(
    warm_up: usize,
    samples: usize,
    exec: &Executor,
    run: &RunState,
    turns: impl Fn() -> Vec<Vec<ToolCall>>,
) -> Latency {
    let mut times = Vec::with_capacity(samples);
    for i in 0..warm_up + samples {
        let mut elapsed = 0.0;
        for calls in turns() {
            elapsed += turn(exec, &calls, run).await.0.as_secs_f64();
        }
        if i >= warm_up {
            times.push(elapsed);
        }
    }
    Latency::of_seconds(times)
}

pub(super) fn rows(c: &CodeFigure) -> String {
    let row = |name: &str, l: &Latency| {
        format!("code        {name:<44} p50 {:>9.1} µs   p99 {:>9.1} µs\n", l.p50_us, l.p99_us)
    };
    let mut out = format!(
        "code        engine: QuickJS component, {} bytes; compiled in {:.0} ms\n",
        c.engine_bytes, c.compile_ms
    );
    out += &row("empty program (fresh instance)", &c.empty_program);
    out += &row("program making 10 calls of echo", &c.ten_calls_program);
    out += &row("floor: the same 10 calls, direct", &c.ten_direct_calls);
    out += &row("program: 10 calls of a 10 ms tool at once", &c.ten_naps_program);
    out += &row("floor: the same 10 calls in one model turn", &c.ten_naps_turn);
    let task = |name: &str, t: &Task| {
        format!(
            "code        task, {name:<13} {} model turn(s), {:>2} results, {:>5} chars = {:>4} tokens to the model; tools p50 {:>7.1} µs\n",
            t.model_turns, t.results, t.result_chars, t.result_tokens, t.tools.p50_us
        )
    };
    out += &task("tool by tool:", &c.task_tool_by_tool);
    out += &task("code mode:", &c.task_code_mode);
    out
}
