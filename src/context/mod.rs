//! The learned context file (`context/supabase-sql-context.md`, `ORCA_CONTEXT_FILE`): parsed
//! with pulldown-cmark into the specification's sections, kept in memory and hot-reloaded when
//! the file changes (debounced; a malformed file keeps the previous version and logs why), and
//! searched (BM25) for the entries most relevant to a question within a token budget.
//! Knows nothing of MCP or SQL execution.
//!
//! - `syntax`: what parsing and the overview share: the known sections, the two markers, the
//!   markdown options and `ParseError`.
//! - `parse`: the file's `##` sections and their `###` entries, each with its exact source
//!   markdown; large entries split into chunks; the errors a person can act on.
//! - `overview`: the generated schema overview between `<!-- orca:schema:start -->` and
//!   `<!-- orca:schema:end -->`, and replacing it without touching the rest of the file.
//! - `bm25`: a generic ranker (Okapi BM25, `k1 = 1.2`, `b = 0.75`, Lucene's non-negative IDF,
//!   a tokenizer that splits identifiers): reusable for anything else, such as the tables of
//!   a big schema.
//! - `select`: what goes into a prompt: the notes on the model in use, then the most relevant
//!   query patterns, error fixes and optimization insights, within a token budget (tokens are
//!   estimated as `(chars + 3) / 4`).
//! - `store`: the shared, hot-reloaded [`ContextStore`] (a watch channel of versions, fed by a
//!   watcher on the file's directory).
//! - `suggest`: additions to the file proposed by a model from recent failures, for a person to
//!   review (`orca context suggest`); it never writes the file.
//!
//! # Design notes
//!
//! The learned context file. `parse.rs` reads it with pulldown-cmark into the specification's five
//! sections and their `###` entries (exact source text, large entries split at block boundaries) or
//! a `ParseError` with a line; `overview.rs` finds and replaces the generated schema overview
//! between its markers; `syntax.rs` holds what both share (the known sections, the two markers, the
//! markdown options, `ParseError`), so that `parse.rs` uses `overview.rs` and not the other way
//! round; `bm25.rs` is a generic ranker (k1 = 1.2, b = 0.75, a tokenizer that splits identifiers
//! and folds English plurals); `select.rs` picks what a prompt gets: the notes on the model, then
//! the query patterns, error fixes and insights ranked by BM25 against the question, within a token
//! budget; `store.rs` is the hot-reloaded `ContextStore` (a `tokio::sync::watch` of versions fed by
//! a notify watcher on the file's directory, debounced 100 ms, at most 400 ms after a burst's first
//! event; a failed reload keeps the previous version); `suggest.rs` is the prompt, answer and
//! insertion of `orca context suggest`.

/// The context file shipped for the Chinook demo database; `orca demo` starts from it.
pub(crate) const CHINOOK_CONTEXT: &str = include_str!("../../context/supabase-sql-context.md");

pub(crate) mod bm25;
mod overview;
mod parse;
mod select;
mod store;
pub(crate) mod suggest;
mod syntax;

#[cfg(test)]
mod shipped;

pub(crate) use overview::replace_schema_overview;
pub(crate) use parse::{ContextDoc, estimate_tokens, parse};
pub(crate) use select::select;
pub(crate) use store::{ContextStore, ContextWatch, LoadedContext};
