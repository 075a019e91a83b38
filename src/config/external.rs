//! `external-mcps.yaml`: the external MCP servers orca starts or connects to. The seed's fields
//! (`name`, `url`, `type`, `credentials` with `*_env` names, `capabilities`) are kept; the rest is
//! what running a server needs. Problems are collected like `orca.yaml`'s; a credential variable
//! that is not set disables only its server.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use secrecy::SecretString;
use serde::Deserialize;
use serde_json::Value;

use super::Env;
use crate::tool::Verb;

/// The validated external servers (none when there is no file).
#[derive(Debug, Clone, Default)]
pub(crate) struct ExternalConfig {
    pub(crate) file: Option<PathBuf>,
    pub(crate) servers: Vec<ExternalServerConfig>,
}

/// One entry of `mcps:`.
#[derive(Debug, Clone)]
pub(crate) struct ExternalServerConfig {
    /// The entry's key: the server's name in orca (`list_servers`, tracking, metrics).
    pub(crate) key: String,
    /// `name`, for people.
    pub(crate) display_name: String,
    /// What tool, prompt and resource names are prefixed with (default: the key, cleaned; empty:
    /// the server's own names and resource URIs).
    pub(crate) prefix: String,
    pub(crate) transport: ExternalTransport,
    /// Where the server is, for `external_endpoint`: the URL, or the command (never its
    /// arguments or environment, which may hold secrets).
    pub(crate) endpoint: String,
    pub(crate) timeout: Duration,
    /// Further attempts of a call that is safe to repeat.
    pub(crate) retries: u32,
    pub(crate) include_tools: Vec<String>,
    pub(crate) exclude_tools: Vec<String>,
    /// The seed's informational `capabilities` list.
    pub(crate) capabilities: Vec<String>,
    /// A result larger than this (serialized) is refused with RESULT_TRUNCATED.
    pub(crate) max_response_bytes: usize,
    /// The verb of every tool of this server, instead of the one derived from annotations.
    pub(crate) verb: Option<Verb>,
    /// Per upstream tool name, overriding `verb` and the annotations.
    pub(crate) tool_verbs: BTreeMap<String, Verb>,
    /// Whether it runs, and if not why.
    pub(crate) availability: Availability,
    /// The protocol revision orca speaks to it.
    pub(crate) protocol: UpstreamProtocol,
    /// What happens when one of its tool definitions changes or a tool is added (`pin:`).
    pub(crate) pin: PinMode,
}

/// What orca does when an external server's tool definition differs from the one pinned, or
/// a tool appears after the first listing, or a definition reads as poisoned (`pin:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum PinMode {
    /// The tool is neither listed nor callable until a person approves it.
    #[default]
    Hold,
    /// The tool is served, with a warning in the log and in `list_servers`.
    Warn,
    /// Definitions are neither pinned nor scanned.
    Off,
}

impl PinMode {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            PinMode::Hold => "hold",
            PinMode::Warn => "warn",
            PinMode::Off => "off",
        }
    }
}

/// The protocol revision orca speaks to an external server (`protocol:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum UpstreamProtocol {
    /// `2025-11-25`: the `initialize` handshake, which every MCP server speaks today.
    #[default]
    Session,
    /// `2026-07-28`: `server/discover` and self-contained requests; a server that does not
    /// speak it fails to connect.
    Modern,
    /// `auto`: 2026-07-28 when `server/discover` is answered, else 2025-11-25.
    Auto,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Availability {
    Enabled,
    /// `enabled: false`.
    Disabled,
    /// These credential variables are not set.
    MissingCredentials(Vec<String>),
}

impl ExternalServerConfig {
    /// The verb a caller needs for `tool`, given what the tool says of itself.
    pub(crate) fn verb_for(
        &self,
        tool: &str,
        annotations: Option<&rmcp::model::ToolAnnotations>,
    ) -> Verb {
        if let Some(verb) = self.tool_verbs.get(tool) {
            return *verb;
        }
        if let Some(verb) = self.verb {
            return verb;
        }
        verb_from_annotations(annotations)
    }

    /// Whether the include/exclude filters let `tool` through.
    pub(crate) fn admits(&self, tool: &str) -> bool {
        let included = self.include_tools.is_empty()
            || self.include_tools.iter().any(|pattern| glob_match(pattern, tool));
        included && !self.exclude_tools.iter().any(|pattern| glob_match(pattern, tool))
    }
}

/// MCP's hints, read as the spec defines their defaults: read-only means `read`; otherwise a
/// destructive tool (the default) needs `delete`, an idempotent non-destructive one `update`,
/// and anything else `create`.
pub(crate) fn verb_from_annotations(annotations: Option<&rmcp::model::ToolAnnotations>) -> Verb {
    let Some(annotations) = annotations else { return Verb::Delete };
    if annotations.read_only_hint == Some(true) {
        Verb::Read
    } else if annotations.destructive_hint.unwrap_or(true) {
        Verb::Delete
    } else if annotations.idempotent_hint == Some(true) {
        Verb::Update
    } else {
        Verb::Create
    }
}

/// How orca reaches the server.
#[derive(Debug, Clone)]
pub(crate) enum ExternalTransport {
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Given to the child on top of orca's environment; credentials included.
        env: Vec<(String, SecretString)>,
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP (`http`) or the older HTTP+SSE transport (`sse`).
    Http {
        url: String,
        sse: bool,
        headers: Vec<(String, SecretString)>,
        bearer: Option<SecretString>,
        /// Signing in with OAuth (Streamable HTTP only).
        oauth: Option<UpstreamOAuth>,
    },
}

/// Whose sign-in an OAuth upstream uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SignInMode {
    /// orca signs in as itself (client credentials, with a secret or a private key).
    Service,
    /// One person signs in once (`orca login <key>`) and every caller uses that sign-in.
    Shared,
    /// Each orca user signs in for themselves (the console's "Sign in"); a call carries its
    /// caller's own sign-in.
    PerUser,
}

impl SignInMode {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SignInMode::Service => "service",
            SignInMode::Shared => "shared",
            SignInMode::PerUser => "per_user",
        }
    }
}

/// How orca signs in to an HTTP upstream that asks for OAuth (`oauth:` in
/// `external-mcps.yaml`).
#[derive(Debug, Clone)]
pub(crate) struct UpstreamOAuth {
    pub(crate) mode: SignInMode,
    /// A pre-registered client id; without one, a client metadata document or dynamic
    /// registration.
    pub(crate) client_id: Option<String>,
    pub(crate) client_secret: Option<SecretString>,
    /// PEM, for `private_key_jwt`.
    pub(crate) private_key: Option<SecretString>,
    pub(crate) signing_algorithm: String,
    /// The HTTPS URL of orca's client metadata document, presented as `client_id` where the
    /// authorization server supports it.
    pub(crate) client_metadata_url: Option<String>,
    /// The authorization server (its issuer identifier) the pre-registered client belongs to:
    /// discovery that names another is refused, and the client's credentials go to no other.
    /// Required with a client secret or a private key.
    pub(crate) issuer: Option<String>,
    /// Hosts (`host` or `host:port`) besides the upstream's origin and the issuer's where the
    /// URLs its challenges and metadata name may be fetched.
    pub(crate) allowed_hosts: Vec<String>,
}

impl ExternalTransport {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            ExternalTransport::Stdio { .. } => "stdio",
            ExternalTransport::Http { sse: false, .. } => "http",
            ExternalTransport::Http { sse: true, .. } => "sse",
        }
    }
}

/// `external-mcps.yaml` as written: the external MCP servers orca starts (stdio) or connects to
/// (http, sse), namespaces and supervises.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "ExternalMcpsFile")]
pub(super) struct RawFile {
    /// The servers by key: the key is the server's name in orca (`list_servers`, tracking,
    /// metrics) and, by default, the prefix of its tools (`<prefix>_<tool>`). Letters, digits,
    /// `_` and `-`; not `orca` or `postgres`.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, RawServer>")]
    mcps: BTreeMap<String, Value>,
}

/// One entry of `mcps:` as written.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Server")]
pub(super) struct RawServer {
    /// The server's name for people.
    name: Option<String>,
    /// The endpoint of an http or sse server (header values and the URL may use `${VAR}`); for a
    /// stdio server, a page about it.
    url: Option<String>,
    /// Descriptive; the only type is `external`.
    #[serde(rename = "type")]
    #[schemars(extend("enum" = ["external"]))]
    kind: Option<String>,
    /// Secrets read from orca's environment, as `<anything>_env: VARIABLE`. A stdio server gets
    /// each variable in its environment; an http or sse server the first of `bearer_env`,
    /// `token_env`, `api_key_env` as `Authorization: Bearer` (or in the header named by
    /// `auth_header`). A variable that is not set disables only this server.
    #[serde(default)]
    credentials: BTreeMap<String, String>,
    /// Descriptive capability names, shown by `list_servers`.
    #[serde(default)]
    capabilities: Vec<String>,
    /// How to reach it; default: `stdio` when `command` is set, `http` when `url` ends in
    /// `/mcp`, `sse` when it ends in `/sse`.
    #[schemars(extend("enum" = ["stdio", "http", "sse"]))]
    transport: Option<String>,
    /// stdio: the program to start.
    command: Option<String>,
    /// stdio: its arguments.
    #[serde(default)]
    args: Vec<String>,
    /// stdio: variables set in its environment (values may use `${VAR}`).
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// stdio: its working directory; default: orca's.
    cwd: Option<PathBuf>,
    /// http and sse: headers sent with every request (values may use `${VAR}`).
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// The longest a call may take: seconds (`30`) or with a unit (`500ms`, `30s`, `2m`).
    #[serde(default)]
    #[schemars(schema_with = "super::schema::duration", extend("default" = "30s"))]
    timeout: Option<Value>,
    /// Further attempts of a call that is safe to repeat (at most 10).
    #[schemars(extend("default" = DEFAULT_RETRIES), range(max = 10))]
    retries: Option<u32>,
    /// The revision orca speaks to it: `2025-11-25` (initialize), `2026-07-28`
    /// (`server/discover`), or `auto` (2026-07-28 when discover is answered).
    #[schemars(extend("enum" = ["2025-11-25", "2026-07-28", "auto"], "default" = "2025-11-25"))]
    protocol: Option<String>,
    /// A tool whose definition changed since it was pinned, one added after the first listing,
    /// or one that reads as poisoned: `hold` (not served until a person approves it), `warn`
    /// (served, with a warning), `off` (neither pinned nor scanned; YAML may read it as
    /// `false`).
    #[schemars(extend("enum" = ["hold", "warn", "off", false], "default" = "hold"))]
    pin: Option<Value>,
    /// Upstream tool names served (`*` and `?` patterns); default: every tool.
    #[serde(default)]
    include_tools: Vec<String>,
    /// Upstream tool names left out (`*` and `?` patterns).
    #[serde(default)]
    exclude_tools: Vec<String>,
    /// The prefix of its tools and URIs (at most 32 letters, digits, `_` and `-`); `""` keeps
    /// the server's own names. Default: the key.
    prefix: Option<String>,
    /// `false`: declared but not started.
    #[schemars(extend("default" = true))]
    enabled: Option<bool>,
    /// Larger results are refused with `RESULT_TRUNCATED` (bytes).
    #[schemars(extend("default" = DEFAULT_MAX_RESPONSE_BYTES), range(min = 1))]
    max_response_bytes: Option<u64>,
    /// The verb callers need for every tool, instead of the one derived from the tool's
    /// annotations (read-only: read, destructive: delete, idempotent: update, otherwise
    /// create).
    #[schemars(extend("enum" = ["read", "create", "update", "delete"]))]
    verb: Option<String>,
    /// The verb callers need, by upstream tool name (overrides `verb`).
    #[serde(default)]
    #[schemars(schema_with = "super::schema::verb_map")]
    tool_verbs: BTreeMap<String, String>,
    /// http and sse: the header that carries the credential instead of `Authorization:
    /// Bearer`.
    auth_header: Option<String>,
    /// http: how orca signs in to a server that asks for OAuth.
    oauth: Option<RawOAuth>,
}

/// `mcps.<key>.oauth` as written.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "ServerOAuth")]
struct RawOAuth {
    /// `service` (orca signs in as itself with client credentials), `shared` (one person signs
    /// in once with `orca login <key>`, every caller uses it) or `per_user` (each user signs in
    /// for themselves in the console).
    #[schemars(extend("enum" = ["service", "shared", "per_user"]))]
    mode: String,
    /// A pre-registered client id; without one, `client_metadata_url` or dynamic registration.
    client_id: Option<String>,
    /// The environment variable holding the client secret.
    client_secret_env: Option<String>,
    /// The environment variable holding a PEM private key, for `private_key_jwt`.
    private_key_env: Option<String>,
    /// The algorithm of `private_key_jwt`.
    #[schemars(extend(
        "enum" = ["ES256", "ES384", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA"],
        "default" = "ES256"
    ))]
    signing_algorithm: Option<String>,
    /// The https URL (ending in `.json`) of orca's client metadata document, presented as
    /// `client_id` where the authorization server supports it.
    client_metadata_url: Option<String>,
    /// The authorization server's issuer identifier: the only server the client's credentials
    /// go to; required with `client_secret_env` or `private_key_env`.
    issuer: Option<String>,
    /// Other hosts (`host` or `host:port`) its challenges and metadata may send orca to.
    #[serde(default)]
    allowed_hosts: Vec<String>,
}

/// Names orca's own servers use: an external server may not take them.
const RESERVED: [&str; 2] = ["orca", "postgres"];
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
const DEFAULT_RETRIES: u32 = 2;
const DEFAULT_MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;

/// Find and validate `external-mcps.yaml`: `ORCA_EXTERNAL_MCPS` (which must exist), else
/// `./external-mcps.yaml` if there is one.
pub(super) fn load(env: &Env, errors: &mut Vec<String>) -> ExternalConfig {
    let (path, explicit) = match env.get("ORCA_EXTERNAL_MCPS") {
        Some(path) => (PathBuf::from(path), true),
        None => (PathBuf::from("external-mcps.yaml"), false),
    };
    if !explicit && !path.is_file() {
        return ExternalConfig::default();
    }
    let label = path.display().to_string();
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) => {
            errors.push(format!("{label}: cannot read (from ORCA_EXTERNAL_MCPS): {error}"));
            return ExternalConfig::default();
        }
    };
    let servers = parse(&text, &label, env, errors);
    ExternalConfig { file: Some(path), servers }
}

/// Validate the text of an `external-mcps.yaml` named `label`.
pub(crate) fn parse(
    text: &str,
    label: &str,
    env: &Env,
    errors: &mut Vec<String>,
) -> Vec<ExternalServerConfig> {
    if text.trim().is_empty() {
        return Vec::new();
    }
    let document: Value = match serde_saphyr::from_str(text) {
        Ok(Value::Null) => return Vec::new(),
        Ok(value) => value,
        Err(error) => {
            errors.push(format!("{label}: not valid YAML: {error}"));
            return Vec::new();
        }
    };
    let raw: RawFile = match serde_path_to_error::deserialize(document) {
        Ok(raw) => raw,
        Err(error) => {
            let path = error.path().to_string();
            let key = if path == "." { "top level".to_owned() } else { path };
            let message = super::suggest::with_suggestion(error.into_inner().to_string());
            errors.push(format!("{label}: {key}: {message}"));
            return Vec::new();
        }
    };
    let mut servers: Vec<ExternalServerConfig> = Vec::new();
    for (key, entry) in raw.mcps {
        if entry.is_null() {
            errors.push(format!("{label}: mcps.{key}: empty entry; give it a transport"));
            continue;
        }
        // Each entry on its own, so that one entry's unknown key hides nothing in the others.
        let server: RawServer = match serde_path_to_error::deserialize(entry) {
            Ok(server) => server,
            Err(error) => {
                let path = error.path().to_string();
                let at =
                    if path == "." { format!("mcps.{key}") } else { format!("mcps.{key}.{path}") };
                let message = super::suggest::with_suggestion(error.into_inner().to_string());
                errors.push(format!("{label}: {at}: {message}"));
                continue;
            }
        };
        if let Some(server) = validate(&key, server, label, env, errors) {
            servers.push(server);
        }
    }
    let mut prefixes: BTreeMap<&str, &str> = BTreeMap::new();
    for server in &servers {
        if let Some(other) = prefixes.insert(&server.prefix, &server.key) {
            errors.push(format!(
                "{label}: mcps.{}: prefix `{}` is also the prefix of `{other}`; set a distinct `prefix`",
                server.key, server.prefix
            ));
        }
    }
    // `p` and `p_x` would both expose `p_x_y` (`p` + `x_y`, `p_x` + `y`): one server could take
    // another's tool when its list changes.
    for (prefix, key) in &prefixes {
        let nested = format!("{prefix}_");
        for (other_prefix, other_key) in &prefixes {
            if other_prefix.starts_with(&nested) {
                errors.push(format!(
                    "{label}: mcps.{other_key}: prefix `{other_prefix}` starts with `{nested}`, the prefix of `{key}` and its separator, so their tool names could collide; set prefixes where neither is the other plus `_`"
                ));
            }
        }
    }
    servers
}

/// Check the entry `key` of `mcps:`: `None` when it has a problem (each one is reported).
fn validate(
    key: &str,
    raw: RawServer,
    label: &str,
    env: &Env,
    errors: &mut Vec<String>,
) -> Option<ExternalServerConfig> {
    let at = format!("{label}: mcps.{key}");
    let before = errors.len();
    check_key(key, raw.kind.as_deref(), &at, errors);
    let mut entry = EntryCheck { at: &at, env, missing: BTreeSet::new() };
    let credentials = entry.credentials(&raw.credentials, errors);
    let transport = match transport_name(&raw, &at, errors) {
        None => None,
        Some("stdio") => entry.stdio_transport(&raw, &credentials, errors),
        Some(name) => entry.http_transport(&raw, name, &credentials, errors),
    };
    let timeout = timeout(raw.timeout.as_ref(), &at, errors);
    let retries = raw.retries.unwrap_or(DEFAULT_RETRIES);
    if retries > 10 {
        errors.push(format!("{at}: retries: at most 10"));
    }
    let protocol = protocol(raw.protocol.as_deref(), &at, errors);
    let pin = pin_mode(raw.pin.as_ref(), &at, errors);
    let prefix = prefix(key, raw.prefix.as_deref(), &at, errors);
    let max_response_bytes = max_response_bytes(raw.max_response_bytes, &at, errors);
    let parse_verb = |text: &str, field: &str, errors: &mut Vec<String>| {
        let verb = Verb::parse(text);
        if verb.is_none() {
            errors.push(format!(
                "{at}: {field}: unknown verb `{text}`; expected one of read, create, update, delete"
            ));
        }
        verb
    };
    let verb = raw.verb.as_deref().and_then(|text| parse_verb(text, "verb", errors));
    let tool_verbs = raw
        .tool_verbs
        .iter()
        .filter_map(|(tool, text)| {
            parse_verb(text, &format!("tool_verbs.{tool}"), errors).map(|verb| (tool.clone(), verb))
        })
        .collect();

    if errors.len() > before {
        return None;
    }
    let transport = transport?;
    // Shown to clients: never a query string or user info, which may carry a token.
    let endpoint = match &transport {
        ExternalTransport::Stdio { command, .. } => {
            raw.url.as_deref().map_or_else(|| command.clone(), display_url)
        }
        ExternalTransport::Http { url, .. } => display_url(url),
    };
    let availability = if raw.enabled == Some(false) {
        Availability::Disabled
    } else if !entry.missing.is_empty() {
        Availability::MissingCredentials(entry.missing.into_iter().collect())
    } else {
        Availability::Enabled
    };
    Some(ExternalServerConfig {
        key: key.to_owned(),
        display_name: raw.name.unwrap_or_else(|| key.to_owned()),
        prefix,
        transport,
        endpoint,
        timeout,
        retries,
        include_tools: raw.include_tools,
        exclude_tools: raw.exclude_tools,
        capabilities: raw.capabilities,
        max_response_bytes,
        verb,
        tool_verbs,
        availability,
        protocol,
        pin,
    })
}

/// The entry's key, which names the server in orca, and its `type`, which only `external` may be.
fn check_key(key: &str, kind: Option<&str>, at: &str, errors: &mut Vec<String>) {
    if key.is_empty()
        || !key.bytes().all(|byte| byte.is_ascii_alphanumeric() || b"_-".contains(&byte))
    {
        errors.push(format!("{at}: the key may only hold letters, digits, `_` and `-`"));
    }
    if RESERVED.contains(&key) {
        errors.push(format!("{at}: `{key}` is the name of an internal server; choose another key"));
    }
    if let Some(kind) = kind
        && kind != "external"
    {
        errors.push(format!("{at}: type: `{kind}` is not supported; the only type is `external`"));
    }
}

/// One entry of `mcps:` while it is checked: where its errors point, and the environment
/// variables it names that are not set. A missing variable is not an error: the entry is kept
/// and its server reported unavailable, naming them.
struct EntryCheck<'a> {
    at: &'a str,
    env: &'a Env,
    missing: BTreeSet<String>,
}

impl EntryCheck<'_> {
    /// The value of the environment variable `name`, recorded as missing when it is not set.
    fn resolve(&mut self, name: &str) -> Option<SecretString> {
        resolve_variable(self.env, &mut self.missing, name)
    }

    /// `value` with its `${VARIABLE}`s replaced; `None` when one is not set or (reported as
    /// `field`'s error) the text is malformed.
    fn interpolate(
        &mut self,
        value: &str,
        field: &str,
        errors: &mut Vec<String>,
    ) -> Option<SecretString> {
        let (env, missing) = (self.env, &mut self.missing);
        match expand(value, |name| resolve_variable(env, missing, name)) {
            Ok(value) => value.map(SecretString::from),
            Err(problem) => {
                errors.push(format!("{}: {field}: {problem}", self.at));
                None
            }
        }
    }

    /// `credentials:`, each `*_env` key's variable and its value (those that are set).
    fn credentials(
        &mut self,
        raw: &BTreeMap<String, String>,
        errors: &mut Vec<String>,
    ) -> Vec<(String, SecretString)> {
        let at = self.at;
        let mut credentials: Vec<(String, SecretString)> = Vec::new();
        for (name, variable) in raw {
            if !name.ends_with("_env") {
                errors.push(format!(
                    "{at}: credentials.{name}: credential keys end in `_env` and name an environment variable, for example `api_key_env: GITHUB_TOKEN`"
                ));
                continue;
            }
            if !is_variable_name(variable) {
                errors.push(format!(
                    "{at}: credentials.{name}: `{variable}` is not an environment variable name"
                ));
                continue;
            }
            if let Some(value) = self.resolve(variable) {
                credentials.push((variable.clone(), value));
            }
        }
        credentials
    }

    /// A `stdio` entry's command, started with the credentials and `env:` in its environment.
    fn stdio_transport(
        &mut self,
        raw: &RawServer,
        credentials: &[(String, SecretString)],
        errors: &mut Vec<String>,
    ) -> Option<ExternalTransport> {
        let at = self.at;
        match raw.command.as_deref().map(str::trim) {
            None | Some("") => {
                errors.push(format!("{at}: command: required with transport stdio"));
                None
            }
            Some(command) => {
                for field in ["headers", "auth_header"] {
                    let set = if field == "headers" {
                        !raw.headers.is_empty()
                    } else {
                        raw.auth_header.is_some()
                    };
                    if set {
                        errors.push(format!("{at}: {field}: only for transports http and sse"));
                    }
                }
                let mut child_env = credentials.to_vec();
                for (name, value) in &raw.env {
                    if !is_variable_name(name) {
                        errors.push(format!("{at}: env.{name}: not an environment variable name"));
                        continue;
                    }
                    if let Some(value) = self.interpolate(value, &format!("env.{name}"), errors) {
                        child_env.retain(|(existing, _)| existing != name);
                        child_env.push((name.clone(), value));
                    }
                }
                Some(ExternalTransport::Stdio {
                    command: command.to_owned(),
                    args: raw.args.clone(),
                    env: child_env,
                    cwd: raw.cwd.clone(),
                })
            }
        }
    }

    /// An `http` or `sse` entry's endpoint, with its headers, its token and its sign-in.
    fn http_transport(
        &mut self,
        raw: &RawServer,
        name: &str,
        credentials: &[(String, SecretString)],
        errors: &mut Vec<String>,
    ) -> Option<ExternalTransport> {
        let at = self.at;
        let sse = name == "sse";
        for (field, set) in [
            ("command", raw.command.is_some()),
            ("args", !raw.args.is_empty()),
            ("env", !raw.env.is_empty()),
            ("cwd", raw.cwd.is_some()),
        ] {
            if set {
                errors.push(format!("{at}: {field}: only for transport stdio"));
            }
        }
        match raw.url.as_deref() {
            None => {
                errors.push(format!("{at}: url: required with transport {name}"));
                None
            }
            Some(url) if !(url.starts_with("http://") || url.starts_with("https://")) => {
                errors.push(format!("{at}: url: `{url}` must start with http:// or https://"));
                None
            }
            Some(url) => {
                let mut headers = Vec::new();
                for (header, value) in &raw.headers {
                    if http::HeaderName::try_from(header.as_str()).is_err() {
                        errors.push(format!("{at}: headers.{header}: not a valid header name"));
                        continue;
                    }
                    if let Some(value) =
                        self.interpolate(value, &format!("headers.{header}"), errors)
                    {
                        headers.push((header.clone(), value));
                    }
                }
                let bearer = bearer(raw, credentials, &mut headers, at, errors);
                let oauth = self.oauth(raw, sse, errors);
                Some(ExternalTransport::Http { url: url.to_owned(), sse, headers, bearer, oauth })
            }
        }
    }

    /// The `oauth:` block of an `http` entry, which replaces any bearer credential.
    fn oauth(
        &mut self,
        raw: &RawServer,
        sse: bool,
        errors: &mut Vec<String>,
    ) -> Option<UpstreamOAuth> {
        let at = self.at;
        match &raw.oauth {
            None => None,
            Some(_) if sse => {
                errors.push(format!("{at}: oauth: only for transport http (Streamable HTTP)"));
                None
            }
            Some(_)
                if raw.auth_header.is_some()
                    || TOKEN_CREDENTIALS.iter().any(|name| raw.credentials.contains_key(*name)) =>
            {
                errors.push(format!(
                    "{at}: oauth: the sign-in supplies the token; remove the bearer credential or auth_header"
                ));
                None
            }
            Some(oauth) => upstream_oauth(oauth, at, &mut |name| self.resolve(name), errors),
        }
    }
}

/// The credentials sent as a token, in order: the first of them that is configured is sent.
const TOKEN_CREDENTIALS: [&str; 3] = ["bearer_env", "token_env", "api_key_env"];

/// The value of the environment variable `name`, or `None`, adding it to `missing`.
fn resolve_variable(env: &Env, missing: &mut BTreeSet<String>, name: &str) -> Option<SecretString> {
    match env.get(name) {
        Some(value) => Some(SecretString::from(value.to_owned())),
        None => {
            missing.insert(name.to_owned());
            None
        }
    }
}

/// The entry's transport: `transport:` if set, else guessed from `command` or the `url`'s path.
fn transport_name<'raw>(
    raw: &'raw RawServer,
    at: &str,
    errors: &mut Vec<String>,
) -> Option<&'raw str> {
    match raw.transport.as_deref() {
        Some(name @ ("stdio" | "http" | "sse")) => Some(name),
        Some(other) => {
            errors.push(format!("{at}: transport: `{other}` is not one of: stdio, http, sse"));
            None
        }
        None if raw.command.is_some() => Some("stdio"),
        None => match raw.url.as_deref() {
            None => {
                errors.push(format!(
                    "{at}: nothing to connect to; add `transport: stdio` with `command` (and `args`), or `transport: http` with the endpoint's `url`"
                ));
                None
            }
            Some(url) if display_url(url).trim_end_matches('/').ends_with("/mcp") => Some("http"),
            Some(url) if display_url(url).trim_end_matches('/').ends_with("/sse") => Some("sse"),
            Some(url) => {
                errors.push(format!(
                    "{at}: url `{url}` looks like a web page, not an MCP endpoint, and no transport is set; add `transport: stdio` with the `command` that starts the server (for example `command: npx` and `args: [\"-y\", \"<package>\"]`), or `transport: http` if the url is a Streamable HTTP endpoint"
                ));
                None
            }
        },
    }
}

/// The token an `http` or `sse` entry sends as `Authorization: Bearer`, or `None` when
/// `auth_header` names another header to carry it (pushed onto `headers`).
fn bearer(
    raw: &RawServer,
    credentials: &[(String, SecretString)],
    headers: &mut Vec<(String, SecretString)>,
    at: &str,
    errors: &mut Vec<String>,
) -> Option<SecretString> {
    let token = TOKEN_CREDENTIALS
        .iter()
        .find_map(|name| raw.credentials.get(*name))
        .and_then(|variable| credentials.iter().find(|(name, _)| name == variable))
        .map(|(_, value)| value.clone());
    match (&raw.auth_header, token) {
        (Some(header), Some(token)) => {
            if http::HeaderName::try_from(header.as_str()).is_err() {
                errors.push(format!("{at}: auth_header: `{header}` is not a valid header name"));
            }
            headers.push((header.clone(), token));
            None
        }
        (Some(_), None) => {
            errors.push(format!(
                "{at}: auth_header: needs a credential to send: add `credentials: {{api_key_env: VARIABLE}}`"
            ));
            None
        }
        (None, token) => token,
    }
}

/// `timeout:`, seconds or a duration with a unit; 30 seconds without one.
fn timeout(value: Option<&Value>, at: &str, errors: &mut Vec<String>) -> Duration {
    match value {
        None => DEFAULT_TIMEOUT,
        Some(value) => match parse_duration(value) {
            Some(duration) if !duration.is_zero() => duration,
            _ => {
                errors.push(format!(
                    "{at}: timeout: `{value}` is not a duration; write seconds (30) or a unit (500ms, 30s, 2m)"
                ));
                DEFAULT_TIMEOUT
            }
        },
    }
}

/// `protocol:`, the MCP revision spoken to the upstream.
fn protocol(text: Option<&str>, at: &str, errors: &mut Vec<String>) -> UpstreamProtocol {
    match text {
        None | Some("2025-11-25") => UpstreamProtocol::Session,
        Some("2026-07-28") => UpstreamProtocol::Modern,
        Some("auto") => UpstreamProtocol::Auto,
        Some(other) => {
            errors.push(format!(
                "{at}: protocol: unknown revision `{other}`; expected 2025-11-25 (the default), 2026-07-28 or auto"
            ));
            UpstreamProtocol::Session
        }
    }
}

/// `pin:`, read as text (YAML reads a bare `off` as `false`).
fn pin_mode(value: Option<&Value>, at: &str, errors: &mut Vec<String>) -> PinMode {
    let pin_text = match value {
        Some(Value::Bool(false)) => Some("off".to_owned()),
        Some(Value::String(text)) => Some(text.clone()),
        Some(other) => Some(other.to_string()),
        None => None,
    };
    match pin_text.as_deref() {
        None | Some("hold") => PinMode::Hold,
        Some("warn") => PinMode::Warn,
        Some("off") => PinMode::Off,
        Some(other) => {
            errors.push(format!(
                "{at}: pin: unknown mode `{other}`; expected hold (the default), warn or off"
            ));
            PinMode::Hold
        }
    }
}

/// The prefix of the server's tool names: `prefix:`, else the key (cut to 32 characters).
fn prefix(key: &str, prefix: Option<&str>, at: &str, errors: &mut Vec<String>) -> String {
    match prefix {
        // Empty: the server's names are exposed as they are.
        Some(prefix)
            if !prefix
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || b"_-".contains(&byte)) =>
        {
            errors.push(format!(
                "{at}: prefix: `{prefix}` may only hold letters, digits, `_` and `-`"
            ));
            String::new()
        }
        Some(prefix) if prefix.len() > 32 => {
            errors.push(format!("{at}: prefix: at most 32 characters"));
            String::new()
        }
        Some(prefix) => prefix.to_owned(),
        None => key.chars().take(32).collect(),
    }
}

/// `max_response_bytes:`, the largest upstream answer relayed.
fn max_response_bytes(bytes: Option<u64>, at: &str, errors: &mut Vec<String>) -> usize {
    match bytes {
        Some(0) => {
            errors.push(format!("{at}: max_response_bytes: must be greater than zero"));
            DEFAULT_MAX_RESPONSE_BYTES
        }
        Some(bytes) => usize::try_from(bytes).unwrap_or(usize::MAX),
        None => DEFAULT_MAX_RESPONSE_BYTES,
    }
}

/// The `oauth:` block of an HTTP entry, checked; secrets resolved through `resolve`, which
/// records a variable that is not set.
fn upstream_oauth(
    raw: &RawOAuth,
    at: &str,
    resolve: &mut dyn FnMut(&str) -> Option<SecretString>,
    errors: &mut Vec<String>,
) -> Option<UpstreamOAuth> {
    let before = errors.len();
    let mode = match raw.mode.as_str() {
        "service" => SignInMode::Service,
        "shared" => SignInMode::Shared,
        "per_user" => SignInMode::PerUser,
        other => {
            errors.push(format!(
                "{at}: oauth.mode: `{other}` is not a mode; use service (client credentials), shared (one sign-in with `orca login`) or per_user (each user signs in)"
            ));
            SignInMode::Shared
        }
    };
    let mut secret = |field: &str, variable: &Option<String>| -> Option<SecretString> {
        let variable = variable.as_ref()?;
        if !is_variable_name(variable) {
            errors.push(format!(
                "{at}: oauth.{field}: `{variable}` is not an environment variable name"
            ));
            return None;
        }
        resolve(variable)
    };
    let client_secret = secret("client_secret_env", &raw.client_secret_env);
    let private_key = secret("private_key_env", &raw.private_key_env);
    let signing_algorithm = raw.signing_algorithm.clone().unwrap_or_else(|| "ES256".to_owned());
    if !["ES256", "ES384", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA"]
        .contains(&signing_algorithm.as_str())
    {
        errors.push(format!("{at}: oauth.signing_algorithm: `{signing_algorithm}` is not a signing algorithm (ES256, RS256, EdDSA, ...)"));
    }
    if mode == SignInMode::Service
        && (raw.client_id.is_none()
            || (raw.client_secret_env.is_none() && raw.private_key_env.is_none()))
    {
        errors.push(format!(
            "{at}: oauth: mode service needs client_id and client_secret_env or private_key_env"
        ));
    }
    match &raw.issuer {
        Some(issuer) if !super::secure_or_loopback(issuer) || issuer.contains(['?', '#']) => {
            errors.push(format!(
                "{at}: oauth.issuer: `{issuer}` must be an https:// URL without query or fragment (http:// only on a loopback address)"
            ));
        }
        Some(_) => {}
        None if raw.client_secret_env.is_some() || raw.private_key_env.is_some() => {
            errors.push(format!(
                "{at}: oauth.issuer: required with client_secret_env or private_key_env: the issuer identifier of the authorization server the client is registered with, the only one its credentials are sent to"
            ));
        }
        None => {}
    }
    for entry in &raw.allowed_hosts {
        if let Err(error) = crate::client::auth::allowed_host(entry) {
            errors.push(format!("{at}: oauth.allowed_hosts: {error}"));
        }
    }
    if let Some(url) = &raw.client_metadata_url {
        let path = url::Url::parse(url).map(|url| url.path().to_owned()).unwrap_or_default();
        if !url.starts_with("https://") || !path.ends_with(".json") {
            errors.push(format!(
                "{at}: oauth.client_metadata_url: must be an https URL whose path ends in .json (orca serves the document at that path)"
            ));
        }
    }
    if errors.len() > before {
        return None;
    }
    Some(UpstreamOAuth {
        mode,
        client_id: raw.client_id.clone(),
        client_secret,
        private_key,
        signing_algorithm,
        client_metadata_url: raw.client_metadata_url.clone(),
        issuer: raw.issuer.clone(),
        allowed_hosts: raw.allowed_hosts.clone(),
    })
}

/// `scheme://host[:port]/path` of a URL, without user info, query or fragment.
fn display_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
    let host = authority.rsplit('@').next().unwrap_or_default();
    let path = if path.is_empty() { String::new() } else { format!("/{path}") };
    if scheme.is_empty() { format!("{host}{path}") } else { format!("{scheme}://{host}{path}") }
}

fn is_variable_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'_')
}

/// Replace each `${NAME}` with `lookup(NAME)`. `Ok(None)` when a variable is missing (the
/// lookup records which); `Err` for a malformed reference. `$$` is a literal `$`.
pub(super) fn expand(
    text: &str,
    mut lookup: impl FnMut(&str) -> Option<SecretString>,
) -> Result<Option<String>, String> {
    use secrecy::ExposeSecret;
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut complete = true;
    while let Some(position) = rest.find('$') {
        out.push_str(&rest[..position]);
        rest = &rest[position + 1..];
        if let Some(after) = rest.strip_prefix('$') {
            out.push('$');
            rest = after;
        } else if let Some(after) = rest.strip_prefix('{') {
            let Some(end) = after.find('}') else {
                return Err("`${` without a closing `}`".to_owned());
            };
            let name = &after[..end];
            if !is_variable_name(name) {
                return Err(format!("`${{{name}}}` does not name an environment variable"));
            }
            match lookup(name) {
                Some(value) => out.push_str(value.expose_secret()),
                None => complete = false,
            }
            rest = &after[end + 1..];
        } else {
            out.push('$');
        }
    }
    out.push_str(rest);
    Ok(complete.then_some(out))
}

/// `30`, `30s`, `500ms`, `2m`.
fn parse_duration(value: &Value) -> Option<Duration> {
    match value {
        Value::Number(number) => number
            .as_f64()
            .filter(|seconds| seconds.is_finite() && *seconds >= 0.0)
            .map(Duration::from_secs_f64),
        Value::String(text) => {
            let text = text.trim();
            let (number, unit) =
                text.split_at(text.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(text.len()));
            let number: f64 =
                number.trim().parse().ok().filter(|n: &f64| n.is_finite() && *n >= 0.0)?;
            let seconds = match unit {
                "" | "s" => number,
                "ms" => number / 1000.0,
                "m" => number * 60.0,
                _ => return None,
            };
            Some(Duration::from_secs_f64(seconds))
        }
        _ => None,
    }
}

/// `*` matches any run of characters, `?` one character; everything else matches itself.
/// ASCII names (tool names are) are matched byte by byte without copying them.
pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    if pattern.is_ascii() && text.is_ascii() {
        return glob_match_units(pattern.as_bytes(), text.as_bytes(), b'*', b'?');
    }
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    glob_match_units(&pattern, &text, '*', '?')
}

/// The glob match over characters (or bytes, for ASCII): `star` matches any run, `one` one.
fn glob_match_units<T: Copy + PartialEq>(pattern: &[T], text: &[T], star: T, one: T) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == one || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == star {
            backtrack = Some((p, t));
            p += 1;
        } else if let Some((at, matched)) = backtrack {
            p = at + 1;
            t = matched + 1;
            backtrack = Some((at, matched + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|c| *c == star)
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret;

    use super::*;

    fn parse_ok(yaml: &str, env: &[(&str, &str)]) -> Vec<ExternalServerConfig> {
        let mut errors = Vec::new();
        let servers = parse(yaml, "x.yaml", &Env::from_pairs(env), &mut errors);
        assert!(errors.is_empty(), "{errors:#?}");
        servers
    }

    fn parse_errors(yaml: &str) -> Vec<String> {
        let mut errors = Vec::new();
        parse(yaml, "x.yaml", &Env::default(), &mut errors);
        errors
    }

    #[test]
    fn the_repository_example_parses() {
        let text = include_str!("../../external-mcps.yaml");
        let servers = parse_ok(text, &[]);
        let github = servers.iter().find(|server| server.key == "github").unwrap();
        assert_eq!(github.display_name, "GitHub MCP");
        assert_eq!(
            github.availability,
            Availability::MissingCredentials(vec![
                "GITHUB_MCP_API_KEY".into(),
                "GITHUB_MCP_ORG".into()
            ])
        );
        assert_eq!(github.transport.name(), "stdio");
        assert!(github.capabilities.contains(&"issue_management".to_owned()));
        assert!(servers.iter().any(|server| server.key == "slack"));
    }

    #[test]
    fn a_servers_tool_definitions_are_held_unless_told() {
        let entry = |pin: &str| format!("mcps:\n  up:\n    command: up\n{pin}");
        let pin = |line: &str| parse_ok(&entry(line), &[])[0].pin;
        assert_eq!(pin(""), PinMode::Hold);
        assert_eq!(pin("    pin: hold\n"), PinMode::Hold);
        assert_eq!(pin("    pin: warn\n"), PinMode::Warn);
        assert_eq!(pin("    pin: off\n"), PinMode::Off);
        let errors = parse_errors(&entry("    pin: approve\n"));
        assert!(
            errors.iter().any(|error| error.contains("pin: unknown mode `approve`; expected hold")),
            "{errors:?}"
        );
    }

    #[test]
    fn the_protocol_spoken_to_a_server_is_2025_11_25_unless_told() {
        let entry = |protocol: &str| format!("mcps:\n  up:\n    command: up\n{protocol}");
        let protocol = |line: &str| parse_ok(&entry(line), &[])[0].protocol;
        assert_eq!(protocol(""), UpstreamProtocol::Session);
        assert_eq!(protocol("    protocol: 2025-11-25\n"), UpstreamProtocol::Session);
        assert_eq!(protocol("    protocol: 2026-07-28\n"), UpstreamProtocol::Modern);
        assert_eq!(protocol("    protocol: auto\n"), UpstreamProtocol::Auto);
        let errors = parse_errors(&entry("    protocol: 2024-11-05\n"));
        assert!(
            errors.iter().any(|error| error.contains("protocol: unknown revision `2024-11-05`")),
            "{errors:#?}"
        );
    }

    #[test]
    fn oauth_blocks_are_checked_and_their_secrets_resolved() {
        let entry = |oauth: &str| {
            format!("mcps:\n  up:\n    url: https://up.example/mcp\n    oauth: {oauth}\n")
        };
        let servers = parse_ok(
            &entry(
                "{mode: service, client_id: orca, client_secret_env: UP_SECRET, issuer: 'https://as.example'}",
            ),
            &[("UP_SECRET", "s3cret")],
        );
        let ExternalTransport::Http { oauth: Some(oauth), bearer, .. } = &servers[0].transport
        else {
            panic!("{:?}", servers[0].transport)
        };
        assert_eq!(oauth.mode, SignInMode::Service);
        assert_eq!(oauth.client_secret.as_ref().unwrap().expose_secret(), "s3cret");
        assert_eq!(oauth.issuer.as_deref(), Some("https://as.example"));
        assert!(oauth.allowed_hosts.is_empty());
        let allowed =
            parse_ok(&entry("{mode: shared, allowed_hosts: ['auth.example.com', '[::1]:9']}"), &[]);
        let ExternalTransport::Http { oauth: Some(oauth), .. } = &allowed[0].transport else {
            panic!("{:?}", allowed[0].transport)
        };
        assert_eq!(oauth.allowed_hosts, ["auth.example.com", "[::1]:9"]);
        assert!(bearer.is_none());
        let shared = parse_ok(&entry("{mode: shared}"), &[]);
        assert_eq!(shared[0].availability, Availability::Enabled);
        let per_user = parse_ok(&entry("{mode: per_user}"), &[]);
        let ExternalTransport::Http { oauth: Some(oauth), .. } = &per_user[0].transport else {
            panic!("{:?}", per_user[0].transport)
        };
        assert_eq!(oauth.mode, SignInMode::PerUser);
        let missing = parse_ok(
            &entry(
                "{mode: service, client_id: orca, private_key_env: UP_KEY, issuer: 'http://127.0.0.1:9'}",
            ),
            &[],
        );
        assert_eq!(
            missing[0].availability,
            Availability::MissingCredentials(vec!["UP_KEY".into()])
        );
        for (oauth, expected) in [
            ("{mode: service}", "mode service needs client_id"),
            ("{mode: everyone}", "`everyone` is not a mode"),
            ("{mode: shared, client_metadata_url: 'http://x/c.json'}", "must be an https URL"),
            ("{mode: shared, client_metadata_url: 'https://x/mcp'}", "path ends in .json"),
            ("{mode: shared, signing_algorithm: HS256}", "`HS256` is not a signing algorithm"),
            (
                "{mode: shared, client_secret_env: 'not a name'}",
                "is not an environment variable name",
            ),
            ("{mode: shared, bogus: 1}", "unknown field `bogus`"),
            (
                "{mode: service, client_id: orca, client_secret_env: S}",
                "oauth.issuer: required with client_secret_env",
            ),
            (
                "{mode: per_user, client_id: orca, private_key_env: K}",
                "oauth.issuer: required with client_secret_env or private_key_env",
            ),
            ("{mode: shared, issuer: 'http://as.example'}", "oauth.issuer: `http://as.example`"),
            ("{mode: shared, issuer: 'https://as.example?x=1'}", "without query or fragment"),
            (
                "{mode: shared, allowed_hosts: ['auth.example.com', 'https://x.example']}",
                "oauth.allowed_hosts: `https://x.example` is not a host",
            ),
            ("{mode: shared, allowed_hosts: ['a.example:99999']}", "is not a port"),
        ] {
            let errors = parse_errors(&entry(oauth));
            assert!(errors.iter().any(|error| error.contains(expected)), "{oauth}: {errors:#?}");
        }
        let sse = parse_errors(
            "mcps:\n  up:\n    url: https://up.example/sse\n    oauth: {mode: shared}\n",
        );
        assert!(sse.iter().any(|error| error.contains("only for transport http")), "{sse:#?}");
        let both = parse_errors(
            "mcps:\n  up:\n    url: https://up.example/mcp\n    credentials: {token_env: T}\n    oauth: {mode: shared}\n",
        );
        assert!(
            both.iter().any(|error| error.contains("remove the bearer credential")),
            "{both:#?}"
        );
    }

    #[test]
    fn a_web_page_url_without_transport_says_what_to_add() {
        let errors = parse_errors(
            "mcps:\n  github:\n    url: https://github.com/modelcontextprotocol/servers/tree/main/src/github\n",
        );
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("looks like a web page"), "{}", errors[0]);
        assert!(
            errors[0].contains("transport: stdio") && errors[0].contains("command"),
            "{}",
            errors[0]
        );
        assert!(errors[0].starts_with("x.yaml: mcps.github:"), "{}", errors[0]);
    }

    #[test]
    fn an_endpoint_url_implies_its_transport() {
        let servers = parse_ok(
            "mcps:\n  a:\n    url: http://127.0.0.1:9/mcp\n  b:\n    url: http://127.0.0.1:9/sse\n",
            &[],
        );
        assert_eq!(servers[0].transport.name(), "http");
        assert_eq!(servers[1].transport.name(), "sse");
    }

    #[test]
    fn credentials_reach_a_child_as_variables_and_http_as_a_bearer_token() {
        let servers = parse_ok(
            "mcps:\n  gh:\n    command: srv\n    credentials: {api_key_env: KEY}\n    env: {TOKEN: \"Bearer ${KEY}\", PLAIN: x}\n  web:\n    url: https://h/mcp\n    credentials: {token_env: KEY}\n  named:\n    url: https://h/mcp\n    auth_header: X-Api-Key\n    credentials: {api_key_env: KEY}\n",
            &[("KEY", "s3cret")],
        );
        let ExternalTransport::Stdio { env, .. } = &servers[0].transport else { panic!() };
        let env: BTreeMap<&str, &str> =
            env.iter().map(|(name, value)| (name.as_str(), value.expose_secret())).collect();
        assert_eq!(
            env,
            BTreeMap::from([("KEY", "s3cret"), ("TOKEN", "Bearer s3cret"), ("PLAIN", "x")])
        );
        let ExternalTransport::Http { bearer, .. } = &servers[2].transport else { panic!() };
        assert_eq!(bearer.as_ref().unwrap().expose_secret(), "s3cret");
        let ExternalTransport::Http { bearer, headers, .. } = &servers[1].transport else {
            panic!()
        };
        assert!(bearer.is_none());
        assert_eq!(headers[0].0, "X-Api-Key");
        assert_eq!(headers[0].1.expose_secret(), "s3cret");
        // Secrets never show in Debug output.
        assert!(!format!("{servers:?}").contains("s3cret"));
    }

    #[test]
    fn a_missing_credential_disables_only_its_server() {
        let servers = parse_ok(
            "mcps:\n  a:\n    command: srv\n    credentials: {token_env: NOPE}\n    env: {X: \"${ALSO_NOPE}\"}\n  b:\n    command: srv\n",
            &[],
        );
        assert_eq!(
            servers[0].availability,
            Availability::MissingCredentials(vec!["ALSO_NOPE".into(), "NOPE".into()])
        );
        assert_eq!(servers[1].availability, Availability::Enabled);
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let errors = parse_errors(
            "mcps:\n  orca:\n    command: x\n  b:\n    transport: carrier-pigeon\n  c:\n    command: x\n    timeout: soon\n    retries: 99\n    verb: destroy\n    headers: {A: b}\n  d:\n    command: x\n    bogus: 1\n",
        );
        assert!(errors.len() >= 6, "{errors:#?}");
        for expected in [
            "internal server",
            "carrier-pigeon",
            "timeout",
            "retries",
            "unknown verb",
            "only for transports http",
        ] {
            assert!(errors.iter().any(|error| error.contains(expected)), "{expected}: {errors:#?}");
        }
        let errors = parse_errors("mcps:\n  d:\n    command: x\n    bogus: 1\n");
        assert!(errors[0].contains("bogus"), "{errors:?}");
    }

    #[test]
    fn prefixes_must_differ_and_defaults_hold() {
        let errors = parse_errors(
            "mcps:\n  a:\n    command: x\n    prefix: p\n  b:\n    command: x\n    prefix: p\n",
        );
        assert!(errors[0].contains("prefix `p`"), "{errors:?}");
        let errors = parse_errors(
            "mcps:\n  a:\n    command: x\n    prefix: p\n  b:\n    command: x\n    prefix: p_x\n  c:\n    command: x\n    prefix: px\n  d:\n    command: x\n    prefix: p-x\n",
        );
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("mcps.b: prefix `p_x` starts with `p_`"), "{errors:?}");
        let server = &parse_ok("mcps:\n  my-server:\n    command: x\n", &[])[0];
        assert_eq!(server.prefix, "my-server");
        // The empty prefix exposes a server's names as they are; two such servers would collide.
        let bare = &parse_ok("mcps:\n  a:\n    command: x\n    prefix: \"\"\n", &[])[0];
        assert_eq!(bare.prefix, "");
        let errors = parse_errors(
            "mcps:\n  a:\n    command: x\n    prefix: \"\"\n  b:\n    command: x\n    prefix: \"\"\n",
        );
        assert!(errors[0].contains("prefix `` is also the prefix of `a`"), "{errors:?}");
        assert_eq!(server.timeout, Duration::from_secs(30));
        assert_eq!(server.retries, 2);
    }

    #[test]
    fn durations_filters_and_verbs() {
        let server = &parse_ok(
            "mcps:\n  a:\n    command: x\n    timeout: 500ms\n    include_tools: [\"get_*\", echo]\n    exclude_tools: [get_secret]\n    tool_verbs: {echo: update}\n",
            &[],
        )[0];
        assert_eq!(server.timeout, Duration::from_millis(500));
        assert!(server.admits("get_issue") && server.admits("echo"));
        assert!(!server.admits("get_secret") && !server.admits("delete_repo"));
        assert_eq!(server.verb_for("echo", None), Verb::Update);
        assert_eq!(server.verb_for("other", None), Verb::Delete);
        let read_only = rmcp::model::ToolAnnotations::new().read_only(true);
        assert_eq!(server.verb_for("other", Some(&read_only)), Verb::Read);
        let additive = rmcp::model::ToolAnnotations::new().read_only(false).destructive(false);
        assert_eq!(verb_from_annotations(Some(&additive)), Verb::Create);
        assert_eq!(verb_from_annotations(Some(&additive.clone().idempotent(true))), Verb::Update);
    }

    #[test]
    fn endpoints_shown_to_clients_carry_no_secrets() {
        assert_eq!(
            display_url("https://u:pw@h.example:8443/mcp?api_key=s#x"),
            "https://h.example:8443/mcp"
        );
        assert_eq!(display_url("http://127.0.0.1:9/sse"), "http://127.0.0.1:9/sse");
        let server = &parse_ok("mcps:\n  a:\n    url: \"https://h/mcp?token=abc\"\n", &[])[0];
        assert_eq!(server.endpoint, "https://h/mcp");
    }

    #[test]
    fn glob_patterns() {
        for (pattern, text, matches) in [
            ("*", "", true),
            ("a*c", "abbbc", true),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("*_issue*", "create_issue_comment", true),
            ("get", "get_x", false),
            ("*materialize*", "materialize_sql", true),
            ("!x", "x", false),
            // `?` is one character, not one byte, in names that are not ASCII.
            ("caf?", "café", true),
            ("caf??", "café", false),
            ("*é*", "crème_brûlée", true),
            ("?", "é", true),
        ] {
            assert_eq!(glob_match(pattern, text), matches, "{pattern} against {text}");
        }
    }
}
