//! The `data` server's profiling tools through a real MCP client, on Chinook and on tables
//! made for them: `profile_table` (histograms checked against the database, top values, null
//! rates, a large table profiled on a sample), `detect_pii` (Chinook's customers, and valid
//! identifiers next to look-alikes for every detector) and `preview_masked` (no original value
//! of a masked column anywhere in the output, stable hashes, unknown policies).

use std::collections::{BTreeMap, BTreeSet};

use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};

use crate::support::{OrcaSetup, TestDatabase, call, samples};

type Client = RunningService<RoleClient, ()>;

const CUSTOMERS_POLICY: &str = "masking:\n  customers:\n    email: keep_email_domain\n    phone: keep_last:4\n    last_name: hash\n    first_name: redact\n    company: 'null'\n";

fn structured(result: &rmcp::model::CallToolResult) -> Value {
    result.structured_content.clone().unwrap_or(Value::Null)
}

/// Call `name` and return its result, which must be a success.
async fn tool(client: &Client, name: &str, arguments: Value) -> Value {
    let result = call(client, name, arguments.clone(), None).await.unwrap();
    let value = structured(&result);
    assert_eq!(result.is_error, Some(false), "{name} {arguments} -> {value}");
    value
}

/// Call `name` and return its error object, which it must fail with.
async fn tool_error(client: &Client, name: &str, arguments: Value) -> Value {
    let result = call(client, name, arguments.clone(), None).await.unwrap();
    assert_eq!(result.is_error, Some(true), "{name} {arguments} should fail: {result:?}");
    structured(&result)["error"].clone()
}

async fn count(pool: &sqlx::PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned())).fetch_one(pool).await.unwrap()
}

fn keys(value: &Value) -> Vec<String> {
    value.as_object().unwrap().keys().cloned().collect()
}

fn bin_counts(distribution: &Value) -> Vec<i64> {
    distribution["bins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|bin| bin["count"].as_i64().unwrap())
        .collect()
}

#[tokio::test]
async fn profiling_track_gives_histograms_top_values_and_null_rates_that_match_the_data() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;
    let profile = tool(&client, "profile_table", json!({"ref": {"table": "track"}})).await;
    assert_eq!(keys(&profile), ["summary", "distributions", "topk", "sampled"], "{profile}");
    assert_eq!(profile["sampled"], false);
    let rows = count(&pool, "SELECT count(*) FROM track").await;
    assert_eq!(profile["summary"]["row_count"], rows);
    let columns = [
        "track_id",
        "name",
        "album_id",
        "media_type_id",
        "genre_id",
        "composer",
        "milliseconds",
        "bytes",
        "unit_price",
    ];
    for key in ["distributions", "topk"] {
        assert_eq!(keys(&profile[key]), columns, "{key}");
    }
    assert_eq!(keys(&profile["summary"]["null_rate"]), columns);

    // Null rates, as the database counts them.
    for column in columns {
        let nulls = count(&pool, &format!("SELECT count(*) - count({column}) FROM track")).await;
        let rate = profile["summary"]["null_rate"][column].as_f64().unwrap();
        assert!((rate - nulls as f64 / rows as f64).abs() < 1e-6, "{column}: {rate}");
    }
    assert!(profile["summary"]["null_rate"]["composer"].as_f64().unwrap() > 0.0);

    // Numeric columns: 20 equal-width bins from the minimum to the maximum whose counts add up
    // to the non-null values.
    for column in
        ["track_id", "album_id", "media_type_id", "genre_id", "milliseconds", "bytes", "unit_price"]
    {
        let distribution = &profile["distributions"][column];
        assert_eq!(distribution["type"], "numeric", "{column}: {distribution}");
        let bins = distribution["bins"].as_array().unwrap();
        assert_eq!(bins.len(), 20, "{column}");
        let non_null = count(&pool, &format!("SELECT count({column}) FROM track")).await;
        assert_eq!(bin_counts(distribution).iter().sum::<i64>(), non_null, "{column}");
        let (min, max): (f64, f64) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT min({column})::float8, max({column})::float8 FROM track"
        )))
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(bins[0]["lo"].as_f64(), Some(min), "{column}");
        assert_eq!(bins[19]["hi"].as_f64(), Some(max), "{column}");
        for pair in bins.windows(2) {
            assert_eq!(pair[0]["hi"], pair[1]["lo"], "{column}: contiguous bins");
            assert!(pair[0]["lo"].as_f64() < pair[1]["lo"].as_f64(), "{column}: ascending bins");
        }
    }

    // Each bin of milliseconds holds what width_bucket puts there.
    let expected: Vec<(i32, i64)> = sqlx::query_as(
        "SELECT least(width_bucket(milliseconds::float8, (SELECT min(milliseconds) FROM track)::float8, \
                (SELECT max(milliseconds) FROM track)::float8, 20), 20) AS bin, count(*) \
           FROM track GROUP BY bin ORDER BY bin",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut expected_counts = vec![0_i64; 20];
    for (bin, count) in expected {
        expected_counts[usize::try_from(bin - 1).unwrap()] = count;
    }
    assert_eq!(bin_counts(&profile["distributions"]["milliseconds"]), expected_counts);

    // Top values: the most frequent genre first, counts as the database has them.
    let genres: Vec<(String, i64)> = sqlx::query_as(
        "SELECT genre_id::text, count(*) FROM track WHERE genre_id IS NOT NULL \
          GROUP BY genre_id ORDER BY count(*) DESC, genre_id::text LIMIT 10",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let topk: Vec<(String, i64)> = profile["topk"]["genre_id"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| {
            (entry["value"].as_str().unwrap().to_owned(), entry["count"].as_i64().unwrap())
        })
        .collect();
    assert_eq!(topk, genres);

    // Text columns are categorical: their most frequent values, and the rest counted apart.
    let composer = &profile["distributions"]["composer"];
    assert_eq!(composer["type"], "categorical", "{composer}");
    let composers = count(&pool, "SELECT count(composer) FROM track").await;
    let in_bins: i64 = bin_counts(composer).iter().sum();
    assert_eq!(in_bins + composer["other_count"].as_i64().unwrap(), composers);
    for bin in composer["bins"].as_array().unwrap() {
        assert_eq!(bin["lo"], bin["hi"], "{bin}");
    }
    let counts = bin_counts(composer);
    assert!(counts.windows(2).all(|pair| pair[0] >= pair[1]), "{counts:?}");
    let top_composer: (String, i64) = sqlx::query_as(
        "SELECT composer, count(*) FROM track WHERE composer IS NOT NULL \
          GROUP BY composer ORDER BY count(*) DESC LIMIT 1",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(profile["topk"]["composer"][0]["value"], top_composer.0);
    assert_eq!(profile["topk"]["composer"][0]["count"], top_composer.1);
    assert_eq!(profile["topk"]["name"].as_array().unwrap().len(), 10);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn profiling_chosen_columns_with_fewer_bins_profiles_only_those() {
    let database = samples::chinook().await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;
    let profile = tool(
        &client,
        "profile_table",
        json!({"ref": {"schema": "public", "table": "track"}, "columns": ["milliseconds", "COMPOSER"], "bins": 5}),
    )
    .await;
    assert_eq!(keys(&profile["summary"]["null_rate"]), ["milliseconds", "composer"]);
    assert_eq!(profile["distributions"]["milliseconds"]["bins"].as_array().unwrap().len(), 5);
    assert_eq!(profile["distributions"]["composer"]["bins"].as_array().unwrap().len(), 5);
    assert_eq!(profile["topk"]["composer"].as_array().unwrap().len(), 10);

    let cases = [
        (json!({"ref": {"table": "track"}, "bins": 0}), "INVALID_INPUT", "bins"),
        (json!({"ref": {"table": "track"}, "bins": 201}), "INVALID_INPUT", "bins"),
        (json!({"ref": {"table": "track"}, "columns": ["nope"]}), "INVALID_INPUT", "nope"),
        (json!({"ref": {"table": "track"}, "columns": []}), "INVALID_INPUT", "columns"),
        (json!({"ref": {"table": "no_such_table"}}), "NOT_FOUND", "no_such_table"),
        (json!({"ref": {"table": "track"}, "sql": "SELECT 1"}), "INVALID_INPUT", "sql"),
    ];
    for (arguments, code, fragment) in cases {
        let error = tool_error(&client, "profile_table", arguments.clone()).await;
        assert_eq!(error["code"], code, "{arguments}: {error}");
        assert!(error["message"].as_str().unwrap().contains(fragment), "{arguments}: {error}");
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn profiling_odd_names_and_types_and_an_empty_table_works() {
    let database = TestDatabase::create().await;
    let pool = database.connect().await;
    sqlx::raw_sql(
        "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
         CREATE TABLE \"Odd Table\" (\"Weird \"\"Name\"\"\" text, flag boolean, doc jsonb, feeling mood,
             tags int[], price money, seen timestamptz, empty_col int, constant numeric,
             measure double precision, at_day date);
         INSERT INTO \"Odd Table\" VALUES
             ('a', true, '{\"k\": 1}', 'happy', '{1,2}', 1.50, '2024-01-01 00:00:00+00', NULL, 7, 'NaN', '2024-01-01'),
             ('a', false, '{\"k\": 1}', 'happy', '{3}', 2.50, '2024-01-02 12:00:00+00', NULL, 7, 'Infinity', '2024-01-03'),
             ('b', NULL, '[1, 2]', 'sad', NULL, 4.00, '2024-01-03 00:00:00+00', NULL, 7, 1.5, '2024-01-05'),
             (NULL, true, NULL, NULL, '{}', NULL, NULL, NULL, 7, 2.5, NULL);
         CREATE TABLE nothing (id int, label text);",
    )
    .execute(&pool)
    .await
    .unwrap();
    let client = OrcaSetup::new(&database.url).stdio_client().await;
    let profile =
        tool(&client, "profile_table", json!({"ref": {"table": "Odd Table"}, "bins": 4})).await;
    let distributions = &profile["distributions"];
    assert_eq!(profile["summary"]["row_count"], 4, "{profile}");
    assert_eq!(profile["summary"]["null_rate"]["empty_col"], 1.0);
    assert_eq!(profile["summary"]["null_rate"]["Weird \"Name\""], 0.25);
    assert_eq!(
        profile["topk"]["Weird \"Name\""],
        json!([{"value": "a", "count": 2}, {"value": "b", "count": 1}])
    );
    for column in ["Weird \"Name\"", "flag", "doc", "feeling", "tags"] {
        assert_eq!(distributions[column]["type"], "categorical", "{column}: {profile}");
    }
    assert_eq!(profile["topk"]["feeling"][0], json!({"value": "happy", "count": 2}));
    assert_eq!(profile["topk"]["flag"][0], json!({"value": "true", "count": 2}));
    assert_eq!(profile["topk"]["doc"][0], json!({"value": "{\"k\": 1}", "count": 2}));
    for (column, total) in
        [("price", 3), ("seen", 3), ("at_day", 3), ("constant", 4), ("measure", 2)]
    {
        assert_eq!(distributions[column]["type"], "numeric", "{column}: {profile}");
        assert_eq!(bin_counts(&distributions[column]).iter().sum::<i64>(), total, "{column}");
    }
    assert_eq!(distributions["price"]["bins"][0]["lo"], 1.5);
    assert_eq!(distributions["seen"]["bins"][0]["lo"], "2024-01-01T00:00:00Z");
    assert_eq!(distributions["seen"]["bins"][3]["hi"], "2024-01-03T00:00:00Z");
    assert_eq!(distributions["at_day"]["bins"][2]["lo"], "2024-01-03");
    assert_eq!(distributions["constant"]["bins"], json!([{"lo": 7.0, "hi": 7.0, "count": 4}]));
    assert_eq!(distributions["measure"]["bins"][0]["lo"], 1.5, "NaN and infinity are left out");
    assert_eq!(distributions["empty_col"], json!({"type": "numeric", "bins": []}));
    assert_eq!(profile["topk"]["empty_col"], json!([]));

    let empty = tool(&client, "profile_table", json!({"ref": {"table": "nothing"}})).await;
    assert_eq!(
        empty,
        json!({
            "summary": {"row_count": 0, "null_rate": {"id": 0.0, "label": 0.0}},
            "distributions": {
                "id": {"type": "numeric", "bins": []},
                "label": {"type": "categorical", "bins": [], "other_count": 0},
            },
            "topk": {"id": [], "label": []},
            "sampled": false,
        })
    );
    let pii = tool(&client, "detect_pii", json!({"ref": {"table": "Odd Table"}})).await;
    assert_eq!(pii["sampled_rows"], 4, "{pii}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn profiling_invoice_gives_a_date_histogram_with_iso_edges() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;
    let profile = tool(
        &client,
        "profile_table",
        json!({"ref": {"table": "invoice"}, "columns": ["invoice_date", "total", "billing_state"], "bins": 12}),
    )
    .await;
    let dates = &profile["distributions"]["invoice_date"];
    assert_eq!(dates["type"], "numeric", "{dates}");
    let bins = dates["bins"].as_array().unwrap();
    assert_eq!(bins.len(), 12);
    let (first, last): (String, String) = sqlx::query_as(
        "SELECT to_char(min(invoice_date), 'YYYY-MM-DD\"T\"HH24:MI:SS'), \
                to_char(max(invoice_date), 'YYYY-MM-DD\"T\"HH24:MI:SS') FROM invoice",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(bins[0]["lo"], first);
    assert_eq!(bins[11]["hi"], last);
    for pair in bins.windows(2) {
        let (lo, next) = (pair[0]["lo"].as_str().unwrap(), pair[1]["lo"].as_str().unwrap());
        assert!(lo < next && lo.len() == 19, "{lo} {next}");
    }
    let invoices = count(&pool, "SELECT count(*) FROM invoice").await;
    assert_eq!(bin_counts(dates).iter().sum::<i64>(), invoices);
    assert_eq!(bin_counts(&profile["distributions"]["total"]).iter().sum::<i64>(), invoices);
    let states = count(&pool, "SELECT count(billing_state) FROM invoice").await;
    let rate = profile["summary"]["null_rate"]["billing_state"].as_f64().unwrap();
    assert!((rate - (invoices - states) as f64 / invoices as f64).abs() < 1e-6);
    assert_eq!(profile["distributions"]["billing_state"]["type"], "categorical");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_table_larger_than_sample_rows_is_profiled_on_a_repeatable_sample() {
    let database = TestDatabase::create().await;
    let pool = database.connect().await;
    for statement in [
        "CREATE TABLE big AS SELECT g AS id, g % 7 AS bucket, \
                CASE WHEN g % 10 = 0 THEN NULL ELSE 'v' || (g % 3) END AS label, \
                date '2020-01-01' + (g % 366) AS day \
           FROM generate_series(1, 200000) AS g",
        "ANALYZE big",
        "CREATE VIEW big_view AS SELECT * FROM big",
    ] {
        sqlx::raw_sql(statement).execute(&pool).await.unwrap();
    }
    let client = OrcaSetup::new(&database.url)
        .with_config("data:\n  sample_rows: 10000\n")
        .stdio_client()
        .await;
    let profile = tool(&client, "profile_table", json!({"ref": {"table": "big"}})).await;
    assert_eq!(keys(&profile), ["summary", "distributions", "topk", "sampled", "sample_rows"]);
    assert_eq!(profile["sampled"], true);
    assert_eq!(profile["summary"]["row_count"], 200_000, "the planner's estimate after ANALYZE");
    let sample_rows = profile["sample_rows"].as_i64().unwrap();
    assert!((4_000..=25_000).contains(&sample_rows), "{sample_rows} rows for a 10000-row sample");
    for column in ["id", "bucket", "day"] {
        let sum: i64 = bin_counts(&profile["distributions"][column]).iter().sum();
        assert_eq!(sum, sample_rows, "{column}: counts describe the sample");
    }
    assert!(
        profile["distributions"]["day"]["bins"][0]["lo"].as_str().unwrap().starts_with("2020-01-0")
    );
    let label_nulls = profile["summary"]["null_rate"]["label"].as_f64().unwrap();
    assert!((label_nulls - 0.1).abs() < 0.03, "{label_nulls}");
    let labels: BTreeSet<&str> = profile["topk"]["label"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["value"].as_str().unwrap())
        .collect();
    assert_eq!(labels, BTreeSet::from(["v0", "v1", "v2"]));
    let again = tool(&client, "profile_table", json!({"ref": {"table": "big"}})).await;
    assert_eq!(again, profile, "the sample is the same on every call");

    // A view cannot be sampled by pages: its first sample_rows + 1 rows are read.
    let view = tool(
        &client,
        "profile_table",
        json!({"ref": {"table": "big_view"}, "columns": ["bucket"]}),
    )
    .await;
    assert_eq!(view["sampled"], true, "{view}");
    assert_eq!(view["sample_rows"], 10_001);
    assert_eq!(view["summary"]["row_count"], Value::Null);

    // PII detection reads the sample too.
    let pii = tool(&client, "detect_pii", json!({"ref": {"table": "big"}})).await;
    assert_eq!(pii["columns"], json!({}));
    assert_eq!(pii["sampled_rows"], 1000);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn detect_pii_finds_the_personal_columns_of_chinook_customers() {
    let database = samples::chinook().await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;
    let found = tool(&client, "detect_pii", json!({"ref": {"table": "customer"}})).await;
    assert_eq!(keys(&found), ["columns", "sampled_rows"], "{found}");
    assert_eq!(found["sampled_rows"], 59);
    let columns = &found["columns"];
    let expected = [
        ("email", "email"),
        ("phone", "phone"),
        ("fax", "phone"),
        ("first_name", "person_name"),
        ("last_name", "person_name"),
        ("address", "address"),
        ("city", "address"),
        ("postal_code", "address"),
    ];
    for (column, kind) in expected {
        assert_eq!(columns[column]["pii"], kind, "{column}: {columns}");
        let confidence = columns[column]["confidence"].as_f64().unwrap();
        assert!((0.5..=0.99).contains(&confidence), "{column}: {confidence}");
    }
    assert!(columns["email"]["confidence"].as_f64().unwrap() >= 0.9, "{columns}");
    for column in ["customer_id", "support_rep_id", "company", "country"] {
        assert!(columns.get(column).is_none(), "{column} is not personal: {columns}");
    }

    let only = tool(
        &client,
        "detect_pii",
        json!({"ref": {"table": "customer"}, "columns": ["email", "customer_id"], "locale": "en"}),
    )
    .await;
    assert_eq!(keys(&only["columns"]), ["email"]);
    let error =
        tool_error(&client, "detect_pii", json!({"ref": {"table": "customer"}, "locale": "fr"}))
            .await;
    assert_eq!(error["code"], "INVALID_INPUT", "{error}");
    client.cancel().await.unwrap();
}

/// A column of the `identifiers` table: name, type, eight values, and the kind `detect_pii`
/// finds under locale `auto` (`None`: none). Names say nothing, so the values decide; each
/// detector has a column of valid values and one of look-alikes that fail its checks.
type IdentifierColumn = (&'static str, &'static str, [&'static str; 8], Option<&'static str>);

const IDENTIFIER_COLUMNS: &[IdentifierColumn] = &[
    // Card numbers stored as numbers: valid (Luhn), then the same with the last digit changed.
    (
        "payment_ok",
        "bigint",
        [
            "4111111111111111",
            "5555555555554444",
            "4012888888881881",
            "5105105105105100",
            "4242424242424242",
            "6011111111111117",
            "5200828282828210",
            "4000056655665556",
        ],
        Some("credit_card"),
    ),
    (
        "payment_bad",
        "bigint",
        [
            "4111111111111112",
            "5555555555554445",
            "4012888888881882",
            "5105105105105101",
            "4242424242424243",
            "6011111111111118",
            "5200828282828211",
            "4000056655665557",
        ],
        None,
    ),
    // German and British IBANs, then with a wrong check digit.
    (
        "account_ok",
        "text",
        [
            "DE89 3704 0044 0532 0130 00",
            "GB82WEST12345698765432",
            "DE44500105175407324931",
            "GB33BUKB20201555555555",
            "DE89370400440532013000",
            "GB29NWBK60161331926819",
            "DE02120300000000202051",
            "GB94BARC10201530093459",
        ],
        Some("iban"),
    ),
    (
        "account_bad",
        "text",
        [
            "DE88 3704 0044 0532 0130 00",
            "GB83WEST12345698765432",
            "DE45500105175407324931",
            "GB34BUKB20201555555555",
            "DE89370400440532013001",
            "GB29NWBK60161331926818",
            "DE03120300000000202051",
            "GB95BARC10201530093459",
        ],
        None,
    ),
    // IPv4 and IPv6 addresses, then version numbers.
    (
        "host_ok",
        "text",
        [
            "192.168.1.20",
            "10.0.0.1",
            "2001:db8::1",
            "::1",
            "172.16.254.1",
            "8.8.8.8",
            "fe80::1ff:fe23:4567:890a",
            "203.0.113.7",
        ],
        Some("ip_address"),
    ),
    (
        "host_bad",
        "text",
        ["1.2.3", "4.10.2", "2.0", "1.2.3.4.5", "v1.2.3", "12.0.1-rc1", "3.11", "0.9.1"],
        None,
    ),
    // German phone numbers, national and international.
    (
        "contact",
        "text",
        [
            "030 901820",
            "0171 1234567",
            "+49 30 901820",
            "089 12345678",
            "0911 234567",
            "+49 171 1234567",
            "040 3456789",
            "0221 9876543",
        ],
        Some("phone"),
    ),
    // US social security numbers.
    (
        "ident",
        "text",
        [
            "123-45-6789",
            "078-05-1121",
            "219-09-9999",
            "457-55-5462",
            "536-22-1234",
            "123-12-1234",
            "234-56-7890",
            "345-67-8901",
        ],
        Some("national_id"),
    ),
    // Nothing personal.
    (
        "product_code",
        "text",
        [
            "PRD-00017",
            "PRD-00342",
            "SKU-A-1001",
            "SKU-B-2231",
            "X7-88-Q",
            "PRD-01001",
            "KIT-2024-B",
            "BOX-17",
        ],
        None,
    ),
];

#[tokio::test]
async fn detect_pii_tells_valid_identifiers_from_look_alikes() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let definitions: Vec<String> = IDENTIFIER_COLUMNS
        .iter()
        .map(|(name, data_type, _, _)| format!("{name} {data_type}"))
        .collect();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE identifiers ({})",
        definitions.join(", ")
    )))
    .execute(&pool)
    .await
    .unwrap();
    let casts: Vec<String> = IDENTIFIER_COLUMNS
        .iter()
        .map(|(name, data_type, _, _)| format!("{name}::{data_type}"))
        .collect();
    let arrays: Vec<String> =
        (1..=IDENTIFIER_COLUMNS.len()).map(|index| format!("${index}::text[]")).collect();
    let names: Vec<&str> = IDENTIFIER_COLUMNS.iter().map(|(name, _, _, _)| *name).collect();
    let insert = format!(
        "INSERT INTO identifiers SELECT {} FROM unnest({}) AS u({})",
        casts.join(", "),
        arrays.join(", "),
        names.join(", ")
    );
    let mut query = sqlx::query(sqlx::AssertSqlSafe(insert));
    for (_, _, values, _) in IDENTIFIER_COLUMNS {
        query = query.bind(values.to_vec());
    }
    query.execute(&pool).await.unwrap();

    let client = OrcaSetup::new(&database.url).stdio_client().await;
    let found = tool(&client, "detect_pii", json!({"ref": {"table": "identifiers"}})).await;
    assert_eq!(found["sampled_rows"], 8);
    for (name, _, _, kind) in IDENTIFIER_COLUMNS {
        let detection = &found["columns"][name];
        match kind {
            Some(kind) => {
                assert_eq!(detection["pii"], *kind, "{name}: {found}");
                assert!(detection["confidence"].as_f64().unwrap() >= 0.9, "{name}: {found}");
            }
            None => assert!(detection.is_null(), "{name} is not {found}"),
        }
    }

    // German conventions: the phone numbers still are, US social security numbers are not ids.
    let german =
        tool(&client, "detect_pii", json!({"ref": {"table": "identifiers"}, "locale": "de"})).await;
    assert_eq!(german["columns"]["contact"]["pii"], "phone", "{german}");
    assert!(german["columns"].get("ident").is_none(), "{german}");
    assert!(german["columns"].get("product_code").is_none(), "{german}");
    client.cancel().await.unwrap();
}

/// The masked rows of `customer` by customer id, as `preview_masked` returns them.
fn rows_by_id(preview: &Value) -> BTreeMap<i64, BTreeMap<String, Value>> {
    let names: Vec<String> = preview["schema"]
        .as_array()
        .unwrap()
        .iter()
        .map(|column| column["name"].as_str().unwrap().to_owned())
        .collect();
    preview["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let cells: BTreeMap<String, Value> =
                names.iter().cloned().zip(row.as_array().unwrap().iter().cloned()).collect();
            (cells["customer_id"].as_i64().unwrap(), cells)
        })
        .collect()
}

#[tokio::test]
async fn preview_masked_shows_no_original_value_of_a_masked_column() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let client = OrcaSetup::new(&database.url).with_config(CUSTOMERS_POLICY).stdio_client().await;
    let arguments = json!({"ref": {"table": "customer"}, "policy_id": "customers", "limit": 100});
    let preview = tool(&client, "preview_masked", arguments.clone()).await;
    assert_eq!(
        preview["policy_applied"],
        json!({
            "policy_id": "customers",
            "columns": ["first_name", "last_name", "company", "phone", "email"],
            "missing_columns": [],
        })
    );
    for key in ["schema", "rows", "row_count", "has_more", "page_token", "source", "truncated"] {
        assert!(preview.get(key).is_some(), "{key} in {preview}");
    }
    assert_eq!(preview["row_count"], 59);
    assert_eq!(preview["has_more"], false);

    type Original = (i32, String, String, Option<String>, Option<String>, String, Option<String>);
    let originals: Vec<Original> = sqlx::query_as(
        "SELECT customer_id, first_name, last_name, company, phone, email, city FROM customer ORDER BY customer_id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let masked = rows_by_id(&preview);
    assert_eq!(masked.len(), originals.len());

    // Every masked cell of the output, to search for originals.
    let masked_columns = ["first_name", "last_name", "company", "phone", "email"];
    let masked_text: Vec<String> = masked
        .values()
        .flat_map(|row| masked_columns.iter().map(|column| row[*column].to_string()))
        .collect();
    for (id, first_name, last_name, company, phone, email, city) in &originals {
        let row = &masked[&i64::from(*id)];
        let mut secrets = vec![first_name.clone(), last_name.clone(), email.clone()];
        secrets.extend(company.clone());
        secrets.extend(phone.clone());
        for secret in &secrets {
            assert!(
                !masked_text.iter().any(|cell| cell.contains(secret.as_str())),
                "{secret:?} appears in the masked output"
            );
        }
        assert_eq!(row["first_name"], "[REDACTED]");
        let hash = row["last_name"].as_str().unwrap();
        assert!(hash.starts_with("h:") && hash.len() == 18, "{hash}");
        assert_eq!(row["company"], Value::Null);
        let domain = email.rsplit_once('@').unwrap().1;
        assert_eq!(row["email"], format!("***@{domain}"));
        match phone {
            None => assert_eq!(row["phone"], Value::Null),
            Some(phone) => {
                let shown = row["phone"].as_str().unwrap();
                let length = phone.chars().count();
                assert_eq!(shown.chars().count(), length);
                let last: String = phone.chars().skip(length - 4).collect();
                assert_eq!(shown, format!("{}{last}", "*".repeat(length - 4)));
            }
        }
        // Columns outside the policy are as they are.
        assert_eq!(row["city"], city.clone().map_or(Value::Null, Value::from));
    }

    // Hashes are stable across calls, equal for equal values and different for different ones.
    let again = tool(&client, "preview_masked", arguments).await;
    assert_eq!(again["rows"], preview["rows"]);
    for (left_original, left) in originals.iter().zip(masked.values()) {
        for (right_original, right) in originals.iter().zip(masked.values()) {
            assert_eq!(
                left_original.2 == right_original.2,
                left["last_name"] == right["last_name"],
                "{} and {}",
                left_original.2,
                right_original.2
            );
        }
    }

    // The default limit is 50 rows, in primary-key order.
    let first = tool(
        &client,
        "preview_masked",
        json!({"ref": {"table": "customer"}, "policy_id": "customers"}),
    )
    .await;
    assert_eq!(first["rows"].as_array().unwrap().len(), 50);
    let ids: Vec<i64> = rows_by_id(&first).keys().copied().collect();
    assert_eq!(ids, (1..=50).collect::<Vec<i64>>());
    assert_eq!(first["rows"][0][0], 1);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn preview_masked_names_unknown_policies_and_columns_the_table_lacks() {
    let database = samples::chinook().await;
    let client = OrcaSetup::new(&database.url).with_config(CUSTOMERS_POLICY).stdio_client().await;
    let error = tool_error(
        &client,
        "preview_masked",
        json!({"ref": {"table": "customer"}, "policy_id": "employees"}),
    )
    .await;
    assert_eq!(error["code"], "NOT_FOUND", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("employees") && message.contains("customers"), "{error}");

    // A table without the policy's columns is shown as it is, and says what is missing.
    let genres = tool(
        &client,
        "preview_masked",
        json!({"ref": {"table": "genre"}, "policy_id": "customers", "limit": 3}),
    )
    .await;
    assert_eq!(genres["rows"], json!([[1, "Rock"], [2, "Jazz"], [3, "Metal"]]));
    assert_eq!(genres["policy_applied"]["columns"], json!([]));
    let missing: BTreeSet<&str> = genres["policy_applied"]["missing_columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|name| name.as_str().unwrap())
        .collect();
    assert_eq!(missing, BTreeSet::from(["company", "email", "first_name", "last_name", "phone"]));

    for limit in [0, 1001] {
        let error = tool_error(
            &client,
            "preview_masked",
            json!({"ref": {"table": "customer"}, "policy_id": "customers", "limit": limit}),
        )
        .await;
        assert_eq!(error["code"], "INVALID_INPUT", "{error}");
    }
    client.cancel().await.unwrap();

    // Without any policy configured, the hint shows how to write one.
    let unconfigured = OrcaSetup::new(&database.url).stdio_client().await;
    let error = tool_error(
        &unconfigured,
        "preview_masked",
        json!({"ref": {"table": "customer"}, "policy_id": "customers"}),
    )
    .await;
    assert_eq!(error["code"], "NOT_FOUND", "{error}");
    assert!(error["hint"].as_str().unwrap().contains("masking:"), "{error}");
    unconfigured.cancel().await.unwrap();
}
