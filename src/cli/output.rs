//! The one place that writes to stdout (and the one that writes errors to stderr): in stdio mode
//! stdout is the protocol channel, so nothing else may print.

use std::net::SocketAddr;

use crate::config::Config;

#[allow(clippy::print_stdout, reason = "the CLI's user-facing output")]
pub(super) fn print(text: &str) {
    println!("{text}");
}

#[allow(
    clippy::print_stderr,
    reason = "errors that end the process, after logging may be unavailable"
)]
pub(super) fn print_error(text: &str) {
    eprintln!("{text}");
}

/// Progress of a long command on stderr: a whole line, or (without `newline`) text that
/// redraws the current line of a terminal.
#[allow(clippy::print_stderr, reason = "progress goes to stderr, beside the logs")]
pub(super) fn progress(text: &str, newline: bool) {
    use std::io::Write as _;
    let mut stderr = std::io::stderr().lock();
    let _ = if newline { writeln!(stderr, "{text}") } else { write!(stderr, "{text}") };
    let _ = stderr.flush();
}

/// What `orca demo` tells a person once it is serving.
pub(super) fn demo_banner(addr: SocketAddr, target: Option<&str>, config: &Config) -> String {
    let exe = std::env::current_exe()
        .map(|path| path.display().to_string())
        .unwrap_or_else(|_| "orca".into());
    let home = config.home.display();
    let target = target.unwrap_or("(none)");
    let configured: Vec<&str> = config
        .llm
        .endpoints
        .iter()
        .filter(|endpoint| crate::llm::is_configured(endpoint))
        .map(|endpoint| endpoint.provider.as_str())
        .collect();
    let models = if configured.is_empty() {
        "none configured: set ANTHROPIC_API_KEY, OPENAI_API_KEY (or OPENAI_BASE_URL) or GEMINI_API_KEY for generate_sql".to_owned()
    } else {
        configured.join(", ")
    };
    let context = config.llm.context_file.display();
    format!(
        "orca demo is running.\n\n\
         Web console:                    http://{addr}/\n\
         MCP endpoint (Streamable HTTP): http://{addr}/mcp\n\
         Feedback:                       POST http://{addr}/mcp/feedback\n\
         Health and metrics:             http://{addr}/healthz  http://{addr}/metrics\n\
         Sample database:                {target}\n\
         Model providers:                {models}\n\
         Context file (hot-reloaded):    {context}\n\n\
         Claude Desktop (claude_desktop_config.json), over stdio:\n\n\
         {{\n  \"mcpServers\": {{\n    \"orca\": {{\n      \"command\": \"{exe}\",\n      \"args\": [\"serve\", \"--stdio\"],\n      \"env\": {{ \"ORCA_HOME\": \"{home}\" }}\n    }}\n  }}\n}}\n\n\
         Try it: curl -s http://{addr}/mcp -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \\\n  \
         -d '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{{\"name\":\"execute_sql\",\"arguments\":{{\"sql\":\"SELECT name FROM artist ORDER BY name LIMIT 5\",\"dry_run\":false}}}}}}'\n\n\
         Press Ctrl-C to stop."
    )
}

/// Pending approval requests, one block each.
pub(super) fn approval_list(pending: &[crate::sql::ApprovalRequest]) -> String {
    if pending.is_empty() {
        return "no approval requests are waiting\n".to_owned();
    }
    let mut text = String::new();
    for request in pending {
        text.push_str(&describe_request(request));
        text.push('\n');
    }
    text
}

/// The confirmation printed by `orca approve`.
pub(super) fn approved(request: &crate::sql::ApprovalRequest) -> String {
    format!(
        "approved by {}:\n{}\nthe same execute_sql call (dry_run=false, read_only=false) now runs it once, until {}\n",
        request.approved_by.as_deref().unwrap_or("?"),
        describe_request(request),
        request.expires_at.to_rfc3339()
    )
}

fn describe_request(request: &crate::sql::ApprovalRequest) -> String {
    format!(
        "  id:        {}\n  kind:      {} (needs {})\n  requested: {} by {} on {}\n  estimate:  {}\n  statement: {}\n",
        request.id,
        request.statement_kind,
        request.required_verbs.join(", "),
        request.created_at.to_rfc3339(),
        request.principal,
        request.database,
        request.estimated_rows.map_or("unknown".to_owned(), |rows| format!("{rows} row(s)")),
        request.statement.replace('\n', "\n             "),
    )
}
