//! `http:` of `orca.yaml`: the limits and checks of the HTTP edge (body size and timeouts,
//! connections, hosts and origins, the failed-authentication throttle, trusted proxies), orca's
//! public URL, and how much the unauthenticated `/healthz` and `/metrics` tell.

use std::time::Duration;

use super::ip_range::{self, IpRange};
use super::positive;
use super::raw::RawHttp;

#[derive(Debug, Clone)]
pub(crate) struct HttpConfig {
    pub(crate) max_body_bytes: usize,
    /// `None`: loopback names plus the bound address.
    pub(crate) allowed_hosts: Option<Vec<String>>,
    pub(crate) allowed_origins: Vec<String>,
    /// Open connections served at once; one more is answered 503 and closed.
    pub(crate) max_connections: usize,
    /// How long a client may take to send a request's headers.
    pub(crate) header_timeout: Duration,
    /// How long a client may take to send a request's body, from when orca starts reading it
    /// (`http.body_timeout_ms`); past it the request is answered 408.
    pub(crate) body_timeout: Duration,
    /// How deep a JSON-RPC message sent to `/mcp` may nest arrays and objects.
    pub(crate) max_json_depth: usize,
    /// Failed authentications per minute from one address, or with one key, before 429.
    pub(crate) auth_failures_per_minute: usize,
    /// How long open requests may run after a shutdown signal before they are cancelled.
    pub(crate) drain_timeout: Duration,
    /// Peers whose `X-Forwarded-For` / `Forwarded` name the client (reverse proxies); empty:
    /// the peer address is the client.
    pub(crate) trusted_proxies: Vec<IpRange>,
    /// orca's address as people's browsers reach it (`http.public_url`,
    /// `scheme://host[:port]`): the base of the redirect URI of the console's sign-ins to
    /// external servers and of the sign-in links in their errors; without it the request's
    /// `Host` is used, over http.
    pub(crate) public_url: Option<String>,
    /// What `/healthz` and `/metrics`, which answer anyone, say of the servers and tools
    /// (`http.health_details`).
    pub(crate) health_details: HealthDetails,
}

/// `http.health_details`: how much the unauthenticated `/healthz` and `/metrics` tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HealthDetails {
    /// How many servers, databases and external servers are in each state, and calls summed
    /// over tools: no server, database or tool is named.
    Counts,
    /// Each server, database, external server and tool by name, with its state or its calls.
    Names,
}

/// The `http:` section, checked; every problem is added to `errors`.
pub(super) fn validate_http(raw_http: RawHttp, file: &str, errors: &mut Vec<String>) -> HttpConfig {
    let http = HttpConfig {
        max_body_bytes: positive(
            raw_http.max_body_bytes,
            4 * 1024 * 1024,
            "http.max_body_bytes",
            file,
            errors,
        ),
        allowed_hosts: raw_http.allowed_hosts,
        allowed_origins: raw_http.allowed_origins.unwrap_or_default(),
        max_connections: positive(
            raw_http.max_connections,
            1024,
            "http.max_connections",
            file,
            errors,
        ),
        header_timeout: Duration::from_millis(
            u64::try_from(positive(
                raw_http.header_timeout_ms,
                10_000,
                "http.header_timeout_ms",
                file,
                errors,
            ))
            .unwrap_or(u64::MAX),
        ),
        body_timeout: Duration::from_millis(
            u64::try_from(positive(
                raw_http.body_timeout_ms,
                10_000,
                "http.body_timeout_ms",
                file,
                errors,
            ))
            .unwrap_or(u64::MAX),
        ),
        max_json_depth: positive(raw_http.max_json_depth, 64, "http.max_json_depth", file, errors),
        auth_failures_per_minute: positive(
            raw_http.auth_failures_per_minute,
            10,
            "http.auth_failures_per_minute",
            file,
            errors,
        ),
        drain_timeout: Duration::from_millis(
            u64::try_from(positive(
                raw_http.drain_timeout_ms,
                10_000,
                "http.drain_timeout_ms",
                file,
                errors,
            ))
            .unwrap_or(u64::MAX),
        ),
        trusted_proxies: ip_range::trusted_proxies(raw_http.trusted_proxies, file, errors),
        public_url: match raw_http.public_url {
            Some(url) if public_base(&url) => Some(url.trim_end_matches('/').to_owned()),
            Some(url) => {
                errors.push(format!(
                    "{file}: http.public_url: `{url}` must be http(s)://host[:port] with no path, query or user"
                ));
                None
            }
            None => None,
        },
        health_details: match raw_http.health_details.as_deref() {
            None | Some("counts") => HealthDetails::Counts,
            Some("names") => HealthDetails::Names,
            Some(other) => {
                errors.push(format!(
                    "{file}: http.health_details: `{other}` must be `counts` or `names`"
                ));
                HealthDetails::Counts
            }
        },
    };
    for (index, origin) in http.allowed_origins.iter().enumerate() {
        if origin != "null" && !origin.contains("://") {
            errors.push(format!(
                "{file}: http.allowed_origins[{index}]: `{origin}` needs a scheme, for example `https://{origin}`"
            ));
        }
    }
    http
}

/// Whether `text` is a base URL: http or https, a host, no user, path, query or fragment.
fn public_base(text: &str) -> bool {
    url::Url::parse(text).is_ok_and(|url| {
        matches!(url.scheme(), "http" | "https")
            && url.host_str().is_some()
            && url.username().is_empty()
            && url.password().is_none()
            && url.path() == "/"
            && url.query().is_none()
            && url.fragment().is_none()
    })
}
