//! `generate_schema` on Chinook and Pagila in its three formats (the DDL applied to an empty
//! database recreates the schema), and `format_results` on real `execute_sql` results: Markdown,
//! RFC 4180 CSV, JSON objects, statistics and charts with their PNG.

use base64::Engine;
use rmcp::model::CallToolResult;
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Map, Value, json};

use crate::support::{OrcaSetup, TestDatabase, call, meta_of, samples};

type Client = RunningService<RoleClient, ()>;

const CHINOOK_TABLES: [&str; 11] = [
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

fn structured(result: &CallToolResult) -> Value {
    result.structured_content.clone().unwrap_or(Value::Null)
}

/// Call `tool`, which must succeed.
async fn success(client: &Client, tool: &str, arguments: Value) -> CallToolResult {
    let result = call(client, tool, arguments.clone(), None).await.unwrap();
    assert_eq!(result.is_error, Some(false), "{tool} {arguments}: {}", structured(&result));
    result
}

/// `generate_schema` with `arguments`: the result and its `_meta`.
async fn schema(client: &Client, arguments: Value) -> (Value, Map<String, Value>) {
    let result = success(client, "generate_schema", arguments).await;
    (structured(&result), meta_of(&result))
}

/// The text `content` of a markdown or sql rendering.
async fn schema_text(client: &Client, format: &str, relationships: bool) -> String {
    let arguments = json!({"format": format, "include_relationships": relationships});
    let (value, _) = schema(client, arguments).await;
    assert_eq!(value["format"], format, "{value}");
    value["content"].as_str().unwrap_or_else(|| panic!("no content: {value}")).to_owned()
}

/// The relations of the json rendering.
async fn schema_relations(client: &Client, relationships: bool) -> Vec<Value> {
    let arguments = json!({"format": "json", "include_relationships": relationships});
    let (value, _) = schema(client, arguments).await;
    assert_eq!(value["format"], "json", "{value}");
    value["schema"]["relations"].as_array().unwrap_or_else(|| panic!("{value}")).clone()
}

fn relation<'a>(relations: &'a [Value], name: &str) -> &'a Value {
    relations
        .iter()
        .find(|relation| relation["name"] == name)
        .unwrap_or_else(|| panic!("no relation {name}"))
}

/// Relations without what differs between two databases of the same structure.
fn structure_of(relations: &[Value]) -> Vec<Value> {
    relations
        .iter()
        .map(|relation| {
            let mut relation = relation.clone();
            relation.as_object_mut().unwrap().remove("row_estimate");
            relation
        })
        .collect()
}

#[tokio::test]
async fn the_chinook_schema_in_markdown_names_every_table_and_relationship() {
    let database = samples::chinook().await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;
    let markdown = schema_text(&client, "markdown", true).await;
    for table in CHINOOK_TABLES {
        assert!(markdown.contains(&format!("### Table `public.{table}`")), "{table}:\n{markdown}");
    }
    for relationship in [
        "album.artist_id -> artist.artist_id",
        "track.album_id -> album.album_id",
        "invoice_line.invoice_id -> invoice.invoice_id",
        "employee.reports_to -> employee.employee_id",
        "playlist_track.track_id -> track.track_id",
    ] {
        assert!(markdown.contains(&format!("- {relationship}\n")), "{relationship}:\n{markdown}");
    }
    assert!(markdown.contains("| album_id | `integer` | no |  | PK |"), "{markdown}");
    assert!(markdown.contains("| artist_id | `integer` | no |  | FK |"), "{markdown}");
    assert!(markdown.contains("Primary key: `playlist_id, track_id`."), "{markdown}");

    let without = schema_text(&client, "markdown", false).await;
    assert!(!without.contains("## Relationships") && !without.contains(" -> "), "{without}");
    assert!(!without.contains("| FK |"), "{without}");
    for table in CHINOOK_TABLES {
        assert!(without.contains(&format!("### Table `public.{table}`")), "{table}");
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_chinook_schema_in_json_lists_eleven_tables_with_primary_keys() {
    let database = samples::chinook().await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;
    let (value, meta) = schema(&client, json!({"format": "json"})).await;
    assert_eq!(meta["tables_found"], 11);
    assert_eq!(meta["analysis"]["ran"], false, "{meta:?}");
    assert!(meta["generated_at"].as_str().is_some_and(|at| at.contains('T')), "{meta:?}");
    let schemas: Vec<&str> = value["schema"]["schemas"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(schemas, ["public"]);
    let relations = value["schema"]["relations"].as_array().unwrap();
    let names: Vec<&str> = relations.iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(names, CHINOOK_TABLES);
    let primary_keys = [
        ("album", json!(["album_id"])),
        ("invoice_line", json!(["invoice_line_id"])),
        ("playlist_track", json!(["playlist_id", "track_id"])),
    ];
    for relation in relations {
        assert_eq!(relation["kind"], "table", "{relation}");
        assert!(relation["primary_key"]["columns"].is_array(), "{relation}");
    }
    for (table, columns) in primary_keys {
        assert_eq!(relation(relations, table)["primary_key"]["columns"], columns, "{table}");
    }
    let album = relation(relations, "album");
    assert_eq!(
        album["foreign_keys"][0],
        json!({"name": "album_artist_id_fkey", "columns": ["artist_id"],
            "referenced_schema": "public", "referenced_table": "artist",
            "referenced_columns": ["artist_id"],
            "on_delete": "no_action", "on_update": "no_action"}),
        "{album}"
    );
    assert_eq!(
        album["columns"][1],
        json!({"name": "title", "type": "character varying(160)", "nullable": false})
    );

    let without = schema_relations(&client, false).await;
    assert_eq!(without.len(), 11);
    assert!(without.iter().all(|relation| relation.get("foreign_keys").is_none()), "{without:?}");
    assert!(without.iter().all(|relation| relation["primary_key"].is_object()));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_chinook_ddl_recreates_the_schema_in_an_empty_database() {
    let database = samples::chinook().await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;
    let ddl = schema_text(&client, "sql", true).await;
    for table in CHINOOK_TABLES {
        assert!(ddl.contains(&format!("CREATE TABLE public.{table} (")), "{table}:\n{ddl}");
    }
    assert!(ddl.contains("FOREIGN KEY (artist_id) REFERENCES public.artist (artist_id)"), "{ddl}");
    let without = schema_text(&client, "sql", false).await;
    assert!(!without.contains("FOREIGN KEY") && !without.contains("REFERENCES"), "{without}");
    assert!(without.contains("CREATE TABLE public.album ("), "{without}");
    let original = schema_relations(&client, true).await;
    client.cancel().await.unwrap();

    let cases = [
        ("with relationships", ddl, original.clone()),
        ("without", without, {
            let mut relations = original.clone();
            for relation in &mut relations {
                relation.as_object_mut().unwrap().remove("foreign_keys");
            }
            relations
        }),
    ];
    for (what, ddl, expected) in cases {
        let empty = TestDatabase::create().await;
        let pool = empty.connect().await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(ddl.clone()))
            .execute(&pool)
            .await
            .unwrap_or_else(|error| panic!("{what}: the DDL does not apply: {error}\n{ddl}"));
        pool.close().await;
        let copy = OrcaSetup::new(&empty.url).stdio_client().await;
        let recreated = schema_relations(&copy, true).await;
        assert_eq!(structure_of(&recreated), structure_of(&expected), "{what}");
        copy.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn the_schema_is_cached_until_a_refresh_is_asked_for() {
    let database = samples::chinook().await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;
    let cases = [
        (json!({}), false),
        (json!({"format": "json"}), true),
        (json!({"format": "sql", "include_relationships": false}), true),
        (json!({"refresh_cache": true}), false),
        (json!({"format": "markdown"}), true),
    ];
    let mut generated = Vec::new();
    for (arguments, cached) in cases {
        let (_, meta) = schema(&client, arguments.clone()).await;
        assert_eq!(meta["cached"], cached, "{arguments}: {meta:?}");
        assert_eq!(meta["tables_found"], 11, "{arguments}");
        generated.push(meta["generated_at"].as_str().unwrap().to_owned());
    }
    assert_eq!(generated[0], generated[1], "a cached schema keeps its time");
    assert_ne!(generated[2], generated[3], "a refresh reads the catalog again");
    assert_eq!(generated[3], generated[4]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn pagila_shows_partitions_views_enums_and_domains_but_never_orca() {
    let database = samples::pagila().await;
    let pool = database.connect().await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;
    let markdown = schema_text(&client, "markdown", true).await;
    let ddl = schema_text(&client, "sql", true).await;
    let (json_value, meta) = schema(&client, json!({"format": "json"})).await;
    let relations = json_value["schema"]["relations"].as_array().unwrap();
    let orca_tables: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_tables WHERE schemaname = 'orca'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(orca_tables > 0, "orca keeps its state in this database");

    let partitions: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
          WHERE i.inhparent = 'public.payment'::regclass ORDER BY 1",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(partitions.len() > 20, "{partitions:?}");
    assert!(markdown.contains("### Partitioned table `public.payment`"), "{markdown}");
    assert!(markdown.contains(&format!("Partitions ({}):", partitions.len())), "{markdown}");
    for partition in &partitions {
        assert!(markdown.contains(&format!("- `{partition}` `FOR VALUES")), "{partition}");
        assert!(
            ddl.contains(&format!("CREATE TABLE public.{partition} PARTITION OF public.payment")),
            "{partition}"
        );
        let entry = relation(relations, partition);
        assert_eq!(entry["partition_of"], json!({"schema": "public", "name": "payment"}));
    }

    let views: Vec<(String, String)> = sqlx::query_as(
        "SELECT viewname::text, 'view' FROM pg_views WHERE schemaname = 'public' \
         UNION ALL SELECT matviewname::text, 'materialized view' FROM pg_matviews \
          WHERE schemaname = 'public' ORDER BY 1",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(views.iter().any(|(name, _)| name == "rental_by_category"), "{views:?}");
    assert!(views.len() >= 7, "{views:?}");
    for (name, kind) in &views {
        let heading = if kind == "view" { "View" } else { "Materialized view" };
        assert!(markdown.contains(&format!("### {heading} `public.{name}`")), "{name}");
        assert!(
            ddl.contains(&format!("CREATE {} public.{name} AS", kind.to_uppercase())),
            "{name}"
        );
        assert_eq!(relation(relations, name)["kind"], kind.replace(' ', "_"), "{name}");
    }

    assert!(
        markdown.contains("- `public.mpaa_rating`: 'G', 'PG', 'PG-13', 'R', 'NC-17'"),
        "{markdown}"
    );
    assert!(markdown.contains("`public.year`"), "{markdown}");
    assert!(
        ddl.contains("CREATE TYPE public.mpaa_rating AS ENUM ('G', 'PG', 'PG-13', 'R', 'NC-17')"),
        "{ddl}"
    );
    assert!(ddl.contains("CREATE DOMAIN public.year AS integer"), "{ddl}");
    let enums = &json_value["schema"]["enums"];
    assert!(enums.as_array().unwrap().iter().any(|e| e["name"] == "mpaa_rating"), "{enums}");
    let domains = &json_value["schema"]["domains"];
    let year = domains.as_array().unwrap().iter().find(|d| d["name"] == "year").unwrap();
    assert_eq!(year["base_type"], "integer");
    assert!(year["check_constraints"][0]["definition"].as_str().unwrap().contains("1901"));

    for (what, text) in [("markdown", &markdown), ("sql", &ddl), ("json", &json_value.to_string())]
    {
        assert!(!text.contains("orca"), "{what} shows orca's own schema");
    }
    let tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
          WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'f')",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(meta["tables_found"], tables);
    client.cancel().await.unwrap();
}

/// `format_results` of `data` in `format`.
async fn format(client: &Client, data: &Value, format: &str) -> CallToolResult {
    success(client, "format_results", json!({"data": data, "format": format})).await
}

/// An `execute_sql` read, as the TabularResult it returns.
async fn read(client: &Client, sql: &str) -> Value {
    structured(&success(client, "execute_sql", json!({"sql": sql, "dry_run": false})).await)
}

const GENRE_TRACKS: &str = "SELECT g.name AS genre, count(*) AS tracks \
    FROM genre g JOIN track t USING (genre_id) GROUP BY g.name ORDER BY tracks DESC, genre";

#[tokio::test]
async fn a_read_result_formats_as_table_csv_json_and_summary() {
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;
    let expected: Vec<(String, i64)> = sqlx::query_as(GENRE_TRACKS).fetch_all(&pool).await.unwrap();
    assert_eq!(expected.len(), 25);
    let result = read(&client, GENRE_TRACKS).await;

    let table = structured(&format(&client, &result, "table").await);
    assert_eq!(table["format"], "table");
    let markdown = table["markdown"].as_str().unwrap();
    let mut lines = vec!["| genre | tracks |".to_owned(), "| --- | ---: |".to_owned()];
    lines.extend(expected.iter().map(|(genre, tracks)| format!("| {genre} | {tracks} |")));
    assert_eq!(markdown.lines().collect::<Vec<_>>(), lines, "{markdown}");

    let csv = structured(&format(&client, &result, "csv").await);
    assert_eq!(csv["format"], "csv");
    let mut text = String::from("genre,tracks\r\n");
    for (genre, tracks) in &expected {
        text.push_str(&format!("{genre},{tracks}\r\n"));
    }
    assert_eq!(csv["csv"], text);

    let objects = structured(&format(&client, &result, "json").await);
    assert_eq!(objects["format"], "json");
    let rows: Vec<Value> =
        expected.iter().map(|(genre, tracks)| json!({"genre": genre, "tracks": tracks})).collect();
    assert_eq!(objects["rows"], Value::Array(rows));

    let summary = structured(&format(&client, &result, "summary").await);
    assert_eq!(summary["format"], "summary");
    let summary = &summary["summary"];
    assert_eq!(summary["row_count"], 25);
    assert_eq!(summary["column_count"], 2);
    let counts: Vec<i64> = expected.iter().map(|(_, tracks)| *tracks).collect();
    let min = counts.iter().min().unwrap();
    let max = counts.iter().max().unwrap();
    let mean = counts.iter().sum::<i64>() as f64 / counts.len() as f64;
    let tracks = &summary["columns"][1];
    assert_eq!(tracks["name"], "tracks");
    assert_eq!(tracks["type"], "number");
    assert_eq!((tracks["count"].clone(), tracks["nulls"].clone()), (json!(25), json!(0)));
    assert_eq!((tracks["min"].clone(), tracks["max"].clone()), (json!(min), json!(max)));
    assert!((tracks["mean"].as_f64().unwrap() - mean).abs() < 1e-9, "{tracks}");
    // The most frequent count first, ties by value.
    let mut frequencies = std::collections::BTreeMap::<i64, u64>::new();
    for count in &counts {
        *frequencies.entry(*count).or_default() += 1;
    }
    let top = frequencies.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))).unwrap();
    assert_eq!(tracks["top_values"][0], json!({"value": top.0, "count": top.1}), "{tracks}");
    let genre = &summary["columns"][0];
    assert_eq!(genre["type"], "text");
    assert_eq!(genre["distinct"], 25);
    assert_eq!(genre["top_values"].as_array().unwrap().len(), 5, "{genre}");
    assert_eq!(genre["top_values"][0]["count"], 1, "{genre}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn csv_quotes_commas_quotes_and_newlines_as_rfc_4180_says() {
    let database = TestDatabase::create().await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;
    // One value per row of a one-column table, and the CSV field it becomes.
    let fields = [
        (json!("plain"), "plain"),
        (json!(" spaced "), " spaced "),
        (json!("Smith, J"), "\"Smith, J\""),
        (json!("say \"hi\""), "\"say \"\"hi\"\"\""),
        (json!("two\nlines"), "\"two\nlines\""),
        (json!("crlf\r\nline"), "\"crlf\r\nline\""),
        (json!("\"Hi,\" she said,\nand left"), "\"\"\"Hi,\"\" she said,\nand left\""),
        (json!(""), "\"\""),
        (Value::Null, "\"\""),
        (json!(1.5), "1.5"),
        (json!(-3), "-3"),
        (json!(true), "true"),
        (json!({"k": [1, "a,b"]}), "\"{\"\"k\"\":[1,\"\"a,b\"\"]}\""),
    ];
    for (value, field) in fields {
        let data = json!([{"v": value}]);
        let csv = structured(&format(&client, &data, "csv").await);
        assert_eq!(csv["format"], "csv");
        assert_eq!(csv["csv"], format!("v\r\n{field}\r\n"), "{value}");
    }

    let data = json!([
        {"author": "Smith, J", "quote": "said \"hi\",\nthen left", "year": 1999},
        {"author": "Lee", "quote": null, "year": 2.5},
    ]);
    let csv = structured(&format(&client, &data, "csv").await);
    let text = csv["csv"].as_str().unwrap();
    assert_eq!(
        text,
        "author,quote,year\r\n\"Smith, J\",\"said \"\"hi\"\",\nthen left\",1999\r\nLee,,2.5\r\n"
    );
    // The CSV reads back as the same table (CSV fields are text, empty ones null).
    let back = structured(&format(&client, &Value::from(text), "json").await);
    assert_eq!(
        back["rows"],
        json!([
            {"author": "Smith, J", "quote": "said \"hi\",\nthen left", "year": "1999"},
            {"author": "Lee", "quote": null, "year": "2.5"},
        ])
    );
    let table = structured(&format(&client, &data, "table").await);
    let markdown = table["markdown"].as_str().unwrap();
    assert_eq!(
        markdown,
        "| author | quote | year |\n| --- | --- | ---: |\n\
         | Smith, J | said \"hi\",<br>then left | 1999 |\n| Lee |  | 2.5 |\n"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn json_text_keeps_the_column_order_of_its_objects() {
    let database = TestDatabase::create().await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;
    // As text the order of the keys survives the wire; orca documents first-seen order.
    let data = Value::from(r#"[{"title": "Dune", "year": 1965, "author": "Herbert"}]"#);
    let csv = structured(&format(&client, &data, "csv").await);
    assert_eq!(csv["csv"], "title,year,author\r\nDune,1965,Herbert\r\n");
    client.cancel().await.unwrap();
}

const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

#[tokio::test]
async fn charts_are_a_bar_for_categories_and_a_line_over_time_with_a_png() {
    let database = samples::chinook().await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;
    let monthly = "SELECT date_trunc('month', invoice_date) AS month, sum(total) AS revenue \
        FROM invoice GROUP BY 1 ORDER BY 1";
    let cases =
        [(GENRE_TRACKS, "bar", "genre", "tracks", 25), (monthly, "line", "month", "revenue", 60)];
    for (sql, kind, x, y, points) in cases {
        let result = read(&client, sql).await;
        let chart = format(&client, &result, "chart").await;
        let value = structured(&chart);
        assert_eq!(value["format"], "chart", "{value}");
        assert_eq!(value["chart_type"], kind, "{sql}: {value}");
        let spec = &value["vega_lite"];
        assert!(spec["$schema"].as_str().is_some_and(|s| s.contains("vega-lite/v5")), "{spec}");
        let mark = spec["mark"].get("type").unwrap_or(&spec["mark"]);
        assert_eq!(mark, kind, "{spec}");
        let values = spec["data"]["values"].as_array().unwrap_or_else(|| panic!("{spec}"));
        assert_eq!(values.len(), points, "{spec}");
        assert!(values.iter().all(|point| point.get(x).is_some() && point.get(y).is_some()));
        let encoded = serde_json::to_string(&spec["encoding"]).unwrap();
        assert!(encoded.contains(x) && encoded.contains(y), "{encoded}");

        assert_eq!(chart.content.len(), 2, "a JSON block and an image block");
        let image = chart.content[1].as_image().expect("the second block is an image");
        assert_eq!(image.mime_type, "image/png");
        let png = base64::engine::general_purpose::STANDARD.decode(&image.data).unwrap();
        assert!(png.starts_with(PNG_SIGNATURE), "{kind}: not a PNG");
        let decoder = png::Decoder::new(std::io::Cursor::new(&png));
        let info = decoder.read_info().expect("a readable PNG");
        assert_eq!((info.info().width, info.info().height), (800, 500));
    }
    let bar = structured(&format(&client, &read(&client, GENRE_TRACKS).await, "chart").await);
    let values = bar["vega_lite"]["data"]["values"].as_array().unwrap();
    assert!(values.contains(&json!({"genre": "Rock", "tracks": 1297.0})), "{values:?}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn format_results_refuses_what_it_cannot_read_as_invalid_input() {
    let database = TestDatabase::create().await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;
    let good = json!([{"a": 1}]);
    let cases = [
        (json!(42), "table", "data is a number"),
        (json!(42), "chart", "data is a number"),
        (json!(true), "csv", "data is a boolean"),
        (json!([]), "chart", "no rows"),
        (json!({"schema": [], "rows": []}), "chart", "no rows"),
        (json!([1, 2]), "json", "data[0] is a number"),
        (json!({"rows": []}), "table", "no `schema`"),
        (json!({"schema": ["a", "b"], "rows": [[1]]}), "summary", "rows[0] has 1 value"),
        (json!(""), "table", "empty string"),
        (json!("{not json"), "table", "not valid JSON"),
        (json!("a,b\n1,2,3\n"), "csv", "not valid CSV"),
        (json!([{"name": "x"}]), "chart", "no columns can be charted"),
        (good.clone(), "pie", "`pie` is not one of: table, chart, summary, csv, json"),
        (good.clone(), "TABLE", "is not one of"),
    ];
    for (data, format, message) in cases {
        let result = call(&client, "format_results", json!({"data": data, "format": format}), None)
            .await
            .unwrap();
        let value = structured(&result);
        assert_eq!(result.is_error, Some(true), "{data} as {format}: {value}");
        assert_eq!(value["error"]["code"], "INVALID_INPUT", "{data} as {format}: {value}");
        let text = value["error"]["message"].as_str().unwrap();
        assert!(text.contains(message), "{data} as {format}: expected `{message}` in {text}");
    }
    let missing = call(&client, "format_results", json!({"data": good}), None).await.unwrap();
    assert_eq!(structured(&missing)["error"]["code"], "INVALID_INPUT");
    client.cancel().await.unwrap();
}
