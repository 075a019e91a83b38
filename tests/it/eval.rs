//! `orca eval` through the real binary, on a copy of Chinook, with the fake providers scripted
//! so that every figure is known in advance: exact accuracy, outcomes and attempts (right
//! answers also under other column names and another column order, a wrong one, one right on
//! its second attempt, one never, a generated write that never runs, a provider failure, gold
//! errors), `--compare` with the context reaching the prompt in one run only, the files of
//! `--out`, eval rows kept apart in tracking, bad question files, and the shipped Chinook set.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::fake_llm::{ANTHROPIC_KEY, FakeLlm, Reply, Wire};
use crate::support::{OrcaSetup, TestDatabase, run, samples};

/// A context file with one entry that the revenue question selects.
const CONTEXT: &str = "# Supabase SQL Context Learning

## Database Schema Overview

## Successful Query Patterns

### Revenue by customer
Revenue is the sum of invoice.total per customer; join customer to invoice on customer_id.
```sql
SELECT c.customer_id, sum(i.total) AS revenue
FROM customer c JOIN invoice i ON i.customer_id = c.customer_id
GROUP BY c.customer_id
```

## Common Error Patterns & Fixes

## Query Optimization Insights

## Model Performance Notes
";

struct Lab {
    fake: FakeLlm,
    setup: OrcaSetup,
    database: TestDatabase,
}

async fn lab() -> Lab {
    let database = samples::chinook().await;
    let fake = FakeLlm::start().await;
    let setup = OrcaSetup::new(&database.url).with_fake_llm(&fake);
    let context_file = setup.home.path().join("context.md");
    std::fs::write(&context_file, CONTEXT).unwrap();
    let setup = setup.with_env("ORCA_CONTEXT_FILE", &context_file.display().to_string());
    Lab { fake, setup, database }
}

fn sql_reply(sql: &str) -> Reply {
    Reply::Text(format!("Here it is:\n```sql\n{sql}\n```"))
}

fn write(setup: &OrcaSetup, name: &str, text: &str) -> String {
    let path = setup.home.path().join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn parse_json(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|error| panic!("{error}: {stdout}"))
}

fn item<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["id"] == id)
        .unwrap_or_else(|| panic!("no item {id}: {report}"))
}

/// Nine questions whose fates the script decides.
const SCRIPTED: &str = r#"
- id: count
  question: How many artists are there?
  gold_sql: SELECT count(*) FROM artist
  tags: [aggregation]
- id: renamed
  question: The first five artists with their ids
  gold_sql: SELECT artist_id, name FROM artist WHERE artist_id <= 5
  tags: [filter, columns]
- id: wrong
  question: The names of the genres
  gold_sql: SELECT name FROM genre
  tags: [filter]
- id: second
  question: When was invoice 1 issued?
  gold_sql: SELECT invoice_date FROM invoice WHERE invoice_id = 1
  tags: [date]
- id: never
  question: All artist names
  gold_sql: SELECT name FROM artist
- id: writes
  question: How many invoice lines are there?
  gold_sql: SELECT count(*) FROM invoice_line
- id: missing-table
  question: Everything about spaceships
  gold_sql: SELECT * FROM spaceship
- id: gold-writes
  question: Remove the artists
  gold_sql: DELETE FROM artist
- id: provider
  question: How many albums are there?
  gold_sql: SELECT count(*) FROM album
  tags: [aggregation]
"#;

fn scripted_replies() -> Vec<Reply> {
    vec![
        // count: right, as a float under another name.
        sql_reply("SELECT count(*)::float8 AS artists FROM artist"),
        // renamed: right, other names and another column order.
        sql_reply("SELECT name AS artist_name, artist_id AS id FROM artist WHERE artist_id < 6"),
        // wrong: another table.
        sql_reply("SELECT name FROM media_type"),
        // second: a wrong column first, then right (a date against the gold timestamp).
        sql_reply("SELECT created_at FROM invoice WHERE invoice_id = 1"),
        sql_reply("SELECT invoice_date::date AS issued FROM invoice WHERE invoice_id = 1"),
        // never: three wrong answers.
        sql_reply("SELECT nme FROM artist"),
        Reply::Text("I do not know.".to_owned()),
        sql_reply("SELECT name FROM artists"),
        // writes: a DELETE, which must never run.
        sql_reply("DELETE FROM invoice_line"),
        // (missing-table and gold-writes never reach the model.)
        // provider: the provider refuses the request.
        Reply::Error { status: 400, retry_after: None },
    ]
}

async fn count(database: &TestDatabase, sql: &'static str) -> i64 {
    let pool = database.connect().await;
    let count = sqlx::query_scalar(sql).fetch_one(&pool).await.unwrap();
    pool.close().await;
    count
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scripted_run_reports_the_exact_accuracy_outcomes_and_attempts() {
    let lab = lab().await;
    lab.fake.script(Wire::Anthropic, scripted_replies());
    let questions = write(&lab.setup, "questions.yaml", SCRIPTED);
    let lines = count(&lab.database, "SELECT count(*) FROM invoice_line").await;
    let artists = count(&lab.database, "SELECT count(*) FROM artist").await;
    let out = lab.setup.home.path().join("report");
    let out_text = out.display().to_string();
    let (code, stdout, stderr) =
        run(&lab.setup, &["eval", &questions, "--concurrency", "1", "--json", "--out", &out_text]);
    assert_eq!(code, 0, "{stderr}");
    let report = parse_json(&stdout);

    assert_eq!(report["questions"], 9);
    assert_eq!(report["scored"], 7);
    assert_eq!(report["correct"], 3);
    assert!((report["accuracy"].as_f64().unwrap() - 3.0 / 7.0).abs() < 1e-12, "{report}");
    assert_eq!(report["provider"], "anthropic");
    assert_eq!(report["model"], "claude-sonnet-4-5");
    let outcomes = serde_json::json!({
        "correct": 3, "wrong_result": 1, "exceeded_retries": 1, "not_a_read": 1,
        "provider_error": 1, "timeout": 0, "gold_error": 2,
    });
    assert_eq!(report["by_outcome"], outcomes);
    let expected = [
        ("count", "correct", 1),
        ("renamed", "correct", 1),
        ("wrong", "wrong_result", 1),
        ("second", "correct", 2),
        ("never", "exceeded_retries", 3),
        ("writes", "not_a_read", 1),
        ("missing-table", "gold_error", 0),
        ("gold-writes", "gold_error", 0),
        ("provider", "provider_error", 1),
    ];
    for (id, outcome, attempts) in expected {
        let item = item(&report, id);
        assert_eq!(item["outcome"], outcome, "{item}");
        assert_eq!(item["attempts"], attempts, "{item}");
    }
    assert_eq!(
        item(&report, "second")["sql"],
        "SELECT invoice_date::date AS issued FROM invoice WHERE invoice_id = 1"
    );
    assert_eq!(item(&report, "never")["sql"], "SELECT name FROM artists");
    assert!(item(&report, "wrong")["error"].as_str().unwrap().contains("row"), "{report}");
    assert!(item(&report, "missing-table")["error"].as_str().unwrap().contains("spaceship"));
    assert!(item(&report, "gold-writes")["error"].as_str().unwrap().contains("not a read"));
    assert_eq!(report["attempts"], serde_json::json!({"p50": 1, "max": 3}));
    assert_eq!(
        report["by_tag"]["filter"],
        serde_json::json!({"questions": 2, "correct": 1, "accuracy": 0.5})
    );
    assert_eq!(report["by_tag"]["aggregation"]["correct"], 1);
    assert_eq!(report["by_tag"]["date"]["accuracy"], 1.0);
    assert!(report["tokens"]["prompt"].as_i64().unwrap() > 0, "{report}");
    assert!(report["latency_ms"]["p95"].as_u64().is_some());

    // The model was asked exactly as scripted, and never for a gold error.
    assert_eq!(lab.fake.requests().len(), 10);
    assert!(lab.fake.violations().is_empty(), "{:?}", lab.fake.violations());
    // Neither the generated write nor the gold write ran.
    assert_eq!(count(&lab.database, "SELECT count(*) FROM invoice_line").await, lines);
    assert_eq!(count(&lab.database, "SELECT count(*) FROM artist").await, artists);

    // The files of --out.
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(written, report);
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        markdown.contains("| accuracy | 42.9% (3 of 7 questions; 2 with gold errors left out) |"),
        "{markdown}"
    );
    assert!(markdown.contains("| never | exceeded_retries | 3 |"), "{markdown}");
    let png = std::fs::read(out.join("accuracy.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));

    // Progress went to stderr, one line per question (stderr is not a terminal here).
    assert!(stderr.contains("eval 9/9"), "{stderr}");

    // Tracking: the seven generate_sql calls, marked as eval, with their failure rows.
    let pool = lab.database.connect().await;
    let rows: Vec<(String, String, String, Value)> = sqlx::query_as(
        "SELECT source, tool_name, status, request_data FROM orca.mcp_executions ORDER BY created_at, id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(rows.len(), 7, "{rows:?}");
    assert!(rows.iter().all(|(source, tool, _, _)| source == "eval" && tool == "generate_sql"));
    let never = rows.iter().find(|row| row.3["eval"]["question_id"] == "never").unwrap();
    assert_eq!(never.2, "error");
    assert_eq!(never.3["eval"]["outcome"], "exceeded_retries");
    let failures: i64 = sqlx::query_scalar("SELECT count(*) FROM orca.mcp_failures")
        .fetch_one(&pool)
        .await
        .unwrap();
    // second: 1, never: 3, provider: 1.
    assert_eq!(failures, 5);
    let stored: String = sqlx::query_scalar(
        "SELECT coalesce(string_agg(e.request_data::text || e.response_data::text, ''), '') || \
         coalesce((SELECT string_agg(error_details::text, '') FROM orca.mcp_failures), '') FROM orca.mcp_executions e",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;
    for text in [&stdout, &stderr, &markdown, &stored] {
        assert!(!text.contains(ANTHROPIC_KEY), "the provider key leaked");
    }

    // Exports leave eval calls out unless asked.
    let exports = lab.setup.home.path().join("exports");
    let exports_text = exports.display().to_string();
    let failure_rows = |include: bool| {
        let mut args = vec!["export-feedback", "--since", "1h", "--out", exports_text.as_str()];
        if include {
            args.push("--include-eval");
        }
        let (code, _, stderr) = run(&lab.setup, &args);
        assert_eq!(code, 0, "{stderr}");
        let file = std::fs::read_dir(&exports)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .find(|path| path.file_name().unwrap().to_string_lossy().starts_with("failures-"))
            .unwrap();
        let mut reader = csv::Reader::from_path(file).unwrap();
        let header = reader.headers().unwrap().clone();
        let source = header.iter().position(|name| name == "source").unwrap();
        reader.records().map(|record| record.unwrap()[source].to_owned()).collect::<Vec<_>>()
    };
    assert!(failure_rows(false).is_empty());
    assert_eq!(failure_rows(true), vec!["eval"; 5]);

    // `orca context suggest` learns from eval calls only when asked.
    let (code, stdout, stderr) = run(&lab.setup, &["context", "suggest", "--since", "1h"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("nothing to learn from"), "{stdout}");
    let before = lab.fake.requests().len();
    let nothing = "```json\n{\"patterns\": [], \"fixes\": [], \"insights\": []}\n```";
    lab.fake.script(Wire::Anthropic, [Reply::Text(nothing.to_owned())]);
    let (code, stdout, stderr) = run(
        &lab.setup,
        &["context", "suggest", "--since", "1h", "--include-eval", "--llm-provider", "anthropic"],
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let requests = lab.fake.requests();
    assert_eq!(requests.len(), before + 1);
    let lessons = FakeLlm::conversation_text(&requests[before]);
    assert!(lessons.contains("All artist names"), "{lessons}");

    // --min-accuracy turns a low accuracy into exit status 1 (same replies again).
    lab.fake.script(Wire::Anthropic, scripted_replies());
    let (code, stdout, stderr) =
        run(&lab.setup, &["eval", &questions, "--concurrency", "1", "--min-accuracy", "0.5"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("accuracy 42.9% is below --min-accuracy 50.0%"), "{stderr}");
    assert!(stdout.contains("| accuracy | 42.9%"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread")]
async fn compare_runs_with_and_without_the_context_and_names_what_flipped() {
    let lab = lab().await;
    let questions = write(
        &lab.setup,
        "questions.jsonl",
        concat!(
            "{\"id\": \"revenue\", \"question\": \"Revenue by customer: the total per customer id\", \"gold_sql\": \"SELECT customer_id, sum(total) FROM invoice GROUP BY customer_id\", \"tags\": [\"business-term\"]}\n",
            "{\"id\": \"tracks\", \"question\": \"How many tracks are there?\", \"gold_sql\": \"SELECT count(*) FROM track\"}\n",
        ),
    );
    let revenue = "SELECT c.customer_id, sum(i.total) AS revenue FROM customer c JOIN invoice i ON i.customer_id = c.customer_id GROUP BY c.customer_id";
    lab.fake.script(
        Wire::Anthropic,
        [
            // With the context: both right.
            sql_reply(revenue),
            sql_reply("SELECT count(*) FROM track"),
            // Without it: revenue summed from the wrong place, tracks still right.
            sql_reply("SELECT customer_id, count(*) FROM invoice GROUP BY customer_id"),
            sql_reply("SELECT count(track_id) FROM track"),
        ],
    );
    let out = lab.setup.home.path().join("compare");
    let out_text = out.display().to_string();
    let (code, stdout, stderr) = run(
        &lab.setup,
        &["eval", &questions, "--compare", "--concurrency", "1", "--json", "--out", &out_text],
    );
    assert_eq!(code, 0, "{stderr}");
    let report = parse_json(&stdout);
    assert_eq!(report["with_context"]["accuracy"], 1.0);
    assert_eq!(report["without_context"]["accuracy"], 0.5);
    assert_eq!(report["with_context"]["use_context"], true);
    assert_eq!(report["without_context"]["use_context"], false);
    assert_eq!(report["lift"], 0.5);
    assert_eq!(report["flipped"], serde_json::json!({"gained": ["revenue"], "lost": []}));

    // The context reached the prompt in the first run and not in the second.
    let requests = lab.fake.requests();
    assert_eq!(requests.len(), 4);
    let prompts: Vec<String> = requests.iter().map(FakeLlm::conversation_text).collect();
    assert!(prompts[0].contains("### Revenue by customer"), "{}", prompts[0]);
    assert!(prompts[0].contains("# Learned Context"));
    for prompt in &prompts[2..] {
        assert!(!prompt.contains("# Learned Context"), "{prompt}");
        assert!(!prompt.contains("Revenue by customer\nRevenue is"), "{prompt}");
    }
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(markdown.contains("lift: +50.0 points"), "{markdown}");
    assert!(markdown.contains("right only with the context: revenue"), "{markdown}");
    assert!(markdown.contains("| business-term | 100.0% | 0.0% |"), "{markdown}");
    assert!(std::fs::read(out.join("accuracy.png")).unwrap().starts_with(b"\x89PNG"));
    assert!(
        stderr.contains("with context 2/2") && stderr.contains("without context 2/2"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hanging_provider_and_a_generated_query_that_runs_too_long_are_timeouts() {
    let Lab { fake, setup, database: _database } = lab().await;
    let setup = setup.with_config(
        "llm:\n  timeout_ms: 400\n  max_retries: 1\n  max_backoff_ms: 100\nsql:\n  default_timeout_ms: 500\n",
    );
    let questions = write(
        &setup,
        "questions.yaml",
        "- id: slow-model\n  question: How many tracks?\n  gold_sql: SELECT count(*) FROM track\n\
         - id: slow-query\n  question: How many albums?\n  gold_sql: SELECT count(*) FROM album\n",
    );
    fake.script(
        Wire::Anthropic,
        [
            Reply::Hang(std::time::Duration::from_secs(3)),
            sql_reply("SELECT count(*) FROM generate_series(1, 2000000000)"),
        ],
    );
    let (code, stdout, stderr) = run(&setup, &["eval", &questions, "--concurrency", "1", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let report = parse_json(&stdout);
    assert_eq!(item(&report, "slow-model")["outcome"], "timeout", "{report}");
    assert_eq!(item(&report, "slow-query")["outcome"], "timeout", "{report}");
    assert_eq!(item(&report, "slow-query")["attempts"], 1);
    assert_eq!(report["by_outcome"]["timeout"], 2);
    assert_eq!(report["accuracy"], 0.0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_question_file_or_provider_is_refused_before_any_model_is_called() {
    let lab = lab().await;
    let cases: [(&str, &str, &str); 5] = [
        (
            "duplicate.jsonl",
            "{\"id\": \"a\", \"question\": \"x\", \"gold_sql\": \"SELECT 1\"}\n{\"id\": \"a\", \"question\": \"y\", \"gold_sql\": \"SELECT 2\"}\n",
            "line 2: duplicate id `a` (first used by line 1)",
        ),
        (
            "missing.yaml",
            "- id: q1\n  question: How many artists?\n",
            "question 1 (id `q1`): missing field `gold_sql`",
        ),
        ("broken.jsonl", "{\"id\": \"a\",\n", "line 1: not valid JSON"),
        ("empty.yaml", "", "holds no questions"),
        ("list.yaml", "questions: []\n", "must be a list of questions"),
    ];
    for (name, text, expected) in cases {
        let path = write(&lab.setup, name, text);
        let (code, stdout, stderr) = run(&lab.setup, &["eval", &path]);
        assert_eq!(code, 2, "{name}: {stderr}");
        assert!(stderr.contains(expected), "{name}: {stderr}");
        assert!(stdout.is_empty(), "{name}: {stdout}");
    }
    let missing = lab.setup.home.path().join("nowhere.yaml").display().to_string();
    let (code, _, stderr) = run(&lab.setup, &["eval", &missing]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("cannot read the question file") && stderr.contains("nowhere.yaml"),
        "{stderr}"
    );

    let good = write(&lab.setup, "good.yaml", "- id: q\n  question: x\n  gold_sql: SELECT 1\n");
    for (args, expected) in [
        (vec!["--provider", "mistral"], "llm_provider `mistral` is not supported"),
        (vec!["--max-retries", "0"], "--max-retries must be between 1 and 10"),
        (vec!["--min-accuracy", "80"], "--min-accuracy is a fraction"),
    ] {
        let mut all = vec!["eval", good.as_str()];
        all.extend(args);
        let (code, _, stderr) = run(&lab.setup, &all);
        assert_eq!(code, 2, "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
    }
    assert!(lab.fake.requests().is_empty(), "a model was called");
    let (code, stdout, _) = run(&lab.setup, &["eval", "--help"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("--compare") && stdout.contains("--min-accuracy"), "{stdout}");
}

fn shipped_set() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("context/eval/chinook.yaml")
}

#[derive(serde::Deserialize)]
struct ShippedQuestion {
    id: String,
    gold_sql: String,
    #[serde(default)]
    tags: Vec<String>,
}

#[tokio::test(flavor = "multi_thread")]
async fn every_gold_sql_of_the_shipped_chinook_set_answers_itself_through_orca_eval() {
    let text = std::fs::read_to_string(shipped_set()).unwrap();
    let questions: Vec<ShippedQuestion> = serde_saphyr::from_str(&text).unwrap();
    assert!(questions.len() >= 60, "{}", questions.len());
    for kind in ["filter", "join", "aggregation", "date", "window", "subquery", "business-term"] {
        let tagged =
            questions.iter().filter(|question| question.tags.iter().any(|tag| tag == kind)).count();
        assert!(tagged >= 5, "only {tagged} questions tagged {kind}");
    }
    // Every gold SQL returns rows on the shipped data.
    let lab = lab().await;
    let pool = lab.database.connect().await;
    for question in &questions {
        let rows = sqlx::query(sqlx::AssertSqlSafe(question.gold_sql.clone()))
            .fetch_all(&pool)
            .await
            .unwrap_or_else(|error| panic!("{}: {error}", question.id));
        assert!(!rows.is_empty(), "{}: the gold SQL returns no rows", question.id);
    }
    pool.close().await;
    // A model that answers with the gold SQL is right on every question.
    lab.fake
        .script(Wire::Anthropic, questions.iter().map(|question| sql_reply(&question.gold_sql)));
    let set = shipped_set().display().to_string();
    let (code, stdout, stderr) =
        run(&lab.setup, &["eval", &set, "--concurrency", "1", "--max-retries", "1", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let report = parse_json(&stdout);
    let wrong: Vec<&Value> = report["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["outcome"] != "correct")
        .collect();
    assert!(wrong.is_empty(), "{wrong:?}");
    assert_eq!(report["accuracy"], 1.0);
    assert_eq!(report["scored"], questions.len());
}

#[test]
fn the_eval_module_knows_nothing_of_mcp_or_the_gateway() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/eval");
    for entry in std::fs::read_dir(root).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for module in ["rmcp", "crate::gateway", "crate::registry", "crate::cli"] {
            assert!(!text.contains(module), "{} uses {module}", path.display());
        }
    }
}
