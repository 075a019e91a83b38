//! Data-driven tests of configuration loading: each case is a YAML text and environment, and the
//! errors (or absence of errors) expected.

use std::io::Write;

use super::*;

#[track_caller]
fn check(yaml: &str, env: &[(&str, &str)], expected_errors: &[&str]) -> Option<Config> {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(yaml.as_bytes()).unwrap();
    let path = file.path().to_path_buf();
    let result = load(Some(&path), &Env::from_pairs(env));
    match result {
        Ok(config) => {
            assert!(
                expected_errors.is_empty(),
                "expected errors {expected_errors:?}, got a valid config"
            );
            Some(config)
        }
        Err(ConfigErrors(errors)) => {
            assert_eq!(errors.len(), expected_errors.len(), "errors: {errors:#?}");
            for (error, expected) in errors.iter().zip(expected_errors) {
                assert!(error.contains(expected), "{error:?} lacks {expected:?}");
                assert!(
                    error.starts_with(&path.display().to_string())
                        || error.starts_with("environment:"),
                    "{error}"
                );
            }
            None
        }
    }
}

#[test]
fn an_empty_file_gives_the_defaults() {
    let config = check("", &[("HOME", "/home/ana")], &[]).unwrap();
    assert_eq!(config.servers, None);
    assert!(config.auth.api_keys.is_empty());
    assert_eq!(config.auth.stdio.name, "local");
    assert_eq!(config.auth.stdio.verbs.len(), 4);
    assert_eq!(config.http.max_body_bytes, 4 * 1024 * 1024);
    assert!(config.tracking.enabled);
    assert_eq!(config.tracking.queue_capacity, 10_000);
    assert!(config.database_url.is_none() && config.state_database_url.is_none());
}

#[test]
fn a_full_file_is_read_into_typed_values() {
    let hash = "a".repeat(64);
    let yaml = format!(
        "servers: [orca]\n\
         auth:\n  api_keys:\n    - {{name: ci, sha256: {hash}, verbs: [read, delete]}}\n  stdio: {{name: me, verbs: [read]}}\n\
         http: {{max_body_bytes: 1000, allowed_hosts: [orca.internal], allowed_origins: ['https://ui.example']}}\n\
         tracking: {{enabled: false, queue_capacity: 5, batch_size: 2, replay_interval_ms: 50, max_response_bytes: 10}}\n"
    );
    let config =
        check(&yaml, &[("ORCA_HOME", "/srv/orca"), ("DATABASE_URL", "postgres://a:b@h/db")], &[])
            .unwrap();
    assert_eq!(config.home, PathBuf::from("/srv/orca"));
    assert_eq!(config.servers, Some(vec![ServerKind::Orca]));
    let key = &config.auth.api_keys[0];
    assert_eq!(key.principal.name, "ci");
    assert!(key.principal.may(Verb::Delete) && !key.principal.may(Verb::Create));
    assert_eq!(config.auth.stdio.name, "me");
    assert_eq!(config.http.allowed_hosts, Some(vec!["orca.internal".to_owned()]));
    assert!(!config.tracking.enabled);
    assert_eq!(config.tracking.replay_interval, Duration::from_millis(50));
    assert_eq!(
        config.database_url.as_ref().map(|url| url.expose_secret().to_owned()),
        Some("postgres://a:b@h/db".into())
    );
}

#[test]
fn every_problem_is_reported_with_its_key() {
    check(
        "nope: 1\nhttp:\n  max_body_bytes: -1\ntracking:\n  batch_size: 0\n  extra: true\n",
        &[("DATABASE_URL", "mysql://x")],
        &[
            "nope: unknown key",
            "environment: DATABASE_URL",
            "http.max_body_bytes",
            "tracking.extra: unknown field `extra`",
        ],
    );
    check("tracking:\n  batch_size: 0\n", &[], &["tracking.batch_size: must be greater than zero"]);
    check(
        "http:\n  body_timeout_ms: 0\n",
        &[],
        &["http.body_timeout_ms: must be greater than zero"],
    );
    check(
        "http:\n  health_details: everything\n",
        &[],
        &["http.health_details: `everything` must be `counts` or `names`"],
    );
    check(
        &format!(
            "auth:\n  api_keys:\n    - {{name: a, sha256: {h}, verbs: []}}\n    - {{name: a, sha256: {h}, verbs: [root]}}\n",
            h = "b".repeat(64)
        ),
        &[],
        &[
            "auth.api_keys[0].verbs: list at least one",
            "auth.api_keys[1].name: `a` is used by another key",
            "auth.api_keys[1].sha256: the same key hash appears twice",
            "auth.api_keys[1].verbs[0]: unknown verb `root`",
        ],
    );
    check("servers: [orca, orca]\n", &[], &["servers[1]: `orca` is listed twice"]);
    check(
        "http:\n  allowed_origins: [example.com]\n",
        &[],
        &["http.allowed_origins[0]: `example.com` needs a scheme"],
    );
    check("- a\n- b\n", &[], &["the top level must be a mapping"]);
    check("auth: [\n", &[], &["not valid YAML"]);
}

#[test]
fn urls_are_masked_for_display() {
    assert_eq!(mask_url("postgres://u:p@h:5432/db"), "postgres://u:****@h:5432/db");
    assert_eq!(mask_url("postgres://u@h/db"), "postgres://u@h/db");
    assert_eq!(
        mask_url("postgres://h/db?user=u&password=p"),
        "postgres://h/db?user=u&password=****"
    );
    assert_eq!(mask_url("postgres://u:p:q@h/db"), "postgres://u:****@h/db");
    assert_eq!(mask_url("garbage"), "****");
}

#[test]
fn the_sql_section_and_read_only_are_validated() {
    let config = check(
        "read_only: true\nsql:\n  write_confirmation: human\n  default_max_rows: 10\n  token_lifetime_seconds: 60\n",
        &[("ORCA_SECRET", "0123456789abcdef0123456789abcdef")],
        &[],
    )
    .unwrap();
    assert!(config.read_only);
    assert_eq!(config.sql.write_confirmation, WriteConfirmation::Human);
    assert_eq!(config.sql.default_max_rows, 10);
    assert_eq!(config.sql.token_lifetime, Duration::from_secs(60));
    assert!(config.secret.is_some());
    let defaults = check("", &[], &[]).unwrap();
    assert_eq!(defaults.sql.write_confirmation, WriteConfirmation::Model);
    assert_eq!(defaults.sql.hard_max_rows, 50_000);
    assert!(!defaults.read_only);
    check(
        "read_only: maybe\nsql:\n  write_confirmation: robot\n  hard_max_rows: 0\n  default_max_rows: 100\n  max_timeout_ms: 10\n  colour: blue\n",
        &[("ORCA_SECRET", "short")],
        &["sql.colour", "read_only: expected true or false", "ORCA_SECRET: must be at least 32"],
    );
    check(
        "sql:\n  write_confirmation: robot\n  hard_max_rows: 0\n  default_max_rows: 100000\n  max_timeout_ms: 10\n",
        &[],
        &[
            "sql.write_confirmation: `robot` is not one of: model, human",
            "sql.hard_max_rows: must be greater than 0",
            "sql.default_max_rows: must not exceed sql.hard_max_rows",
            "sql.default_timeout_ms: must not exceed sql.max_timeout_ms",
        ],
    );
}

#[test]
fn data_limits_and_masking_policies_are_read_and_checked() {
    let config = check(
        "data:\n  exact_count_max_rows: 10\n  sample_rows: 50\nmasking:\n  customers:\n    email: keep_email_domain\n    phone: keep_last:4\n    company: null\n",
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(config.data.exact_count_max_rows, 10);
    assert_eq!(config.data.sample_rows, 50);
    assert_eq!(config.masking["customers"].len(), 3);
    assert_eq!(config.masking["customers"]["company"], crate::privacy::mask::MaskRule::Null);
    assert_eq!(check("", &[], &[]).unwrap().data.sample_rows, 100_000);
    check(
        "data:\n  colour: 1\nmasking:\n  p:\n    email: scramble\n  empty: {}\n",
        &[],
        &["masking.empty: a policy needs at least one column", "masking.p.email", "data.colour"],
    );
    check("data:\n  sample_rows: 0\n", &[], &["data.sample_rows: must be greater than zero"]);
}

#[test]
fn metabase_settings_come_from_the_environment_or_the_file_and_are_checked() {
    let config = check("", &[("HOME", "/h")], &[]).unwrap();
    assert!(config.metabase.is_none(), "no URL: the server is disabled");
    let env = [
        ("METABASE_URL", "https://mb.example/"),
        ("METABASE_USERNAME", "ana@example.com"),
        ("METABASE_PASSWORD", "hunter2-secret"),
    ];
    let config = check("metabase: {max_rows: 50, timeout_ms: 1000}\n", &env, &[]).unwrap();
    let metabase = config.metabase.as_ref().unwrap();
    assert_eq!(metabase.url, "https://mb.example");
    assert_eq!(metabase.max_rows, 50);
    assert!(
        matches!(&metabase.auth, MetabaseAuth::Session { username, .. } if username == "ana@example.com")
    );
    let shown = format!("{:?}", config.describe());
    assert!(shown.contains("mb.example") && !shown.contains("hunter2-secret"), "{shown}");
    let config = check(
        "metabase: {url: 'http://mb.internal:3000', api_key: mb_key_from_yaml}\n",
        &[("METABASE_API_KEY", "mb_key_from_env")],
        &[],
    )
    .unwrap();
    match &config.metabase.as_ref().unwrap().auth {
        MetabaseAuth::ApiKey(key) => {
            assert_eq!(key.expose_secret(), "mb_key_from_env", "the environment wins");
        }
        other => panic!("{other:?}"),
    }
    check("metabase: {url: 'http://mb'}\n", &[], &["no credentials are"]);
    check(
        "metabase: {url: 'http://mb', api_key: k, colour: red}\n",
        &[],
        &["unknown field `colour`"],
    );
    check("metabase: {url: 'ftp://mb', api_key: k}\n", &[], &["METABASE_URL: expected an http"]);
    let both = [
        ("METABASE_URL", "http://mb"),
        ("METABASE_API_KEY", "k"),
        ("METABASE_USERNAME", "u"),
        ("METABASE_PASSWORD", "p"),
    ];
    check("", &both, &["not both"]);
    check("", &[("METABASE_URL", "http://mb"), ("METABASE_USERNAME", "u")], &["go together"]);
    check(
        "metabase: {max_rows: 20000}\n",
        &[("METABASE_URL", "http://mb"), ("METABASE_API_KEY", "k")],
        &["between 1 and 10000"],
    );
}

#[test]
fn pools_are_lazy_by_default_and_can_be_given_a_fixed_size() {
    let config = check("", &[("HOME", "/home/ana")], &[]).unwrap();
    assert_eq!(config.database, PoolConfig { max_connections: 8, min_connections: 0 });
    let config =
        check("database: {max_connections: 4, min_connections: 4}\n", &[("HOME", "/h")], &[])
            .unwrap();
    assert_eq!(config.database, PoolConfig { max_connections: 4, min_connections: 4 });
    let described = config.describe();
    assert!(described["database"].starts_with("max_connections=4 min_connections=4"));
    assert!(described["http.limits"].contains("drain_timeout_ms=10000"), "{described:?}");
    check(
        "database: {max_connections: 0, min_connections: 9, pool: 3}\n",
        &[("HOME", "/h")],
        &["database.pool: unknown field `pool`"],
    );
    check(
        "database: {max_connections: 0, min_connections: 9}\n",
        &[("HOME", "/h")],
        &[
            "database.max_connections: 0 is out of range; give 1 to 1000",
            "database.min_connections: 9 is more than database.max_connections (8)",
        ],
    );
}

#[test]
fn trusted_proxies_are_addresses_or_cidr_ranges_checked_at_load() {
    let config = check("", &[("HOME", "/h")], &[]).unwrap();
    assert!(config.http.trusted_proxies.is_empty());
    assert_eq!(config.describe()["http.trusted_proxies"], "(none: the peer address is the client)");
    let config =
        check("http: {trusted_proxies: [10.0.0.0/8, '192.0.2.7', 'fd00::/8']}\n", &[], &[])
            .unwrap();
    let proxies = &config.http.trusted_proxies;
    assert_eq!(proxies.len(), 3);
    assert!(proxies[0].contains("10.1.2.3".parse().unwrap()));
    assert_eq!(config.describe()["http.trusted_proxies"], "10.0.0.0/8, 192.0.2.7, fd00::/8");
    check(
        "http: {trusted_proxies: [proxy.internal, 10.0.0.0/33, 10.0.0.1/8, '::1']}\n",
        &[],
        &[
            "http.trusted_proxies[0]: `proxy.internal` is not an IP address or a CIDR range",
            "http.trusted_proxies[1]: `10.0.0.0/33`: the prefix length must be a number from 0 to 32",
            "http.trusted_proxies[2]: `10.0.0.1/8` has address bits set past the prefix; did you mean `10.0.0.0/8`?",
        ],
    );
    check("http: {trusted_proxies: 10.0.0.1}\n", &[], &["http.trusted_proxies"]);
}

#[test]
fn a_role_names_a_masking_policy_that_its_keys_get_with_a_salt() {
    let hash = "ab".repeat(32);
    let other = "cd".repeat(32);
    let yaml = format!(
        "masking:\n  people:\n    email: redact\nauth:\n  roles:\n    analyst:\n      verbs: [read]\n      masking: people\n    admin:\n      verbs: [read]\n  api_keys:\n    - name: a\n      sha256: {hash}\n      role: analyst\n    - name: b\n      sha256: {other}\n      role: admin\n"
    );
    let mut config = check(&yaml, &[], &[]).unwrap();
    let policy = config.auth.roles["analyst"].masking.clone().unwrap();
    assert_eq!(policy.id, "people");
    assert_eq!(config.auth.roles["admin"].masking, None);
    config.auth.salt_masking(|id| format!("salt of {id}"));
    let analyst = &config.auth.api_keys[0].principal;
    let salted = analyst.masking.as_deref().unwrap();
    assert_eq!((salted.id.as_str(), salted.salt.as_str()), ("people", "salt of people"));
    assert!(salted.rule_for("EMAIL").is_some());
    assert_eq!(config.auth.api_keys[1].principal.masking, None);
    check(
        "masking:\n  people:\n    email: redact\nauth:\n  roles:\n    analyst:\n      verbs: [read]\n      masking: persons\n",
        &[],
        &[
            "auth.roles.analyst.masking: `persons` is not one of the policies under masking: (people)",
        ],
    );
    check(
        "auth:\n  roles:\n    analyst:\n      verbs: [read]\n      masking: people\n",
        &[],
        &[
            "auth.roles.analyst.masking: `people` is not one of the policies under masking: (none are configured)",
        ],
    );
}

#[test]
fn the_catalog_section_sets_when_search_is_offered_and_its_embeddings() {
    let config = check("", &[("HOME", "/h")], &[]).unwrap();
    assert_eq!(config.catalog, CatalogConfig::default());
    assert_eq!(config.catalog.search_above, 40);
    let config = check("", &[("HOME", "/h"), ("ORCA_CATALOG_SEARCH_ABOVE", "7")], &[]).unwrap();
    assert_eq!(config.catalog.search_above, 7);
    let yaml = "catalog:\n  search_above: 12\n  principals: [ci]\n  roles: [agents]\n  embeddings:\n    provider: gemini\n    model: text-embedding-004\n";
    let config = check(yaml, &[("HOME", "/h"), ("ORCA_CATALOG_SEARCH_ABOVE", "7")], &[]).unwrap();
    assert_eq!(config.catalog.search_above, 12, "the file wins over the environment");
    assert_eq!(config.catalog.principals, ["ci"]);
    assert_eq!(config.catalog.roles, ["agents"]);
    assert_eq!((config.catalog.cache_ttl, config.catalog.cache_public), (Duration::ZERO, false));
    let hinted = check("catalog: {cache_ttl_ms: 1500, cache_scope: public}\n", &[], &[]).unwrap();
    assert_eq!(
        (hinted.catalog.cache_ttl, hinted.catalog.cache_public),
        (Duration::from_millis(1500), true)
    );
    let embeddings = config.catalog.embeddings.unwrap();
    assert_eq!(
        (embeddings.provider, embeddings.model.as_str(), embeddings.weight),
        (crate::llm::Provider::Google, "text-embedding-004", 0.8)
    );
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: &[Case<'_>] = &[
        (
            "catalog: {search_below: 3}\n",
            &[],
            &["catalog.search_below: unknown field `search_below`"],
        ),
        (
            "",
            &[("ORCA_CATALOG_SEARCH_ABOVE", "many")],
            &["ORCA_CATALOG_SEARCH_ABOVE: `many` is not a number"],
        ),
        ("catalog: {principals: ['']}\n", &[], &["catalog.principals[0]: a name may not be empty"]),
        (
            "catalog: {embeddings: {provider: anthropic, model: m}}\n",
            &[],
            &["catalog.embeddings.provider: `anthropic` has no embeddings here"],
        ),
        (
            "catalog: {embeddings: {provider: openai, model: m, weight: 2}}\n",
            &[],
            &["catalog.embeddings.weight: must be from 0 to 1"],
        ),
        (
            "catalog: {embeddings: {provider: openai, model: m, dimensions: 8}}\n",
            &[],
            &["catalog.embeddings.dimensions: unknown field `dimensions`"],
        ),
        (
            "catalog: {cache_scope: shared}\n",
            &[],
            &["catalog.cache_scope: `shared` is neither private nor public"],
        ),
    ];
    for (yaml, env, errors) in cases {
        let mut env = env.to_vec();
        env.push(("HOME", "/h"));
        check(yaml, &env, errors);
    }
}

#[test]
fn the_trace_url_is_an_http_template_with_the_trace_id() {
    let cases: &[(&str, Result<Option<&str>, &str>)] = &[
        ("", Ok(None)),
        ("http://jaeger:16686/trace/{trace_id}", Ok(Some("http://jaeger:16686/trace/{trace_id}"))),
        (" https://t.example/{trace_id}?x=1 ", Ok(Some("https://t.example/{trace_id}?x=1"))),
        ("http://jaeger:16686/trace/", Err("ORCA_TRACE_URL")),
        ("javascript:alert('{trace_id}')", Err("ORCA_TRACE_URL")),
        ("{trace_id}", Err("ORCA_TRACE_URL")),
    ];
    for (value, expected) in cases {
        let env = [("HOME", "/home/ana"), ("ORCA_TRACE_URL", *value)];
        match expected {
            Ok(url) => {
                let config = check("", &env, &[]).unwrap();
                assert_eq!(config.trace_url.as_deref(), *url, "{value}");
            }
            Err(message) => assert!(check("", &env, &[message]).is_none(), "{value}"),
        }
    }
}

#[test]
fn the_public_url_is_a_bare_http_or_https_origin() {
    assert_eq!(check("", &[], &[]).unwrap().http.public_url, None);
    for (written, kept) in [
        ("https://orca.example.com", "https://orca.example.com"),
        ("https://orca.example.com/", "https://orca.example.com"),
        ("http://127.0.0.1:9000", "http://127.0.0.1:9000"),
    ] {
        let config = check(&format!("http: {{public_url: '{written}'}}\n"), &[], &[]).unwrap();
        assert_eq!(config.http.public_url.as_deref(), Some(kept), "{written}");
    }
    for written in [
        "orca.example.com",
        "ftp://orca.example.com",
        "https://orca.example.com/console",
        "https://orca.example.com/?a=b",
        "https://user:pass@orca.example.com",
    ] {
        check(
            &format!("http: {{public_url: '{written}'}}\n"),
            &[],
            &[&format!("http.public_url: `{written}` must be http(s)://host[:port]")],
        );
    }
}
