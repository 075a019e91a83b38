//! The client SDK: connect to any MCP server, list and filter its tools, offer them to OpenAI,
//! Anthropic or Gemini models under provider-safe names and schemas, and execute the calls a
//! model asks for, validated against each tool's original schema. Tool calls and resource
//! reads follow a server's multi round-trip `input_required` results to the end; a server's
//! skills are listed, and loaded only on demand and only once they match their listing.
//!
//! The module uses rmcp's client side only; it knows nothing of orca's gateway, registry or
//! servers, so it works against any MCP server.
//!
//! # Example
//!
//! ```no_run
//! use orca::client::{McpClient, ToolFilter, Executor};
//!
//! # async fn run() -> Result<(), orca::client::McpError> {
//! let client = McpClient::stdio("npx", &["-y", "@modelcontextprotocol/server-everything"]).await?;
//! let filter = ToolFilter::new().exclude(["*write*"]).when(|tool| tool.read_only());
//! let converted = client.as_openai_tools(&filter).await?;
//! // Tools whose schema could not be converted are listed, with the reason, not offered.
//! let left_out: Vec<&str> = converted.set_aside.iter().map(|tool| tool.name.as_str()).collect();
//! // Send `converted.openai()` as a chat request's tools; for each tool call of the answer:
//! let executor = Executor::new(client.clone(), &converted).await?;
//! let result = executor.execute("echo", r#"{"message": "hi"}"#).await?;
//! // `result` (JSON) goes back to the model as the tool call's answer.
//! # let _ = (left_out, result);
//! # Ok(())
//! # }
//! ```

pub mod auth;
mod connection;
mod convert;
mod executor;
mod filter;
mod names;
mod provider;
mod rules;
mod schema;
mod session;
mod skills;
mod tool;

pub use connection::{DEFAULT_CALL_TIMEOUT, HttpOptions, McpClient, ToolCallResult};
pub use convert::{Converted, ConvertedTool, SetAside, convert};
pub use executor::Executor;
pub use filter::ToolFilter;
pub use names::NameMap;
pub use provider::Provider;
pub use session::{DEFAULT_INPUT_ROUNDS, Elicitation, SessionOptions};
pub use skills::{LoadedSkill, SkillError, SkillFile, SkillInfo};
pub use tool::{ToolInfo, ToolParameter};

/// Why a client operation failed.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The server lists no tool of that name.
    #[error("unknown tool `{name}`")]
    ToolNotFound {
        /// The name that was asked for.
        name: String,
    },
    /// The tool ran and reported a failure (`isError`), or the server refused the call.
    #[error("tool `{tool}` failed: {message}")]
    ToolExecution {
        /// The tool's original name.
        tool: String,
        /// The tool's own error text.
        message: String,
    },
    /// The connection could not be made, broke, or the server answered something unexpected.
    #[error("{0}")]
    Transport(String),
    /// No answer within the call timeout; the server was sent a cancellation.
    #[error("tool `{tool}` did not answer within {seconds}s (the call was cancelled)")]
    Timeout {
        /// The tool's original name (or the request, for listings).
        tool: String,
        /// The timeout that passed.
        seconds: u64,
    },
    /// The server kept answering with `input_required` (multi round-trip requests) past the
    /// session's bound; the request was abandoned.
    #[error("`{request}` still asked for input after {rounds} rounds (the request was abandoned)")]
    InputRounds {
        /// The tool's original name, or the resource's URI.
        request: String,
        /// The rounds taken.
        rounds: usize,
    },
    /// The arguments are not a JSON object, or do not match the tool's input schema.
    #[error("invalid arguments for `{tool}`: {message}")]
    InvalidArguments {
        /// The tool's original name.
        tool: String,
        /// What is wrong with them.
        message: String,
    },
}
