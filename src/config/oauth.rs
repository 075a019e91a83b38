//! `auth.oauth` and `auth.roles` of `orca.yaml`: orca as an OAuth 2.1 resource server (the
//! issuer whose tokens it accepts, its own canonical URL as the audience, the scopes and the
//! claims it reads) and the roles a token's claim names, each with its verbs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::policy::ToolPolicy;
use super::validate_verbs;
use crate::privacy::mask::{MaskRule, MaskingPolicy};
use crate::tool::Verb;

/// `auth.oauth` as written: orca as an OAuth 2.1 resource server.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "OAuth")]
pub(super) struct RawOAuth {
    /// Exactly the `iss` a token must carry; its metadata is found by discovery.
    issuer: String,
    /// orca's canonical URL (such as `https://orca.example.com/mcp`): the audience a token must
    /// name (RFC 8707).
    resource: String,
    /// The scopes orca's protected resource metadata advertises.
    #[serde(default)]
    scopes_supported: Vec<String>,
    /// Scopes every token must hold.
    #[serde(default)]
    required_scopes: Vec<String>,
    /// The claim naming the person, recorded as the principal.
    #[schemars(extend("default" = "sub"))]
    user_claim: Option<String>,
    /// The claim naming the OAuth client (then `azp`).
    #[schemars(extend("default" = "client_id"))]
    client_claim: Option<String>,
    /// The claim holding the token's roles (a list or a space-separated string), each a name of
    /// `auth.roles`; default none: tokens may read.
    roles_claim: Option<String>,
    /// Allowed clock skew for `exp`, `nbf` and `iat` (seconds, at most 600).
    #[schemars(extend("default" = 60), range(max = 600))]
    leeway_seconds: Option<u64>,
    /// A token with an unknown `kid` fetches the key set again at most this often (seconds).
    #[schemars(extend("default" = 30))]
    jwks_min_refresh_seconds: Option<u64>,
    /// The console's public client at the issuer (its redirect URI is orca's own page): adds the
    /// console's Sign in.
    console_client_id: Option<String>,
    /// The `typ` headers a token may carry (`none`: no `typ`); Keycloak, Auth0, Okta and Entra
    /// ID need more than RFC 9068's `at+jwt`.
    #[schemars(extend("default" = ["at+jwt"]))]
    accepted_token_types: Option<Vec<String>>,
}

/// One entry of `auth.roles` as written.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Role")]
pub(super) struct RawRole {
    /// The verbs its holders get (`read`, `create`, `update`, `delete`).
    #[schemars(schema_with = "super::schema::verb_list")]
    verbs: Vec<String>,
    /// Gateway tool names (globs), `server:<name>`, and `!` exclusions; default: every tool. The
    /// servers it shows a tool of are the ones whose prompts, resources and console sign-ins it
    /// reaches.
    tools: Option<Vec<String>>,
    /// `tools/call` per principal per minute (all replicas together with
    /// `cluster.advertise_url`), then 429 with `Retry-After`; default: no limit.
    calls_per_minute: Option<u32>,
    /// The id of a policy under `masking:` applied to every value its holders read; default:
    /// none.
    masking: Option<String>,
    /// Whether its holders may approve external tools held for a person.
    #[serde(default)]
    #[schemars(extend("default" = false))]
    approve_tools: bool,
}

/// The issuer orca trusts and what a token must carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OAuthConfig {
    /// Exactly the `iss` a token must carry; its metadata is found by discovery.
    pub(crate) issuer: String,
    /// orca's canonical URL: the audience a token must name (RFC 8707).
    pub(crate) resource: String,
    pub(crate) scopes_supported: Vec<String>,
    /// Scopes every token must hold.
    pub(crate) required_scopes: Vec<String>,
    /// The claim naming the person (`sub`).
    pub(crate) user_claim: String,
    /// The claim naming the client (`client_id`, else `azp`).
    pub(crate) client_claim: String,
    /// The claim listing the caller's roles (a list or a space-separated string).
    pub(crate) roles_claim: Option<String>,
    /// How far `exp` and `nbf` may be off.
    pub(crate) leeway: Duration,
    /// The key set is fetched again for an unknown `kid` at most this often.
    pub(crate) jwks_min_refresh: Duration,
    /// The public client the console signs in with (authorization code with PKCE); `None`: the
    /// console offers no sign-in.
    pub(crate) console_client_id: Option<String>,
    /// The `typ` header values a token may carry (`auth.oauth.accepted_token_types`), each
    /// normalized by [`token_type`]; [`NO_TOKEN_TYPE`] admits a token without one.
    pub(crate) accepted_token_types: Vec<String>,
}

/// The entry of `auth.oauth.accepted_token_types` that admits a token without a `typ` header.
pub(crate) const NO_TOKEN_TYPE: &str = "none";

/// A `typ` value as it is compared (RFC 7515 section 4.1.9): lowercased, without the
/// `application/` prefix that may be left out.
pub(crate) fn token_type(value: &str) -> String {
    let value = value.trim().to_ascii_lowercase();
    match value.strip_prefix("application/") {
        Some(rest) => rest.to_owned(),
        None => value,
    }
}

impl OAuthConfig {
    /// Where orca serves its protected-resource metadata (RFC 9728): the well-known path
    /// inserted before the resource's own path.
    pub(crate) fn metadata_url(&self) -> String {
        let (origin, path) = split_origin(&self.resource);
        format!("{origin}/.well-known/oauth-protected-resource{}", path.trim_end_matches('/'))
    }
}

/// A role a token (or an API key) may hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Role {
    pub(crate) verbs: BTreeSet<Verb>,
    /// The tools it may see and call, shared by every principal holding it; `None`: every tool.
    pub(crate) tools: Option<Arc<ToolPolicy>>,
    /// Tool calls a minute per principal holding it (per replica); `None`: no limit.
    pub(crate) calls_per_minute: Option<u32>,
    /// The masking policy applied to what its holders read (`auth.roles.<name>.masking`); its
    /// salt is filled from the orca secret when orca starts. `None`: nothing is masked.
    pub(crate) masking: Option<Arc<MaskingPolicy>>,
    /// Whether its holders may approve external tools held for a person
    /// (`auth.roles.<name>.approve_tools`, default false).
    pub(crate) approve_tools: bool,
}

/// `scheme://host[:port]` and the path (with its leading `/`, possibly empty) of a URL.
pub(crate) fn split_origin(url: &str) -> (&str, &str) {
    let after_scheme = url.find("://").map_or(0, |at| at + 3);
    match url[after_scheme..].find('/') {
        Some(slash) => url.split_at(after_scheme + slash),
        None => (url, ""),
    }
}

/// Whether `url` may be used for an authorization endpoint or metadata: HTTPS, or HTTP on a
/// loopback host (local providers and tests).
pub(crate) fn secure_or_loopback(url: &str) -> bool {
    if url.starts_with("https://") {
        return true;
    }
    let Some(rest) = url.strip_prefix("http://") else { return false };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(host, _)| host),
    };
    is_loopback_host(host)
}

/// `localhost`, or an address in 127.0.0.0/8 or `::1`.
fn is_loopback_host(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|address| address.is_loopback())
}

pub(super) fn validate_oauth(
    raw: RawOAuth,
    file: &str,
    errors: &mut Vec<String>,
) -> Option<OAuthConfig> {
    let before = errors.len();
    let url = |key: &str, value: &str, errors: &mut Vec<String>| {
        if !secure_or_loopback(value) {
            errors.push(format!(
                "{file}: auth.oauth.{key}: `{value}` must be an https:// URL (http:// only on a loopback address)"
            ));
        } else if value.contains(['?', '#']) {
            errors.push(format!("{file}: auth.oauth.{key}: must have no query or fragment"));
        }
    };
    url("issuer", &raw.issuer, errors);
    url("resource", &raw.resource, errors);
    for scope in raw.scopes_supported.iter().chain(&raw.required_scopes) {
        if scope.is_empty() || scope.contains(char::is_whitespace) {
            errors.push(format!(
                "{file}: auth.oauth: scope `{scope}` must be one word without spaces"
            ));
        }
    }
    if !raw.scopes_supported.is_empty() {
        for scope in &raw.required_scopes {
            if !raw.scopes_supported.contains(scope) {
                errors.push(format!(
                    "{file}: auth.oauth.required_scopes: `{scope}` is not in scopes_supported"
                ));
            }
        }
    }
    let claim = |key: &str, value: Option<String>, default: &str, errors: &mut Vec<String>| {
        let value = value.unwrap_or_else(|| default.to_owned());
        if value.trim().is_empty() {
            errors.push(format!("{file}: auth.oauth.{key}: must not be empty"));
        }
        value
    };
    let user_claim = claim("user_claim", raw.user_claim, "sub", errors);
    let client_claim = claim("client_claim", raw.client_claim, "client_id", errors);
    let roles_claim = raw.roles_claim.map(|value| claim("roles_claim", Some(value), "", errors));
    let leeway = raw.leeway_seconds.unwrap_or(60);
    if leeway > 600 {
        errors.push(format!("{file}: auth.oauth.leeway_seconds: at most 600"));
    }
    let jwks_min_refresh = raw.jwks_min_refresh_seconds.unwrap_or(30);
    if let Some(client_id) = &raw.console_client_id
        && (client_id.trim().is_empty() || client_id.chars().any(char::is_control))
    {
        errors.push(format!(
            "{file}: auth.oauth.console_client_id: must be a client id without control characters"
        ));
    }
    let accepted_token_types: Vec<String> = raw
        .accepted_token_types
        .unwrap_or_else(|| vec!["at+jwt".to_owned()])
        .iter()
        .map(|value| token_type(value))
        .collect();
    if accepted_token_types.is_empty() {
        errors.push(format!(
            "{file}: auth.oauth.accepted_token_types: list at least one (`at+jwt`, as RFC 9068 says, by default)"
        ));
    }
    for value in &accepted_token_types {
        if value.is_empty() || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
            errors.push(format!(
                "{file}: auth.oauth.accepted_token_types: `{value}` must be a media type such as `at+jwt` or `jwt`, or `none`"
            ));
        }
    }
    (errors.len() == before).then(|| OAuthConfig {
        issuer: raw.issuer,
        resource: raw.resource,
        scopes_supported: raw.scopes_supported,
        required_scopes: raw.required_scopes,
        user_claim,
        client_claim,
        roles_claim,
        leeway: Duration::from_secs(leeway),
        jwks_min_refresh: Duration::from_secs(jwks_min_refresh),
        console_client_id: raw.console_client_id,
        accepted_token_types,
    })
}

pub(super) fn validate_roles(
    raw: BTreeMap<String, RawRole>,
    masking: &BTreeMap<String, BTreeMap<String, MaskRule>>,
    file: &str,
    errors: &mut Vec<String>,
) -> BTreeMap<String, Role> {
    raw.into_iter()
        .map(|(name, role)| {
            let key = format!("auth.roles.{name}");
            if name.trim().is_empty() {
                errors.push(format!("{file}: auth.roles: a role name must not be empty"));
            }
            let verbs = validate_verbs(&role.verbs, &format!("{key}.verbs"), file, errors);
            let tools = role.tools.and_then(|entries| match ToolPolicy::parse(&entries) {
                Ok(policy) => Some(Arc::new(policy)),
                Err(error) => {
                    errors.push(format!("{file}: {key}.tools: {error}"));
                    None
                }
            });
            if role.calls_per_minute == Some(0) {
                errors.push(format!(
                    "{file}: {key}.calls_per_minute: at least 1 (leave it out for no limit)"
                ));
            }
            let masking = role.masking.and_then(|id| match masking.get(&id) {
                Some(columns) => Some(Arc::new(MaskingPolicy {
                    id,
                    columns: columns.clone(),
                    kinds: BTreeMap::new(),
                    salt: String::new(),
                })),
                None => {
                    let known: Vec<&str> = masking.keys().map(String::as_str).collect();
                    errors.push(format!(
                        "{file}: {key}.masking: `{id}` is not one of the policies under masking: ({})",
                        if known.is_empty() { "none are configured".to_owned() } else { known.join(", ") }
                    ));
                    None
                }
            });
            let approve_tools = role.approve_tools;
            (name, Role { verbs, tools, calls_per_minute: role.calls_per_minute, masking, approve_tools })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_urls_insert_the_well_known_path_before_the_resource_path() {
        let config = |resource: &str| OAuthConfig {
            issuer: "https://login.example.com".into(),
            resource: resource.into(),
            scopes_supported: vec![],
            required_scopes: vec![],
            user_claim: "sub".into(),
            client_claim: "client_id".into(),
            roles_claim: None,
            leeway: Duration::from_secs(60),
            jwks_min_refresh: Duration::from_secs(30),
            console_client_id: None,
            accepted_token_types: vec!["at+jwt".into()],
        };
        for (resource, expected) in [
            (
                "https://orca.example.com/mcp",
                "https://orca.example.com/.well-known/oauth-protected-resource/mcp",
            ),
            (
                "https://orca.example.com",
                "https://orca.example.com/.well-known/oauth-protected-resource",
            ),
            (
                "http://127.0.0.1:9000/mcp/",
                "http://127.0.0.1:9000/.well-known/oauth-protected-resource/mcp",
            ),
        ] {
            assert_eq!(config(resource).metadata_url(), expected, "{resource}");
        }
    }

    #[test]
    fn the_console_client_id_is_optional_and_must_be_a_word() {
        for (written, expected) in [
            ("", Ok(None)),
            ("console_client_id: orca-console\n", Ok(Some("orca-console"))),
            ("console_client_id: \"  \"\n", Err("auth.oauth.console_client_id")),
            ("console_client_id: \"a\\u0000b\"\n", Err("auth.oauth.console_client_id")),
        ] {
            let yaml = format!(
                "issuer: https://login.example.com\nresource: https://orca.example.com/mcp\n{written}"
            );
            let raw: RawOAuth = serde_saphyr::from_str(&yaml).unwrap();
            let mut errors = Vec::new();
            let config = validate_oauth(raw, "orca.yaml", &mut errors);
            match expected {
                Ok(client) => {
                    assert!(errors.is_empty(), "{written}: {errors:?}");
                    assert_eq!(config.unwrap().console_client_id.as_deref(), client, "{written}");
                }
                Err(key) => {
                    assert!(config.is_none(), "{written}");
                    assert!(
                        errors.iter().any(|error| error.contains(key)),
                        "{written}: {errors:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn accepted_token_types_default_to_at_jwt_and_are_compared_without_application() {
        for (written, expected) in [
            ("", Ok(vec!["at+jwt"])),
            ("accepted_token_types: [at+jwt, JWT]\n", Ok(vec!["at+jwt", "jwt"])),
            ("accepted_token_types: [application/AT+JWT, none]\n", Ok(vec!["at+jwt", "none"])),
            ("accepted_token_types: []\n", Err("list at least one")),
            ("accepted_token_types: [\"at jwt\"]\n", Err("must be a media type")),
        ] {
            let yaml = format!(
                "issuer: https://login.example.com\nresource: https://orca.example.com/mcp\n{written}"
            );
            let raw: RawOAuth = serde_saphyr::from_str(&yaml).unwrap();
            let mut errors = Vec::new();
            let config = validate_oauth(raw, "orca.yaml", &mut errors);
            match expected {
                Ok(types) => {
                    assert!(errors.is_empty(), "{written}: {errors:?}");
                    assert_eq!(config.unwrap().accepted_token_types, types, "{written}");
                }
                Err(reason) => {
                    assert!(config.is_none(), "{written}");
                    assert!(errors.iter().any(|error| error.contains(reason)), "{errors:?}");
                }
            }
        }
    }

    #[test]
    fn only_https_or_loopback_http_is_accepted() {
        for (url, accepted) in [
            ("https://login.example.com/realms/acme", true),
            ("http://127.0.0.1:8080", true),
            ("http://localhost/x", true),
            ("http://[::1]:9/x", true),
            ("http://login.example.com", false),
            ("http://127.0.0.1.evil.example/x", false),
            ("ftp://127.0.0.1", false),
            ("login.example.com", false),
        ] {
            assert_eq!(secure_or_loopback(url), accepted, "{url}");
        }
    }
}
