//! `guard:` in `orca.yaml`: what orca does with what servers send back before it leaves orca.
//! `guard.secrets`: `redact` (the default) replaces every credential found in a tool's result or
//! error, from every server, with a marker naming its kind; `off` passes them on.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// What becomes of credentials in results and errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum SecretsMode {
    #[default]
    Redact,
    Off,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct GuardConfig {
    pub(crate) secrets: SecretsMode,
}

/// `guard:` as written: what orca does with what servers send back.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Guard")]
pub(super) struct RawGuard {
    /// `redact`: credentials in every tool result, resource read, prompt and completion and
    /// their errors, from every server, are replaced with `[REDACTED:<kind>]`; `off` (which
    /// YAML may read as `false`): passed on.
    #[schemars(extend("enum" = ["redact", "off", false], "default" = "redact"))]
    secrets: Option<Value>,
}

impl RawGuard {
    pub(super) fn validate(self, file: &str, errors: &mut Vec<String>) -> GuardConfig {
        let secrets = match &self.secrets {
            None => SecretsMode::Redact,
            Some(Value::String(text)) if text == "redact" => SecretsMode::Redact,
            Some(Value::String(text)) if text == "off" => SecretsMode::Off,
            Some(Value::Bool(false)) => SecretsMode::Off,
            Some(other) => {
                let shown = other.as_str().map_or_else(|| other.to_string(), str::to_owned);
                errors.push(format!(
                    "{file}: guard.secrets: unknown mode `{shown}`; expected redact (the default) or off"
                ));
                SecretsMode::Redact
            }
        };
        GuardConfig { secrets }
    }
}
