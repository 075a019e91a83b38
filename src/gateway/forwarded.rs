//! The client address a request is counted under by the failed-authentication throttle: the TCP
//! peer, or, when the peer is one of `http.trusted_proxies`, the address the proxies recorded in
//! `X-Forwarded-For` or `Forwarded: for=` (RFC 7239): the right-most one that is not itself a
//! trusted proxy, since everything left of it may have been written by the client.
//!
//! # Design notes
//!
//! `forwarded.rs` finds the client address the throttle counts under: the TCP peer, or, when the
//! peer is in `http.trusted_proxies`, the right-most address of `X-Forwarded-For` or `Forwarded:
//! for=` that is not itself a trusted proxy (an unreadable hop, or the two headers disagreeing,
//! leaves the peer).

use std::net::{IpAddr, SocketAddr};

use axum::http::HeaderMap;
use axum::http::header::{AsHeaderName, FORWARDED};

use crate::config::IpRange;

const X_FORWARDED_FOR: &str = "x-forwarded-for";

/// The client behind `peer`. A peer that is not a trusted proxy is the client, whatever its
/// headers say. Behind a trusted one, the headers are read right to left; when they cannot be
/// read (an `unknown` or obfuscated hop, a missing `for=`), or `X-Forwarded-For` and `Forwarded`
/// disagree (one of them was written by the client and left alone by the proxies), the peer is
/// the client, so that nothing a client writes can move it to another address.
pub(crate) fn client_address(peer: IpAddr, headers: &HeaderMap, trusted: &[IpRange]) -> IpAddr {
    let peer = peer.to_canonical();
    if !is_trusted(peer, trusted) {
        return peer;
    }
    let from_x_forwarded_for = joined(headers, X_FORWARDED_FOR)
        .map(|list| right_most_untrusted(list.split(',').map(parse_address), trusted));
    let from_forwarded = joined(headers, FORWARDED).map(|list| {
        right_most_untrusted(
            split_outside_quotes(&list, ',').into_iter().map(forwarded_for),
            trusted,
        )
    });
    match (from_x_forwarded_for, from_forwarded) {
        (Some(Some(client)), None) | (None, Some(Some(client))) => client,
        (Some(Some(one)), Some(Some(other))) if one == other => one,
        _ => peer,
    }
}

fn is_trusted(address: IpAddr, trusted: &[IpRange]) -> bool {
    trusted.iter().any(|range| range.contains(address))
}

/// Every value of a header, in order, as one comma-separated list (as HTTP defines repeated
/// headers); a value that is not text is kept as an entry that parses as nothing.
fn joined(headers: &HeaderMap, name: impl AsHeaderName) -> Option<String> {
    let values: Vec<&str> =
        headers.get_all(name).iter().map(|value| value.to_str().unwrap_or("?")).collect();
    (!values.is_empty()).then(|| values.join(","))
}

/// The standard walk: from the right, skip the trusted proxies; the first other address is the
/// client. An entry that is no address ends the walk without one; a chain of trusted proxies only
/// yields its left-most entry.
fn right_most_untrusted(
    entries: impl DoubleEndedIterator<Item = Option<IpAddr>>,
    trusted: &[IpRange],
) -> Option<IpAddr> {
    let mut left_most = None;
    for entry in entries.rev() {
        let address = entry?;
        if !is_trusted(address, trusted) {
            return Some(address);
        }
        left_most = Some(address);
    }
    left_most
}

/// An address as proxies write it: `192.0.2.1`, `192.0.2.1:4711`, `2001:db8::1`,
/// `[2001:db8::1]` or `[2001:db8::1]:4711`.
fn parse_address(text: &str) -> Option<IpAddr> {
    let text = text.trim();
    let address = text
        .parse::<IpAddr>()
        .ok()
        .or_else(|| text.parse::<SocketAddr>().ok().map(|socket| socket.ip()))
        .or_else(|| text.strip_prefix('[')?.strip_suffix(']')?.parse().ok())?;
    Some(address.to_canonical())
}

/// The `for=` parameter of one `Forwarded` element (`for=192.0.2.60;proto=http`,
/// `for="[2001:db8:cafe::17]:4711"`); `unknown` and obfuscated identifiers are no address.
fn forwarded_for(element: &str) -> Option<IpAddr> {
    split_outside_quotes(element, ';').into_iter().find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        if !name.trim().eq_ignore_ascii_case("for") {
            return None;
        }
        let value = value.trim();
        let value = match value.strip_prefix('"').and_then(|rest| rest.strip_suffix('"')) {
            Some(quoted) => quoted.replace('\\', ""),
            None => value.to_owned(),
        };
        parse_address(&value)
    })
}

/// `text` split at `separator`, except inside quoted strings.
fn split_outside_quotes(text: &str, separator: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut quoted, mut escaped, mut start) = (false, false, 0);
    for (index, character) in text.char_indices() {
        match character {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            _ if character == separator && !quoted => {
                parts.push(&text[start..index]);
                start = index + character.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(peer: &str, headers: &[(&'static str, &str)], expected: &str) {
        let trusted: Vec<IpRange> = ["10.0.0.0/8", "fd00::/8", "192.0.2.7"]
            .iter()
            .map(|range| IpRange::parse(range).unwrap())
            .collect();
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.append(*name, value.parse().unwrap());
        }
        let client = client_address(peer.parse().unwrap(), &map, &trusted);
        assert_eq!(client, expected.parse::<IpAddr>().unwrap(), "{peer} {headers:?}");
    }

    #[test]
    fn the_client_is_the_right_most_address_that_is_not_a_trusted_proxy() {
        // A peer that is not trusted is the client, whatever it sends.
        check("198.51.100.1", &[], "198.51.100.1");
        check("198.51.100.1", &[("x-forwarded-for", "203.0.113.9")], "198.51.100.1");
        check("198.51.100.1", &[("forwarded", "for=203.0.113.9")], "198.51.100.1");
        check("::ffff:198.51.100.1", &[("x-forwarded-for", "203.0.113.9")], "198.51.100.1");
        // Behind a trusted proxy, with nothing forwarded, the proxy is all that is known.
        check("10.0.0.5", &[], "10.0.0.5");
        check("10.0.0.5", &[("x-forwarded-for", "203.0.113.9")], "203.0.113.9");
        check("::ffff:10.0.0.5", &[("x-forwarded-for", "203.0.113.9")], "203.0.113.9");
        // What the client wrote itself sits left of what the proxy added, and is passed over.
        check("10.0.0.5", &[("x-forwarded-for", "1.1.1.1, 203.0.113.9")], "203.0.113.9");
        check("10.0.0.5", &[("x-forwarded-for", "1.1.1.1, 203.0.113.9, 10.0.0.6")], "203.0.113.9");
        check(
            "10.0.0.5",
            &[("x-forwarded-for", "1.1.1.1"), ("x-forwarded-for", "203.0.113.9, 192.0.2.7")],
            "203.0.113.9",
        );
        check("10.0.0.5", &[("x-forwarded-for", "10.0.0.9, 10.0.0.6")], "10.0.0.9");
        check("10.0.0.5", &[("x-forwarded-for", "203.0.113.9:4711")], "203.0.113.9");
        check("10.0.0.5", &[("x-forwarded-for", "[2001:db8::1]:4711")], "2001:db8::1");
        check("fd00::5", &[("x-forwarded-for", "2001:db8::1")], "2001:db8::1");
        // RFC 7239.
        check("10.0.0.5", &[("forwarded", "for=203.0.113.9;proto=https")], "203.0.113.9");
        check(
            "10.0.0.5",
            &[("forwarded", r#"for="[2001:db8:cafe::17]:4711""#)],
            "2001:db8:cafe::17",
        );
        check(
            "10.0.0.5",
            &[("forwarded", "for=1.1.1.1, For=203.0.113.9;by=10.0.0.5, for=10.0.0.6")],
            "203.0.113.9",
        );
        check(
            "10.0.0.5",
            &[("forwarded", r#"for=1.1.1.1;host="a,b", for=203.0.113.9"#)],
            "203.0.113.9",
        );
        // Unreadable hops and disagreeing headers leave the peer as the client.
        check("10.0.0.5", &[("x-forwarded-for", "203.0.113.9, unknown")], "10.0.0.5");
        check("10.0.0.5", &[("forwarded", "for=unknown")], "10.0.0.5");
        check("10.0.0.5", &[("forwarded", "for=_hidden")], "10.0.0.5");
        check("10.0.0.5", &[("forwarded", "proto=https")], "10.0.0.5");
        check("10.0.0.5", &[("x-forwarded-for", "")], "10.0.0.5");
        check(
            "10.0.0.5",
            &[("x-forwarded-for", "203.0.113.9"), ("forwarded", "for=1.1.1.1")],
            "10.0.0.5",
        );
        check(
            "10.0.0.5",
            &[("x-forwarded-for", "203.0.113.9"), ("forwarded", "for=203.0.113.9")],
            "203.0.113.9",
        );
    }
}
