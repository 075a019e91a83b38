//! Discovery: the protected-resource metadata (RFC 9728) from the challenge's
//! `resource_metadata` or its well-known paths (path variant, then root), the authorization
//! server's metadata (RFC 8414 and OpenID Connect Discovery, path-inserted and appended forms),
//! and the 2025-03-26 fallbacks (the MCP server's origin as the authorization server, its
//! metadata at the root, else `/authorize`, `/token` and `/register`). A client bound to an
//! issuer takes that authorization server only (`outbound`).

use serde::Deserialize;
use url::Url;

use super::AuthError;
use super::challenge::Challenge;
use super::outbound::Outbound;

/// The protected-resource metadata document, as much of it as orca uses.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ResourceMetadata {
    pub(crate) resource: Option<String>,
    #[serde(default)]
    pub(crate) authorization_servers: Vec<String>,
    pub(crate) scopes_supported: Option<Vec<String>>,
    /// RFC 9449 section 5.1 (in RFC 9728's registry): the proof algorithms the resource takes.
    pub(crate) dpop_signing_alg_values_supported: Option<Vec<String>>,
    /// Whether the resource takes DPoP-bound tokens only.
    #[serde(default)]
    pub(crate) dpop_bound_access_tokens_required: bool,
}

/// The authorization server's metadata, as much of it as orca uses.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct ServerMetadata {
    /// The issuer identifier.
    pub issuer: String,
    /// Where the user is sent to sign in.
    pub authorization_endpoint: Option<String>,
    /// Where codes, refresh tokens and client credentials are exchanged.
    pub token_endpoint: String,
    /// Dynamic client registration (RFC 7591).
    pub registration_endpoint: Option<String>,
    /// Scopes the server knows.
    pub scopes_supported: Option<Vec<String>>,
    /// How a client may authenticate at the token endpoint.
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    /// PKCE methods.
    pub code_challenge_methods_supported: Option<Vec<String>>,
    /// Grant types.
    pub grant_types_supported: Option<Vec<String>>,
    /// Whether an HTTPS URL may serve as `client_id` (Client ID Metadata Documents).
    #[serde(default)]
    pub client_id_metadata_document_supported: bool,
    /// RFC 9207: the authorization response carries `iss`.
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: bool,
    /// RFC 9449: the algorithms the server takes for DPoP proofs.
    #[serde(default)]
    pub dpop_signing_alg_values_supported: Option<Vec<String>>,
}

/// What discovery found for one MCP server.
#[derive(Debug, Clone)]
pub(crate) struct Discovered {
    /// The resource indicator to send (RFC 8707).
    pub(crate) resource: String,
    /// The protected resource's `scopes_supported`, when it published metadata.
    pub(crate) resource_scopes: Option<Vec<String>>,
    /// Whether the protected resource's metadata says it takes DPoP-bound tokens.
    pub(crate) resource_dpop: bool,
    /// The authorization server.
    pub(crate) server: ServerMetadata,
}

/// Whether `url` may carry authorization traffic: HTTPS, or any scheme on a loopback host.
///
/// # Errors
///
/// [`AuthError::InsecureUrl`] otherwise, or when it is not a URL.
pub(crate) fn secure_url(url: &str) -> Result<Url, AuthError> {
    let parsed = Url::parse(url).map_err(|_| AuthError::InsecureUrl { url: shown(url) })?;
    let loopback = match parsed.host() {
        Some(url::Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(address)) => address.is_loopback(),
        Some(url::Host::Ipv6(address)) => address.is_loopback(),
        None => false,
    };
    if parsed.scheme() == "https" || (loopback && parsed.scheme() == "http") {
        Ok(parsed)
    } else {
        Err(AuthError::InsecureUrl { url: shown(url) })
    }
}

/// A URL as errors show it: without query string or user information.
pub(crate) fn shown(url: &str) -> String {
    match Url::parse(url) {
        Ok(mut parsed) => {
            parsed.set_query(None);
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.to_string()
        }
        Err(_) => url.split('?').next().unwrap_or(url).to_owned(),
    }
}

/// The well-known URLs of the protected-resource metadata for `server`, in the order they are
/// tried: with the server's path, then at the root.
pub(crate) fn resource_metadata_urls(server: &Url) -> Vec<String> {
    let origin = origin_of(server);
    let path = server.path().trim_end_matches('/');
    let mut urls = Vec::new();
    if !path.is_empty() {
        urls.push(format!("{origin}/.well-known/oauth-protected-resource{path}"));
    }
    urls.push(format!("{origin}/.well-known/oauth-protected-resource"));
    urls
}

/// The metadata URLs of an authorization server, in the order the specification gives: for an
/// issuer with a path, OAuth with the path inserted, OpenID with the path inserted, OpenID with
/// the path appended; without a path, OAuth then OpenID at the root.
pub(crate) fn server_metadata_urls(issuer: &Url) -> Vec<String> {
    let origin = origin_of(issuer);
    let path = issuer.path().trim_end_matches('/');
    if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    }
}

fn origin_of(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// Whether the resource a server's metadata names covers the server's URL: the same origin,
/// and a path that is the server's or one of its parents.
pub(crate) fn resource_covers(resource: &str, server: &Url) -> bool {
    let Ok(resource) = Url::parse(resource) else { return false };
    if resource.origin() != server.origin() || resource.fragment().is_some() {
        return false;
    }
    let parent = resource.path().trim_end_matches('/');
    let child = server.path().trim_end_matches('/');
    child == parent || child.starts_with(&format!("{parent}/"))
}

/// Fetch a JSON document; `None` for a 4xx answer (not there), an error for anything else that
/// is not a 2xx with JSON.
async fn fetch<T: serde::de::DeserializeOwned>(
    outbound: &Outbound,
    url: &str,
) -> Result<Option<T>, AuthError> {
    outbound.admit(url)?;
    let response = outbound
        .http
        .get(url)
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|error| outbound.failed(url, &error))?;
    let status = response.status();
    if status.is_client_error() {
        return Ok(None);
    }
    if !status.is_success() {
        return Err(AuthError::Metadata { url: shown(url), message: format!("HTTP {status}") });
    }
    let body = response
        .bytes()
        .await
        .map_err(|error| AuthError::Http { url: shown(url), message: error.to_string() })?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|error| AuthError::Metadata { url: shown(url), message: error.to_string() })
}

/// Find the protected-resource metadata and the authorization server for `server_url`. A
/// client bound to an issuer ([`Outbound::issuer`]) takes that server only: among those the
/// resource names, or, when it publishes no metadata, instead of the 2025-03-26 fallbacks.
///
/// # Errors
///
/// An insecure URL, a resource that does not cover the server, an authorization server whose
/// metadata names another issuer, one other than the configured issuer, network failures.
pub(crate) async fn discover(
    outbound: &Outbound,
    server_url: &str,
    challenge: &Challenge,
) -> Result<Discovered, AuthError> {
    let server =
        Url::parse(server_url).map_err(|_| AuthError::InsecureUrl { url: shown(server_url) })?;
    let mut metadata: Option<ResourceMetadata> = None;
    if let Some(url) = &challenge.resource_metadata {
        metadata = fetch(outbound, url).await?;
    }
    if metadata.is_none() {
        for url in resource_metadata_urls(&server) {
            if let Some(found) = fetch(outbound, &url).await? {
                metadata = Some(found);
                break;
            }
        }
    }
    let Some(metadata) = metadata else {
        if let Some(issuer) = outbound.issuer() {
            let server_metadata = server_metadata(outbound, issuer).await?;
            return Ok(Discovered {
                resource: server.to_string(),
                resource_scopes: None,
                resource_dpop: false,
                server: server_metadata,
            });
        }
        return legacy(outbound, &server).await;
    };
    let resource = metadata.resource.clone().unwrap_or_else(|| server_url.to_owned());
    if !resource_covers(&resource, &server) {
        return Err(AuthError::ResourceMismatch {
            resource: shown(&resource),
            server: shown(server_url),
        });
    }
    let issuer = outbound.choose_issuer(&metadata.authorization_servers, server_url)?;
    let server_metadata = server_metadata(outbound, issuer).await?;
    let resource_dpop = metadata.dpop_bound_access_tokens_required
        || metadata.dpop_signing_alg_values_supported.is_some_and(|list| !list.is_empty());
    Ok(Discovered {
        resource,
        resource_scopes: metadata.scopes_supported,
        resource_dpop,
        server: server_metadata,
    })
}

/// The metadata of the authorization server `issuer`, from the first of its well-known URLs
/// that has it, checked to name that issuer and to use secure endpoints.
async fn server_metadata(outbound: &Outbound, issuer: &str) -> Result<ServerMetadata, AuthError> {
    let issuer_url = outbound.admit(issuer)?;
    let mut found = None;
    for url in server_metadata_urls(&issuer_url) {
        if let Some(document) = fetch::<ServerMetadata>(outbound, &url).await? {
            found = Some(document);
            break;
        }
    }
    let Some(server_metadata) = found else {
        return Err(AuthError::Metadata {
            url: shown(issuer),
            message: "no authorization server metadata at its well-known paths".to_owned(),
        });
    };
    // RFC 8414 section 3.3: the document must name the issuer it was fetched for.
    if server_metadata.issuer != issuer {
        return Err(AuthError::IssuerMismatch {
            expected: issuer.to_owned(),
            found: server_metadata.issuer,
        });
    }
    check_endpoints(&server_metadata)?;
    Ok(server_metadata)
}

/// The 2025-03-26 fallbacks: the MCP server's origin is the authorization server; its metadata
/// at the root, else the default endpoints.
async fn legacy(outbound: &Outbound, server: &Url) -> Result<Discovered, AuthError> {
    let origin = origin_of(server);
    let url = format!("{origin}/.well-known/oauth-authorization-server");
    let server_metadata = match fetch::<ServerMetadata>(outbound, &url).await? {
        Some(document) => document,
        None => ServerMetadata {
            issuer: origin.clone(),
            authorization_endpoint: Some(format!("{origin}/authorize")),
            token_endpoint: format!("{origin}/token"),
            registration_endpoint: Some(format!("{origin}/register")),
            scopes_supported: None,
            token_endpoint_auth_methods_supported: None,
            code_challenge_methods_supported: None,
            grant_types_supported: None,
            client_id_metadata_document_supported: false,
            authorization_response_iss_parameter_supported: false,
            dpop_signing_alg_values_supported: None,
        },
    };
    check_endpoints(&server_metadata)?;
    Ok(Discovered {
        resource: server.to_string(),
        resource_scopes: None,
        resource_dpop: false,
        server: server_metadata,
    })
}

fn check_endpoints(metadata: &ServerMetadata) -> Result<(), AuthError> {
    secure_url(&metadata.token_endpoint)?;
    for endpoint in
        [&metadata.authorization_endpoint, &metadata.registration_endpoint].into_iter().flatten()
    {
        secure_url(endpoint)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use url::Url;

    use super::{resource_covers, resource_metadata_urls, secure_url, server_metadata_urls};

    #[test]
    fn only_https_or_loopback_urls_carry_authorization() {
        for (url, allowed) in [
            ("https://as.example.com/token", true),
            ("http://localhost:8080/token", true),
            ("http://127.0.0.1/token", true),
            ("http://[::1]:9/token", true),
            ("http://as.example.com/token", false),
            ("http://10.0.0.1/token", false),
            ("ftp://localhost/token", false),
            ("not a url", false),
        ] {
            assert_eq!(secure_url(url).is_ok(), allowed, "{url}");
        }
    }

    #[test]
    fn resource_metadata_is_looked_for_with_the_path_then_at_the_root() {
        for (server, expected) in [
            (
                "https://mcp.example.com/mcp",
                vec![
                    "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
                    "https://mcp.example.com/.well-known/oauth-protected-resource",
                ],
            ),
            (
                "https://mcp.example.com/",
                vec!["https://mcp.example.com/.well-known/oauth-protected-resource"],
            ),
            (
                "http://localhost:9/a/b/",
                vec![
                    "http://localhost:9/.well-known/oauth-protected-resource/a/b",
                    "http://localhost:9/.well-known/oauth-protected-resource",
                ],
            ),
        ] {
            assert_eq!(resource_metadata_urls(&Url::parse(server).unwrap()), expected, "{server}");
        }
    }

    #[test]
    fn server_metadata_is_looked_for_in_the_specified_order() {
        for (issuer, expected) in [
            (
                "https://as.example.com",
                vec![
                    "https://as.example.com/.well-known/oauth-authorization-server",
                    "https://as.example.com/.well-known/openid-configuration",
                ],
            ),
            (
                "https://as.example.com/tenant1",
                vec![
                    "https://as.example.com/.well-known/oauth-authorization-server/tenant1",
                    "https://as.example.com/.well-known/openid-configuration/tenant1",
                    "https://as.example.com/tenant1/.well-known/openid-configuration",
                ],
            ),
        ] {
            assert_eq!(server_metadata_urls(&Url::parse(issuer).unwrap()), expected, "{issuer}");
        }
    }

    #[test]
    fn a_resource_covers_its_own_url_and_those_below_it_only() {
        let server = Url::parse("http://localhost:3000/mcp").unwrap();
        for (resource, covers) in [
            ("http://localhost:3000/mcp", true),
            ("http://localhost:3000/mcp/", true),
            ("http://localhost:3000", true),
            ("http://localhost:3000/", true),
            ("http://localhost:3000/other", false),
            ("http://localhost:3000/mc", false),
            ("http://localhost:3001/mcp", false),
            ("https://evil.example.com/mcp", false),
            ("http://localhost:3000/mcp#x", false),
        ] {
            assert_eq!(resource_covers(resource, &server), covers, "{resource}");
        }
    }
}
