//! What every tool shares, whichever server answers it: the verb it needs, the error taxonomy,
//! and the domain result that the gateway turns into an MCP `CallToolResult`.
//!
//! # Design notes
//!
//! What every tool shares: `Verb`, the error taxonomy (`ErrorCode`, `ToolError` and its wire JSON),
//! `ToolOutput`, `LlmUsage`, `Attempts` (the failed attempts, usage and `_meta` a multi-attempt
//! tool reports with its final error, or `ToolOutput::failed_attempts` with its result; each
//! becomes a failure row), and `parse_arguments`, which turns bad arguments into `INVALID_INPUT`
//! naming the offending key.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The permission a tool call needs. A principal holds a set of these; the gateway checks the
/// tool's verb before dispatch, independently of the tool's own code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Verb {
    Read,
    Create,
    Update,
    Delete,
}

impl Verb {
    pub(crate) const ALL: [Verb; 4] = [Verb::Read, Verb::Create, Verb::Update, Verb::Delete];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verb::Read => "read",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Delete => "delete",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Verb> {
        Verb::ALL.into_iter().find(|verb| verb.as_str() == text)
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The one error taxonomy shared by every server (DESIGN.md, "Errors").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub(crate) enum ErrorCode {
    QueryFailed,
    Timeout,
    Unauthorized,
    InvalidInput,
    ResultTruncated,
    NotFound,
    RateLimited,
    Internal,
    ConfirmationRequired,
    ExceededRetries,
    UpstreamUnavailable,
}

impl ErrorCode {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ErrorCode::QueryFailed => "QUERY_FAILED",
            ErrorCode::Timeout => "TIMEOUT",
            ErrorCode::Unauthorized => "UNAUTHORIZED",
            ErrorCode::InvalidInput => "INVALID_INPUT",
            ErrorCode::ResultTruncated => "RESULT_TRUNCATED",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::RateLimited => "RATE_LIMITED",
            ErrorCode::Internal => "INTERNAL",
            ErrorCode::ConfirmationRequired => "CONFIRMATION_REQUIRED",
            ErrorCode::ExceededRetries => "EXCEEDED_RETRIES",
            ErrorCode::UpstreamUnavailable => "UPSTREAM_UNAVAILABLE",
        }
    }

    /// Whether the same call may succeed if repeated unchanged.
    fn default_retryable(self) -> bool {
        matches!(self, ErrorCode::Timeout | ErrorCode::RateLimited | ErrorCode::UpstreamUnavailable)
    }

    /// The coarse class stored in `mcp_failures.error_type`.
    pub(crate) fn error_type(self) -> &'static str {
        match self {
            ErrorCode::InvalidInput | ErrorCode::ConfirmationRequired => "validation_error",
            ErrorCode::QueryFailed | ErrorCode::ResultTruncated => "sql_error",
            ErrorCode::Timeout => "timeout",
            ErrorCode::Unauthorized => "auth_error",
            ErrorCode::NotFound => "not_found",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::ExceededRetries => "exceeded_retries",
            ErrorCode::UpstreamUnavailable => "upstream_error",
            ErrorCode::Internal => "internal_error",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tool failure the caller should see. Messages never carry secrets, DSNs or stack traces:
/// whoever builds one is responsible for that, and the constructors take plain text only.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolError {
    pub(crate) code: ErrorCode,
    pub(crate) message: String,
    pub(crate) hint: Option<String>,
    pub(crate) retryable: bool,
    /// Server-specific structure (boxed: errors travel in `Result`s and should stay small).
    pub(crate) details: Option<Box<Value>>,
    /// For a tool that tries several times (`generate_sql`): the attempts that failed before
    /// this one, the model usage and the `_meta` to return with the error.
    pub(crate) attempts: Option<Box<Attempts>>,
    /// The failure row's `error_type` when the code's class is too coarse (`llm_timeout`).
    pub(crate) error_type: Option<&'static str>,
}

/// What a failed multi-attempt call reports besides its final error.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Attempts {
    /// Earlier attempts that failed, in order (each becomes one `mcp_failures` row).
    pub(crate) earlier: Vec<ToolError>,
    pub(crate) llm: Option<LlmUsage>,
    pub(crate) meta: Map<String, Value>,
}

impl ToolError {
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> ToolError {
        ToolError {
            code,
            message: message.into(),
            hint: None,
            retryable: code.default_retryable(),
            details: None,
            attempts: None,
            error_type: None,
        }
    }

    pub(crate) fn invalid_input(message: impl Into<String>) -> ToolError {
        ToolError::new(ErrorCode::InvalidInput, message)
    }

    pub(crate) fn not_found(message: impl Into<String>) -> ToolError {
        ToolError::new(ErrorCode::NotFound, message)
    }

    pub(crate) fn upstream_unavailable(message: impl Into<String>) -> ToolError {
        ToolError::new(ErrorCode::UpstreamUnavailable, message)
    }

    pub(crate) fn not_retryable(mut self) -> ToolError {
        self.retryable = false;
        self
    }

    /// The class stored in `mcp_failures.error_type`: the code's, unless set otherwise.
    pub(crate) fn error_type(&self) -> &'static str {
        self.error_type.unwrap_or_else(|| self.code.error_type())
    }

    pub(crate) fn with_hint(mut self, hint: impl Into<String>) -> ToolError {
        self.hint = Some(hint.into());
        self
    }

    /// The error object of the taxonomy: `{"error": {code, message, hint, trace_id, retryable, details}}`.
    pub(crate) fn to_json(&self, trace_id: &str) -> Value {
        let mut error = Map::new();
        error.insert("code".into(), Value::from(self.code.as_str()));
        error.insert("message".into(), Value::from(self.message.clone()));
        error.insert("hint".into(), self.hint.clone().map_or(Value::Null, Value::from));
        error.insert("trace_id".into(), Value::from(trace_id));
        error.insert("retryable".into(), Value::from(self.retryable));
        if let Some(details) = &self.details {
            error.insert("details".into(), (**details).clone());
        }
        let mut root = Map::new();
        root.insert("error".into(), Value::Object(error));
        Value::Object(root)
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ToolError {}

/// Which model answered, and what it cost, for the execution record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct LlmUsage {
    pub(crate) provider: String,
    pub(crate) model: String,
    pub(crate) prompt_tokens: Option<i64>,
    pub(crate) completion_tokens: Option<i64>,
    /// Time spent waiting for the provider, over every request of the call.
    pub(crate) latency_ms: Option<i32>,
}

/// A tool's successful result in domain terms: the structured value, anything the tool adds to
/// `_meta` (provider, model, attempt, cached ...), and the LLM usage to record.
#[derive(Debug, Clone, Default)]
pub(crate) struct ToolOutput {
    pub(crate) value: Value,
    pub(crate) meta: Map<String, Value>,
    pub(crate) llm: Option<LlmUsage>,
    /// PNG images shown to the client next to the JSON (a chart).
    pub(crate) png_images: Vec<Vec<u8>>,
    /// Attempts that failed before this result (each becomes one `mcp_failures` row).
    pub(crate) failed_attempts: Vec<ToolError>,
    /// A member of `value` (a top-level key holding `null`) whose JSON is already encoded:
    /// a big read's rows, written into the message at the transport (see `splice`).
    pub(crate) spliced: Option<Spliced>,
}

/// Already encoded JSON for one top-level member of a tool's result.
#[derive(Debug, Clone)]
pub(crate) struct Spliced {
    pub(crate) key: &'static str,
    pub(crate) json: crate::splice::RawJson,
}

impl ToolOutput {
    pub(crate) fn new(value: Value) -> ToolOutput {
        ToolOutput {
            value,
            meta: Map::new(),
            llm: None,
            png_images: Vec::new(),
            failed_attempts: Vec::new(),
            spliced: None,
        }
    }
}

/// Decode a tool's arguments into its parameter type, or say which argument is wrong.
///
/// # Errors
///
/// `INVALID_INPUT` naming the offending path when the arguments do not match the type.
pub(crate) fn parse_arguments<T: serde::de::DeserializeOwned>(
    arguments: Option<Map<String, Value>>,
) -> Result<T, ToolError> {
    let value = Value::Object(arguments.unwrap_or_default());
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        let message = if path == "." {
            format!("invalid arguments: {inner}")
        } else {
            format!("invalid argument `{path}`: {inner}")
        };
        ToolError::invalid_input(message).with_hint("check the tool's input schema in tools/list")
    })
}
