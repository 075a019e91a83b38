//! Proposed additions to the context file, for a person to review: the prompt that asks a model
//! for them (from recent failures, down-rated calls and the attempts that fixed them), reading
//! the model's answer, and the file as it would be with the additions, from which the caller
//! writes a unified diff. Nothing here writes the context file.

use serde::Deserialize;
use serde_json::Value;

/// The system prompt of `orca context suggest`.
pub(crate) const SUGGEST_SYSTEM_PROMPT: &str = "You help curate a Markdown file of lessons that \
an SQL generator reads before it writes PostgreSQL for a database. You are given recent failures \
and poorly rated answers, with the attempts that fixed them when there were any. Propose only \
lessons that would have prevented these failures and that are true for this database: a \
successful query pattern (a title, one sentence on when to use it, and a ```sql block), an error \
pattern with its fix (a title, then **Error**: the database's error, **Fix**: what to write \
instead), or an optimization insight. Never repeat a lesson the file already has. Answer with \
one JSON object and nothing else: {\"patterns\": [{\"title\": ..., \"body\": ...}], \"fixes\": \
[{\"title\": ..., \"body\": ...}], \"insights\": [{\"title\": ..., \"body\": ...}]}; bodies are \
Markdown. Empty lists are fine when there is nothing worth adding.";

/// One proposed entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct Addition {
    pub(crate) title: String,
    pub(crate) body: String,
}

/// What a model proposes, by section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub(crate) struct Additions {
    #[serde(default)]
    pub(crate) patterns: Vec<Addition>,
    #[serde(default)]
    pub(crate) fixes: Vec<Addition>,
    #[serde(default)]
    pub(crate) insights: Vec<Addition>,
}

impl Additions {
    pub(crate) fn len(&self) -> usize {
        self.patterns.len() + self.fixes.len() + self.insights.len()
    }
}

/// The user turn: the lessons (as JSON) and the titles the file already has.
pub(crate) fn prompt(lessons: &Value, existing_titles: &[String]) -> String {
    let lessons = serde_json::to_string_pretty(lessons).unwrap_or_default();
    let titles = if existing_titles.is_empty() {
        "(none)".to_owned()
    } else {
        existing_titles.iter().map(|title| format!("- {title}")).collect::<Vec<_>>().join("\n")
    };
    format!(
        "# Entries the context file already has\n\n{titles}\n\n# Recent failures and poorly rated answers (JSON)\n\n{lessons}\n\nPropose additions as the JSON object described."
    )
}

/// Why a model's answer could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the model's answer is not the JSON object asked for: {0}")]
pub(crate) struct AnswerError(String);

/// Read the model's answer: a JSON object, bare or in a fenced block. Entries without a title
/// or a body are dropped.
///
/// # Errors
///
/// [`AnswerError`] when no such object can be read.
pub(crate) fn parse_answer(text: &str) -> Result<Additions, AnswerError> {
    let start = text.find('{').ok_or_else(|| AnswerError("no JSON object".to_owned()))?;
    let end = text.rfind('}').ok_or_else(|| AnswerError("no JSON object".to_owned()))?;
    if end < start {
        return Err(AnswerError("no JSON object".to_owned()));
    }
    let mut additions: Additions =
        serde_json::from_str(&text[start..=end]).map_err(|error| AnswerError(error.to_string()))?;
    for list in [&mut additions.patterns, &mut additions.fixes, &mut additions.insights] {
        list.retain(|addition| {
            !addition.title.trim().is_empty()
                && !addition.body.trim().is_empty()
                && fits_in_an_entry(&addition.body)
        });
        for addition in list.iter_mut() {
            addition.title = addition.title.trim().replace('\n', " ");
            addition.body = addition.body.trim().to_owned();
        }
    }
    Ok(additions)
}

/// Whether a proposed body stays inside its entry: no `#` or `##` heading (which would end the
/// section), no schema marker, and its code fences closed.
fn fits_in_an_entry(body: &str) -> bool {
    let lines: Vec<String> = body.lines().map(str::to_owned).collect();
    let top_headings = headings(&lines).any(|(_, level, _)| level <= 2);
    let fences = lines
        .iter()
        .filter(|line| line.trim_start().starts_with("```") || line.trim_start().starts_with("~~~"))
        .count();
    !top_headings && !body.contains("<!-- orca:schema") && fences % 2 == 0
}

/// The `##` headings the additions go under, with the words that recognise them.
const SECTIONS: [(&str, &str); 3] = [
    ("Successful Query Patterns", "successful query patterns"),
    ("Common Error Patterns & Fixes", "common error patterns fixes"),
    ("Query Optimization Insights", "query optimization insights"),
];

/// The context file with `additions` appended to their sections (a missing section is added at
/// the end). An addition whose title the file already has (ignoring case) is left out.
pub(crate) fn apply(text: &str, additions: &Additions) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let lists = [&additions.patterns, &additions.fixes, &additions.insights];
    for ((heading, words), list) in SECTIONS.iter().zip(lists) {
        let existing = existing_titles(&lines);
        let new: Vec<&Addition> = list
            .iter()
            .filter(|addition| !existing.contains(&addition.title.to_lowercase()))
            .collect();
        if new.is_empty() {
            continue;
        }
        let mut block = Vec::new();
        for addition in new {
            block.push(format!("### {}", addition.title));
            block.extend(addition.body.lines().map(str::to_owned));
            block.push(String::new());
        }
        match section_end(&lines, words) {
            Some(end) => {
                // Keep one blank line between the section's last entry and the new ones.
                let mut at = end;
                while at > 0 && lines[at - 1].trim().is_empty() {
                    at -= 1;
                }
                let mut insert = vec![String::new()];
                insert.extend(block);
                // The block ends with a blank line; keep it only before a line that is not one.
                if lines.get(at).is_none_or(|next| next.trim().is_empty()) {
                    insert.pop();
                }
                lines.splice(at..at, insert);
            }
            None => {
                while lines.last().is_some_and(|line| line.trim().is_empty()) {
                    lines.pop();
                }
                lines.push(String::new());
                lines.push(format!("## {heading}"));
                lines.push(String::new());
                lines.extend(block);
                lines.pop();
            }
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// Lowercased `###` titles of the file, outside code blocks.
fn existing_titles(lines: &[String]) -> Vec<String> {
    headings(lines)
        .filter(|(_, level, _)| *level == 3)
        .map(|(_, _, title)| title.to_lowercase())
        .collect()
}

/// The line index where the `##` section matching `words` ends (the next `#`/`##` heading, or
/// the end of the file).
fn section_end(lines: &[String], words: &str) -> Option<usize> {
    let all: Vec<(usize, usize, String)> = headings(lines).collect();
    let position =
        all.iter().position(|(_, level, title)| *level == 2 && normalized(title) == words)?;
    let end = all[position + 1..]
        .iter()
        .find(|(_, level, _)| *level <= 2)
        .map_or(lines.len(), |(index, _, _)| *index);
    Some(end)
}

/// `(line index, level, title)` of every ATX heading outside fenced code.
fn headings(lines: &[String]) -> impl Iterator<Item = (usize, usize, String)> + '_ {
    let mut fence: Option<char> = None;
    lines.iter().enumerate().filter_map(move |(index, line)| {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            let marker = trimmed.chars().next().unwrap_or('`');
            fence = match fence {
                None => Some(marker),
                Some(open) if open == marker => None,
                other => other,
            };
            return None;
        }
        if fence.is_some() {
            return None;
        }
        let level = trimmed.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&level) && trimmed[level..].starts_with(' ') {
            Some((index, level, trimmed[level..].trim().trim_end_matches('#').trim().to_owned()))
        } else {
            None
        }
    })
}

/// Lowercase words of a heading, punctuation dropped.
fn normalized(title: &str) -> String {
    title
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# Supabase SQL Context Learning\n\n## Successful Query Patterns\n\n### Revenue by customer\nSum invoice.total.\n\n## Common Error Patterns & Fixes\n\n### Column Name Issues\n**Error**: x\n**Fix**: y\n\n```sql\n## not a heading\n```\n\n## Model Performance Notes\n\n### gpt-4o\n- fine\n";

    fn addition(title: &str, body: &str) -> Addition {
        Addition { title: title.to_owned(), body: body.to_owned() }
    }

    #[test]
    fn additions_go_to_the_end_of_their_sections_and_known_titles_are_left_out() {
        let additions = Additions {
            patterns: vec![addition("Tracks per genre", "```sql\nSELECT 1\n```")],
            fixes: vec![
                addition("column name issues", "dup"),
                addition("invoice_date is a timestamp", "**Error**: a\n**Fix**: b"),
            ],
            insights: vec![addition("Filter by date first", "- use a range")],
        };
        let out = apply(FILE, &additions);
        let expected = "# Supabase SQL Context Learning\n\n## Successful Query Patterns\n\n### Revenue by customer\nSum invoice.total.\n\n### Tracks per genre\n```sql\nSELECT 1\n```\n\n## Common Error Patterns & Fixes\n\n### Column Name Issues\n**Error**: x\n**Fix**: y\n\n```sql\n## not a heading\n```\n\n### invoice_date is a timestamp\n**Error**: a\n**Fix**: b\n\n## Model Performance Notes\n\n### gpt-4o\n- fine\n\n## Query Optimization Insights\n\n### Filter by date first\n- use a range\n";
        assert_eq!(out, expected);
        // Applying the same additions again changes nothing.
        assert_eq!(apply(&out, &additions), out);
    }

    #[test]
    fn nothing_to_add_leaves_the_file_as_it_was() {
        assert_eq!(apply(FILE, &Additions::default()), FILE);
    }

    #[test]
    fn bodies_that_would_break_out_of_their_entry_are_dropped() {
        let answer = serde_json::json!({"fixes": [
            {"title": "a", "body": "x\n## New section"},
            {"title": "b", "body": "<!-- orca:schema:end -->"},
            {"title": "c", "body": "```sql\nSELECT 1"},
            {"title": "d", "body": "### sub\nfine"},
        ]});
        let additions = parse_answer(&answer.to_string()).unwrap();
        let titles: Vec<&str> = additions.fixes.iter().map(|a| a.title.as_str()).collect();
        assert_eq!(titles, ["d"]);
    }

    #[test]
    fn answers_are_read_bare_or_fenced_and_empty_entries_dropped() {
        let cases: [(&str, Result<usize, ()>); 4] = [
            (r#"{"patterns": [{"title": "a", "body": "b"}], "fixes": []}"#, Ok(1)),
            (
                "Here:\n```json\n{\"insights\": [{\"title\": \"t\", \"body\": \"x\"}, {\"title\": \"\", \"body\": \"y\"}]}\n```",
                Ok(1),
            ),
            ("no json at all", Err(())),
            ("{\"patterns\": 5}", Err(())),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_answer(text).map(|a| a.len()).map_err(|_| ()), expected, "{text}");
        }
    }
}
