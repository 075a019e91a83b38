//! `http.trusted_proxies`: IP addresses and CIDR ranges (`10.0.0.0/8`, `fd00::/8`, `192.0.2.7`),
//! parsed and checked at load, and matched against a connection's peer address.

use std::fmt;
use std::net::IpAddr;

/// An IP address range: a network address and a prefix length. A plain address is a range of
/// one (`/32` or `/128`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IpRange {
    network: IpAddr,
    prefix: u8,
}

impl IpRange {
    /// Parse `address` or `address/prefix`.
    ///
    /// # Errors
    ///
    /// When the address is not an IPv4 or IPv6 address, the prefix is not a number up to 32
    /// (IPv4) or 128 (IPv6), or the address has bits set past the prefix.
    pub(crate) fn parse(text: &str) -> Result<IpRange, String> {
        let text = text.trim();
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let network: IpAddr = address.parse().map_err(|_| {
            format!("`{text}` is not an IP address or a CIDR range (like 10.0.0.0/8 or fd00::/8)")
        })?;
        let width = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => width,
            Some(prefix) => match prefix.parse::<u8>() {
                Ok(prefix) if prefix <= width => prefix,
                _ => {
                    return Err(format!(
                        "`{text}`: the prefix length must be a number from 0 to {width}"
                    ));
                }
            },
        };
        let range = IpRange { network, prefix };
        if range.masked(network) != bits(network) {
            let canonical = IpRange { network: range.network_address(), prefix };
            return Err(format!(
                "`{text}` has address bits set past the prefix; did you mean `{canonical}`?"
            ));
        }
        Ok(range)
    }

    /// Whether `address` is in this range (an IPv4-mapped IPv6 address counts as its IPv4 one).
    pub(crate) fn contains(&self, address: IpAddr) -> bool {
        let address = address.to_canonical();
        address.is_ipv4() == self.network.is_ipv4() && self.masked(address) == bits(self.network)
    }

    /// The address's bits with those past the prefix cleared.
    fn masked(&self, address: IpAddr) -> u128 {
        let width: u32 = if address.is_ipv4() { 32 } else { 128 };
        let host_bits = width - u32::from(self.prefix);
        let mask = if host_bits >= 128 { 0 } else { u128::MAX << host_bits };
        bits(address) & mask
    }

    fn network_address(&self) -> IpAddr {
        let masked = self.masked(self.network);
        match self.network {
            IpAddr::V4(_) => IpAddr::V4(u32::try_from(masked).unwrap_or_default().into()),
            IpAddr::V6(_) => IpAddr::V6(masked.into()),
        }
    }
}

/// `http.trusted_proxies` validated: every entry parsed, each bad one reported with its index.
pub(super) fn trusted_proxies(
    raw: Option<Vec<String>>,
    file: &str,
    errors: &mut Vec<String>,
) -> Vec<IpRange> {
    let mut ranges = Vec::new();
    for (index, text) in raw.unwrap_or_default().iter().enumerate() {
        match IpRange::parse(text) {
            Ok(range) => ranges.push(range),
            Err(problem) => {
                errors.push(format!("{file}: http.trusted_proxies[{index}]: {problem}"))
            }
        }
    }
    ranges
}

fn bits(address: IpAddr) -> u128 {
    match address {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

impl fmt::Display for IpRange {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = if self.network.is_ipv4() { 32 } else { 128 };
        if self.prefix == width {
            write!(formatter, "{}", self.network)
        } else {
            write!(formatter, "{}/{}", self.network, self.prefix)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(range: &str, inside: &[&str], outside: &[&str]) {
        let parsed = IpRange::parse(range).unwrap();
        for address in inside {
            assert!(parsed.contains(address.parse().unwrap()), "{address} should be in {range}");
        }
        for address in outside {
            assert!(!parsed.contains(address.parse().unwrap()), "{address} is not in {range}");
        }
    }

    #[test]
    fn ranges_hold_the_addresses_under_their_prefix() {
        check("10.0.0.0/8", &["10.0.0.1", "10.255.255.255", "::ffff:10.1.2.3"], &["11.0.0.1"]);
        check("192.0.2.7", &["192.0.2.7"], &["192.0.2.8", "::ffff:192.0.2.8"]);
        check("0.0.0.0/0", &["1.2.3.4", "255.255.255.255"], &["::1"]);
        check("fd00::/8", &["fd12::1"], &["fe80::1", "10.0.0.1"]);
        check("::1", &["::1"], &["::2", "127.0.0.1"]);
        check("::/0", &["2001:db8::1"], &["127.0.0.1"]);
    }

    #[test]
    fn bad_ranges_are_refused_with_the_reason() {
        for (text, expected) in [
            ("proxy.internal", "is not an IP address or a CIDR range"),
            ("10.0.0.0/33", "from 0 to 32"),
            ("fd00::/129", "from 0 to 128"),
            ("10.0.0.0/x", "from 0 to 32"),
            ("10.0.0.1/8", "did you mean `10.0.0.0/8`?"),
            ("fd00::1/8", "did you mean `fd00::/8`?"),
            ("", "is not an IP address"),
        ] {
            let error = IpRange::parse(text).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }
}
