//! Targets for the files a person (or whoever can write to them) hands orca: the context file,
//! `orca.yaml` and `external-mcps.yaml`.
//!
//! # Design notes
//!
//! `files.rs`: `context_file` (parsing deterministic, error lines that exist, token estimates, and
//! `replace_schema_overview` keeping a parsable file parsable with every other entry unchanged),
//! `orca_yaml` and `external_yaml` (`config::load` with every secret in the environment: no error,
//! `orca doctor` line or external endpoint shows one; every problem names its file).

use std::path::PathBuf;

use super::{SECRETS, assert_no_secret};
use crate::config::{self, Availability, ConfigErrors, Env, ExternalTransport};
use crate::context;

/// The heading of the section that holds the schema overview.
const SCHEMA_SECTION: &str = "Database Schema Overview";

/// The context file: parsing is a function of the text and never panics; a line named in an
/// error exists; every entry's token estimate is its markdown's; and replacing the schema
/// overview of a file that parses (what `orca context refresh-schema` does) gives a file that
/// still parses, holds the new overview, and keeps every entry outside the overview's section.
pub(super) fn context_file(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let parsed = context::parse(&text);
    assert_eq!(parsed, context::parse(&text), "parsing the same text twice differs");
    let document = match parsed {
        Ok(document) => document,
        Err(error) => {
            let lines = text.split('\n').count();
            let message = error.to_string();
            if let Some(line) = mentioned_line(&message) {
                assert!((1..=lines).contains(&line), "{message} names a line of {lines}");
            }
            return;
        }
    };
    for entry in document.entries() {
        assert_eq!(entry.tokens(), context::estimate_tokens(&entry.markdown()));
        assert!(!entry.title().contains('\n'), "a title spans lines: {:?}", entry.title());
    }
    let _ = document.outline();
    let _ = document.titles();

    let overview = "| table | rows |\n|---|---|\n| fuzz_overview_table | 1 |";
    let replaced = context::replace_schema_overview(&text, overview);
    let again = context::parse(&replaced).unwrap_or_else(|error| {
        panic!("replacing the overview broke a file that parsed: {error}\n{replaced}")
    });
    assert_eq!(again.schema_overview(), Some(overview), "the new overview is not read back");
    let outside = |document: &context::ContextDoc| -> Vec<(String, String)> {
        document
            .entries()
            .iter()
            .filter(|entry| entry.section().heading() != SCHEMA_SECTION)
            .map(|entry| (entry.title().to_owned(), entry.body().to_owned()))
            .collect()
    };
    assert_eq!(outside(&again), outside(&document), "replacing the overview changed other entries");
}

/// The number after "line " in an error message, if any.
fn mentioned_line(message: &str) -> Option<usize> {
    let after = message.split("line ").nth(1)?;
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The environment the configuration targets load with: every secret set, every optional
/// server enabled, files pointed at the fuzz input.
fn environment(external_file: &str) -> Env {
    let database_url =
        format!("postgres://orca:{}@127.0.0.1:5432/app", secret("DATABASE_PASSWORD"));
    let mut pairs: Vec<(&str, &str)> = SECRETS.to_vec();
    pairs.extend([
        ("HOME", "/nonexistent/fuzz-home"),
        ("ORCA_HOME", "/nonexistent/fuzz-home/orca"),
        ("DATABASE_URL", database_url.as_str()),
        ("METABASE_URL", "http://metabase.invalid:3000"),
        ("METABASE_USERNAME", "fuzz@example.com"),
        ("WEAVIATE_URL", "http://weaviate.invalid:8080"),
        ("ORCA_EXTERNAL_MCPS", external_file),
    ]);
    Env::from_pairs(&pairs)
}

fn secret(name: &str) -> &'static str {
    SECRETS.iter().find(|(key, _)| *key == name).map_or("", |(_, value)| value)
}

/// A file of this process for `name`, written with `contents`.
fn scratch_file(name: &str, contents: &[u8]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("orca-fuzz-{}-{name}", std::process::id()));
    std::fs::write(&path, contents).expect("the temporary directory is writable");
    path
}

/// `orca.yaml`: loading never panics, every problem is reported with the file's name, and
/// neither an error nor what `orca doctor` prints of a valid configuration shows a secret.
pub(super) fn orca_yaml(data: &[u8]) {
    let path = scratch_file("orca.yaml", data);
    let empty = scratch_file("empty-external-mcps.yaml", b"");
    let result = config::load(Some(&path), &environment(&empty.display().to_string()));
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&empty);
    check_loaded(result, data, &[&path, &empty]);
}

/// `external-mcps.yaml`: the same promises, and the endpoint shown for each server (in
/// `list_servers`, the logs and `/healthz`) holds no secret, user info or query string.
pub(super) fn external_yaml(data: &[u8]) {
    let path = scratch_file("external-mcps.yaml", data);
    let empty = scratch_file("empty-orca.yaml", b"");
    let result = config::load(Some(&empty), &environment(&path.display().to_string()));
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&empty);
    if let Ok(config) = &result {
        for server in &config.external.servers {
            assert_no_secret(&server.endpoint, data, "an external server's endpoint");
            assert_no_secret(&server.display_name, data, "an external server's name");
            if matches!(server.transport, ExternalTransport::Http { .. }) {
                assert!(
                    !server.endpoint.contains('?'),
                    "an endpoint shows its query: {}",
                    server.endpoint
                );
            }
            if let Availability::MissingCredentials(names) = &server.availability {
                assert_no_secret(&names.join(", "), data, "the missing credentials");
            }
        }
    }
    check_loaded(result, data, &[&path, &empty]);
}

/// What both configuration targets promise; `files` are the ones loaded.
fn check_loaded(result: Result<config::Config, ConfigErrors>, data: &[u8], files: &[&PathBuf]) {
    match result {
        Ok(config) => {
            for (key, value) in config.describe() {
                assert_no_secret(&value, data, &format!("`orca doctor`'s {key}"));
            }
        }
        Err(ConfigErrors(errors)) => {
            assert!(!errors.is_empty(), "a failed load reports no problem");
            for error in &errors {
                assert_no_secret(error, data, "a configuration error");
                assert!(
                    files.iter().any(|file| error.starts_with(&file.display().to_string()))
                        || error.starts_with("environment"),
                    "a problem does not name its file or the environment: {error}"
                );
            }
        }
    }
}
