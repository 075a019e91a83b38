//! The `data` server's `query_sql` and `explain_sql` on Chinook through a real MCP client:
//! paging completeness (ties, NULLs, duplicates, joins, rows inserted between pages), page
//! tokens that are tampered with, expired or foreign, time windows, dialects, dry runs.

use std::collections::BTreeMap;

use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};

use crate::support::{OrcaSetup, call, samples};

type Client = RunningService<RoleClient, ()>;

fn structured(result: &rmcp::model::CallToolResult) -> Value {
    result.structured_content.clone().unwrap_or(Value::Null)
}

async fn query(client: &Client, arguments: Value) -> Value {
    let result = call(client, "query_sql", arguments.clone(), None).await.unwrap();
    let value = structured(&result);
    assert_eq!(result.is_error, Some(false), "{arguments} -> {value}");
    value
}

async fn query_error(client: &Client, arguments: Value) -> Value {
    let result = call(client, "query_sql", arguments.clone(), None).await.unwrap();
    assert_eq!(result.is_error, Some(true), "{arguments} should fail: {result:?}");
    structured(&result)["error"].clone()
}

/// Every page of `sql` at `page_size`, concatenated, with the number of pages.
async fn all_pages(
    client: &Client,
    sql: &str,
    page_size: usize,
    extra: Value,
) -> (Vec<Value>, usize) {
    let mut rows = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut arguments = json!({"sql": sql, "max_rows": page_size});
        if let Value::Object(extra) = &extra {
            for (key, value) in extra {
                arguments[key] = value.clone();
            }
        }
        if let Some(token) = &token {
            arguments["page_token"] = json!(token);
        }
        let page = query(client, arguments).await;
        pages += 1;
        let page_rows = page["rows"].as_array().unwrap();
        assert!(page_rows.len() <= page_size);
        rows.extend(page_rows.iter().cloned());
        assert!(page.get("has_more").is_some() && page.get("page_token").is_some(), "{page}");
        if page["has_more"] == false {
            assert!(page["page_token"].is_null());
            assert_eq!(page["row_count"], rows.len(), "the last page counts every row");
            break;
        }
        assert_eq!(page_rows.len(), page_size, "a page that is not the last is full");
        token = Some(page["page_token"].as_str().expect("a token when has_more").to_owned());
        assert!(pages < 10_000, "paging does not end");
    }
    (rows, pages)
}

fn multiset(rows: &[Value]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for row in rows {
        *counts.entry(row.to_string()).or_insert(0) += 1;
    }
    counts
}

/// The unpaged result, read through the same tool in one page.
async fn unpaged(client: &Client, sql: &str) -> Vec<Value> {
    let page = query(client, json!({"sql": sql, "max_rows": 50_000})).await;
    assert_eq!(page["has_more"], false);
    page["rows"].as_array().unwrap().clone()
}

#[tokio::test]
async fn pages_concatenated_equal_the_unpaged_result_without_duplicates_or_gaps() {
    let database = samples::chinook().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    // (query, the output column its ORDER BY sorts on)
    let cases: [(&str, Option<usize>); 8] = [
        // No ORDER BY: the primary key breaks every tie.
        ("SELECT track_id, name, composer FROM track", None),
        // Ties on genre.
        ("SELECT track_id, genre_id, name FROM track ORDER BY genre_id", Some(1)),
        // NULLs and ties in the sort key, both directions and null orders.
        ("SELECT composer, track_id FROM track ORDER BY composer", Some(0)),
        ("SELECT composer, track_id FROM track ORDER BY composer DESC NULLS LAST", Some(0)),
        ("SELECT composer, name FROM track ORDER BY 1 NULLS FIRST", Some(0)),
        // No key in the output and rows identical in every column.
        ("SELECT genre_id, media_type_id FROM track", None),
        // A join: every column breaks ties.
        (
            "SELECT a.name AS artist, al.title FROM album al JOIN artist a USING (artist_id) ORDER BY artist",
            Some(0),
        ),
        // A set operation with duplicates.
        (
            "SELECT media_type_id FROM track UNION ALL SELECT media_type_id FROM track ORDER BY media_type_id DESC",
            Some(0),
        ),
    ];
    for (sql, ordered) in cases {
        let expected = unpaged(&client, sql).await;
        // Small pages where the result is small, so that many page boundaries are crossed.
        let page_sizes: &[usize] = if expected.len() < 500 { &[7, 100] } else { &[250, 1000] };
        for &page_size in page_sizes {
            let (rows, pages) = all_pages(&client, sql, page_size, json!({})).await;
            assert_eq!(rows.len(), expected.len(), "{sql} at {page_size}");
            assert_eq!(multiset(&rows), multiset(&expected), "{sql} at {page_size}");
            assert_eq!(pages, expected.len().div_ceil(page_size).max(1), "{sql} at {page_size}");
            if let Some(column) = ordered {
                // The query's own order holds across page boundaries (PostgreSQL's text order
                // for strings, NULLs where the query puts them).
                let keys: Vec<&Value> = rows.iter().map(|row| &row[column]).collect();
                let expected_keys: Vec<&Value> = expected.iter().map(|row| &row[column]).collect();
                assert_eq!(keys, expected_keys, "{sql} at {page_size}: order of the sort key");
            }
        }
    }
    client.cancel().await.unwrap();
}

/// The rows of `sql` as the database itself orders them, read on the test's own connection
/// (integer and text columns only).
async fn database_rows(pool: &sqlx::PgPool, sql: &str) -> Vec<Value> {
    use sqlx::Row;
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql.to_owned())).fetch_all(pool).await.unwrap();
    rows.iter()
        .map(|row| {
            let cells: Vec<Value> = (0..row.columns().len())
                .map(|index| match row.try_get::<Option<i32>, _>(index) {
                    Ok(number) => json!(number),
                    Err(_) => match row.try_get::<Option<i64>, _>(index) {
                        Ok(number) => json!(number),
                        Err(_) => json!(row.try_get::<Option<String>, _>(index).unwrap()),
                    },
                })
                .collect();
            Value::Array(cells)
        })
        .collect()
}

/// Queries ordered by what they do not select are paged in their own order: the sort keys
/// travel with the pages as hidden columns, which no row, column or hint shows.
#[tokio::test]
async fn queries_ordered_by_what_they_do_not_select_are_paged_in_their_order() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    // (query, visible columns, the key whose order the pages keep when ties may come in any
    // order; `None`: the rows in exactly the database's order)
    type Key = fn(&Value) -> String;
    let lower_name: Key = |row| row[0].as_str().unwrap_or_default().to_lowercase();
    let cases: [(&str, usize, Option<Key>); 8] = [
        ("SELECT name FROM artist ORDER BY artist_id", 1, None),
        ("SELECT name FROM artist ORDER BY artist_id DESC", 1, None),
        ("SELECT name FROM artist ORDER BY lower(name) DESC", 1, Some(lower_name)),
        (
            "SELECT t.name, t.milliseconds FROM track t JOIN album a ON a.album_id = t.album_id \
             ORDER BY a.title, t.track_id",
            2,
            None,
        ),
        ("SELECT name FROM track ORDER BY composer NULLS FIRST, track_id", 1, None),
        ("SELECT name FROM track ORDER BY composer DESC, track_id DESC", 1, None),
        ("SELECT genre_id FROM track GROUP BY genre_id ORDER BY count(*) DESC, genre_id", 1, None),
        // A hidden key, then a visible one; rows tied on both are the same visible row.
        ("SELECT composer FROM track ORDER BY genre_id DESC, composer NULLS FIRST", 1, None),
    ];
    for (sql, width, key) in cases {
        let expected = database_rows(&pool, sql).await;
        let page_sizes: &[usize] = if expected.len() < 500 { &[7, 100] } else { &[250, 1000] };
        for &page_size in page_sizes {
            let (rows, pages) = all_pages(&client, sql, page_size, json!({})).await;
            assert_eq!(pages, expected.len().div_ceil(page_size).max(1), "{sql} at {page_size}");
            assert!(rows.iter().all(|row| row.as_array().unwrap().len() == width), "{sql}");
            match key {
                None => assert_eq!(rows, expected, "{sql} at {page_size}"),
                Some(key) => {
                    assert_eq!(multiset(&rows), multiset(&expected), "{sql} at {page_size}");
                    let keys: Vec<String> = rows.iter().map(key).collect();
                    let expected_keys: Vec<String> = expected.iter().map(key).collect();
                    assert_eq!(keys, expected_keys, "{sql} at {page_size}: order of the key");
                }
            }
        }
        let result =
            call(&client, "query_sql", json!({"sql": sql, "max_rows": 7}), None).await.unwrap();
        let value = structured(&result);
        assert_eq!(value["schema"].as_array().unwrap().len(), width, "{sql}: {value}");
        let meta = crate::support::meta_of(&result);
        assert_eq!(meta["paging"]["strategy"], "keyset", "{sql}: {meta:?}");
    }
    client.cancel().await.unwrap();
}

/// A hidden sort key is no column of the result: it has no hint, and its bytes count toward
/// no cap (1,000 bytes of ids, not of names).
#[tokio::test]
async fn a_hidden_sort_key_counts_toward_no_column_hint_or_byte_cap() {
    let database = samples::chinook().await;
    let setup = OrcaSetup::new(&database.url).with_config("sql:\n  max_result_bytes: 1000\n");
    let client = setup.stdio_client().await;
    let sql = "SELECT artist_id FROM artist ORDER BY name";
    let page = query(&client, json!({"sql": sql, "max_rows": 275})).await;
    let schema = page["schema"].as_array().unwrap();
    assert_eq!(schema.len(), 1, "{page}");
    assert_eq!(schema[0]["name"], "artist_id");
    assert_eq!(schema[0]["hints"], json!({"semantic": "id"}));
    let rows = page["rows"].as_array().unwrap();
    assert!(rows.len() > 150, "{} rows in 1,000 bytes", rows.len());
    assert!(serde_json::to_string(rows).unwrap().len() <= 1000);
    assert_eq!(page["has_more"], true);
    let token = page["page_token"].as_str().unwrap();
    let next = query(&client, json!({"sql": sql, "max_rows": 275, "page_token": token})).await;
    let next_rows = next["rows"].as_array().unwrap();
    assert!(!next_rows.is_empty() && next_rows.iter().all(|row| !rows.contains(row)));

    // An order that changes on every run is answered in one page and says why.
    let result = call(
        &client,
        "query_sql",
        json!({"sql": "SELECT name FROM artist ORDER BY random()", "max_rows": 7}),
        None,
    )
    .await
    .unwrap();
    assert_eq!(structured(&result)["has_more"], true);
    assert!(structured(&result)["page_token"].is_null());
    let paging = &crate::support::meta_of(&result)["paging"];
    assert_eq!(paging["strategy"], "none", "{paging}");
    assert!(paging["reason"].as_str().unwrap().contains("random()"), "{paging}");
    client.cancel().await.unwrap();
}

/// A caller with masked columns pages on hidden sort keys too, a masked one included: its
/// statement reads the masked relation, so the keys its tokens carry are masked values, and the
/// pages follow one another in the masked order.
#[tokio::test]
async fn a_masked_caller_is_paged_on_hidden_sort_keys_of_masked_values() {
    use sha2::{Digest, Sha256};
    let database = samples::chinook().await;
    let hash = |key: &str| hex::encode(Sha256::digest(key.as_bytes()));
    let setup = OrcaSetup::new(&database.url).with_config(&format!(
        "sql:\n  refuse_masked_sql: false\nmasking:\n  customers:\n    email: hash\nauth:\n  api_keys:\n    - name: masked\n      sha256: {}\n      role: analyst\n    - name: plain\n      sha256: {}\n      verbs: [read]\n  roles:\n    analyst:\n      verbs: [read]\n      masking: customers\n",
        hash("orca_test_masked_key"),
        hash("orca_test_plain_key"),
    ));
    let server = setup.http_server(&[]);
    for (key, sql) in [
        ("orca_test_plain_key", "SELECT first_name FROM customer ORDER BY customer_id"),
        ("orca_test_masked_key", "SELECT first_name FROM customer ORDER BY customer_id"),
        ("orca_test_masked_key", "SELECT first_name FROM customer ORDER BY email, customer_id"),
    ] {
        let client = server.client(Some(key)).await;
        let (rows, _) = all_pages(&client, sql, 7, json!({})).await;
        assert_eq!(rows.len(), 59, "{key} {sql}");
        let result =
            call(&client, "query_sql", json!({"sql": sql, "max_rows": 5}), None).await.unwrap();
        let paging = &crate::support::meta_of(&result)["paging"];
        assert_eq!(paging["strategy"], "keyset", "{key}: {paging}");
        let token = structured(&result)["page_token"].to_string();
        assert!(!token.contains("@"), "an address in a token: {token}");
        client.cancel().await.unwrap();
    }
    assert!(server.stop().success());
}

#[tokio::test]
async fn random_page_sizes_never_lose_or_repeat_a_row() {
    use rand::{Rng, SeedableRng};
    let database = samples::chinook().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let sql = "SELECT billing_country, total, invoice_id FROM invoice ORDER BY billing_country DESC, total";
    let expected = unpaged(&client, sql).await;
    let mut random = rand::rngs::StdRng::seed_from_u64(20261122);
    for _ in 0..6 {
        let page_size = random.random_range(1..=120);
        let (rows, _) = all_pages(&client, sql, page_size, json!({})).await;
        assert_eq!(rows, expected, "page size {page_size}");
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn rows_inserted_between_pages_neither_duplicate_nor_hide_the_rows_already_there() {
    let database = samples::chinook().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let pool = database.connect().await;
    let sql = "SELECT artist_id, name FROM artist ORDER BY name";
    let before = unpaged(&client, sql).await;
    let first = query(&client, json!({"sql": sql, "max_rows": 50})).await;
    let mut rows: Vec<Value> = first["rows"].as_array().unwrap().clone();
    // New rows before and after the first page's boundary, with ties on the sort key.
    sqlx::query(
        "INSERT INTO artist (artist_id, name) VALUES (9001, 'AAA first'), (9002, 'ZZZ last'), \
         (9003, 'Led Zeppelin'), (9004, 'Led Zeppelin')",
    )
    .execute(&pool)
    .await
    .unwrap();
    let mut token = first["page_token"].as_str().unwrap().to_owned();
    loop {
        let page = query(&client, json!({"sql": sql, "max_rows": 50, "page_token": token})).await;
        rows.extend(page["rows"].as_array().unwrap().iter().cloned());
        match page["page_token"].as_str() {
            Some(next) => token = next.to_owned(),
            None => break,
        }
    }
    let seen = multiset(&rows);
    assert!(seen.values().all(|count| *count == 1), "no row twice");
    for row in &before {
        assert_eq!(seen.get(&row.to_string()), Some(&1), "{row} is missing");
    }
    // Rows after the boundary show up; the one before it does not.
    assert!(seen.contains_key(&json!([9002, "ZZZ last"]).to_string()));
    assert!(seen.contains_key(&json!([9003, "Led Zeppelin"]).to_string()));
    assert!(!seen.contains_key(&json!([9001, "AAA first"]).to_string()));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn tampered_expired_and_foreign_page_tokens_are_refused() {
    let database = samples::chinook().await;
    let setup =
        OrcaSetup::new(&database.url).with_config("sql:\n  page_token_lifetime_seconds: 6\n");
    let client = setup.stdio_client().await;
    let sql = "SELECT track_id FROM track";
    let first = query(&client, json!({"sql": sql, "max_rows": 10})).await;
    let token = first["page_token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("orca_pt_"));
    // The same token continues the same query.
    let second = query(&client, json!({"sql": sql, "max_rows": 10, "page_token": token})).await;
    assert_eq!(second["rows"][0], json!([11]));

    let mut tampered = token.clone().into_bytes();
    let position = 12;
    tampered[position] = if tampered[position] == b'x' { b'y' } else { b'x' };
    let tampered = String::from_utf8(tampered).unwrap();
    for (arguments, expected) in [
        (json!({"sql": sql, "max_rows": 10, "page_token": tampered}), "altered"),
        (json!({"sql": sql, "max_rows": 10, "page_token": "orca_pt_bm90IGEgdG9rZW4.AAAA"}), ""),
        (
            json!({"sql": "SELECT track_id FROM track WHERE track_id > 0", "max_rows": 10, "page_token": token}),
            "another query",
        ),
        (json!({"sql": sql, "max_rows": 11, "page_token": token}), "another query"),
    ] {
        let error = query_error(&client, arguments).await;
        assert_eq!(error["code"], "INVALID_INPUT", "{error}");
        assert!(error["message"].as_str().unwrap().contains(expected), "{error}");
        assert!(error["trace_id"].is_string());
    }
    // The lifetime leaves room for the checks above on a loaded machine; the token is then
    // waited out.
    tokio::time::sleep(std::time::Duration::from_millis(7100)).await;
    let error =
        query_error(&client, json!({"sql": sql, "max_rows": 10, "page_token": token})).await;
    assert_eq!(error["code"], "INVALID_INPUT");
    assert!(error["message"].as_str().unwrap().contains("expired"), "{error}");
    client.cancel().await.unwrap();

    // A token made by an orca with another secret is refused too.
    let other = OrcaSetup::new(&database.url);
    let other_client = other.stdio_client().await;
    let fresh = query(&other_client, json!({"sql": sql, "max_rows": 10})).await;
    let foreign = fresh["page_token"].as_str().unwrap().to_owned();
    let again = setup.stdio_client().await;
    let error =
        query_error(&again, json!({"sql": sql, "max_rows": 10, "page_token": foreign})).await;
    assert!(error["message"].as_str().unwrap().contains("altered or not issued"), "{error}");
    other_client.cancel().await.unwrap();
    again.cancel().await.unwrap();
}

#[tokio::test]
async fn time_windows_filter_a_named_or_detected_column() {
    let database = samples::chinook().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let sql = "SELECT invoice_id, invoice_date, total FROM invoice";
    let page = query(
        &client,
        json!({"sql": sql, "time_range": {"from": "2022-01-01T00:00:00Z", "to": "2022-02-01T00:00:00Z"}}),
    )
    .await;
    let rows = page["rows"].as_array().unwrap();
    assert!(!rows.is_empty());
    for row in rows {
        let date = row[1].as_str().unwrap();
        assert!(date.starts_with("2022-01"), "{row}");
    }
    let result = call(
        &client,
        "query_sql",
        json!({"sql": sql, "time_range": {"from": "2022-01-01T00:00:00Z", "to": "2022-02-01T00:00:00Z", "column": "invoice_date"}}),
        None,
    )
    .await
    .unwrap();
    let meta = crate::support::meta_of(&result);
    assert_eq!(meta["time_range"]["column"], "invoice_date");
    assert_eq!(structured(&result)["rows"], page["rows"]);
    // Relative windows: a default window back from now, and `now`-based bounds.
    let everything = query(
        &client,
        json!({"sql": sql, "max_rows": 50_000, "time_range": {"default_window": "P36500D"}}),
    )
    .await;
    assert_eq!(everything["row_count"], 412);
    let none =
        query(&client, json!({"sql": sql, "time_range": {"from": "now-1h", "to": "now"}})).await;
    assert_eq!(none["row_count"], 0);
    let error =
        query_error(&client, json!({"sql": sql, "time_range": {"from": "last tuesday"}})).await;
    assert!(error["message"].as_str().unwrap().starts_with("time_range:"), "{error}");
    let error = query_error(
        &client,
        json!({"sql": "SELECT name FROM artist", "time_range": {"from": "2022-01-01T00:00:00Z"}}),
    )
    .await;
    assert!(error["message"].as_str().unwrap().contains("no timestamp or date column"), "{error}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn dialects_limits_writes_and_dry_runs_are_checked() {
    let database = samples::chinook().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let error = query_error(&client, json!({"sql": "SELECT 1", "dialect": "mssql"})).await;
    assert_eq!(error["code"], "INVALID_INPUT");
    assert!(error["message"].as_str().unwrap().contains("postgres, ansi"), "{error}");
    query(&client, json!({"sql": "SELECT 1 AS one", "dialect": "ansi"})).await;
    let error = query_error(&client, json!({"sql": "SELECT 1", "max_rows": 50_001})).await;
    assert!(error["message"].as_str().unwrap().contains("50000"), "{error}");
    let error = query_error(&client, json!({"sql": "DELETE FROM artist"})).await;
    assert!(error["message"].as_str().unwrap().contains("reads only"), "{error}");
    assert!(error["hint"].as_str().unwrap().contains("execute_sql"), "{error}");

    // Semantic hints from names, types and the values of the page.
    let customers = query(
        &client,
        json!({"sql": "SELECT customer_id, email, phone, first_name FROM customer"}),
    )
    .await;
    let hints: Vec<&Value> =
        customers["schema"].as_array().unwrap().iter().map(|column| &column["hints"]).collect();
    assert_eq!(
        hints,
        [
            &json!({"semantic": "id"}),
            &json!({"semantic": "email"}),
            &json!({"semantic": "phone"}),
            &json!({})
        ]
    );

    let default = query(&client, json!({"sql": "SELECT track_id FROM track"})).await;
    assert_eq!(default["rows"].as_array().unwrap().len(), 1000, "default_max_rows");
    assert_eq!(default["has_more"], true);
    assert_eq!(default["row_count"], Value::Null);

    let dry =
        query(&client, json!({"sql": "SELECT * FROM track WHERE genre_id = 1", "dry_run": true}))
            .await;
    assert_eq!(dry["dry_run"], true);
    assert!(dry["estimated_rows"].as_f64().unwrap() > 0.0, "{dry}");
    assert!(dry.get("rows").is_none(), "a dry run returns no rows");

    // A query with its own LIMIT is answered, but cannot be continued.
    let result = call(
        &client,
        "query_sql",
        json!({"sql": "SELECT track_id FROM track LIMIT 20", "max_rows": 5}),
        None,
    )
    .await
    .unwrap();
    let value = structured(&result);
    assert_eq!(value["has_more"], true);
    assert!(value["page_token"].is_null());
    assert_eq!(crate::support::meta_of(&result)["paging"]["strategy"], "none");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn explain_sql_gives_text_json_and_analyze_for_reads_only() {
    let database = samples::chinook().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let sql = "SELECT * FROM track WHERE genre_id = 1";
    let text = structured(&call(&client, "explain_sql", json!({"sql": sql}), None).await.unwrap());
    assert_eq!(text["format"], "text");
    assert!(text["explain"].as_str().unwrap().contains("on track"), "{text}");
    assert!(
        text["estimated_rows"].as_f64().unwrap() > 0.0
            && text["estimated_cost"].as_f64().unwrap() > 0.0
    );
    let plan = structured(
        &call(&client, "explain_sql", json!({"sql": sql, "format": "json"}), None).await.unwrap(),
    );
    assert!(plan["explain"][0]["Plan"]["Node Type"].is_string(), "{plan}");
    let analyzed = structured(
        &call(&client, "explain_sql", json!({"sql": sql, "analyze": true}), None).await.unwrap(),
    );
    assert!(analyzed["explain"].as_str().unwrap().contains("actual time"), "{analyzed}");
    let refused =
        call(&client, "explain_sql", json!({"sql": "DELETE FROM track", "analyze": true}), None)
            .await
            .unwrap();
    assert_eq!(refused.is_error, Some(true));
    client.cancel().await.unwrap();
}

/// A Substrait plan: rock tracks (genre 1) counted per album, most first, top 5.
fn rock_albums_plan() -> Value {
    let field = |index: u32| json!({"selection": {"directReference": {"structField": {"field": index}}, "rootReference": {}}});
    json!({
        "extensionUris": [{"extensionUriAnchor": 1, "uri": "https://github.com/substrait-io/substrait/blob/main/extensions/functions_comparison.yaml"}],
        "extensions": [
            {"extensionFunction": {"extensionUriReference": 1, "functionAnchor": 1, "name": "equal:any_any"}},
            {"extensionFunction": {"extensionUriReference": 1, "functionAnchor": 2, "name": "count"}}
        ],
        "relations": [{"root": {
            "names": ["album_id", "tracks"],
            "input": {"fetch": {"count": "5", "input": {"sort": {
                "sorts": [
                    {"expr": field(1), "direction": "SORT_DIRECTION_DESC_NULLS_LAST"},
                    {"expr": field(0), "direction": "SORT_DIRECTION_ASC_NULLS_LAST"}
                ],
                "input": {"aggregate": {
                    "groupings": [{"groupingExpressions": [field(2)]}],
                    "measures": [{"measure": {"functionReference": 2, "arguments": [], "outputType": {"i64": {}}}}],
                    "input": {"filter": {
                        "condition": {"scalarFunction": {"functionReference": 1, "outputType": {"bool": {}}, "arguments": [
                            {"value": field(3)}, {"value": {"literal": {"i32": 1}}}
                        ]}},
                        "input": {"read": {
                            "namedTable": {"names": ["public", "track"]},
                            "baseSchema": {"names": ["track_id", "name", "album_id", "genre_id"],
                                "struct": {"types": [{"i32": {}}, {"string": {}}, {"i32": {}}, {"i32": {}}]}}
                        }}
                    }}
                }}
            }}}}
        }}]
    })
}

#[tokio::test]
async fn query_plan_runs_a_substrait_plan_and_names_what_it_cannot_run() {
    let database = samples::chinook().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let result =
        call(&client, "query_plan", json!({"substrait": rock_albums_plan()}), None).await.unwrap();
    let value = structured(&result);
    assert_eq!(result.is_error, Some(false), "{value}");
    let expected = query(
        &client,
        json!({"sql": "SELECT album_id, count(*) AS tracks FROM track WHERE genre_id = 1 GROUP BY album_id ORDER BY tracks DESC, album_id LIMIT 5"}),
    )
    .await;
    assert_eq!(value["rows"], expected["rows"]);
    assert_eq!(value["schema"][1]["name"], "tracks");
    let sql = crate::support::meta_of(&result)["sql"].as_str().unwrap().to_owned();
    assert!(sql.contains("GROUP BY"), "{sql}");

    let mut join = rock_albums_plan();
    join["relations"][0]["root"]["input"] = json!({"join": {"type": "JOIN_TYPE_INNER"}});
    let refused = call(&client, "query_plan", json!({"substrait": join}), None).await.unwrap();
    let error = structured(&refused)["error"].clone();
    assert_eq!(error["code"], "INVALID_INPUT");
    assert!(error["message"].as_str().unwrap().contains("join"), "{error}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn materialize_sql_and_create_view_store_a_read_in_one_transaction() {
    let database = samples::chinook().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let pool = database.connect().await;
    let sql = "SELECT track_id, name FROM track WHERE genre_id = 1";
    let target = json!({"schema": "public", "table": "rock_tracks"});
    let created = structured(
        &call(&client, "materialize_sql", json!({"sql": sql, "target": target}), None)
            .await
            .unwrap(),
    );
    assert_eq!(created["status"], "ok", "{created}");
    assert_eq!(created["affected_rows"], 1297);
    assert_eq!(created["target"]["table"], "rock_tracks");
    assert!(created["duration_ms"].is_u64());
    let again = call(&client, "materialize_sql", json!({"sql": sql, "target": target}), None)
        .await
        .unwrap();
    assert_eq!(structured(&again)["error"]["code"], "INVALID_INPUT", "{again:?}");
    let appended = structured(
        &call(
            &client,
            "materialize_sql",
            json!({"sql": sql, "target": target, "mode": "append"}),
            None,
        )
        .await
        .unwrap(),
    );
    assert_eq!(appended["affected_rows"], 1297);
    let count: i64 =
        sqlx::query_scalar("SELECT count(*) FROM rock_tracks").fetch_one(&pool).await.unwrap();
    assert_eq!(count, 2594);
    call(
        &client,
        "materialize_sql",
        json!({"sql": sql, "target": target, "mode": "replace"}),
        None,
    )
    .await
    .unwrap();
    let count: i64 =
        sqlx::query_scalar("SELECT count(*) FROM rock_tracks").fetch_one(&pool).await.unwrap();
    assert_eq!(count, 1297);
    let missing = call(
        &client,
        "materialize_sql",
        json!({"sql": sql, "target": {"table": "no_such_table"}, "mode": "append"}),
        None,
    )
    .await
    .unwrap();
    assert_eq!(structured(&missing)["error"]["code"], "NOT_FOUND");

    let view = structured(
        &call(&client, "create_view", json!({"sql": "SELECT name FROM artist WHERE name LIKE 'A%'", "name": {"table": "a_artists"}}), None)
            .await
            .unwrap(),
    );
    assert_eq!(view["view"]["schema"], "public", "{view}");
    let rows = query(&client, json!({"sql": "SELECT count(*) AS n FROM a_artists"})).await;
    assert!(rows["rows"][0][0].as_i64().unwrap() > 0);

    // Only pure reads, never into orca's schema or a system schema.
    for (arguments, expected) in [
        (json!({"sql": "DELETE FROM artist RETURNING *", "target": {"table": "x"}}), "reads only"),
        (json!({"sql": "SELECT nextval('x')", "target": {"table": "x"}}), "not allowed"),
        (json!({"sql": "SELECT 1", "target": {"schema": "orca", "table": "x"}}), "orca"),
        (
            json!({"sql": "SELECT 1", "target": {"schema": "pg_catalog", "table": "x"}}),
            "PostgreSQL",
        ),
    ] {
        let result = call(&client, "materialize_sql", arguments.clone(), None).await.unwrap();
        let error = structured(&result)["error"].clone();
        assert_eq!(error["code"], "INVALID_INPUT", "{arguments}: {error}");
        assert!(error["message"].as_str().unwrap().contains(expected), "{arguments}: {error}");
    }
    client.cancel().await.unwrap();

    // Absent in read-only mode.
    let read_only = OrcaSetup::new(&database.url).with_config("read_only: true\n");
    let client = read_only.stdio_client().await;
    let names = crate::support::tool_names(&client).await;
    assert!(
        !names.contains(&"materialize_sql".to_owned())
            && !names.contains(&"create_view".to_owned())
    );
    assert!(names.contains(&"query_sql".to_owned()));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_four_prompts_are_listed_filled_and_pointed_to_by_query_sql() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    sqlx::query("ANALYZE track").execute(&pool).await.unwrap();
    let setup = OrcaSetup::new(&database.url).with_config("data:\n  exact_count_max_rows: 1000\n");
    let client = setup.stdio_client().await;
    let prompts = client.list_all_prompts().await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|prompt| prompt.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "ask_for_disambiguation",
            "ask_for_time_window",
            "ask_for_sensitive_columns_ack",
            "ask_for_missing_keys_or_joins"
        ]
    );
    let mut arguments = serde_json::Map::new();
    arguments.insert("left".into(), json!("artist"));
    arguments.insert("right".into(), json!("genre"));
    let prompt = client
        .get_prompt(
            rmcp::model::GetPromptRequestParams::new("ask_for_missing_keys_or_joins")
                .with_arguments(arguments),
        )
        .await
        .unwrap();
    let text = serde_json::to_value(&prompt.messages[0]).unwrap().to_string();
    assert!(text.contains("No join key found between artist and genre."), "{text}");
    let missing = client
        .get_prompt(rmcp::model::GetPromptRequestParams::new("ask_for_time_window"))
        .await
        .unwrap_err()
        .to_string();
    assert!(missing.contains("table"), "{missing}");

    let advice = |result: &rmcp::model::CallToolResult| {
        crate::support::meta_of(result)
            .get("prompts")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let sensitive =
        call(&client, "query_sql", json!({"sql": "SELECT first_name, email FROM customer"}), None)
            .await
            .unwrap();
    assert_eq!(advice(&sensitive)[0]["name"], "ask_for_sensitive_columns_ack");
    assert_eq!(advice(&sensitive)[0]["arguments"]["cols"], "first_name, email");
    let cross = call(
        &client,
        "query_sql",
        json!({"sql": "SELECT a.name, g.name FROM artist a, genre g", "max_rows": 5}),
        None,
    )
    .await
    .unwrap();
    assert!(
        advice(&cross).iter().any(|prompt| prompt["name"] == "ask_for_missing_keys_or_joins"),
        "{:?}",
        advice(&cross)
    );
    let joined = call(&client, "query_sql", json!({"sql": "SELECT a.name, al.title FROM artist a JOIN album al USING (artist_id)", "max_rows": 5}), None)
        .await
        .unwrap();
    assert!(advice(&joined).is_empty(), "{:?}", advice(&joined));
    let large = call(
        &client,
        "query_sql",
        json!({"sql": "SELECT track_id FROM track", "max_rows": 5}),
        None,
    )
    .await
    .unwrap();
    assert_eq!(advice(&large)[0]["name"], "ask_for_time_window", "{:?}", advice(&large));
    client.cancel().await.unwrap();
}

async fn read_json(client: &Client, uri: &str) -> Value {
    let read = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(uri))
        .await
        .unwrap_or_else(|error| panic!("{uri}: {error}"));
    let contents = serde_json::to_value(&read.contents[0]).unwrap();
    assert_eq!(contents["uri"], uri);
    assert_eq!(contents["mimeType"], "application/json");
    serde_json::from_str(contents["text"].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn the_res_resources_describe_catalogs_tables_samples_and_lineage() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let resources = client.list_all_resources().await.unwrap();
    assert!(resources.iter().any(|resource| resource.uri == "res://catalogs"));
    let templates = client.list_all_resource_templates().await.unwrap();
    let patterns: Vec<&str> =
        templates.iter().map(|template| template.uri_template.as_str()).collect();
    for expected in [
        "res://schemas/{catalog}",
        "res://tables/{catalog}/{schema}",
        "res://table/{catalog}/{schema}/{table}",
        "res://samples/{catalog}/{schema}/{table}",
        "res://lineage/{catalog}/{schema}/{table}",
    ] {
        assert!(patterns.contains(&expected), "{expected} in {patterns:?}");
    }
    let catalogs = read_json(&client, "res://catalogs").await;
    let catalog = catalogs["items"][0]["name"].as_str().unwrap().to_owned();
    assert!(catalogs["items"][0]["etag"].is_string());
    let schemas = read_json(&client, &format!("res://schemas/{catalog}")).await;
    assert_eq!(schemas["items"][0]["schema"], "public");
    let tables =
        read_json(&client, &format!("res://tables/{catalog}/public?pattern=in*&limit=5")).await;
    let names: Vec<&str> = tables["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["table"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["invoice", "invoice_line"]);

    let uri = format!("res://table/{catalog}/public/track");
    let track = read_json(&client, &uri).await;
    assert_eq!(track["table"]["type"], "TABLE");
    assert_eq!(track["constraints"]["primary_key"], json!(["track_id"]));
    assert!(
        track["constraints"]["foreign_keys"]
            .as_array()
            .unwrap()
            .iter()
            .any(|key| key["ref"]["table"] == "genre")
    );
    assert!(track["stats"]["size_bytes"].as_i64().unwrap() > 0);
    // The etag holds while nothing changes, and changes with the statistics or the definition.
    // The table grows by 100 rows before ANALYZE, so its statistics change for certain (an
    // autovacuum may already have analyzed the unchanged table, and then ANALYZE alone
    // would rightly change nothing).
    let etag = track["etag"].clone();
    assert_eq!(read_json(&client, &uri).await["etag"], etag);
    sqlx::query(
        "INSERT INTO track SELECT track_id + 100000, name, album_id, media_type_id, genre_id, \
         composer, milliseconds, bytes, unit_price FROM track WHERE track_id <= 100",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("ANALYZE track").execute(&pool).await.unwrap();
    let analyzed = read_json(&client, &uri).await["etag"].clone();
    assert_ne!(analyzed, etag, "statistics changed");
    call(
        &client,
        "materialize_sql",
        json!({"sql": "SELECT 1 AS x", "target": {"table": "unrelated"}}),
        None,
    )
    .await
    .unwrap();
    assert_eq!(
        read_json(&client, &uri).await["etag"],
        analyzed,
        "another table changed, not this one"
    );

    let sample =
        read_json(&client, &format!("res://samples/{catalog}/public/track?method=head&limit=3"))
            .await;
    assert_eq!(sample["sample"]["rows"].as_array().unwrap().len(), 3);
    let lineage = read_json(&client, &format!("res://lineage/{catalog}/public/track")).await;
    let upstream: Vec<&str> = lineage["upstream"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["table"].as_str().unwrap())
        .collect();
    let downstream: Vec<&str> = lineage["downstream"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["table"].as_str().unwrap())
        .collect();
    for table in ["album", "genre", "media_type"] {
        assert!(upstream.contains(&table), "{upstream:?}");
    }
    for table in ["invoice_line", "playlist_track"] {
        assert!(downstream.contains(&table), "{downstream:?}");
    }
    // A view depends on what it reads.
    call(
        &client,
        "create_view",
        json!({"sql": "SELECT name FROM track", "name": {"table": "track_names"}}),
        None,
    )
    .await
    .unwrap();
    let lineage = read_json(&client, &format!("res://lineage/{catalog}/public/track")).await;
    assert!(
        lineage["downstream"].as_array().unwrap().iter().any(|t| t["table"] == "track_names"),
        "{lineage}"
    );
    let view = read_json(&client, &format!("res://lineage/{catalog}/public/track_names")).await;
    assert_eq!(view["upstream"][0]["table"], "track");

    let capabilities = read_json(&client, "res://capabilities").await;
    assert_eq!(capabilities["limits"]["default_max_rows"], 1000);
    assert_eq!(capabilities["dialects"], json!(["postgres", "ansi"]));
    assert_eq!(capabilities["features"]["materialization"], true);
    assert_eq!(capabilities["features"]["pii_masking"], false, "no masking policy is configured");
    assert!(
        client
            .read_resource(rmcp::model::ReadResourceRequestParams::new("res://nothing/here"))
            .await
            .is_err()
    );
    client.cancel().await.unwrap();
}
