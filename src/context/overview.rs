//! The generated schema overview inside the context file: the markers that delimit it, finding
//! them, and replacing what lies between them (`orca context refresh-schema`) without touching a
//! byte of the hand-written rest of the file.
//!
//! A marker is a line that holds only the marker (surrounding whitespace allowed), wherever it
//! is: the scan is line-based, not markdown-aware, so that parsing and replacing always agree.

use pulldown_cmark::{Event, HeadingLevel, Parser, Tag, TagEnd};

use super::syntax::{ParseError, SCHEMA_END, SCHEMA_START, Section, markdown_options};

/// Which marker a line holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    Start,
    End,
}

/// A marker line: its 1-based line number and byte range (the range ends after its newline, if
/// it has one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MarkerLine {
    marker: Marker,
    pub(crate) line: usize,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

/// A well-formed pair of markers; the overview is the text between `start.end` and `end.start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MarkerPair {
    pub(crate) start: MarkerLine,
    pub(crate) end: MarkerLine,
}

impl MarkerPair {
    /// The text between the two marker lines, without surrounding blank lines; `None` when it is
    /// blank.
    pub(crate) fn overview<'a>(&self, text: &'a str) -> Option<&'a str> {
        let between = text[self.start.end..self.end.start].trim_matches(['\n', '\r']);
        (!between.trim().is_empty()).then_some(between)
    }
}

/// Every marker line of `text`, in order.
fn marker_lines(text: &str) -> Vec<MarkerLine> {
    let mut markers = Vec::new();
    let mut start = 0;
    for (index, line) in text.split_inclusive('\n').enumerate() {
        let marker = match line.trim() {
            SCHEMA_START => Some(Marker::Start),
            SCHEMA_END => Some(Marker::End),
            _ => None,
        };
        if let Some(marker) = marker {
            markers.push(MarkerLine { marker, line: index + 1, start, end: start + line.len() });
        }
        start += line.len();
    }
    markers
}

/// The markers of `text` when they are well formed: none at all, or exactly one start followed
/// by exactly one end.
///
/// # Errors
///
/// A start without an end, an end without a start before it, or a second start or end, each
/// with the line of the offending marker.
pub(crate) fn strict_markers(text: &str) -> Result<Option<MarkerPair>, ParseError> {
    let mut open: Option<MarkerLine> = None;
    let mut pair: Option<MarkerPair> = None;
    for marker in marker_lines(text) {
        match (marker.marker, open, pair) {
            (Marker::Start, None, None) => open = Some(marker),
            (Marker::Start, Some(first), _)
            | (Marker::Start, None, Some(MarkerPair { start: first, .. })) => {
                return Err(ParseError::DuplicateMarker {
                    marker: SCHEMA_START,
                    line: marker.line,
                    first: first.line,
                });
            }
            (Marker::End, Some(start), _) => {
                pair = Some(MarkerPair { start, end: marker });
                open = None;
            }
            (Marker::End, None, Some(MarkerPair { end: first, .. })) => {
                return Err(ParseError::DuplicateMarker {
                    marker: SCHEMA_END,
                    line: marker.line,
                    first: first.line,
                });
            }
            (Marker::End, None, None) => {
                return Err(ParseError::EndMarkerWithoutStart { line: marker.line });
            }
        }
    }
    match open {
        Some(start) => Err(ParseError::StartMarkerWithoutEnd { line: start.line }),
        None => Ok(pair),
    }
}

/// `text` with the schema overview replaced by `overview`; every byte outside the markers is
/// kept as it was, and applying it twice gives the same text.
///
/// - With a start and an end marker after it, the text between them becomes `overview`.
/// - With only a start marker, `overview` and an end marker are added after it; with only an
///   end marker, a start marker and `overview` are added before it.
/// - With no marker, both (with `overview` between) go right after the
///   `## Database Schema Overview` heading line, above any content the section already has; with
///   no such section either, the section is added after the `#` title, or at the top.
///
/// `overview` is written without surrounding blank lines, and any line of it that is itself a
/// marker is dropped (it would break the pair). It should use no `#` or `##` heading, which
/// would end the section: `###` and deeper are fine.
pub(crate) fn replace_schema_overview(text: &str, overview: &str) -> String {
    let content = clean_overview(overview);
    let markers = marker_lines(text);
    let first_start = markers.iter().find(|marker| marker.marker == Marker::Start);
    let Some(start) = first_start else {
        return match markers.first() {
            // Only end markers: open the pair before the first one.
            Some(end) => {
                format!("{}{SCHEMA_START}\n{content}{}", &text[..end.start], &text[end.start..])
            }
            None => insert_markers(text, &content),
        };
    };
    let end_after =
        markers.iter().find(|marker| marker.marker == Marker::End && marker.start >= start.end);
    match end_after {
        Some(end) => format!("{}{content}{}", &text[..start.end], &text[end.start..]),
        None => {
            let newline = if text[..start.end].ends_with('\n') { "" } else { "\n" };
            format!("{}{newline}{content}{SCHEMA_END}\n{}", &text[..start.end], &text[start.end..])
        }
    }
}

/// `overview` as it goes between the markers: marker lines dropped, no blank lines around it,
/// and ending with a newline unless it is empty.
fn clean_overview(overview: &str) -> String {
    let kept: Vec<&str> = overview
        .split('\n')
        .filter(|line| !matches!(line.trim(), SCHEMA_START | SCHEMA_END))
        .collect();
    let joined = kept.join("\n");
    let trimmed = joined.trim_matches(['\n', '\r']);
    if trimmed.trim().is_empty() { String::new() } else { format!("{trimmed}\n") }
}

/// Add the markers (with `content`) to a text that has none: see [`replace_schema_overview`].
fn insert_markers(text: &str, content: &str) -> String {
    let block = format!("{SCHEMA_START}\n{content}{SCHEMA_END}\n");
    let headings = top_level_headings(text);
    let section = headings.iter().find(|heading| {
        heading.level == HeadingLevel::H2
            && Section::from_heading(&heading.text) == Section::SchemaOverview
    });
    if let Some(section) = section {
        return insert_after_line(text, section.end, &block);
    }
    let first_section = headings.iter().position(|heading| heading.level == HeadingLevel::H2);
    let title = headings
        .iter()
        .take(first_section.unwrap_or(headings.len()))
        .find(|heading| heading.level == HeadingLevel::H1);
    let heading = Section::SchemaOverview.heading();
    match title {
        Some(title) => insert_after_line(text, title.end, &format!("\n## {heading}\n\n{block}")),
        None => format!("## {heading}\n\n{block}\n{text}"),
    }
}

/// `text` with `insertion` added at the start of the line after the one holding byte
/// `offset - 1` (a heading's range ends on or just after its last line).
fn insert_after_line(text: &str, offset: usize, insertion: &str) -> String {
    let at = if offset > 0 && text[..offset].ends_with('\n') {
        offset
    } else {
        text[offset..].find('\n').map_or(text.len(), |index| offset + index + 1)
    };
    let newline = if at == text.len() && !text.ends_with('\n') { "\n" } else { "" };
    format!("{}{newline}{insertion}{}", &text[..at], &text[at..])
}

/// A heading at the top level of the document (not inside a list or a quote).
#[derive(Debug)]
struct TopHeading {
    level: HeadingLevel,
    text: String,
    end: usize,
}

/// The top-level headings of `text`, in order, with the byte where each ends.
fn top_level_headings(text: &str) -> Vec<TopHeading> {
    let mut headings = Vec::new();
    let mut depth = 0usize;
    let mut current: Option<TopHeading> = None;
    for (event, range) in Parser::new_ext(text, markdown_options()).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { level, .. }) if depth == 0 => {
                current = Some(TopHeading { level, text: String::new(), end: range.end });
                depth += 1;
            }
            Event::Start(_) => depth += 1,
            Event::End(TagEnd::Heading(_)) if depth == 1 => {
                depth = 0;
                headings.extend(current.take());
            }
            Event::End(_) => depth = depth.saturating_sub(1),
            Event::Text(piece) | Event::Code(piece) => {
                if let Some(heading) = current.as_mut() {
                    heading.text.push_str(&piece);
                }
            }
            _ => {}
        }
    }
    headings
}

/// The 1-based line of the first marker of `pair` outside `allowed` (the byte range of the
/// schema overview section, if there is one): the markers belong inside that section.
pub(crate) fn marker_outside(
    pair: &MarkerPair,
    allowed: Option<std::ops::Range<usize>>,
) -> Option<usize> {
    let inside = |marker: &MarkerLine| {
        allowed
            .as_ref()
            .is_some_and(|range| range.start <= marker.start && marker.start < range.end)
    };
    [pair.start, pair.end].iter().find(|marker| !inside(marker)).map(|marker| marker.line)
}

/// The line of a marker of `pair` that the markdown parser reads as text: inside a code block
/// (`true` in `blocks`, an indented one may begin on the marker's line) or inside an HTML block
/// that began before the marker's line (one beginning on it is the marker itself).
pub(crate) fn marker_inside(
    pair: &MarkerPair,
    blocks: &[(std::ops::Range<usize>, bool)],
) -> Option<usize> {
    let inside = |marker: &MarkerLine| {
        blocks.iter().any(|(block, code)| {
            (block.start < marker.start || (*code && block.start < marker.end))
                && marker.start < block.end
        })
    };
    [pair.start, pair.end].iter().find(|marker| inside(marker)).map(|marker| marker.line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::Config;

    /// The overview used by most cases.
    const NEW: &str = "- album(album_id, title, artist_id)";

    fn check(text: &str, overview: &str, expected: &str) {
        let replaced = replace_schema_overview(text, overview);
        assert_eq!(replaced, expected, "replace_schema_overview({text:?}, {overview:?})");
        assert_eq!(
            replace_schema_overview(&replaced, overview),
            replaced,
            "applying twice changes {text:?}"
        );
    }

    #[test]
    fn the_overview_between_the_markers_is_replaced_and_the_rest_kept() {
        let cases: &[(&str, &str, &str)] = &[
            // Markers present: only the text between them changes.
            (
                "# T\n\n## Database Schema Overview\n<!-- orca:schema:start -->\nold\nlines\n<!-- orca:schema:end -->\nmine\n",
                NEW,
                "# T\n\n## Database Schema Overview\n<!-- orca:schema:start -->\n- album(album_id, title, artist_id)\n<!-- orca:schema:end -->\nmine\n",
            ),
            // Indented markers with CRLF line ends are still markers and keep their bytes.
            (
                "## Database Schema Overview\r\n  <!-- orca:schema:start -->  \r\nold\r\n<!-- orca:schema:end -->\r\nrest",
                "new\n",
                "## Database Schema Overview\r\n  <!-- orca:schema:start -->  \r\nnew\n<!-- orca:schema:end -->\r\nrest",
            ),
            // Empty markers get filled; an empty overview empties them.
            (
                "## Database Schema Overview\n<!-- orca:schema:start -->\n<!-- orca:schema:end -->\n",
                "\n\nx\n\n",
                "## Database Schema Overview\n<!-- orca:schema:start -->\nx\n<!-- orca:schema:end -->\n",
            ),
            (
                "## Database Schema Overview\n<!-- orca:schema:start -->\nold\n<!-- orca:schema:end -->\n",
                "  \n",
                "## Database Schema Overview\n<!-- orca:schema:start -->\n<!-- orca:schema:end -->\n",
            ),
            // Marker lines inside the overview are dropped, so the pair stays a pair.
            (
                "## Database Schema Overview\n<!-- orca:schema:start -->\n<!-- orca:schema:end -->\n",
                "a\n<!-- orca:schema:end -->\nb",
                "## Database Schema Overview\n<!-- orca:schema:start -->\na\nb\n<!-- orca:schema:end -->\n",
            ),
            // No markers: inserted right after the heading, the section's content kept below.
            (
                "# T\n\n## Database Schema Overview\nHand-written notes.\n\n## Successful Query Patterns\n",
                NEW,
                "# T\n\n## Database Schema Overview\n<!-- orca:schema:start -->\n- album(album_id, title, artist_id)\n<!-- orca:schema:end -->\nHand-written notes.\n\n## Successful Query Patterns\n",
            ),
            // The heading is matched like the parser does (case, `&`, punctuation).
            (
                "## database schema overview:\n",
                "x",
                "## database schema overview:\n<!-- orca:schema:start -->\nx\n<!-- orca:schema:end -->\n",
            ),
            // The heading as the last line, without a newline.
            (
                "## Database Schema Overview",
                "x",
                "## Database Schema Overview\n<!-- orca:schema:start -->\nx\n<!-- orca:schema:end -->\n",
            ),
            // No section: added after the title.
            (
                "# Supabase SQL Context Learning\n\n## Successful Query Patterns\n",
                "x",
                "# Supabase SQL Context Learning\n\n## Database Schema Overview\n\n<!-- orca:schema:start -->\nx\n<!-- orca:schema:end -->\n\n## Successful Query Patterns\n",
            ),
            // A title after the first section does not count: added at the top.
            (
                "## Successful Query Patterns\n# Late title\n",
                "x",
                "## Database Schema Overview\n\n<!-- orca:schema:start -->\nx\n<!-- orca:schema:end -->\n\n## Successful Query Patterns\n# Late title\n",
            ),
            // No title and an empty file.
            (
                "",
                "x",
                "## Database Schema Overview\n\n<!-- orca:schema:start -->\nx\n<!-- orca:schema:end -->\n\n",
            ),
            // A heading-looking line inside a code block is not the section.
            (
                "# T\n```\n## Database Schema Overview\n```\n",
                "x",
                "# T\n\n## Database Schema Overview\n\n<!-- orca:schema:start -->\nx\n<!-- orca:schema:end -->\n```\n## Database Schema Overview\n```\n",
            ),
            // Only a start marker: the overview and an end marker follow it.
            (
                "## Database Schema Overview\n<!-- orca:schema:start -->\nkept\n",
                "x",
                "## Database Schema Overview\n<!-- orca:schema:start -->\nx\n<!-- orca:schema:end -->\nkept\n",
            ),
            (
                "## Database Schema Overview\n<!-- orca:schema:start -->",
                "x",
                "## Database Schema Overview\n<!-- orca:schema:start -->\nx\n<!-- orca:schema:end -->\n",
            ),
            // Only an end marker: a start marker and the overview precede it.
            (
                "## Database Schema Overview\nkept\n<!-- orca:schema:end -->\n",
                "x",
                "## Database Schema Overview\nkept\n<!-- orca:schema:start -->\nx\n<!-- orca:schema:end -->\n",
            ),
        ];
        for (text, overview, expected) in cases {
            check(text, overview, expected);
        }
    }

    #[test]
    fn bytes_outside_the_markers_are_unchanged() {
        let before = "# Title  \r\n\n## Database Schema Overview\n\tTabs   and  spaces\n";
        let after = "\n<!-- orca:schema:end -->\n\n## Successful Query Patterns\n### X\n```sql\nselect 1\n```";
        let text = format!("{before}{SCHEMA_START}{}old{after}", "\n");
        let replaced = replace_schema_overview(&text, "new overview");
        let prefix = format!("{before}{SCHEMA_START}\n");
        assert!(replaced.starts_with(&prefix), "{replaced:?}");
        assert!(replaced.ends_with(&after[1..]), "{replaced:?}");
        assert_eq!(&replaced[prefix.len()..replaced.len() - after.len() + 1], "new overview\n");
    }

    #[test]
    fn strict_markers_reports_each_malformed_pair_with_its_line() {
        // (text, the lines of the start and end markers, or the error)
        type Expected = Result<Option<(usize, usize)>, ParseError>;
        let cases: &[(&str, Expected)] = &[
            ("no markers\n", Ok(None)),
            ("<!-- orca:schema:start -->\nx\n<!-- orca:schema:end -->\n", Ok(Some((1, 3)))),
            ("a\n<!-- orca:schema:start -->\n", Err(ParseError::StartMarkerWithoutEnd { line: 2 })),
            (
                "<!-- orca:schema:end -->\n<!-- orca:schema:start -->\n",
                Err(ParseError::EndMarkerWithoutStart { line: 1 }),
            ),
            (
                "<!-- orca:schema:start -->\n\n<!-- orca:schema:start -->\n<!-- orca:schema:end -->\n",
                Err(ParseError::DuplicateMarker { marker: SCHEMA_START, line: 3, first: 1 }),
            ),
            (
                "<!-- orca:schema:start -->\n<!-- orca:schema:end -->\n<!-- orca:schema:start -->\n",
                Err(ParseError::DuplicateMarker { marker: SCHEMA_START, line: 3, first: 1 }),
            ),
            (
                "<!-- orca:schema:start -->\n<!-- orca:schema:end -->\n<!-- orca:schema:end -->\n",
                Err(ParseError::DuplicateMarker { marker: SCHEMA_END, line: 3, first: 2 }),
            ),
        ];
        for (text, expected) in cases {
            let found =
                strict_markers(text).map(|pair| pair.map(|pair| (pair.start.line, pair.end.line)));
            assert_eq!(&found, expected, "strict_markers({text:?})");
        }
    }

    fn config(cases: u32) -> Config {
        Config { cases, failure_persistence: None, ..Config::default() }
    }

    /// Pieces that make texts with headings, markers and code fences likely.
    fn fragments() -> impl Strategy<Value = String> {
        let pieces = prop::sample::select(vec![
            "# Title\n",
            "## Database Schema Overview\n",
            "## Successful Query Patterns\n",
            "### Entry\n",
            "<!-- orca:schema:start -->\n",
            "<!-- orca:schema:end -->\n",
            "<!-- orca:schema:end -->",
            "```sql\n",
            "```\n",
            "text\n",
            "\n",
            "\r\n",
            "- item\n",
            "  ",
        ]);
        (prop::collection::vec(pieces, 0..16), ".{0,12}").prop_map(|(pieces, tail)| {
            let mut text = pieces.concat();
            text.push_str(&tail);
            text
        })
    }

    proptest! {
        #![proptest_config(config(512))]

        #[test]
        fn replacing_is_idempotent_and_the_last_overview_wins(
            text in prop_oneof![fragments(), ".{0,80}"],
            first in prop_oneof![".{0,40}", "(<!-- orca:schema:(start|end) -->|x|\n|\r){0,6}"],
            second in ".{0,40}",
        ) {
            let once = replace_schema_overview(&text, &first);
            prop_assert_eq!(&replace_schema_overview(&once, &first), &once);
            prop_assert_eq!(replace_schema_overview(&once, &second), replace_schema_overview(&text, &second));
            let pair = strict_markers(&once);
            prop_assume!(pair.is_ok());
            let pair = pair.ok().flatten();
            prop_assert!(pair.is_some(), "no markers in {:?}", once);
            let cleaned = clean_overview(&first);
            let expected = cleaned.trim_matches(['\n', '\r']);
            let found = pair.and_then(|pair| pair.overview(&once)).unwrap_or("");
            prop_assert_eq!(found, if expected.trim().is_empty() { "" } else { expected });
        }
    }
}
