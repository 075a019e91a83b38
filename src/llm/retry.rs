//! The one retry policy every provider shares: which failures are worth another attempt (429,
//! 5xx, a connection that failed before any answer), how long to wait (what the server asked
//! for, else exponential backoff with jitter) and when to give up. Timeouts are never retried:
//! the provider may have done, and billed, the work.
//!
//! # Design notes
//!
//! `retry.rs` is the one policy: 429, 5xx and failed connections are retried with exponential
//! backoff and jitter, `Retry-After` (seconds or HTTP date) and `retry-after-ms` honoured up to
//! `max_backoff`, quota errors and timeouts never retried.

use std::error::Error as _;
use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, Utc};
use rand::Rng as _;
use reqwest::header::HeaderMap;

use super::{ClientSettings, Provider};

/// The wait before the first retry when the server asked for none; each retry doubles it.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);

/// How far jitter moves a backoff wait either way, as a fraction of it.
const JITTER: f64 = 0.2;

/// How a failed attempt ended, as far as retrying goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// An HTTP answer that is not a success, with the wait the server asked for, if any.
    Answer { status: u16, retry_after: Option<Duration> },
    /// The connection failed before any answer came (refused, reset, closed early).
    NoConnection,
}

impl Outcome {
    fn is_retryable(self) -> bool {
        match self {
            Outcome::Answer { status, .. } => is_retryable_status(status),
            Outcome::NoConnection => true,
        }
    }
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Try again after this wait.
    Retry { wait: Duration },
    /// Report the failure.
    GiveUp,
}

/// The retries one call has spent, and the settings that bound them.
#[derive(Debug, Clone)]
pub(crate) struct Retries {
    provider: Provider,
    max_retries: u32,
    max_backoff: Duration,
    spent: u32,
}

impl Retries {
    /// A fresh budget of `settings.max_retries` retries for one call to `provider`.
    pub(crate) fn new(provider: Provider, settings: &ClientSettings) -> Retries {
        Retries {
            provider,
            max_retries: settings.max_retries,
            max_backoff: settings.max_backoff,
            spent: 0,
        }
    }

    /// Whether to try again after `outcome`, and after how long. Logs each retry.
    pub(crate) fn decide(&mut self, outcome: Outcome) -> Decision {
        let decision = self.decide_with_jitter(outcome, random_jitter());
        if let Decision::Retry { wait } = decision {
            let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
            let (retry, max_retries) = (self.spent, self.max_retries);
            match outcome {
                Outcome::Answer { status, .. } => tracing::warn!(
                    provider = %self.provider,
                    status,
                    wait_ms,
                    retry,
                    max_retries,
                    "the model provider answered with an error, retrying"
                ),
                Outcome::NoConnection => tracing::warn!(
                    provider = %self.provider,
                    wait_ms,
                    retry,
                    max_retries,
                    "the model provider could not be reached, retrying"
                ),
            }
        }
        decision
    }

    /// [`Retries::decide`] with the jitter factor given, so that tests can fix it.
    fn decide_with_jitter(&mut self, outcome: Outcome, jitter: f64) -> Decision {
        if !outcome.is_retryable() || self.spent >= self.max_retries {
            return Decision::GiveUp;
        }
        let wait = match outcome {
            // A server that asks for a longer wait than we allow is not asked again: the caller
            // hears how long it wanted instead.
            Outcome::Answer { retry_after: Some(asked), .. } if asked > self.max_backoff => {
                return Decision::GiveUp;
            }
            Outcome::Answer { retry_after: Some(asked), .. } => asked,
            Outcome::Answer { retry_after: None, .. } | Outcome::NoConnection => {
                backoff(self.spent, self.max_backoff, jitter)
            }
        };
        self.spent += 1;
        Decision::Retry { wait }
    }
}

/// Whether an HTTP status is worth another attempt: 429 and every 5xx (Anthropic's 529
/// included).
pub(crate) fn is_retryable_status(status: u16) -> bool {
    status == 429 || (500..=599).contains(&status)
}

/// The wait before retry number `retry` (0 for the first): 250 ms doubling, times `jitter`
/// (clamped to 0.8..=1.2), never more than `max_backoff`.
pub(crate) fn backoff(retry: u32, max_backoff: Duration, jitter: f64) -> Duration {
    let doubled = FIRST_BACKOFF.saturating_mul(2_u32.saturating_pow(retry));
    let jitter = jitter.clamp(1.0 - JITTER, 1.0 + JITTER);
    let jittered =
        Duration::try_from_secs_f64(doubled.as_secs_f64() * jitter).unwrap_or(Duration::MAX);
    jittered.min(max_backoff)
}

/// A random jitter factor within 0.8..=1.2.
fn random_jitter() -> f64 {
    rand::rng().random_range(1.0 - JITTER..=1.0 + JITTER)
}

/// The wait a failed answer's headers ask for: `retry-after-ms` (milliseconds, sent by
/// OpenAI-compatible servers) first, then `Retry-After` (delta-seconds or an HTTP-date).
/// Values that do not parse are ignored.
pub(crate) fn retry_after(headers: &HeaderMap, now: DateTime<Utc>) -> Option<Duration> {
    let text = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    text("retry-after-ms")
        .and_then(parse_retry_after_ms)
        .or_else(|| text("retry-after").and_then(|value| parse_retry_after(value, now)))
}

/// A `retry-after-ms` value: a non-negative number of milliseconds.
pub(crate) fn parse_retry_after_ms(text: &str) -> Option<Duration> {
    let millis: f64 = text.trim().parse().ok()?;
    if !millis.is_finite() || millis < 0.0 {
        return None;
    }
    Duration::try_from_secs_f64(millis / 1000.0).ok()
}

/// A `Retry-After` value: delta-seconds (fractions tolerated) or an HTTP-date, which gives the
/// wait from `now` (zero when the date has passed).
pub(crate) fn parse_retry_after(text: &str, now: DateTime<Utc>) -> Option<Duration> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if text.bytes().all(|byte| byte.is_ascii_digit()) {
        // All digits but too long for u64: the server wants a very long wait.
        return Some(Duration::from_secs(text.parse().unwrap_or(u64::MAX)));
    }
    if let Ok(seconds) = text.parse::<f64>() {
        if !seconds.is_finite() || seconds < 0.0 {
            return None;
        }
        return Duration::try_from_secs_f64(seconds).ok();
    }
    let date = parse_http_date(text)?;
    Some((date - now).to_std().unwrap_or(Duration::ZERO))
}

/// An HTTP-date in any of the three forms RFC 9110 lets a recipient accept: IMF-fixdate
/// (`Sun, 06 Nov 1994 08:49:37 GMT`), RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime
/// (`Sun Nov  6 08:49:37 1994`).
fn parse_http_date(text: &str) -> Option<DateTime<Utc>> {
    if let Ok(date) = DateTime::parse_from_rfc2822(text) {
        return Some(date.with_timezone(&Utc));
    }
    ["%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"]
        .iter()
        .find_map(|format| NaiveDateTime::parse_from_str(text, format).ok())
        .map(|naive| naive.and_utc())
}

/// A protobuf duration as Google writes it in JSON (`"37s"`, `"1.5s"`), as in the
/// `retryDelay` of a `google.rpc.RetryInfo` error detail.
pub(crate) fn parse_protobuf_duration(text: &str) -> Option<Duration> {
    let seconds: f64 = text.trim().strip_suffix('s')?.parse().ok()?;
    if !seconds.is_finite() || seconds < 0.0 {
        return None;
    }
    Duration::try_from_secs_f64(seconds).ok()
}

/// Whether a transport error means the connection failed before any answer came (refused,
/// reset, closed by the server), which is worth another attempt. Timeouts are not.
pub(crate) fn is_connection_failure(error: &reqwest::Error) -> bool {
    if error.is_timeout() {
        return false;
    }
    if error.is_connect() {
        return true;
    }
    let mut source = error.source();
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionRefused
                    | std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::BrokenPipe
            )
        {
            return true;
        }
        // hyper's `IncompleteMessage`, which carries no io error: the server closed the
        // connection without answering. hyper is not a direct dependency, so its text is all
        // there is to go on.
        if cause.to_string().contains("connection closed before message completed") {
            return true;
        }
        source = cause.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone as _;
    use reqwest::header::HeaderValue;

    use super::*;

    fn settings(max_retries: u32, max_backoff: Duration) -> ClientSettings {
        ClientSettings { timeout: Duration::from_secs(30), max_retries, max_backoff }
    }

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    fn secs(seconds: u64) -> Duration {
        Duration::from_secs(seconds)
    }

    #[test]
    fn backoff_doubles_from_250ms_with_jitter_and_never_exceeds_the_cap() {
        // (retry, jitter, max_backoff, expected)
        let cases = [
            (0, 1.0, secs(10), ms(250)),
            (1, 1.0, secs(10), ms(500)),
            (2, 1.0, secs(10), ms(1000)),
            (3, 1.0, secs(10), ms(2000)),
            (0, 0.8, secs(10), ms(200)),
            (0, 1.2, secs(10), ms(300)),
            (2, 0.8, secs(10), ms(800)),
            // The cap wins over doubling and jitter alike.
            (3, 1.2, ms(2000), ms(2000)),
            (10, 1.0, secs(5), secs(5)),
            (40, 1.2, secs(5), secs(5)),
            (u32::MAX, 1.2, secs(60), secs(60)),
            (0, 1.0, Duration::ZERO, Duration::ZERO),
            // Jitter outside ±20 % is clamped.
            (0, 5.0, secs(10), ms(300)),
            (0, 0.0, secs(10), ms(200)),
        ];
        for (retry, jitter, max_backoff, expected) in cases {
            assert_eq!(
                backoff(retry, max_backoff, jitter),
                expected,
                "retry {retry}, jitter {jitter}, max {max_backoff:?}"
            );
        }
    }

    #[test]
    fn random_jitter_stays_within_twenty_percent() {
        for _ in 0..1000 {
            let wait = backoff(3, secs(60), random_jitter());
            assert!((ms(1600)..=ms(2400)).contains(&wait), "{wait:?}");
        }
    }

    #[test]
    fn retry_after_values_parse_as_seconds_dates_or_nothing() {
        let now = Utc.with_ymd_and_hms(2015, 10, 21, 7, 27, 30).single().expect("valid date");
        let cases: [(&str, Option<Duration>); 17] = [
            ("5", Some(secs(5))),
            ("0", Some(Duration::ZERO)),
            (" 7 ", Some(secs(7))),
            ("120", Some(secs(120))),
            ("1.5", Some(ms(1500))),
            ("99999999999999999999999", Some(Duration::from_secs(u64::MAX))),
            ("Wed, 21 Oct 2015 07:28:00 GMT", Some(secs(30))),
            ("Wednesday, 21-Oct-15 07:28:00 GMT", Some(secs(30))),
            ("Wed Oct 21 07:28:00 2015", Some(secs(30))),
            ("Wed, 21 Oct 2015 07:20:00 GMT", Some(Duration::ZERO)),
            ("", None),
            ("soon", None),
            ("-3", None),
            ("NaN", None),
            ("inf", None),
            ("5 seconds", None),
            ("Wed, 21 Oct 2015 25:28:00 GMT", None),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_retry_after(text, now), expected, "Retry-After: {text:?}");
        }
    }

    #[test]
    fn retry_after_ms_values_parse_as_milliseconds() {
        let cases = [
            ("1500", Some(ms(1500))),
            ("0", Some(Duration::ZERO)),
            ("12.5", Some(Duration::from_micros(12_500))),
            ("", None),
            ("-1", None),
            ("soon", None),
            ("NaN", None),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_retry_after_ms(text), expected, "retry-after-ms: {text:?}");
        }
    }

    #[test]
    fn retry_after_ms_wins_over_retry_after_and_garbage_falls_through() {
        let now = Utc::now();
        // (retry-after-ms, retry-after, expected)
        let cases = [
            (Some("200"), Some("3"), Some(ms(200))),
            (None, Some("3"), Some(secs(3))),
            (Some("later"), Some("3"), Some(secs(3))),
            (Some("200"), None, Some(ms(200))),
            (None, Some("later"), None),
            (None, None, None),
        ];
        for (millis, seconds, expected) in cases {
            let mut headers = HeaderMap::new();
            if let Some(millis) = millis {
                headers.insert("retry-after-ms", HeaderValue::from_static(millis));
            }
            if let Some(seconds) = seconds {
                headers.insert("retry-after", HeaderValue::from_static(seconds));
            }
            assert_eq!(retry_after(&headers, now), expected, "{millis:?} / {seconds:?}");
        }
    }

    #[test]
    fn protobuf_durations_parse_as_seconds() {
        let cases = [
            ("37s", Some(secs(37))),
            ("1.5s", Some(ms(1500))),
            ("0s", Some(Duration::ZERO)),
            ("37", None),
            ("-1s", None),
            ("s", None),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_protobuf_duration(text), expected, "{text:?}");
        }
    }

    #[test]
    fn retryable_statuses_are_429_and_5xx() {
        let cases = [
            (200, false),
            (400, false),
            (401, false),
            (403, false),
            (404, false),
            (408, false),
            (422, false),
            (429, true),
            (500, true),
            (502, true),
            (503, true),
            (504, true),
            (529, true),
            (599, true),
            (600, false),
        ];
        for (status, expected) in cases {
            assert_eq!(is_retryable_status(status), expected, "status {status}");
        }
    }

    #[test]
    fn decisions_follow_status_retry_after_and_the_cap() {
        let answer = |status, retry_after| Outcome::Answer { status, retry_after };
        // (outcome, expected with jitter 1.0, max_backoff 2 s, retries left)
        let cases = [
            (answer(429, None), Decision::Retry { wait: ms(250) }),
            (answer(500, None), Decision::Retry { wait: ms(250) }),
            (answer(503, None), Decision::Retry { wait: ms(250) }),
            (answer(529, None), Decision::Retry { wait: ms(250) }),
            (Outcome::NoConnection, Decision::Retry { wait: ms(250) }),
            (answer(429, Some(secs(1))), Decision::Retry { wait: secs(1) }),
            (answer(503, Some(Duration::ZERO)), Decision::Retry { wait: Duration::ZERO }),
            (answer(429, Some(secs(2))), Decision::Retry { wait: secs(2) }),
            (answer(429, Some(secs(3))), Decision::GiveUp),
            (answer(503, Some(secs(60))), Decision::GiveUp),
            (answer(400, None), Decision::GiveUp),
            (answer(401, None), Decision::GiveUp),
            (answer(404, Some(secs(1))), Decision::GiveUp),
        ];
        for (outcome, expected) in cases {
            let mut retries = Retries::new(Provider::Anthropic, &settings(3, secs(2)));
            assert_eq!(retries.decide_with_jitter(outcome, 1.0), expected, "{outcome:?}");
        }
    }

    #[test]
    fn retries_stop_after_max_retries_with_doubling_waits() {
        let mut retries = Retries::new(Provider::OpenAi, &settings(3, secs(10)));
        let outcome = Outcome::Answer { status: 503, retry_after: None };
        let decisions: Vec<Decision> =
            (0..5).map(|_| retries.decide_with_jitter(outcome, 1.0)).collect();
        assert_eq!(
            decisions,
            [
                Decision::Retry { wait: ms(250) },
                Decision::Retry { wait: ms(500) },
                Decision::Retry { wait: ms(1000) },
                Decision::GiveUp,
                Decision::GiveUp,
            ]
        );
    }

    #[test]
    fn zero_max_retries_never_retries() {
        let mut retries = Retries::new(Provider::Google, &settings(0, secs(10)));
        assert_eq!(retries.decide_with_jitter(Outcome::NoConnection, 1.0), Decision::GiveUp);
    }
}
