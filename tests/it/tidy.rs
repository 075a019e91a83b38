//! Checks on the source tree itself: every file says what it is, no test is skipped or expects a
//! panic, and the modules depend on each other only in the documented direction.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            out.push(path);
        }
    }
}

fn sources(dir: &str) -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    files.into_iter().map(|path| (path.clone(), std::fs::read_to_string(&path).unwrap())).collect()
}

#[test]
fn every_rust_file_starts_with_a_module_doc() {
    for (path, text) in sources("src").into_iter().chain(sources("tests")) {
        assert!(
            text.starts_with("//!"),
            "{} must start with a //! line saying what lives there",
            path.display()
        );
    }
}

#[test]
fn no_test_is_ignored_or_expects_a_panic() {
    let banned = [concat!("#[", "ignore"), concat!("#[", "should_panic")];
    for (path, text) in sources("src").into_iter().chain(sources("tests")) {
        for pattern in banned {
            assert!(!text.contains(pattern), "{} uses {pattern}]", path.display());
        }
    }
}

#[test]
fn modules_depend_on_each_other_only_in_the_documented_direction() {
    // (module directory, modules it must not use)
    let rules: [(&str, &[&str]); 13] = [
        (
            // Pure checks of what upstreams send: no MCP, no configuration, no database.
            "src/guard",
            &[
                "crate::config",
                "crate::gateway",
                "crate::registry",
                "crate::servers",
                "crate::external",
                "crate::tracking",
                "crate::cli",
                "crate::tool",
                "crate::sql",
                "crate::privacy",
                "sqlx",
                "rmcp",
            ],
        ),
        (
            "src/llm",
            &[
                "crate::gateway",
                "crate::registry",
                "crate::servers",
                "crate::external",
                "crate::tracking",
                "crate::cli",
                "crate::tool",
                "crate::sql",
                "crate::context",
                "rmcp",
            ],
        ),
        (
            "src/context",
            &[
                "crate::gateway",
                "crate::registry",
                "crate::servers",
                "crate::external",
                "crate::tracking",
                "crate::cli",
                "crate::tool",
                "crate::sql",
                "crate::llm",
                "rmcp",
            ],
        ),
        (
            "src/sql",
            &[
                "crate::config",
                "crate::gateway",
                "crate::registry",
                "crate::servers",
                "crate::tracking",
                "crate::cli",
                "crate::tool",
                "crate::privacy",
                "rmcp",
            ],
        ),
        (
            // Masking and the check of masked reads: at the floor of `sql`, which it uses and
            // which never uses it.
            "src/privacy",
            &[
                "crate::config",
                "crate::gateway",
                "crate::registry",
                "crate::servers",
                "crate::tracking",
                "crate::cli",
                "crate::tool",
                "rmcp",
            ],
        ),
        (
            "src/config",
            &[
                "crate::gateway",
                "crate::registry",
                "crate::servers",
                "crate::tracking",
                "crate::cli",
            ],
        ),
        ("src/tracking", &["crate::gateway", "crate::registry", "crate::servers", "crate::cli"]),
        ("src/servers", &["crate::gateway", "crate::registry", "crate::external", "crate::cli"]),
        (
            // The upstream wrapper reaches no built-in server: what it shares with them (the
            // directory of servers) lives below both, in `src/directory`.
            "src/external",
            &[
                "crate::gateway",
                "crate::registry",
                "crate::servers",
                "crate::tracking",
                "crate::cli",
                "crate::sql",
            ],
        ),
        (
            // The directory of servers: below the registry, the servers and `external`.
            "src/directory",
            &[
                "crate::gateway",
                "crate::registry",
                "crate::servers",
                "crate::external",
                "crate::tracking",
                "crate::cli",
            ],
        ),
        ("src/registry", &["crate::gateway", "crate::cli"]),
        ("src/gateway", &["crate::cli"]),
        (
            "src/embedded",
            &[
                "crate::gateway",
                "crate::registry",
                "crate::servers",
                "crate::tracking",
                "crate::cli",
            ],
        ),
    ];
    for (dir, forbidden) in rules {
        for (path, text) in sources(dir) {
            for module in forbidden {
                // The whole path segment: `crate::cli` is not `crate::client`.
                let uses = text.match_indices(module).any(|(at, _)| {
                    !text[at + module.len()..]
                        .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                });
                assert!(
                    !uses,
                    "{} uses {module}, against the dependency direction",
                    path.display()
                );
            }
        }
    }
    // Servers never import each other: what two of them share lives a floor down (`sql`) or in
    // a module of `src/servers/` that belongs to no server (`sql_common.rs`).
    let servers = ["data", "metabase", "orca", "postgres", "weaviate"];
    for server in servers {
        for (path, text) in sources(&format!("src/servers/{server}")) {
            for other in servers.iter().filter(|other| **other != server) {
                for module in [
                    format!("servers::{other}"),
                    format!("super::{other}"),
                    format!("super::super::{other}"),
                ] {
                    assert!(
                        !text.contains(&module),
                        "{} uses {module}: servers do not import each other",
                        path.display()
                    );
                }
            }
        }
    }
    // Only the CLI's output function prints.
    for (path, text) in sources("src") {
        if path.ends_with("cli/output.rs") {
            continue;
        }
        for pattern in ["println!", "print!(", "eprintln!", "dbg!"] {
            assert!(
                !text.contains(pattern),
                "{} prints with {pattern}; use cli::output or tracing",
                path.display()
            );
        }
    }
}
