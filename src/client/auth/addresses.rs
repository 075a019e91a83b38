//! The address side of confinement (`outbound`): which IP addresses a URL a remote party named
//! may be fetched on, and the DNS resolver that checks the addresses a name resolves to when the
//! connection is made, so that a name that passed every check when it was read and resolves to
//! a private address later is refused too. An IP literal never reaches a resolver (reqwest
//! connects to it directly): `outbound` checks literals with [`admitted`] before the request.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use futures::future::BoxFuture;

/// Whether a remote party's URL may be fetched on `address`: a public address, or a loopback
/// one when `loopback` (the upstream itself is on loopback). Private, link-local,
/// shared (100.64.0.0/10), unspecified, multicast, documentation and reserved addresses never,
/// nor IPv6 addresses that carry an IPv4 one that is not admitted (mapped, NAT64, 6to4).
pub(crate) fn admitted(address: IpAddr, loopback: bool) -> bool {
    match address {
        IpAddr::V4(v4) => v4_admitted(v4, loopback),
        IpAddr::V6(v6) => {
            if let Some(v4) = embedded_v4(v6) {
                return v4_admitted(v4, loopback);
            }
            if v6.is_loopback() {
                return loopback;
            }
            let first = v6.segments()[0];
            !(v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00 // unique local, fc00::/7
                || (first & 0xffc0) == 0xfe80 // link-local, fe80::/10
                || (first & 0xffc0) == 0xfec0 // site-local, fec0::/10
                || (first == 0x2001 && v6.segments()[1] == 0x0db8)) // documentation
        }
    }
}

fn v4_admitted(v4: Ipv4Addr, loopback: bool) -> bool {
    if v4.is_loopback() {
        return loopback;
    }
    let [a, b, c, _] = v4.octets();
    !(v4.is_private()
        || v4.is_link_local()
        || v4.is_unspecified()
        || v4.is_broadcast()
        || v4.is_multicast()
        || v4.is_documentation()
        || a == 0
        || a >= 240
        || (a == 100 && (64..128).contains(&b)) // shared address space, 100.64.0.0/10
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (18..20).contains(&b))) // benchmarking, 198.18.0.0/15
}

/// The IPv4 address an IPv6 one carries: IPv4-mapped (`::ffff:a.b.c.d`), the NAT64 prefix
/// (`64:ff9b::/96`), 6to4 (`2002:AABB:CCDD::/48`).
fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = v6.segments();
    let from = |high: u16, low: u16| {
        let [a, b] = high.to_be_bytes();
        let [c, d] = low.to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    };
    if s[0] == 0x0064 && s[1] == 0xff9b && s[2..6].iter().all(|segment| *segment == 0) {
        return Some(from(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return Some(from(s[1], s[2]));
    }
    None
}

/// A name resolved to an address [`admitted`] refuses.
#[derive(Debug)]
pub(crate) struct RefusedAddress {
    pub(crate) host: String,
}

impl std::fmt::Display for RefusedAddress {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{} resolves to an address that may not be reached", self.host)
    }
}

impl std::error::Error for RefusedAddress {}

/// How names are turned into addresses: the system's resolver, or a test's.
pub(crate) type Lookup =
    Arc<dyn Fn(String) -> BoxFuture<'static, std::io::Result<Vec<SocketAddr>>> + Send + Sync>;

/// The system's resolver (`getaddrinfo` through tokio).
pub(crate) fn system_lookup() -> Lookup {
    Arc::new(|host: String| {
        Box::pin(async move { Ok(tokio::net::lookup_host((host.as_str(), 0)).await?.collect()) })
    })
}

/// The resolver of a confined authorizer's HTTP client: every name is resolved, and a name
/// that is not `trusted` (an allowed host, the configured issuer's) is refused when any of its
/// addresses is not [`admitted`].
pub(crate) struct GuardedResolver {
    pub(crate) trusted: Vec<String>,
    pub(crate) loopback: bool,
    pub(crate) lookup: Lookup,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_ascii_lowercase();
        let trusted = self.trusted.contains(&host);
        let loopback = self.loopback;
        let lookup = (self.lookup)(host.clone());
        Box::pin(async move {
            let addresses = lookup.await?;
            if !trusted && addresses.iter().any(|address| !admitted(address.ip(), loopback)) {
                return Err(
                    Box::new(RefusedAddress { host }) as Box<dyn std::error::Error + Send + Sync>
                );
            }
            Ok(Box::new(addresses.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The host a refused resolution was for, somewhere in `error`'s chain of sources.
pub(crate) fn refused_host(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(refused) = error.downcast_ref::<RefusedAddress>() {
            return Some(refused.host.clone());
        }
        current = error.source();
    }
    None
}

/// An `oauth.allowed_hosts` entry: `host` (any port) or `host:port`, an IPv6 address in
/// brackets; the host lowercased as URLs hold it.
///
/// # Errors
///
/// What is wrong with the entry.
pub(crate) fn allowed_host(entry: &str) -> Result<(String, Option<u16>), String> {
    let entry = entry.trim();
    if entry.is_empty() || entry.contains(['/', '?', '#', '@', '*']) {
        return Err(format!("`{entry}` is not a host or host:port (no scheme, path or wildcard)"));
    }
    let (host, port) = match entry.strip_prefix('[') {
        Some(rest) => {
            let (inside, after) =
                rest.split_once(']').ok_or_else(|| format!("`{entry}` has no closing `]`"))?;
            (format!("[{inside}]"), after.strip_prefix(':'))
        }
        None => match entry.rsplit_once(':') {
            Some((host, port)) => (host.to_owned(), Some(port)),
            None => (entry.to_owned(), None),
        },
    };
    let port = match port {
        Some(port) => Some(
            port.parse::<u16>()
                .ok()
                .filter(|port| *port > 0)
                .ok_or_else(|| format!("`{entry}`: `{port}` is not a port"))?,
        ),
        None if entry.starts_with('[') && !entry.ends_with(']') => {
            return Err(format!("`{entry}` is not a host or host:port"));
        }
        None => None,
    };
    if host.is_empty() {
        return Err(format!("`{entry}` is not a host or host:port"));
    }
    let parsed = url::Host::parse(&host).map_err(|_| format!("`{entry}` is not a host name"))?;
    Ok((parsed.to_string(), port))
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, SocketAddr};
    use std::sync::Arc;

    use super::{GuardedResolver, admitted, allowed_host, refused_host};

    #[test]
    fn only_public_addresses_are_admitted_and_loopback_only_for_a_loopback_upstream() {
        for (address, remote, local) in [
            ("93.184.216.34", true, true),
            ("2606:4700::1111", true, true),
            ("127.0.0.1", false, true),
            ("127.9.9.9", false, true),
            ("::1", false, true),
            ("::ffff:127.0.0.1", false, true),
            ("10.0.0.1", false, false),
            ("172.16.5.4", false, false),
            ("192.168.1.1", false, false),
            ("169.254.169.254", false, false),
            ("100.64.0.1", false, false),
            ("0.0.0.0", false, false),
            ("255.255.255.255", false, false),
            ("224.0.0.1", false, false),
            ("192.0.2.1", false, false),
            ("198.18.0.1", false, false),
            ("::", false, false),
            ("fd00::1", false, false),
            ("fe80::1", false, false),
            ("::ffff:10.0.0.1", false, false),
            ("::ffff:169.254.169.254", false, false),
            ("64:ff9b::a9fe:a9fe", false, false),
            ("2002:a9fe:a9fe::1", false, false),
            ("2001:db8::1", false, false),
        ] {
            let address: IpAddr = address.parse().unwrap();
            assert_eq!(admitted(address, false), remote, "{address} for a remote upstream");
            assert_eq!(admitted(address, true), local, "{address} for a loopback upstream");
        }
    }

    #[test]
    fn allowed_hosts_are_a_host_or_a_host_and_port() {
        for (entry, expected) in [
            ("auth.example.com", Ok(("auth.example.com", None))),
            ("Auth.Example.COM:8443", Ok(("auth.example.com", Some(8443)))),
            ("127.0.0.1:9000", Ok(("127.0.0.1", Some(9000)))),
            ("[::1]:9000", Ok(("[::1]", Some(9000)))),
            ("[::1]", Ok(("[::1]", None))),
            ("https://auth.example.com", Err("not")),
            ("auth.example.com/path", Err("not a host")),
            ("*.example.com", Err("wildcard")),
            ("auth.example.com:x", Err("not a port")),
            ("auth.example.com:0", Err("not a port")),
            ("", Err("not a host")),
            ("[::1", Err("closing")),
        ] {
            match (allowed_host(entry), expected) {
                (Ok((host, port)), Ok((want_host, want_port))) => {
                    assert_eq!((host.as_str(), port), (want_host, want_port), "{entry}");
                }
                (Err(error), Err(said)) => assert!(error.contains(said), "{entry}: {error}"),
                (other, expected) => panic!("{entry}: {other:?} instead of {expected:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_name_is_refused_when_it_resolves_to_an_address_that_may_not_be_reached() {
        use reqwest::dns::Resolve as _;
        let resolver = |trusted: &[&str], loopback: bool| GuardedResolver {
            trusted: trusted.iter().map(|host| (*host).to_owned()).collect(),
            loopback,
            lookup: Arc::new(|host: String| {
                Box::pin(async move {
                    let address: SocketAddr = match host.as_str() {
                        "public.example" => "93.184.216.34:0",
                        "metadata.example" => "169.254.169.254:0",
                        _ => "127.0.0.1:0",
                    }
                    .parse()
                    .unwrap();
                    Ok(vec![address])
                })
            }),
        };
        for (name, trusted, loopback, resolves) in [
            ("public.example", &[][..], false, true),
            ("metadata.example", &[][..], false, false),
            ("metadata.example", &[][..], true, false),
            ("rebound.example", &[][..], false, false),
            ("rebound.example", &[][..], true, true),
            ("metadata.example", &["metadata.example"][..], false, true),
        ] {
            let result = resolver(trusted, loopback).resolve(name.parse().unwrap()).await;
            match result {
                Ok(_) => assert!(resolves, "{name} resolved"),
                Err(error) => {
                    assert!(!resolves, "{name}: {error}");
                    assert_eq!(refused_host(error.as_ref()).as_deref(), Some(name));
                }
            }
        }
    }
}
