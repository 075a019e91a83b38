//! `databases:` in `orca.yaml`: the named target databases the SQL tools serve, each a catalog
//! clients choose by name. Without the section, `DATABASE_URL` alone is one database named after
//! it (see `cli::databases`).

use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use secrecy::SecretString;
use serde::Deserialize;

use super::Env;

/// The longest catalog name: PostgreSQL's own identifier limit.
const LONGEST_NAME: usize = 63;

/// One configured database.
#[derive(Debug, Clone)]
pub(crate) struct DatabaseConfig {
    /// The catalog name clients use: lowercase letters, digits, `_` and `-`.
    pub(crate) name: String,
    /// The connection URL, from the environment (`${VAR}`), never printed.
    pub(crate) url: SecretString,
    /// What the database holds, for people and for `generate_sql`'s choice.
    pub(crate) description: Option<String>,
    /// Writes are refused on this database (else the global `read_only`).
    pub(crate) read_only: Option<bool>,
    /// Globs over the schemas to show (every schema when empty).
    pub(crate) schemas: Vec<String>,
    /// The statement timeout of its reads and writes (else `sql`'s).
    pub(crate) statement_timeout: Option<Duration>,
    /// The most rows one read returns (else `sql.hard_max_rows`).
    pub(crate) max_rows: Option<usize>,
    /// Its own context file (else the configured one).
    pub(crate) context_file: Option<PathBuf>,
}

/// One entry of `databases:` as written: a target database the SQL tools serve.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Database")]
pub(super) struct RawDatabase {
    /// The catalog name clients use: lowercase letters, digits, `_` and `-` (at most 63).
    #[schemars(regex(pattern = r"^[a-z0-9_][a-z0-9_-]{0,62}$"))]
    name: String,
    /// The connection URL, read from the environment as `${VAR}`; a password written in the
    /// file itself is refused.
    url: String,
    /// What the database holds, for people and for `generate_sql`'s choice of database.
    #[serde(default)]
    description: Option<String>,
    /// Writes are refused on this database; default: the global `read_only`.
    #[serde(default)]
    read_only: Option<bool>,
    /// Globs of the schemas shown; default: every schema.
    #[serde(default)]
    schemas: Vec<String>,
    /// The statement timeout of its reads and writes (milliseconds); default:
    /// `sql.default_timeout_ms`.
    #[serde(default)]
    #[schemars(range(min = 1))]
    statement_timeout_ms: Option<u64>,
    /// The most rows one read returns; default: `sql.hard_max_rows`.
    #[serde(default)]
    #[schemars(range(min = 1))]
    max_rows: Option<u64>,
    /// Its own context file; default: the configured one (`llm.context_file`).
    #[serde(default)]
    context_file: Option<PathBuf>,
}

/// Whether `name` may be a catalog name.
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= LONGEST_NAME
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.bytes().all(|byte| {
            byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_' || byte == b'-'
        })
}

/// Read `databases:` (a list), recording every problem in `errors`. A relative context file is
/// found from the working directory, like `llm.context_file`.
pub(super) fn load(
    value: Option<&serde_json::Value>,
    env: &Env,
    file: &str,
    errors: &mut Vec<String>,
) -> Vec<DatabaseConfig> {
    let Some(value) = value.filter(|value| !value.is_null()) else { return Vec::new() };
    let Some(entries) = value.as_array() else {
        errors.push(format!("{file}: databases: expected a list of databases"));
        return Vec::new();
    };
    if entries.is_empty() {
        errors.push(format!(
            "{file}: databases: the list is empty; leave it out to use DATABASE_URL"
        ));
    }
    let mut out: Vec<DatabaseConfig> = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        let key = format!("databases[{index}]");
        let raw: RawDatabase = match serde_path_to_error::deserialize(entry.clone()) {
            Ok(raw) => raw,
            Err(error) => {
                let path = error.path().to_string();
                let at = if path == "." { key } else { format!("{key}.{path}") };
                let message = super::suggest::with_suggestion(error.into_inner().to_string());
                errors.push(format!("{file}: {at}: {message}"));
                continue;
            }
        };
        let before = errors.len();
        if !valid_name(&raw.name) {
            errors.push(format!(
                "{file}: {key}.name: `{}` is not a catalog name; use lowercase letters, digits, `_` and `-` (at most {LONGEST_NAME})",
                raw.name
            ));
        } else if out.iter().any(|database| database.name == raw.name) {
            errors.push(format!("{file}: {key}.name: `{}` is listed twice", raw.name));
        }
        let url = resolve_url(&raw.url, env, &format!("{file}: {key}.url"), errors);
        if raw.statement_timeout_ms == Some(0) {
            errors.push(format!("{file}: {key}.statement_timeout_ms: must be greater than zero"));
        }
        if raw.max_rows == Some(0) {
            errors.push(format!("{file}: {key}.max_rows: must be greater than zero"));
        }
        for (position, glob) in raw.schemas.iter().enumerate() {
            if glob.trim().is_empty() {
                errors.push(format!("{file}: {key}.schemas[{position}]: empty"));
            }
        }
        let (Some(url), true) = (url, errors.len() == before) else { continue };
        out.push(DatabaseConfig {
            name: raw.name,
            url,
            description: raw.description.filter(|text| !text.trim().is_empty()),
            read_only: raw.read_only,
            schemas: raw.schemas,
            statement_timeout: raw.statement_timeout_ms.map(Duration::from_millis),
            max_rows: raw.max_rows.map(|rows| usize::try_from(rows).unwrap_or(usize::MAX)),
            context_file: raw.context_file,
        });
    }
    out
}

/// The URL of an entry: `${VAR}` references read from the environment. A password written in
/// the file itself is refused, so that `orca.yaml` can be shared and committed.
fn resolve_url(text: &str, env: &Env, key: &str, errors: &mut Vec<String>) -> Option<SecretString> {
    let mut missing = Vec::new();
    let expanded = super::external::expand(text, |name| match env.get(name) {
        Some(value) => Some(SecretString::from(value.to_owned())),
        None => {
            missing.push(name.to_owned());
            None
        }
    });
    let url = match expanded {
        Err(problem) => {
            errors.push(format!("{key}: {problem}"));
            return None;
        }
        Ok(None) => {
            errors
                .push(format!("{key}: the environment variable {} is not set", missing.join(", ")));
            return None;
        }
        Ok(Some(url)) => url,
    };
    if !text.contains("${") && writes_password(text) {
        errors.push(format!(
            "{key}: the URL holds a password; put the URL in an environment variable and write `url: ${{NAME}}`"
        ));
        return None;
    }
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://"))
        || <sqlx::postgres::PgConnectOptions as std::str::FromStr>::from_str(&url).is_err()
    {
        // The parser's message can quote the URL: name only what is wrong.
        errors.push(format!("{key}: not a postgres:// or postgresql:// URL"));
        return None;
    }
    Some(SecretString::from(url))
}

/// Whether a URL written in the file carries a password (`user:password@` or `password=`).
fn writes_password(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or_default();
    let in_userinfo =
        authority.rsplit_once('@').is_some_and(|(userinfo, _)| userinfo.contains(':'));
    in_userinfo || url.to_ascii_lowercase().contains("password=")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(yaml: &str, pairs: &[(&str, &str)]) -> (Vec<DatabaseConfig>, Vec<String>) {
        let value: serde_json::Value = serde_saphyr::from_str(yaml).unwrap();
        let mut errors = Vec::new();
        let list = load(value.get("databases"), &Env::from_pairs(pairs), "orca.yaml", &mut errors);
        (list, errors)
    }

    #[test]
    fn databases_are_read_with_their_urls_from_the_environment() {
        let (list, errors) = read(
            "databases:\n  - name: music\n    url: ${MUSIC}\n    description: Chinook\n    read_only: true\n    schemas: [public]\n    statement_timeout_ms: 30000\n    max_rows: 1000\n    context_file: context/music.md\n  - name: films\n    url: ${FILMS}\n",
            &[("MUSIC", "postgres://u:p@h/chinook"), ("FILMS", "postgres://h/pagila")],
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].name, "music");
        assert_eq!(list[0].read_only, Some(true));
        assert_eq!(list[0].statement_timeout, Some(Duration::from_secs(30)));
        assert_eq!(list[0].max_rows, Some(1000));
        assert_eq!(list[0].context_file.as_deref(), Some(std::path::Path::new("context/music.md")));
        assert_eq!(list[1].description, None);
    }

    #[test]
    fn each_wrong_entry_is_reported_with_its_key() {
        let cases: &[(&str, &str)] = &[
            (
                "databases:\n  - name: Music\n    url: ${A}\n",
                "databases[0].name: `Music` is not a catalog name",
            ),
            (
                "databases:\n  - name: a\n    url: ${A}\n  - name: a\n    url: ${A}\n",
                "databases[1].name: `a` is listed twice",
            ),
            (
                "databases:\n  - name: a\n    url: ${NOPE}\n",
                "databases[0].url: the environment variable NOPE is not set",
            ),
            (
                "databases:\n  - name: a\n    url: postgres://u:secret@h/db\n",
                "databases[0].url: the URL holds a password",
            ),
            (
                "databases:\n  - name: a\n    url: mysql://h/db\n",
                "databases[0].url: not a postgres:// or postgresql:// URL",
            ),
            (
                "databases:\n  - name: a\n    url: ${A}\n    max_rows: 0\n",
                "databases[0].max_rows: must be greater than zero",
            ),
            (
                "databases:\n  - name: a\n    url: ${A}\n    statement_timeout_ms: 0\n",
                "databases[0].statement_timeout_ms: must be greater than zero",
            ),
            (
                "databases:\n  - name: a\n    url: ${A}\n    colour: red\n",
                "databases[0].colour: unknown field `colour`",
            ),
            ("databases:\n  - url: ${A}\n", "databases[0]: missing field `name`"),
            ("databases: music\n", "databases: expected a list of databases"),
            ("databases: []\n", "databases: the list is empty"),
        ];
        for (yaml, expected) in cases {
            let (_, errors) = read(yaml, &[("A", "postgres://h/db")]);
            assert!(
                errors.iter().any(|error| error.contains(expected)),
                "{yaml}: expected {expected:?} in {errors:?}"
            );
            assert!(errors.iter().all(|error| !error.contains("secret")), "{errors:?}");
        }
    }

    #[test]
    fn a_url_without_a_password_may_be_written_in_the_file() {
        let (list, errors) =
            read("databases:\n  - name: local\n    url: postgres://localhost/db\n", &[]);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(list.len(), 1);
    }
}
