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

    /// Whether some tool of `server`, whose tools are exposed under `prefix`, could be
    /// admitted, before anyone knows its tools (an upstream nobody has signed in to yet): some
    /// rule admits the server or a glob could match a name of it (`<prefix>_<tool>`), and no
    /// rule refuses the whole server (`!server:<name>`, or a glob matching every such name).
    pub(crate) fn could_admit_a_tool_of(&self, server: &str, prefix: &str) -> bool {
        let names = if prefix.is_empty() { String::new() } else { format!("{prefix}_") };
        let admits = self.admit.iter().any(|rule| match rule {
            Rule::Server(name) => name == server,
            Rule::Tool(glob) => !after_prefix(glob, &names).is_empty(),
        });
        let refuses_all = self.refuse.iter().any(|rule| match rule {
            Rule::Server(name) => name == server,
            Rule::Tool(glob) => {
                let glob: Vec<char> = glob.chars().collect();
                after_prefix_positions(&glob, &names)
                    .into_iter()
                    .any(|at| glob[at..].iter().all(|c| *c == '*'))
            }
        });
        admits && !refuses_all
    }

    /// The list as written.
    pub(crate) fn written(&self) -> &[String] {
        &self.written
    }
}

/// Where in `glob` a match may stand once `prefix` is read (`*` any run, `?` one character):
/// empty when no name beginning with `prefix` can match.
fn after_prefix(glob: &str, prefix: &str) -> Vec<usize> {
    let glob: Vec<char> = glob.chars().collect();
    after_prefix_positions(&glob, prefix)
}

fn after_prefix_positions(glob: &[char], prefix: &str) -> Vec<usize> {
    // The positions reachable without reading: a `*` may match nothing.
    let close = |mut positions: Vec<usize>| {
        let mut at = 0;
        while at < positions.len() {
            let position = positions[at];
            if glob.get(position) == Some(&'*') && !positions.contains(&(position + 1)) {
                positions.push(position + 1);
            }
            at += 1;
        }
        positions
    };
    let mut positions = close(vec![0]);
    for character in prefix.chars() {
        let mut next = Vec::new();
        for &position in &positions {
            match glob.get(position) {
                Some('*') => next.push(position),
                Some('?') => next.push(position + 1),
                Some(c) if *c == character => next.push(position + 1),
                _ => {}
            }
        }
        next.sort_unstable();
        next.dedup();
        positions = close(next);
        if positions.is_empty() {
            break;
        }
    }
    positions
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
    fn a_server_whose_tools_are_unknown_is_admitted_when_some_tool_of_it_could_be() {
        for (entries, admitted) in [
            (&["*"][..], true),
            (&["up_*"][..], true),
            (&["u?_read"][..], true),
            (&["*_read*"][..], true),
            (&["server:up"][..], true),
            (&["server:orca", "list_servers"][..], false),
            (&["github_*"][..], false),
            (&["up"][..], false),
            (&["*", "!server:up"][..], false),
            (&["*", "!up_*"][..], false),
            (&["up_*", "!*"][..], false),
            (&["*", "!up_delete*"][..], true),
            (&["server:up", "!up_?*"][..], true),
        ] {
            assert_eq!(policy(entries).could_admit_a_tool_of("up", "up"), admitted, "{entries:?}");
        }
        assert!(policy(&["read_*"]).could_admit_a_tool_of("plain", ""), "an empty prefix");
    }

    #[test]
    fn unreadable_entries_are_named() {
        for entry in ["", "!", "server:", "! server: "] {
            let error = ToolPolicy::parse(&[entry.to_owned()]).unwrap_err();
            assert!(error.contains(&format!("`{entry}`")), "{error}");
        }
    }
}
