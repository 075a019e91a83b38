//! A 2026-07-28 server's own task (SEP-2663): orca declares the tasks extension in each request
//! to such a server, and when a `tools/call` is answered with a task, orca follows it to its end
//! as the same call: `tasks/get` at the pace the server asks for, what the task asks for
//! (`input_required`) asked of the caller like any request during a call and answered with
//! `tasks/update`, and `tasks/cancel` when the caller cancels or orca stops waiting. What the
//! task says of itself (`statusMessage`) goes to the caller's own task, when it has one. The
//! call's timeout covers the whole task.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResponse, CallToolResult, CancelTaskParams, CancelTaskRequest, ClientRequest,
    GetTaskParams, GetTaskRequest, InputRequests, InputRequiredResult, ServerResult, Task,
    TaskPayload, UpdateTaskParams, UpdateTaskRequest,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, ServiceError};
use serde_json::Value;

use super::super::calls::{self, Caller, Registered, declared};
use super::call::unanswered;
use super::{Connection, Upstream};

/// How often a task is looked at when its server does not say (`pollIntervalMs`).
const DEFAULT_POLL: Duration = Duration::from_millis(500);
/// The bounds put on what a server says.
const POLL_BOUNDS: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(5));

/// Cancels the server's task when dropped before it ended.
struct CancelOnDrop {
    /// `None` once the task ended.
    peer: Option<Peer<RoleClient>>,
    task_id: String,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else { return };
        let params = CancelTaskParams::new(std::mem::take(&mut self.task_id));
        tokio::spawn(async move {
            let request = ClientRequest::CancelTaskRequest(CancelTaskRequest::new(params));
            let _ = send(&peer, request).await;
        });
    }
}

/// Send a `tasks/*` request declaring the extension (rmcp's `Peer::get_task` and the like
/// would declare the session's capabilities, which leave it out).
async fn send(
    peer: &Peer<RoleClient>,
    request: ClientRequest,
) -> Result<ServerResult, ServiceError> {
    let mut options = PeerRequestOptions::no_options();
    options.meta = Some(declared(None));
    peer.send_request_with_option(request, options).await?.await_response().await
}

fn poll_interval(task: &Task) -> Duration {
    task.poll_interval_ms
        .map_or(DEFAULT_POLL, Duration::from_millis)
        .clamp(POLL_BOUNDS.0, POLL_BOUNDS.1)
}

impl Upstream {
    /// Follow the server's `task` until it ends; its end is the call's answer. `_held` keeps
    /// the call noted in flight meanwhile, so that the task's progress and log messages reach
    /// the caller.
    pub(super) async fn follow_task(
        &self,
        connection: &Connection,
        task: Task,
        caller: Option<&Arc<Caller>>,
        _held: Option<Registered>,
    ) -> Result<CallToolResponse, ServiceError> {
        let peer = &connection.peer;
        let task_id = task.task_id.clone();
        let mut cancel = CancelOnDrop { peer: Some(peer.clone()), task_id: task_id.clone() };
        let mut pause = poll_interval(&task);
        // What the task asked is asked of the caller once, however often it is seen.
        let mut asked: HashSet<String> = HashSet::new();
        let mut look = true;
        loop {
            if !look {
                tokio::time::sleep(pause).await;
            }
            let request = GetTaskRequest::new(GetTaskParams::new(task_id.clone()));
            let ServerResult::GetTaskResult(current) =
                send(peer, ClientRequest::GetTaskRequest(request)).await?
            else {
                return Err(ServiceError::UnexpectedResponse);
            };
            let current = current.task;
            pause = poll_interval(&current.task);
            if let Some(exchange) = caller.and_then(|caller| caller.exchange.as_ref()) {
                exchange.set_status(current.task.status_message.clone());
            }
            look = false;
            match current.payload {
                TaskPayload::InputRequired { input_requests } => {
                    let new: InputRequests = input_requests
                        .into_iter()
                        .filter(|(key, _)| !asked.contains(key))
                        .collect();
                    if new.is_empty() {
                        continue;
                    }
                    asked.extend(new.keys().cloned());
                    let round = InputRequiredResult::new(Some(new), None);
                    let (answers, _) =
                        calls::answer_round(&self.config.key, caller, round)
                            .await
                            .map_err(|error| ServiceError::McpError(unanswered(error)))?;
                    let update = UpdateTaskParams::new(task_id.clone(), answers);
                    let request = ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(update));
                    send(peer, request).await?;
                    look = true;
                }
                TaskPayload::Completed { result } => {
                    cancel.peer = None;
                    let result: CallToolResult = serde_json::from_value(Value::Object(result))
                        .map_err(|_| ServiceError::UnexpectedResponse)?;
                    return Ok(CallToolResponse::Complete(result));
                }
                TaskPayload::Failed { error } => {
                    cancel.peer = None;
                    let error: McpError = serde_json::from_value(Value::Object(error))
                        .map_err(|_| ServiceError::UnexpectedResponse)?;
                    return Err(ServiceError::McpError(error));
                }
                TaskPayload::Cancelled => {
                    cancel.peer = None;
                    let message =
                        format!("external server `{}` cancelled the call's task", self.config.key);
                    return Err(ServiceError::McpError(McpError::internal_error(message, None)));
                }
                _ => {}
            }
        }
    }
}
