//! The closest known key to an unknown one, so that a typo in `orca.yaml` or
//! `external-mcps.yaml` is answered with the key that was meant. serde already names the keys a
//! struct expects in its error ("unknown field `x`, expected one of `a`, `b`"); the sections
//! that are split by hand give their own list.

use crate::sql::introspect::edit_distance;

/// The known name closest to `written`, when it is close enough to be a typo of it: at most a
/// third of its characters (and at least one) are edits away.
pub(super) fn closest<'a>(
    written: &str,
    known: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let written = written.to_ascii_lowercase();
    let allowed = (written.chars().count() / 3).max(1);
    known
        .into_iter()
        .map(|name| (edit_distance(&written, &name.to_ascii_lowercase()), name))
        .filter(|(distance, _)| *distance <= allowed)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name)
}

/// `"; did you mean `name`?"` for `written` among `known`, or nothing.
pub(super) fn did_you_mean<'a>(written: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    closest(written, known).map_or_else(String::new, |name| format!("; did you mean `{name}`?"))
}

/// serde's message for an unknown field (or variant), with the closest expected name appended;
/// any other message as it is.
pub(super) fn with_suggestion(message: String) -> String {
    let Some(rest) = message
        .strip_prefix("unknown field `")
        .or_else(|| message.strip_prefix("unknown variant `"))
    else {
        return message;
    };
    let Some((written, expected)) = rest.split_once("`, expected ") else { return message };
    let expected = expected.strip_prefix("one of ").unwrap_or(expected);
    let known = expected.split(", ").map(|name| name.trim_matches('`'));
    let hint = did_you_mean(written, known);
    message + &hint
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_key_is_answered_with_the_closest_known_one() {
        let cases = [
            (
                "unknown field `max_conections`, expected one of `max_connections`, `min_connections`",
                "unknown field `max_conections`, expected one of `max_connections`, `min_connections`; did you mean `max_connections`?",
            ),
            (
                "unknown field `Advertise_URL`, expected `advertise_url`",
                "unknown field `Advertise_URL`, expected `advertise_url`; did you mean `advertise_url`?",
            ),
            (
                "unknown variant `stdoo`, expected one of `stdio`, `http`",
                "unknown variant `stdoo`, expected one of `stdio`, `http`; did you mean `stdio`?",
            ),
            // Nothing close: the list alone.
            (
                "unknown field `flush_every`, expected one of `enabled`, `batch_size`",
                "unknown field `flush_every`, expected one of `enabled`, `batch_size`",
            ),
            ("unknown field `x`, there are no fields", "unknown field `x`, there are no fields"),
            (
                "invalid type: string \"a\", expected u64",
                "invalid type: string \"a\", expected u64",
            ),
        ];
        for (message, expect) in cases {
            assert_eq!(with_suggestion(message.to_owned()), expect);
        }
        assert_eq!(closest("colour", ["servers", "cluster", "catalog"]), None);
        assert_eq!(closest("trackng", ["tracking", "sql"]), Some("tracking"));
        assert_eq!(closest("sq", ["sql", "data"]), Some("sql"));
    }
}
