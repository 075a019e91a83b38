//! One tool call from arrival to record: routed, checked against the caller's verbs and
//! policy, run by an internal server or relayed to an external one, passed through the
//! outgoing checks (`outgoing.rs`), answered, and handed to tracking with its feedback token;
//! and the record of a request whose token was refused.
//!
//! # Design notes
//!
//! `call.rs` holds one tool call from arrival to record (`run_call`: route, span, verbs and policy,
//! `dispatch` to an internal server or an external one, the answer, the tracking row with its
//! feedback token) and the row of a request whose token was refused; `carried.rs` what a request
//! carries besides its params (the HTTP head, the `_meta` rmcp took off it) and what orca reads
//! there: the caller's ids and the W3C `traceparent`, from which a call's trace id comes.

use std::time::Instant;

use chrono::Utc;
use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;
use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::outgoing::{Origin, Outgoing};
use super::{AppState, Carried, Gateway, Transport, error, incoming_traceparent, origin, trace_id};
use crate::config::Principal;
use crate::registry::Route;
use crate::servers::CallContext;
use crate::tool::{ErrorCode, ToolError};
use crate::tracking::{
    Execution, ExecutionStatus, Failure, Payload, cut_text, redact_object, stored_response,
};

/// What a dispatched call produced, before it goes on the wire and into tracking.
struct Dispatched {
    result: CallToolResult,
    status: ExecutionStatus,
    llm: Option<crate::tool::LlmUsage>,
    error: Option<ToolError>,
    /// Earlier attempts that failed and were retried (external calls, `generate_sql`).
    retried: Vec<ToolError>,
    /// The final upstream `isError` text, when an external tool reported failure itself.
    upstream_error: Option<String>,
    /// The placeholder in `result` and the bytes the transport writes in its place.
    spliced: Option<(String, crate::splice::RawJson)>,
}

impl Gateway {
    async fn dispatch(
        &self,
        route: &Route<'_>,
        arguments: Option<Map<String, Value>>,
        call_context: &CallContext,
        trace_id: &str,
        mut meta: Map<String, Value>,
        caller: Option<crate::external::Caller>,
    ) -> Dispatched {
        match route {
            Route::Internal(tool) => {
                // Boxed: the internal servers' futures are large (the biggest of them sets the
                // size of every call's future, which rmcp moves when it spawns the request), so
                // a proxied call does not carry them.
                let origin = Origin::internal(tool.server);
                let mut outgoing =
                    Outgoing::new(&self.state.config, &call_context.principal, origin);
                match Box::pin(self.state.registry.call(*tool, arguments, call_context)).await {
                    Ok(mut output) => {
                        outgoing.value(&mut output.value);
                        let spliced = outgoing.spliced(output.spliced.take());
                        output.failed_attempts.iter_mut().for_each(|e| outgoing.error(e));
                        for (key, value) in output.meta {
                            meta.entry(key).or_insert(value);
                        }
                        outgoing.tell(&mut meta);
                        let (value, spliced) = error::place(output.value, spliced, self.splices);
                        Dispatched {
                            result: error::success(value, output.png_images, meta),
                            status: ExecutionStatus::Success,
                            llm: output.llm,
                            error: None,
                            retried: output.failed_attempts,
                            upstream_error: None,
                            spliced,
                        }
                    }
                    Err(mut tool_error) => {
                        outgoing.error(&mut tool_error);
                        let attempts = tool_error.attempts.take().map(|attempts| *attempts);
                        let (retried, llm) = match attempts {
                            Some(attempts) => {
                                for (key, value) in attempts.meta {
                                    meta.entry(key).or_insert(value);
                                }
                                (attempts.earlier, attempts.llm)
                            }
                            None => (Vec::new(), None),
                        };
                        outgoing.tell(&mut meta);
                        Dispatched {
                            result: error::failure(&tool_error, trace_id, meta),
                            status: status_of(&tool_error),
                            llm,
                            error: Some(tool_error),
                            retried,
                            upstream_error: None,
                            spliced: None,
                        }
                    }
                }
            }
            Route::External(tool) => {
                let external = self.state.registry.external().expect("routed to an external tool");
                let started = Instant::now();
                // The upstream hop: its span is current while the call is forwarded, so the
                // request carries it as `_meta.traceparent` (and an HTTP upstream as a header).
                let hop = crate::telemetry::Span::child(SpanKind::Client, || {
                    (
                        format!("tools/call {}", tool.upstream_name()),
                        vec![
                            KeyValue::new("mcp.method.name", "tools/call"),
                            KeyValue::new("gen_ai.tool.name", tool.upstream_name().to_owned()),
                            KeyValue::new("orca.upstream", tool.server().to_owned()),
                        ],
                    )
                });
                let user = call_context.principal.user_identity();
                // Boxed too: the call's future (attempts, timeout, cancellation) would otherwise
                // make every call's future larger, and rmcp moves it when it spawns the request.
                let (mut outcome, mut retried) =
                    hop.run(Box::pin(external.call(tool, arguments, caller, &user))).await;
                // What the upstream sent is checked before anything (a span included) uses it.
                let mut outgoing =
                    Outgoing::new(&self.state.config, &call_context.principal, Origin::Other);
                match &mut outcome {
                    Ok(result) => outgoing.result(result),
                    Err(tool_error) => outgoing.error(tool_error),
                }
                retried.iter_mut().for_each(|tool_error| outgoing.error(tool_error));
                match &outcome {
                    Err(tool_error) => {
                        hop.fail(tool_error.code.as_str(), tool_error.message.clone())
                    }
                    Ok(result) if result.is_error == Some(true) => {
                        hop.fail("upstream_tool_error", error::first_text(result));
                    }
                    Ok(_) => {}
                }
                drop(hop);
                meta.insert("enhanced_by".into(), Value::from("orca"));
                meta.insert("upstream".into(), Value::from(tool.server()));
                meta.insert(
                    "response_time_ms".into(),
                    Value::from(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)),
                );
                if !retried.is_empty() {
                    meta.insert("attempts".into(), Value::from(retried.len() + 1));
                }
                outgoing.tell(&mut meta);
                match outcome {
                    Ok(result) => {
                        let upstream_error =
                            (result.is_error == Some(true)).then(|| error::first_text(&result));
                        Dispatched {
                            status: if upstream_error.is_some() {
                                ExecutionStatus::Error
                            } else {
                                ExecutionStatus::Success
                            },
                            result: error::passthrough(result, meta),
                            llm: None,
                            error: None,
                            retried,
                            upstream_error,
                            spliced: None,
                        }
                    }
                    Err(tool_error) => Dispatched {
                        result: error::failure(&tool_error, trace_id, meta),
                        status: status_of(&tool_error),
                        llm: None,
                        error: Some(tool_error),
                        retried,
                        upstream_error: None,
                        spliced: None,
                    },
                }
            }
        }
    }
}

pub(super) fn status_of(error: &ToolError) -> ExecutionStatus {
    if error.code == ErrorCode::Timeout { ExecutionStatus::Timeout } else { ExecutionStatus::Error }
}

/// Hand a request whose bearer token was refused to tracking, as a call of `tool` (the tool a
/// `tools/call` names, else the JSON-RPC method) by `unauthenticated` with `UNAUTHORIZED`, so the
/// nightly review sees refused tokens next to the calls; nothing ran.
pub(crate) fn record_refused_token(state: &AppState, tool: &str, method: &str, reason: &str) {
    if !state.tracker.is_enabled() {
        return;
    }
    let now = Utc::now();
    let trace_id = Uuid::new_v4().simple().to_string();
    let error = ToolError::new(ErrorCode::Unauthorized, reason);
    let failures = Failure::for_attempts(&[], Some(&error), &trace_id, now);
    let (response_data, response_bytes) = cut_text(
        serde_json::to_string(&error.to_json(&trace_id)).unwrap_or_default(),
        state.config.tracking.max_response_bytes,
    );
    let origin = crate::tracking::Origin {
        principal: "unauthenticated".to_owned(),
        transport: Transport::Http.as_str().to_owned(),
        ..crate::tracking::Origin::default()
    };
    let tool = tool.chars().take(128).collect();
    state.tracker.record(Execution {
        request_data: serde_json::json!({ "method": method.chars().take(128).collect::<String>() }),
        response_data: Some(response_data),
        response_bytes,
        status: ExecutionStatus::Error,
        error_code: Some(error.code.as_str().to_owned()),
        error_message: Some(error.message),
        created_at: now,
        failures,
        ..Execution::of(origin, "orca".to_owned(), tool, trace_id)
    });
}

/// Record a call lost with the replica that ran it (a task, an input round), as the request
/// that found it lost: `principal`'s call of `tool`, failed with `reason`.
pub(crate) fn record_lost(state: &AppState, principal: &Principal, tool: &str, reason: &str) {
    if !state.tracker.is_enabled() {
        return;
    }
    let now = Utc::now();
    let trace_id = Uuid::new_v4().simple().to_string();
    let error = ToolError::new(ErrorCode::UpstreamUnavailable, reason);
    let failures = Failure::for_attempts(&[], Some(&error), &trace_id, now);
    let (response_data, response_bytes) = cut_text(
        serde_json::to_string(&error.to_json(&trace_id)).unwrap_or_default(),
        state.config.tracking.max_response_bytes,
    );
    let origin = crate::tracking::Origin {
        principal: principal.name.clone(),
        principal_id: Some(principal.identity()),
        client_id: principal.client.clone(),
        role: principal.role.clone(),
        transport: Transport::Http.as_str().to_owned(),
        ..crate::tracking::Origin::default()
    };
    let (server, tool) = match state.registry.route(tool) {
        Some(crate::registry::Route::External(routed)) => {
            (routed.server().to_owned(), tool.chars().take(128).collect())
        }
        _ => ("orca".to_owned(), tool.chars().take(128).collect()),
    };
    state.tracker.record(Execution {
        response_data: Some(response_data),
        response_bytes,
        status: ExecutionStatus::Error,
        error_code: Some(error.code.as_str().to_owned()),
        error_message: Some(error.message),
        created_at: now,
        failures,
        ..Execution::of(origin, server, tool, trace_id)
    });
}

impl Gateway {
    /// Route, check, run and record one tool call made by `caller`.
    pub(super) async fn run_call(
        &self,
        mut request: CallToolRequestParams,
        carried: Carried<'_>,
        caller: crate::external::Caller,
        started: Instant,
        principal: Principal,
    ) -> Result<CallToolResult, McpError> {
        let Some(route) = self.state.registry.route(&request.name) else {
            self.state.metrics.unknown_tool();
            return Err(error::unknown_tool(&request.name));
        };
        let (server, tool_name, upstream_tool) = match &route {
            Route::Internal(tool) => (tool.server.to_owned(), tool.spec.name().to_owned(), None),
            Route::External(tool) => (
                tool.server().to_owned(),
                tool.name().to_owned(),
                Some(tool.upstream_name().to_owned()),
            ),
        };
        let execution_id = Uuid::now_v7();
        let feedback_token = Uuid::new_v4();
        let incoming = incoming_traceparent(request.meta.as_ref(), &carried);
        let span = self.call_span(incoming.as_deref(), &tool_name, &server, execution_id);
        let trace_id = trace_id(&span, incoming.as_deref());
        let tracking = self.state.tracker.is_enabled();
        let arguments = request.arguments.take();
        let stored_arguments = match (&arguments, tracking) {
            (_, false) => Value::Null,
            (Some(arguments), true) => redact_object(arguments),
            (None, true) => Value::Object(Map::new()),
        };
        let client_model: std::sync::Arc<dyn crate::llm::ClientModel> =
            std::sync::Arc::new(super::sampling::CallerModel(caller.clone()));
        let call_context =
            CallContext::new(principal.clone()).with_client_model(Some(client_model));
        let mut meta = Map::new();
        meta.insert("execution_id".into(), Value::from(execution_id.to_string()));
        meta.insert("feedback_token".into(), Value::from(feedback_token.to_string()));
        meta.insert("trace_id".into(), Value::from(trace_id.clone()));
        let refusal = refusal(&principal, &route, &tool_name, &server);
        let Dispatched { mut result, status, llm, error, retried, upstream_error, spliced } =
            match refusal {
                None => {
                    let call = self.dispatch(
                        &route,
                        arguments,
                        &call_context,
                        &trace_id,
                        meta,
                        Some(caller),
                    );
                    span.run(call).await
                }
                Some(denied) => Dispatched {
                    result: error::failure(&denied, &trace_id, meta),
                    status: ExecutionStatus::Error,
                    llm: None,
                    error: Some(denied),
                    retried: Vec::new(),
                    upstream_error: None,
                    spliced: None,
                },
            };
        let elapsed = started.elapsed();
        self.state.metrics.observe(&tool_name, status.as_str(), elapsed);
        match (&error, &upstream_error) {
            (Some(tool_error), _) => {
                span.fail(tool_error.code.as_str(), tool_error.message.clone())
            }
            (None, Some(text)) => span.fail("upstream_tool_error", text.clone()),
            (None, None) => {}
        }

        if tracking {
            let now = Utc::now();
            let max_bytes = self.state.config.tracking.max_response_bytes;
            let (response_data, response_bytes) =
                stored_call_response(&route, &mut result, spliced.as_ref(), max_bytes);
            let mut failures = Failure::for_attempts(&retried, error.as_ref(), &trace_id, now);
            if let Some(text) = &upstream_error {
                failures.push(Failure {
                    id: Uuid::now_v7(),
                    error_type: "upstream_tool_error".to_owned(),
                    error_code: None,
                    error_details: serde_json::json!({"upstream": server, "message": text}),
                    retry_attempt: i32::try_from(retried.len() + 1).unwrap_or(i32::MAX),
                    created_at: now,
                });
            }
            let origin = origin(&principal, request.meta.as_ref(), &carried, self.transport);
            self.state.tracker.record(Execution {
                id: execution_id,
                upstream_tool,
                database: call_context.database(),
                request_data: stored_arguments,
                response_data: Some(response_data),
                response_bytes,
                execution_time_ms: i32::try_from(elapsed.as_millis()).unwrap_or(i32::MAX),
                status,
                error_code: error.as_ref().map(|tool_error| tool_error.code.as_str().to_owned()),
                error_message: error
                    .as_ref()
                    .map(|tool_error| tool_error.message.clone())
                    .or(upstream_error),
                feedback_token,
                created_at: now,
                failures,
                span: span.parent(),
                ..Execution::of(origin, server, tool_name, trace_id).with_llm(llm.as_ref())
            });
        }
        // 2026-07-28 wants `resultType` on every result (rmcp takes it off for older clients).
        result.result_type = Some(rmcp::model::ResultType::COMPLETE);
        Ok(result)
    }

    /// The call's server span, a child of the caller's `traceparent` when it sent one.
    fn call_span(
        &self,
        incoming: Option<&str>,
        tool_name: &str,
        server: &str,
        execution_id: Uuid,
    ) -> crate::telemetry::Span {
        crate::telemetry::Span::incoming(incoming, || {
            (
                format!("tools/call {tool_name}"),
                vec![
                    KeyValue::new("mcp.method.name", "tools/call"),
                    KeyValue::new("gen_ai.operation.name", "execute_tool"),
                    KeyValue::new("gen_ai.tool.name", tool_name.to_owned()),
                    KeyValue::new("orca.server", server.to_owned()),
                    KeyValue::new("orca.execution_id", execution_id.to_string()),
                    KeyValue::new("orca.transport", self.transport.as_str()),
                ],
            )
        })
    }
}

/// Why `principal` may not call `tool_name` of `server`, if it may not: a tool outside the
/// caller's verbs or tool policy is refused, naming what is missing, and recorded as denied.
fn refusal(
    principal: &Principal,
    route: &Route<'_>,
    tool_name: &str,
    server: &str,
) -> Option<ToolError> {
    if !principal.may(route.verb()) {
        Some(
            ToolError::new(
                ErrorCode::Unauthorized,
                format!(
                    "`{}` may not use `{tool_name}`: it needs the `{}` verb",
                    principal.name,
                    route.verb().as_str()
                ),
            )
            .with_hint("use a key or a role that holds this verb"),
        )
    } else if !principal.may_use(tool_name, server) {
        Some(
            ToolError::new(
                ErrorCode::Unauthorized,
                format!(
                    "`{}` may not use `{tool_name}`: its roles' tools in auth.roles do not admit it",
                    principal.name
                ),
            )
            .with_hint("ask for a role whose tools include it, or use another tool"),
        )
    } else {
        None
    }
}

/// The response a call's tracking row keeps, cut to `max_bytes`, and its full size.
fn stored_call_response(
    route: &Route<'_>,
    result: &mut CallToolResult,
    spliced: Option<&(String, crate::splice::RawJson)>,
    max_bytes: usize,
) -> (Payload, i64) {
    match route {
        // The first text block of an internal result is its structured content
        // serialized (`error::success` and `error::failure` make it so), with the
        // placeholder of its pre-encoded member, if any.
        Route::Internal(_) => stored_response(
            result.structured_content.as_ref().unwrap_or(&Value::Null),
            result.content.first().and_then(|block| block.as_text()).map(|text| text.text.as_str()),
            spliced.map(|(placeholder, raw)| (placeholder.as_str(), raw)),
            max_bytes,
        ),
        Route::External(_) => cut_text(error::stored_text(result), max_bytes),
    }
}
