//! A listing of tools judged against their pins (`pins.rs`): what is served, what is held for
//! a person and what is served with a warning, each under its exposed name; and the error of a
//! call to a held tool.

use std::sync::Arc;

use rmcp::model::Tool;

use super::super::names;
use super::super::pins::{Candidate, Notice, Verdict};
use super::{ExternalTool, Upstream};
use crate::config::PinMode;
use crate::tool::{ErrorCode, ToolError};

/// A tool held until a person approves it: the tool as it would be served, and why.
#[derive(Debug, Clone)]
pub(crate) struct HeldTool {
    pub(crate) tool: Arc<ExternalTool>,
    pub(crate) notice: Notice,
}

/// A listing, judged.
#[derive(Debug, Default)]
pub(crate) struct Judged {
    pub(crate) served: Vec<Arc<ExternalTool>>,
    pub(crate) held: Vec<Arc<HeldTool>>,
    pub(crate) warned: Vec<Notice>,
}

impl Upstream {
    /// The server's tools (those its entry admits) judged by its `pin:`.
    pub(super) async fn judged(&self, tools: Vec<Tool>) -> Judged {
        let tools: Vec<Tool> =
            tools.into_iter().filter(|tool| self.config.admits(&tool.name)).collect();
        let verdicts = match (&self.pins, self.config.pin) {
            (Some(pins), mode) if mode != PinMode::Off => {
                let own: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
                let candidates: Vec<Candidate> = tools
                    .iter()
                    .map(|tool| {
                        Candidate::of(
                            tool,
                            names::exposed_name(&self.config.prefix, &tool.name),
                            &own,
                        )
                    })
                    .collect();
                pins.judge(&self.config.key, mode, &candidates).await
            }
            _ => vec![Verdict::Serve; tools.len()],
        };
        let mut judged = Judged::default();
        for (tool, verdict) in tools.into_iter().zip(verdicts) {
            let tool = Arc::new(self.exposed(tool));
            match verdict {
                Verdict::Serve => judged.served.push(tool),
                Verdict::Warn(notice) => {
                    judged.served.push(tool);
                    judged.warned.push(notice);
                }
                Verdict::Hold(notice) => judged.held.push(Arc::new(HeldTool { tool, notice })),
            }
        }
        judged
    }

    /// A listed tool as orca exposes it.
    fn exposed(&self, mut tool: Tool) -> ExternalTool {
        let upstream_name = tool.name.to_string();
        let verb = self.config.verb_for(&upstream_name, tool.annotations.as_ref());
        let repeatable = tool.annotations.as_ref().is_some_and(|hints| {
            hints.read_only_hint == Some(true) || hints.idempotent_hint == Some(true)
        });
        tool.name = names::exposed_name(&self.config.prefix, &upstream_name).into();
        names::rewrite_app_link(&mut tool, &self.config.prefix);
        ExternalTool { tool, upstream_name, verb, repeatable }
    }
}

/// The refusal of a call to a held tool: what changed, and who may let it through.
pub(crate) fn held_error(server: &str, held: &HeldTool) -> ToolError {
    let notice = &held.notice;
    let mut error = ToolError::new(
        ErrorCode::Unauthorized,
        format!(
            "`{}` of external server `{server}` is held and waiting for a person's approval: {}",
            notice.tool, notice.what
        ),
    )
    .with_hint(format!(
        "a person approves it with `orca tools approve {server} {}` or in the console; list_servers shows it under held_tools",
        notice.upstream_tool
    ))
    .not_retryable();
    error.details = Some(Box::new(serde_json::json!({
        "held": true,
        "upstream": server,
        "upstream_tool": notice.upstream_tool,
        "reason": notice.reason,
        "sha256": notice.sha256,
        "pinned_sha256": notice.pinned_sha256,
    })));
    error
}
