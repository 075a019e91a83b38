//! Parsing of the context file into its sections and entries, with pulldown-cmark's offset
//! iterator so that every entry keeps its exact source markdown.
//!
//! The file has a `#` title and `##` sections. Each `###` heading inside a section starts an
//! entry (its title is the heading's text, its body the markdown up to the next `###` or `##`);
//! content under a `##` before its first `###` is an entry titled by the section. HTML comments
//! are left out of bodies, and an entry larger than [`MAX_ENTRY_TOKENS`] is split at paragraph,
//! list-item and code-block boundaries into chunks that share its title (a fenced code block is
//! never split).

use std::ops::Range;

use pulldown_cmark::{Event, HeadingLevel, Parser, Tag, TagEnd};

use super::overview::{self, MarkerPair};
use super::syntax::{ParseError, Section, markdown_options};

/// Above this estimated size an entry is split into chunks (see [`estimate_tokens`]).
pub(crate) const MAX_ENTRY_TOKENS: usize = 400;

/// The estimated number of LLM tokens in `text`: `(chars + 3) / 4`, that is one token for every
/// four characters (Unicode scalar values), rounded up. It is a budget heuristic, not a
/// tokenizer: close for English prose and SQL with the common BPE vocabularies, and cheap.
pub(crate) fn estimate_tokens(text: &str) -> usize {
    // (chars + 3) / 4.
    text.chars().count().div_ceil(4)
}

/// The 1-based line of byte `offset` in `text`.
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())].iter().filter(|&&byte| byte == b'\n').count() + 1
}

/// One entry (or one chunk of a split entry) of a section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    section: Section,
    title: String,
    body: String,
    line: usize,
    tokens: usize,
    /// Content under the `##` heading before its first `###` (titled by the section).
    section_intro: bool,
}

impl Entry {
    /// The section the entry belongs to.
    pub(crate) fn section(&self) -> &Section {
        &self.section
    }

    /// The `###` heading's text, or the section's heading for content before the first `###`.
    pub(crate) fn title(&self) -> &str {
        &self.title
    }

    /// The entry's markdown exactly as in the file (HTML comments left out), without the
    /// heading and without surrounding blank lines.
    pub(crate) fn body(&self) -> &str {
        &self.body
    }

    /// The 1-based line of the entry's heading.
    #[cfg(test)]
    pub(crate) fn line(&self) -> usize {
        self.line
    }

    /// Whether this is the content under the `##` heading before its first `###`, titled by
    /// the section rather than by a `###` heading.
    pub(crate) fn is_section_intro(&self) -> bool {
        self.section_intro
    }

    /// The estimated tokens of [`Entry::markdown`].
    pub(crate) fn tokens(&self) -> usize {
        self.tokens
    }

    /// The entry as it is put into a prompt: its title as a `###` heading, then its body.
    pub(crate) fn markdown(&self) -> String {
        entry_markdown(&self.title, &self.body)
    }
}

/// The markdown of an entry; [`Entry::tokens`] is its estimate.
fn entry_markdown(title: &str, body: &str) -> String {
    if body.is_empty() { format!("### {title}\n\n") } else { format!("### {title}\n\n{body}\n\n") }
}

/// A parsed context file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ContextDoc {
    title: Option<String>,
    sections: Vec<Section>,
    entries: Vec<Entry>,
    schema_overview: Option<String>,
}

impl ContextDoc {
    /// The text of the `#` title, if the file has one.
    #[cfg(test)]
    pub(crate) fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    /// The `##` sections in file order.
    #[cfg(test)]
    pub(crate) fn sections(&self) -> &[Section] {
        &self.sections
    }

    /// Every entry (and chunk) in file order.
    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The entries of one section in file order.
    pub(crate) fn entries_in<'a>(
        &'a self,
        section: &'a Section,
    ) -> impl Iterator<Item = &'a Entry> {
        self.entries.iter().filter(move |entry| entry.section == *section)
    }

    /// The text between the schema markers, without surrounding blank lines; `None` when there
    /// are no markers or nothing but whitespace between them.
    pub(crate) fn schema_overview(&self) -> Option<&str> {
        self.schema_overview.as_deref()
    }

    /// The titles of the `###` entries of the known sections, in file order (a split entry's
    /// title once).
    pub(crate) fn titles(&self) -> Vec<String> {
        let mut titles: Vec<String> = Vec::new();
        let mut previous: Option<&Entry> = None;
        for entry in &self.entries {
            let continued = previous.is_some_and(|previous| {
                previous.line == entry.line && previous.section == entry.section
            });
            previous = Some(entry);
            if !continued && !entry.section_intro && entry.section.is_known() {
                titles.push(entry.title.clone());
            }
        }
        titles
    }

    /// A short outline for a person: the title, then each section with its entries (title and
    /// estimated tokens; a split entry once, with its number of chunks) and whether the schema
    /// overview is filled in.
    pub(crate) fn outline(&self) -> String {
        let mut outline = String::new();
        if let Some(title) = &self.title {
            outline.push_str(&format!("# {title}\n"));
        }
        for section in &self.sections {
            let mut groups: Vec<(&Entry, usize, usize)> = Vec::new();
            for entry in self.entries_in(section) {
                match groups.last_mut() {
                    Some((first, chunks, tokens)) if first.line == entry.line => {
                        *chunks += 1;
                        *tokens += entry.tokens;
                    }
                    _ => groups.push((entry, 1, entry.tokens)),
                }
            }
            let count = match groups.len() {
                1 => "1 entry".to_owned(),
                count => format!("{count} entries"),
            };
            let note = if section.is_known() { "" } else { ", not used in prompts" };
            outline.push_str(&format!("## {}: {count}{note}\n", section.heading()));
            if *section == Section::SchemaOverview {
                match &self.schema_overview {
                    Some(overview) => outline.push_str(&format!(
                        "  schema overview: {} lines between the markers\n",
                        overview.lines().count()
                    )),
                    None => outline.push_str(
                        "  schema overview: none yet (run `orca context refresh-schema`)\n",
                    ),
                }
            }
            for (entry, chunks, tokens) in groups {
                let split =
                    if chunks > 1 { format!(", in {chunks} chunks") } else { String::new() };
                outline.push_str(&format!("  - {} (~{tokens} tokens{split})\n", entry.title));
            }
        }
        outline
    }
}

/// Parse the context file.
///
/// # Errors
///
/// An empty or whitespace-only text, no known `##` section, a known section appearing twice,
/// and schema markers that are not one start followed by one end inside the
/// `## Database Schema Overview` section. Unknown sections and odd markdown are fine.
pub(crate) fn parse(text: &str) -> Result<ContextDoc, ParseError> {
    if text.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    let mut builder = Builder::new(text);
    let mut depth = 0usize;
    let mut in_top_list = false;
    let mut heading: Option<(HeadingLevel, Range<usize>, String)> = None;
    // Code and HTML blocks, where a marker line is text rather than a marker.
    let mut blocks: Vec<(Range<usize>, bool)> = Vec::new();
    for (event, range) in Parser::new_ext(text, markdown_options()).into_offset_iter() {
        match &event {
            Event::Start(Tag::CodeBlock(_)) => blocks.push((range.clone(), true)),
            Event::Start(Tag::HtmlBlock) => blocks.push((range.clone(), false)),
            _ => {}
        }
        match event {
            Event::Start(Tag::Heading { level, .. }) if depth == 0 && level <= HeadingLevel::H3 => {
                heading = Some((level, range, String::new()));
                depth += 1;
            }
            Event::End(TagEnd::Heading(_)) if depth == 1 && heading.is_some() => {
                depth = 0;
                if let Some((level, range, title)) = heading.take() {
                    builder.heading(level, range, title.trim())?;
                }
            }
            Event::Text(piece) | Event::Code(piece) => {
                if let Some((_, _, title)) = heading.as_mut() {
                    title.push_str(&piece);
                }
            }
            Event::SoftBreak | Event::HardBreak => {
                if let Some((_, _, title)) = heading.as_mut() {
                    title.push(' ');
                }
            }
            Event::Start(tag) => {
                match (&tag, depth) {
                    (Tag::List(_), 0) => in_top_list = true,
                    (Tag::Item, 1) if in_top_list => builder.unit(range, false),
                    (Tag::HtmlBlock, 0) => {
                        let html = text[range.clone()].trim();
                        let comment = html.starts_with("<!--") && html.ends_with("-->");
                        builder.unit(range, comment);
                    }
                    (_, 0) => builder.unit(range, false),
                    _ => {}
                }
                depth += 1;
            }
            Event::End(tag) => {
                depth = depth.saturating_sub(1);
                if depth == 0 && matches!(tag, TagEnd::List(_)) {
                    in_top_list = false;
                }
            }
            Event::Rule if depth == 0 => builder.unit(range, false),
            _ => {}
        }
    }
    builder.finish(&blocks)
}

/// A block of an entry's body: a top-level block, or an item of a top-level list.
#[derive(Debug)]
struct Unit {
    range: Range<usize>,
    /// An HTML comment, left out of the body.
    comment: bool,
}

/// The entry being collected.
#[derive(Debug)]
struct OpenEntry {
    section: Section,
    title: String,
    line: usize,
    /// Content before a section's first `###`: dropped when blank.
    section_level: bool,
    units: Vec<Unit>,
}

/// The state of a parse: the sections seen, the entry being collected, the entries done.
#[derive(Debug)]
struct Builder<'t> {
    text: &'t str,
    title: Option<String>,
    /// Every `##` section with the line of its heading.
    sections: Vec<(Section, usize)>,
    /// Whether content belongs to a section (false before the first `##` and after a `#`).
    in_section: bool,
    open: Option<OpenEntry>,
    entries: Vec<Entry>,
    /// The byte range of the schema overview section, once its heading is seen.
    schema_range: Option<Range<usize>>,
    schema_open: bool,
}

impl<'t> Builder<'t> {
    fn new(text: &'t str) -> Builder<'t> {
        Builder {
            text,
            title: None,
            sections: Vec::new(),
            in_section: false,
            open: None,
            entries: Vec::new(),
            schema_range: None,
            schema_open: false,
        }
    }

    /// A `#`, `##` or `###` heading at the top level.
    fn heading(
        &mut self,
        level: HeadingLevel,
        range: Range<usize>,
        title: &str,
    ) -> Result<(), ParseError> {
        self.flush();
        let line = line_of(self.text, range.start);
        if level == HeadingLevel::H3 {
            if self.in_section
                && let Some((section, _)) = self.sections.last()
            {
                self.open = Some(OpenEntry {
                    section: section.clone(),
                    title: title.to_owned(),
                    line,
                    section_level: false,
                    units: Vec::new(),
                });
            }
            return Ok(());
        }
        self.close_schema_range(range.start);
        if level == HeadingLevel::H1 {
            self.in_section = false;
            if self.title.is_none() {
                self.title = Some(title.to_owned());
            }
            return Ok(());
        }
        let section = Section::from_heading(title);
        if section.is_known()
            && let Some((_, first)) = self.sections.iter().find(|(seen, _)| *seen == section)
        {
            return Err(ParseError::DuplicateSection {
                heading: title.to_owned(),
                line,
                first: *first,
            });
        }
        if section == Section::SchemaOverview {
            self.schema_range = Some(range.start..self.text.len());
            self.schema_open = true;
        }
        self.sections.push((section.clone(), line));
        self.in_section = true;
        self.open = Some(OpenEntry {
            section,
            title: title.to_owned(),
            line,
            section_level: true,
            units: Vec::new(),
        });
        Ok(())
    }

    /// A block of the current entry's body (ignored outside sections).
    fn unit(&mut self, range: Range<usize>, comment: bool) {
        if let Some(open) = self.open.as_mut() {
            open.units.push(Unit { range, comment });
        }
    }

    /// End the schema overview section's range at `offset`, if it is the open section.
    fn close_schema_range(&mut self, offset: usize) {
        if self.schema_open
            && let Some(range) = self.schema_range.as_mut()
        {
            range.end = offset;
        }
        self.schema_open = false;
    }

    /// Turn the open entry into entries, split into chunks when it is large.
    fn flush(&mut self) {
        let Some(open) = self.open.take() else {
            return;
        };
        let pieces = pieces(&open.units);
        if pieces.is_empty() {
            if !open.section_level {
                self.push_entry(&open, String::new());
            }
            return;
        }
        let mut chunk: Vec<Piece> = Vec::new();
        for piece in pieces {
            if !chunk.is_empty() {
                let mut candidate = chunk.clone();
                candidate.push(piece.clone());
                if estimate_tokens(&join(self.text, &candidate)) > MAX_ENTRY_TOKENS {
                    let body = join(self.text, &chunk);
                    self.push_entry(&open, body);
                    chunk.clear();
                }
            }
            chunk.push(piece);
        }
        let body = join(self.text, &chunk);
        if open.section_level && body.trim().is_empty() {
            return;
        }
        self.push_entry(&open, body);
    }

    fn push_entry(&mut self, open: &OpenEntry, body: String) {
        let tokens = estimate_tokens(&entry_markdown(&open.title, &body));
        self.entries.push(Entry {
            section: open.section.clone(),
            title: open.title.clone(),
            body,
            line: open.line,
            tokens,
            section_intro: open.section_level,
        });
    }

    /// The parsed document, once the markers and sections are checked (`blocks`: the code and
    /// HTML blocks of the text, `true` for code).
    fn finish(mut self, blocks: &[(Range<usize>, bool)]) -> Result<ContextDoc, ParseError> {
        self.flush();
        self.close_schema_range(self.text.len());
        if !self.sections.iter().any(|(section, _)| section.is_known()) {
            return Err(ParseError::NoKnownSection);
        }
        let pair: Option<MarkerPair> = overview::strict_markers(self.text)?;
        let schema_overview = match pair {
            Some(pair) => {
                if let Some(line) = overview::marker_outside(&pair, self.schema_range.clone()) {
                    return Err(ParseError::MisplacedMarker { line });
                }
                // A marker line inside a code block (or an HTML block opened before it) is read
                // as text by the markdown parser: the sections would then not be where the
                // markers say, and replacing the overview would change other entries.
                if let Some(line) = overview::marker_inside(&pair, blocks) {
                    return Err(ParseError::MarkerInBlock { line });
                }
                pair.overview(self.text).map(str::to_owned)
            }
            None => None,
        };
        Ok(ContextDoc {
            title: self.title,
            sections: self.sections.into_iter().map(|(section, _)| section).collect(),
            entries: self.entries,
            schema_overview,
        })
    }
}

/// A kept unit and whether the source between it and the previous kept unit can be copied
/// (false when a comment was left out in between).
#[derive(Debug, Clone)]
struct Piece {
    range: Range<usize>,
    follows_previous: bool,
}

/// The units that make up a body: comments left out, and blank units dropped.
fn pieces(units: &[Unit]) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut follows_previous = true;
    for unit in units {
        if unit.comment {
            follows_previous = false;
            continue;
        }
        pieces.push(Piece { range: unit.range.clone(), follows_previous });
        follows_previous = true;
    }
    pieces
}

/// The markdown of `pieces`: their exact source, with the source between them, or a blank
/// line where a comment was left out.
fn join(text: &str, pieces: &[Piece]) -> String {
    let mut body = String::new();
    for (index, piece) in pieces.iter().enumerate() {
        if index > 0 {
            if piece.follows_previous {
                body.push_str(&text[pieces[index - 1].range.end..piece.range.start]);
            } else {
                body.truncate(body.trim_end().len());
                body.push_str("\n\n");
            }
        }
        body.push_str(&text[piece.range.clone()]);
    }
    body.trim_end().trim_start_matches(['\n', '\r']).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::Config;

    /// An entry as the tables write it: section, title, body.
    type Expected<'a> = (Section, &'a str, &'a str);

    fn check(text: &str, expected: &[Expected<'_>]) {
        let doc = match parse(text) {
            Ok(doc) => doc,
            Err(error) => panic!("parse({text:?}) failed: {error}"),
        };
        let found: Vec<(Section, &str, &str)> = doc
            .entries()
            .iter()
            .map(|entry| (entry.section().clone(), entry.title(), entry.body()))
            .collect();
        assert_eq!(found, expected, "parse({text:?})");
    }

    #[test]
    fn sections_and_entries_come_from_the_headings() {
        use Section::{
            ErrorFixes, ModelNotes, OptimizationInsights, Other, QueryPatterns, SchemaOverview,
        };
        let cases: &[(&str, &[Expected<'_>])] = &[
            // The specification's example.
            (
                "# Supabase SQL Context Learning\n\n## Database Schema Overview\n<!-- Auto-generated section -->\n\n\
                 ## Successful Query Patterns\n### Agent Analytics Queries\n[SQL examples with context]\n\n\
                 ## Common Error Patterns & Fixes\n### Column Name Issues\n**Error**: `column \"created_date\" does not exist`\n\
                 **Fix**: Use `created_at` instead\n\n## Query Optimization Insights\n### Effective Patterns\n\
                 - Time filtering best practices\n- Join optimization techniques\n\n## Model Performance Notes\n\
                 ### claude-3-5-sonnet\n- **Strengths**: Complex joins, business logic\n- **Best For**: Analytics and reporting\n",
                &[
                    (QueryPatterns, "Agent Analytics Queries", "[SQL examples with context]"),
                    (
                        ErrorFixes,
                        "Column Name Issues",
                        "**Error**: `column \"created_date\" does not exist`\n**Fix**: Use `created_at` instead",
                    ),
                    (
                        OptimizationInsights,
                        "Effective Patterns",
                        "- Time filtering best practices\n- Join optimization techniques",
                    ),
                    (
                        ModelNotes,
                        "claude-3-5-sonnet",
                        "- **Strengths**: Complex joins, business logic\n- **Best For**: Analytics and reporting",
                    ),
                ],
            ),
            // Headings match case-insensitively, ignoring punctuation and "and".
            (
                "## successful QUERY patterns:\n### A\nx\n## Common error patterns and fixes\n### B\ny\n",
                &[(QueryPatterns, "A", "x"), (ErrorFixes, "B", "y")],
            ),
            // Content before the first ### is an entry titled by the section; comments are left out.
            (
                "## Query Optimization Insights\n<!-- a note to self -->\nUse indexes.\n\n### Joins\nOn keys.\n",
                &[
                    (OptimizationInsights, "Query Optimization Insights", "Use indexes."),
                    (OptimizationInsights, "Joins", "On keys."),
                ],
            ),
            // A comment in the middle of a body is left out, the rest kept.
            (
                "## Successful Query Patterns\n### A\none\n\n<!-- hidden -->\n\ntwo\n",
                &[(QueryPatterns, "A", "one\n\ntwo")],
            ),
            // Unknown sections are kept (never searched); text before any section is ignored.
            (
                "Preamble.\n### Orphan\nignored\n## Successful Query Patterns\n### A\nx\n## Team Notes\n### B\ny\n",
                &[(QueryPatterns, "A", "x"), (Other("Team Notes".to_owned()), "B", "y")],
            ),
            // A `#` heading ends the section; what follows it is outside any section.
            (
                "## Successful Query Patterns\n### A\nx\n# Appendix\nignored\n",
                &[(QueryPatterns, "A", "x")],
            ),
            // #### headings, code blocks with # lines and tables stay in the body.
            (
                "## Successful Query Patterns\n### A\n#### Detail\n```sql\n## not a heading\nselect 1;\n```\n| a | b |\n|---|---|\n| 1 | 2 |\n",
                &[(
                    QueryPatterns,
                    "A",
                    "#### Detail\n```sql\n## not a heading\nselect 1;\n```\n| a | b |\n|---|---|\n| 1 | 2 |",
                )],
            ),
            // A ### with no body is still an entry; blank section-level content is not.
            (
                "## Model Performance Notes\n\n### gpt-4o\n### gpt-4o-mini\nshort\n",
                &[(ModelNotes, "gpt-4o", ""), (ModelNotes, "gpt-4o-mini", "short")],
            ),
            // Inline code in a heading keeps its text; setext headings work too.
            (
                "Successful Query Patterns\n---\n### Use `invoice_line`\nx\n",
                &[(QueryPatterns, "Use invoice_line", "x")],
            ),
            // The schema overview section's entry is the text between the markers (markers are comments).
            (
                "## Database Schema Overview\n<!-- orca:schema:start -->\n- album(album_id)\n<!-- orca:schema:end -->\n",
                &[(SchemaOverview, "Database Schema Overview", "- album(album_id)")],
            ),
        ];
        for (text, expected) in cases {
            check(text, expected);
        }
    }

    #[test]
    fn the_document_knows_its_title_sections_and_overview() {
        let text = "# Context\n## Database Schema Overview\nNotes.\n\n<!-- orca:schema:start -->\n\nTables: album, track.\n\n\
                    <!-- orca:schema:end -->\n## Other Things\n## Successful Query Patterns\n";
        let doc = parse(text).ok();
        let doc = doc.as_ref();
        assert_eq!(doc.and_then(ContextDoc::title), Some("Context"));
        assert_eq!(doc.and_then(ContextDoc::schema_overview), Some("Tables: album, track."));
        assert_eq!(
            doc.map(ContextDoc::sections),
            Some(
                &[
                    Section::SchemaOverview,
                    Section::Other("Other Things".to_owned()),
                    Section::QueryPatterns
                ][..]
            )
        );
        let cases: &[(&str, Option<&str>)] = &[
            ("## Successful Query Patterns\n", None),
            (
                "## Database Schema Overview\n<!-- orca:schema:start -->\n  \n<!-- orca:schema:end -->\n",
                None,
            ),
            (
                "## Database Schema Overview\n<!-- orca:schema:start -->\nx\n  y\n<!-- orca:schema:end -->",
                Some("x\n  y"),
            ),
        ];
        for (text, expected) in cases {
            let doc = parse(text).ok();
            assert_eq!(doc.as_ref().and_then(ContextDoc::schema_overview), *expected, "{text:?}");
        }
    }

    #[test]
    fn titles_and_the_outline_list_each_entry_once() {
        let big = format!("{}\n\n{}", "word ".repeat(300), "word ".repeat(300));
        let text = format!(
            "# Context\n## Database Schema Overview\nNotes.\n## Successful Query Patterns\n### Big\n{big}\n### Small\nx\n\
             ## Team Notes\n### Private\ny\n## Model Performance Notes\n### gpt-4o\n- z\n"
        );
        let doc = parse(&text).unwrap_or_default();
        assert_eq!(doc.entries().iter().filter(|entry| entry.title() == "Big").count(), 2);
        assert_eq!(doc.titles(), ["Big", "Small", "gpt-4o"]);
        assert_eq!(
            doc.outline(),
            "# Context\n\
             ## Database Schema Overview: 1 entry\n  schema overview: none yet (run `orca context refresh-schema`)\n\
             \x20 - Database Schema Overview (~10 tokens)\n\
             ## Successful Query Patterns: 2 entries\n  - Big (~756 tokens, in 2 chunks)\n  - Small (~4 tokens)\n\
             ## Team Notes: 1 entry, not used in prompts\n  - Private (~4 tokens)\n\
             ## Model Performance Notes: 1 entry\n  - gpt-4o (~5 tokens)\n"
        );
    }

    #[test]
    fn malformed_files_are_refused_with_an_actionable_message() {
        let cases: &[(&str, &str)] = &[
            ("", "the context file is empty (an editor may be in the middle of saving it)"),
            (" \n\t\n", "the context file is empty (an editor may be in the middle of saving it)"),
            (
                "# Title\n## Notes\nsome text\n",
                "the context file has no known section; add at least one of `## Database Schema Overview`, \
                 `## Successful Query Patterns`, `## Common Error Patterns & Fixes`, `## Query Optimization Insights`, \
                 `## Model Performance Notes`",
            ),
            (
                "```\n## Successful Query Patterns\n```\n",
                "the context file has no known section; add at least one of `## Database Schema Overview`, \
                 `## Successful Query Patterns`, `## Common Error Patterns & Fixes`, `## Query Optimization Insights`, \
                 `## Model Performance Notes`",
            ),
            (
                "## Successful Query Patterns\n### A\nx\n## Other\n## successful query patterns\n",
                "line 5: section `## successful query patterns` appears again (first on line 1); merge the two",
            ),
            (
                "## Database Schema Overview\n<!-- orca:schema:start -->\nx\n## Successful Query Patterns\n",
                "line 2: `<!-- orca:schema:start -->` has no `<!-- orca:schema:end -->` after it; add the end marker after the overview",
            ),
            (
                "## Database Schema Overview\n<!-- orca:schema:end -->\nx\n<!-- orca:schema:start -->\n",
                "line 2: `<!-- orca:schema:end -->` has no `<!-- orca:schema:start -->` before it; add the start marker or remove this line",
            ),
            (
                "## Database Schema Overview\n<!-- orca:schema:start -->\n<!-- orca:schema:start -->\n<!-- orca:schema:end -->\n",
                "line 3: a second `<!-- orca:schema:start -->` (the first is on line 2); keep one pair of schema markers",
            ),
            (
                "## Database Schema Overview\n<!-- orca:schema:start -->\n<!-- orca:schema:end -->\n<!-- orca:schema:end -->\n",
                "line 4: a second `<!-- orca:schema:end -->` (the first is on line 3); keep one pair of schema markers",
            ),
            (
                "## Successful Query Patterns\n<!-- orca:schema:start -->\n<!-- orca:schema:end -->\n",
                "line 2: the schema markers must be inside the `## Database Schema Overview` section",
            ),
            (
                "## Database Schema Overview\n<!-- orca:schema:start -->\n## Successful Query Patterns\n<!-- orca:schema:end -->\n",
                "line 4: the schema markers must be inside the `## Database Schema Overview` section",
            ),
            (
                // Found by fuzzing: a code block opened between the markers and closed after
                // the end marker (fuzz/regressions/context_file/).
                "## Database Schema Overview\n<!-- orca:schema:start -->\n```sql\nSELECT 1;\n<!-- orca:schema:end -->\n```\n## Successful Query Patterns\n",
                "line 5: the schema marker is inside a code block or an HTML block; close the block before the marker",
            ),
            (
                "## Database Schema Overview\n    <!-- orca:schema:start -->\n<!-- orca:schema:end -->\n",
                "line 2: the schema marker is inside a code block or an HTML block; close the block before the marker",
            ),
        ];
        for (text, expected) in cases {
            let message = parse(text).err().map(|error| error.to_string());
            assert_eq!(message.as_deref(), Some(*expected), "parse({text:?})");
        }
    }

    /// A paragraph of about `chars` characters.
    fn paragraph(word: &str, chars: usize) -> String {
        let mut text = String::new();
        while text.len() + word.len() < chars {
            text.push_str(word);
            text.push(' ');
        }
        text.trim_end().to_owned()
    }

    #[test]
    fn large_entries_are_split_at_block_boundaries_into_chunks_sharing_the_title() {
        let big = paragraph("alpha", 1000);
        let code = format!("```sql\n{}\n```", paragraph("select", 2000));
        let items: Vec<String> =
            (0..12).map(|index| format!("- item {index} {}", paragraph("beta", 150))).collect();
        let list = items.join("\n");
        // (body, expected chunk bodies)
        let cases: Vec<(String, Vec<String>)> = vec![
            // Small: one entry.
            (big.clone(), vec![big.clone()]),
            // Two paragraphs of ~250 tokens: split between them.
            (format!("{big}\n\n{big}"), vec![big.clone(), big.clone()]),
            // A code block above the limit stays whole, after the paragraph before it.
            (
                format!("{big}\n\n{code}\n\ntail"),
                vec![big.clone(), code.clone(), "tail".to_owned()],
            ),
            // A long list is split between items: ~40 tokens each, 10 fit in a chunk.
            (list.clone(), vec![items[..10].join("\n"), items[10..].join("\n")]),
        ];
        for (body, expected) in cases {
            let text = format!("## Successful Query Patterns\n### Big\n{body}\n### Next\nx\n");
            let doc = parse(&text).unwrap_or_default();
            let chunks: Vec<&str> = doc
                .entries()
                .iter()
                .filter(|entry| entry.title() == "Big")
                .map(Entry::body)
                .collect();
            assert_eq!(chunks, expected, "splitting {body:?}");
            for entry in doc.entries() {
                assert_eq!(entry.tokens(), estimate_tokens(&entry.markdown()));
                let expected_line =
                    if entry.title() == "Big" { 2 } else { 4 + body.lines().count() - 1 };
                assert_eq!(entry.line(), expected_line, "{}", entry.title());
            }
        }
    }

    #[test]
    fn token_estimates_round_up_a_quarter_of_the_characters() {
        let cases = [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("ééééé", 2), ("select 1;", 3)];
        for (text, expected) in cases {
            assert_eq!(estimate_tokens(text), expected, "estimate_tokens({text:?})");
        }
    }

    #[test]
    fn section_headings_are_recognised_loosely() {
        let cases = [
            ("Database Schema Overview", Section::SchemaOverview),
            ("database-schema overview", Section::SchemaOverview),
            ("Successful Query Patterns", Section::QueryPatterns),
            ("Common Error Patterns & Fixes", Section::ErrorFixes),
            ("COMMON ERROR PATTERNS AND FIXES", Section::ErrorFixes),
            ("Query Optimization Insights", Section::OptimizationInsights),
            ("Model Performance Notes", Section::ModelNotes),
            ("Model Notes", Section::Other("Model Notes".to_owned())),
            ("  Team  ", Section::Other("Team".to_owned())),
        ];
        for (heading, expected) in cases {
            assert_eq!(Section::from_heading(heading), expected, "{heading:?}");
        }
        for section in Section::KNOWN {
            assert_eq!(Section::from_heading(section.heading()), section);
        }
    }

    fn config(cases: u32) -> Config {
        Config { cases, failure_persistence: None, ..Config::default() }
    }

    /// Pieces of markdown that reach the parser's corners when shuffled.
    fn markdown() -> impl Strategy<Value = String> {
        let pieces = prop::sample::select(vec![
            "# Title\n",
            "## Database Schema Overview\n",
            "## Successful Query Patterns\n",
            "## Common Error Patterns & Fixes\n",
            "## Unknown\n",
            "### Entry\n",
            "#### Deep\n",
            "Setext\n---\n",
            "<!-- orca:schema:start -->\n",
            "<!-- orca:schema:end -->\n",
            "<!-- comment\n",
            "-->\n",
            "```sql\n",
            "```\n",
            "    indented code\n",
            "paragraph text é\n",
            "\n",
            "\r\n",
            "- item\n",
            "  - nested\n",
            "1. first\n",
            "> quote\n",
            "| a | b |\n|---|---|\n",
            "***\n",
            "[link]: http://x\n",
        ]);
        (prop::collection::vec(pieces, 0..40), ".{0,20}").prop_map(|(pieces, tail)| {
            let mut text = pieces.concat();
            text.push_str(&tail);
            text
        })
    }

    proptest! {
        #![proptest_config(config(1024))]

        #[test]
        fn parsing_never_panics_and_entries_fit_or_are_single_blocks(
            text in prop_oneof![markdown(), any::<String>()],
        ) {
            if let Ok(doc) = parse(&text) {
                prop_assert!(doc.sections().iter().any(Section::is_known));
                for entry in doc.entries() {
                    prop_assert_eq!(entry.tokens(), estimate_tokens(&entry.markdown()));
                    prop_assert!(!entry.body().ends_with('\n'));
                }
            }
        }
    }
}
