//! Configuration errors as a person meets them: every problem at once, each with its file (or
//! variable) and key, and the help text of every command.

use crate::support::{OrcaSetup, run};

#[test]
fn every_configuration_error_is_reported_at_once_with_file_and_key() {
    let setup = OrcaSetup::new("postgres://orca@127.0.0.1:1/orca").with_config(
        "servers: [orca, metabass]\n\
         auth:\n  api_keys:\n    - name: ci\n      sha256: abc\n      verbs: [read, write]\n\
         tracking:\n  batch_size: 0\n  flush_every: 3\n\
         colour: blue\n",
    );
    let (code, _, stderr) = run(&setup, &["doctor"]);
    assert_eq!(code, 2, "{stderr}");
    let file = setup.home.path().join("orca.yaml").display().to_string();
    for expected in [
        format!("{file}: colour: unknown key"),
        format!("{file}: servers[1]: unknown server `metabass`"),
        format!("{file}: auth.api_keys[0].sha256: expected 64 hex characters"),
        format!("{file}: auth.api_keys[0].verbs[1]: unknown verb `write`"),
        format!("{file}: tracking.flush_every"),
    ] {
        assert!(stderr.contains(&expected), "missing {expected:?} in:\n{stderr}");
    }
    assert!(stderr.contains("invalid configuration ("), "{stderr}");
}

#[test]
fn bad_database_urls_name_the_variable_and_hide_the_password() {
    let mut setup = OrcaSetup::new("postgres://orca@127.0.0.1:1/orca");
    setup.env.insert("DATABASE_URL".into(), "mysql://root:hunter2@db/app".into());
    setup.env.insert("ORCA_DATABASE_URL".into(), "postgres://u:hunter2@db:notaport/app".into());
    let (code, _, stderr) = run(&setup, &["migrate"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("environment: DATABASE_URL: expected a postgres:// or postgresql:// URL"),
        "{stderr}"
    );
    assert!(
        stderr.contains("environment: ORCA_DATABASE_URL: not a valid PostgreSQL URL"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");
}

#[test]
fn a_missing_config_file_is_an_error_naming_it() {
    let setup = OrcaSetup::new("postgres://orca@127.0.0.1:1/orca");
    let (code, _, stderr) = run(&setup, &["--config", "/nonexistent/orca.yaml", "doctor"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("/nonexistent/orca.yaml: cannot read"), "{stderr}");
}

#[test]
fn doctor_masks_secrets_and_reports_failed_checks() {
    let setup = OrcaSetup::new("postgres://orca:topsecret@127.0.0.1:1/orca").with_config(
        "http:\n  max_connections: 300\n  auth_failures_per_minute: 7\n  trusted_proxies: [10.0.0.0/8, '192.0.2.7']\n",
    );
    let (code, stdout, _) = run(&setup, &["doctor"]);
    assert_eq!(code, 1, "an unreachable database fails the check");
    assert!(stdout.contains("postgres://orca:****@127.0.0.1:1/orca"), "{stdout}");
    // The HTTP edge's limits, as configured or by default.
    for expected in [
        "max_connections=300 header_timeout_ms=10000 body_timeout_ms=10000 max_json_depth=64 auth_failures_per_minute=7 drain_timeout_ms=10000",
        "http.trusted_proxies",
        "10.0.0.0/8, 192.0.2.7",
    ] {
        assert!(stdout.contains(expected), "missing {expected:?} in:\n{stdout}");
    }
    assert!(stdout.contains("FAIL  state database"), "{stdout}");
    assert!(!stdout.contains("topsecret"), "{stdout}");
}

#[test]
fn every_command_has_help_and_the_version_is_printed() {
    let setup = OrcaSetup::new("postgres://orca@127.0.0.1:1/orca");
    let (code, stdout, _) = run(&setup, &["--version"]);
    assert_eq!(code, 0);
    assert_eq!(stdout.trim(), format!("orca {}", env!("CARGO_PKG_VERSION")));
    for (args, expected) in [
        (vec!["--help"], "export-feedback"),
        (vec!["serve", "--help"], "--stateful"),
        (vec!["demo", "--help"], "--addr"),
        (vec!["migrate", "--help"], "schema `orca`"),
        (vec!["export-feedback", "--help"], "--since"),
        (vec!["doctor", "--help"], "secrets masked"),
        (vec!["key", "new", "--help"], "--verbs"),
    ] {
        let (code, stdout, stderr) = run(&setup, &args);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        assert!(stdout.contains(expected), "{args:?} help lacks {expected:?}:\n{stdout}");
    }
    let (code, _, stderr) = run(&setup, &["serve"]);
    assert_eq!(code, 2, "serve needs --stdio or --http");
    assert!(stderr.contains("--stdio") && stderr.contains("--http"), "{stderr}");
}

#[test]
fn key_new_prints_a_key_and_the_matching_yaml_entry() {
    let setup = OrcaSetup::new("postgres://orca@127.0.0.1:1/orca");
    let (code, stdout, stderr) =
        run(&setup, &["key", "new", "--name", "ci", "--verbs", "read,create"]);
    assert_eq!(code, 0, "{stderr}");
    let key = stdout.lines().map(str::trim).find(|line| line.starts_with("orca_")).unwrap();
    let hash = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(key.as_bytes()));
    assert!(stdout.contains(&format!("sha256: {hash}")), "{stdout}");
    assert!(stdout.contains("verbs: [read, create]"), "{stdout}");
    let (code, _, stderr) = run(&setup, &["key", "new", "--name", "ci", "--verbs", "admin"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("unknown verb `admin`"), "{stderr}");
}

#[test]
fn an_unknown_key_suggests_the_closest_known_one() {
    let setup = OrcaSetup::new("postgres://orca@127.0.0.1:1/orca")
        .with_config("trackng: {}\ntracking:\n  batch_sise: 3\n");
    let (code, _, stderr) = run(&setup, &["doctor"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("trackng: unknown key") && stderr.contains("did you mean `tracking`?"));
    assert!(stderr.contains("did you mean `batch_size`?"), "{stderr}");
}

#[test]
fn the_committed_reference_is_what_the_code_generates() {
    let setup = OrcaSetup::new("postgres://orca@127.0.0.1:1/orca");
    let root = env!("CARGO_MANIFEST_DIR");
    let (code, stdout, stderr) = run(&setup, &["config", "reference", "--check", "--dir", root]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let (code, schema, _) = run(&setup, &["config", "schema", "external"]);
    assert_eq!(code, 0);
    let committed =
        std::fs::read_to_string(format!("{root}/docs/schema/external-mcps.schema.json"));
    assert_eq!(schema, committed.unwrap());
}
