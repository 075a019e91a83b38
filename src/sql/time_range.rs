//! Time windows for the data-provider tools: reading the `from` and `to` bounds a client sends
//! (absolute times, dates, `now`-relative offsets and ISO-8601 durations) and the configured
//! default window into one [`TimeWindow`] in UTC.
//!
//! Everything is relative to a `now` the caller passes in, so that one request reads all its
//! bounds against the same instant and tests can fix it. Durations are measured in exact units
//! (seconds, minutes, hours, days of 24 hours, weeks of 7 days); months and years are refused
//! because their length depends on where they start.

use chrono::{DateTime, NaiveDate, NaiveDateTime, SecondsFormat, TimeDelta, Utc};
use serde::Serialize;

/// A half-open window of time `[from, to)` in UTC; a missing bound leaves that side open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct TimeWindow {
    /// The first instant inside the window, if the window has a start.
    pub from: Option<DateTime<Utc>>,
    /// The first instant after the window, if the window has an end.
    pub to: Option<DateTime<Utc>>,
}

impl TimeWindow {
    /// Whether `instant` lies inside the window: not before `from` and before `to`.
    #[must_use]
    pub fn contains(&self, instant: DateTime<Utc>) -> bool {
        self.from.is_none_or(|from| from <= instant) && self.to.is_none_or(|to| instant < to)
    }
}

/// Examples of accepted instants, for error messages.
const INSTANT_EXAMPLES: &str =
    "2026-11-01T00:00:00Z, 2026-11-01, now, now-7d, -1h or P30D (30 days ago)";

/// Examples of accepted durations, for error messages.
const DURATION_EXAMPLES: &str = "P7D, PT1H, P1DT12H, 7d, 24h or 1h30m";

/// Reads one instant, relative to `now` where the text is relative:
///
/// - RFC 3339 with an offset: `2026-11-01T00:00:00Z`, `2026-11-01T09:30:00+02:00`; without an
///   offset (`2026-11-01T09:30:00`) the time is read as UTC;
/// - a date: `2026-11-01` is midnight UTC at its start;
/// - `now`, and `now` with an offset: `now-1h`, `now-30m`, `now-7d`, `now+2h`, `now-P1D`
///   (units `s`, `m`, `h`, `d`, `w`; several may follow each other, as in `now-1h30m`);
/// - a bare offset with its sign: `-7d`, `-1h`, `+2h`, `-P30D`;
/// - an ISO-8601 duration without a sign, which reaches back from now: `P30D`, `PT1H`, `P1W`,
///   `P1DT12H` mean 30 days, 1 hour, 1 week and 36 hours ago.
///
/// # Errors
///
/// A message saying what is wrong and showing accepted forms when the text is none of the
/// above, when a duration uses months or years (`P1M`, `P1Y`: their length varies, so write
/// days), when an offset has no sign (`7d`: write `-7d` or `now-7d`), or when the instant falls
/// outside the representable range.
pub fn parse_instant(text: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(format!("the time is empty; write e.g. {INSTANT_EXAMPLES}"));
    }
    if let Some(rest) = strip_prefix_ignoring_case(trimmed, "now") {
        let rest = rest.trim_start();
        if rest.is_empty() {
            return Ok(now);
        }
        return match rest.chars().next() {
            Some(sign @ ('+' | '-')) => offset(now, sign, rest[1..].trim_start(), trimmed),
            _ => Err(format!(
                "cannot read {trimmed:?} as a time: after `now` comes `+` or `-` and a \
                 duration, as in now-7d or now+2h"
            )),
        };
    }
    if let Some(sign @ ('+' | '-')) = trimmed.chars().next() {
        return offset(now, sign, &trimmed[1..], trimmed);
    }
    if trimmed.starts_with(['P', 'p']) {
        let span = parse_iso_duration(trimmed)?;
        return shift(now, '-', span, trimmed);
    }
    if let Some(date) = parse_date(trimmed) {
        return date
            .and_hms_opt(0, 0, 0)
            .map(|midnight| midnight.and_utc())
            .ok_or_else(|| format!("{trimmed:?} is outside the supported range of times"));
    }
    if let Ok(instant) = DateTime::parse_from_rfc3339(trimmed) {
        return Ok(instant.with_timezone(&Utc));
    }
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M"] {
        if let Ok(naive) = NaiveDateTime::parse_from_str(trimmed, format)
            && trimmed.len() >= 16
            && trimmed.as_bytes()[4] == b'-'
        {
            return Ok(naive.and_utc());
        }
    }
    if parse_compact_duration(trimmed).is_ok() {
        return Err(format!(
            "{trimmed:?} has no sign, so it could mean before or after now; write e.g. \
             -{trimmed} or now-{trimmed} for the past, now+{trimmed} for the future"
        ));
    }
    Err(format!("cannot read {trimmed:?} as a time; write e.g. {INSTANT_EXAMPLES}"))
}

/// Reads a length of time: an ISO-8601 duration (`P7D`, `PT1H`, `P1W`, `P1DT12H`) or a compact
/// one (`7d`, `24h`, `30m`, `90s`, `2w`, `1h30m`). The result is at least zero.
///
/// # Errors
///
/// A message showing accepted forms when the text is neither, when it uses months or years
/// (`P1M`, `P1Y`), or when the length does not fit.
pub fn parse_duration(text: &str) -> Result<TimeDelta, String> {
    let trimmed = text.trim();
    if trimmed.starts_with(['P', 'p']) {
        parse_iso_duration(trimmed)
    } else {
        parse_compact_duration(trimmed)
    }
}

/// Reads the bounds of a window. `from` and `to` are read with [`parse_instant`]. When both are
/// missing and a `default_window` duration is configured (read with [`parse_duration`]; a
/// leading `-` is allowed, as in `-7d`), the window is `[now − default_window, now)`; when one
/// bound is given, the other side stays open.
///
/// # Errors
///
/// A message naming the field (`from`, `to` or `default_window`) and showing accepted forms
/// when a bound cannot be read, when the default window is not a positive duration (it is
/// checked even when `from` or `to` is given, so a bad configuration shows up at once), or
/// when `from` is after `to`.
pub fn parse_window(
    from: Option<&str>,
    to: Option<&str>,
    default_window: Option<&str>,
    now: DateTime<Utc>,
) -> Result<TimeWindow, String> {
    let default_span = match default_window {
        None => None,
        Some(text) => {
            let unsigned = text.trim().strip_prefix('-').unwrap_or(text.trim());
            let span =
                parse_duration(unsigned).map_err(|error| format!("default_window: {error}"))?;
            if span <= TimeDelta::zero() {
                return Err(format!(
                    "default_window: {text:?} is an empty window; write a positive duration, \
                     e.g. {DURATION_EXAMPLES}"
                ));
            }
            Some(span)
        }
    };
    let from = from
        .map(|text| parse_instant(text, now).map_err(|error| format!("from: {error}")))
        .transpose()?;
    let to = to
        .map(|text| parse_instant(text, now).map_err(|error| format!("to: {error}")))
        .transpose()?;
    if let (Some(start), Some(end)) = (from, to)
        && start > end
    {
        return Err(format!(
            "from ({}) is after to ({}); give the earlier time as from, e.g. from=now-7d to=now",
            format_instant(start),
            format_instant(end)
        ));
    }
    if from.is_none()
        && to.is_none()
        && let Some(span) = default_span
    {
        let start = shift(now, '-', span, "default_window")
            .map_err(|error| format!("default_window: {error}"))?;
        return Ok(TimeWindow { from: Some(start), to: Some(now) });
    }
    Ok(TimeWindow { from, to })
}

/// An instant in RFC 3339 with second precision and `Z`.
fn format_instant(instant: DateTime<Utc>) -> String {
    instant.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// `text` without `prefix`, compared without regard to ASCII case.
fn strip_prefix_ignoring_case<'text>(text: &'text str, prefix: &str) -> Option<&'text str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &text[prefix.len()..])
}

/// `now` moved by the duration in `span_text` in the direction of `sign`.
fn offset(
    now: DateTime<Utc>,
    sign: char,
    span_text: &str,
    whole: &str,
) -> Result<DateTime<Utc>, String> {
    if span_text.is_empty() {
        return Err(format!(
            "{whole:?} has a sign but no duration; write e.g. now-7d, -1h or -P30D"
        ));
    }
    let span = parse_duration(span_text)
        .map_err(|error| format!("cannot read the offset in {whole:?}: {error}"))?;
    shift(now, sign, span, whole)
}

/// `now` plus (`+`) or minus (`-`) `span`, or an error when the result leaves the range.
fn shift(
    now: DateTime<Utc>,
    sign: char,
    span: TimeDelta,
    whole: &str,
) -> Result<DateTime<Utc>, String> {
    let shifted =
        if sign == '+' { now.checked_add_signed(span) } else { now.checked_sub_signed(span) };
    shifted.ok_or_else(|| format!("{whole:?} reaches outside the supported range of times"))
}

/// A calendar date written exactly as `YYYY-MM-DD`.
fn parse_date(text: &str) -> Option<NaiveDate> {
    let bytes = text.as_bytes();
    let shaped = bytes.len() == 10
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes
            .iter()
            .enumerate()
            .all(|(index, byte)| index == 4 || index == 7 || byte.is_ascii_digit());
    if !shaped {
        return None;
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()
}

/// The length of one unit of a compact duration, in seconds.
fn compact_unit_seconds(unit: char) -> Option<i64> {
    match unit {
        's' => Some(1),
        'm' => Some(60),
        'h' => Some(3_600),
        'd' => Some(86_400),
        'w' => Some(604_800),
        _ => None,
    }
}

/// A compact duration: one or more `<number><unit>` terms with units `s`, `m`, `h`, `d`, `w`.
fn parse_compact_duration(text: &str) -> Result<TimeDelta, String> {
    let mut total: i64 = 0;
    let mut chars = text.chars().peekable();
    if chars.peek().is_none() {
        return Err(format!("the duration is empty; write e.g. {DURATION_EXAMPLES}"));
    }
    while chars.peek().is_some() {
        let mut amount: i64 = 0;
        let mut digits = 0;
        while let Some(digit) = chars.peek().and_then(|c| c.to_digit(10)) {
            amount = amount
                .checked_mul(10)
                .and_then(|amount| amount.checked_add(i64::from(digit)))
                .ok_or_else(|| format!("the duration {text:?} is too long"))?;
            digits += 1;
            chars.next();
        }
        let unit = chars.next();
        let seconds = unit.and_then(compact_unit_seconds);
        let (true, Some(seconds)) = (digits > 0, seconds) else {
            let hint = match unit {
                Some('M' | 'y' | 'Y') => {
                    " (months and years have no fixed length: write days, e.g. 30d or 365d)"
                }
                Some('.' | ',') => " (fractions are not supported: use a smaller unit, e.g. 90m)",
                _ => "",
            };
            return Err(format!(
                "cannot read {text:?} as a duration{hint}; write e.g. {DURATION_EXAMPLES} \
                 (units s, m, h, d, w)"
            ));
        };
        total = amount
            .checked_mul(seconds)
            .and_then(|term| total.checked_add(term))
            .ok_or_else(|| format!("the duration {text:?} is too long"))?;
    }
    TimeDelta::try_seconds(total).ok_or_else(|| format!("the duration {text:?} is too long"))
}

/// An ISO-8601 duration `P[nW][nD][T[nH][nM][nS]]` (letters in any case; weeks and days may be
/// combined), without fractions, months or years.
fn parse_iso_duration(text: &str) -> Result<TimeDelta, String> {
    let upper = text.to_ascii_uppercase();
    let Some(body) = upper.strip_prefix('P') else {
        return Err(format!("cannot read {text:?} as an ISO-8601 duration; write e.g. P30D"));
    };
    let refuse = |reason: &str| {
        Err(format!("cannot read {text:?} as a duration: {reason}; write e.g. {DURATION_EXAMPLES}"))
    };
    if body.is_empty() {
        return refuse("nothing follows P");
    }
    let mut total: i64 = 0;
    let mut in_time = false;
    let mut seen_terms = 0;
    let mut terms_in_time = 0;
    // Units in the order they must appear; a unit may not repeat or come out of order.
    let mut last_rank = 0;
    let mut amount: Option<i64> = None;
    for c in body.chars() {
        if let Some(digit) = c.to_digit(10) {
            let next = amount
                .unwrap_or(0)
                .checked_mul(10)
                .and_then(|value| value.checked_add(i64::from(digit)));
            let Some(next) = next else {
                return refuse("it is too long");
            };
            amount = Some(next);
            continue;
        }
        if c == 'T' {
            if in_time || amount.is_some() {
                return refuse("T appears in the wrong place");
            }
            in_time = true;
            continue;
        }
        let (rank, seconds) = match (in_time, c) {
            (false, 'Y') | (false, 'M') => {
                return refuse(
                    "months and years have no fixed length, so they are not accepted; write the \
                     span in days (P30D, P365D) or weeks (P4W)",
                );
            }
            (false, 'W') => (1, 604_800),
            (false, 'D') => (2, 86_400),
            (true, 'H') => (3, 3_600),
            (true, 'M') => (4, 60),
            (true, 'S') => (5, 1),
            (_, '.' | ',') => return refuse("fractions are not supported; use a smaller unit"),
            _ => return refuse(&format!("{c:?} is not a duration unit here")),
        };
        let Some(value) = amount.take() else {
            return refuse(&format!("{c} has no number before it"));
        };
        if rank <= last_rank {
            return refuse("the units are out of order or repeated");
        }
        last_rank = rank;
        seen_terms += 1;
        if in_time {
            terms_in_time += 1;
        }
        let Some(sum) = value.checked_mul(seconds).and_then(|term| total.checked_add(term)) else {
            return refuse("it is too long");
        };
        total = sum;
    }
    if amount.is_some() {
        return refuse("the last number has no unit");
    }
    if seen_terms == 0 || (in_time && terms_in_time == 0) {
        return refuse("it names no length");
    }
    TimeDelta::try_seconds(total).map_or_else(|| refuse("it is too long"), Ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::Config;

    /// The fixed `now` of these tests.
    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-22T12:00:00Z")
            .map(|instant| instant.with_timezone(&Utc))
            .unwrap_or_default()
    }

    /// Reads a fixture time.
    fn at(text: &str) -> DateTime<Utc> {
        match DateTime::parse_from_rfc3339(text) {
            Ok(instant) => instant.with_timezone(&Utc),
            Err(error) => panic!("fixture {text:?}: {error}"),
        }
    }

    /// Checks that `text` reads as the instant `expected` (RFC 3339).
    fn check(text: &str, expected: &str) {
        assert_eq!(parse_instant(text, now()), Ok(at(expected)), "parse_instant({text:?})");
    }

    /// Checks that `text` is refused with a message containing `fragment`.
    fn check_refused(text: &str, fragment: &str) {
        match parse_instant(text, now()) {
            Ok(instant) => panic!("parse_instant({text:?}) gave {instant}"),
            Err(message) => {
                assert!(message.contains(fragment), "parse_instant({text:?}): {message}");
            }
        }
    }

    #[test]
    fn instants_are_read_in_every_accepted_form() {
        let cases = [
            ("2026-11-01T00:00:00Z", "2026-11-01T00:00:00Z"),
            ("2026-11-01T09:30:00+02:00", "2026-11-01T07:30:00Z"),
            ("2026-11-01T09:30:00.250-05:00", "2026-11-01T14:30:00.250Z"),
            ("2026-11-01t00:00:00z", "2026-11-01T00:00:00Z"),
            ("2026-11-01 09:30:00Z", "2026-11-01T09:30:00Z"),
            ("2026-11-01T09:30:00", "2026-11-01T09:30:00Z"),
            ("2026-11-01 09:30:00", "2026-11-01T09:30:00Z"),
            ("2026-11-01T09:30", "2026-11-01T09:30:00Z"),
            ("2026-11-01", "2026-11-01T00:00:00Z"),
            ("  2026-02-28  ", "2026-02-28T00:00:00Z"),
            ("now", "2026-11-22T12:00:00Z"),
            ("NOW", "2026-11-22T12:00:00Z"),
            ("now-1h", "2026-11-22T11:00:00Z"),
            ("now-30m", "2026-11-22T11:30:00Z"),
            ("now-7d", "2026-11-15T12:00:00Z"),
            ("now+2h", "2026-11-22T14:00:00Z"),
            ("now-45s", "2026-11-22T11:59:15Z"),
            ("now-2w", "2026-11-08T12:00:00Z"),
            ("now - 1h30m", "2026-11-22T10:30:00Z"),
            ("now-P1D", "2026-11-21T12:00:00Z"),
            ("-7d", "2026-11-15T12:00:00Z"),
            ("-1h", "2026-11-22T11:00:00Z"),
            ("+2h", "2026-11-22T14:00:00Z"),
            ("P30D", "2026-10-23T12:00:00Z"),
            ("PT1H", "2026-11-22T11:00:00Z"),
            ("P1W", "2026-11-15T12:00:00Z"),
            ("P1DT12H", "2026-11-21T00:00:00Z"),
            ("PT90M", "2026-11-22T10:30:00Z"),
            ("PT1H30M15S", "2026-11-22T10:29:45Z"),
            ("p2d", "2026-11-20T12:00:00Z"),
            ("-P30D", "2026-10-23T12:00:00Z"),
            ("+P1D", "2026-11-23T12:00:00Z"),
            ("P0D", "2026-11-22T12:00:00Z"),
        ];
        for (text, expected) in cases {
            check(text, expected);
        }
    }

    #[test]
    fn unreadable_or_ambiguous_instants_are_refused_with_a_reason() {
        let cases = [
            ("", "empty"),
            ("   ", "empty"),
            ("yesterday", "2026-11-01T00:00:00Z"),
            ("P1M", "months and years"),
            ("P1Y", "months and years"),
            ("-P1Y2D", "months and years"),
            ("now-1M", "months and years"),
            ("now-1y", "months and years"),
            ("7d", "no sign"),
            ("1h30m", "no sign"),
            ("now-", "no duration"),
            ("-", "no duration"),
            ("now 7d", "after `now` comes"),
            ("nowhere", "after `now` comes"),
            ("now-1.5h", "fractions"),
            ("PT1.5H", "fractions"),
            ("P", "nothing follows P"),
            ("PT", "names no length"),
            ("P1DT", "names no length"),
            ("P1H", "not a duration unit"),
            ("PT1D", "not a duration unit"),
            ("P1D1W", "out of order"),
            ("P1D2D", "out of order"),
            ("P5", "no unit"),
            ("PD", "no number"),
            ("now-7x", "units s, m, h, d, w"),
            ("2026-13-01", "cannot read"),
            ("2026-02-30", "cannot read"),
            ("2026-11-01T25:00:00Z", "cannot read"),
            ("11/01/2026", "cannot read"),
            ("-99999999999999999999d", "too long"),
            ("-99999999999d", "outside the supported range"),
        ];
        for (text, fragment) in cases {
            check_refused(text, fragment);
        }
    }

    #[test]
    fn durations_are_read_in_iso_and_compact_forms() {
        let cases: &[(&str, Result<i64, &str>)] = &[
            ("P7D", Ok(7 * 86_400)),
            ("PT1H", Ok(3_600)),
            ("P1W", Ok(604_800)),
            ("P1W2D", Ok(9 * 86_400)),
            ("P1DT12H", Ok(36 * 3_600)),
            ("7d", Ok(7 * 86_400)),
            ("24h", Ok(86_400)),
            ("1h30m", Ok(5_400)),
            ("90s", Ok(90)),
            (" 2w ", Ok(1_209_600)),
            ("P1M", Err("months and years")),
            ("30", Err("cannot read")),
            ("d", Err("cannot read")),
            ("", Err("empty")),
            ("-7d", Err("cannot read")),
        ];
        for (text, expected) in cases {
            let got = parse_duration(text);
            match (got, expected) {
                (Ok(span), Ok(seconds)) => {
                    assert_eq!(span.num_seconds(), *seconds, "parse_duration({text:?})");
                }
                (Err(message), Err(fragment)) => {
                    assert!(message.contains(fragment), "parse_duration({text:?}): {message}");
                }
                (got, expected) => {
                    panic!("parse_duration({text:?}) gave {got:?}, expected {expected:?}")
                }
            }
        }
    }

    /// What a window reads as, in compact text: `from..to` with `*` for an open side.
    fn describe(window: &TimeWindow) -> String {
        let side =
            |bound: Option<DateTime<Utc>>| bound.map_or_else(|| "*".to_owned(), format_instant);
        format!("{}..{}", side(window.from), side(window.to))
    }

    #[test]
    fn windows_combine_bounds_and_the_default() {
        type Case<'a> =
            (Option<&'a str>, Option<&'a str>, Option<&'a str>, Result<&'a str, &'a str>);
        let cases: &[Case<'_>] = &[
            (None, None, None, Ok("*..*")),
            (None, None, Some("P7D"), Ok("2026-11-15T12:00:00Z..2026-11-22T12:00:00Z")),
            (None, None, Some("24h"), Ok("2026-11-21T12:00:00Z..2026-11-22T12:00:00Z")),
            (None, None, Some("-7d"), Ok("2026-11-15T12:00:00Z..2026-11-22T12:00:00Z")),
            (Some("now-1h"), None, Some("P7D"), Ok("2026-11-22T11:00:00Z..*")),
            (None, Some("2026-11-01"), Some("P7D"), Ok("*..2026-11-01T00:00:00Z")),
            (
                Some("2026-11-01"),
                Some("now"),
                None,
                Ok("2026-11-01T00:00:00Z..2026-11-22T12:00:00Z"),
            ),
            (Some("P30D"), Some("-1d"), None, Ok("2026-10-23T12:00:00Z..2026-11-21T12:00:00Z")),
            (Some("now"), Some("now"), None, Ok("2026-11-22T12:00:00Z..2026-11-22T12:00:00Z")),
            (
                Some("now"),
                Some("now-1h"),
                None,
                Err("from (2026-11-22T12:00:00Z) is after to (2026-11-22T11:00:00Z)"),
            ),
            (Some("tomorrow"), None, None, Err("from: cannot read \"tomorrow\"")),
            (None, Some("7d"), None, Err("to: \"7d\" has no sign")),
            (None, None, Some("P1M"), Err("default_window: cannot read \"P1M\"")),
            (None, None, Some("week"), Err("default_window: cannot read \"week\"")),
            (None, None, Some("P0D"), Err("default_window: \"P0D\" is an empty window")),
            (Some("now-1h"), None, Some("bad"), Err("default_window:")),
        ];
        for (from, to, default_window, expected) in cases {
            let got = parse_window(*from, *to, *default_window, now());
            match (got, expected) {
                (Ok(window), Ok(text)) => {
                    assert_eq!(describe(&window), *text, "{from:?} {to:?} {default_window:?}");
                }
                (Err(message), Err(fragment)) => {
                    assert!(
                        message.contains(fragment),
                        "{from:?} {to:?} {default_window:?}: {message}"
                    );
                    assert!(message.contains("e.g."), "no example in: {message}");
                }
                (got, expected) => {
                    panic!("{from:?} {to:?} {default_window:?} gave {got:?}, expected {expected:?}")
                }
            }
        }
    }

    fn config(cases: u32) -> Config {
        Config { cases, failure_persistence: None, ..Config::default() }
    }

    proptest! {
        #![proptest_config(config(256))]

        #[test]
        fn now_offsets_and_bare_offsets_and_iso_durations_agree(
            amount in 0_i64..100_000,
            unit in prop::sample::select(vec![('s', 1_i64), ('m', 60), ('h', 3_600), ('d', 86_400), ('w', 604_800)]),
        ) {
            let (letter, seconds) = unit;
            let expected = now() - TimeDelta::seconds(amount * seconds);
            prop_assert_eq!(parse_instant(&format!("now-{amount}{letter}"), now()), Ok(expected));
            prop_assert_eq!(parse_instant(&format!("-{amount}{letter}"), now()), Ok(expected));
            let iso = match letter {
                's' => format!("PT{amount}S"),
                'm' => format!("PT{amount}M"),
                'h' => format!("PT{amount}H"),
                'd' => format!("P{amount}D"),
                _ => format!("P{amount}W"),
            };
            prop_assert_eq!(parse_instant(&iso, now()), Ok(expected));
        }

        #[test]
        fn arbitrary_text_never_panics(
            chars in prop::collection::vec(any::<char>(), 0..30),
            shaped in "[-+0-9PTWDHMSnow:. ]{0,20}",
        ) {
            let text: String = chars.into_iter().collect();
            for candidate in [text.as_str(), shaped.as_str()] {
                let _ = parse_instant(candidate, now());
                let _ = parse_duration(candidate);
                let _ = parse_window(Some(candidate), Some(candidate), Some(candidate), now());
            }
        }
    }

    #[test]
    fn a_window_contains_its_start_but_not_its_end() {
        let window = TimeWindow {
            from: Some(at("2026-11-01T00:00:00Z")),
            to: Some(at("2026-11-02T00:00:00Z")),
        };
        let cases = [
            ("2026-10-31T23:59:59Z", false),
            ("2026-11-01T00:00:00Z", true),
            ("2026-11-01T12:00:00Z", true),
            ("2026-11-02T00:00:00Z", false),
        ];
        for (instant, expected) in cases {
            assert_eq!(window.contains(at(instant)), expected, "{instant}");
        }
        assert!(TimeWindow::default().contains(at("1970-01-01T00:00:00Z")));
    }
}
