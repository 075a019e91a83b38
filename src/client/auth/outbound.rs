//! Where an authorizer's requests may go. The HTTP client of every discovery, registration and
//! token request, and the rules those requests pass before anything is sent:
//!
//! - every URL is HTTPS, or HTTP on a loopback host ([`secure_url`]);
//! - the issuer binding: a client whose identity names the authorization server it is
//!   registered with ([`ClientIdentity::issuer`](super::ClientIdentity::issuer)) uses that server
//!   only. Discovery that names another is refused, and its credentials (a secret, a signed
//!   assertion) are sent to no token endpoint but one the issuer's own metadata names on the
//!   issuer's origin or an allowed host (RFC 8414 section 3.3 ties the document to the issuer
//!   it was fetched for);
//! - confinement ([`Confinement`], orca's external servers): every URL the MCP server's
//!   challenges and metadata name (and the authorization server's, which the MCP server chose)
//!   is fetched only on the server's own origin, the configured issuer's origin, or an allowed
//!   host; anything else is refused before it is fetched, with a message that names the host
//!   and nothing learnt from it. On the server's own origin, the addresses are checked as well
//!   (`addresses`): for a server that is not on loopback, a loopback, private or link-local
//!   address is refused, for IP literals before the request and for names where the connection
//!   is made (the client's resolver), so that a name that resolves elsewhere later is refused
//!   too. The configured issuer and the allowed hosts are the operator's word: their names may
//!   resolve anywhere. A confined client uses no HTTP proxy, whose address would be the only
//!   one checked.

use url::Url;

use super::AuthError;
use super::addresses::{self, GuardedResolver, Lookup};
use super::discovery::{secure_url, shown};

/// Where the URLs an MCP server names may be fetched, besides its own origin and the
/// configured issuer's: orca's `oauth.allowed_hosts`.
#[derive(Debug, Clone, Default)]
pub struct Confinement {
    /// `host` (any port) or `host:port`; an IPv6 address in brackets.
    pub allowed_hosts: Vec<String>,
}

/// The rule of a confined authorizer.
struct Confined {
    /// The MCP server's URL.
    server: Url,
    /// Whether the server is on loopback (`localhost` or a loopback address): loopback
    /// addresses are then admitted.
    loopback: bool,
    /// Allowed hosts, lowercased, with their port when one is given.
    allowed: Vec<(String, Option<u16>)>,
}

/// The HTTP client of one authorizer, with the rules its requests pass.
pub(crate) struct Outbound {
    /// No redirects followed, 30 s timeout; for a confined authorizer, no proxy and the
    /// guarded resolver.
    pub(crate) http: reqwest::Client,
    /// The authorization server the client's identity is bound to.
    issuer: Option<String>,
    confined: Option<Confined>,
}

/// Two issuer identifiers name the same server: equal, or equal but for a trailing `/` (how a
/// configuration file and a metadata document most often differ).
pub(crate) fn same_issuer(one: &str, other: &str) -> bool {
    one == other || one.trim_end_matches('/') == other.trim_end_matches('/')
}

/// `scheme://host[:port]` of a URL, for messages.
fn origin_shown(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// `host[:port]` of a URL as a refusal names it (the port when the URL has one).
fn host_shown(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    }
}

/// Whether `url` is on loopback by its name: `localhost` or a loopback address.
fn on_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(address)) => address.is_loopback(),
        Some(url::Host::Ipv6(address)) => address.is_loopback(),
        None => false,
    }
}

/// The address of an IP-literal URL.
fn literal(url: &Url) -> Option<std::net::IpAddr> {
    match url.host()? {
        url::Host::Ipv4(address) => Some(address.into()),
        url::Host::Ipv6(address) => Some(address.into()),
        url::Host::Domain(_) => None,
    }
}

impl Outbound {
    /// The client of an authorizer for `server_url`, bound to `issuer` when one is
    /// configured, confined when `confinement` is given.
    ///
    /// # Errors
    ///
    /// [`AuthError::Http`] when the HTTP client cannot be built; [`AuthError::InsecureUrl`]
    /// for an issuer or server that is not a secure URL; [`AuthError::Metadata`] for an
    /// allowed host that is not one.
    pub(crate) fn new(
        server_url: &str,
        issuer: Option<&str>,
        confinement: Option<&Confinement>,
    ) -> Result<Outbound, AuthError> {
        Outbound::with_lookup(server_url, issuer, confinement, addresses::system_lookup())
    }

    /// [`new`](Self::new) with `lookup` resolving names.
    pub(crate) fn with_lookup(
        server_url: &str,
        issuer: Option<&str>,
        confinement: Option<&Confinement>,
        lookup: Lookup,
    ) -> Result<Outbound, AuthError> {
        crate::tls::install();
        let issuer_url = issuer.map(secure_url).transpose()?;
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(std::time::Duration::from_secs(30));
        let confined = match confinement {
            None => None,
            Some(confinement) => {
                let server = Url::parse(server_url)
                    .map_err(|_| AuthError::InsecureUrl { url: shown(server_url) })?;
                let allowed = confinement
                    .allowed_hosts
                    .iter()
                    .map(|entry| addresses::allowed_host(entry))
                    .collect::<Result<Vec<_>, String>>()
                    .map_err(|message| AuthError::Metadata {
                        url: "oauth.allowed_hosts".to_owned(),
                        message,
                    })?;
                let loopback = on_loopback(&server);
                let mut trusted: Vec<String> =
                    allowed.iter().map(|(host, _)| host.clone()).collect();
                trusted.extend(issuer_url.as_ref().and_then(Url::host_str).map(str::to_owned));
                builder = builder.no_proxy().dns_resolver(std::sync::Arc::new(GuardedResolver {
                    trusted,
                    loopback,
                    lookup,
                }));
                Some(Confined { server, loopback, allowed })
            }
        };
        let http = builder
            .build()
            .map_err(|error| AuthError::Http { url: String::new(), message: error.to_string() })?;
        Ok(Outbound { http, issuer: issuer.map(str::to_owned), confined })
    }

    /// The configured authorization server, if the identity is bound to one.
    pub(crate) fn issuer(&self) -> Option<&str> {
        self.issuer.as_deref()
    }

    /// Whether `url` is on an allowed host (and port, when the entry names one).
    fn allowed(&self, url: &Url) -> bool {
        let Some(confined) = &self.confined else { return false };
        let host = url.host_str().unwrap_or_default();
        confined.allowed.iter().any(|(allowed, port)| {
            allowed == host && port.is_none_or(|port| Some(port) == url.port_or_known_default())
        })
    }

    /// Whether `url` is on the configured issuer's origin.
    fn on_issuer(&self, url: &Url) -> bool {
        self.issuer
            .as_deref()
            .and_then(|issuer| Url::parse(issuer).ok())
            .is_some_and(|issuer| issuer.origin() == url.origin())
    }

    /// `url`, checked before a request is sent to it: a secure URL and, for a confined
    /// authorizer, on the server's origin (at an address it may reach, when an IP literal), the
    /// configured issuer's origin, or an allowed host.
    ///
    /// # Errors
    ///
    /// [`AuthError::InsecureUrl`]; [`AuthError::Refused`].
    pub(crate) fn admit(&self, url: &str) -> Result<Url, AuthError> {
        let parsed = secure_url(url)?;
        let Some(confined) = &self.confined else { return Ok(parsed) };
        if self.on_issuer(&parsed) || self.allowed(&parsed) {
            return Ok(parsed);
        }
        if parsed.origin() != confined.server.origin() {
            return Err(AuthError::Refused {
                host: host_shown(&parsed),
                reason: format!(
                    "is not the upstream's origin ({}), its oauth.issuer's, or in oauth.allowed_hosts",
                    host_shown(&confined.server)
                ),
            });
        }
        if let Some(address) = literal(&parsed)
            && !addresses::admitted(address, confined.loopback)
        {
            return Err(address_refused(&host_shown(&parsed)));
        }
        Ok(parsed)
    }

    /// A request to `url` that failed, as an error: a refused resolution is a refusal.
    pub(crate) fn failed(&self, url: &str, error: &reqwest::Error) -> AuthError {
        match addresses::refused_host(error) {
            Some(host) => address_refused(&host),
            None => AuthError::Http { url: shown(url), message: error.to_string() },
        }
    }

    /// The authorization server to use among those a protected resource `named` (in its
    /// order): the first, or for a bound identity the configured one.
    ///
    /// # Errors
    ///
    /// [`AuthError::OtherAuthorizationServer`] when the resource does not name the configured
    /// one; [`AuthError::Metadata`] (about `resource_url`) when it names none.
    pub(crate) fn choose_issuer<'a>(
        &self,
        named: &'a [String],
        resource_url: &str,
    ) -> Result<&'a str, AuthError> {
        let Some(first) = named.first() else {
            return Err(AuthError::Metadata {
                url: shown(resource_url),
                message: "the protected-resource metadata names no authorization server".to_owned(),
            });
        };
        let Some(configured) = &self.issuer else { return Ok(first) };
        named.iter().find(|issuer| same_issuer(issuer, configured)).map(String::as_str).ok_or_else(
            || AuthError::OtherAuthorizationServer {
                named: format!("the authorization server {}", shown(first)),
                configured: configured.clone(),
            },
        )
    }

    /// Whether a bound identity's credentials may go to `token_endpoint`, the endpoint of
    /// `issuer`: the issuer is the configured one, and the endpoint is on its origin or an
    /// allowed host. An identity bound to no issuer may use any.
    ///
    /// # Errors
    ///
    /// [`AuthError::OtherAuthorizationServer`].
    pub(crate) fn check_token_destination(
        &self,
        issuer: &str,
        token_endpoint: &str,
    ) -> Result<(), AuthError> {
        let Some(configured) = &self.issuer else { return Ok(()) };
        if !same_issuer(issuer, configured) {
            return Err(AuthError::OtherAuthorizationServer {
                named: format!("the authorization server {}", shown(issuer)),
                configured: configured.clone(),
            });
        }
        let endpoint = secure_url(token_endpoint)?;
        let issuer_url = secure_url(configured)?;
        if endpoint.origin() != issuer_url.origin() && !self.allowed(&endpoint) {
            return Err(AuthError::OtherAuthorizationServer {
                named: format!("the token endpoint on {}", origin_shown(&endpoint)),
                configured: configured.clone(),
            });
        }
        Ok(())
    }
}

/// The refusal of a host at an address that may not be reached.
fn address_refused(host: &str) -> AuthError {
    AuthError::Refused {
        host: host.to_owned(),
        reason: "is on a loopback, private or link-local address and the upstream is not (list it in oauth.allowed_hosts if it is meant to be reached)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::super::AuthError;
    use super::{Confinement, Outbound, same_issuer};

    fn confined(server: &str, issuer: Option<&str>, allowed: &[&str]) -> Outbound {
        let confinement =
            Confinement { allowed_hosts: allowed.iter().map(|host| (*host).to_owned()).collect() };
        Outbound::new(server, issuer, Some(&confinement)).unwrap()
    }

    #[test]
    fn what_a_server_names_is_fetched_only_on_its_origin_its_issuers_or_an_allowed_host() {
        let remote = "https://mcp.example.com/mcp";
        let local = "http://127.0.0.1:5000/mcp";
        let issuer = Some("https://as.example.com");
        for (server, issuer, allowed, url, admitted) in [
            (remote, None, &[][..], "https://mcp.example.com/.well-known/x", Ok(())),
            (remote, None, &[], "https://evil.example.com/x", Err("is not the upstream's origin")),
            (remote, None, &[], "http://127.0.0.1:9622/admin?confirm=yes", Err("origin")),
            (remote, None, &[], "https://mcp.example.com:8443/x", Err("origin")),
            (remote, issuer, &[], "https://as.example.com/.well-known/x", Ok(())),
            (remote, issuer, &[], "https://as.example.com:8443/token", Err("origin")),
            (remote, None, &["auth.example.com"], "https://auth.example.com:8443/x", Ok(())),
            (remote, None, &["auth.example.com:443"], "https://auth.example.com/x", Ok(())),
            (
                remote,
                None,
                &["auth.example.com:443"],
                "https://auth.example.com:8/x",
                Err("origin"),
            ),
            (remote, None, &["auth.example.com"], "https://a.auth.example.com/x", Err("origin")),
            ("https://10.0.0.5/mcp", None, &[], "https://10.0.0.5/.well-known/x", Err("private")),
            ("https://10.0.0.5/mcp", None, &["10.0.0.5"], "https://10.0.0.5/x", Ok(())),
            (
                "https://[::ffff:a9fe:a9fe]/mcp",
                None,
                &[],
                "https://[::ffff:a9fe:a9fe]/x",
                Err("private"),
            ),
            (local, None, &[], "http://127.0.0.1:5000/.well-known/x", Ok(())),
            (local, None, &[], "http://127.0.0.1:9622/admin", Err("origin")),
            (local, None, &[], "http://localhost:5000/x", Err("origin")),
            (local, None, &["127.0.0.1:9622"], "http://127.0.0.1:9622/x", Ok(())),
        ] {
            match (confined(server, issuer, allowed).admit(url), admitted) {
                (Ok(_), Ok(())) => {}
                (Err(error @ AuthError::Refused { .. }), Err(said)) => {
                    let message = error.to_string();
                    assert!(
                        message.starts_with("refused: ")
                            && message.contains(said)
                            && !message.contains("confirm=yes"),
                        "{url}: {message}"
                    );
                }
                (other, expected) => panic!("{server} {url}: {other:?} instead of {expected:?}"),
            }
        }
        let free = Outbound::new(remote, None, None).unwrap();
        assert!(free.admit("https://anywhere.example/x").is_ok());
        assert!(free.admit("http://anywhere.example/x").is_err(), "https only, off loopback");
    }

    /// A listener on loopback that counts the connections it gets and closes each at once.
    async fn counting_listener() -> (u16, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let count = Arc::new(AtomicUsize::new(0));
        let counted = count.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
        (port, count)
    }

    #[tokio::test]
    async fn a_name_resolving_to_loopback_later_is_refused_when_the_connection_is_made() {
        let (port, connections) = counting_listener().await;
        // Every name resolves to the listener's loopback address, as a rebound name would.
        let lookup: super::Lookup =
            Arc::new(|_host: String| Box::pin(async { Ok(vec!["127.0.0.1:0".parse().unwrap()]) }));
        let get = |server: String, url: String| {
            let lookup = lookup.clone();
            async move {
                let outbound =
                    Outbound::with_lookup(&server, None, Some(&Confinement::default()), lookup)
                        .unwrap();
                outbound.admit(&url).unwrap();
                let error = outbound.http.get(&url).send().await.unwrap_err();
                outbound.failed(&url, &error)
            }
        };
        // The server's own origin passes the name check; its address does not.
        let url = format!("https://mcp.example.test:{port}/.well-known/oauth-protected-resource");
        let refused = get(format!("https://mcp.example.test:{port}/mcp"), url).await;
        assert!(
            matches!(&refused, AuthError::Refused { host, .. } if host == "mcp.example.test"),
            "{refused:?}"
        );
        assert_eq!(connections.load(Ordering::SeqCst), 0, "a connection was made");
        // A server on loopback may be reached there: the listener sees that one.
        let url = format!("http://localhost:{port}/.well-known/oauth-protected-resource");
        let reached = get(format!("http://localhost:{port}/mcp"), url).await;
        assert!(matches!(reached, AuthError::Http { .. }), "{reached:?}");
        assert_eq!(connections.load(Ordering::SeqCst), 1);
    }

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_bound_identity_takes_only_its_issuer_among_those_a_resource_names() {
        let bound =
            Outbound::new("https://mcp.example.com/mcp", Some("https://as.example.com/"), None)
                .unwrap();
        let free = Outbound::new("https://mcp.example.com/mcp", None, None).unwrap();
        let named = strings(&["https://evil.example.com", "https://as.example.com"]);
        assert_eq!(bound.choose_issuer(&named, "https://mcp").unwrap(), "https://as.example.com");
        assert_eq!(free.choose_issuer(&named, "https://mcp").unwrap(), "https://evil.example.com");
        let other = strings(&["https://evil.example.com"]);
        match bound.choose_issuer(&other, "https://mcp") {
            Err(AuthError::OtherAuthorizationServer { named, configured }) => {
                assert_eq!(named, "the authorization server https://evil.example.com/");
                assert_eq!(configured, "https://as.example.com/");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(free.choose_issuer(&[], "https://mcp"), Err(AuthError::Metadata { .. })));
        assert!(same_issuer("https://a.example/t", "https://a.example/t/"));
        assert!(!same_issuer("https://a.example/t", "https://a.example/u"));
    }

    #[test]
    fn a_bound_identitys_credentials_go_only_to_its_issuers_origin() {
        let bound =
            Outbound::new("https://mcp.example.com/mcp", Some("https://as.example.com"), None)
                .unwrap();
        for (issuer, endpoint, allowed) in [
            ("https://as.example.com", "https://as.example.com/oauth/token", true),
            ("https://as.example.com/", "https://as.example.com/token", true),
            ("https://evil.example.com", "https://as.example.com/token", false),
            ("https://as.example.com", "https://evil.example.com/token", false),
            ("https://as.example.com", "https://as.example.com:8443/token", false),
        ] {
            assert_eq!(
                bound.check_token_destination(issuer, endpoint).is_ok(),
                allowed,
                "{issuer} {endpoint}"
            );
        }
        let free = Outbound::new("https://mcp.example.com/mcp", None, None).unwrap();
        assert!(free.check_token_destination("https://x.example", "https://y.example/t").is_ok());
    }
}
