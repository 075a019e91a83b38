//! Choosing what of the context file goes into a prompt: the notes on the model in use, then
//! the query patterns, error fixes and optimization insights most relevant to the question
//! (BM25, see [`super::bm25`]), within a token budget.

use super::bm25;
use super::parse::{ContextDoc, Entry, estimate_tokens};
use super::syntax::Section;

/// The sections whose entries are ranked against the question.
const SEARCHED: [Section; 3] =
    [Section::QueryPatterns, Section::ErrorFixes, Section::OptimizationInsights];

/// The sections a [`Selection`] renders, in the order of the specification's file.
const RENDERED: [Section; 4] = [
    Section::QueryPatterns,
    Section::ErrorFixes,
    Section::OptimizationInsights,
    Section::ModelNotes,
];

/// The entries chosen for one prompt, grouped by section.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Selection {
    /// Non-empty groups in [`RENDERED`] order; model notes in file order, the others best first.
    groups: Vec<(Section, Vec<Entry>)>,
    /// The estimated tokens of the chosen entries and their section headings; never more than
    /// the budget, and never less than the estimate of [`Selection::render_markdown`].
    pub(crate) tokens_used: usize,
}

impl Selection {
    /// The chosen entries by section: only sections with entries, in the file's order; within
    /// a section, model notes in file order and other entries best first.
    #[cfg(test)]
    pub(crate) fn groups(&self) -> &[(Section, Vec<Entry>)] {
        &self.groups
    }

    /// Every chosen entry, section by section.
    #[cfg(test)]
    pub(crate) fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.groups.iter().flat_map(|(_, entries)| entries)
    }

    /// Whether nothing was chosen.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The titles of the chosen entries in the order they are rendered (a split entry's title
    /// once).
    pub(crate) fn titles(&self) -> Vec<String> {
        let mut titles: Vec<String> = Vec::new();
        for (_, entries) in &self.groups {
            for entry in entries {
                if titles.last().map(String::as_str) != Some(entry.title()) {
                    titles.push(entry.title().to_owned());
                }
            }
        }
        titles
    }

    /// The chosen entries as markdown for a prompt: a `##` heading per section (as orca writes
    /// it), then each entry's title as `###` and its body. Empty when nothing was chosen.
    pub(crate) fn render_markdown(&self) -> String {
        let mut markdown = String::new();
        for (section, entries) in &self.groups {
            markdown.push_str(&section_markdown(section));
            for entry in entries {
                markdown.push_str(&entry.markdown());
            }
        }
        let trimmed = markdown.trim_end().len();
        markdown.truncate(trimmed);
        if !markdown.is_empty() {
            markdown.push('\n');
        }
        markdown
    }

    /// Add `entry` if it fits in `budget` with the heading of its section (when it is the
    /// section's first entry); whether it was added.
    fn try_add(&mut self, entry: &Entry, budget: usize) -> bool {
        let group = self.groups.iter().position(|(section, _)| section == entry.section());
        let heading_cost =
            if group.is_some() { 0 } else { estimate_tokens(&section_markdown(entry.section())) };
        let cost = entry.tokens() + heading_cost;
        if self.tokens_used + cost > budget {
            return false;
        }
        self.tokens_used += cost;
        match group {
            Some(index) => self.groups[index].1.push(entry.clone()),
            None => {
                self.groups.push((entry.section().clone(), vec![entry.clone()]));
                self.groups.sort_by_key(|(section, _)| {
                    RENDERED.iter().position(|rendered| rendered == section)
                });
            }
        }
        true
    }
}

/// The `##` heading of a section in a rendered selection.
fn section_markdown(section: &Section) -> String {
    format!("## {}\n\n", section.heading())
}

/// Choose what of `doc` goes into the prompt for `question`, sent to `model`, within
/// `budget_tokens` estimated tokens.
///
/// The notes on `model` (see [`model_notes`]) come first. Then the entries of the query
/// patterns, error fixes and optimization insights are ranked by BM25 against the question
/// (title and body as each entry's text); entries scoring 0 are skipped, and the rest are
/// added in rank order while they fit, an entry too large for what is left being skipped in
/// favour of smaller ones further down.
pub(crate) fn select(
    doc: &ContextDoc,
    question: &str,
    model: &str,
    budget_tokens: usize,
) -> Selection {
    let mut selection = Selection::default();
    for note in model_notes(doc, model) {
        selection.try_add(note, budget_tokens);
    }
    let candidates: Vec<&Entry> =
        doc.entries().iter().filter(|entry| SEARCHED.contains(entry.section())).collect();
    let texts: Vec<String> =
        candidates.iter().map(|entry| format!("{}\n{}", entry.title(), entry.body())).collect();
    let index = bm25::Index::new(&texts);
    for (position, _) in index.ranked(question) {
        selection.try_add(candidates[position], budget_tokens);
    }
    selection
}

/// A model or note name as compared: lowercase, trimmed, whitespace as `-`, without a leading
/// `models/` and without trailing version suffixes: a date (`-20240307`, `-2024-08-06`,
/// `@20240620`) or `-latest`.
pub(crate) fn normalize_model(name: &str) -> String {
    let lowered = name.trim().to_lowercase();
    let mut name = lowered.split_whitespace().collect::<Vec<_>>().join("-");
    if let Some(rest) = name.strip_prefix("models/") {
        name = rest.to_owned();
    }
    loop {
        let stripped = strip_version_suffix(&name);
        if stripped.len() == name.len() || stripped.is_empty() {
            return name;
        }
        name = stripped.to_owned();
    }
}

/// `name` without one trailing `-latest`, `-YYYYMMDD`, `@YYYYMMDD` or `-YYYY-MM-DD`.
fn strip_version_suffix(name: &str) -> &str {
    if let Some(rest) = name.strip_suffix("-latest") {
        return rest;
    }
    let digits = |text: &str, count: usize| {
        text.len() == count && text.bytes().all(|byte| byte.is_ascii_digit())
    };
    if let Some(at) = name.rfind(['-', '@'])
        && digits(&name[at + 1..], 8)
    {
        return &name[..at];
    }
    // -YYYY-MM-DD: the last 11 bytes.
    if name.len() > 11 && name.is_char_boundary(name.len() - 11) {
        let (rest, date) = name.split_at(name.len() - 11);
        let parts: Vec<&str> = date.split('-').collect();
        if let ["", year, month, day] = parts.as_slice()
            && digits(year, 4)
            && digits(month, 2)
            && digits(day, 2)
        {
            return rest;
        }
    }
    name
}

/// How well a note's (normalized) title fits a (normalized) model; higher is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fit {
    /// The model is a `-`-prefix of the title (notes on `gemini-1.5-pro` for model
    /// `gemini-1.5`): the shorter the title, the closer.
    ModelIsPrefix(std::cmp::Reverse<usize>),
    /// The title is a `-`-prefix of the model (notes on `gpt-4o` for `gpt-4o-mini`): the longer
    /// the title, the closer.
    TitleIsPrefix(usize),
    /// The same name.
    Exact,
}

/// Whether `prefix` is `name` cut at a `-`.
fn is_dash_prefix(prefix: &str, name: &str) -> bool {
    name.len() > prefix.len() && name.starts_with(prefix) && name[prefix.len()..].starts_with('-')
}

/// How `title` fits `model` (both normalized), if at all.
fn fit(title: &str, model: &str) -> Option<Fit> {
    if title.is_empty() || model.is_empty() {
        None
    } else if title == model {
        Some(Fit::Exact)
    } else if is_dash_prefix(title, model) {
        Some(Fit::TitleIsPrefix(title.len()))
    } else if is_dash_prefix(model, title) {
        Some(Fit::ModelIsPrefix(std::cmp::Reverse(title.len())))
    } else {
        None
    }
}

/// The `###` entries of the model notes about `model`, in file order: those whose title fits
/// best (the same name after [`normalize_model`], else the longest title that `model` starts
/// with at a `-`, else the shortest title that starts with `model` at a `-`). So notes on
/// `gpt-4o` serve `gpt-4o-2024-08-06` and `gpt-4o-mini` only when there are no notes on
/// `gpt-4o-mini`.
pub(crate) fn model_notes<'a>(doc: &'a ContextDoc, model: &str) -> Vec<&'a Entry> {
    let model = normalize_model(model);
    // Content under the section heading before any ### is titled by the section: not a model.
    let notes: Vec<(&Entry, String)> = doc
        .entries_in(&Section::ModelNotes)
        .filter(|entry| !entry.is_section_intro())
        .map(|entry| (entry, normalize_model(entry.title())))
        .collect();
    let best = notes
        .iter()
        .filter_map(|(_, title)| fit(title, &model).map(|fit| (fit, title)))
        .max_by_key(|(fit, _)| *fit);
    let Some((_, best_title)) = best else {
        return Vec::new();
    };
    notes.iter().filter(|(_, title)| title == best_title).map(|(entry, _)| *entry).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::parse::parse;

    /// A context file with a few entries of every kind.
    const DOC: &str = "# Context

## Database Schema Overview
<!-- orca:schema:start -->
Tables: customer, invoice, invoice_line, track.
<!-- orca:schema:end -->

## Successful Query Patterns
### Revenue by customer
Sum `invoice.total` per customer.
```sql
SELECT c.customer_id, sum(i.total) AS revenue FROM customer c JOIN invoice i USING (customer_id) GROUP BY 1;
```
### Top tracks by sales
```sql
SELECT t.name, sum(il.quantity) FROM track t JOIN invoice_line il USING (track_id) GROUP BY 1;
```
### Albums per artist
Count albums for each artist.

## Common Error Patterns & Fixes
### Revenue column does not exist
**Error**: `column \"revenue\" does not exist`
**Fix**: compute revenue from `invoice.total`.

## Query Optimization Insights
### Aggregate before joining
Aggregate invoice lines per track before joining large tables.

## Model Performance Notes
General guidance for all models.
### claude-3-5-sonnet
- Strong at joins.
### gpt-4o
- Prefers CTEs.
### gpt-4o-mini
- Keep prompts short.
### models/gemini-1.5-pro
- Good with long schemas.
";

    fn doc() -> ContextDoc {
        parse(DOC).unwrap_or_default()
    }

    fn titles(selection: &Selection) -> Vec<&str> {
        selection.entries().map(Entry::title).collect()
    }

    #[test]
    fn the_question_picks_the_relevant_entries_best_first() {
        let doc = doc();
        assert!(!doc.entries().is_empty());
        let cases: &[(&str, &[&str])] = &[
            ("revenue by customer", &["Revenue by customer", "Revenue column does not exist"]),
            // "tracks" meets "track" (plurals fold), so the insight on tracks comes second.
            ("which tracks sell best", &["Top tracks by sales", "Aggregate before joining"]),
            ("how many albums per artist", &["Albums per artist"]),
            ("weather tomorrow", &[]),
        ];
        for (question, expected) in cases {
            let selection = select(&doc, question, "unknown-model", 10_000);
            assert_eq!(titles(&selection), *expected, "{question:?}");
        }
        let selection = select(&doc, "revenue by customer", "", 10_000);
        let groups: Vec<&Section> = selection.groups().iter().map(|(section, _)| section).collect();
        assert_eq!(groups, [&Section::QueryPatterns, &Section::ErrorFixes]);
    }

    #[test]
    fn the_budget_is_respected_and_smaller_entries_fill_what_is_left() {
        let doc = doc();
        let question = "revenue customer tracks sales albums artist joining invoice";
        let everything = select(&doc, question, "gpt-4o", usize::MAX);
        let full = everything.tokens_used;
        assert!(full > 0);
        for budget in [0, 1, 10, 20, 30, 40, 50, 60, 80, 100, 150, full - 1, full, full + 1] {
            let selection = select(&doc, question, "gpt-4o", budget);
            assert!(selection.tokens_used <= budget, "budget {budget}: {}", selection.tokens_used);
            assert!(
                estimate_tokens(&selection.render_markdown()) <= selection.tokens_used,
                "budget {budget}"
            );
            assert_eq!(selection.is_empty(), selection.tokens_used == 0);
        }
        assert_eq!(titles(&select(&doc, question, "gpt-4o", full)), titles(&everything));
        assert!(select(&doc, question, "gpt-4o", 0).is_empty());
    }

    #[test]
    fn an_entry_too_large_for_the_rest_is_skipped_for_smaller_ones() {
        let big = "x ".repeat(300);
        let text = format!(
            "## Successful Query Patterns\n### Revenue big\nrevenue revenue {big}\n### Revenue small\nrevenue\n"
        );
        let doc = parse(&text).unwrap_or_default();
        let small = doc.entries().iter().find(|entry| entry.title() == "Revenue small");
        let budget =
            small.map_or(0, Entry::tokens) + estimate_tokens("## Successful Query Patterns\n\n");
        let selection = select(&doc, "revenue", "", budget);
        assert_eq!(titles(&selection), ["Revenue small"]);
        assert_eq!(selection.tokens_used, budget);
    }

    #[test]
    fn model_notes_match_by_normalized_name_preferring_the_closest() {
        let doc = doc();
        let cases: &[(&str, &[&str])] = &[
            ("claude-3-5-sonnet", &["claude-3-5-sonnet"]),
            ("claude-3-5-sonnet-latest", &["claude-3-5-sonnet"]),
            ("claude-3-5-sonnet-20241022", &["claude-3-5-sonnet"]),
            ("Claude-3-5-Sonnet", &["claude-3-5-sonnet"]),
            ("gpt-4o", &["gpt-4o"]),
            ("gpt-4o-2024-08-06", &["gpt-4o"]),
            ("gpt-4o-mini", &["gpt-4o-mini"]),
            ("gpt-4o-mini-2024-07-18", &["gpt-4o-mini"]),
            ("gpt-4o-audio-preview", &["gpt-4o"]),
            ("gpt-4", &[]),
            ("gpt-4o1", &[]),
            ("models/gemini-1.5-pro-latest", &["models/gemini-1.5-pro"]),
            ("gemini-1.5-pro-002", &["models/gemini-1.5-pro"]),
            ("gemini-1.5", &["models/gemini-1.5-pro"]),
            ("claude-3-haiku", &[]),
            ("", &[]),
            ("Model Performance Notes", &[]),
        ];
        for (model, expected) in cases {
            let found: Vec<&str> = model_notes(&doc, model).into_iter().map(Entry::title).collect();
            assert_eq!(found, *expected, "model_notes({model:?})");
        }
    }

    #[test]
    fn model_names_are_normalized() {
        let cases = [
            ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
            ("claude-3-5-sonnet@20240620", "claude-3-5-sonnet"),
            ("claude-3-5-sonnet-latest", "claude-3-5-sonnet"),
            ("gpt-4o-2024-08-06", "gpt-4o"),
            ("models/gemini-1.5-pro-latest", "gemini-1.5-pro"),
            ("  GPT 4o  ", "gpt-4o"),
            ("gpt-4o-mini", "gpt-4o-mini"),
            ("20240307", "20240307"),
            ("-latest", "-latest"),
            ("o1-2024-12-17", "o1"),
        ];
        for (name, expected) in cases {
            assert_eq!(normalize_model(name), expected, "normalize_model({name:?})");
        }
    }

    #[test]
    fn model_notes_come_first_in_the_budget_and_render_with_their_section() {
        let doc = doc();
        let notes = model_notes(&doc, "gpt-4o");
        let budget = notes.iter().map(|entry| entry.tokens()).sum::<usize>()
            + estimate_tokens("## Model Performance Notes\n\n");
        let selection = select(&doc, "revenue by customer", "gpt-4o", budget);
        assert_eq!(titles(&selection), ["gpt-4o"]);
        assert_eq!(
            selection.render_markdown(),
            "## Model Performance Notes\n\n### gpt-4o\n\n- Prefers CTEs.\n"
        );
        let selection = select(&doc, "albums per artist", "gpt-4o-mini", 10_000);
        assert_eq!(
            selection.render_markdown(),
            "## Successful Query Patterns\n\n### Albums per artist\n\nCount albums for each artist.\n\n\
             ## Model Performance Notes\n\n### gpt-4o-mini\n\n- Keep prompts short.\n"
        );
        assert_eq!(Selection::default().render_markdown(), "");
    }
}
