//! The `metabase` server's settings: `METABASE_URL` and its credentials from the environment, or
//! the same keys under `metabase:` in `orca.yaml` (the environment wins). Secrets are kept as
//! `SecretString`s and never shown.

use std::time::Duration;

use schemars::JsonSchema;
use secrecy::SecretString;
use serde::Deserialize;
use serde_json::Value;

use super::Env;

/// How orca signs in to Metabase.
#[derive(Debug, Clone)]
pub(crate) enum MetabaseAuth {
    /// `POST /api/session`, then the `X-Metabase-Session` header.
    Session { username: String, password: SecretString },
    /// The `x-api-key` header.
    ApiKey(SecretString),
}

/// The validated `metabase` settings; present only when a URL is configured.
#[derive(Debug, Clone)]
pub(crate) struct MetabaseConfig {
    /// The instance's base URL, without a trailing slash.
    pub(crate) url: String,
    pub(crate) auth: MetabaseAuth,
    /// Rows a query result keeps by default (`max_rows`).
    pub(crate) max_rows: usize,
    /// The time one HTTP request to Metabase may take.
    pub(crate) timeout: Duration,
    /// The longest wait for a login throttle before a call gives up with `RATE_LIMITED`.
    pub(crate) max_login_wait: Duration,
}

impl MetabaseConfig {
    pub(crate) const DEFAULT_MAX_ROWS: usize = 200;
    /// The largest `max_rows` a call or the configuration may ask for.
    pub(crate) const HARD_MAX_ROWS: usize = 10_000;

    /// A one-line description with no secret in it.
    pub(crate) fn describe(&self) -> String {
        let auth = match &self.auth {
            MetabaseAuth::Session { username, .. } => {
                format!("session as {username} (password set)")
            }
            MetabaseAuth::ApiKey(_) => "api key (set)".to_owned(),
        };
        format!(
            "{} auth={auth} max_rows={} timeout_ms={} max_login_wait_ms={}",
            super::mask_url(&self.url),
            self.max_rows,
            self.timeout.as_millis(),
            self.max_login_wait.as_millis()
        )
    }
}

/// `metabase:` in `orca.yaml`: the `metabase` server; the `METABASE_*` variables win over
/// these keys.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Metabase")]
pub(super) struct RawMetabase {
    /// The Metabase instance (`METABASE_URL`); unset: the server is disabled.
    url: Option<String>,
    /// The Metabase user orca signs in as, with `password` (`METABASE_USERNAME`).
    username: Option<String>,
    /// The user's password (`METABASE_PASSWORD`).
    password: Option<String>,
    /// A Metabase API key instead of a user (`METABASE_API_KEY`); not together with
    /// `username`.
    api_key: Option<String>,
    /// Rows a query result keeps unless the call's `max_rows` says otherwise
    /// (`METABASE_MAX_ROWS`; 1 to 10,000).
    #[schemars(extend("default" = MetabaseConfig::DEFAULT_MAX_ROWS), range(min = 1, max = 10_000))]
    max_rows: Option<u64>,
    /// Each request to Metabase (milliseconds).
    #[schemars(extend("default" = 30_000), range(min = 1))]
    timeout_ms: Option<u64>,
    /// The longest login-throttle wait (milliseconds) a call sits out before `RATE_LIMITED`.
    #[schemars(extend("default" = 10_000))]
    max_login_wait_ms: Option<u64>,
}

/// Read the `metabase` settings; `None` when no URL is configured.
pub(super) fn load(
    section: Option<&Value>,
    env: &Env,
    file: &str,
    errors: &mut Vec<String>,
) -> Option<MetabaseConfig> {
    let raw: RawMetabase = section
        .and_then(|value| super::section(value, "metabase", file, errors))
        .unwrap_or_default();
    let pick = |variable: &str, yaml: &Option<String>| {
        env.get(variable).map(str::to_owned).or_else(|| yaml.clone().filter(|v| !v.is_empty()))
    };
    let url = pick("METABASE_URL", &raw.url)?;
    // Problems are reported against where the settings came from.
    let origin = if env.get("METABASE_URL").is_some() { "environment" } else { file };
    let username = pick("METABASE_USERNAME", &raw.username);
    let password = pick("METABASE_PASSWORD", &raw.password);
    let api_key = pick("METABASE_API_KEY", &raw.api_key);
    let url = url.trim().trim_end_matches('/').to_owned();
    match reqwest::Url::parse(&url) {
        Ok(parsed)
            if matches!(parsed.scheme(), "http" | "https") && parsed.host_str().is_some() => {}
        _ => errors.push(format!(
            "{origin}: METABASE_URL: expected an http:// or https:// URL with a host, found `{}`",
            super::mask_url(&url)
        )),
    }
    let auth = match (username, password, api_key) {
        (None, None, Some(key)) => Some(MetabaseAuth::ApiKey(SecretString::from(key))),
        (Some(username), Some(password), None) => {
            Some(MetabaseAuth::Session { username, password: SecretString::from(password) })
        }
        (_, _, Some(_)) => {
            errors.push(format!("{origin}: metabase: set either METABASE_API_KEY or METABASE_USERNAME and METABASE_PASSWORD, not both"));
            None
        }
        (Some(_), None, None) | (None, Some(_), None) => {
            errors.push(format!(
                "{origin}: metabase: METABASE_USERNAME and METABASE_PASSWORD go together; set both"
            ));
            None
        }
        (None, None, None) => {
            errors.push(format!("{origin}: metabase: METABASE_URL is set but no credentials are: set METABASE_USERNAME and METABASE_PASSWORD, or METABASE_API_KEY"));
            None
        }
    };
    let max_rows = match env.get("METABASE_MAX_ROWS") {
        Some(text) => match text.parse::<u64>() {
            Ok(rows) => Some(rows),
            Err(_) => {
                errors.push(format!(
                    "environment: METABASE_MAX_ROWS: expected a number, found `{text}`"
                ));
                None
            }
        },
        None => raw.max_rows,
    };
    let max_rows = match max_rows {
        None => MetabaseConfig::DEFAULT_MAX_ROWS,
        Some(rows) if rows == 0 || rows > MetabaseConfig::HARD_MAX_ROWS as u64 => {
            errors.push(format!(
                "{origin}: metabase.max_rows: must be between 1 and {}",
                MetabaseConfig::HARD_MAX_ROWS
            ));
            MetabaseConfig::DEFAULT_MAX_ROWS
        }
        Some(rows) => rows as usize,
    };
    let millis = |value: Option<u64>, default: u64, key: &str, errors: &mut Vec<String>| match value
    {
        Some(0) => {
            errors.push(format!("{file}: metabase.{key}: must be greater than zero"));
            Duration::from_millis(default)
        }
        Some(value) => Duration::from_millis(value),
        None => Duration::from_millis(default),
    };
    let timeout = millis(raw.timeout_ms, 30_000, "timeout_ms", errors);
    let max_login_wait = match raw.max_login_wait_ms {
        Some(value) => Duration::from_millis(value),
        None => Duration::from_secs(10),
    };
    Some(MetabaseConfig { url, auth: auth?, max_rows, timeout, max_login_wait })
}
