//! Masking is PostgreSQL's: a masked caller's statements run as a role of its own that reads
//! masked views only. With orca's courtesy refusals switched off (`sql.refuse_masked_sql:
//! false`), every trick that recovers values from a parser's view of SQL (expressions, aliases,
//! whole rows, positional orders, character walks, row and array comparisons, `EXPLAIN ANALYZE`
//! counts, casts whose errors quote a value, recursive CTEs, lateral joins, windows, a hash
//! dictionary through aliases, functions that try to leave the role) is tried through orca on
//! each rule, and the same statements run as the role directly in PostgreSQL, with
//! `pg_stats` and `pg_statistic`: no raw value comes back. Relations and columns created after
//! start are masked before they are readable.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::{OrcaSetup, call, samples};

type Client = rmcp::service::RunningService<rmcp::service::RoleClient, ()>;

const ANALYST_KEY: &str = "orca_test_key_of_the_masked_analyst";
const ADMIN_KEY: &str = "orca_test_key_of_the_unmasked_admin";

/// Every rule on a column of Chinook's `customer` and `employee`.
const MASKED_COLUMNS: [&str; 5] = ["email", "phone", "company", "last_name", "fax"];

fn setup(database_url: &str, refuse: bool) -> OrcaSetup {
    let analyst = hex::encode(Sha256::digest(ANALYST_KEY.as_bytes()));
    let admin = hex::encode(Sha256::digest(ADMIN_KEY.as_bytes()));
    OrcaSetup::new(database_url).with_config(&format!(
        "sql:\n  refuse_masked_sql: {refuse}\nmasking:\n  guarded:\n    email: keep_email_domain\n    phone: keep_last:4\n    company: redact\n    last_name: hash\n    fax: 'null'\nauth:\n  api_keys:\n    - name: analyst\n      sha256: {analyst}\n      role: analyst\n    - name: admin\n      sha256: {admin}\n      role: admin\n  roles:\n    analyst:\n      verbs: [read]\n      masking: guarded\n    admin:\n      verbs: [read, create, update, delete]\n"
    ))
}

/// The raw values of every masked column, long enough to be told apart from other text, and
/// found nowhere in the unmasked columns (so that finding one in a result is a leak).
async fn raw_values(pool: &sqlx::PgPool) -> BTreeSet<String> {
    let mut raw = BTreeSet::new();
    for table in ["customer", "employee"] {
        for column in MASKED_COLUMNS {
            let exists: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_name = $1 AND column_name = $2)",
            )
            .bind(table)
            .bind(column)
            .fetch_one(pool)
            .await
            .unwrap();
            if !exists {
                continue;
            }
            let values: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT DISTINCT {column}::text FROM {table} WHERE {column} IS NOT NULL"
            )))
            .fetch_all(pool)
            .await
            .unwrap();
            raw.extend(values.into_iter().filter(|value| value.chars().count() >= 5));
        }
    }
    let unmasked: String = sqlx::query_scalar(
        "SELECT string_agg(concat_ws('|', customer_id, first_name, address, city, state, country, postal_code), '|') FROM customer",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    raw.retain(|value| !unmasked.contains(value.as_str()));
    assert!(raw.len() > 200, "too few raw values to look for: {}", raw.len());
    raw
}

/// The raw values `text` holds.
fn leaked<'a>(raw: &'a BTreeSet<String>, text: &str) -> Vec<&'a str> {
    let text = text.replace("\\\"", "\"");
    raw.iter().filter(|value| text.contains(value.as_str())).map(String::as_str).take(5).collect()
}

/// The whole answer of a call (result or error) as text.
async fn answer(client: &Client, tool: &str, arguments: Value) -> String {
    let result = call(client, tool, arguments, None).await.unwrap();
    serde_json::to_string(&result).unwrap()
}

/// Statements that, run on the raw tables, put raw values of the masked columns in their result
/// or their error.
fn extractions() -> Vec<String> {
    let mut statements: Vec<String> = [
        "SELECT email, phone, company, last_name, fax FROM customer",
        "SELECT * FROM employee",
        "SELECT lower(email), phone || '', company::text, concat(last_name), coalesce(fax, '') FROM customer",
        "SELECT row_to_json(c)::text FROM customer c",
        "SELECT c FROM customer c",
        "SELECT json_agg(c)::text FROM customer c",
        "SELECT array_agg(email)::text, array_agg(last_name)::text FROM customer",
        "SELECT x.v AS e, x.w AS anything FROM (SELECT email AS v, company AS w FROM customer) x",
        "SELECT * FROM (SELECT * FROM customer ORDER BY 12) s",
        "SELECT DISTINCT ON (4) company, customer_id FROM customer ORDER BY 4, 2",
        "SELECT company, count(*) FROM customer GROUP BY 1",
        "SELECT email FROM customer UNION SELECT phone FROM customer",
        "SELECT email FROM public.customer",
        "SELECT \"email\" FROM \"public\".\"customer\"",
        "WITH m AS MATERIALIZED (SELECT * FROM customer) SELECT * FROM m",
        "SELECT l.* FROM customer c, LATERAL (SELECT c.email, c.phone, c.company, c.last_name, c.fax) l",
        "SELECT lag(email) OVER (ORDER BY customer_id), first_value(company) OVER w, last_value(last_name) OVER w FROM customer WINDOW w AS (ORDER BY phone)",
        "SELECT email::int FROM customer",
        "SELECT last_name::numeric FROM customer",
        "SELECT company::date FROM customer WHERE company IS NOT NULL",
        "SELECT phone::interval FROM customer",
        "WITH RECURSIVE w(i, s) AS (SELECT 1, substr((SELECT email FROM customer WHERE customer_id = 1), 1, 1) UNION ALL SELECT i + 1, s || substr((SELECT email FROM customer WHERE customer_id = 1), i + 1, 1) FROM w WHERE i < 60) SELECT max(s) FROM w",
        "SELECT (SELECT d FROM customer d WHERE d.customer_id = c.customer_id) FROM customer c",
        "SELECT (ROW(c.customer_id, c.first_name) , (SELECT d.email FROM customer d WHERE d.customer_id = c.customer_id))::text FROM customer c",
    ]
    .map(str::to_owned)
    .to_vec();
    // A character walk through every value of each masked column, in one query.
    for column in MASKED_COLUMNS {
        statements.push(format!(
            "SELECT c.customer_id, (SELECT string_agg(chr(code), '' ORDER BY i) FROM generate_series(1, 80) i \
             JOIN generate_series(32, 255) code ON substr(c.{column}::text, i, 1) = chr(code)) FROM customer c"
        ));
    }
    statements
}

/// Questions whose answer is 1 on the raw data and 0 on the masked: comparisons of rows, arrays
/// and values with guesses that are right.
const ORACLES: [&str; 9] = [
    "SELECT count(*) FROM customer WHERE email = 'luisg@embraer.com.br'",
    "SELECT count(*) FROM customer c WHERE ROW(c.customer_id, c.email) = ROW(1, 'luisg@embraer.com.br'::varchar)",
    "SELECT count(*) FROM (VALUES (1)) one WHERE ROW(1, 'luisg@embraer.com.br'::text) IN (SELECT customer_id, email::text FROM customer)",
    "SELECT count(*) FROM customer c WHERE (c.customer_id, c.email) >= (1, 'luisg@embraer.com.br') AND c.customer_id = 1",
    "SELECT count(*) FROM customer WHERE ARRAY[email::text] <@ ARRAY['luisg@embraer.com.br']",
    "SELECT count(*) FROM customer WHERE last_name = 'Gonçalves'",
    "SELECT count(*) FROM customer WHERE phone LIKE '+55 (12) 3923%'",
    "SELECT count(*) FROM customer WHERE company LIKE 'Embraer%'",
    "SELECT count(*) FROM customer WHERE fax = '+55 (12) 3923-5566'",
];

/// The count a one-cell answer holds.
fn count_of(answer: &str) -> Value {
    let value: Value = serde_json::from_str(answer).unwrap();
    value["structuredContent"]["rows"][0][0].clone()
}

#[tokio::test]
async fn with_the_refusals_off_no_trick_through_orca_reads_a_raw_value() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let raw = raw_values(&pool).await;
    let server = setup(&database.url, false).http_server(&[]);
    let analyst = server.client(Some(ANALYST_KEY)).await;
    let admin = server.client(Some(ADMIN_KEY)).await;

    for sql in extractions() {
        for (tool, arguments) in [
            ("execute_sql", json!({"sql": sql, "dry_run": false})),
            ("query_sql", json!({"sql": sql, "max_rows": 1000})),
        ] {
            let seen = answer(&analyst, tool, arguments.clone()).await;
            assert_eq!(leaked(&raw, &seen), Vec::<&str>::new(), "{tool} {sql}: {seen}");
            // The same statement shows the admin raw values (the trick works on raw data) or
            // fails the same way for both (a cast of the first value).
            let clear = answer(&admin, tool, arguments).await;
            assert!(!leaked(&raw, &clear).is_empty() || clear.contains("isError\":true"), "{sql}");
        }
    }
    for sql in ORACLES {
        let arguments = json!({"sql": sql, "dry_run": false});
        assert_eq!(count_of(&answer(&admin, "execute_sql", arguments.clone()).await), 1, "{sql}");
        assert_eq!(count_of(&answer(&analyst, "execute_sql", arguments).await), 0, "{sql}");
    }
    // `EXPLAIN ANALYZE` counts the rows a condition keeps: of the masked values.
    let probe = "SELECT * FROM customer WHERE email LIKE 'luisg%'";
    for (client, rows) in [(&admin, 1), (&analyst, 0)] {
        let explained = call(
            client,
            "explain_sql",
            json!({"sql": probe, "analyze": true, "format": "json"}),
            None,
        )
        .await
        .unwrap();
        let text = serde_json::to_string(&explained.structured_content).unwrap();
        assert!(
            text.contains(&format!("\\\"Actual Rows\\\": {rows}"))
                || text.contains(&format!("\"Actual Rows\":{rows}")),
            "{text}"
        );
        assert_eq!(leaked(&raw, &text), Vec::<&str>::new(), "{text}");
    }
    // The hash dictionary: guesses named like a hashed column come back as they were sent, so
    // no guess is hashed the way the column's values are.
    let hashes = answer(
        &analyst,
        "execute_sql",
        json!({"sql": "SELECT last_name FROM customer", "dry_run": false}),
    )
    .await;
    let hashes: Vec<String> = serde_json::from_str::<Value>(&hashes).unwrap()["structuredContent"]
        ["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row[0].as_str().unwrap().to_owned())
        .collect();
    assert!(hashes.iter().all(|hash| hash.starts_with("h:")), "{hashes:?}");
    let dictionary = "SELECT x.v AS guess, x.v AS last_name FROM (SELECT unnest(ARRAY['Gonçalves', 'Köhler', 'Tremblay', 'Almeida', 'Brooks']) AS v) x";
    let guessed =
        answer(&analyst, "execute_sql", json!({"sql": dictionary, "dry_run": false})).await;
    assert!(guessed.contains("Gonçalves"), "{guessed}");
    assert!(hashes.iter().all(|hash| !guessed.contains(hash.as_str())), "{guessed}");
    // A function of the database's that tries to leave the role, then read a raw value: the
    // login role cannot become another, nor read the table.
    sqlx::raw_sql(
        "CREATE FUNCTION sneaky() RETURNS text STABLE LANGUAGE plpgsql AS $$ BEGIN \
           PERFORM set_config('role', 'postgres', true); \
           RETURN (SELECT email FROM public.customer WHERE customer_id = 1); END $$",
    )
    .execute(&pool)
    .await
    .unwrap();
    let sneaky =
        answer(&analyst, "execute_sql", json!({"sql": "SELECT sneaky()", "dry_run": false})).await;
    assert!(sneaky.contains("isError\":true"), "{sneaky}");
    assert_eq!(leaked(&raw, &sneaky), Vec::<&str>::new(), "{sneaky}");
    analyst.cancel().await.unwrap();
    admin.cancel().await.unwrap();
}

#[tokio::test]
async fn the_masked_role_itself_reads_no_raw_value_and_no_statistics_in_postgresql() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let raw = raw_values(&pool).await;
    sqlx::query("ANALYZE customer").execute(&pool).await.unwrap();
    let server = setup(&database.url, true).http_server(&[]);
    let analyst = server.client(Some(ANALYST_KEY)).await;
    // The first masked call prepares the role.
    answer(&analyst, "execute_sql", json!({"sql": "SELECT 1", "dry_run": false})).await;
    // This database's masked schema names its role (other tests' roles share the cluster).
    let masked_schema: String = sqlx::query_scalar(
        "SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'orca\\_mask\\_guarded\\_%\\_\\_public'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let role = masked_schema.trim_end_matches("__public").to_owned();
    let mut connection = pool.acquire().await.unwrap();
    // The test's superuser session takes the role (as its own login would be).
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "SET ROLE \"{role}\"; SET search_path = \"{masked_schema}\", public"
    )))
    .execute(&mut *connection)
    .await
    .unwrap();
    for sql in extractions() {
        let outcome =
            sqlx::query(sqlx::AssertSqlSafe(format!("SELECT row_to_json(q)::text FROM ({sql}) q")))
                .fetch_all(&mut *connection)
                .await;
        let text = match outcome {
            Ok(rows) => rows
                .iter()
                .map(|row| sqlx::Row::get::<Option<String>, _>(row, 0).unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n"),
            Err(error) => error.to_string(),
        };
        assert_eq!(leaked(&raw, &text), Vec::<&str>::new(), "{sql}: {text}");
    }
    for sql in ORACLES {
        let count: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_one(&mut *connection)
            .await
            .unwrap();
        assert_eq!(count, 0, "{sql}");
    }
    // Statistics of the originals: none shown, and the catalog table itself refused.
    let shown: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stats WHERE tablename IN ('customer', 'employee')",
    )
    .fetch_one(&mut *connection)
    .await
    .unwrap();
    assert_eq!(shown, 0);
    for sql in [
        "SELECT count(*) FROM pg_statistic",
        "SELECT email FROM public.customer",
        "SELECT customer_id FROM public.customer",
        "SELECT salt FROM orca_mask.salts",
    ] {
        let error = sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_all(&mut *connection)
            .await
            .expect_err(sql);
        assert!(error.to_string().contains("permission denied"), "{sql}: {error}");
    }
    // The views' text names the salts' table, never a salt.
    let definitions: String = sqlx::query_scalar(
        "SELECT string_agg(definition, ' ') FROM pg_views WHERE schemaname = $1",
    )
    .bind(&masked_schema)
    .fetch_one(&mut *connection)
    .await
    .unwrap();
    assert!(definitions.contains("orca_mask.salts"), "{definitions}");
    sqlx::raw_sql("RESET ROLE").execute(&mut *connection).await.unwrap();
    let salt: Vec<u8> = sqlx::query_scalar("SELECT salt FROM orca_mask.salts WHERE role = $1")
        .bind(&role)
        .fetch_one(&mut *connection)
        .await
        .unwrap();
    assert!(!definitions.contains(&hex::encode(&salt)), "a salt in a view's text");
    assert!(!definitions.contains(String::from_utf8_lossy(&salt).as_ref()));
    analyst.cancel().await.unwrap();
}

#[tokio::test]
async fn relations_and_columns_created_after_start_are_masked_before_they_are_readable() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let server = setup(&database.url, false).http_server(&[]);
    let analyst = server.client(Some(ANALYST_KEY)).await;
    let read = |sql: &'static str| {
        let analyst = &analyst;
        async move { answer(analyst, "execute_sql", json!({"sql": sql, "dry_run": false})).await }
    };
    assert!(
        read("SELECT email FROM customer WHERE customer_id = 1")
            .await
            .contains("***@embraer.com.br")
    );
    sqlx::raw_sql(
        "CREATE TABLE later (id int PRIMARY KEY, email text, note text); \
         INSERT INTO later VALUES (1, 'secret.person@example.org', 'visible note'); \
         CREATE VIEW contacts AS SELECT customer_id, email AS contact, last_name AS family FROM customer",
    )
    .execute(&pool)
    .await
    .unwrap();
    // The tools that write their own SQL over a table read one created since the masked session
    // was prepared at once, masked (not refused until the session is prepared again).
    for tool in ["sample_table", "preview_masked", "profile_table"] {
        let table = format!("later_{tool}");
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "CREATE TABLE {table} (id int, email text); \
             INSERT INTO {table} VALUES (1, 'secret.person@example.org')"
        )))
        .execute(&pool)
        .await
        .unwrap();
        // The table listed at once (the schema cache read again); the masked session is not.
        answer(&analyst, "generate_schema", json!({"refresh_cache": true})).await;
        let arguments = match tool {
            "preview_masked" => json!({"ref": {"table": table}, "policy_id": "guarded"}),
            _ => json!({"ref": {"table": table}}),
        };
        let result = call(&analyst, tool, arguments, None).await.unwrap();
        let answered = serde_json::to_string(&result).unwrap();
        assert_ne!(result.is_error, Some(true), "{tool}: {answered}");
        assert!(!answered.contains("secret.person"), "{tool}: {answered}");
        if tool != "profile_table" {
            assert!(answered.contains("***@example.org"), "{tool}: {answered}");
        }
    }
    let later = read("SELECT * FROM later").await;
    assert!(later.contains("***@example.org") && later.contains("visible note"), "{later}");
    assert!(!later.contains("secret.person"), "{later}");
    let qualified = read("SELECT email FROM public.later").await;
    assert!(qualified.contains("***@example.org"), "{qualified}");
    // A view renaming masked columns reads the masked relations it is defined over.
    let contacts = read("SELECT contact, family FROM contacts WHERE customer_id = 1").await;
    assert!(contacts.contains("***@embraer.com.br"), "{contacts}");
    assert!(!contacts.contains("luisg") && !contacts.contains("Gonçalves"), "{contacts}");
    sqlx::raw_sql(
        "ALTER TABLE later ADD COLUMN phone text; UPDATE later SET phone = '+1 555 0100 1234'",
    )
    .execute(&pool)
    .await
    .unwrap();
    let phone = read("SELECT phone FROM later").await;
    assert!(phone.contains("************1234"), "{phone}");
    assert!(!phone.contains("555 0100"), "{phone}");
    analyst.cancel().await.unwrap();
}

/// `url` with another user and password.
fn as_user(url: &str, user: &str, password: &str) -> String {
    let mut parsed = url::Url::parse(url).unwrap();
    parsed.set_username(user).unwrap();
    parsed.set_password(Some(password)).unwrap();
    parsed.to_string()
}

#[tokio::test]
async fn where_orca_may_not_prepare_masking_masked_callers_are_refused_until_an_administrator_runs_the_printed_setup()
 {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let user = format!("app_{}", uuid::Uuid::new_v4().simple());
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE ROLE {user} LOGIN PASSWORD 'app-password'; \
         GRANT SELECT ON ALL TABLES IN SCHEMA public TO {user}"
    )))
    .execute(&pool)
    .await
    .unwrap();
    let mut orca = setup(&database.url, true);
    // orca's state stays the superuser's; the SQL tools connect as the unprivileged role.
    orca.env.insert("DATABASE_URL".to_owned(), as_user(&database.url, &user, "app-password"));
    let server = orca.http_server(&[]);
    let analyst = server.client(Some(ANALYST_KEY)).await;
    let admin = server.client(Some(ADMIN_KEY)).await;
    let read = json!({"sql": "SELECT email FROM customer WHERE customer_id = 1", "dry_run": false});
    let refused = answer(&analyst, "execute_sql", read.clone()).await;
    assert!(refused.contains("UNAUTHORIZED"), "{refused}");
    assert!(
        refused.contains("CREATEROLE") && refused.contains("orca masking setup --print"),
        "{refused}"
    );
    assert!(!refused.contains("luisg"), "{refused}");
    assert!(answer(&admin, "execute_sql", read.clone()).await.contains("luisg@embraer.com.br"));

    // `orca doctor` says what is missing; the administrator runs what `--print` prints.
    let doctor = orca.command().arg("doctor").output().unwrap();
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        report.contains("FAIL  masking `guarded`") && report.contains("CREATEROLE"),
        "{report}"
    );
    let printed = orca.command().args(["masking", "setup", "--print"]).output().unwrap();
    assert!(printed.status.success(), "{}", String::from_utf8_lossy(&printed.stderr));
    let script = String::from_utf8(printed.stdout).unwrap();
    assert!(script.contains("CREATE ROLE") && script.contains("CREATE VIEW"), "{script}");
    sqlx::raw_sql(sqlx::AssertSqlSafe(script)).execute(&pool).await.unwrap();
    let doctor = orca.command().arg("doctor").output().unwrap();
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        report.contains("ok    masking `guarded`") && report.contains("prepared as role"),
        "{report}"
    );
    // The refusal stands a few seconds, then the prepared setup is found and used.
    crate::support::eventually(
        "the administrator's setup to be used",
        std::time::Duration::from_secs(20),
        || {
            let (analyst, read) = (&analyst, read.clone());
            async move {
                let seen = answer(analyst, "execute_sql", read).await;
                assert!(!seen.contains("luisg"), "{seen}");
                seen.contains("***@embraer.com.br")
            }
        },
    )
    .await;
    analyst.cancel().await.unwrap();
    admin.cancel().await.unwrap();
}

#[tokio::test]
async fn a_masked_column_anyone_may_read_or_a_function_with_its_owners_rights_refuses_masked_callers()
 {
    for (grant, finding) in [
        ("GRANT SELECT ON customer TO PUBLIC", "public.customer.email is readable unmasked"),
        (
            "CREATE FUNCTION owner_email(id int) RETURNS text LANGUAGE sql STABLE SECURITY DEFINER AS 'SELECT email FROM public.customer WHERE customer_id = id'",
            "public.owner_email runs with its owner's rights",
        ),
    ] {
        let database = samples::chinook().await;
        let pool = database.connect().await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(grant.to_owned())).execute(&pool).await.unwrap();
        let server = setup(&database.url, false).http_server(&[]);
        let analyst = server.client(Some(ANALYST_KEY)).await;
        for sql in ["SELECT email FROM customer WHERE customer_id = 1", "SELECT owner_email(1)"] {
            let refused =
                answer(&analyst, "execute_sql", json!({"sql": sql, "dry_run": false})).await;
            assert!(refused.contains("masking cannot be guaranteed"), "{grant}: {refused}");
            assert!(refused.contains(finding), "{grant}: {refused}");
            assert!(!refused.contains("luisg"), "{refused}");
        }
        analyst.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn a_masked_column_named_like_a_system_catalogs_column_is_masked_and_served() {
    // `name` is also a column of pg_settings, pg_cursors and other catalog views anyone may
    // read: they hold no rows of the database's tables, so they do not stop masking.
    let database = samples::chinook().await;
    let analyst = hex::encode(Sha256::digest(ANALYST_KEY.as_bytes()));
    let setup = OrcaSetup::new(&database.url).with_config(&format!(
        "masking:\n  names:\n    name: redact\nauth:\n  api_keys:\n    - name: analyst\n      sha256: {analyst}\n      role: analyst\n  roles:\n    analyst:\n      verbs: [read]\n      masking: names\n"
    ));
    let server = setup.http_server(&[]);
    let client = server.client(Some(ANALYST_KEY)).await;
    let read = answer(
        &client,
        "execute_sql",
        json!({"sql": "SELECT artist_id, name FROM artist ORDER BY artist_id LIMIT 3"}),
    )
    .await;
    assert!(!read.contains("UNAUTHORIZED"), "{read}");
    assert!(!read.contains("AC/DC") && !read.contains("Accept"), "a raw name: {read}");
    client.cancel().await.unwrap();
}
