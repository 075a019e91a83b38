//! `ToolFilter`: which of a server's tools to offer. Include first (none listed: all), then
//! exclude, both by exact name or `*` glob on the server's original names, then a predicate
//! that sees the whole tool (annotations such as `readOnlyHint`).
//!
//! # Design notes
//!
//! `filter.rs`: `ToolFilter` (include, exclude, predicate). `names.rs`: `NameMap`, provider-safe
//! names with hash suffixes, both ways.

use std::sync::Arc;

use super::tool::ToolInfo;

type Predicate = Arc<dyn Fn(&ToolInfo) -> bool + Send + Sync>;

/// A filter over tools; the default admits every tool.
#[derive(Clone, Default)]
pub struct ToolFilter {
    include: Vec<String>,
    exclude: Vec<String>,
    predicate: Option<Predicate>,
}

impl std::fmt::Debug for ToolFilter {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ToolFilter")
            .field("include", &self.include)
            .field("exclude", &self.exclude)
            .field("predicate", &self.predicate.is_some())
            .finish()
    }
}

impl ToolFilter {
    /// A filter that admits every tool.
    pub fn new() -> ToolFilter {
        ToolFilter::default()
    }

    /// Admit only tools matching one of these names or `*` patterns (added to earlier ones).
    pub fn include<S: Into<String>>(mut self, patterns: impl IntoIterator<Item = S>) -> ToolFilter {
        self.include.extend(patterns.into_iter().map(Into::into));
        self
    }

    /// Refuse tools matching one of these names or `*` patterns (added to earlier ones).
    pub fn exclude<S: Into<String>>(mut self, patterns: impl IntoIterator<Item = S>) -> ToolFilter {
        self.exclude.extend(patterns.into_iter().map(Into::into));
        self
    }

    /// Admit only tools for which `predicate` holds (after include and exclude).
    pub fn when(
        mut self,
        predicate: impl Fn(&ToolInfo) -> bool + Send + Sync + 'static,
    ) -> ToolFilter {
        self.predicate = Some(Arc::new(predicate));
        self
    }

    /// Whether the filter admits `tool`.
    pub fn admits(&self, tool: &ToolInfo) -> bool {
        let included = self.include.is_empty()
            || self.include.iter().any(|pattern| glob_match(pattern, &tool.name));
        included
            && !self.exclude.iter().any(|pattern| glob_match(pattern, &tool.name))
            && self.predicate.as_ref().is_none_or(|predicate| predicate(tool))
    }

    /// The admitted tools, in their order.
    pub fn apply(&self, tools: &[ToolInfo]) -> Vec<ToolInfo> {
        tools.iter().filter(|tool| self.admits(tool)).cloned().collect()
    }
}

/// Whether `name` matches `pattern`, where `*` stands for any run of characters.
pub(crate) fn glob_match(pattern: &str, name: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let name: Vec<char> = name.chars().collect();
    // Classic wildcard matching with backtracking to the last star.
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        if p < pattern.len() && pattern[p] != '*' && pattern[p] == name[n] {
            p += 1;
            n += 1;
        } else if p < pattern.len() && pattern[p] == '*' {
            star = Some((p, n));
            p += 1;
        } else if let Some((star_p, star_n)) = star {
            p = star_p + 1;
            n = star_n + 1;
            star = Some((star_p, star_n + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|character| *character == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_exact_names_prefixes_suffixes_and_middles() {
        let cases = [
            ("echo", "echo", true),
            ("echo", "echo2", false),
            ("*", "anything", true),
            ("get_*", "get_count", true),
            ("get_*", "set_count", false),
            ("*_sql", "execute_sql", true),
            ("*sum*", "get-sum-now", true),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "aXXbYY", false),
            ("", "", true),
        ];
        for (pattern, name, expected) in cases {
            assert_eq!(glob_match(pattern, name), expected, "{pattern} vs {name}");
        }
    }
}
