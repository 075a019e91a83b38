//! A tool call to the external server: attempts within its timeout, further attempts only where
//! safe, and the rounds of a 2026-07-28 server that asks for input; over stdio on orca's own
//! lane (`lane.rs`), else through rmcp's client.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult, ClientRequest,
    ServerResult,
};
use rmcp::service::ServiceError;
use serde_json::{Map, Value};

use super::super::calls::{self, Caller, Registered};
use super::{Attempts, Connection, ExternalTool, Upstream};
use crate::config::ExternalTransport;
use crate::tool::{ErrorCode, ToolError};

/// Why one attempt failed.
struct AttemptFailure {
    error: ToolError,
    /// Whether the request may have reached the server (then only repeatable tools retry).
    reached: bool,
    /// The connection the attempt used, when it turned out to be dead.
    broken: Option<Arc<Connection>>,
}

/// How many times a call is sent again with the input its server asked for.
pub(super) const MAX_INPUT_ROUNDS: usize = 16;

/// Why a server's request for input got no answer (the call fails as the server's refusal).
pub(super) fn unanswered(mut error: McpError) -> McpError {
    error.message = format!("it asked for input that was not given: {}", error.message).into();
    error
}

impl Upstream {
    /// Call `tool` with `arguments`: a timeout per attempt, and further attempts only when the
    /// request never reached the server or the tool is safe to repeat.
    pub(crate) async fn call_tool(
        &self,
        tool: &ExternalTool,
        arguments: Option<Map<String, Value>>,
        caller: Option<Arc<Caller>>,
        user: &str,
    ) -> (Result<CallToolResult, ToolError>, Attempts) {
        let mut failed: Attempts = Vec::new();
        let attempts = 1 + self.config.retries;
        let mut broken: Option<Arc<Connection>> = None;
        let mut arguments = arguments;
        for attempt in 1..=attempts {
            // Only an attempt that may be followed by another needs its own copy.
            let these = if attempt < attempts { arguments.clone() } else { arguments.take() };
            let failure =
                match self.attempt(tool, these, broken.as_ref(), caller.as_ref(), user).await {
                    Ok(result) => return (Ok(result), failed),
                    Err(failure) => failure,
                };
            let again = attempt < attempts
                && failure.error.retryable
                && (!failure.reached || tool.repeatable);
            if !again {
                return (Err(failure.error), failed);
            }
            tracing::debug!(server = %self.config.key, tool = %tool.upstream_name, attempt, "retrying");
            failed.push(failure.error);
            broken = failure.broken;
            tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt))).await;
        }
        unreachable!("the last attempt returns")
    }

    /// One attempt.
    async fn attempt(
        &self,
        tool: &ExternalTool,
        arguments: Option<Map<String, Value>>,
        broken: Option<&Arc<Connection>>,
        caller: Option<&Arc<Caller>>,
        user: &str,
    ) -> Result<CallToolResult, AttemptFailure> {
        let timeout = self.config.timeout;
        let connection = if self.per_user() {
            self.user_connection(user).await
        } else {
            self.connection(timeout, broken).await
        }
        .map_err(|error| AttemptFailure { error, reached: false, broken: None })?;
        let mut params = CallToolRequestParams::new(tool.upstream_name.clone());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        // The upstream hop's span goes along as `_meta.traceparent` (2026-07-28's place for
        // it); an HTTP upstream also gets it as a header (`traced::Traced`).
        if let Some(traceparent) = crate::telemetry::traceparent() {
            params
                .meta
                .get_or_insert_with(|| rmcp::model::RequestMetaObject::from(Map::new()))
                .insert("traceparent".to_owned(), Value::from(traceparent));
        }
        let key = &self.config.key;
        let reached = |error: ToolError| AttemptFailure { error, reached: true, broken: None };
        let call = self.send_rounds(&connection, params, caller);
        let cancelled = async {
            match caller {
                Some(caller) => caller.cancelled.cancelled().await,
                None => std::future::pending().await,
            }
        };
        // Dropping the call (timed out, or cancelled by the client) cancels it upstream.
        let outcome = tokio::select! {
            outcome = tokio::time::timeout(timeout, call) => outcome,
            () = cancelled => {
                let cancelled = ToolError::new(
                    ErrorCode::InvalidInput,
                    format!("the call to external server `{key}` was cancelled by the client"),
                );
                return Err(reached(cancelled.not_retryable()));
            }
        };
        match outcome {
            Err(_) => Err(reached(self.timed_out(Some(&tool.upstream_name)))),
            Ok(Ok(CallToolResponse::Complete(result))) => {
                // Over stdio `LineLimit` has bounded the message already; measure the others.
                if !matches!(self.config.transport, ExternalTransport::Stdio { .. }) {
                    let size = serde_json::to_vec(&result).map_or(0, |bytes| bytes.len());
                    if size > self.config.max_response_bytes {
                        return Err(reached(self.too_large(size)));
                    }
                }
                Ok(result)
            }
            Ok(Ok(_)) => Err(reached(
                ToolError::upstream_unavailable(format!(
                    "external server `{key}` answered with a task, which orca follows only from a server spoken to on 2026-07-28 (`protocol:` in external-mcps.yaml)"
                ))
                .not_retryable(),
            )),
            Ok(Err(error)) => {
                let transport = matches!(
                    error,
                    ServiceError::TransportSend(_)
                        | ServiceError::TransportClosed
                        | ServiceError::Cancelled { .. }
                );
                let (error, reached) = self.translate(error);
                // A user's refused refresh forgets their sign-in: they must sign in again.
                if transport
                    && let Some(authorizer) = &connection.authorizer
                    && !authorizer.signed_in().await.unwrap_or(true)
                {
                    connection.cancel.cancel();
                    return Err(AttemptFailure {
                        error: self.sign_in_error(true),
                        reached,
                        broken: None,
                    });
                }
                // A refused refresh forgets the shared sign-in: end the session, so that the
                // supervisor shows the server as waiting for one.
                if transport && connection.authorizer.is_none() && self.sign_in_lost().await {
                    connection.cancel.cancel();
                    return Err(AttemptFailure {
                        error: error.not_retryable(),
                        reached,
                        broken: None,
                    });
                }
                Err(AttemptFailure { error, reached, broken: transport.then_some(connection) })
            }
        }
    }

    /// Send `tools/call` until it is answered: while a 2026-07-28 server answers that it needs
    /// input (`InputRequiredResult`), its requests go to the caller (`calls::answer_round`)
    /// and the call is sent again with the answers and the server's `requestState`.
    async fn send_rounds(
        &self,
        connection: &Connection,
        mut params: CallToolRequestParams,
        caller: Option<&Arc<Caller>>,
    ) -> Result<CallToolResponse, ServiceError> {
        // A session begun with `initialize` asks during the call, never in rounds: its one
        // round needs no copy of the arguments.
        if connection.began_with_initialize() {
            let (answer, _) = self.send_call(connection, params, caller).await?;
            return Ok(answer);
        }
        for _ in 0..MAX_INPUT_ROUNDS {
            let this_round = params.clone();
            match self.send_call(connection, this_round, caller).await? {
                (CallToolResponse::Task(created), held) => {
                    return self.follow_task(connection, created.task, caller, held).await;
                }
                (CallToolResponse::InputRequired(asked), _) => {
                    let (answers, state) = calls::answer_round(&self.config.key, caller, asked)
                        .await
                        .map_err(|error| ServiceError::McpError(unanswered(error)))?;
                    params.input_responses = Some(answers);
                    params.request_state = state;
                }
                (answered, _) => return Ok(answered),
            }
        }
        Err(ServiceError::InputRequiredRoundsExceeded { max_rounds: MAX_INPUT_ROUNDS })
    }

    /// Send `tools/call` and wait for its answer, the call noted in flight for `caller` so
    /// that what the server sends during it reaches the caller; dropped before the answer, it
    /// is cancelled upstream. With a task for answer comes the call's registration, which
    /// keeps it noted while the task runs.
    async fn send_call(
        &self,
        connection: &Connection,
        params: CallToolRequestParams,
        caller: Option<&Arc<Caller>>,
    ) -> Result<(CallToolResponse, Option<Registered>), ServiceError> {
        if let Some(lane) = &connection.lane {
            let result = lane.call(&connection.peer, &connection.calls, params, caller).await;
            return result.map(|result| (CallToolResponse::Complete(result), None));
        }
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let modern = !connection.began_with_initialize();
        let (answer, registered) =
            calls::send_held(&connection.peer, &connection.calls, request, caller, modern).await?;
        let answer = match answer {
            ServerResult::CallToolResult(result) => CallToolResponse::Complete(result),
            ServerResult::InputRequiredResult(result) => CallToolResponse::InputRequired(result),
            ServerResult::CreateTaskResult(result) => {
                return Ok((CallToolResponse::Task(result), registered));
            }
            _ => return Err(ServiceError::UnexpectedResponse),
        };
        Ok((answer, None))
    }
}
