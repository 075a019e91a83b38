//! Cells and columns: how a JSON value reads as a number, text, boolean or date, and the kind a
//! column's values share.

use std::borrow::Cow;

use serde_json::Value;

use super::{Column, Dataset, MILLIS_PER_DAY, NULL};

/// The type a column's values share, as reported by [`summary`](super::summary) and used to pick
/// a chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ColumnKind {
    Number,
    Text,
    Boolean,
    Date,
    Mixed,
    Empty,
}

impl ColumnKind {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            ColumnKind::Number => "number",
            ColumnKind::Text => "text",
            ColumnKind::Boolean => "boolean",
            ColumnKind::Date => "date",
            ColumnKind::Mixed => "mixed",
            ColumnKind::Empty => "empty",
        }
    }
}

/// What one value is, read leniently: strings holding numbers, ISO dates or `true`/`false`
/// count as those.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Cell {
    Null,
    Number(f64),
    Date(Timestamp),
    Boolean(bool),
    /// `NaN` or an infinity, as Postgres writes them for `float8`, `numeric` and dates.
    NonFinite,
    Text,
    Nested,
}

impl Cell {
    pub(super) fn number(self) -> Option<f64> {
        match self {
            Cell::Number(number) => Some(number),
            _ => None,
        }
    }
}

/// A point in time in milliseconds since the Unix epoch (UTC), and whether it was written as a
/// bare date.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Timestamp {
    pub(super) millis: i64,
    pub(super) date_only: bool,
}

pub(super) fn cell(row: &[Value], index: usize) -> &Value {
    row.get(index).unwrap_or(&NULL)
}

pub(super) fn cell_text(value: &Value) -> Cow<'_, str> {
    match value {
        Value::Null => Cow::Borrowed(""),
        Value::String(text) => Cow::Borrowed(text),
        Value::Bool(true) => Cow::Borrowed("true"),
        Value::Bool(false) => Cow::Borrowed("false"),
        Value::Number(number) => Cow::Owned(number.to_string()),
        Value::Array(_) | Value::Object(_) => Cow::Owned(value.to_string()),
    }
}

pub(super) fn classify(value: &Value) -> Cell {
    match value {
        Value::Null => Cell::Null,
        Value::Bool(truth) => Cell::Boolean(*truth),
        Value::Number(number) => {
            number.as_f64().filter(|n| n.is_finite()).map_or(Cell::Text, Cell::Number)
        }
        Value::String(text) => {
            if let Some(number) = parse_number(text) {
                Cell::Number(number)
            } else if is_non_finite(text) {
                Cell::NonFinite
            } else if let Some(instant) = parse_timestamp(text) {
                Cell::Date(instant)
            } else if text.eq_ignore_ascii_case("true") {
                Cell::Boolean(true)
            } else if text.eq_ignore_ascii_case("false") {
                Cell::Boolean(false)
            } else {
                Cell::Text
            }
        }
        Value::Array(_) | Value::Object(_) => Cell::Nested,
    }
}

/// Whether `text` is how Postgres writes a non-finite number or date (`NaN`, `Infinity`,
/// `-infinity`, ...).
fn is_non_finite(text: &str) -> bool {
    let text = text.trim();
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    text.eq_ignore_ascii_case("nan") || unsigned.eq_ignore_ascii_case("infinity")
}

/// Infers a column's kind from its values. A declared text type (`text`, `varchar`, `uuid`, ...)
/// keeps strings that look like numbers or booleans as text, so zip codes stay labels.
pub(super) fn column_kind(data: &Dataset, index: usize, column: &Column) -> ColumnKind {
    let (mut numbers, mut dates, mut booleans, mut others) = (false, false, false, false);
    let mut non_finite = false;
    let mut all_strings = true;
    let mut any = false;
    for row in &data.rows {
        let value = cell(row, index);
        let class = classify(value);
        if class == Cell::Null {
            continue;
        }
        any = true;
        all_strings &= matches!(value, Value::String(_) | Value::Array(_) | Value::Object(_));
        match class {
            Cell::Number(_) => numbers = true,
            Cell::Date(_) => dates = true,
            Cell::Boolean(_) => booleans = true,
            Cell::NonFinite => non_finite = true,
            Cell::Null | Cell::Text | Cell::Nested => others = true,
        }
    }
    // `NaN` and `infinity` belong to numeric and date columns; anywhere else they are text.
    if non_finite && (booleans || numbers == dates) {
        others = true;
    }
    let declared_text = column.type_name.as_deref().is_some_and(is_text_type);
    match (any, numbers, dates, booleans, others) {
        (false, ..) => ColumnKind::Empty,
        (true, true, false, false, false) | (true, false, false, true, false)
            if declared_text && all_strings =>
        {
            ColumnKind::Text
        }
        (true, true, false, false, false) => ColumnKind::Number,
        (true, false, true, false, false) => ColumnKind::Date,
        (true, false, false, true, false) => ColumnKind::Boolean,
        _ if all_strings => ColumnKind::Text,
        _ => ColumnKind::Mixed,
    }
}

fn is_text_type(type_name: &str) -> bool {
    let lower = type_name.trim().to_ascii_lowercase();
    let base = lower.split('(').next().unwrap_or_default().trim();
    matches!(
        base,
        "text"
            | "varchar"
            | "character varying"
            | "char"
            | "character"
            | "bpchar"
            | "name"
            | "citext"
            | "uuid"
            | "string"
    )
}

/// Parses a decimal number (`-12.50`, `.5`, `1e3`), rejecting `NaN`, infinities, overflow and
/// integers with leading zeros (`007` is an identifier, not seven).
fn parse_number(text: &str) -> Option<f64> {
    let bytes = text.trim().as_bytes();
    let mut at = usize::from(matches!(bytes.first(), Some(b'+' | b'-')));
    let digits_from = |at: usize| bytes.iter().skip(at).take_while(|b| b.is_ascii_digit()).count();
    let integer = digits_from(at);
    if integer > 1 && bytes.get(at) == Some(&b'0') {
        return None;
    }
    at += integer;
    let mut fraction = 0;
    if bytes.get(at) == Some(&b'.') {
        fraction = digits_from(at + 1);
        at += 1 + fraction;
    }
    if integer + fraction == 0 {
        return None;
    }
    if matches!(bytes.get(at), Some(b'e' | b'E')) {
        at += 1 + usize::from(matches!(bytes.get(at + 1), Some(b'+' | b'-')));
        let exponent = digits_from(at);
        if exponent == 0 {
            return None;
        }
        at += exponent;
    }
    if at != bytes.len() {
        return None;
    }
    text.trim().parse::<f64>().ok().filter(|number| number.is_finite())
}

/// Parses an ISO 8601 date (`2024-01-31`) or timestamp (`2024-01-31T12:00`,
/// `2024-01-31 12:00:00.5+02`, `...Z`) as Postgres and JSON write them.
fn parse_timestamp(text: &str) -> Option<Timestamp> {
    let bytes = text.trim().as_bytes();
    let number = |from: usize, len: usize| -> Option<i64> {
        let digits = bytes.get(from..from + len)?;
        digits.iter().try_fold(0i64, |total, byte| {
            byte.is_ascii_digit().then(|| total * 10 + i64::from(byte - b'0'))
        })
    };
    let expect = |at: usize, wanted: &[u8]| bytes.get(at).is_some_and(|byte| wanted.contains(byte));
    let year = number(0, 4)?;
    let month = number(5, 2)?;
    let day = number(8, 2)?;
    if !expect(4, b"-") || !expect(7, b"-") || !(1..=12).contains(&month) {
        return None;
    }
    if !(1..=days_in_month(year, month)).contains(&day) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    if bytes.len() == 10 {
        return Some(Timestamp { millis: days * MILLIS_PER_DAY, date_only: true });
    }
    if !expect(10, b"Tt ") || !expect(13, b":") {
        return None;
    }
    let hour = number(11, 2)?;
    let minute = number(14, 2)?;
    let (mut second, mut milli, mut at) = (0, 0, 16);
    if expect(16, b":") {
        second = number(17, 2)?;
        at = 19;
        if expect(19, b".,") {
            let digits = bytes.iter().skip(20).take_while(|b| b.is_ascii_digit()).count();
            if digits == 0 {
                return None;
            }
            let fraction = bytes.iter().skip(20).take(digits.min(3));
            milli = fraction
                .chain(std::iter::repeat(&b'0'))
                .take(3)
                .fold(0, |total, byte| total * 10 + i64::from(byte - b'0'));
            at = 20 + digits;
        }
    }
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let offset = parse_offset(bytes.get(at..)?)?;
    let seconds = ((days * 24 + hour) * 60 + minute) * 60 + second - offset;
    Some(Timestamp { millis: seconds * 1_000 + milli, date_only: false })
}

/// Parses a UTC offset suffix: nothing, `Z`, `+HH`, `+HHMM`, `+HH:MM` or `+HH:MM:SS` (Postgres
/// writes local mean time that way), returning seconds east of UTC.
fn parse_offset(rest: &[u8]) -> Option<i64> {
    let two = |from: usize| -> Option<i64> {
        let digits = rest.get(from..from + 2)?;
        digits.iter().try_fold(0i64, |total, byte| {
            byte.is_ascii_digit().then(|| total * 10 + i64::from(byte - b'0'))
        })
    };
    let sign = match rest.first() {
        None => return Some(0),
        Some(b'Z' | b'z') if rest.len() == 1 => return Some(0),
        Some(b'+') => 1,
        Some(b'-') => -1,
        Some(_) => return None,
    };
    let hours = two(1)?;
    let (minutes, seconds) = match rest.len() {
        3 => (0, 0),
        5 => (two(3)?, 0),
        6 if rest.get(3) == Some(&b':') => (two(4)?, 0),
        9 if rest.get(3) == Some(&b':') && rest.get(6) == Some(&b':') => (two(4)?, two(7)?),
        _ => return None,
    };
    if hours > 23 || minutes > 59 || seconds > 59 {
        return None;
    }
    Some(sign * ((hours * 60 + minutes) * 60 + seconds))
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub(super) fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The proleptic Gregorian date of a day count since 1970-01-01.
pub(super) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 { shifted_month + 3 } else { shifted_month - 9 };
    (year_of_era + era * 400 + i64::from(month <= 2), month, day)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::text::format_instant;
    use super::*;

    #[test]
    fn cells_are_classified_strictly() {
        let date = |millis: i64| Cell::Date(Timestamp { millis, date_only: false });
        let cases: Vec<(Value, Cell)> = vec![
            (json!(null), Cell::Null),
            (json!(1.5), Cell::Number(1.5)),
            (json!("12.50"), Cell::Number(12.5)),
            (json!(" -3e2 "), Cell::Number(-300.0)),
            (json!("+.5"), Cell::Number(0.5)),
            (json!("0"), Cell::Number(0.0)),
            (json!("007"), Cell::Text),
            (json!("1,000"), Cell::Text),
            (json!("1e400"), Cell::Text),
            (json!("0x10"), Cell::Text),
            (json!("."), Cell::Text),
            (json!("1e"), Cell::Text),
            (json!(""), Cell::Text),
            (json!("NaN"), Cell::NonFinite),
            (json!("-Infinity"), Cell::NonFinite),
            (json!("inf"), Cell::Text),
            (json!("TRUE"), Cell::Boolean(true)),
            (json!(false), Cell::Boolean(false)),
            (json!([1]), Cell::Nested),
            (
                json!("1970-01-02"),
                Cell::Date(Timestamp { millis: MILLIS_PER_DAY, date_only: true }),
            ),
            (json!("1969-12-31T23:59:59Z"), date(-1_000)),
            (json!("2000-01-01T00:00:00.5"), date(946_684_800_500)),
            (json!("2000-01-01 02:00:00+02"), date(946_684_800_000)),
            (json!("2000-01-01T00:00+0130"), date(946_679_400_000)),
            (json!("2000-01-01t00:00:00.123456789-01:00"), date(946_688_400_123)),
            (json!("1900-01-01 00:00:00+00:53:28"), date(-2_208_992_008_000)),
            (
                json!("2024-02-29"),
                Cell::Date(Timestamp { millis: 1_709_164_800_000, date_only: true }),
            ),
            (json!("2023-02-29"), Cell::Text),
            (json!("2024-01-01T24:00:00"), Cell::Text),
            (json!("2024-01-01T10:00:00 BC"), Cell::Text),
            (json!("2024-01-01T10"), Cell::Text),
            (json!("2024-1-01"), Cell::Text),
        ];
        for (input, expected) in cases {
            assert_eq!(classify(&input), expected, "input {input}");
        }
        for days in [-719_528, -1, 0, 1, 11_016, 19_782, 2_932_896] {
            let (year, month, day) = civil_from_days(days);
            assert_eq!(days_from_civil(year, month, day), days, "days {days}");
        }
        assert_eq!(format_instant(946_684_800_500.0, false), "2000-01-01T00:00:00.500Z");
        assert_eq!(format_instant(-1_000.0, false), "1969-12-31T23:59:59Z");
        assert_eq!(format_instant(0.0, true), "1970-01-01");
    }
}
