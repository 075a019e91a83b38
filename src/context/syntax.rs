//! The context file's vocabulary, shared by parsing (`parse.rs`) and the schema overview
//! (`overview.rs`): its known `##` sections, the markers of the generated overview, the markdown
//! options it is read with, and the errors that make it unusable.

use pulldown_cmark::Options;

/// The line that opens the generated schema overview.
pub(crate) const SCHEMA_START: &str = "<!-- orca:schema:start -->";

/// The line that closes the generated schema overview.
pub(crate) const SCHEMA_END: &str = "<!-- orca:schema:end -->";

/// The headings of the known sections, as the messages name them.
const KNOWN_HEADINGS: &str = "`## Database Schema Overview`, `## Successful Query Patterns`, \
`## Common Error Patterns & Fixes`, `## Query Optimization Insights`, `## Model Performance Notes`";

/// The markdown extensions the context file may use (tables stay one block).
pub(crate) fn markdown_options() -> Options {
    Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS
}

/// A `##` section of the context file. The five known ones are the specification's; any other
/// is kept (by its heading) but never searched.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Section {
    /// "Database Schema Overview": the generated overview between the markers, and notes.
    SchemaOverview,
    /// "Successful Query Patterns": questions and the SQL that answered them.
    QueryPatterns,
    /// "Common Error Patterns & Fixes": errors models make and how to avoid them.
    ErrorFixes,
    /// "Query Optimization Insights": how to write the SQL well.
    OptimizationInsights,
    /// "Model Performance Notes": one `###` entry per model, by its name.
    ModelNotes,
    /// Any other `##` section, by its heading text.
    Other(String),
}

impl Section {
    /// The known sections, in the order the specification's file lists them.
    #[cfg(test)]
    pub(crate) const KNOWN: [Section; 5] = [
        Section::SchemaOverview,
        Section::QueryPatterns,
        Section::ErrorFixes,
        Section::OptimizationInsights,
        Section::ModelNotes,
    ];

    /// The section a `##` heading names: compared case-insensitively, ignoring punctuation
    /// (`&`, `:`, `-` ...) and the word "and", so "Common error patterns and fixes" is known.
    pub(crate) fn from_heading(heading: &str) -> Section {
        let lowered = heading.to_lowercase();
        let words: Vec<&str> = lowered
            .split(|c: char| !c.is_alphanumeric())
            .filter(|word| !word.is_empty() && *word != "and")
            .collect();
        match words.join(" ").as_str() {
            "database schema overview" => Section::SchemaOverview,
            "successful query patterns" => Section::QueryPatterns,
            "common error patterns fixes" => Section::ErrorFixes,
            "query optimization insights" => Section::OptimizationInsights,
            "model performance notes" => Section::ModelNotes,
            _ => Section::Other(heading.trim().to_owned()),
        }
    }

    /// The heading text of the section as orca writes it.
    pub(crate) fn heading(&self) -> &str {
        match self {
            Section::SchemaOverview => "Database Schema Overview",
            Section::QueryPatterns => "Successful Query Patterns",
            Section::ErrorFixes => "Common Error Patterns & Fixes",
            Section::OptimizationInsights => "Query Optimization Insights",
            Section::ModelNotes => "Model Performance Notes",
            Section::Other(heading) => heading,
        }
    }

    /// Whether this is one of the specification's five sections.
    pub(crate) fn is_known(&self) -> bool {
        !matches!(self, Section::Other(_))
    }
}

/// Why a context file cannot be used. Each message says what to change, with the line where
/// there is one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ParseError {
    #[error("the context file is empty (an editor may be in the middle of saving it)")]
    Empty,
    #[error("the context file has no known section; add at least one of {}", KNOWN_HEADINGS)]
    NoKnownSection,
    #[error(
        "line {line}: section `## {heading}` appears again (first on line {first}); merge the two"
    )]
    DuplicateSection { heading: String, line: usize, first: usize },
    #[error(
        "line {line}: `{}` has no `{}` after it; add the end marker after the overview",
        SCHEMA_START,
        SCHEMA_END
    )]
    StartMarkerWithoutEnd { line: usize },
    #[error(
        "line {line}: `{}` has no `{}` before it; add the start marker or remove this line",
        SCHEMA_END,
        SCHEMA_START
    )]
    EndMarkerWithoutStart { line: usize },
    #[error(
        "line {line}: a second `{marker}` (the first is on line {first}); keep one pair of schema markers"
    )]
    DuplicateMarker { marker: &'static str, line: usize, first: usize },
    #[error(
        "line {line}: the schema markers must be inside the `## Database Schema Overview` section"
    )]
    MisplacedMarker { line: usize },
    #[error(
        "line {line}: the schema marker is inside a code block or an HTML block; close the block before the marker"
    )]
    MarkerInBlock { line: usize },
}
