//! The tasks extension (SEP-2663) for 2026-07-28 clients that declare it, over external servers
//! that speak 2025-11-25 and know nothing of tasks: orca decides. A proxied call that has not
//! finished within `SHORTCUT`, or asks for input before, becomes a task of rmcp's
//! `TaskManager`; one that finishes sooner is answered at once (the extension's immediate-result
//! shortcut). What the server asks during a task is the task's `inputRequests`, and
//! `tasks/update` answers it; `tasks/cancel` cancels the call at the server. A task is its
//! creator's: another principal's `tasks/*` finds no such task. An upstream's JSON-RPC error
//! settles the task as `failed`; a tool's own error as `completed` with `isError`.
//!
//! # Design notes
//!
//! `tasks.rs` is the tasks extension for 2026-07-28 clients that declare it: a proxied call not
//! finished within 250 ms, or asking for input, becomes a task of rmcp's `TaskManager` (`follow`
//! turns the exchange's requests into the task's input requests and `tasks/update`'s answers back,
//! a cancelled task into a cancelled call, an upstream's JSON-RPC error into a failed task), each
//! task noted as its creator's for `tasks/get`, `tasks/update` and `tasks/cancel`. `rounds.rs`
//! serves a proxied `tools/call` and an external `prompts/get` through it, and `reads.rs`
//! `resources/read` (orca's own resources and external ones, each read recorded in tracking as
//! `resources/read`): resumed from a `requestState`, started in rounds for a 2026-07-28 client, or
//! run directly (with the caller noted, so that an external prompt's requests reach a 2025 client
//! too); every complete result carries `resultType`, which rmcp takes off for older clients.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CreateTaskResult, DetailedTask,
    ErrorCode, GetTaskResult, InputResponses, Task, TaskPayload, TaskStatus,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions};
use tokio::sync::oneshot;

use super::Gateway;
use crate::cluster::{Item, Owner};
use crate::config::Principal;
use crate::external::Exchange;

/// A call that answers within this is answered at once, not as a task.
const SHORTCUT: Duration = Duration::from_millis(250);
/// Past this many owners noted, those of tasks the manager has forgotten are dropped.
const FORGET_ABOVE: usize = 1024;

/// The tasks of this process, and whose each is (`Principal::identity`).
#[derive(Default)]
pub(crate) struct Tasks {
    manager: TaskManager,
    owners: Mutex<HashMap<String, String>>,
}

impl std::fmt::Debug for Tasks {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Tasks").finish_non_exhaustive()
    }
}

impl Tasks {
    /// `task_id`, when it is `principal`'s (else it is unknown, as for a task that never was).
    fn owned<'a>(&self, task_id: &'a str, principal: &Principal) -> Result<&'a str, McpError> {
        let owners = self.owners.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match owners.get(task_id) {
            Some(owner) if *owner == principal.identity() => Ok(task_id),
            _ => Err(McpError::invalid_params(format!("unknown task: {task_id}"), None)),
        }
    }

    pub(super) fn get(
        &self,
        task_id: &str,
        principal: &Principal,
    ) -> Result<GetTaskResult, McpError> {
        let task_id = self.owned(task_id, principal)?;
        self.manager.get_task(task_id).map(GetTaskResult::new)
    }

    pub(super) fn update(
        &self,
        task_id: &str,
        responses: InputResponses,
        principal: &Principal,
    ) -> Result<(), McpError> {
        let task_id = self.owned(task_id, principal)?;
        self.manager.update_task(task_id, responses)
    }

    pub(super) fn cancel(&self, task_id: &str, principal: &Principal) -> Result<(), McpError> {
        let task_id = self.owned(task_id, principal)?;
        self.manager.cancel_task(task_id)
    }
}

/// Whether the request's client declared the tasks extension (for this request or its session).
pub(crate) fn declared(context: &RequestContext<RoleServer>) -> bool {
    context.client_capabilities().is_some_and(|capabilities| capabilities.supports_tasks())
}

impl Gateway {
    /// A proxied call for a client that takes tasks: answered at once when it is quick, else
    /// as a task.
    pub(super) async fn call_as_task(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        started: Instant,
        principal: Principal,
    ) -> Result<CallToolResponse, McpError> {
        let offered = request.input_responses.take().unwrap_or_default();
        let exchange = Exchange::new(context.client_capabilities(), offered);
        let owner = principal.identity();
        let tool = request.name.to_string();
        let (sender, mut outcome) = oneshot::channel();
        let gateway = self.clone();
        let asks = exchange.clone();
        tokio::spawn(async move {
            let caller = gateway.caller(&context, Some(asks));
            let carried = super::Carried::of(&context);
            let answer = gateway.run_call(request, carried, caller, started, principal).await;
            let _ = sender.send(answer);
        });
        tokio::select! {
            done = &mut outcome => {
                let done = done.unwrap_or_else(|_| Err(ended()));
                return done.map(CallToolResponse::Complete);
            }
            _ = exchange.requested() => {}
            () = tokio::time::sleep(SHORTCUT) => {}
        }
        let tasks = &self.state.tasks;
        let task = tasks
            .manager
            .spawn(TaskOptions::new(), move |context| Box::pin(follow(context, exchange, outcome)));
        {
            let mut owners = tasks.owners.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            // Tasks past their retention leave the manager; their owners go with them.
            if owners.len() >= FORGET_ABOVE {
                owners.retain(|id, _| tasks.manager.get_task(id).is_ok());
            }
            owners.insert(task.task_id.clone(), owner.clone());
        }
        // Any replica can then send this task's `tasks/*` here.
        self.state.cluster.note(Item::Task, &task.task_id, &owner, Some(&tool)).await;
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }

    /// `done`, or, for a task another replica ran and lost with it, the error that says so.
    pub(super) async fn unless_lost(
        &self,
        done: Result<(), McpError>,
        task_id: &str,
        principal: &Principal,
    ) -> Result<(), McpError> {
        let Err(unknown) = done else { return Ok(()) };
        match self.lost_task(task_id, principal).await {
            Some((_, why)) => Err(McpError::invalid_request(why, None)),
            None => Err(unknown),
        }
    }

    /// `principal`'s task `task_id` that this replica does not hold, when another replica ran
    /// it and has stopped: `failed`, saying why; the first request that finds it so records the
    /// call lost.
    pub(super) async fn lost_task(
        &self,
        task_id: &str,
        principal: &Principal,
    ) -> Option<(GetTaskResult, String)> {
        let cluster = &self.state.cluster;
        let (owner, noted) = cluster.owner_of(Item::Task, task_id).await;
        let noted = noted.filter(|noted| noted.owner == principal.identity())?;
        let Owner::Gone { replica } = owner else { return None };
        let why = format!(
            "the replica that ran this task ({replica}) has stopped, and the call with it; call the tool again"
        );
        if cluster.mark_lost(Item::Task, task_id).await {
            let tool = noted.tool.as_deref().unwrap_or("tasks/get");
            super::call::record_lost(&self.state, principal, tool, &why);
        }
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let mut task = Task::new(task_id, TaskStatus::Failed, now.clone(), now);
        task.status_message = Some(why.clone());
        let error = serde_json::json!({ "code": ErrorCode::INTERNAL_ERROR.0, "message": why });
        let serde_json::Value::Object(error) = error else { unreachable!("an object") };
        let detailed = DetailedTask::new(task, TaskPayload::Failed { error });
        Some((GetTaskResult::new(detailed), why))
    }
}

fn ended() -> McpError {
    McpError::internal_error("the call ended without an answer", None)
}

/// Follow a call as a task: its server's requests become the task's input requests, their
/// answers go back to it, a cancelled task cancels it, and its answer settles the task.
async fn follow(
    task: TaskContext,
    exchange: Arc<Exchange>,
    mut outcome: oneshot::Receiver<Result<CallToolResult, McpError>>,
) -> Result<CallToolResult, TaskExit> {
    let mut seen = HashSet::new();
    let mut asking = FuturesUnordered::new();
    // What an upstream says of its own task for this call becomes this task's message, from
    // what it said before this task began.
    let mut status = exchange.status();
    status.mark_changed();
    loop {
        tokio::select! {
            Ok(()) = status.changed() => {
                if let Some(message) = status.borrow_and_update().clone() {
                    task.set_status_message(message);
                }
            }
            done = &mut outcome => {
                return match done.unwrap_or_else(|_| Err(ended())) {
                    Ok(result) => match protocol_error(&result) {
                        Some(error) => Err(TaskExit::Error(error)),
                        None => Ok(result),
                    },
                    Err(error) => Err(TaskExit::Error(error)),
                };
            }
            requests = exchange.newly_requested(&mut seen) => {
                for (key, request) in requests {
                    let task = task.clone();
                    asking.push(async move {
                        let answer = task.request_input(key.clone(), request).await;
                        (key, answer)
                    });
                }
            }
            Some((key, answer)) = asking.next() => match answer {
                Ok(answer) => {
                    let _ = exchange.answer(InputResponses::from([(key, answer)]));
                }
                Err(exit) => {
                    exchange.cancelled.cancel();
                    return Err(exit);
                }
            },
            () = task.cancelled() => {
                exchange.cancelled.cancel();
                return Err(TaskExit::Cancelled);
            }
        }
    }
}

/// The upstream's JSON-RPC error behind a failed result, if that is what failed it (orca
/// answers it to a client as a tool error with the code in `details.jsonrpc_code`).
fn protocol_error(result: &CallToolResult) -> Option<McpError> {
    if result.is_error != Some(true) {
        return None;
    }
    let error = result.structured_content.as_ref()?.get("error")?;
    let code = error.get("details")?.get("jsonrpc_code")?.as_i64()?;
    let message = error.get("message").and_then(serde_json::Value::as_str).unwrap_or_default();
    Some(McpError::new(ErrorCode(i32::try_from(code).ok()?), message.to_owned(), None))
}
