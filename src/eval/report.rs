//! The figures of an eval run: one outcome per question, then accuracy overall and per tag,
//! outcomes, attempts, latency and tokens, as JSON (`report.json`, `--json`) and as Markdown
//! (the terminal table and `report.md`). With `--compare`, both runs, the lift and the
//! questions that flipped.
//!
//! # Design notes
//!
//! `report.rs` sums the items into a `Report` (accuracy overall and per tag, outcomes, attempt and
//! latency percentiles, tokens) or a `Comparison` (the lift and the flipped questions), as JSON and
//! Markdown; `mod.rs` draws `accuracy.png` with `format_results`' chart code (for `--compare`, a
//! figure of bars grouped by tag, the two runs side by side and named in a legend).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

/// What became of one question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Outcome {
    /// The generated SQL returned the gold result.
    Correct,
    /// It ran and returned something else (or failed when run).
    WrongResult,
    /// No valid SQL within the attempts.
    ExceededRetries,
    /// The model wrote a statement that changes data; it was never run.
    NotARead,
    /// The provider failed (after its own retries).
    ProviderError,
    /// The provider or the generated SQL ran out of time.
    Timeout,
    /// The gold SQL is not a read or fails: the question does not count.
    GoldError,
}

impl Outcome {
    pub(crate) const ALL: [Outcome; 7] = [
        Outcome::Correct,
        Outcome::WrongResult,
        Outcome::ExceededRetries,
        Outcome::NotARead,
        Outcome::ProviderError,
        Outcome::Timeout,
        Outcome::GoldError,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Outcome::Correct => "correct",
            Outcome::WrongResult => "wrong_result",
            Outcome::ExceededRetries => "exceeded_retries",
            Outcome::NotARead => "not_a_read",
            Outcome::ProviderError => "provider_error",
            Outcome::Timeout => "timeout",
            Outcome::GoldError => "gold_error",
        }
    }
}

/// Token counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Tokens {
    pub(crate) prompt: i64,
    pub(crate) completion: i64,
}

/// One question's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Item {
    pub(crate) id: String,
    pub(crate) outcome: Outcome,
    /// Model answers used (0 when the model was not asked).
    pub(crate) attempts: u32,
    /// The final SQL (the valid one, or the last one tried).
    pub(crate) sql: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    pub(crate) tokens: Tokens,
    /// Time of the `generate_sql` path (prompt, model, validation, retries).
    pub(crate) latency_ms: u64,
    #[serde(skip)]
    pub(crate) tags: Vec<String>,
}

/// Accuracy of a group of questions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Accuracy {
    /// Questions that count (gold errors left out).
    pub(crate) questions: usize,
    pub(crate) correct: usize,
    pub(crate) accuracy: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct AttemptFigures {
    pub(crate) p50: u32,
    pub(crate) max: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct LatencyFigures {
    pub(crate) p50: u64,
    pub(crate) p95: u64,
}

/// The report of one run over a question set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Report {
    /// Questions in the set.
    pub(crate) questions: usize,
    /// Questions that count: the set without gold errors.
    pub(crate) scored: usize,
    pub(crate) correct: usize,
    /// `correct / scored` (0 when nothing counts).
    pub(crate) accuracy: f64,
    pub(crate) by_tag: BTreeMap<String, Accuracy>,
    pub(crate) by_outcome: BTreeMap<&'static str, usize>,
    pub(crate) attempts: AttemptFigures,
    pub(crate) latency_ms: LatencyFigures,
    pub(crate) tokens: Tokens,
    pub(crate) provider: String,
    pub(crate) model: String,
    pub(crate) use_context: bool,
    pub(crate) items: Vec<Item>,
}

/// The two runs of `--compare`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Comparison {
    pub(crate) with_context: Report,
    pub(crate) without_context: Report,
    /// Accuracy with the context minus accuracy without it.
    pub(crate) lift: f64,
    pub(crate) flipped: Flipped,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Flipped {
    /// Right with the context, not without it.
    pub(crate) gained: Vec<String>,
    /// Right without the context, not with it.
    pub(crate) lost: Vec<String>,
}

fn ratio(correct: usize, questions: usize) -> f64 {
    if questions == 0 { 0.0 } else { correct as f64 / questions as f64 }
}

/// The value at `fraction` of the sorted values (nearest rank), 0 without values.
fn percentile<T: Copy + Ord + Default>(values: &mut [T], fraction: f64) -> T {
    if values.is_empty() {
        return T::default();
    }
    values.sort_unstable();
    let rank = (fraction * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

impl Report {
    /// Sum up the items of one run.
    pub(crate) fn new(items: Vec<Item>, provider: &str, model: &str, use_context: bool) -> Report {
        let counts = |items: &[&Item]| {
            let scored = items.iter().filter(|item| item.outcome != Outcome::GoldError).count();
            let correct = items.iter().filter(|item| item.outcome == Outcome::Correct).count();
            Accuracy { questions: scored, correct, accuracy: ratio(correct, scored) }
        };
        let all: Vec<&Item> = items.iter().collect();
        let overall = counts(&all);
        let mut tags: BTreeMap<String, Vec<&Item>> = BTreeMap::new();
        for item in &items {
            for tag in &item.tags {
                tags.entry(tag.clone()).or_default().push(item);
            }
        }
        let by_tag = tags.into_iter().map(|(tag, items)| (tag, counts(&items))).collect();
        let mut by_outcome: BTreeMap<&'static str, usize> =
            Outcome::ALL.iter().map(|outcome| (outcome.as_str(), 0)).collect();
        for item in &items {
            *by_outcome.entry(item.outcome.as_str()).or_default() += 1;
        }
        let asked: Vec<&Item> = items.iter().filter(|item| item.attempts > 0).collect();
        let mut attempts: Vec<u32> = asked.iter().map(|item| item.attempts).collect();
        let mut latencies: Vec<u64> = asked.iter().map(|item| item.latency_ms).collect();
        let tokens = items.iter().fold(Tokens::default(), |sum, item| Tokens {
            prompt: sum.prompt + item.tokens.prompt,
            completion: sum.completion + item.tokens.completion,
        });
        Report {
            questions: items.len(),
            scored: overall.questions,
            correct: overall.correct,
            accuracy: overall.accuracy,
            by_tag,
            by_outcome,
            attempts: AttemptFigures {
                p50: percentile(&mut attempts, 0.5),
                max: attempts.iter().copied().max().unwrap_or(0),
            },
            latency_ms: LatencyFigures {
                p50: percentile(&mut latencies, 0.5),
                p95: percentile(&mut latencies, 0.95),
            },
            tokens,
            provider: provider.to_owned(),
            model: model.to_owned(),
            use_context,
            items,
        }
    }

    /// The report as Markdown: the figures, the tags, the outcomes, then the questions that
    /// were not answered right.
    pub(crate) fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "## {} / {} ({})\n",
            self.provider,
            self.model,
            if self.use_context { "with the context file" } else { "without the context file" }
        );
        let _ = writeln!(out, "| figure | value |\n|---|---|");
        let _ = writeln!(
            out,
            "| accuracy | {} ({} of {} questions{}) |",
            percent(self.accuracy),
            self.correct,
            self.scored,
            match self.questions - self.scored {
                0 => String::new(),
                left => format!("; {left} with gold errors left out"),
            }
        );
        let _ =
            writeln!(out, "| attempts | p50 {}, max {} |", self.attempts.p50, self.attempts.max);
        let _ = writeln!(
            out,
            "| latency | p50 {} ms, p95 {} ms |",
            self.latency_ms.p50, self.latency_ms.p95
        );
        let _ = writeln!(
            out,
            "| tokens | {} prompt, {} completion |\n",
            self.tokens.prompt, self.tokens.completion
        );
        if !self.by_tag.is_empty() {
            let _ = writeln!(out, "| tag | questions | correct | accuracy |\n|---|---|---|---|");
            for (tag, figures) in &self.by_tag {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} |",
                    cell(tag),
                    figures.questions,
                    figures.correct,
                    percent(figures.accuracy)
                );
            }
            out.push('\n');
        }
        let _ = writeln!(out, "| outcome | questions |\n|---|---|");
        for (outcome, count) in &self.by_outcome {
            let _ = writeln!(out, "| {outcome} | {count} |");
        }
        let missed: Vec<&Item> =
            self.items.iter().filter(|item| item.outcome != Outcome::Correct).collect();
        if !missed.is_empty() {
            let _ = writeln!(out, "\n| question | outcome | attempts | error |\n|---|---|---|---|");
            for item in missed {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} |",
                    cell(&item.id),
                    item.outcome.as_str(),
                    item.attempts,
                    cell(item.error.as_deref().unwrap_or(""))
                );
            }
        }
        out
    }
}

impl Comparison {
    pub(crate) fn new(with_context: Report, without_context: Report) -> Comparison {
        let correct = |report: &Report, id: &str| {
            report.items.iter().any(|item| item.id == id && item.outcome == Outcome::Correct)
        };
        let scored = |item: &&Item| item.outcome != Outcome::GoldError;
        let gained = with_context
            .items
            .iter()
            .filter(scored)
            .filter(|item| item.outcome == Outcome::Correct && !correct(&without_context, &item.id))
            .map(|item| item.id.clone())
            .collect();
        let lost = without_context
            .items
            .iter()
            .filter(scored)
            .filter(|item| item.outcome == Outcome::Correct && !correct(&with_context, &item.id))
            .map(|item| item.id.clone())
            .collect();
        let lift = with_context.accuracy - without_context.accuracy;
        Comparison { with_context, without_context, lift, flipped: Flipped { gained, lost } }
    }

    pub(crate) fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "## The context file's lift: {:+.1} points ({} with, {} without)\n",
            self.lift * 100.0,
            percent(self.with_context.accuracy),
            percent(self.without_context.accuracy)
        );
        let ids = |ids: &[String]| if ids.is_empty() { "none".to_owned() } else { ids.join(", ") };
        let _ = writeln!(out, "- right only with the context: {}", ids(&self.flipped.gained));
        let _ = writeln!(out, "- right only without it: {}\n", ids(&self.flipped.lost));
        let tags: std::collections::BTreeSet<&String> =
            self.with_context.by_tag.keys().chain(self.without_context.by_tag.keys()).collect();
        if !tags.is_empty() {
            let _ = writeln!(out, "| tag | with context | without context |\n|---|---|---|");
            let shown = |report: &Report, tag: &str| {
                report
                    .by_tag
                    .get(tag)
                    .map_or_else(|| "-".to_owned(), |figures| percent(figures.accuracy))
            };
            for tag in tags {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} |",
                    cell(tag),
                    shown(&self.with_context, tag),
                    shown(&self.without_context, tag)
                );
            }
            out.push('\n');
        }
        out.push_str(&self.with_context.markdown());
        out.push('\n');
        out.push_str(&self.without_context.markdown());
        out
    }
}

pub(crate) fn percent(fraction: f64) -> String {
    format!("{:.1}%", fraction * 100.0)
}

/// Text for a Markdown table cell: one line, pipes escaped, at most 200 characters.
fn cell(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|");
    if line.chars().count() > 200 {
        format!("{}…", line.chars().take(199).collect::<String>())
    } else {
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str, outcome: Outcome, attempts: u32, latency_ms: u64, tags: &[&str]) -> Item {
        Item {
            id: id.to_owned(),
            outcome,
            attempts,
            sql: None,
            error: None,
            tokens: Tokens { prompt: 100, completion: 10 },
            latency_ms,
            tags: tags.iter().map(|tag| (*tag).to_owned()).collect(),
        }
    }

    #[test]
    fn figures_leave_gold_errors_out_and_count_tags_outcomes_and_percentiles() {
        let items = vec![
            item("a", Outcome::Correct, 1, 10, &["joins"]),
            item("b", Outcome::Correct, 2, 20, &["joins", "dates"]),
            item("c", Outcome::WrongResult, 1, 30, &["dates"]),
            item("d", Outcome::ExceededRetries, 3, 40, &[]),
            item("e", Outcome::GoldError, 0, 0, &["joins"]),
        ];
        let report = Report::new(items, "anthropic", "m", true);
        assert_eq!((report.questions, report.scored, report.correct), (5, 4, 2));
        assert!((report.accuracy - 0.5).abs() < 1e-12);
        assert_eq!(report.by_tag["joins"].questions, 2);
        assert_eq!(report.by_tag["joins"].correct, 2);
        assert_eq!(report.by_tag["dates"].correct, 1);
        assert_eq!(report.by_outcome["gold_error"], 1);
        assert_eq!(report.by_outcome["timeout"], 0);
        assert_eq!(report.attempts, AttemptFigures { p50: 1, max: 3 });
        assert_eq!(report.latency_ms, LatencyFigures { p50: 20, p95: 40 });
        assert_eq!(report.tokens, Tokens { prompt: 500, completion: 50 });
        let markdown = report.markdown();
        assert!(
            markdown
                .contains("| accuracy | 50.0% (2 of 4 questions; 1 with gold errors left out) |"),
            "{markdown}"
        );
    }

    #[test]
    fn a_comparison_names_the_questions_that_flipped() {
        let with = Report::new(
            vec![
                item("a", Outcome::Correct, 1, 1, &[]),
                item("b", Outcome::WrongResult, 1, 1, &[]),
            ],
            "p",
            "m",
            true,
        );
        let without = Report::new(
            vec![
                item("a", Outcome::WrongResult, 1, 1, &[]),
                item("b", Outcome::Correct, 1, 1, &[]),
            ],
            "p",
            "m",
            false,
        );
        let comparison = Comparison::new(with, without);
        assert_eq!(comparison.flipped.gained, vec!["a".to_owned()]);
        assert_eq!(comparison.flipped.lost, vec!["b".to_owned()]);
        assert!(comparison.lift.abs() < 1e-12);
    }
}
