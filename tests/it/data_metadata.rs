//! The `data` server's metadata tools through a real MCP client against the real binary:
//! `list_schemas`, `list_tables` (glob and LIKE patterns, limits), `get_table_schema` (semantic
//! hints, ambiguous and misspelled names), `get_stats` (exact on Chinook, estimated and sampled
//! on a large table) and `sample_table` (head, random, TABLESAMPLE, views, limits), on Chinook,
//! Pagila's schema (views, materialized views, partitions, enums, domains) and tables made here.

use rmcp::service::{RoleClient, RunningService};
use serde_json::{Map, Value, json};

use crate::support::{OrcaSetup, TestDatabase, call, meta_of, samples};

type Client = RunningService<RoleClient, ()>;

/// A successful call's structured result and `_meta`.
async fn ok(client: &Client, tool: &str, arguments: Value) -> (Value, Map<String, Value>) {
    let result = call(client, tool, arguments.clone(), None).await.unwrap();
    let value = result.structured_content.clone().unwrap_or(Value::Null);
    assert_eq!(result.is_error, Some(false), "{tool} {arguments} -> {value}");
    (value, meta_of(&result))
}

/// A failed call's error object.
async fn failure(client: &Client, tool: &str, arguments: Value) -> Value {
    let result = call(client, tool, arguments.clone(), None).await.unwrap();
    assert_eq!(result.is_error, Some(true), "{tool} {arguments} should fail: {result:?}");
    result.structured_content.clone().unwrap_or(Value::Null)["error"].clone()
}

/// The `table` names of a list_tables result.
fn table_names(listing: &Value) -> Vec<String> {
    listing["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["table"].as_str().unwrap().to_owned())
        .collect()
}

async fn database_name(pool: &sqlx::PgPool) -> String {
    sqlx::query_scalar("SELECT current_database()::text").fetch_one(pool).await.unwrap()
}

#[tokio::test]
async fn list_schemas_names_the_user_schemas_and_refuses_other_catalogs() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    sqlx::raw_sql("CREATE SCHEMA sales").execute(&pool).await.unwrap();
    let catalog = database_name(&pool).await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;

    let (listing, _) = ok(&client, "list_schemas", json!({})).await;
    assert_eq!(
        listing,
        json!({"items": [
            {"catalog": catalog, "schema": "public"},
            {"catalog": catalog, "schema": "sales"},
        ]})
    );
    let (same, _) = ok(&client, "list_schemas", json!({"catalog": catalog})).await;
    assert_eq!(same, listing);

    let error = failure(&client, "list_schemas", json!({"catalog": "elsewhere"})).await;
    assert_eq!(error["code"], "NOT_FOUND", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("elsewhere") && message.contains(&catalog), "{error}");
    let error = failure(&client, "list_schemas", json!({"schema": "public"})).await;
    assert_eq!(error["code"], "INVALID_INPUT", "{error}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn list_tables_filters_with_globs_and_like_patterns_and_flags_truncation() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let catalog = database_name(&pool).await;
    sqlx::raw_sql("COMMENT ON TABLE genre IS 'music genres'").execute(&pool).await.unwrap();
    let client = OrcaSetup::new(&database.url).stdio_client().await;

    let (all, _) = ok(&client, "list_tables", json!({})).await;
    let every = [
        "album",
        "artist",
        "customer",
        "employee",
        "genre",
        "invoice",
        "invoice_line",
        "media_type",
        "playlist",
        "playlist_track",
        "track",
    ];
    assert_eq!(table_names(&all), every);
    assert_eq!(all["truncated"], false);
    assert_eq!(
        all["items"][0],
        json!({"catalog": catalog, "schema": "public", "table": "album", "type": "TABLE", "kind": "table", "comment": null})
    );

    assert_eq!(all["items"][4]["comment"], "music genres");

    // (pattern, the tables it matches)
    let cases: &[(&str, &[&str])] = &[
        ("*", &every),
        ("*track", &["playlist_track", "track"]),
        ("playlist*", &["playlist", "playlist_track"]),
        ("?enre", &["genre"]),
        ("GENRE", &["genre"]),
        // `_` is literal in a glob, one character in LIKE.
        ("invoice_line", &["invoice_line"]),
        ("invoice?line", &["invoice_line"]),
        ("media_typ", &[]),
        ("%_track", &["playlist_track"]),
        ("%line%", &["invoice_line"]),
        ("INVOICE%", &["invoice", "invoice_line"]),
        ("in_oice", &[]),
        ("in_oice%", &["invoice", "invoice_line"]),
        ("", &every),
    ];
    for (pattern, expected) in cases {
        let (listing, _) = ok(&client, "list_tables", json!({"pattern": pattern})).await;
        assert_eq!(table_names(&listing), *expected, "pattern {pattern:?}");
        assert_eq!(listing["truncated"], false, "pattern {pattern:?}");
    }

    let (first, _) = ok(&client, "list_tables", json!({"limit": 5})).await;
    assert_eq!(table_names(&first), every[..5]);
    assert_eq!(first["truncated"], true);
    let (exactly, _) = ok(&client, "list_tables", json!({"limit": 11})).await;
    assert_eq!(exactly["truncated"], false);
    let (one, _) = ok(&client, "list_tables", json!({"pattern": "*a*", "limit": 1})).await;
    assert_eq!((table_names(&one), &one["truncated"]), (vec!["album".to_owned()], &json!(true)));
    let (public, _) =
        ok(&client, "list_tables", json!({"catalog": catalog, "schema": "PUBLIC", "limit": 1000}))
            .await;
    assert_eq!(table_names(&public), every);

    for limit in [0, -1, 1001] {
        let error = failure(&client, "list_tables", json!({"limit": limit})).await;
        assert_eq!(error["code"], "INVALID_INPUT", "{error}");
        assert!(error["message"].as_str().unwrap().contains("between 1 and 1000"), "{error}");
    }
    let error = failure(&client, "list_tables", json!({"schema": "pubic"})).await;
    assert_eq!(error["code"], "NOT_FOUND", "{error}");
    assert!(error["message"].as_str().unwrap().contains("did you mean public"), "{error}");
    let error = failure(&client, "list_tables", json!({"catalog": "other"})).await;
    assert_eq!(error["code"], "NOT_FOUND", "{error}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn pagila_views_materialized_views_and_partitions_have_their_types_and_kinds() {
    let database = samples::pagila().await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;
    let (listing, _) = ok(&client, "list_tables", json!({"limit": 1000})).await;
    assert_eq!(listing["truncated"], false);
    let kinds: std::collections::BTreeMap<String, (String, String)> = listing["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            (
                item["table"].as_str().unwrap().to_owned(),
                (
                    item["type"].as_str().unwrap().to_owned(),
                    item["kind"].as_str().unwrap().to_owned(),
                ),
            )
        })
        .collect();
    let expect = |table: &str, spec_type: &str, kind: &str| {
        assert_eq!(
            kinds.get(table),
            Some(&(spec_type.to_owned(), kind.to_owned())),
            "{table} in {kinds:?}"
        );
    };
    for view in [
        "actor_info",
        "customer_list",
        "film_list",
        "nicer_but_slower_film_list",
        "sales_by_film_category",
        "sales_by_store",
        "staff_list",
    ] {
        expect(view, "VIEW", "view");
    }
    expect("rental_by_category", "VIEW", "materialized_view");
    expect("payment", "TABLE", "partitioned_table");
    expect("payment_p2022_01", "TABLE", "table");
    expect("customer", "TABLE", "table");

    let (views, _) = ok(&client, "list_tables", json!({"pattern": "*list"})).await;
    assert_eq!(
        table_names(&views),
        ["customer_list", "film_list", "nicer_but_slower_film_list", "staff_list"]
    );
    assert!(views["items"].as_array().unwrap().iter().all(|item| item["type"] == "VIEW"));
    let (payments, _) =
        ok(&client, "list_tables", json!({"pattern": "payment_p2022%", "limit": 3})).await;
    assert_eq!(
        table_names(&payments),
        ["payment_p2022_01", "payment_p2022_02", "payment_p2022_03"]
    );
    assert_eq!(payments["truncated"], true);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn get_table_schema_describes_columns_with_semantic_hints() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let catalog = database_name(&pool).await;
    sqlx::raw_sql(
        "COMMENT ON COLUMN customer.company IS 'where the customer works'; \
         ALTER TABLE customer ALTER COLUMN country SET DEFAULT 'USA'; \
         CREATE TABLE contacts (reference integer, contact text); \
         INSERT INTO contacts SELECT customer_id, email FROM customer",
    )
    .execute(&pool)
    .await
    .unwrap();
    let client = OrcaSetup::new(&database.url).stdio_client().await;

    let (described, meta) =
        ok(&client, "get_table_schema", json!({"ref": {"table": "customer"}})).await;
    assert_eq!(
        described["table"],
        json!({"catalog": catalog, "schema": "public", "table": "customer"})
    );
    let columns = described["schema"].as_array().unwrap();
    let column = |name: &str| columns.iter().find(|column| column["name"] == name).unwrap().clone();
    assert_eq!(columns.len(), 13);
    assert_eq!(columns[0]["name"], "customer_id");
    assert_eq!(
        column("email"),
        json!({"name": "email", "type": "character varying(60)", "nullable": false, "default": null, "comment": null, "hints": {"semantic": "email"}})
    );
    assert_eq!(column("customer_id")["hints"], json!({"semantic": "id"}));
    assert_eq!(column("support_rep_id")["hints"], json!({"semantic": "id"}));
    assert_eq!(column("phone")["hints"], json!({"semantic": "phone"}));
    assert_eq!(column("first_name")["hints"], json!({}));
    assert_eq!(column("company")["comment"], "where the customer works");
    assert_eq!(column("company")["nullable"], true);
    assert_eq!(column("country")["default"], "'USA'::character varying");
    assert_eq!(meta["hint_sample"]["rows"], 59);

    // A column whose name says nothing is recognised by its sampled values.
    let (contacts, _) = ok(
        &client,
        "get_table_schema",
        json!({"ref": {"catalog": catalog, "schema": "public", "table": "contacts"}}),
    )
    .await;
    assert_eq!(contacts["schema"][1]["name"], "contact");
    assert_eq!(contacts["schema"][1]["hints"], json!({"semantic": "email"}));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn ambiguous_and_misspelled_table_names_are_refused_with_candidates() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    sqlx::raw_sql("CREATE SCHEMA sales; CREATE TABLE sales.artist (artist_id int, name text)")
        .execute(&pool)
        .await
        .unwrap();
    let client = OrcaSetup::new(&database.url).stdio_client().await;

    for tool in ["get_table_schema", "get_stats", "sample_table"] {
        let error = failure(&client, tool, json!({"ref": {"table": "artist"}})).await;
        assert_eq!(error["code"], "INVALID_INPUT", "{tool}: {error}");
        assert_eq!(error["details"]["candidates"], json!(["public.artist", "sales.artist"]));
        assert_eq!(error["details"]["prompt"]["name"], "ask_for_disambiguation", "{error}");
        assert_eq!(error["details"]["prompt"]["arguments"]["table"], "artist", "{error}");

        let error = failure(&client, tool, json!({"ref": {"table": "trak"}})).await;
        assert_eq!(error["code"], "NOT_FOUND", "{tool}: {error}");
        assert!(error["message"].as_str().unwrap().contains("public.track"), "{error}");
    }
    // A schema settles it.
    let (described, _) =
        ok(&client, "get_table_schema", json!({"ref": {"schema": "sales", "table": "artist"}}))
            .await;
    assert_eq!(described["schema"][1]["type"], "text");
    let error =
        failure(&client, "get_table_schema", json!({"ref": {"catalog": "x", "table": "track"}}))
            .await;
    assert_eq!(error["code"], "NOT_FOUND", "{error}");
    let error = failure(&client, "get_table_schema", json!({"ref": "track"})).await;
    assert_eq!(error["code"], "INVALID_INPUT", "{error}");
    client.cancel().await.unwrap();
}

/// Over HTTP each call runs on one of the runtime's worker threads (over stdio, on the main
/// thread): every data tool that reads rows answers there, in every profile the binary is built
/// in (`./scripts/test` runs this suite against the demo profile's unoptimized binary too, which
/// once overflowed a worker's stack on `get_stats`).
#[tokio::test]
async fn every_reading_data_tool_answers_over_http_on_a_worker_thread() {
    let database = samples::chinook().await;
    let setup = OrcaSetup::new(&database.url);
    let server = setup.http_server(&[]);
    let client = server.client(None).await;
    let table = json!({"table": "track"});
    let calls = [
        ("get_stats", json!({"ref": table})),
        ("get_table_schema", json!({"ref": table})),
        ("sample_table", json!({"ref": table, "method": "random", "limit": 5})),
        ("profile_table", json!({"ref": table})),
        ("detect_pii", json!({"ref": {"table": "customer"}})),
        ("query_sql", json!({"sql": "SELECT name FROM genre ORDER BY genre_id", "max_rows": 5})),
        ("explain_sql", json!({"sql": "SELECT count(*) FROM track", "analyze": true})),
    ];
    for (tool, arguments) in calls {
        ok(&client, tool, arguments).await;
    }
    let (stats, _) = ok(&client, "get_stats", json!({"ref": table})).await;
    assert_eq!(stats["row_count"], 3503);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn get_stats_counts_a_small_table_exactly() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let (min, max, composers, nulls): (i32, i32, i64, i64) = sqlx::query_as(
        "SELECT min(milliseconds), max(milliseconds), count(DISTINCT composer), \
                count(*) FILTER (WHERE composer IS NULL) FROM track",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let client = OrcaSetup::new(&database.url).stdio_client().await;

    let (stats, _) = ok(
        &client,
        "get_stats",
        json!({"ref": {"table": "track"}, "columns": ["composer", "genre_id", "milliseconds", "unit_price", "name"]}),
    )
    .await;
    assert_eq!(stats["row_count"], 3503);
    assert_eq!(stats["row_count_exact"], true);
    assert_eq!(stats["sampled"], false);
    let columns = stats["columns"].as_object().unwrap();
    assert_eq!(
        columns.keys().collect::<Vec<_>>(),
        ["composer", "genre_id", "milliseconds", "unit_price", "name"]
    );
    let composer = &columns["composer"];
    let null_rate = composer["null_rate"].as_f64().unwrap();
    assert!(null_rate > 0.0, "{composer}");
    assert!((null_rate - nulls as f64 / 3503.0).abs() < 1e-9, "{composer}");
    assert_eq!(composer["ndv"], composers);
    assert_eq!(columns["genre_id"]["ndv"], 25);
    assert_eq!(columns["genre_id"]["null_rate"], 0.0);
    assert_eq!(columns["genre_id"]["min"], "1");
    assert_eq!(columns["genre_id"]["max"], "25");
    assert_eq!(columns["milliseconds"]["min"], min.to_string());
    assert_eq!(columns["milliseconds"]["max"], max.to_string());
    assert_eq!(
        columns["unit_price"],
        json!({"min": "0.99", "max": "1.99", "null_rate": 0.0, "ndv": 2})
    );
    assert!(columns["name"]["min"].is_string());

    // Every column when none are named; case-insensitive names; repeats once.
    let (all, _) = ok(&client, "get_stats", json!({"ref": {"table": "track"}})).await;
    assert_eq!(all["columns"].as_object().unwrap().len(), 9);
    assert_eq!(all["columns"]["track_id"]["ndv"], 3503);
    let (some, _) = ok(
        &client,
        "get_stats",
        json!({"ref": {"table": "track"}, "columns": ["GENRE_ID", "genre_id"]}),
    )
    .await;
    assert_eq!(some["columns"].as_object().unwrap().keys().collect::<Vec<_>>(), ["genre_id"]);
    let (none, _) =
        ok(&client, "get_stats", json!({"ref": {"table": "genre"}, "columns": []})).await;
    assert_eq!(
        none,
        json!({"row_count": 25, "row_count_exact": true, "sampled": false, "columns": {}})
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn get_stats_refuses_unknown_columns_listing_the_table_columns() {
    let database = samples::chinook().await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;
    let error = failure(
        &client,
        "get_stats",
        json!({"ref": {"table": "genre"}, "columns": ["name", "nope", "genre"]}),
    )
    .await;
    assert_eq!(error["code"], "INVALID_INPUT", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("`nope`") && message.contains("`genre`"), "{error}");
    assert!(message.contains("genre_id, name"), "{error}");
    assert_eq!(error["details"]["unknown_columns"], json!(["nope", "genre"]));
    assert_eq!(error["details"]["columns"], json!(["genre_id", "name"]));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn get_stats_handles_every_column_type_of_pagila_and_odd_types() {
    let database = samples::pagila().await;
    let pool = database.connect().await;
    sqlx::raw_sql(
        "CREATE TABLE odd (id uuid, flag boolean, doc json, docb jsonb, spot point, body xml, \
                           rating mpaa_rating, ratings mpaa_rating[], made year, big \"bıgınt\", \
                           bits bit(3), tags text[], span int4range, \"Mixed Case\" text); \
         INSERT INTO odd VALUES \
           ('00000000-0000-0000-0000-000000000002', true, '{\"a\": 1}', '{\"a\": 1}', '(1,2)', \
            '<a/>', 'PG', '{G,R}', 2001, 7, B'101', '{x,y}', '[1,5)', 'b'), \
           ('00000000-0000-0000-0000-000000000001', false, '{\"a\": 1}', '{\"a\": 2}', '(1,2)', \
            '<a/>', 'NC-17', '{PG}', 1999, 9, B'001', '{z}', '[2,3)', 'a'), \
           (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    )
    .execute(&pool)
    .await
    .unwrap();
    let client = OrcaSetup::new(&database.url).stdio_client().await;

    let (stats, _) = ok(&client, "get_stats", json!({"ref": {"table": "odd"}})).await;
    assert_eq!(stats["row_count"], 3);
    let column = |name: &str| stats["columns"][name].clone();
    let range = |name: &str| (column(name)["min"].clone(), column(name)["max"].clone());
    assert_eq!(
        range("id"),
        (
            json!("00000000-0000-0000-0000-000000000001"),
            json!("00000000-0000-0000-0000-000000000002")
        )
    );
    assert_eq!(range("flag"), (json!("false"), json!("true")));
    assert_eq!(range("rating"), (json!("PG"), json!("NC-17")), "enum order, not text order");
    assert_eq!(range("ratings"), (json!("{G,R}"), json!("{PG}")));
    assert_eq!(range("made"), (json!("1999"), json!("2001")));
    assert_eq!(range("big"), (json!("7"), json!("9")));
    assert_eq!(range("bits"), (json!("001"), json!("101")));
    assert_eq!(range("tags"), (json!("{x,y}"), json!("{z}")));
    assert_eq!(range("Mixed Case"), (json!("a"), json!("b")));
    for unordered in ["doc", "docb", "spot", "body", "span"] {
        assert_eq!(range(unordered), (Value::Null, Value::Null), "{unordered}");
    }
    assert_eq!(column("doc")["ndv"], 1);
    assert_eq!(column("docb")["ndv"], 2);
    assert_eq!(column("spot")["ndv"], 1);
    assert_eq!(column("body")["ndv"], 1);
    for name in ["id", "doc", "span", "Mixed Case"] {
        assert!((column(name)["null_rate"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-9);
    }

    // Every table and view of Pagila (empty): no column type makes the queries fail. The
    // materialized view was created WITH NO DATA and cannot be read.
    let (listing, _) = ok(&client, "list_tables", json!({"limit": 1000})).await;
    for item in listing["items"].as_array().unwrap() {
        let reference = json!({"schema": item["schema"], "table": item["table"]});
        let (described, _) = ok(&client, "get_table_schema", json!({"ref": reference})).await;
        assert!(!described["schema"].as_array().unwrap().is_empty(), "{item}");
        if item["table"] == "rental_by_category" {
            let error = failure(&client, "get_stats", json!({"ref": reference})).await;
            assert_eq!(error["code"], "QUERY_FAILED", "{error}");
            assert!(error["message"].as_str().unwrap().contains("has not been populated"));
            continue;
        }
        if item["table"] == "odd" {
            continue;
        }
        let (stats, _) = ok(&client, "get_stats", json!({"ref": reference})).await;
        assert_eq!(stats["row_count"], 0, "{item}");
        for (name, column) in stats["columns"].as_object().unwrap() {
            assert_eq!(
                column,
                &json!({"min": null, "max": null, "null_rate": null, "ndv": 0}),
                "{item} {name}"
            );
        }
    }
    client.cancel().await.unwrap();
}

/// A table of `rows` wide rows (few to a page, so that page samples hold enough rows), with a
/// column of ten categories and one that is null on every fourth row; analyzed.
async fn large_table(pool: &sqlx::PgPool, name: &str, rows: u32) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE {name} (id integer PRIMARY KEY, category text, maybe integer, pad text); \
         INSERT INTO {name} SELECT i, 'category ' || (i % 10), CASE WHEN i % 4 = 0 THEN NULL ELSE i END, \
                                   repeat('x', 500) FROM generate_series(1, {rows}) AS i; \
         ANALYZE {name}"
    )))
    .execute(pool)
    .await
    .unwrap();
}

#[tokio::test]
async fn get_stats_estimates_and_samples_a_table_above_the_threshold() {
    let database = TestDatabase::create().await;
    let pool = database.connect().await;
    large_table(&pool, "events", 20_000).await;
    large_table(&pool, "small", 500).await;
    sqlx::raw_sql(
        "CREATE TABLE measurements (id integer, category text, maybe integer, pad text) \
           PARTITION BY RANGE (id); \
         CREATE TABLE measurements_low PARTITION OF measurements FOR VALUES FROM (0) TO (10000); \
         CREATE TABLE measurements_high PARTITION OF measurements FOR VALUES FROM (10000) TO (MAXVALUE); \
         INSERT INTO measurements SELECT * FROM events; \
         ANALYZE measurements_low; ANALYZE measurements_high",
    )
    .execute(&pool)
    .await
    .unwrap();
    let setup = OrcaSetup::new(&database.url)
        .with_config("data:\n  exact_count_max_rows: 1000\n  sample_rows: 500\n");
    let client = setup.stdio_client().await;

    for table in ["events", "measurements"] {
        let (stats, _) = ok(
            &client,
            "get_stats",
            json!({"ref": {"table": table}, "columns": ["id", "category", "maybe"]}),
        )
        .await;
        assert_eq!(stats["row_count"], 20_000, "{table}: {stats}");
        assert_eq!(stats["row_count_exact"], false, "{stats}");
        assert_eq!(stats["sampled"], true, "{stats}");
        let note = stats["note"].as_str().unwrap();
        assert!(note.contains("estimate") && note.contains("TABLESAMPLE SYSTEM"), "{stats}");
        let sampled = stats["sample_rows"].as_u64().unwrap();
        assert!((1..10_000).contains(&sampled), "{table}: about 500 rows, not all: {stats}");
        let columns = &stats["columns"];
        assert!(columns["category"]["ndv"].as_u64().unwrap() <= 10, "{stats}");
        assert_eq!(columns["id"]["ndv"], sampled, "{stats}");
        let null_rate = columns["maybe"]["null_rate"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&null_rate), "{stats}");
        assert_eq!(columns["id"]["null_rate"], 0.0, "{stats}");
        let low: i64 = columns["id"]["min"].as_str().unwrap().parse().unwrap();
        let high: i64 = columns["id"]["max"].as_str().unwrap().parse().unwrap();
        assert!(1 <= low && low <= high && high <= 20_000, "{stats}");
    }
    // Below the threshold, counted exactly.
    let (small, _) = ok(&client, "get_stats", json!({"ref": {"table": "small"}})).await;
    assert_eq!(small["row_count"], 500);
    assert_eq!(small["row_count_exact"], true);
    assert_eq!(small["sampled"], false);
    assert_eq!(small["columns"]["maybe"]["null_rate"], 0.25);
    assert_eq!(small["columns"]["category"]["ndv"], 10);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn sample_table_reads_the_first_rows_or_random_ones() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    sqlx::raw_sql("CREATE VIEW rock AS SELECT track_id, name FROM track WHERE genre_id = 1")
        .execute(&pool)
        .await
        .unwrap();
    large_table(&pool, "events", 20_000).await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;

    let (head, meta) =
        ok(&client, "sample_table", json!({"ref": {"table": "track"}, "limit": 5})).await;
    let expected: Vec<i32> =
        sqlx::query_scalar("SELECT track_id FROM track LIMIT 5").fetch_all(&pool).await.unwrap();
    let ids: Vec<Value> =
        head["rows"].as_array().unwrap().iter().map(|row| row[0].clone()).collect();
    assert_eq!(ids, expected.iter().map(|id| json!(id)).collect::<Vec<_>>());
    assert_eq!(head["row_count"], 5);
    assert_eq!(head["has_more"], false);
    assert_eq!(head["page_token"], Value::Null);
    assert_eq!(head["truncated"], false);
    assert!(head["source"].is_string());
    assert_eq!(head["schema"][0]["name"], "track_id");
    assert_eq!(head["schema"][0]["nullable"], false);
    assert_eq!(head["schema"][0]["hints"], json!({"semantic": "id"}));
    assert_eq!(head["schema"].as_array().unwrap().len(), 9);
    assert_eq!(meta["sample"], json!({"method": "head", "tablesample": false}));

    // The default limit is 100; a small table has fewer rows.
    let (default, _) = ok(&client, "sample_table", json!({"ref": {"table": "track"}})).await;
    assert_eq!(default["rows"].as_array().unwrap().len(), 100);
    let (genres, _) =
        ok(&client, "sample_table", json!({"ref": {"table": "genre"}, "method": "head"})).await;
    assert_eq!(genres["row_count"], 25);

    // Random rows of a small table: ORDER BY random() over the table.
    let (random, meta) = ok(
        &client,
        "sample_table",
        json!({"ref": {"table": "genre"}, "limit": 10, "method": "random"}),
    )
    .await;
    assert_eq!(random["rows"].as_array().unwrap().len(), 10);
    assert_eq!(meta["sample"], json!({"method": "random", "tablesample": false}));
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..5 {
        let (random, _) = ok(
            &client,
            "sample_table",
            json!({"ref": {"table": "genre"}, "limit": 3, "method": "random"}),
        )
        .await;
        seen.insert(random["rows"].to_string());
    }
    assert!(seen.len() > 1, "five random samples of three genres all alike: {seen:?}");

    // Random rows of a large table: TABLESAMPLE first.
    let (random, meta) = ok(
        &client,
        "sample_table",
        json!({"ref": {"table": "events"}, "limit": 10, "method": "random"}),
    )
    .await;
    assert_eq!(random["rows"].as_array().unwrap().len(), 10, "{random}");
    assert_eq!(meta["sample"]["method"], "random");
    assert_eq!(meta["sample"]["tablesample"], true, "{meta:?}");
    assert!(meta["sample"]["percent"].as_f64().unwrap() < 100.0, "{meta:?}");
    let (head, meta) =
        ok(&client, "sample_table", json!({"ref": {"table": "events"}, "limit": 10})).await;
    assert_eq!(head["rows"][0][0], 1);
    assert_eq!(meta["sample"]["tablesample"], false);

    // A view: no TABLESAMPLE.
    let (view, meta) = ok(
        &client,
        "sample_table",
        json!({"ref": {"table": "rock"}, "limit": 7, "method": "random"}),
    )
    .await;
    assert_eq!(view["rows"].as_array().unwrap().len(), 7);
    assert_eq!(meta["sample"], json!({"method": "random", "tablesample": false}));
    let (view, _) =
        ok(&client, "sample_table", json!({"ref": {"table": "rock"}, "limit": 2})).await;
    assert_eq!(view["schema"].as_array().unwrap().len(), 2);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn sample_table_refuses_limits_out_of_bounds_and_unknown_methods() {
    let database = samples::chinook().await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;
    for limit in [0, -3, 50_001] {
        let error =
            failure(&client, "sample_table", json!({"ref": {"table": "track"}, "limit": limit}))
                .await;
        assert_eq!(error["code"], "INVALID_INPUT", "{error}");
        assert!(error["message"].as_str().unwrap().contains("between 1 and 50000"), "{error}");
    }
    let (most, _) =
        ok(&client, "sample_table", json!({"ref": {"table": "track"}, "limit": 50_000})).await;
    assert_eq!(most["row_count"], 3503);
    let error =
        failure(&client, "sample_table", json!({"ref": {"table": "track"}, "method": "middle"}))
            .await;
    assert_eq!(error["code"], "INVALID_INPUT", "{error}");
    let error = failure(&client, "sample_table", json!({"table": "track"})).await;
    assert_eq!(error["code"], "INVALID_INPUT", "{error}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_metadata_tools_are_listed_as_idempotent_reads() {
    let database = samples::chinook().await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;
    let tools = client.list_all_tools().await.unwrap();
    for name in ["list_schemas", "list_tables", "get_table_schema", "get_stats", "sample_table"] {
        let tool = tools
            .iter()
            .find(|tool| tool.name.ends_with(name))
            .unwrap_or_else(|| panic!("{name} is not listed"));
        let annotations = tool.annotations.as_ref().unwrap();
        assert_eq!(annotations.read_only_hint, Some(true), "{name}");
        assert_eq!(annotations.idempotent_hint, Some(true), "{name}");
        assert!(tool.description.as_ref().unwrap().len() > 100, "{name}");
        let schema = serde_json::to_value(&*tool.input_schema).unwrap();
        if name != "list_schemas" && name != "list_tables" {
            assert!(schema["required"].as_array().unwrap().contains(&json!("ref")), "{schema}");
        }
    }
    client.cancel().await.unwrap();
}
