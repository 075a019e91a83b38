//! `orca tools` and `orca call`, and the connection both (and `orca ask`) make: to an MCP
//! server started over stdio (`--stdio`), to a Streamable HTTP endpoint (`--url`), or, with
//! neither, to orca's own gateway in this process (the configuration of `orca serve`), over
//! an in-memory pipe. The client SDK does the MCP work; this file only wires and prints.
//!
//! # Design notes
//!
//! `cli/tools.rs` (`orca tools`, `orca call`), `cli/skills.rs` (`orca skills`) and `cli/ask.rs`
//! (`orca ask`: async-openai for the OpenAI wire, `llm::Llm::anthropic_messages` for Anthropic's
//! tool blocks) use it; without `--stdio`/`--url` the CLI serves its own `Gateway` on one end of
//! `tokio::io::duplex` and connects the client to the other.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};
use rmcp::ServiceExt;
use serde_json::{Value, json};

use super::Running;
use super::output::{print, print_error};
use crate::client::{HttpOptions, McpClient, McpError, Provider, ToolFilter, ToolInfo};
use crate::config::{self, Env};

/// Which MCP server to talk to.
#[derive(Debug, Args)]
pub(super) struct Target {
    /// Start this MCP server and talk to it over stdio: the command and its arguments in one
    /// string (quote an argument with spaces), for example "npx -y @modelcontextprotocol/server-everything"
    #[arg(long, value_name = "COMMAND", conflicts_with = "url")]
    stdio: Option<String>,

    /// Talk to this Streamable HTTP endpoint, for example http://127.0.0.1:9000/mcp
    #[arg(long, value_name = "URL")]
    url: Option<String>,

    /// Bearer token sent to --url
    #[arg(long, value_name = "TOKEN", requires = "url")]
    token: Option<String>,

    /// Extra header sent to --url, `NAME: VALUE` (repeatable)
    #[arg(long = "header", value_name = "NAME: VALUE", requires = "url")]
    headers: Vec<String>,

    /// The MCP revision to speak to --url: 2025-11-25 and older open the session with
    /// `initialize` (the default, 2025-11-25); 2026-07-28 with `server/discover`, its tool calls
    /// following the server's multi round-trip `input_required` results
    #[arg(long, value_name = "VERSION", requires = "url")]
    protocol: Option<String>,

    /// Seconds a tool call may take before it is cancelled
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    timeout: u64,
}

/// Tool filters by name: include first, then exclude.
#[derive(Debug, Args)]
pub(super) struct Filters {
    /// Offer only these tools: names or `*` patterns, comma-separated
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    include: Vec<String>,

    /// Never offer these tools: names or `*` patterns, comma-separated
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    exclude: Vec<String>,
}

impl Filters {
    pub(super) fn filter(&self) -> ToolFilter {
        ToolFilter::new()
            .include(self.include.iter().map(|name| name.trim().to_owned()))
            .exclude(self.exclude.iter().map(|name| name.trim().to_owned()))
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    /// Name, annotations and a one-line description per tool
    Table,
    /// The tools as the server lists them
    Json,
    /// OpenAI Chat Completions tools
    Openai,
    /// Anthropic Messages tools
    Anthropic,
    /// Gemini function declarations
    Gemini,
}

#[derive(Debug, Args)]
pub(super) struct ToolsArgs {
    /// `held` or `approve`: the external tools held for a person
    #[command(subcommand)]
    pub(super) pins: Option<super::pins::PinsCommand>,

    #[command(flatten)]
    target: Target,

    /// Output format
    #[arg(long, value_enum, default_value = "table")]
    format: Format,

    #[command(flatten)]
    filters: Filters,
}

#[derive(Debug, Args)]
pub(super) struct CallArgs {
    /// The tool's name on the server
    #[arg(value_name = "TOOL")]
    tool: String,

    /// The arguments, a JSON object
    #[arg(long, value_name = "JSON", default_value = "{}")]
    args: String,

    #[command(flatten)]
    target: Target,
}

/// A connected client and, for orca's own gateway, what runs it.
pub(super) struct Connection {
    pub(super) client: McpClient,
    local: Option<(Running, tokio::task::JoinHandle<()>)>,
}

impl Connection {
    /// Close the session, then stop the in-process gateway when there is one.
    pub(super) async fn close(self) -> anyhow::Result<()> {
        self.client.close().await;
        if let Some((running, server)) = self.local {
            let _ = tokio::time::timeout(Duration::from_secs(2), server).await;
            running.stop().await?;
        }
        Ok(())
    }
}

/// The sign-in of `orca tools|call|ask --url` to a server that asks for OAuth, kept for this
/// command only.
async fn sign_in_for_command(
    url: &str,
) -> anyhow::Result<std::sync::Arc<crate::client::auth::Authorizer>> {
    use crate::client::auth::{Announce, Authorizer, AuthorizerConfig, Grant, LoopbackBrowser};
    let announce: Announce = Box::new(|url, opened| {
        if opened {
            super::output::print_error(&format!(
                "The server asks to sign in; a browser was opened. If it did not, open:\n  {url}"
            ));
        } else {
            super::output::print_error(&format!("The server asks to sign in. Open:\n  {url}"));
        }
    });
    let agent = LoopbackBrowser::bind(announce, true).await?;
    let mut config =
        AuthorizerConfig::new(url, Grant::AuthorizationCode(std::sync::Arc::new(agent)));
    config.identity.client_name = "orca CLI".to_owned();
    config.sign_in_hint = "run the command again to sign in".to_owned();
    Ok(std::sync::Arc::new(Authorizer::new(config)?))
}

/// Connect to the target, or to orca's own gateway started here.
pub(super) async fn connect(
    target: &Target,
    config_path: Option<&Path>,
    env: &Env,
) -> anyhow::Result<Connection> {
    let timeout = Duration::from_secs(target.timeout.max(1));
    if let Some(command_line) = &target.stdio {
        let words = split_command(command_line)?;
        let (command, args) = words.split_first().context("--stdio: the command is empty")?;
        let client = McpClient::stdio(command, args).await?;
        return Ok(Connection { client: client.with_call_timeout(timeout), local: None });
    }
    if let Some(url) = &target.url {
        let mut headers = Vec::new();
        for header in &target.headers {
            let (name, value) = header
                .split_once(':')
                .with_context(|| format!("--header `{header}`: expected NAME: VALUE"))?;
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
        let mut options =
            HttpOptions { bearer_token: target.token.clone(), headers, ..HttpOptions::default() };
        options.session.protocol_version = target.protocol.as_deref().map(protocol).transpose()?;
        let client = if target.token.is_some() {
            McpClient::http(url, options).await?
        } else {
            // A server that asks for OAuth gets a sign-in for this command: the browser when
            // there is one, the address on stderr either way, the redirect on a loopback port.
            McpClient::http_authorized(url, options, sign_in_for_command(url).await?).await?
        };
        return Ok(Connection { client: client.with_call_timeout(timeout), local: None });
    }
    let config = config::load(config_path, env)?;
    let running = Running::start(config, None, true).await?;
    let (client_side, server_side) = tokio::io::duplex(1 << 20);
    let gateway =
        crate::gateway::Gateway::new(running.state.clone(), crate::gateway::Transport::Stdio);
    let server = tokio::spawn(async move {
        // The stdio transport, which writes pre-encoded results into its messages.
        let (read, write) = tokio::io::split(server_side);
        let transport = crate::external::BatchedTransport::<rmcp::RoleServer, _, _>::new(
            read,
            write,
            rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH,
        );
        match gateway.serve(transport).await {
            Ok(service) => {
                let _ = service.waiting().await;
            }
            Err(error) => tracing::warn!(%error, "the in-process gateway did not start"),
        }
    });
    match McpClient::with_transport(client_side).await {
        Ok(client) => Ok(Connection {
            client: client.with_call_timeout(timeout),
            local: Some((running, server)),
        }),
        Err(error) => {
            server.abort();
            running.stop().await?;
            Err(error.into())
        }
    }
}

/// A revision this client knows, by its date.
fn protocol(version: &str) -> anyhow::Result<rmcp::model::ProtocolVersion> {
    let known = rmcp::model::ProtocolVersion::KNOWN_VERSIONS;
    known.iter().find(|known| known.as_str() == version).cloned().with_context(|| {
        let names: Vec<&str> = known.iter().map(|known| known.as_str()).collect();
        format!("--protocol {version}: not a revision this client speaks ({})", names.join(", "))
    })
}

/// A command line split into words: whitespace separates, single or double quotes group, a
/// backslash escapes the next character.
pub(super) fn split_command(line: &str) -> anyhow::Result<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut characters = line.chars();
    while let Some(character) = characters.next() {
        match (quote, character) {
            (Some(open), close) if close == open => quote = None,
            (None, '\'' | '"') => {
                quote = Some(character);
                in_word = true;
            }
            (None | Some('"'), '\\') => {
                word.extend(characters.next());
                in_word = true;
            }
            (None, space) if space.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (_, other) => {
                word.push(other);
                in_word = true;
            }
        }
    }
    anyhow::ensure!(quote.is_none(), "--stdio: unclosed quote in `{line}`");
    if in_word {
        words.push(word);
    }
    Ok(words)
}

pub(super) async fn tools(
    args: ToolsArgs,
    config_path: Option<&Path>,
    env: &Env,
) -> anyhow::Result<ExitCode> {
    let connection = connect(&args.target, config_path, env).await?;
    let outcome = list(&connection.client, args.format, &args.filters.filter()).await;
    connection.close().await?;
    print(&outcome?);
    Ok(ExitCode::SUCCESS)
}

async fn list(client: &McpClient, format: Format, filter: &ToolFilter) -> anyhow::Result<String> {
    let provider = match format {
        Format::Table => return Ok(table(&filter.apply(&client.list_tools().await?))),
        Format::Json => {
            let tools: Vec<Value> =
                filter.apply(&client.list_tools().await?).iter().map(tool_json).collect();
            return Ok(serde_json::to_string_pretty(&tools)?);
        }
        Format::Openai => Provider::OpenAi,
        Format::Anthropic => Provider::Anthropic,
        Format::Gemini => Provider::Gemini,
    };
    let converted = client.convert(provider, filter).await?;
    Ok(serde_json::to_string_pretty(&converted.to_json())?)
}

fn tool_json(tool: &ToolInfo) -> Value {
    let mut value = json!({
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
    });
    if let Some(annotations) = &tool.annotations {
        value["annotations"] = serde_json::to_value(annotations).unwrap_or(Value::Null);
    }
    value
}

/// What a tool's annotations say, in a few words.
fn annotations(tool: &ToolInfo) -> String {
    let Some(hints) = &tool.annotations else { return "-".to_owned() };
    let mut words = Vec::new();
    if hints.read_only_hint == Some(true) {
        words.push("read-only");
    } else if tool.destructive() {
        words.push("destructive");
    } else {
        words.push("write");
    }
    if hints.idempotent_hint == Some(true) {
        words.push("idempotent");
    }
    if hints.open_world_hint == Some(true) {
        words.push("open-world");
    }
    words.join(", ")
}

fn table(tools: &[ToolInfo]) -> String {
    let rows: Vec<(String, String, String)> = tools
        .iter()
        .map(|tool| {
            let line = tool.description.lines().next().unwrap_or_default().trim();
            let mut description: String = line.chars().take(100).collect();
            if line.chars().count() > 100 {
                description.push_str("...");
            }
            (tool.name.clone(), annotations(tool), description)
        })
        .collect();
    let name_width = rows.iter().map(|row| row.0.chars().count()).max().unwrap_or(0).max(4);
    let hint_width = rows.iter().map(|row| row.1.chars().count()).max().unwrap_or(0).max(11);
    let mut text = format!("{:name_width$}  {:hint_width$}  DESCRIPTION\n", "NAME", "ANNOTATIONS");
    for (name, hints, description) in rows {
        text.push_str(&format!("{name:name_width$}  {hints:hint_width$}  {description}\n"));
    }
    text.push_str(&format!("({} tools)", tools.len()));
    text
}

pub(super) async fn call(
    args: CallArgs,
    config_path: Option<&Path>,
    env: &Env,
) -> anyhow::Result<ExitCode> {
    // The arguments are checked before anything is started.
    let arguments: Value = match serde_json::from_str(&args.args) {
        Ok(Value::Object(arguments)) => Value::Object(arguments),
        Ok(other) => {
            print_error(&format!("error: --args must be a JSON object, got {other}"));
            return Ok(ExitCode::from(2));
        }
        Err(error) => {
            print_error(&format!("error: --args is not valid JSON: {error}"));
            return Ok(ExitCode::from(2));
        }
    };
    let connection = connect(&args.target, config_path, env).await?;
    let outcome = connection.client.call_tool(&args.tool, arguments).await;
    let known = match &outcome {
        Err(McpError::ToolNotFound { .. }) => connection
            .client
            .list_tools()
            .await
            .map(|tools| tools.into_iter().map(|tool| tool.name).collect::<Vec<_>>().join(", "))
            .unwrap_or_default(),
        _ => String::new(),
    };
    connection.close().await?;
    match outcome {
        Ok(result) => {
            let success = result.success;
            let printed =
                json!({"success": result.success, "data": result.data, "error": result.error});
            print(&serde_json::to_string_pretty(&printed)?);
            Ok(ExitCode::from(if success { 0 } else { 1 }))
        }
        Err(McpError::ToolNotFound { name }) => {
            print_error(&format!("error: unknown tool `{name}`; the server's tools: {known}"));
            Ok(ExitCode::from(2))
        }
        Err(error @ McpError::InvalidArguments { .. }) => {
            print_error(&format!("error: {error}"));
            Ok(ExitCode::from(2))
        }
        Err(error) => Err(error.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::split_command;

    #[test]
    fn command_lines_split_on_spaces_and_keep_quoted_words() {
        let cases: [(&str, &[&str]); 4] = [
            ("npx -y server", &["npx", "-y", "server"]),
            ("  node  'my dir/index.js' stdio ", &["node", "my dir/index.js", "stdio"]),
            (r#"cmd "a \"b\"" c\ d"#, &["cmd", "a \"b\"", "c d"]),
            ("cmd ''", &["cmd", ""]),
        ];
        for (line, expected) in cases {
            assert_eq!(split_command(line).unwrap(), expected, "{line}");
        }
        assert!(split_command("cmd 'open").is_err());
    }
}
