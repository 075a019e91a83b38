//! Semantic hints for columns: what a column's values mean (e-mail addresses, phone numbers,
//! URLs, IP addresses, identifiers, coordinates, amounts of money, points in time), guessed
//! from the column name, its PostgreSQL type and a sample of its values, so that the
//! data-provider server can describe a table to a client better than the bare types do.
//!
//! [`semantic_hint`] weighs the evidence in this order:
//!
//! 1. A type that says it all: `inet`/`cidr` is an IP address, `money` an amount of money,
//!    `uuid` an identifier, the date and time types a timestamp, `point` (and PostGIS point
//!    geometries) coordinates. Booleans, JSON, arrays and types this module does not know give
//!    no hint.
//! 2. For text columns (and when the type is not known), the sampled values: when at least 80 %
//!    of the non-empty samples match one pattern, that pattern is the hint, whatever the name.
//! 3. The column name, when the type fits the meaning: `email`, `contact_email`; `phone`,
//!    `tel`, `mobile`, `fax`; `url`, `website`, `homepage`, `link`; `ip`, `client_ip`; `id` and
//!    `*_id`; `lat`/`latitude`/`lon`/`lng`/`longitude` with a numeric type (and samples within
//!    range); `price`, `amount`, `total`, `cost`, `balance`, `salary` with a numeric type;
//!    `*_at`, `*_date`, `*_time`, `created`, `updated`.
//!
//! The hints are advisory: nothing is enforced on their basis.
//!
//! # Design notes
//!
//! `hints.rs` (semantic hints of a column), `pii.rs` (PII detectors and per-column confidence) and
//! `time_range.rs` (instants, durations and windows, absolute or relative) are pure functions;
//! `substrait/` turns Substrait JSON plans into one `SELECT`: `mod.rs` holds `plan_to_sql`, the
//! choice of the root and the refusal of unsupported relations; `relations.rs` folds each relation
//! into a `SELECT` level or a subquery and renders the levels; `expressions.rs` translates field
//! references and functions; `literals.rs` literals and types; `fragments.rs` SQL fragments with
//! their precedence and quoting; `json.rs` the lenient protobuf-JSON access and error texts.

use std::fmt;

use chrono::{DateTime, NaiveDate, NaiveDateTime};
use serde::{Deserialize, Serialize};

use super::pii::{Locale, column_words, is_domain_name, is_email, is_ipv4, is_ipv6, is_phone};

/// What the values of a column mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Semantic {
    /// E-mail addresses.
    Email,
    /// Telephone numbers.
    Phone,
    /// URLs.
    Url,
    /// IP addresses or networks.
    Ip,
    /// Identifiers of rows (keys, references, UUIDs).
    Id,
    /// Geographic coordinates (a latitude, a longitude or both).
    LatLon,
    /// Amounts of money.
    Currency,
    /// Points in time (timestamps, dates, times of day).
    Timestamp,
}

impl Semantic {
    /// The lowercase name of the hint, as it appears in JSON (`email`, `latlon`, ...).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Semantic::Email => "email",
            Semantic::Phone => "phone",
            Semantic::Url => "url",
            Semantic::Ip => "ip",
            Semantic::Id => "id",
            Semantic::LatLon => "latlon",
            Semantic::Currency => "currency",
            Semantic::Timestamp => "timestamp",
        }
    }
}

impl fmt::Display for Semantic {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// The share of non-empty samples that must match a pattern for the values to give the hint.
const VALUE_SHARE_THRESHOLD: f64 = 0.8;

/// Guesses what a column's values mean from the column name, its type as PostgreSQL's
/// `format_type` prints it (`text`, `character varying(40)`, `numeric(10,2)`,
/// `timestamp with time zone`, ...; an empty string when unknown) and sampled values in their
/// text forms (empty strings count as nulls). The rules are described in the module
/// documentation. Returns `None` when nothing fits.
#[must_use]
pub fn semantic_hint(
    column_name: &str,
    pg_type: &str,
    sampled_values: &[&str],
) -> Option<Semantic> {
    let class = type_class(pg_type);
    match class {
        TypeClass::Network => return Some(Semantic::Ip),
        TypeClass::Money => return Some(Semantic::Currency),
        TypeClass::Uuid => return Some(Semantic::Id),
        TypeClass::Temporal => return Some(Semantic::Timestamp),
        TypeClass::Point => return Some(Semantic::LatLon),
        TypeClass::Other => return None,
        TypeClass::Unknown
        | TypeClass::Text
        | TypeClass::Integer
        | TypeClass::Decimal
        | TypeClass::Float => {}
    }
    let samples: Vec<&str> =
        sampled_values.iter().map(|value| value.trim()).filter(|value| !value.is_empty()).collect();
    if matches!(class, TypeClass::Text | TypeClass::Unknown)
        && let Some(hint) = hint_from_values(&samples)
    {
        return Some(hint);
    }
    hint_from_name(&column_words(column_name), class, &samples)
}

/// What a PostgreSQL type says about its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TypeClass {
    /// No type was given.
    Unknown,
    Text,
    Integer,
    Decimal,
    Float,
    Money,
    Uuid,
    Network,
    Temporal,
    Point,
    /// Booleans, JSON, arrays, ranges, user-defined types and anything else.
    Other,
}

/// Classifies a type name as `format_type` prints it.
fn type_class(pg_type: &str) -> TypeClass {
    let lower = pg_type.trim().to_ascii_lowercase();
    if lower.is_empty() {
        return TypeClass::Unknown;
    }
    if lower.ends_with("[]") {
        return TypeClass::Other;
    }
    if (lower.starts_with("geometry") || lower.starts_with("geography")) && lower.contains("point")
    {
        return TypeClass::Point;
    }
    // Drop type modifiers (`(40)`, `(10,2)`, `(3)`), quotes and a schema qualifier.
    let mut base = String::with_capacity(lower.len());
    let mut depth = 0_usize;
    for c in lower.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            '"' => {}
            _ if depth == 0 => base.push(c),
            _ => {}
        }
    }
    let base = base.split_whitespace().collect::<Vec<_>>().join(" ");
    let base = match base.rsplit_once('.') {
        Some((_, name)) if !base.contains(' ') => name.to_owned(),
        _ => base,
    };
    match base.as_str() {
        "text" | "character varying" | "varchar" | "character" | "char" | "bpchar" | "citext"
        | "name" => TypeClass::Text,
        "smallint" | "integer" | "bigint" | "int" | "int2" | "int4" | "int8" | "smallserial"
        | "serial" | "bigserial" => TypeClass::Integer,
        "numeric" | "decimal" => TypeClass::Decimal,
        "real" | "double precision" | "float4" | "float8" | "float" => TypeClass::Float,
        "money" => TypeClass::Money,
        "uuid" => TypeClass::Uuid,
        "inet" | "cidr" => TypeClass::Network,
        "point" => TypeClass::Point,
        "date" | "timestamptz" | "timetz" => TypeClass::Temporal,
        other
            if other.starts_with("timestamp") || other.starts_with("time ") || other == "time" =>
        {
            TypeClass::Temporal
        }
        _ => TypeClass::Other,
    }
}

// ---------------------------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------------------------

/// A test of one sampled value against a pattern.
type ValueCheck = fn(&str) -> bool;

/// The hint the sampled values give on their own, checked in a fixed order from the most to
/// the least distinctive pattern.
fn hint_from_values(samples: &[&str]) -> Option<Semantic> {
    let checks: [(Semantic, ValueCheck); 8] = [
        (Semantic::Email, is_email),
        (Semantic::Url, looks_like_url),
        (Semantic::Ip, looks_like_ip),
        (Semantic::Id, looks_like_uuid),
        (Semantic::Timestamp, looks_like_timestamp),
        (Semantic::LatLon, looks_like_coordinate_pair),
        (Semantic::Currency, looks_like_money_text),
        (Semantic::Phone, |value| is_phone(value, Locale::Auto)),
    ];
    checks
        .into_iter()
        .find(|(_, check)| share(samples, *check) >= VALUE_SHARE_THRESHOLD)
        .map(|(semantic, _)| semantic)
}

/// The fraction of samples `check` accepts; 0 without samples.
fn share(samples: &[&str], check: impl Fn(&str) -> bool) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let matching = samples.iter().filter(|sample| check(sample)).count();
    matching as f64 / samples.len() as f64
}

/// An absolute URL with an `http`, `https` or `ftp` scheme and a host, or a `www.` address.
fn looks_like_url(value: &str) -> bool {
    if value.chars().any(char::is_whitespace) {
        return false;
    }
    let lower = value.to_ascii_lowercase();
    let rest = ["https://", "http://", "ftp://"]
        .iter()
        .find_map(|scheme| lower.strip_prefix(scheme))
        .or_else(|| lower.starts_with("www.").then_some(lower.as_str()));
    let Some(rest) = rest else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_and_port = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    if host_and_port.starts_with('[') {
        return host_and_port
            .split_once(']')
            .is_some_and(|(address, _)| is_ipv6(address.trim_start_matches('[')));
    }
    let host = host_and_port.split_once(':').map_or(host_and_port, |(host, _)| host);
    host == "localhost" || is_ipv4(host) || is_domain_name(host)
}

/// An IPv4 or IPv6 address, optionally with a network prefix length (`10.0.0.0/8`).
fn looks_like_ip(value: &str) -> bool {
    let (address, prefix) = match value.split_once('/') {
        Some((address, prefix)) => (address, Some(prefix)),
        None => (value, None),
    };
    let maximum = if is_ipv4(address) {
        32
    } else if is_ipv6(address) {
        128
    } else {
        return false;
    };
    prefix.is_none_or(|prefix| {
        !prefix.is_empty()
            && prefix.len() <= 3
            && prefix.bytes().all(|byte| byte.is_ascii_digit())
            && prefix.parse::<u32>().is_ok_and(|length| length <= maximum)
    })
}

/// A UUID in its hyphenated form, optionally in braces.
fn looks_like_uuid(value: &str) -> bool {
    let value = value.strip_prefix('{').and_then(|inner| inner.strip_suffix('}')).unwrap_or(value);
    value.len() == 36
        && value.bytes().enumerate().all(|(index, byte)| match index {
            8 | 13 | 18 | 23 => byte == b'-',
            _ => byte.is_ascii_hexdigit(),
        })
}

/// A date or timestamp in ISO form (as PostgreSQL prints them), RFC 3339, or a German date
/// (`22.11.2026`).
fn looks_like_timestamp(value: &str) -> bool {
    let bytes = value.as_bytes();
    let iso_start = bytes.len() >= 10
        && bytes[..4].iter().all(u8::is_ascii_digit)
        && bytes[4] == b'-'
        && bytes[7] == b'-';
    if iso_start {
        if bytes.len() == 10 {
            return NaiveDate::parse_from_str(value, "%Y-%m-%d").is_ok();
        }
        return DateTime::parse_from_rfc3339(value).is_ok()
            || DateTime::parse_from_str(value, "%Y-%m-%d %H:%M:%S%.f%#z").is_ok()
            || NaiveDateTime::parse_from_str(value, "%Y-%m-%d %H:%M:%S%.f").is_ok()
            || NaiveDateTime::parse_from_str(value, "%Y-%m-%dT%H:%M:%S%.f").is_ok();
    }
    bytes.len() == 10
        && bytes[2] == b'.'
        && bytes[5] == b'.'
        && NaiveDate::parse_from_str(value, "%d.%m.%Y").is_ok()
}

/// Two decimal numbers separated by a comma, optionally in parentheses, that can be a latitude
/// and a longitude in either order (`52.5200, 13.4050`, `(13.405,52.52)`).
fn looks_like_coordinate_pair(value: &str) -> bool {
    let inner = value.strip_prefix('(').and_then(|inner| inner.strip_suffix(')')).unwrap_or(value);
    let Some((first, second)) = inner.split_once(',') else {
        return false;
    };
    let (Some(first), Some(second)) = (decimal_number(first.trim()), decimal_number(second.trim()))
    else {
        return false;
    };
    let (first, second) = (first.abs(), second.abs());
    first <= 180.0 && second <= 180.0 && (first <= 90.0 || second <= 90.0)
}

/// A number written with a decimal point (`52.52`, `-0.1278`).
fn decimal_number(text: &str) -> Option<f64> {
    let unsigned = text.strip_prefix('-').unwrap_or(text);
    let (whole, fraction) = unsigned.split_once('.')?;
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|byte| byte.is_ascii_digit());
    (digits(whole) && digits(fraction)).then(|| text.parse().ok()).flatten()
}

/// A plain number (`12`, `-3.5`).
fn plain_number(text: &str) -> Option<f64> {
    let unsigned = text.strip_prefix('-').unwrap_or(text);
    let well_formed = !unsigned.is_empty()
        && !unsigned.starts_with('.')
        && !unsigned.ends_with('.')
        && unsigned.bytes().all(|byte| byte.is_ascii_digit() || byte == b'.')
        && unsigned.matches('.').count() <= 1;
    well_formed.then(|| text.parse().ok()).flatten()
}

/// An amount with a currency sign or code: `$12.50`, `12,50 €`, `EUR 1.299,00`, `-£3`.
fn looks_like_money_text(value: &str) -> bool {
    let unsigned = value.strip_prefix('-').unwrap_or(value).trim();
    let symbols = ['$', '€', '£', '¥', '₹'];
    let amount = unsigned
        .strip_prefix(symbols)
        .or_else(|| unsigned.strip_suffix(symbols))
        .or_else(|| {
            let (code, rest) = unsigned.split_once(' ')?;
            is_currency_code(code).then_some(rest)
        })
        .or_else(|| {
            let (rest, code) = unsigned.rsplit_once(' ')?;
            is_currency_code(code).then_some(rest)
        });
    let Some(amount) = amount.map(str::trim) else {
        return false;
    };
    let bytes = amount.as_bytes();
    !bytes.is_empty()
        && bytes[0].is_ascii_digit()
        && bytes[bytes.len() - 1].is_ascii_digit()
        && bytes.iter().all(|byte| byte.is_ascii_digit() || matches!(byte, b'.' | b',' | b'\''))
        && !bytes.windows(2).any(|pair| !pair[0].is_ascii_digit() && !pair[1].is_ascii_digit())
}

/// Three capital ASCII letters, like an ISO 4217 currency code.
fn is_currency_code(text: &str) -> bool {
    text.len() == 3 && text.bytes().all(|byte| byte.is_ascii_uppercase())
}

// ---------------------------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------------------------

/// Trailing words that qualify the word before them rather than carrying the meaning
/// (`email_address`, `phone_number`, `price_eur`, `amount_cents`).
const QUALIFIERS: &[&str] = &[
    "address", "addr", "number", "no", "num", "nr", "value", "text", "str", "string", "raw",
    "cents", "cent", "usd", "eur", "gbp", "chf", "jpy", "net", "gross", "deg", "degrees", "e6",
    "e7",
];

const EMAIL_WORDS: &[&str] = &["email", "emails", "mail", "emailaddress", "mailaddress"];
const PHONE_WORDS: &[&str] = &[
    "phone",
    "phones",
    "telephone",
    "tel",
    "mobile",
    "mobil",
    "fax",
    "cell",
    "cellphone",
    "telefon",
    "handy",
    "phonenumber",
    "msisdn",
];
const URL_WORDS: &[&str] =
    &["url", "urls", "uri", "website", "homepage", "link", "links", "href", "web", "weburl"];
const IP_WORDS: &[&str] = &["ip", "ipaddr", "ipaddress", "ipv4", "ipv6"];
const ID_WORDS: &[&str] = &["id", "uuid", "guid", "pk"];
const LATITUDE_WORDS: &[&str] = &["lat", "latitude", "breitengrad"];
const LONGITUDE_WORDS: &[&str] = &["lon", "lng", "long", "longitude", "laengengrad"];
const COORDINATE_WORDS: &[&str] =
    &["latlon", "latlng", "latlong", "lonlat", "lnglat", "coordinates", "coords", "geopoint"];
const CURRENCY_WORDS: &[&str] = &[
    "price", "prices", "amount", "amounts", "total", "subtotal", "cost", "costs", "balance",
    "salary", "salaries", "fee", "fees", "revenue", "wage", "wages", "income", "payment", "budget",
    "charge", "tax", "spend", "earnings", "profit", "turnover", "refund", "tip", "preis", "betrag",
    "gehalt", "umsatz",
];
const TIME_LAST_WORDS: &[&str] =
    &["at", "date", "time", "timestamp", "ts", "datetime", "dt", "datum", "zeit"];
const TIME_NAMES: &[&str] = &[
    "created",
    "updated",
    "modified",
    "deleted",
    "timestamp",
    "birthday",
    "birthdate",
    "dob",
    "expires",
    "expiry",
];

/// The hint a column name gives, when the type fits the meaning.
fn hint_from_name(words: &[String], class: TypeClass, samples: &[&str]) -> Option<Semantic> {
    let last = words.last()?.as_str();
    let head = head_word(words);
    let unknown = class == TypeClass::Unknown;
    let textual = matches!(class, TypeClass::Text) || unknown;
    let integer = matches!(class, TypeClass::Integer) || unknown;
    let numeric =
        matches!(class, TypeClass::Integer | TypeClass::Decimal | TypeClass::Float) || unknown;

    if ID_WORDS.contains(&last)
        && (textual || matches!(class, TypeClass::Integer | TypeClass::Decimal))
    {
        return Some(Semantic::Id);
    }
    let past_participle_on =
        last == "on" && words.len() >= 2 && words[words.len() - 2].ends_with("ed");
    let named_like_time = (words.len() > 1 && TIME_LAST_WORDS.contains(&last))
        || past_participle_on
        || (words.len() == 1 && (TIME_NAMES.contains(&last) || matches!(last, "date" | "time")));
    if named_like_time && (textual || integer) {
        return Some(Semantic::Timestamp);
    }
    if textual && (EMAIL_WORDS.contains(&head) || head.ends_with("email")) {
        return Some(Semantic::Email);
    }
    if (textual || integer) && (PHONE_WORDS.contains(&head) || head.ends_with("phone")) {
        return Some(Semantic::Phone);
    }
    if textual && (URL_WORDS.contains(&head) || (head.ends_with("url") && head != "curl")) {
        return Some(Semantic::Url);
    }
    if textual && IP_WORDS.contains(&head) {
        return Some(Semantic::Ip);
    }
    let latitude = LATITUDE_WORDS.contains(&head);
    let longitude = LONGITUDE_WORDS.contains(&head) && (head != "long" || !textual);
    if (latitude || longitude) && (numeric || textual) {
        let limit = if latitude { 90.0 } else { 180.0 };
        let in_range =
            |sample: &str| plain_number(sample).is_some_and(|number| number.abs() <= limit);
        if samples.iter().all(|sample| in_range(sample)) {
            return Some(Semantic::LatLon);
        }
    }
    if textual && COORDINATE_WORDS.contains(&head) {
        return Some(Semantic::LatLon);
    }
    if CURRENCY_WORDS.contains(&head) {
        let money_text =
            |sample: &str| looks_like_money_text(sample) || plain_number(sample).is_some();
        if (numeric && !unknown) || (textual && samples.iter().all(|sample| money_text(sample))) {
            return Some(Semantic::Currency);
        }
    }
    None
}

/// The last word of a name once trailing qualifiers are dropped (`email_address` → `email`); a
/// name that is only a qualifier keeps it (`address`).
fn head_word(words: &[String]) -> &str {
    let mut end = words.len();
    while end > 1 && QUALIFIERS.contains(&words[end - 1].as_str()) {
        end -= 1;
    }
    words.get(end.saturating_sub(1)).map_or("", String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::Config;

    /// Checks the hint for a column.
    fn check(column_name: &str, pg_type: &str, values: &[&str], expected: Option<Semantic>) {
        assert_eq!(
            semantic_hint(column_name, pg_type, values),
            expected,
            "semantic_hint({column_name:?}, {pg_type:?}, {values:?})"
        );
    }

    #[test]
    fn hints_combine_the_name_the_type_and_the_values() {
        use Semantic::{Currency, Email, Id, Ip, LatLon, Phone, Timestamp, Url};
        let cases: &[(&str, &str, &[&str], Option<Semantic>)] = &[
            // Types that decide on their own.
            ("client", "inet", &[], Some(Ip)),
            ("network", "cidr", &["10.0.0.0/8"], Some(Ip)),
            ("x", "money", &[], Some(Currency)),
            ("external_ref", "uuid", &[], Some(Id)),
            ("happened", "timestamp with time zone", &[], Some(Timestamp)),
            ("happened", "timestamp(3) without time zone", &[], Some(Timestamp)),
            ("day", "date", &[], Some(Timestamp)),
            ("opens", "time without time zone", &[], Some(Timestamp)),
            ("position", "point", &[], Some(LatLon)),
            ("shape", "geometry(Point,4326)", &[], Some(LatLon)),
            // Names, with a type that fits.
            ("email", "text", &[], Some(Email)),
            ("e_mail", "character varying(255)", &[], Some(Email)),
            ("contact_email", "citext", &[], Some(Email)),
            ("email_address", "text", &[], Some(Email)),
            ("phone", "text", &[], Some(Phone)),
            ("tel", "character varying(40)", &[], Some(Phone)),
            ("mobile_number", "text", &[], Some(Phone)),
            ("fax", "character varying(24)", &[], Some(Phone)),
            ("website", "text", &["example.com"], Some(Url)),
            ("homepage", "text", &[], Some(Url)),
            ("imageUrl", "text", &[], Some(Url)),
            ("ip_address", "text", &[], Some(Ip)),
            ("client_ip", "character varying(45)", &[], Some(Ip)),
            ("id", "integer", &[], Some(Id)),
            ("customer_id", "bigint", &[], Some(Id)),
            ("customerId", "text", &[], Some(Id)),
            ("lat", "double precision", &["52.52", "48.14"], Some(LatLon)),
            ("longitude", "numeric(9,6)", &["13.405", "-0.1278"], Some(LatLon)),
            ("lng", "real", &[], Some(LatLon)),
            ("latlon", "text", &[], Some(LatLon)),
            ("unit_price", "numeric(10,2)", &["0.99", "1.99"], Some(Currency)),
            ("total", "numeric(10,2)", &[], Some(Currency)),
            ("salary", "integer", &[], Some(Currency)),
            ("amount_cents", "bigint", &[], Some(Currency)),
            ("price", "text", &["12.50", "$3"], Some(Currency)),
            ("created_at", "text", &[], Some(Timestamp)),
            ("invoice_date", "text", &[], Some(Timestamp)),
            ("created", "bigint", &["1763812800"], Some(Timestamp)),
            ("updated_on", "text", &[], Some(Timestamp)),
            // Values, whatever the name.
            ("contact", "text", &["ada@example.com", "bob@example.org", ""], Some(Email)),
            (
                "c",
                "",
                &["https://example.com/a", "http://www.example.org", "www.example.net"],
                Some(Url),
            ),
            ("c", "text", &["192.168.0.1", "::1", "10.0.0.0/8", "2001:db8::1"], Some(Ip)),
            ("c", "text", &["+49 30 901820", "(415) 555-2671", "020 7946 0958"], Some(Phone)),
            (
                "c",
                "text",
                &["0b5f3e36-54a4-4c4e-8c6d-1d4e9f1a2b3c", "{0B5F3E36-54A4-4C4E-8C6D-1D4E9F1A2B3C}"],
                Some(Id),
            ),
            (
                "c",
                "text",
                &["2026-11-22", "2026-11-22 10:00:00+00", "2026-11-22T10:00:00Z"],
                Some(Timestamp),
            ),
            ("c", "text", &["52.5200, 13.4050", "(13.405,52.52)"], Some(LatLon)),
            ("c", "text", &["$12.50", "12,50 €", "EUR 1.299,00", "-£3"], Some(Currency)),
            // Values that contradict the name win.
            ("phone", "text", &["ada@example.com", "bob@example.org"], Some(Email)),
            // Four of five is enough; three of five is not.
            (
                "c",
                "text",
                &["ada@example.com", "b@example.org", "c@example.net", "d@example.de", "n/a"],
                Some(Email),
            ),
            (
                "c",
                "text",
                &["ada@example.com", "b@example.org", "c@example.net", "n/a", "n/a"],
                None,
            ),
            // Names whose type does not fit, and names that mean something else.
            ("email", "integer", &[], None),
            ("email_verified", "boolean", &[], None),
            ("phone_count", "integer", &[], None),
            ("lat", "text", &["north"], None),
            ("lat", "double precision", &["52.5", "123.4"], None),
            ("long", "text", &[], None),
            ("price", "text", &["free", "on request"], None),
            ("price", "", &[], Some(Currency)),
            ("price", "", &["free"], None),
            ("tags", "text[]", &["{a,b}"], None),
            ("payload", "jsonb", &[], None),
            ("status", "order_status", &[], None),
            ("name", "text", &["Rock", "Jazz"], None),
            ("title", "character varying(160)", &["For Those About To Rock"], None),
            ("quantity", "integer", &["1", "2"], None),
            ("c", "text", &["12.50", "9.99"], None),
            ("c", "text", &["4155552671", "2026"], None),
            ("", "", &[], None),
        ];
        for (name, pg_type, values, expected) in cases {
            check(name, pg_type, values, *expected);
        }
    }

    #[test]
    fn type_names_are_classified_as_format_type_prints_them() {
        let cases = [
            ("text", TypeClass::Text),
            ("character varying(40)", TypeClass::Text),
            ("character(2)", TypeClass::Text),
            ("public.citext", TypeClass::Text),
            ("integer", TypeClass::Integer),
            ("bigint", TypeClass::Integer),
            ("numeric(10,2)", TypeClass::Decimal),
            ("double precision", TypeClass::Float),
            ("money", TypeClass::Money),
            ("uuid", TypeClass::Uuid),
            ("inet", TypeClass::Network),
            ("timestamp(6) with time zone", TypeClass::Temporal),
            ("time with time zone", TypeClass::Temporal),
            ("interval", TypeClass::Other),
            ("boolean", TypeClass::Other),
            ("integer[]", TypeClass::Other),
            ("\"Mood\"", TypeClass::Other),
            ("  ", TypeClass::Unknown),
        ];
        for (pg_type, expected) in cases {
            assert_eq!(type_class(pg_type), expected, "type_class({pg_type:?})");
        }
    }

    fn config(cases: u32) -> Config {
        Config { cases, failure_persistence: None, ..Config::default() }
    }

    proptest! {
        #![proptest_config(config(256))]

        #[test]
        fn arbitrary_names_types_and_values_never_panic(
            name in "[a-zA-Z_ .]{0,20}",
            pg_type in prop::sample::select(vec![
                "", "text", "integer", "numeric(10,2)", "double precision", "weird(", ")(", "a.b c",
            ]),
            values in prop::collection::vec(prop::collection::vec(any::<char>(), 0..30), 0..5),
        ) {
            let values: Vec<String> = values.into_iter().map(|chars| chars.into_iter().collect()).collect();
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            let _ = semantic_hint(&name, pg_type, &values);
        }
    }

    #[test]
    fn hints_serialise_as_their_lowercase_names() {
        let cases = [
            (Semantic::Email, "email"),
            (Semantic::Phone, "phone"),
            (Semantic::Url, "url"),
            (Semantic::Ip, "ip"),
            (Semantic::Id, "id"),
            (Semantic::LatLon, "latlon"),
            (Semantic::Currency, "currency"),
            (Semantic::Timestamp, "timestamp"),
        ];
        for (semantic, name) in cases {
            assert_eq!(semantic.as_str(), name);
            assert_eq!(semantic.to_string(), name);
            assert_eq!(serde_json::to_value(semantic).ok(), Some(serde_json::json!(name)));
        }
    }
}
