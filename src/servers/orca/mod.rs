//! The built-in `orca` server: `list_servers` (every server with its status, tool count and
//! capabilities, and who the caller is) and `submit_feedback` (the contract of
//! `POST /mcp/feedback`, for agents).
//!
//! # Design notes
//!
//! `servers/orca` holds `list_servers` and `submit_feedback`.

use std::sync::Arc;

use rmcp::model::ToolAnnotations;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sqlx::PgPool;

use super::{CallContext, ToolSpec};
use crate::config::Principal;
use crate::directory::Directory;
use crate::tool::{ToolError, ToolOutput, Verb, parse_arguments};
use crate::tracking::{FeedbackError, FeedbackInput, Tracker, submit_feedback};

#[derive(Debug, Clone)]
pub(crate) struct OrcaServer {
    directory: Directory,
    pool: PgPool,
    tracker: Tracker,
    tools: Arc<[ToolSpec]>,
}

/// `list_servers` takes no arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListServersParams {}

/// Feedback on an earlier tool result.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code, reason = "validated by FeedbackInput; this type documents the schema")]
pub(crate) struct SubmitFeedbackParams {
    /// The `_meta.feedback_token` of the tool result being rated.
    feedback_token: String,
    /// `up` or `down`.
    rating: Rating,
    /// Optional detailed rating from 1 to 5.
    #[schemars(range(min = 1, max = 5))]
    rating_score: Option<i64>,
    /// Optional free text: what was wrong, or what helped.
    comment: Option<String>,
    /// The database (catalog) the rated call worked on; when given, a token of a call on another
    /// database is refused.
    database: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Rating {
    Up,
    Down,
}

impl OrcaServer {
    pub(crate) const DESCRIPTION: &str =
        "orca itself: the servers behind this gateway, and feedback on tool results";

    pub(crate) fn new(directory: Directory, pool: PgPool, tracker: Tracker) -> OrcaServer {
        let tools = OrcaServer::declared_tools();
        OrcaServer { directory, pool, tracker, tools: tools.into() }
    }

    /// The tools this server declares.
    pub(crate) fn declared_tools() -> Vec<ToolSpec> {
        vec![
            ToolSpec::new::<ListServersParams>(
                "list_servers",
                "List every MCP server behind this gateway, internal and external, with its status, tool count, tool names and capabilities, and the identity you call with (principal, OAuth client, role, verbs).",
                Verb::Read,
                ToolAnnotations::new().read_only(true).idempotent(true).open_world(false),
            ),
            ToolSpec::new::<SubmitFeedbackParams>(
                "submit_feedback",
                "Rate an earlier tool result: pass its _meta.feedback_token, a rating (up or down), and optionally a 1-5 rating_score and a comment. A second rating for the same token replaces the first.",
                // Rating an answer changes none of the user's data, so read-only principals may do it.
                Verb::Read,
                ToolAnnotations::new()
                    .read_only(false)
                    .destructive(false)
                    .idempotent(true)
                    .open_world(false),
            ),
        ]
    }

    pub(crate) fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: Option<Map<String, Value>>,
        context: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        match tool {
            "list_servers" => {
                let ListServersParams {} = parse_arguments(arguments)?;
                Ok(ToolOutput::new(self.list_servers(&context.principal)))
            }
            "submit_feedback" => self.submit_feedback(arguments.as_ref(), context).await,
            other => Err(ToolError::not_found(format!("the orca server has no tool `{other}`"))),
        }
    }

    /// Every server, or with a tool policy only the servers and tools the caller may use, and
    /// who the caller is.
    fn list_servers(&self, caller: &Principal) -> Value {
        let mut servers = self.directory.read().map(|servers| servers.clone()).unwrap_or_default();
        for server in &mut servers {
            held_for(caller, &server.name, server.external.as_mut());
        }
        if caller.tools.is_some() {
            for server in &mut servers {
                server.tools.retain(|tool| caller.may_use(tool, &server.name));
                server.tool_count = server.tools.len();
            }
            servers.retain(|server| !server.tools.is_empty());
        }
        json!({ "servers": servers, "caller": caller_summary(caller) })
    }

    async fn submit_feedback(
        &self,
        arguments: Option<&Map<String, Value>>,
        context: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let input = FeedbackInput::from_arguments(arguments).map_err(ToolError::invalid_input)?;
        match submit_feedback(&self.pool, &self.tracker, &input, Some(&context.principal.name))
            .await
        {
            Ok(row) => Ok(ToolOutput::new(json!({ "feedback": row }))),
            Err(FeedbackError::NotFound) => {
                Err(ToolError::not_found("no execution has this feedback token")
                    .with_hint("pass the _meta.feedback_token of an earlier tool result"))
            }
            Err(FeedbackError::Unavailable) => {
                Err(ToolError::upstream_unavailable("the feedback store is unavailable")
                    .with_hint("try again shortly"))
            }
            Err(error @ FeedbackError::OtherDatabase { .. }) => Err(ToolError::invalid_input(
                error.to_string(),
            )
            .not_retryable()
            .with_hint(
                "rate a result with its own feedback token, naming the database its call worked on",
            )),
        }
    }
}

/// What the caller sees of an external server's held and warned tools: those its tool policy
/// admits, and their diffs and the excerpts of their findings (which quote the definitions as
/// the server lists them now, the very text a hold keeps from the model) only when it may
/// approve tools.
fn held_for(caller: &Principal, server: &str, external: Option<&mut Value>) {
    let Some(external) = external else { return };
    for key in ["held_tools", "warned_tools"] {
        let Some(Value::Array(entries)) = external.get_mut(key) else { continue };
        entries.retain(|entry| {
            entry
                .get("tool")
                .and_then(Value::as_str)
                .is_some_and(|tool| caller.may_use(tool, server))
        });
        if !caller.approve_tools {
            for entry in entries.iter_mut().filter_map(Value::as_object_mut) {
                entry.remove("diff");
                if let Some(Value::Array(findings)) = entry.get_mut("findings") {
                    for finding in findings.iter_mut().filter_map(Value::as_object_mut) {
                        finding.remove("excerpt");
                    }
                }
            }
        }
    }
}

/// The identity a call is made with, as `list_servers` reports it: the principal (an API key's
/// name or a token's user), the OAuth client and the roles that gave it its verbs (`null` for
/// API keys and stdio), and the verbs.
fn caller_summary(principal: &Principal) -> Value {
    json!({
        "principal": principal.name,
        "client": principal.client,
        "role": principal.role,
        "verbs": principal.verbs,
    })
}
