//! Text helpers shared by the chart, its drawing and the statistics: cutting text to a length
//! and writing instants as ISO 8601.

use std::borrow::Cow;

use super::cells::civil_from_days;
use super::{MAX_LABEL_CHARS, MILLIS_PER_DAY};

/// Formats milliseconds since the Unix epoch as ISO 8601 in UTC (`YYYY-MM-DD` when `date_only`).
pub(super) fn format_instant(millis: f64, date_only: bool) -> String {
    match split_instant(millis) {
        Some((date, _)) if date_only => date,
        Some((date, time)) => format!("{date}T{time}Z"),
        None => String::new(),
    }
}

/// Splits an instant into `YYYY-MM-DD` and `HH:MM:SS` (with `.mmm` when not whole seconds).
pub(super) fn split_instant(millis: f64) -> Option<(String, String)> {
    if !millis.is_finite() || millis.abs() > 1e15 {
        return None;
    }
    let millis = millis.floor() as i64;
    let days = millis.div_euclid(MILLIS_PER_DAY);
    let of_day = millis.rem_euclid(MILLIS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    let (hour, minute) = (of_day / 3_600_000, of_day / 60_000 % 60);
    let (second, milli) = (of_day / 1_000 % 60, of_day % 1_000);
    let date = format!("{year:04}-{month:02}-{day:02}");
    let time = if milli == 0 {
        format!("{hour:02}:{minute:02}:{second:02}")
    } else {
        format!("{hour:02}:{minute:02}:{second:02}.{milli:03}")
    };
    Some((date, time))
}

/// A name cut to the length of a chart label.
pub(super) fn short(name: &str) -> String {
    truncate_chars(name, MAX_LABEL_CHARS).into_owned()
}

/// Cuts `text` to `limit` characters, the last being `…`, when it is longer.
pub(super) fn truncate_chars(text: &str, limit: usize) -> Cow<'_, str> {
    match text.char_indices().nth(limit) {
        None => Cow::Borrowed(text),
        Some(_) => {
            let mut cut: String = text.chars().take(limit.saturating_sub(1)).collect();
            cut.push('…');
            Cow::Owned(cut)
        }
    }
}
