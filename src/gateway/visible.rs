//! The tools a caller may see: its verbs and tool policy applied to the catalog, worked out once
//! per access (verbs and policies) and catalog state, and kept until the catalog changes, so
//! that a `tools/list` matches no glob while nothing changed.
//!
//! The internal servers' tools never change while orca runs; the external servers' do (a
//! server starts, restarts or says its list changed). Each list is kept with the state it was
//! made from (`ExternalServers::tools_state`, read before the list is made) and handed out only
//! while the state is still the current one, so a change is seen by the very next request,
//! without waiting for the debounced `list_changed` that clients get.

use std::sync::{Arc, Mutex};

use rmcp::model::Tool;

use crate::config::{Principal, ToolAccess};
use crate::external::ToolsState;
use crate::registry::Registry;

/// How many accesses' lists are kept for one catalog state; past that the oldest goes. An API
/// key or a set of roles is one access, so this is the number of distinct ones in use at once.
const KEPT: usize = 32;

/// The tools one access may see, each with its server's name, in the order `tools/list`
/// shows them.
pub(super) type Visible = Arc<[(Tool, String)]>;

/// The lists of visible tools, for the current catalog state.
#[derive(Debug, Default)]
pub(super) struct VisibleTools {
    kept: Mutex<Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    /// The catalog state every list below was made from (`None`: no external servers).
    state: Option<ToolsState>,
    lists: Vec<(ToolAccess, Visible)>,
}

impl VisibleTools {
    /// The tools `principal` may see and call: its verbs and its tool policy allow them.
    pub(super) fn of(&self, registry: &Registry, principal: &Principal) -> Visible {
        let state = registry.external().map(|external| external.tools_state());
        {
            let kept = self.kept.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if kept.state == state
                && let Some((_, list)) =
                    kept.lists.iter().find(|(access, _)| access.is_of(principal))
            {
                return Arc::clone(list);
            }
        }
        let list: Visible = made(registry, state.as_ref(), principal).into();
        let mut kept = self.kept.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Every kept list is of `kept.state`: a list of another state replaces them all (when
        // it is of an older state, the next request finds the state changed and makes its own).
        if kept.state != state {
            kept.state = state;
            kept.lists.clear();
        }
        kept.lists.retain(|(access, _)| !access.is_of(principal));
        if kept.lists.len() >= KEPT {
            kept.lists.remove(0);
        }
        kept.lists.push((principal.tool_access(), Arc::clone(&list)));
        list
    }
}

/// The servers `principal` may reach, the prompts, resources and sign-ins of: those it may see
/// a tool of; `None`: every server (no tool policy).
pub(super) fn servers_in_reach(
    visible: &VisibleTools,
    registry: &Registry,
    principal: &Principal,
) -> Option<std::collections::HashSet<String>> {
    principal.tools.as_ref()?;
    Some(visible.of(registry, principal).iter().map(|(_, server)| server.clone()).collect())
}

/// The tools of the internal servers and of the external ones in `state` that `principal` may
/// see.
fn made(
    registry: &Registry,
    state: Option<&ToolsState>,
    principal: &Principal,
) -> Vec<(Tool, String)> {
    let mut tools: Vec<(Tool, String)> = registry
        .tools()
        .filter(|tool| {
            principal.may(tool.spec.verb) && principal.may_use(tool.spec.name(), tool.server)
        })
        .map(|tool| (tool.spec.tool.clone(), tool.server.to_owned()))
        .collect();
    if let (Some(external), Some(state)) = (registry.external(), state) {
        tools.extend(
            external
                .tools_in(state)
                .into_iter()
                .filter(|(tool, verb, server)| {
                    principal.may(*verb) && principal.may_use(&tool.name, server)
                })
                .map(|(tool, _, server)| (tool, server.to_owned())),
        );
    }
    tools
}
