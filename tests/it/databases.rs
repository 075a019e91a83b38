//! Several databases behind one endpoint (`databases:` in orca.yaml), through the real binary:
//! Chinook (`music`), Pagila with a few rows (`films`), a third database whose tables collide
//! with Chinook's and whose role may not read the statistics views (`records`, read-only), and a
//! URL that points at nothing (`nowhere`). Every SQL tool on each; the collision resolved by
//! `database` and `catalog`; tokens refused on another database; `generate_sql` choosing by the
//! question; the unreachable database reported while the others serve; two replicas.

use rmcp::model::{CallToolResult, ReadResourceRequestParams, ResourceContents};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};
use sqlx::Connection;

use crate::support::fake_llm::{FakeLlm, Reply, Wire};
use crate::support::pg::{admin_url, replace_database};
use crate::support::{OrcaSetup, TestDatabase, call, meta_of, run, samples, wait_for_row};

type Client = RunningService<RoleClient, ()>;

const CONFIG: &str = "http:
  health_details: names
masking:
  names:
    name: redact
databases:
  - name: music
    url: ${MUSIC_URL}
    description: \"Chinook, a digital music store: artists, albums, tracks, invoices\"
  - name: films
    url: ${FILMS_URL}
    description: \"Pagila, a DVD rental store: films, actors, rentals, payments\"
    max_rows: 2
    context_file: films-context.md
  - name: records
    url: ${RECORDS_URL}
    description: \"A record label's catalogue: the artists it signed and their albums\"
    read_only: true
    schemas: [\"pub*\"]
  - name: nowhere
    url: ${NOWHERE_URL}
";

/// The four databases and orca configured with them (its state in the music database).
struct Lab {
    setup: OrcaSetup,
    music: TestDatabase,
}

/// Pagila's schema with two languages, three films and two actors.
pub(crate) async fn films() -> TestDatabase {
    let database = samples::pagila().await;
    let pool = database.connect().await;
    sqlx::raw_sql(
        "INSERT INTO language (language_id, name) VALUES (1, 'English'), (2, 'Italian');
         INSERT INTO film (film_id, title, language_id, rental_duration, rental_rate, replacement_cost)
              VALUES (1, 'ACADEMY DINOSAUR', 1, 6, 0.99, 20.99),
                     (2, 'ACE GOLDFINGER', 1, 3, 4.99, 12.99),
                     (3, 'ADAPTATION HOLES', 2, 7, 2.99, 18.99);
         INSERT INTO actor (actor_id, first_name, last_name) VALUES (1, 'PENELOPE', 'GUINESS'), (2, 'NICK', 'WAHLBERG');",
    )
    .execute(&pool)
    .await
    .expect("cannot add rows to Pagila");
    pool.close().await;
    database
}

/// `artist` and `album` as in Chinook, with other rows, read by a role that may not see
/// `pg_stat_user_tables` (as on a compatible database without the statistics views).
async fn records() -> String {
    let database = TestDatabase::create().await;
    let pool = database.connect().await;
    let role = format!("records_{}", uuid::Uuid::new_v4().simple());
    let name: String =
        sqlx::query_scalar("SELECT current_database()").fetch_one(&pool).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE artist (artist_id int PRIMARY KEY, name text NOT NULL, label text);
         CREATE TABLE album (album_id int PRIMARY KEY, title text NOT NULL, artist_id int REFERENCES artist);
         INSERT INTO artist VALUES (1, 'The Quiet Owls', 'Nightjar'), (2, 'Mara Fenn', 'Nightjar');
         INSERT INTO album VALUES (1, 'Low Moon', 1), (2, 'Feathers', 1), (3, 'Salt Roads', 2);
         CREATE SCHEMA archive;
         CREATE TABLE archive.old_artist (artist_id int PRIMARY KEY, name text);
         CREATE ROLE {role} LOGIN PASSWORD 'records';
         GRANT CONNECT ON DATABASE \"{name}\" TO {role};
         GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role};
         GRANT USAGE ON SCHEMA archive TO {role};
         REVOKE SELECT ON pg_catalog.pg_stat_user_tables FROM PUBLIC;"
    )))
    .execute(&pool)
    .await
    .expect("cannot build the records database");
    pool.close().await;
    let url = replace_database(&admin_url(), &name);
    with_user(&url, &role, "records")
}

/// `url` with another user and password.
fn with_user(url: &str, user: &str, password: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    format!("{scheme}://{user}:{password}@{host}")
}

async fn lab() -> Lab {
    let music = samples::chinook().await;
    let films = films().await;
    let records = records().await;
    let setup = OrcaSetup::new(&music.url)
        .with_env("MUSIC_URL", &music.url)
        .with_env("FILMS_URL", &films.url)
        .with_env("RECORDS_URL", &records)
        .with_env("NOWHERE_URL", "postgres://orca:secret@127.0.0.1:1/nothing")
        .with_config(CONFIG);
    Lab { setup, music }
}

fn structured(result: &CallToolResult) -> Value {
    result.structured_content.clone().unwrap_or(Value::Null)
}

/// A tool result that must be a success.
async fn ok(client: &Client, tool: &str, arguments: Value) -> CallToolResult {
    let result = call(client, tool, arguments.clone(), None).await.expect(tool);
    assert_eq!(result.is_error, Some(false), "{tool} {arguments}: {}", structured(&result));
    result
}

/// A tool result that must be an error: its `error` object.
async fn refused(client: &Client, tool: &str, arguments: Value) -> Value {
    let result = call(client, tool, arguments.clone(), None).await.expect(tool);
    assert_eq!(
        result.is_error,
        Some(true),
        "{tool} {arguments} should fail: {}",
        structured(&result)
    );
    structured(&result)["error"].clone()
}

async fn read(client: &Client, uri: &str) -> Value {
    let read = client.read_resource(ReadResourceRequestParams::new(uri)).await.expect(uri);
    match &read.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => serde_json::from_str(text).unwrap(),
        other => panic!("{other:?}"),
    }
}

async fn count(client: &Client, database: &str, table: &str) -> i64 {
    let result = ok(
        client,
        "execute_sql",
        json!({"database": database, "sql": format!("SELECT count(*) AS n FROM {table}"), "dry_run": false}),
    )
    .await;
    structured(&result)["rows"][0][0].as_i64().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_sql_tool_works_on_each_database_chosen_by_name() {
    let lab = lab().await;
    let client = lab.setup.stdio_client().await;

    // Every SQL tool takes `database`, with the names to choose from.
    let tools = client.list_all_tools().await.unwrap();
    for name in ["execute_sql", "generate_sql", "generate_schema", "query_sql", "list_tables"] {
        let tool = tools.iter().find(|tool| tool.name == name).unwrap();
        let property = &tool.input_schema["properties"]["database"];
        assert_eq!(property["enum"], json!(["music", "films", "records", "nowhere"]), "{name}");
    }
    let format = tools.iter().find(|tool| tool.name == "format_results").unwrap();
    assert!(format.input_schema["properties"].get("database").is_none());

    // The same table name in two databases: `database` decides.
    assert_eq!(count(&client, "music", "artist").await, 275);
    assert_eq!(count(&client, "records", "artist").await, 2);
    assert_eq!(count(&client, "films", "film").await, 3);
    let missing =
        refused(&client, "execute_sql", json!({"sql": "SELECT 1", "dry_run": false})).await;
    assert_eq!(missing["code"], "INVALID_INPUT");
    assert!(
        missing["message"].as_str().unwrap().contains("music, films, records, nowhere"),
        "{missing}"
    );
    let unknown =
        refused(&client, "execute_sql", json!({"database": "jazz", "sql": "SELECT 1"})).await;
    assert_eq!(unknown["code"], "NOT_FOUND");

    // A database's own row cap.
    let capped = refused(
        &client,
        "execute_sql",
        json!({"database": "films", "sql": "SELECT title FROM film", "dry_run": false, "max_rows": 3}),
    )
    .await;
    assert!(capped["message"].as_str().unwrap().contains("between 1 and 2"), "{capped}");

    // The data tools: `catalog` in a TableRef selects the database too.
    let music_artist =
        ok(&client, "get_table_schema", json!({"ref": {"catalog": "music", "table": "artist"}}))
            .await;
    let records_artist =
        ok(&client, "get_table_schema", json!({"ref": {"catalog": "records", "table": "artist"}}))
            .await;
    let columns = |result: &CallToolResult| -> Vec<String> {
        structured(result)["schema"]
            .as_array()
            .unwrap()
            .iter()
            .map(|column| column["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(!columns(&music_artist).contains(&"label".to_owned()));
    assert!(columns(&records_artist).contains(&"label".to_owned()));
    assert_eq!(structured(&records_artist)["table"]["catalog"], "records");
    let conflicting = refused(
        &client,
        "get_table_schema",
        json!({"database": "music", "ref": {"catalog": "records", "table": "artist"}}),
    )
    .await;
    assert!(
        conflicting["message"].as_str().unwrap().contains("several databases"),
        "{conflicting}"
    );
    let tables = ok(&client, "list_tables", json!({"catalog": "films", "pattern": "film*"})).await;
    let items = structured(&tables)["items"].as_array().unwrap().clone();
    assert!(items.iter().all(|item| item["catalog"] == "films"), "{items:?}");
    assert!(items.iter().any(|item| item["table"] == "film_actor"), "{items:?}");
    let query = ok(
        &client,
        "query_sql",
        json!({"database": "films", "sql": "SELECT title FROM film ORDER BY 1"}),
    )
    .await;
    assert_eq!(structured(&query)["source"], "postgres:films");
    // Every read tool on each reachable database, on a table of its own.
    for (database, table, first_column) in [
        ("music", "genre", "genre_id"),
        ("films", "language", "language_id"),
        ("records", "album", "album_id"),
    ] {
        let plan = json!({"relations": [{"root": {"names": [first_column], "input": {"fetch": {"count": "1", "input": {"read": {
            "namedTable": {"names": ["public", table]},
            "baseSchema": {"names": [first_column], "struct": {"types": [{"i32": {}}]}}}}}}}}]});
        for (tool, arguments) in [
            ("execute_sql", json!({"sql": format!("SELECT * FROM {table}"), "dry_run": false})),
            ("execute_sql", json!({"sql": format!("SELECT * FROM {table}")})),
            ("query_sql", json!({"sql": format!("SELECT * FROM {table}"), "max_rows": 1})),
            ("query_plan", json!({"substrait": plan})),
            ("explain_sql", json!({"sql": format!("SELECT * FROM {table}"), "format": "json"})),
            ("list_schemas", json!({})),
            ("list_tables", json!({})),
            ("get_table_schema", json!({"ref": {"table": table}})),
            ("get_stats", json!({"ref": {"table": table}})),
            ("sample_table", json!({"ref": {"table": table}, "method": "random", "limit": 1})),
            ("profile_table", json!({"ref": {"table": table}})),
            ("detect_pii", json!({"ref": {"table": table}})),
            ("preview_masked", json!({"ref": {"table": table}, "policy_id": "names"})),
            ("generate_schema", json!({"format": "sql"})),
        ] {
            let mut arguments = arguments;
            arguments["database"] = Value::from(database);
            let result = ok(&client, tool, arguments).await;
            let text = structured(&result).to_string();
            for other in ["music", "films", "records"].iter().filter(|other| **other != database) {
                assert!(
                    !text.contains(&format!("\"catalog\":\"{other}\"")),
                    "{tool} on {database}: {text}"
                );
            }
        }
        for uri in [
            format!("res://tables/{database}/public"),
            format!("res://samples/{database}/public/{table}"),
            format!("res://lineage/{database}/public/{table}"),
        ] {
            read(&client, &uri).await;
        }
    }
    // Writes on a writable database: a table from a read, and a view.
    ok(&client, "materialize_sql", json!({"database": "films", "sql": "SELECT title FROM film", "target": {"table": "film_titles"}, "mode": "create"})).await;
    ok(&client, "create_view", json!({"database": "films", "sql": "SELECT title FROM film", "name": {"table": "film_title_view"}})).await;
    assert_eq!(count(&client, "films", "film_titles").await, 3);

    // `read_only` on one database: its writes are refused, the others' are not.
    let write = refused(
        &client,
        "execute_sql",
        json!({"database": "records", "sql": "DELETE FROM album WHERE album_id = 3", "dry_run": true}),
    )
    .await;
    assert!(write["message"].as_str().unwrap().contains("`records` is read-only"), "{write}");
    let add = refused(
        &client,
        "add_records",
        json!({"database": "records", "table": "album", "data": {"album_id": 9, "title": "x"}}),
    )
    .await;
    assert_eq!(add["code"], "UNAUTHORIZED", "{add}");
    ok(&client, "add_records", json!({"database": "films", "table": "actor", "data": {"actor_id": 3, "first_name": "ED", "last_name": "CHASE"}})).await;

    // res://catalogs lists every database with its description and health.
    let catalogs = read(&client, "res://catalogs").await;
    let items = catalogs["items"].as_array().unwrap();
    let names: Vec<&str> = items.iter().map(|item| item["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["music", "films", "records", "nowhere"]);
    assert!(items[1]["description"].as_str().unwrap().starts_with("Pagila"));
    assert_eq!(items[0]["status"], "running");
    assert!(items[3]["status"].as_str().unwrap().starts_with("unreachable"), "{}", items[3]);
    assert!(items[3]["etag"].is_null());
    // Only the schemas a database shows.
    let shown = ok(&client, "list_schemas", json!({"database": "records"})).await;
    assert_eq!(structured(&shown)["items"], json!([{"catalog": "records", "schema": "public"}]));
    let schemas = read(&client, "res://schemas/films").await;
    assert!(schemas["items"].as_array().unwrap().iter().all(|item| item["catalog"] == "films"));
    // A compatible database without the statistics views still describes its tables.
    assert_eq!(items[2]["features"]["stat_views"], false, "{}", items[2]);
    assert_eq!(items[0]["features"]["stat_views"], true);
    let described = read(&client, "res://table/records/public/album").await;
    assert_eq!(described["table"]["catalog"], "records", "{described}");

    // Every call is recorded with its database.
    let pool = lab.music.connect().await;
    let last = ok(
        &client,
        "execute_sql",
        json!({"database": "records", "sql": "SELECT 1", "dry_run": false}),
    )
    .await;
    let id = uuid::Uuid::parse_str(meta_of(&last)["execution_id"].as_str().unwrap()).unwrap();
    wait_for_row(&pool, "SELECT 1 FROM orca.mcp_executions WHERE id = $1", id).await;
    let recorded: Option<String> =
        sqlx::query_scalar("SELECT database_name FROM orca.mcp_executions WHERE id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(recorded.as_deref(), Some("records"));
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_from_one_database_are_refused_on_another() {
    let lab = lab().await;
    let client = lab.setup.stdio_client().await;

    // A confirmation token of a write on films, replayed on music, where the same statement
    // would run (both have a customer table).
    let sql = "UPDATE customer SET first_name = first_name WHERE customer_id = 1";
    let dry =
        ok(&client, "execute_sql", json!({"database": "films", "sql": sql, "dry_run": true})).await;
    let token = structured(&dry)["confirmation_token"].as_str().unwrap().to_owned();
    let foreign = refused(
        &client,
        "execute_sql",
        json!({"database": "music", "sql": sql, "dry_run": false, "read_only": false, "confirmation_token": token}),
    )
    .await;
    assert!(
        foreign["message"].as_str().unwrap().contains("different statement, principal or database"),
        "{foreign}"
    );
    ok(
        &client,
        "execute_sql",
        json!({"database": "films", "sql": sql, "dry_run": false, "read_only": false, "confirmation_token": token}),
    )
    .await;

    // A page token of a read on music, sent with records.
    let page_sql = "SELECT 1 AS n FROM generate_series(1, 5)";
    let first =
        ok(&client, "query_sql", json!({"database": "music", "sql": page_sql, "max_rows": 2}))
            .await;
    let page_token = structured(&first)["page_token"].as_str().unwrap().to_owned();
    let other = refused(
        &client,
        "query_sql",
        json!({"database": "records", "sql": page_sql, "max_rows": 2, "page_token": page_token}),
    )
    .await;
    assert!(
        other["message"].as_str().unwrap().contains("another query, caller or database"),
        "{other}"
    );
    ok(
        &client,
        "query_sql",
        json!({"database": "music", "sql": page_sql, "max_rows": 2, "page_token": page_token}),
    )
    .await;

    // A feedback token of a call on music, rated as a call on films.
    let rated = ok(
        &client,
        "execute_sql",
        json!({"database": "music", "sql": "SELECT 1", "dry_run": false}),
    )
    .await;
    let feedback_token = meta_of(&rated)["feedback_token"].as_str().unwrap().to_owned();
    let wrong = refused(
        &client,
        "submit_feedback",
        json!({"feedback_token": feedback_token, "rating": "up", "database": "films"}),
    )
    .await;
    assert!(wrong["message"].as_str().unwrap().contains("database `music`"), "{wrong}");
    ok(
        &client,
        "submit_feedback",
        json!({"feedback_token": feedback_token, "rating": "up", "database": "music"}),
    )
    .await;
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn generate_sql_chooses_the_database_the_question_is_about() {
    let lab = lab().await;
    let fake = FakeLlm::start().await;
    let setup = lab.setup.with_fake_llm(&fake);
    // films has a context file of its own; the others use the configured one.
    std::fs::write(
        setup.home.path().join("films-context.md"),
        "# Supabase SQL Context Learning\n\n## Database Schema Overview\n\n## Successful Query Patterns\n\n### Rental rate of films\nThe rate is film.rental_rate, in dollars per rental.\n\n## Common Error Patterns & Fixes\n\n## Query Optimization Insights\n\n## Model Performance Notes\n",
    )
    .unwrap();
    let client = setup.stdio_client().await;

    fake.script(
        Wire::Anthropic,
        [Reply::Text(
            "```sql\nSELECT title FROM film ORDER BY rental_rate DESC LIMIT 5\n```".into(),
        )],
    );
    let films =
        ok(&client, "generate_sql", json!({"prompt": "Which films have the highest rental rate?"}))
            .await;
    let meta = meta_of(&films);
    assert_eq!(meta["database"]["name"], "films", "{meta:?}");
    assert_eq!(meta["database"]["chosen_by"], "question");
    assert!(meta["database"]["why"].as_str().unwrap().contains("film"), "{meta:?}");
    let prompt =
        fake.requests().last().unwrap().body["messages"][0]["content"].as_str().unwrap().to_owned();
    assert!(prompt.contains("film(") && !prompt.contains("invoice_line("), "{prompt}");
    assert!(prompt.contains("### Rental rate of films"), "the films context file: {prompt}");

    fake.script(
        Wire::Anthropic,
        [Reply::Text(
            "```sql\nSELECT name FROM track ORDER BY milliseconds DESC LIMIT 1\n```".into(),
        )],
    );
    let music =
        ok(&client, "generate_sql", json!({"prompt": "the longest track and its genre"})).await;
    assert_eq!(meta_of(&music)["database"]["name"], "music");

    // Artists and albums: music and records both fit.
    let asked =
        refused(&client, "generate_sql", json!({"prompt": "list every artist with their albums"}))
            .await;
    assert_eq!(asked["code"], "INVALID_INPUT");
    let candidates = asked["details"]["databases"].as_array().unwrap();
    assert!(
        candidates.contains(&json!("music")) && candidates.contains(&json!("records")),
        "{asked}"
    );
    assert_eq!(asked["details"]["prompt"]["name"], "ask_for_disambiguation");

    // One statement cannot span two databases.
    let spans = refused(
        &client,
        "generate_sql",
        json!({"prompt": "films whose title is also the title of a music album"}),
    )
    .await;
    let message = spans["message"].as_str().unwrap();
    assert!(message.contains("film in films") && message.contains("cannot span"), "{message}");

    // Named, the database is used as it is.
    fake.script(Wire::Anthropic, [Reply::Text("```sql\nSELECT name FROM artist\n```".into())]);
    let named = ok(
        &client,
        "generate_sql",
        json!({"prompt": "list every artist with their albums", "database": "records"}),
    )
    .await;
    assert_eq!(meta_of(&named)["validation"]["valid"], true);
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_database_is_reported_and_the_others_keep_serving() {
    let lab = lab().await;
    let server = lab.setup.http_server(&[]);
    let health: Value = reqwest::get(server.url("/healthz")).await.unwrap().json().await.unwrap();
    assert_eq!(health["databases"]["music"], "running", "{health}");
    let nowhere = health["databases"]["nowhere"].as_str().unwrap();
    assert!(nowhere.starts_with("unreachable: cannot connect"), "{health}");
    // Nothing of the URL reaches a client.
    assert!(!health.to_string().contains("secret") && !health.to_string().contains("127.0.0.1:1"));

    let client = server.client(None).await;
    let listed = ok(&client, "list_servers", json!({})).await;
    let servers = structured(&listed)["servers"].as_array().unwrap().clone();
    let postgres = servers.iter().find(|server| server["name"] == "postgres").unwrap();
    let databases = postgres["databases"].as_array().unwrap();
    assert_eq!(databases.len(), 4);
    assert!(databases[3]["status"].as_str().unwrap().starts_with("unreachable"), "{postgres}");
    assert_eq!(databases[0]["status"], "running");
    let failed = refused(
        &client,
        "execute_sql",
        json!({"database": "nowhere", "sql": "SELECT 1", "dry_run": false}),
    )
    .await;
    assert!(!failed.to_string().contains("secret"), "{failed}");
    assert_eq!(count(&client, "films", "film").await, 3);
    client.cancel().await.unwrap();

    // orca doctor names the database that is down, and the connections in all.
    let (status, out, _) = run(&lab.setup, &["doctor"]);
    assert_eq!(status, 1, "{out}");
    assert!(out.contains("FAIL  database `nowhere`"), "{out}");
    assert!(out.contains("ok    database `music`: reachable"), "{out}");
    assert!(
        out.contains("ok    database `records`: reachable")
            && out.contains("without pg_stat_user_tables"),
        "{out}"
    );
    assert!(out.contains("at most 40 to PostgreSQL: 4 target database(s) x 8"), "{out}");
    assert!(!out.contains(":secret@"), "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_share_the_configuration_and_the_tokens() {
    let lab = lab().await;
    let setup = lab.setup.with_env("ORCA_SECRET", "a-secret-shared-by-both-replicas-0123456789");
    let first = setup.http_server(&[]);
    let second = setup.http_server(&[]);
    let one = first.client(None).await;
    let two = second.client(None).await;
    let sql = "UPDATE film SET rental_rate = rental_rate WHERE film_id = 1";
    let dry =
        ok(&one, "execute_sql", json!({"database": "films", "sql": sql, "dry_run": true})).await;
    let token = structured(&dry)["confirmation_token"].as_str().unwrap().to_owned();
    let ran = ok(&two, "execute_sql", json!({"database": "films", "sql": sql, "dry_run": false, "read_only": false, "confirmation_token": token})).await;
    assert_eq!(structured(&ran)["rows_affected"], 1, "{}", structured(&ran));
    let page_sql = "SELECT title FROM film ORDER BY title";
    let page =
        ok(&one, "query_sql", json!({"database": "films", "sql": page_sql, "max_rows": 2})).await;
    let page_token = structured(&page)["page_token"].as_str().unwrap().to_owned();
    let next = ok(
        &two,
        "query_sql",
        json!({"database": "films", "sql": page_sql, "max_rows": 2, "page_token": page_token}),
    )
    .await;
    assert_eq!(structured(&next)["rows"][0][0], "ADAPTATION HOLES");
    one.cancel().await.unwrap();
    two.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_export_and_the_review_work_per_database() {
    let lab = lab().await;
    let client = lab.setup.stdio_client().await;
    let mut tokens = Vec::new();
    for database in ["music", "films"] {
        let sql = format!("SELECT {database}_missing_column FROM pg_class");
        let result = call(
            &client,
            "execute_sql",
            json!({"database": database, "sql": sql, "dry_run": false}),
            None,
        )
        .await
        .unwrap();
        tokens.push(meta_of(&result)["feedback_token"].as_str().unwrap().to_owned());
    }
    for (token, database) in tokens.iter().zip(["music", "films"]) {
        ok(
            &client,
            "submit_feedback",
            json!({"feedback_token": token, "rating": "down", "database": database}),
        )
        .await;
    }
    client.cancel().await.unwrap();
    let out = lab.setup.home.path().join("export");
    let out_text = out.display().to_string();
    let (status, stdout, stderr) = run(
        &lab.setup,
        &["export-feedback", "--since", "1h", "--out", &out_text, "--database", "films"],
    );
    assert_eq!(status, 0, "{stdout}{stderr}");
    let file = std::fs::read_dir(&out)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.file_name().unwrap().to_string_lossy().starts_with("feedback-"))
        .unwrap();
    let text = std::fs::read_to_string(file).unwrap();
    let mut lines = text.lines();
    assert!(lines.next().unwrap().ends_with(",database"), "{text}");
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 1, "{text}");
    assert!(rows[0].ends_with(",films") && rows[0].contains(&tokens[1]), "{text}");
    let (status, _, stderr) = run(
        &lab.setup,
        &["export-feedback", "--since", "1h", "--out", &out_text, "--database", "jazz"],
    );
    assert_eq!(status, 0, "an unknown name selects no calls: {stderr}");

    // orca context suggest --database learns from that database's calls only.
    let fake = FakeLlm::start().await;
    let reviewer = OrcaSetup::new(&lab.music.url)
        .with_env("MUSIC_URL", &lab.music.url)
        .with_fake_llm(&fake)
        .with_config("databases:\n  - name: music\n    url: ${MUSIC_URL}\n  - name: films\n    url: ${MUSIC_URL}\n");
    std::fs::create_dir_all(reviewer.home.path().join("context")).unwrap();
    std::fs::write(
        reviewer.home.path().join("context/supabase-sql-context.md"),
        "# Supabase SQL Context Learning\n\n## Database Schema Overview\n\n## Successful Query Patterns\n\n## Common Error Patterns & Fixes\n\n## Query Optimization Insights\n\n## Model Performance Notes\n",
    )
    .unwrap();
    let nothing = "```json\n{\"patterns\": [], \"fixes\": [], \"insights\": []}\n```";
    fake.script(Wire::Anthropic, [Reply::Text(nothing.to_owned())]);
    let (status, stdout, stderr) = run(
        &reviewer,
        &[
            "context",
            "suggest",
            "--since",
            "1h",
            "--database",
            "films",
            "--llm-provider",
            "anthropic",
        ],
    );
    assert_eq!(status, 0, "{stdout}{stderr}");
    let lessons = FakeLlm::conversation_text(&fake.requests()[0]);
    assert!(lessons.contains("films_missing_column"), "{lessons}");
    assert!(!lessons.contains("music_missing_column"), "{lessons}");

    // orca eval on one of several databases: it must be named, and its calls carry it.
    let fake = FakeLlm::start().await;
    let setup = lab.setup.with_fake_llm(&fake);
    std::fs::write(
        setup.home.path().join("questions.yaml"),
        "- id: films-count\n  question: How many films are there?\n  gold_sql: SELECT count(*) FROM film\n",
    )
    .unwrap();
    let (status, _, stderr) = run(&setup, &["eval", "questions.yaml"]);
    assert_ne!(status, 0);
    assert!(
        stderr.contains("choose one with --database: music, films, records, nowhere"),
        "{stderr}"
    );
    fake.script(Wire::Anthropic, [Reply::Text("```sql\nSELECT count(*) FROM film\n```".into())]);
    let (status, stdout, stderr) =
        run(&setup, &["eval", "questions.yaml", "--database", "films", "--json"]);
    assert_eq!(status, 0, "{stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["accuracy"], 1.0, "{report}");
    let pool = lab.music.connect().await;
    let database: Option<String> = sqlx::query_scalar(
        "SELECT database_name FROM orca.mcp_executions WHERE source = 'eval' ORDER BY created_at DESC LIMIT 1",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(database.as_deref(), Some("films"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_single_database_url_is_one_database_named_after_it() {
    let database = samples::chinook().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let catalogs = read(&client, "res://catalogs").await;
    let name: String = {
        let mut connection = sqlx::PgConnection::connect(&database.url).await.unwrap();
        sqlx::query_scalar("SELECT current_database()").fetch_one(&mut connection).await.unwrap()
    };
    assert_eq!(catalogs["items"][0]["name"], Value::from(name.clone()));
    assert_eq!(catalogs["items"].as_array().unwrap().len(), 1);
    // Without several databases the argument may be left out, or given.
    let tools = client.list_all_tools().await.unwrap();
    let execute = tools.iter().find(|tool| tool.name == "execute_sql").unwrap();
    assert!(execute.input_schema["properties"]["database"].get("enum").is_none());
    assert_eq!(count(&client, &name, "artist").await, 275);
    ok(&client, "execute_sql", json!({"sql": "SELECT 1", "dry_run": false})).await;
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn in_a_browser_the_console_offers_the_databases_and_its_fallback_keeps_the_chosen_one() {
    let music = samples::chinook().await;
    let films = films().await;
    let fake = FakeLlm::start().await;
    // generate_sql never gets it right, so the manual fallback opens.
    fake.script(
        Wire::Anthropic,
        (0..3).map(|_| Reply::Text("```sql\nSELECT film.no_such_column FROM film\n```".into())),
    );
    let setup = OrcaSetup::new(&music.url)
        .with_env("MUSIC_URL", &music.url)
        .with_env("FILMS_URL", &films.url)
        .with_fake_llm(&fake)
        .with_config(
            "databases:\n  - name: music\n    url: ${MUSIC_URL}\n    description: Chinook, a music store\n  - name: films\n    url: ${FILMS_URL}\n    description: Pagila, a DVD rental store of films\n",
        );
    let server = setup.http_server(&[]);
    crate::console::run_scenario("databases", &server.base, &[]);
    // The fallback's read ran on films (music has no film table). Tracking writes in batches,
    // so the last rows may land a moment after the browser is done.
    let pool = music.connect().await;
    let executions = || async {
        sqlx::query_scalar::<_, Option<String>>(
            "SELECT database_name FROM orca.mcp_executions WHERE tool_name = 'execute_sql' ORDER BY created_at",
        )
        .fetch_all(&pool)
        .await
        .unwrap()
    };
    crate::support::eventually(
        "three execute_sql rows",
        std::time::Duration::from_secs(20),
        || async { executions().await.len() >= 3 },
    )
    .await;
    let databases = executions().await;
    assert!(databases.iter().all(|database| database.as_deref() == Some("films")), "{databases:?}");
}
