//! How a proxied `tools/call` or `prompts/get` is served in rounds to a client that answers its
//! external server's requests by retrying (2026-07-28, `input_required.rs`), and directly to
//! every other client.

use std::sync::Arc;
use std::time::Instant;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, ResultType,
};
use rmcp::service::{RequestContext, RoleServer};
use uuid::Uuid;

use super::input_required::{self, Round};
use super::outgoing::{Origin, Outgoing};
use super::{Carried, Gateway, error, shown};
use crate::config::Principal;
use crate::external::Exchange;
use crate::registry::Route;

impl Gateway {
    /// A tool call: resumed from its `requestState`, started in rounds for a 2026-07-28 client
    /// of an external tool, or run directly.
    pub(super) async fn call_in_rounds(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        started: Instant,
        principal: Principal,
    ) -> Result<CallToolResponse, McpError> {
        input_required::check_responses(request.input_responses.as_ref())?;
        let bound_to = input_required::binding(&principal, "tools/call", &request.name);
        let pending = &self.state.pending;
        if let Some(state) = request.request_state.take() {
            if crate::cluster::untag_state(&state)
                .is_some_and(|(replica, _)| replica != self.state.cluster.id())
            {
                let reason = "the replica that held this call has stopped, and the call with it";
                super::call::record_lost(&self.state, &principal, &request.name, reason);
            }
            let responses = request.input_responses.take();
            let round = pending.resume(&state, responses, &bound_to, &context.ct, tool_failed);
            return round.await.map(tool_round);
        }
        let route = self.state.registry.route(&request.name);
        let external = matches!(route, Some(Route::External(_)));
        // orca's own tools that may ask the client's model (`sampling.rs`) ask it in rounds too.
        let samples = matches!(
            route,
            Some(Route::Internal(tool)) if super::sampling::SAMPLING_TOOLS.contains(&tool.spec.name())
        );
        if external && input_required::translates(&context) && super::tasks::declared(&context) {
            return self.call_as_task(request, context, started, principal).await;
        }
        if (external || samples) && input_required::translates(&context) {
            // The call runs on a task of its own, so that it outlives this request while the
            // client comes back with the input its server asks for; it is recorded once, when
            // it ends.
            let offered = request.input_responses.take().unwrap_or_default();
            let exchange = Exchange::new(context.client_capabilities(), offered);
            let client_gone = context.ct.clone();
            let gateway = self.clone();
            let asks = exchange.clone();
            let call = async move {
                let caller = gateway.caller(&context, Some(asks));
                gateway.run_call(request, Carried::of(&context), caller, started, principal).await
            };
            let round = pending.begin(call, exchange, &bound_to, &client_gone, tool_failed);
            return round.await.map(tool_round);
        }
        let caller = self.caller(&context, None);
        let result =
            self.run_call(request, Carried::of(&context), caller, started, principal).await;
        result.map(CallToolResponse::Complete)
    }

    /// An external prompt, in rounds as a tool call is.
    pub(super) async fn prompt_in_rounds(
        &self,
        mut request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
        principal: &Principal,
    ) -> Result<GetPromptResponse, McpError> {
        input_required::check_responses(request.input_responses.as_ref())?;
        let bound_to = input_required::binding(principal, "prompts/get", &request.name);
        let pending = &self.state.pending;
        let client_gone = context.ct.clone();
        if let Some(state) = request.request_state.take() {
            let responses = request.input_responses.take();
            let round = pending.resume(&state, responses, &bound_to, &client_gone, Result::is_err);
            return round.await.map(prompt_round);
        }
        if input_required::translates(&context) {
            let offered = request.input_responses.take().unwrap_or_default();
            let exchange = Exchange::new(context.client_capabilities(), offered);
            let gateway = self.clone();
            let asks = exchange.clone();
            let principal = principal.clone();
            let prompt = async move {
                gateway.external_prompt(request, &context, &principal, Some(asks)).await
            };
            let round = pending.begin(prompt, exchange, &bound_to, &client_gone, Result::is_err);
            return round.await.map(prompt_round);
        }
        let prompt = self.external_prompt(request, &context, principal, None).await;
        prompt.map(GetPromptResponse::Complete)
    }

    /// An external server's prompt, what the server asks during it relayed to the client (or
    /// held in `exchange` for a client that answers by retrying), masked for `principal` and
    /// its credentials redacted as a tool result's are.
    async fn external_prompt(
        &self,
        request: GetPromptRequestParams,
        context: &RequestContext<RoleServer>,
        principal: &Principal,
        exchange: Option<Arc<Exchange>>,
    ) -> Result<GetPromptResult, McpError> {
        let unknown =
            || McpError::invalid_params(format!("unknown prompt: {}", shown(&request.name)), None);
        let Some(external) = self.readable_external(context)? else { return Err(unknown()) };
        let caller = self.caller(context, exchange);
        let mut outgoing = Outgoing::new(&self.state.config, principal, Origin::Other);
        match external.get_prompt(&request.name, request.arguments, Some(caller)).await {
            None => Err(unknown()),
            Some(Ok(mut result)) => {
                outgoing.prompt(&mut result);
                outgoing.tell_in(&mut result.meta);
                result.result_type = Some(ResultType::COMPLETE);
                Ok(result)
            }
            Some(Err(mut tool_error)) => {
                outgoing.error(&mut tool_error);
                Err(error::protocol_error(&tool_error, &Uuid::new_v4().simple().to_string()))
            }
        }
    }
}

/// Whether a call's answer is a failure (for `-32021` after a refused request).
fn tool_failed(outcome: &Result<CallToolResult, McpError>) -> bool {
    outcome.as_ref().map_or(true, |result| result.is_error == Some(true))
}

fn tool_round(round: Round<CallToolResult>) -> CallToolResponse {
    match round {
        Round::Done(result) => CallToolResponse::Complete(result),
        Round::Input(input) => CallToolResponse::InputRequired(input),
    }
}

fn prompt_round(round: Round<GetPromptResult>) -> GetPromptResponse {
    match round {
        Round::Done(result) => GetPromptResponse::Complete(result),
        Round::Input(input) => GetPromptResponse::InputRequired(input),
    }
}
