//! Writes through `execute_sql` on Chinook: the dry run and its confirmation token, every way a
//! token is refused, the verbs of each kind of write, two principals and two replicas on one
//! token, human approval with `orca approve`, and read-only mode.

use std::process::Stdio;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::CallToolResult;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::{OrcaSetup, TestDatabase, call, meta_of, run, samples};

type Client = RunningService<RoleClient, ()>;

fn structured(result: &CallToolResult) -> Value {
    result.structured_content.clone().unwrap_or(Value::Null)
}

/// A dry run of `sql`, which must succeed.
async fn dry_run(client: &Client, sql: &str) -> Value {
    let result = call(client, "execute_sql", json!({"sql": sql}), None).await.unwrap();
    let value = structured(&result);
    assert_eq!(result.is_error, Some(false), "dry run of {sql}: {value}");
    assert_eq!(value["dry_run"], true, "{value}");
    value
}

/// The confirmation token of a dry run of `sql`.
async fn token_for(client: &Client, sql: &str) -> String {
    let value = dry_run(client, sql).await;
    value["confirmation_token"].as_str().unwrap_or_else(|| panic!("no token: {value}")).to_owned()
}

/// Run `sql` for real, with `token` when given.
async fn run_write(client: &Client, sql: &str, token: Option<&str>) -> CallToolResult {
    let mut arguments = json!({"sql": sql, "dry_run": false, "read_only": false});
    if let Some(token) = token {
        arguments["confirmation_token"] = Value::from(token);
    }
    call(client, "execute_sql", arguments, None).await.unwrap()
}

/// The rows affected by a write that must succeed.
fn rows_affected(result: &CallToolResult) -> u64 {
    let value = structured(result);
    assert_eq!(result.is_error, Some(false), "{value}");
    value["rows_affected"].as_u64().unwrap_or_else(|| panic!("no rows_affected: {value}"))
}

/// Assert that `result` is a tool error with `code` whose message contains `fragment`.
#[track_caller]
fn assert_error(result: &CallToolResult, code: &str, fragment: &str) {
    let value = structured(result);
    assert_eq!(result.is_error, Some(true), "expected {code}, got {value}");
    assert_eq!(value["error"]["code"], code, "{value}");
    let message = value["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(fragment), "expected `{fragment}` in the message: {value}");
    assert!(value["error"]["trace_id"].is_string(), "{value}");
}

async fn scalar_i64(pool: &sqlx::PgPool, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

async fn minted_confirmations(pool: &sqlx::PgPool) -> i64 {
    scalar_i64(pool, "SELECT count(*) FROM orca.confirmation_tokens").await
}

/// `orca serve --stdio` with `extra` arguments, connected to rmcp's client.
async fn stdio_client_with(setup: &OrcaSetup, extra: &[&str]) -> Client {
    let mut command = setup.tokio_command();
    command.args(["serve", "--stdio"]).args(extra);
    let transport = TokioChildProcess::builder(command)
        .stderr(Stdio::inherit())
        .spawn()
        .expect("cannot start orca")
        .0;
    ().serve(transport).await.expect("MCP handshake with orca over stdio failed")
}

#[tokio::test]
async fn a_dry_run_changes_nothing_and_its_token_runs_the_update_exactly_once() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let sql = "UPDATE artist SET name = 'AC/DC (remastered)' WHERE artist_id = 1";
    let name = || async {
        sqlx::query_scalar::<_, String>("SELECT name FROM artist WHERE artist_id = 1")
            .fetch_one(&pool)
            .await
            .unwrap()
    };

    let dry = dry_run(&client, sql).await;
    assert_eq!(dry["statement"]["kind"], "update", "{dry}");
    assert_eq!(dry["statement"]["writes"], true, "{dry}");
    assert_eq!(dry["statement"]["effects"], json!(["update"]), "{dry}");
    assert_eq!(dry["statement"]["tables"], json!(["artist"]), "{dry}");
    assert_eq!(dry["required_verbs"], json!(["update"]), "{dry}");
    assert!(dry["warning"].as_str().is_some_and(|w| w.contains("artist")), "{dry}");
    assert!(dry["plan"].is_array(), "{dry}");
    assert!(dry["expires_at"].is_string(), "{dry}");
    assert!(dry["next_step"].as_str().is_some_and(|s| s.contains("confirmation_token")), "{dry}");
    assert!(dry.get("approval_id").is_none(), "{dry}");
    let estimated = dry["estimated_rows_affected"].as_f64().unwrap_or_else(|| panic!("{dry}"));
    let token = dry["confirmation_token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("orca_ct_"), "{token}");
    assert_eq!(name().await, "AC/DC", "a dry run changes nothing");
    assert_eq!(minted_confirmations(&pool).await, 1, "the dry run recorded its confirmation");

    let ran = run_write(&client, sql, Some(&token)).await;
    assert_eq!(structured(&ran)["statement"]["kind"], "update");
    assert_eq!(meta_of(&ran)["write"], true);
    let affected = rows_affected(&ran);
    assert_eq!(affected as f64, estimated, "the run affects the rows the dry run estimated");
    assert_eq!(name().await, "AC/DC (remastered)");

    let replay = run_write(&client, sql, Some(&token)).await;
    assert_error(&replay, "CONFIRMATION_REQUIRED", "already used");
    let redeemed = scalar_i64(
        &pool,
        "SELECT count(*) FROM orca.confirmation_tokens WHERE redeemed_at IS NOT NULL",
    )
    .await;
    assert_eq!(redeemed, 1);
    client.cancel().await.unwrap();
}

/// One attempt to run a write that must be refused.
struct Refusal {
    what: &'static str,
    arguments: Value,
    code: &'static str,
    message: &'static str,
}

#[tokio::test]
async fn a_write_is_refused_without_a_token_for_exactly_this_statement() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let one = "DELETE FROM invoice_line WHERE invoice_line_id = 1";
    let two = "DELETE FROM invoice_line WHERE invoice_line_id = 2";
    let token = token_for(&client, one).await;
    let id = token.split('_').nth(2).unwrap().to_owned();
    let expires = token.split('_').nth(3).unwrap().to_owned();
    let mut tampered = token.clone();
    let last = if tampered.ends_with('0') { "1" } else { "0" };
    tampered.replace_range(tampered.len() - 1.., last);
    let forged_signature = format!("orca_ct_{id}_{expires}_{}", "ab".repeat(32));
    let unknown_id =
        format!("orca_ct_{}_{expires}_{}", uuid::Uuid::new_v4().simple(), "cd".repeat(32));
    let later_expiry = format!(
        "orca_ct_{id}_{}_{}",
        expires.parse::<i64>().unwrap() + 3600,
        token.rsplit('_').next().unwrap()
    );
    let with_token = |sql: &str, token: &str| {
        let mut arguments = json!({"sql": sql, "dry_run": false, "read_only": false});
        arguments["confirmation_token"] = Value::from(token);
        arguments
    };
    let cases = [
        Refusal {
            what: "the token of `id = 1` for `id = 2`",
            arguments: with_token(two, &token),
            code: "CONFIRMATION_REQUIRED",
            message: "different statement",
        },
        Refusal {
            what: "the same statement with other spacing",
            arguments: with_token("DELETE FROM invoice_line  WHERE invoice_line_id = 1", &token),
            code: "CONFIRMATION_REQUIRED",
            message: "different statement",
        },
        Refusal {
            what: "the token with read_only left true",
            arguments: json!({"sql": one, "dry_run": false, "confirmation_token": token}),
            code: "INVALID_INPUT",
            message: "read_only is true",
        },
        Refusal {
            what: "no token",
            arguments: json!({"sql": one, "dry_run": false, "read_only": false}),
            code: "CONFIRMATION_REQUIRED",
            message: "needs a confirmation token",
        },
        Refusal {
            what: "an empty token",
            arguments: with_token(one, ""),
            code: "CONFIRMATION_REQUIRED",
            message: "malformed",
        },
        Refusal {
            what: "a garbled token",
            arguments: with_token(one, "orca_ct_not-a-token"),
            code: "CONFIRMATION_REQUIRED",
            message: "malformed",
        },
        Refusal {
            what: "a token with a hexadecimal digit changed",
            arguments: with_token(one, &tampered),
            code: "CONFIRMATION_REQUIRED",
            message: "confirmation token",
        },
        Refusal {
            what: "a forged signature",
            arguments: with_token(one, &forged_signature),
            code: "CONFIRMATION_REQUIRED",
            message: "confirmation token",
        },
        Refusal {
            what: "a forged token of an unknown id",
            arguments: with_token(one, &unknown_id),
            code: "CONFIRMATION_REQUIRED",
            message: "bad signature",
        },
        Refusal {
            what: "the genuine signature with a later expiry",
            arguments: with_token(one, &later_expiry),
            code: "CONFIRMATION_REQUIRED",
            message: "confirmation token",
        },
    ];
    for Refusal { what, arguments, code, message } in cases {
        let result = call(&client, "execute_sql", arguments, None).await.unwrap();
        let value = structured(&result);
        assert_eq!(value["error"]["code"], code, "{what}: {value}");
        assert!(
            value["error"]["message"].as_str().is_some_and(|text| text.contains(message)),
            "{what}: expected `{message}` in {value}"
        );
        let remaining =
            scalar_i64(&pool, "SELECT count(*) FROM invoice_line WHERE invoice_line_id IN (1, 2)")
                .await;
        assert_eq!(remaining, 2, "{what}: nothing is deleted");
    }
    // None of the refused attempts used the token up.
    assert_eq!(rows_affected(&run_write(&client, one, Some(&token)).await), 1);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_expired_token_is_refused() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let setup = OrcaSetup::new(&database.url).with_config("sql:\n  token_lifetime_seconds: 1\n");
    let client = setup.stdio_client().await;
    let sql = "DELETE FROM invoice_line WHERE invoice_line_id = 7";
    let token = token_for(&client, sql).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_error(&run_write(&client, sql, Some(&token)).await, "CONFIRMATION_REQUIRED", "expired");
    let remaining =
        scalar_i64(&pool, "SELECT count(*) FROM invoice_line WHERE invoice_line_id = 7").await;
    assert_eq!(remaining, 1);
    client.cancel().await.unwrap();
}

/// One write of the sequence below and what it must do.
struct WriteCase {
    sql: &'static str,
    kind: &'static str,
    verbs: &'static [&'static str],
    rows_affected: u64,
    /// A query that is true once the write ran, and false before.
    check: &'static str,
}

#[tokio::test]
async fn every_kind_of_write_goes_through_the_flow_with_its_verbs() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let exists = "SELECT count(*) = 1 FROM pg_tables WHERE tablename = 'scratch'";
    let cases = [
        WriteCase {
            sql: "CREATE TABLE scratch (id int PRIMARY KEY)",
            kind: "create",
            verbs: &["update"],
            rows_affected: 0,
            check: exists,
        },
        WriteCase {
            sql: "INSERT INTO scratch (id) VALUES (1), (2), (3)",
            kind: "insert",
            verbs: &["create"],
            rows_affected: 3,
            check: "SELECT count(*) = 3 FROM scratch",
        },
        WriteCase {
            sql: "ALTER TABLE scratch ADD COLUMN note text",
            kind: "alter",
            verbs: &["update"],
            rows_affected: 0,
            check: "SELECT count(*) = 1 FROM information_schema.columns \
                    WHERE table_name = 'scratch' AND column_name = 'note'",
        },
        WriteCase {
            sql: "UPDATE scratch SET note = 'x' WHERE id > 1",
            kind: "update",
            verbs: &["update"],
            rows_affected: 2,
            check: "SELECT count(note) = 2 FROM scratch",
        },
        WriteCase {
            sql: "DELETE FROM scratch WHERE id = 1",
            kind: "delete",
            verbs: &["delete"],
            rows_affected: 1,
            check: "SELECT count(*) = 2 FROM scratch",
        },
        WriteCase {
            sql: "INSERT INTO scratch (id) SELECT 10 WHERE EXISTS (SELECT 1 FROM scratch) \
                  ON CONFLICT (id) DO UPDATE SET note = 'y'",
            kind: "insert",
            verbs: &["create", "update"],
            rows_affected: 1,
            check: "SELECT count(*) = 3 FROM scratch",
        },
        WriteCase {
            sql: "TRUNCATE scratch",
            kind: "truncate",
            verbs: &["delete"],
            rows_affected: 0,
            check: "SELECT count(*) = 0 FROM scratch",
        },
        WriteCase {
            sql: "DROP TABLE scratch",
            kind: "drop",
            verbs: &["delete"],
            rows_affected: 0,
            check: "SELECT count(*) = 0 FROM pg_tables WHERE tablename = 'scratch'",
        },
    ];
    let pool = &pool;
    let holds = |sql: &'static str| async move {
        sqlx::query_scalar::<_, bool>(sql).fetch_one(pool).await.unwrap()
    };
    for case in cases {
        assert!(!holds(case.check).await, "{}: already true before the write", case.sql);
        let dry = dry_run(&client, case.sql).await;
        assert_eq!(dry["statement"]["kind"], case.kind, "{}: {dry}", case.sql);
        assert_eq!(dry["statement"]["writes"], true, "{}: {dry}", case.sql);
        assert_eq!(dry["required_verbs"], json!(case.verbs), "{}: {dry}", case.sql);
        assert!(dry["warning"].as_str().is_some_and(|w| w.contains("changes data")), "{dry}");
        assert!(!holds(case.check).await, "{}: the dry run changed something", case.sql);
        let token = dry["confirmation_token"].as_str().unwrap_or_else(|| panic!("{dry}"));
        let ran = run_write(&client, case.sql, Some(token)).await;
        assert_eq!(rows_affected(&ran), case.rows_affected, "{}", case.sql);
        assert_eq!(structured(&ran)["statement"]["kind"], case.kind);
        assert!(holds(case.check).await, "{}: the write did not happen", case.sql);
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn ddl_through_orca_clears_the_schema_cache() {
    let database = samples::chinook().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let schema = || async {
        let result =
            call(&client, "generate_schema", json!({"format": "json"}), None).await.unwrap();
        assert_eq!(result.is_error, Some(false), "{}", structured(&result));
        let names: Vec<String> = structured(&result)["schema"]["relations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|relation| relation["name"].as_str().unwrap().to_owned())
            .collect();
        (names, meta_of(&result)["cached"].as_bool().unwrap())
    };
    let (names, cached) = schema().await;
    assert!(!cached && !names.contains(&"release".to_owned()), "{names:?}");
    let (_, cached) = schema().await;
    assert!(cached, "the second call is served from the cache");

    let sql = "CREATE TABLE release (release_id int PRIMARY KEY, album_id int REFERENCES album)";
    let token = token_for(&client, sql).await;
    let (_, cached) = schema().await;
    assert!(cached, "a dry run leaves the cache alone");
    rows_affected(&run_write(&client, sql, Some(&token)).await);
    let (names, cached) = schema().await;
    assert!(!cached, "DDL through orca drops the cached schema");
    assert!(names.contains(&"release".to_owned()), "{names:?}");
    client.cancel().await.unwrap();
}

const ANN_KEY: &str = "orca_test_key_of_ann";
const BOB_KEY: &str = "orca_test_key_of_bob";
const READER_KEY: &str = "orca_test_key_of_a_reader";
const LOADER_KEY: &str = "orca_test_key_of_a_loader";

fn keyed_setup(database: &TestDatabase) -> OrcaSetup {
    keyed_setup_with(database, "")
}

/// [`keyed_setup`] with more of `orca.yaml` after the keys.
fn keyed_setup_with(database: &TestDatabase, extra: &str) -> OrcaSetup {
    let hash = |key: &str| hex::encode(Sha256::digest(key.as_bytes()));
    let keys = [
        ("ann", ANN_KEY, "[read, create, update, delete]"),
        ("bob", BOB_KEY, "[read, create, update, delete]"),
        ("reader", READER_KEY, "[read]"),
        ("loader", LOADER_KEY, "[read, create]"),
    ];
    let mut yaml = String::from("auth:\n  api_keys:\n");
    for (name, key, verbs) in keys {
        yaml.push_str(&format!(
            "    - name: {name}\n      sha256: {}\n      verbs: {verbs}\n",
            hash(key)
        ));
    }
    yaml.push_str(extra);
    OrcaSetup::new(&database.url).with_config(&yaml)
}

/// `POST /approvals/<id>` with `key`: the status and the JSON answer.
async fn approve_over_http(
    server: &crate::support::orca::HttpServer,
    id: &str,
    key: &str,
) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(server.url(&format!("/approvals/{id}")))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn under_human_confirmation_only_another_principal_holding_the_verbs_approves_a_write() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let setup = keyed_setup_with(&database, "sql:\n  write_confirmation: human\n");
    let server = setup.http_server(&[]);
    let ann = server.client(Some(ANN_KEY)).await;
    let sql = "DELETE FROM invoice_line WHERE invoice_line_id = 12";
    let remaining =
        || scalar_i64(&pool, "SELECT count(*) FROM invoice_line WHERE invoice_line_id = 12");
    let id = dry_run(&ann, sql).await["approval_id"].as_str().unwrap().to_owned();

    let (status, answer) = approve_over_http(&server, &id, ANN_KEY).await;
    assert_eq!(status, 403, "the requester cannot approve its own write: {answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("`ann` asked for this write")),
        "{answer}"
    );
    let (status, answer) = approve_over_http(&server, &id, READER_KEY).await;
    assert_eq!(status, 403, "a key without the verb cannot approve: {answer}");
    assert_error(
        &run_write(&ann, sql, None).await,
        "CONFIRMATION_REQUIRED",
        "waiting for a person",
    );
    assert_eq!(remaining().await, 1);
    let approved_by: Option<String> =
        sqlx::query_scalar("SELECT approved_by FROM orca.confirmation_tokens WHERE id = $1::uuid")
            .bind(&id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(approved_by, None);

    let (status, answer) = approve_over_http(&server, &id, BOB_KEY).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["request"]["approved_by"], "bob", "{answer}");
    assert_eq!(rows_affected(&run_write(&ann, sql, None).await), 1);
    assert_eq!(remaining().await, 0);
    ann.cancel().await.unwrap();
}

#[tokio::test]
async fn another_principal_cannot_redeem_a_token() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let setup = keyed_setup(&database);
    let server = setup.http_server(&[]);
    let ann = server.client(Some(ANN_KEY)).await;
    let bob = server.client(Some(BOB_KEY)).await;
    let sql = "DELETE FROM invoice_line WHERE invoice_line_id = 3";
    let token = token_for(&ann, sql).await;
    assert_error(
        &run_write(&bob, sql, Some(&token)).await,
        "CONFIRMATION_REQUIRED",
        "different statement, principal or database",
    );
    let remaining =
        scalar_i64(&pool, "SELECT count(*) FROM invoice_line WHERE invoice_line_id = 3").await;
    assert_eq!(remaining, 1, "bob's attempt deleted nothing");
    assert_eq!(rows_affected(&run_write(&ann, sql, Some(&token)).await), 1, "ann still can");
    let principal: String = sqlx::query_scalar("SELECT principal FROM orca.confirmation_tokens")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(principal, "ann");
    ann.cancel().await.unwrap();
    bob.cancel().await.unwrap();
}

#[tokio::test]
async fn a_key_without_the_verb_of_a_write_is_unauthorized() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let setup = keyed_setup(&database);
    let server = setup.http_server(&[]);
    let reader = server.client(Some(READER_KEY)).await;
    let loader = server.client(Some(LOADER_KEY)).await;
    let delete = "DELETE FROM invoice_line WHERE invoice_line_id = 4";
    let insert = "INSERT INTO genre (genre_id, name) VALUES (100, 'Sea shanty')";
    let cases: [(&Client, &str, &str, &str); 4] = [
        (&reader, "reader", delete, "delete"),
        (&reader, "reader", insert, "create"),
        (&loader, "loader", delete, "delete"),
        (&loader, "loader", "UPDATE genre SET name = 'Rock!' WHERE genre_id = 1", "update"),
    ];
    for (client, name, sql, verb) in cases {
        let dry = call(client, "execute_sql", json!({"sql": sql}), None).await.unwrap();
        assert_error(&dry, "UNAUTHORIZED", &format!("`{name}`"));
        assert_error(&dry, "UNAUTHORIZED", &format!("needs the verb(s) {verb}"));
        // Skipping the dry run does not help.
        let run = run_write(client, sql, Some("orca_ct_0_0_00")).await;
        assert_error(&run, "UNAUTHORIZED", verb);
    }
    assert_eq!(minted_confirmations(&pool).await, 0, "nothing was minted");
    // Reads still work for both keys.
    for client in [&reader, &loader] {
        let read = call(
            client,
            "execute_sql",
            json!({"sql": "SELECT count(*) FROM genre", "dry_run": false}),
            None,
        )
        .await
        .unwrap();
        assert_eq!(structured(&read)["rows"], json!([[25]]), "{}", structured(&read));
    }
    // The loader may insert.
    let token = token_for(&loader, insert).await;
    assert_eq!(rows_affected(&run_write(&loader, insert, Some(&token)).await), 1);
    let inserted = scalar_i64(&pool, "SELECT count(*) FROM genre WHERE genre_id = 100").await;
    assert_eq!(inserted, 1);
    reader.cancel().await.unwrap();
    loader.cancel().await.unwrap();
}

#[tokio::test]
async fn two_replicas_racing_on_one_token_run_the_write_once() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    // Replicas share the state database and ORCA_SECRET, not their home directory.
    let secret = "a secret shared by both replicas, 32+ bytes";
    let replica = || {
        let mut setup = OrcaSetup::new(&database.url);
        setup.env.insert("ORCA_SECRET".to_owned(), secret.to_owned());
        setup
    };
    let (setup_a, setup_b) = (replica(), replica());
    let (a, b) = tokio::join!(setup_a.stdio_client(), setup_b.stdio_client());

    let delete = "DELETE FROM playlist_track WHERE playlist_id = 1 AND track_id = 3402";
    let increment = "UPDATE invoice SET total = total + 1 WHERE invoice_id = 1";
    let total = || async {
        sqlx::query_scalar::<_, f64>("SELECT total::float8 FROM invoice WHERE invoice_id = 1")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    let total_before = total().await;
    let rounds = [delete, increment, increment, increment, increment];
    for (round, sql) in rounds.iter().enumerate() {
        // Alternate which replica mints the token.
        let minter = if round % 2 == 0 { &a } else { &b };
        let token = token_for(minter, sql).await;
        let (from_a, from_b) =
            tokio::join!(run_write(&a, sql, Some(&token)), run_write(&b, sql, Some(&token)));
        let outcomes = [&from_a, &from_b];
        let winners: Vec<&&CallToolResult> =
            outcomes.iter().filter(|result| result.is_error == Some(false)).collect();
        assert_eq!(
            winners.len(),
            1,
            "round {round}: exactly one replica runs it: {} / {}",
            structured(&from_a),
            structured(&from_b)
        );
        assert_eq!(rows_affected(winners[0]), 1);
        let loser = outcomes.iter().find(|result| result.is_error == Some(true)).unwrap();
        assert_error(loser, "CONFIRMATION_REQUIRED", "already used");
    }
    let remaining = scalar_i64(
        &pool,
        "SELECT count(*) FROM playlist_track WHERE playlist_id = 1 AND track_id = 3402",
    )
    .await;
    assert_eq!(remaining, 0);
    assert_eq!(total().await, total_before + 4.0, "each increment ran exactly once");
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
}

#[tokio::test]
async fn a_human_approval_lets_the_same_call_run_once() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let setup = OrcaSetup::new(&database.url).with_config("sql:\n  write_confirmation: human\n");
    let client = setup.stdio_client().await;
    let sql = "DELETE FROM invoice_line WHERE invoice_line_id = 5";
    let remaining =
        || scalar_i64(&pool, "SELECT count(*) FROM invoice_line WHERE invoice_line_id = 5");

    let dry = dry_run(&client, sql).await;
    assert!(dry.get("confirmation_token").is_none(), "no token for the model: {dry}");
    assert_eq!(dry["approval_status"], "pending", "{dry}");
    assert_eq!(dry["required_verbs"], json!(["delete"]), "{dry}");
    let id = dry["approval_id"].as_str().unwrap_or_else(|| panic!("{dry}")).to_owned();
    assert!(dry["next_step"].as_str().is_some_and(|step| step.contains(&id)), "{dry}");

    assert_error(
        &run_write(&client, sql, None).await,
        "CONFIRMATION_REQUIRED",
        "waiting for a person",
    );
    assert_eq!(remaining().await, 1);

    let (code, listed, _) = run(&setup, &["approve", "--list"]);
    assert_eq!(code, 0);
    assert!(listed.contains(&id) && listed.contains(sql), "{listed}");
    assert!(listed.contains("delete"), "{listed}");

    let (code, approved, stderr) = run(&setup, &["approve", &id, "--by", "dana"]);
    assert_eq!(code, 0, "{approved}{stderr}");
    assert!(approved.contains("approved by dana") && approved.contains(&id), "{approved}");
    let (_, listed, _) = run(&setup, &["approve", "--list"]);
    assert!(!listed.contains(&id), "an approved request no longer waits: {listed}");
    assert_eq!(remaining().await, 1, "approving does not run the write");

    assert_eq!(rows_affected(&run_write(&client, sql, None).await), 1);
    assert_eq!(remaining().await, 0);
    let approved_by: String =
        sqlx::query_scalar("SELECT approved_by FROM orca.confirmation_tokens WHERE id = $1::uuid")
            .bind(&id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(approved_by, "dana");

    assert_error(
        &run_write(&client, sql, None).await,
        "CONFIRMATION_REQUIRED",
        "dry_run=true first",
    );
    let (code, _, stderr) = run(&setup, &["approve", &id]);
    assert_ne!(code, 0, "a used approval cannot be approved again");
    assert!(stderr.contains("no pending approval"), "{stderr}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_approval_is_for_one_statement_and_unknown_ids_are_refused_clearly() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let setup = OrcaSetup::new(&database.url).with_config("sql:\n  write_confirmation: human\n");
    let client = setup.stdio_client().await;
    let approved = "DELETE FROM invoice_line WHERE invoice_line_id = 8";
    let other = "DELETE FROM invoice_line WHERE invoice_line_id = 9";
    let id = dry_run(&client, approved).await["approval_id"].as_str().unwrap().to_owned();
    let (code, _, stderr) = run(&setup, &["approve", &id]);
    assert_eq!(code, 0, "{stderr}");
    assert_error(&run_write(&client, other, None).await, "CONFIRMATION_REQUIRED", "no approval");
    let remaining =
        scalar_i64(&pool, "SELECT count(*) FROM invoice_line WHERE invoice_line_id IN (8, 9)")
            .await;
    assert_eq!(remaining, 2);

    let unknown = uuid::Uuid::new_v4().to_string();
    let (code, stdout, stderr) = run(&setup, &["approve", &unknown]);
    assert_ne!(code, 0, "{stdout}");
    assert!(stderr.contains(&format!("no pending approval {unknown}")), "{stderr}");
    assert!(stderr.contains("orca approve --list"), "{stderr}");
    let (code, _, stderr) = run(&setup, &["approve", "not-a-uuid"]);
    assert_ne!(code, 0);
    assert!(stderr.contains("`not-a-uuid` is not an approval id"), "{stderr}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn read_only_mode_hides_write_tools_and_refuses_writes() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let by_flag = OrcaSetup::new(&database.url);
    let by_config = OrcaSetup::new(&database.url).with_config("read_only: true\n");
    let cases: [(&str, &OrcaSetup, &[&str]); 2] =
        [("serve --read-only", &by_flag, &["--read-only"]), ("read_only: true", &by_config, &[])];
    for (what, setup, extra) in cases {
        let client = stdio_client_with(setup, extra).await;
        let tools = client.list_all_tools().await.unwrap();
        let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
        assert!(names.contains(&"execute_sql"), "{what}: {names:?}");
        assert!(!names.contains(&"add_records"), "{what}: {names:?}");
        let execute = tools.iter().find(|tool| tool.name == "execute_sql").unwrap();
        let annotations = execute.annotations.as_ref().unwrap();
        assert_eq!(annotations.read_only_hint, Some(true), "{what}");
        assert_eq!(annotations.destructive_hint, Some(false), "{what}");

        let read = call(
            &client,
            "execute_sql",
            json!({"sql": "SELECT name FROM artist WHERE artist_id = 1", "dry_run": false}),
            None,
        )
        .await
        .unwrap();
        assert_eq!(structured(&read)["rows"], json!([["AC/DC"]]), "{what}");
        for sql in [
            "DELETE FROM invoice_line WHERE invoice_line_id = 6",
            "CREATE TABLE scratch (id int)",
            "INSERT INTO genre (genre_id, name) VALUES (100, 'x')",
        ] {
            let dry = call(&client, "execute_sql", json!({"sql": sql}), None).await.unwrap();
            assert_error(&dry, "INVALID_INPUT", "read-only");
            assert_error(
                &run_write(&client, sql, Some("orca_ct_0_0_00")).await,
                "INVALID_INPUT",
                "read-only",
            );
        }
        assert_eq!(minted_confirmations(&pool).await, 0, "{what}: nothing minted");
        client.cancel().await.unwrap();
    }
    let remaining =
        scalar_i64(&pool, "SELECT count(*) FROM invoice_line WHERE invoice_line_id = 6").await;
    assert_eq!(remaining, 1);
}

#[tokio::test]
async fn orcas_own_state_is_out_of_reach_of_execute_sql() {
    // With only DATABASE_URL set, orca keeps its state (schema `orca`) in the target database,
    // as in these tests: other principals' SQL and the confirmations must stay out of reach.
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    token_for(&client, "DELETE FROM invoice_line WHERE invoice_line_id = 10").await;
    assert_eq!(minted_confirmations(&pool).await, 1);
    let statements = [
        "SELECT statement, principal FROM orca.confirmation_tokens",
        "SELECT request_data FROM orca.mcp_executions",
        "UPDATE orca.confirmation_tokens SET redeemed_at = NULL",
        "UPDATE orca.confirmation_tokens SET approved_at = now(), approved_by = 'me'",
        "DELETE FROM orca.mcp_executions",
        "TRUNCATE orca.confirmation_tokens",
        "DROP TABLE orca.confirmation_tokens",
    ];
    for sql in statements {
        for arguments in [json!({"sql": sql}), json!({"sql": sql, "dry_run": false})] {
            let result = call(&client, "execute_sql", arguments.clone(), None).await.unwrap();
            let value = structured(&result);
            assert_eq!(result.is_error, Some(true), "{arguments}: {value}");
        }
    }
    assert_eq!(minted_confirmations(&pool).await, 1, "no confirmation for orca's own tables");
    client.cancel().await.unwrap();
}
