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
//!
//! # Design notes
//!
//! The client SDK, public (`orca::client`), on rmcp's client side only: it never uses `gateway`,
//! `registry`, `servers` or `external` (checked by `tests/it/client_sdk.rs`), so it works against
//! any MCP server.
//!
//! `auth/` is the client side of MCP authorization, shared by the SDK, the CLI and the proxy:
//! `challenge.rs` (`WWW-Authenticate`), `discovery.rs` (protected-resource metadata from the
//! challenge or its well-known paths, path then root; the authorization server's OAuth and OpenID
//! metadata in the specified order, its `issuer` compared exactly; the 2025-03-26 fallbacks, or for
//! an identity bound to an issuer that issuer's metadata instead; HTTPS except on loopback),
//! `outbound.rs` (`Outbound`, the HTTP client of every discovery, registration and token request
//! and the rules they pass first: the issuer binding of `ClientIdentity::issuer`, whose
//! `choose_issuer` refuses a resource naming another server and `check_token_destination` a token
//! endpoint off the issuer's origin or the allowed hosts, both
//! `AuthError::OtherAuthorizationServer`; and `Confinement`, orca's `oauth.allowed_hosts`, whose
//! `admit` refuses a URL off the server's origin, the issuer's and the allowed hosts before it is
//! fetched, `AuthError::Refused`, and which builds the client with no proxy and the guarded
//! resolver), `addresses.rs` (`admitted`, which addresses a remote party's URL may be fetched on:
//! no loopback but for a server on loopback, no private, link-local, shared, documentation or
//! reserved address, nor an IPv6 address carrying one; `GuardedResolver`, reqwest's resolver for a
//! confined client, which refuses a name other than the issuer's and the allowed hosts when one of
//! its addresses is not admitted, so the check is on the addresses connected to; `allowed_host`, an
//! entry's syntax), `pkce.rs`, `dpop.rs` (`DpopKey`: a P-256 key per sign-in, stored with its
//! tokens, proofs with `htm`, `htu`, `iat`, `jti`, `ath` and each server's nonce; DPoP asked for
//! only where the MCP server takes it), `token.rs` (the token endpoint: `client_secret_basic`,
//! `client_secret_post`, `none`, `private_key_jwt`, a proof and one `use_dpop_nonce` retry;
//! `Tokens`), `authorizer.rs` (`Authorizer`: identity in the specification's order, pre-registered
//! then Client ID Metadata Document then dynamic registration, one registration per issuer; the
//! authorization code with PKCE, `resource`, `state` and RFC 9207's `iss`, in two halves
//! (`begin_sign_in`, `finish_sign_in`) with only a serializable `PendingSignIn` between them, so
//! the browser may come back to another process; client credentials, JWT bearer and
//! enterprise-managed grants; scopes from the challenge, else `scopes_supported`, `offline_access`
//! only where listed; refresh before expiry and on 401 under one lock, a refresh token another
//! replica rotated adopted from the store; `TokenStore`), `agent.rs` (`LoopbackBrowser`,
//! `HeadlessAgent`) and `transport.rs` (`AuthorizedHttpClient`, rmcp's `StreamableHttpClient` over
//! reqwest with the token (or `DPoP` scheme and a fresh proof in the request's headers), one
//! sign-in per 401, at most two step-ups per request, and for a 401 `use_dpop_nonce` the MCP
//! server's nonce read from a `ping`'s answer, since rmcp does not pass the `DPoP-Nonce` header
//! on). orca builds on reqwest rather than rmcp's `auth` feature (which brings the `oauth2` crate
//! and its own client) so that storage, identity and the newest checks stay in one small module of
//! its own. `examples/conformance_client.rs` drives it for the conformance suite.
//!
//! Each execution has a `source`: `mcp` for the gateway's calls, `eval` for those of `orca eval`
//! (migration `20261125000001_execution_source`), which `export.rs` and `lessons.rs` leave out
//! unless asked.
//!
//! `feedback.rs` validates and upserts ratings; `export.rs` writes the CSV files; `lessons.rs`
//! reads the SQL tools' failed, retried and down-rated calls of a range for `orca context suggest`;
//! `store.rs` holds the pool and the migrations (`migrations/`, history in
//! `orca._sqlx_migrations`).

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
