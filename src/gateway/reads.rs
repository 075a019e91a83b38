//! `resources/read`: orca's own resources and external servers' (what an external server asks
//! during the read relayed to the client, or held for a 2026-07-28 client that answers by
//! retrying, as for a tool call), masked and redacted (`outgoing.rs`) and recorded in tracking
//! like a tool call.

use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ResourceContents,
    ResultType,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;
use uuid::Uuid;

use super::input_required::{self, Round};
use super::outgoing::{Origin, Outgoing};
use super::{
    Carried, Gateway, error, in_reach, incoming_traceparent, origin, shown, status_of, trace_id,
};
use crate::config::Principal;
use crate::external::Exchange;
use crate::servers::CallContext;
use crate::tool::{ToolError, Verb};
use crate::tracking::{Execution, ExecutionStatus, Failure, cut_text};

impl Gateway {
    /// A read: resumed from its `requestState`, started in rounds for a 2026-07-28 client of an
    /// external resource, or run directly.
    pub(super) async fn read_in_rounds(
        &self,
        mut request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
        started: Instant,
        principal: Principal,
    ) -> Result<ReadResourceResponse, McpError> {
        input_required::check_responses(request.input_responses.as_ref())?;
        let bound_to = input_required::binding(&principal, "resources/read", &request.uri);
        let pending = &self.state.pending;
        let client_gone = context.ct.clone();
        if let Some(state) = request.request_state.take() {
            let responses = request.input_responses.take();
            let round = pending.resume(&state, responses, &bound_to, &client_gone, Result::is_err);
            return round.await.map(read_round);
        }
        let own = self.state.registry.resource_server(&request.uri).is_some();
        if !own && input_required::translates(&context) {
            let offered = request.input_responses.take().unwrap_or_default();
            let exchange = Exchange::new(context.client_capabilities(), offered);
            let gateway = self.clone();
            let asks = exchange.clone();
            let read = async move {
                gateway.run_read(request, context, started, principal, Some(asks)).await
            };
            let round = pending.begin(read, exchange, &bound_to, &client_gone, Result::is_err);
            return round.await.map(read_round);
        }
        let result = self.run_read(request, context, started, principal, None).await;
        result.map(ReadResourceResponse::Complete)
    }

    /// Route, check, read and record one resource; `exchange` holds what its external server
    /// asks of a client that answers by retrying.
    async fn run_read(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
        started: Instant,
        principal: Principal,
        exchange: Option<Arc<Exchange>>,
    ) -> Result<ReadResourceResult, McpError> {
        let uri = request.uri.as_str();
        let unknown =
            || McpError::resource_not_found(format!("unknown resource: {}", shown(uri)), None);
        let reach = self.servers_in_reach(&principal);
        // orca's own results page is not masked; every other read is, as a tool result is.
        let config = &self.state.config;
        let (server, mut outcome, database, mut outgoing) = if uri == super::apps::RESULTS_URI {
            if !self.offers_results_app(&principal, &context) {
                return Err(unknown());
            }
            ("orca".to_owned(), Ok(super::apps::results_contents()), None, None)
        } else {
            match self.state.registry.resource_server(uri) {
                Some(server) if principal.may(Verb::Read) => {
                    if !in_reach(reach.as_ref(), server) {
                        return Err(unknown());
                    }
                    let call_context = CallContext::new(principal.clone());
                    let Some(outcome) = self.state.registry.read_resource(uri, &call_context).await
                    else {
                        return Err(unknown());
                    };
                    let mut outgoing = Outgoing::new(config, &principal, Origin::internal(server));
                    let outcome = outcome.map(|mut value| {
                        outgoing.value(&mut value);
                        ReadResourceResult::new(vec![
                            ResourceContents::text(value.to_string(), uri.to_owned())
                                .with_mime_type("application/json"),
                        ])
                    });
                    (server.to_owned(), outcome, call_context.database(), Some(outgoing))
                }
                _ => {
                    let Some(external) = self.readable_external(&context)? else {
                        return Err(unknown());
                    };
                    let Some(server) = external.resource_server(uri) else { return Err(unknown()) };
                    if !in_reach(reach.as_ref(), &server) {
                        return Err(unknown());
                    }
                    let caller = self.caller(&context, exchange);
                    let Some(mut outcome) = external.read_resource(uri, Some(caller)).await else {
                        return Err(unknown());
                    };
                    let mut outgoing = Outgoing::new(config, &principal, Origin::Other);
                    if let Ok(result) = &mut outcome {
                        outgoing.contents(result);
                    }
                    (server, outcome, None, Some(outgoing))
                }
            }
        };
        if let (Some(outgoing), Err(tool_error)) = (&mut outgoing, &mut outcome) {
            outgoing.error(tool_error);
        }
        let read = ResourceRead {
            server,
            database,
            uri: request.uri.clone(),
            trace_id: trace_id(
                &crate::telemetry::Span::default(),
                incoming_traceparent(request.meta.as_ref(), &Carried::of(&context)).as_deref(),
            ),
            execution_id: Uuid::now_v7(),
            feedback_token: Uuid::new_v4(),
        };
        self.state.metrics.observe(
            "resources/read",
            if outcome.is_ok() { "success" } else { "error" },
            started.elapsed(),
        );
        match outcome {
            Ok(mut result) => {
                let meta = result.meta.get_or_insert_with(Default::default);
                meta.insert("execution_id".into(), Value::from(read.execution_id.to_string()));
                meta.insert("feedback_token".into(), Value::from(read.feedback_token.to_string()));
                meta.insert("trace_id".into(), Value::from(read.trace_id.clone()));
                if let Some(outgoing) = &outgoing {
                    outgoing.tell(meta);
                }
                if self.state.tracker.is_enabled() {
                    let text = serde_json::to_string(&result).unwrap_or_default();
                    self.record_read(read, &principal, &request, &context, started, Ok(text));
                }
                result.result_type = Some(ResultType::COMPLETE);
                // The answer carries this read's own feedback token: never shared across
                // callers, whatever its server said of the content (its `ttlMs` stands).
                if result.cache_scope.is_some() {
                    result.cache_scope = Some(rmcp::model::CacheScope::Private);
                }
                Ok(result)
            }
            Err(tool_error) => {
                let protocol = error::protocol_error(&tool_error, &read.trace_id);
                if self.state.tracker.is_enabled() {
                    self.record_read(
                        read,
                        &principal,
                        &request,
                        &context,
                        started,
                        Err(tool_error),
                    );
                }
                Err(protocol)
            }
        }
    }
}

fn read_round(round: Round<ReadResourceResult>) -> ReadResourceResponse {
    match round {
        Round::Done(result) => ReadResourceResponse::Complete(result),
        Round::Input(input) => ReadResourceResponse::InputRequired(input),
    }
}

/// A resource read, recorded like a tool call under the tool name `resources/read`.
struct ResourceRead {
    server: String,
    /// The target database a `res://` URI named.
    database: Option<String>,
    uri: String,
    trace_id: String,
    execution_id: Uuid,
    feedback_token: Uuid,
}

impl Gateway {
    /// Hand a resource read to tracking: its URI as the arguments, the result (or the error) as
    /// the response.
    fn record_read(
        &self,
        read: ResourceRead,
        principal: &Principal,
        request: &ReadResourceRequestParams,
        context: &RequestContext<RoleServer>,
        started: Instant,
        outcome: Result<String, ToolError>,
    ) {
        let now = Utc::now();
        let max_bytes = self.state.config.tracking.max_response_bytes;
        let (response_data, response_bytes, status, error) = match outcome {
            Ok(text) => {
                let (payload, bytes) = cut_text(text, max_bytes);
                (payload, bytes, ExecutionStatus::Success, None)
            }
            Err(tool_error) => {
                let text =
                    serde_json::to_string(&tool_error.to_json(&read.trace_id)).unwrap_or_default();
                let (payload, bytes) = cut_text(text, max_bytes);
                (payload, bytes, status_of(&tool_error), Some(tool_error))
            }
        };
        let failures = Failure::for_attempts(&[], error.as_ref(), &read.trace_id, now);
        let carried = Carried::of(context);
        let origin = origin(principal, request.meta.as_ref(), &carried, self.transport);
        self.state.tracker.record(Execution {
            id: read.execution_id,
            request_data: serde_json::json!({ "uri": read.uri }),
            response_data: Some(response_data),
            response_bytes,
            execution_time_ms: i32::try_from(started.elapsed().as_millis()).unwrap_or(i32::MAX),
            status,
            error_code: error.as_ref().map(|tool_error| tool_error.code.as_str().to_owned()),
            error_message: error.map(|tool_error| tool_error.message),
            feedback_token: read.feedback_token,
            created_at: now,
            failures,
            database: read.database,
            ..Execution::of(origin, read.server, "resources/read".to_owned(), read.trace_id)
        });
    }
}
