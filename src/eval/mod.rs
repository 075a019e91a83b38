//! `orca eval`: execution accuracy of `generate_sql` on a question set. `questions` reads and
//! checks the question file, `run` sends each question through `generate_sql` and runs the
//! generated and the gold SQL read-only, `compare` decides whether two results agree, and
//! `report` sums it all up (JSON, Markdown, and a chart of accuracy per tag). Nothing here
//! knows MCP: the command line drives it, and tracking keeps its calls apart (source `eval`).
//!
//! # Design notes
//!
//! Execution accuracy of `generate_sql`, knowing nothing of MCP.

mod compare;
mod questions;
mod report;
mod run;

pub(crate) use questions::{Question, load};
pub(crate) use report::{Comparison, Item, Outcome, Report, percent};
pub(crate) use run::Runner;

use crate::servers::postgres::format;

/// The names of `--compare`'s two runs, in the chart's legend and order.
const RUNS: [&str; 2] = ["with context", "without context"];

/// `accuracy.png`: accuracy per tag (and overall) as a bar chart, drawn by `format_results`'
/// chart code; with `without`, each tag's two bars (with and without the context) stand side by
/// side, and a legend names the runs.
///
/// # Errors
///
/// When the chart cannot be drawn (the reason, in words).
pub(crate) fn accuracy_chart(with: &Report, without: Option<&Report>) -> Result<Vec<u8>, String> {
    match without {
        Some(without) => format::render_png(&comparison_figure(with, without)),
        None => format::chart(&single_dataset(with)).map(|chart| chart.png),
    }
    .map_err(|error| error.to_string())
}

/// One run's accuracy per tag, as the dataset of a bar chart.
fn single_dataset(report: &Report) -> format::Dataset {
    let row = |label: &str, accuracy: f64| {
        vec![serde_json::Value::from(label), serde_json::Value::from(percent_rounded(accuracy))]
    };
    let mut rows = vec![row("all questions", report.accuracy)];
    rows.extend(report.by_tag.iter().map(|(tag, figures)| row(tag, figures.accuracy)));
    format::Dataset {
        columns: vec![
            format::Column { name: "tag".to_owned(), type_name: Some("TEXT".to_owned()) },
            format::Column {
                name: "accuracy (%)".to_owned(),
                type_name: Some("NUMERIC".to_owned()),
            },
        ],
        rows,
    }
}

/// The two runs of `--compare` as bars grouped by tag: all questions first, then every tag of
/// either run in order, each with the run with the context and the run without it.
fn comparison_figure(with: &Report, without: &Report) -> format::Figure {
    let mut tags: Vec<&String> = with.by_tag.keys().chain(without.by_tag.keys()).collect();
    tags.sort();
    tags.dedup();
    let accuracy = |report: &Report, tag: &str| {
        report.by_tag.get(tag).map(|figures| percent_rounded(figures.accuracy))
    };
    let mut groups = vec![format::BarGroup {
        label: "all questions".to_owned(),
        values: vec![Some(percent_rounded(with.accuracy)), Some(percent_rounded(without.accuracy))],
    }];
    groups.extend(tags.into_iter().map(|tag| format::BarGroup {
        label: tag.clone(),
        values: vec![accuracy(with, tag), accuracy(without, tag)],
    }));
    format::Figure {
        title: "accuracy by tag, with and without the context".to_owned(),
        description: "Bar chart of the accuracy per tag of the run with the context and the run                       without it, side by side"
            .to_owned(),
        x_name: "tag".to_owned(),
        y_name: "accuracy (%)".to_owned(),
        series: format::Series::GroupedBar {
            runs: RUNS.iter().map(|run| (*run).to_owned()).collect(),
            groups,
        },
    }
}

/// A share as a percentage with one decimal.
fn percent_rounded(share: f64) -> f64 {
    (share * 1000.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::report::Tokens;

    fn report(outcomes: &[(&str, bool)], use_context: bool) -> Report {
        let items = outcomes
            .iter()
            .enumerate()
            .map(|(index, (tag, correct))| Item {
                id: format!("q{index}"),
                outcome: if *correct { Outcome::Correct } else { Outcome::WrongResult },
                attempts: 1,
                sql: None,
                error: None,
                tokens: Tokens { prompt: 10, completion: 1 },
                latency_ms: 5,
                tags: vec![(*tag).to_owned()],
            })
            .collect();
        Report::new(items, "anthropic", "m", use_context)
    }

    #[test]
    fn a_comparison_chart_groups_each_tags_two_runs_side_by_side() {
        let with = report(&[("dates", true), ("joins", true), ("joins", false)], true);
        let without = report(&[("dates", false), ("joins", true), ("windows", false)], false);
        let figure = comparison_figure(&with, &without);
        let format::Series::GroupedBar { runs, groups } = &figure.series else {
            panic!("a comparison is drawn as grouped bars");
        };
        assert_eq!(runs, &["with context", "without context"]);
        let seen: Vec<(&str, Vec<Option<f64>>)> =
            groups.iter().map(|group| (group.label.as_str(), group.values.clone())).collect();
        assert_eq!(
            seen,
            vec![
                ("all questions", vec![Some(66.7), Some(33.3)]),
                ("dates", vec![Some(100.0), Some(0.0)]),
                ("joins", vec![Some(50.0), Some(100.0)]),
                ("windows", vec![None, Some(0.0)]),
            ]
        );
        let png = accuracy_chart(&with, Some(&without)).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "the chart is a PNG");
        assert!(accuracy_chart(&with, None).unwrap().starts_with(b"\x89PNG"));
    }
}
