//! `orca eval`: execution accuracy of `generate_sql` on a question set. `questions` reads and
//! checks the question file, `run` sends each question through `generate_sql` and runs the
//! generated and the gold SQL read-only, `compare` decides whether two results agree, and
//! `report` sums it all up (JSON, Markdown, and a chart of accuracy per tag). Nothing here
//! knows MCP: the command line drives it, and tracking keeps its calls apart (source `eval`).

mod compare;
mod questions;
mod report;
mod run;

pub(crate) use questions::{Question, load};
pub(crate) use report::{Comparison, Item, Outcome, Report, percent};
pub(crate) use run::Runner;

use crate::servers::postgres::format;

/// `accuracy.png`: accuracy per tag (and overall) as a bar chart, drawn by `format_results`'
/// chart code; with `without`, each tag has a bar with the context, `tag (with)`, and one
/// without it, `tag (without)`.
///
/// # Errors
///
/// When the chart cannot be drawn (the reason, in words).
pub(crate) fn accuracy_chart(with: &Report, without: Option<&Report>) -> Result<Vec<u8>, String> {
    let mut rows = Vec::new();
    let mut push = |label: String, accuracy: f64| {
        rows.push(vec![
            serde_json::Value::from(label),
            serde_json::Value::from((accuracy * 1000.0).round() / 10.0),
        ]);
    };
    let suffix = |context: bool| match (without.is_some(), context) {
        (false, _) => "",
        (true, true) => " (with)",
        (true, false) => " (without)",
    };
    push(format!("all questions{}", suffix(true)), with.accuracy);
    if let Some(without) = without {
        push(format!("all questions{}", suffix(false)), without.accuracy);
    }
    for (tag, figures) in &with.by_tag {
        push(format!("{tag}{}", suffix(true)), figures.accuracy);
        if let Some(figures) = without.and_then(|without| without.by_tag.get(tag)) {
            push(format!("{tag}{}", suffix(false)), figures.accuracy);
        }
    }
    let dataset = format::Dataset {
        columns: vec![
            format::Column { name: "tag".to_owned(), type_name: Some("TEXT".to_owned()) },
            format::Column {
                name: "accuracy (%)".to_owned(),
                type_name: Some("NUMERIC".to_owned()),
            },
        ],
        rows,
    };
    format::chart(&dataset).map(|chart| chart.png).map_err(|error| error.to_string())
}
