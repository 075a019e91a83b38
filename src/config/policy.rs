//! What a role may use: `auth.roles.<role>.tools`, a list of globs over gateway tool names
//! (`github_*`), whole servers (`server:metabase`), and exclusions of either (`!*delete*`,
//! `!server:weaviate`). A tool is admitted when some rule without `!` matches it and no rule
//! with `!` does.

use super::external::glob_match;

/// One rule of a `tools:` list.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rule {
    /// A glob over the gateway's tool name.
    Tool(String),
    /// Every tool of one server (its name in `list_servers`).
    Server(String),
}

impl Rule {
    fn matches(&self, tool: &str, server: &str) -> bool {
        match self {
            Rule::Tool(glob) => glob_match(glob, tool),
            Rule::Server(name) => name == server,
        }
    }
}

/// A role's `tools:` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolPolicy {
    admit: Vec<Rule>,
    refuse: Vec<Rule>,
    /// The list as written, for `orca doctor` and errors.
    written: Vec<String>,
}

impl ToolPolicy {
    /// The policy of a `tools:` list; an error names the entry that cannot be read.
    ///
    /// # Errors
    ///
    /// An empty entry, a bare `!`, or `server:` without a name.
    pub(crate) fn parse(entries: &[String]) -> Result<ToolPolicy, String> {
        let mut policy = ToolPolicy { admit: Vec::new(), refuse: Vec::new(), written: Vec::new() };
        for entry in entries {
            let text = entry.trim();
            let (refused, body) = match text.strip_prefix('!') {
                Some(rest) => (true, rest.trim()),
                None => (false, text),
            };
            let rule = match body.strip_prefix("server:") {
                Some(name) if !name.trim().is_empty() => Rule::Server(name.trim().to_owned()),
                Some(_) => return Err(format!("`{entry}` names no server after `server:`")),
                None if body.is_empty() => {
                    return Err(format!("`{entry}` is not a tool glob or `server:<name>`"));
                }
                None => Rule::Tool(body.to_owned()),
            };
            if refused {
                policy.refuse.push(rule)
            } else {
                policy.admit.push(rule)
            }
            policy.written.push(text.to_owned());
        }
        Ok(policy)
    }

    /// Whether `tool` of `server` may be seen and called.
    pub(crate) fn admits(&self, tool: &str, server: &str) -> bool {
        self.admit.iter().any(|rule| rule.matches(tool, server))
            && !self.refuse.iter().any(|rule| rule.matches(tool, server))
    }

    /// The list as written.
    pub(crate) fn written(&self) -> &[String] {
        &self.written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(entries: &[&str]) -> ToolPolicy {
        ToolPolicy::parse(&entries.iter().map(|entry| (*entry).to_owned()).collect::<Vec<_>>())
            .unwrap()
    }

    #[test]
    fn globs_servers_and_exclusions_decide_together() {
        let analyst = policy(&["*", "!execute_sql", "!*materialize*", "!server:weaviate"]);
        for (tool, server, admitted) in [
            ("query_sql", "data", true),
            ("execute_sql", "postgres", false),
            ("materialize_sql", "data", false),
            ("weaviate-query-hybrid", "weaviate", false),
            ("github_create_issue", "github", true),
        ] {
            assert_eq!(analyst.admits(tool, server), admitted, "{tool}");
        }
        let metabase_only = policy(&["server:metabase", "list_servers", "!*delete*"]);
        assert!(metabase_only.admits("get_card", "metabase"));
        assert!(!metabase_only.admits("delete_card", "metabase"));
        assert!(metabase_only.admits("list_servers", "orca"));
        assert!(!metabase_only.admits("query_sql", "data"));
        assert!(!policy(&[]).admits("list_servers", "orca"), "an empty list admits nothing");
    }

    #[test]
    fn unreadable_entries_are_named() {
        for entry in ["", "!", "server:", "! server: "] {
            let error = ToolPolicy::parse(&[entry.to_owned()]).unwrap_err();
            assert!(error.contains(&format!("`{entry}`")), "{error}");
        }
    }
}
