//! `SessionOptions`: how a session is opened (the protocol revision, so `initialize` or
//! `server/discover`) and how the client answers what a server asks of it mid-request
//! (elicitations, sent as server requests or inside a multi round-trip `input_required` result).
//!
//! # Design notes
//!
//! `session.rs`: `SessionOptions`, the protocol revision (`initialize`, or `server/discover` for
//! 2026-07-28) and `Elicitation`, what the handler answers to an elicitation (a server request, or
//! one inside an `input_required` round).

use rmcp::model::{
    ClientCapabilities, ElicitRequestParams, ElicitResult, ElicitationAction, ProtocolVersion,
};
use rmcp::service::ClientLifecycleMode;
use serde_json::{Map, Value, json};

/// How many `input_required` rounds one call may take before the client gives up on it
/// (rmcp's and the other SDKs' default).
pub const DEFAULT_INPUT_ROUNDS: usize = rmcp::model::DEFAULT_MRTR_MAX_ROUNDS;

/// What the client answers to an elicitation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Elicitation {
    /// The capability is not declared, and every elicitation is declined.
    #[default]
    Decline,
    /// The form capability is declared, and every form is accepted with the defaults its schema
    /// gives (a field without a default is left out); a URL elicitation is declined. For
    /// unattended clients whose servers ask only for confirmation or for values with defaults.
    AcceptDefaults,
}

/// How a session is opened and what it answers to the server's requests for input.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// The protocol revision to speak. `None` negotiates with `initialize` from the newest
    /// revision that has it (2025-11-25); a revision without `initialize` (2026-07-28) opens the
    /// session with `server/discover` and describes the client in every request.
    pub protocol_version: Option<ProtocolVersion>,
    /// What elicitations are answered with.
    pub elicitation: Elicitation,
    /// How many `input_required` rounds a tool call or resource read may take.
    pub max_input_rounds: usize,
}

impl Default for SessionOptions {
    fn default() -> SessionOptions {
        SessionOptions {
            protocol_version: None,
            elicitation: Elicitation::Decline,
            max_input_rounds: DEFAULT_INPUT_ROUNDS,
        }
    }
}

impl SessionOptions {
    /// The revision announced, and the lifecycle that opens the session.
    pub(crate) fn lifecycle(&self) -> (ProtocolVersion, ClientLifecycleMode) {
        let version =
            self.protocol_version.clone().unwrap_or(ProtocolVersion::LATEST_WITH_INITIALIZE);
        let mode = if version.has_initialize() {
            ClientLifecycleMode::Initialize
        } else {
            ClientLifecycleMode::Discover { preferred_versions: vec![version.clone()] }
        };
        (version, mode)
    }

    /// The capabilities the client declares.
    pub(crate) fn capabilities(&self) -> ClientCapabilities {
        match self.elicitation {
            Elicitation::Decline => ClientCapabilities::default(),
            Elicitation::AcceptDefaults => {
                serde_json::from_value(json!({ "elicitation": { "form": {} } })).unwrap_or_default()
            }
        }
    }

    /// The answer to one elicitation.
    pub(crate) fn answer(&self, request: &ElicitRequestParams) -> ElicitResult {
        match (self.elicitation, request) {
            (
                Elicitation::AcceptDefaults,
                ElicitRequestParams::FormElicitationParams { requested_schema, .. },
            ) => {
                let schema = serde_json::to_value(requested_schema).unwrap_or(Value::Null);
                ElicitResult::new(ElicitationAction::Accept).with_content(defaults_of(&schema))
            }
            _ => ElicitResult::new(ElicitationAction::Decline),
        }
    }
}

/// The object of every default a form's schema gives, by property.
fn defaults_of(schema: &Value) -> Value {
    let mut content = Map::new();
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            if let Some(default) = property.get("default") {
                content.insert(name.clone(), default.clone());
            }
        }
    }
    Value::Object(content)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(schema: Value) -> ElicitRequestParams {
        serde_json::from_value(json!({
            "mode": "form", "message": "confirm?", "requestedSchema": schema
        }))
        .unwrap()
    }

    #[test]
    fn elicitations_are_declined_or_accepted_with_the_schema_defaults() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": { "type": "string", "default": "John Doe" },
                "age": { "type": "integer", "default": 30 },
                "confirmed": { "type": "boolean" }
            }
        });
        let url: ElicitRequestParams = serde_json::from_value(json!({
            "mode": "url", "message": "sign in", "url": "https://example.com", "elicitationId": "1"
        }))
        .unwrap();
        let cases = [
            (Elicitation::Decline, form(schema.clone()), json!({ "action": "decline" })),
            (
                Elicitation::AcceptDefaults,
                form(schema),
                json!({ "action": "accept", "content": { "name": "John Doe", "age": 30 } }),
            ),
            (Elicitation::AcceptDefaults, url, json!({ "action": "decline" })),
        ];
        for (elicitation, request, expected) in cases {
            let options = SessionOptions { elicitation, ..SessionOptions::default() };
            let answer = serde_json::to_value(options.answer(&request)).unwrap();
            assert_eq!(answer, expected, "{elicitation:?}");
        }
    }

    #[test]
    fn a_revision_without_initialize_opens_the_session_with_discover() {
        let cases = [
            (None, "2025-11-25", true),
            (Some(ProtocolVersion::V_2025_06_18), "2025-06-18", true),
            (Some(ProtocolVersion::V_2026_07_28), "2026-07-28", false),
        ];
        for (protocol_version, expected, initialize) in cases {
            let options = SessionOptions { protocol_version, ..SessionOptions::default() };
            let (version, mode) = options.lifecycle();
            assert_eq!(version.as_str(), expected);
            assert_eq!(mode == ClientLifecycleMode::Initialize, initialize, "{expected}");
        }
    }
}
