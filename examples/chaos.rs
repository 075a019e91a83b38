//! Load-and-fault driver: N concurrent MCP clients call a mix of tools over Streamable HTTP
//! against one or more running `orca serve --http` (alternating between them), keep a
//! client-side history of every call, print throughput, p50/p99 and errors by code, and check
//! the history against `orca.mcp_executions`: every answered call must have exactly one row.
//!
//! `chaos load` is the load, `chaos replicas` the two-replica scenarios (a dry run confirmed on
//! the other replica, a page token and a feedback token carried over, one confirmation token
//! sent 50 times at once), `chaos check` checks a history file again, `chaos plot` draws the
//! soak's samples, `chaos inflight` sends slow proxied calls that are still running when the
//! upstream is killed, `chaos provider` is a fake OpenAI-compatible model provider whose
//! failures the script switches (500, 429 with `Retry-After`, a hang, recovered), and
//! `chaos phases` reports a history phase by phase. `scripts/chaos` builds this and runs the
//! faults around it. Loopback only.

#![allow(clippy::print_stdout, reason = "the report is this program's output")]
#![allow(clippy::print_stderr, reason = "progress goes to stderr")]

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail, ensure};
use clap::{Parser, Subcommand};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Debug, Parser)]
#[command(about = "orca's load-and-fault driver")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Call a mix of tools for a while and check the history against PostgreSQL.
    Load(LoadArgs),
    /// The two-replica scenarios: tokens carried across replicas, one token redeemed 50 times.
    Replicas(ReplicaArgs),
    /// Check a history file against PostgreSQL again.
    Check {
        /// The history (JSON lines) a `load` wrote.
        history: PathBuf,
        /// The tracking database.
        #[arg(long)]
        db: String,
    },
    /// Draw the soak's samples (CSV) as a PNG.
    Plot { csv: PathBuf, png: PathBuf },
    /// Send slow proxied calls at once and keep their history (they are in flight at a kill).
    Inflight(InflightArgs),
    /// A fake OpenAI-compatible provider (`POST /v1/chat/completions`) with switchable faults.
    Provider(ProviderArgs),
    /// A history's calls by the phases of a fault (lines `name start_ms` in a file).
    Phases {
        history: PathBuf,
        /// The phases: one `name start_ms` line each, in order; the last one ends the run.
        phases: PathBuf,
        /// The tool whose calls are reported per code; the others are counted as bystanders.
        #[arg(long, default_value = "generate_sql")]
        tool: String,
    },
}

#[derive(Debug, clap::Args)]
struct LoadArgs {
    /// orca's `/mcp` URLs; the clients alternate between them.
    #[arg(long = "url", required = true)]
    urls: Vec<String>,
    /// Concurrent clients.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// How long to call, in seconds.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Calls per second per client (0: as fast as answers come).
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// The mix, comma-separated: list_servers, query_sql, write (a dry run, then its
    /// confirmation), fx_echo, generate_sql.
    #[arg(long, default_value = "list_servers,query_sql,write,fx_echo")]
    mix: String,
    /// The client's timeout per call, in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    timeout_ms: u64,
    /// Where to write the history (JSON lines).
    #[arg(long)]
    history: PathBuf,
    /// The tracking database, to check the history against (and to create the write table).
    #[arg(long)]
    db: Option<String>,
    /// Another history (JSON lines) written meanwhile, by `chaos inflight`, checked with this
    /// one, when it exists.
    #[arg(long)]
    extra_history: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct InflightArgs {
    /// orca's `/mcp` URL.
    #[arg(long)]
    url: String,
    /// The calls and their arguments: `tool=json`, repeated (for example
    /// `fx_slow={"ms":3000}` or `fx_hang={}`).
    #[arg(long = "call", required = true)]
    calls: Vec<String>,
    /// How many times each call is sent, all at once.
    #[arg(long, default_value_t = 4)]
    count: usize,
    /// The client's timeout per call, in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    timeout_ms: u64,
    /// Where to write their history (JSON lines).
    #[arg(long)]
    history: PathBuf,
}

#[derive(Debug, clap::Args)]
struct ProviderArgs {
    /// Where to listen (loopback).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
    /// The key it accepts (`Authorization: Bearer ...`).
    #[arg(long, env = "CHAOS_PROVIDER_KEY")]
    key: String,
    /// The SQL its successes answer with (in a fenced block, as models write it).
    #[arg(long, default_value = "SELECT count(*) AS tables FROM pg_catalog.pg_tables")]
    sql: String,
}

#[derive(Debug, clap::Args)]
struct ReplicaArgs {
    /// Replica A's `/mcp` URL.
    #[arg(long)]
    a: String,
    /// Replica B's `/mcp` URL.
    #[arg(long)]
    b: String,
    /// The shared database (target and tracking).
    #[arg(long)]
    db: String,
    /// How many times the one confirmation token is sent at once.
    #[arg(long, default_value_t = 50)]
    redemptions: usize,
}

/// The table the `write` operation inserts into.
const WRITE_TABLE: &str = "chaos_writes";

/// One call as the client saw it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Call {
    /// The client-side id: `<client>-<sequence>`.
    id: String,
    url: String,
    tool: String,
    /// Milliseconds since the Unix epoch.
    start_ms: u64,
    end_ms: u64,
    /// `ok`, `error` (a tool error result), `protocol` (a JSON-RPC error), `http` (a status
    /// other than 200) or `transport` (no answer: refused, reset, timed out).
    outcome: String,
    /// The taxonomy code of a tool error, the HTTP status, or the transport failure.
    code: Option<String>,
    message: Option<String>,
    execution_id: Option<String>,
    feedback_token: Option<String>,
}

impl Call {
    fn answered(&self) -> bool {
        self.feedback_token.is_some()
    }
    fn latency(&self) -> Duration {
        Duration::from_millis(self.end_ms.saturating_sub(self.start_ms))
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis() as u64)
}

/// A JSON-RPC client of orca's stateless Streamable HTTP endpoint.
#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    timeout: Duration,
    next_id: Arc<AtomicU64>,
}

/// What one `tools/call` came back with.
struct Answer {
    call: Call,
    structured: Option<Value>,
}

impl Client {
    fn new(timeout: Duration) -> anyhow::Result<Client> {
        let http = reqwest::Client::builder().pool_max_idle_per_host(4).build()?;
        Ok(Client { http, timeout, next_id: Arc::new(AtomicU64::new(1)) })
    }

    async fn call(&self, url: &str, label: &str, tool: &str, arguments: Value) -> Answer {
        let rpc_id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = json!({"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}});
        let start_ms = now_ms();
        let sent = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .json(&body)
            .timeout(self.timeout)
            .send()
            .await;
        let mut call = Call {
            id: label.to_owned(),
            url: url.to_owned(),
            tool: tool.to_owned(),
            start_ms,
            end_ms: 0,
            outcome: String::new(),
            code: None,
            message: None,
            execution_id: None,
            feedback_token: None,
        };
        let mut structured = None;
        let text = match sent {
            Ok(response) => {
                let status = response.status();
                match response.text().await {
                    Ok(text) if status.is_success() => Ok(text),
                    Ok(text) => Err(("http", status.as_u16().to_string(), text)),
                    Err(error) => Err(("transport", transport_code(&error), error.to_string())),
                }
            }
            Err(error) => Err(("transport", transport_code(&error), error.to_string())),
        };
        call.end_ms = now_ms();
        match text {
            Err((outcome, code, message)) => {
                call.outcome = outcome.to_owned();
                call.code = Some(code);
                call.message = Some(message.chars().take(300).collect());
            }
            Ok(text) => match parse_rpc(&text) {
                None => {
                    call.outcome = "protocol".to_owned();
                    call.code = Some("UNPARSEABLE".to_owned());
                    call.message = Some(text.chars().take(300).collect());
                }
                Some(message) => {
                    if let Some(error) = message.get("error") {
                        call.outcome = "protocol".to_owned();
                        call.code = Some(error["code"].to_string());
                        call.message = error["message"].as_str().map(str::to_owned);
                    } else {
                        let result = &message["result"];
                        let meta = &result["_meta"];
                        call.execution_id = meta["execution_id"].as_str().map(str::to_owned);
                        call.feedback_token = meta["feedback_token"].as_str().map(str::to_owned);
                        if result["isError"] == Value::Bool(true) {
                            call.outcome = "error".to_owned();
                            let error = &result["structuredContent"]["error"];
                            call.code = error["code"].as_str().map(str::to_owned);
                            call.message = error["message"].as_str().map(str::to_owned);
                        } else {
                            call.outcome = "ok".to_owned();
                        }
                        structured = result.get("structuredContent").cloned();
                    }
                }
            },
        }
        Answer { call, structured }
    }
}

fn transport_code(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        "CLIENT_TIMEOUT".to_owned()
    } else if error.is_connect() {
        "CONNECT".to_owned()
    } else {
        "RESET".to_owned()
    }
}

/// The JSON-RPC message in a JSON or an SSE answer.
fn parse_rpc(text: &str) -> Option<Value> {
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        return Some(value);
    }
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|value| value.get("result").is_some() || value.get("error").is_some())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Load(args) => load(args).await,
        Command::Replicas(args) => replicas(args).await,
        Command::Check { history, db } => {
            let calls = read_history(&history)?;
            let report = check_history(&db, &calls).await?;
            println!("{report}");
            ensure!(report.passed(), "the history check failed");
            Ok(())
        }
        Command::Plot { csv, png } => plot(&csv, &png),
        Command::Inflight(args) => inflight(args).await,
        Command::Provider(args) => provider::serve(args).await,
        Command::Phases { history, phases, tool } => report_phases(&history, &phases, &tool),
    }
}

fn loopback_only(url: &str) -> anyhow::Result<()> {
    ensure!(
        url.starts_with("http://127.") || url.starts_with("http://localhost"),
        "loopback targets only: {url}"
    );
    Ok(())
}

async fn connect_db(url: &str) -> anyhow::Result<sqlx::PgPool> {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(Duration::from_secs(10))
        .connect(url)
        .await
        .context("cannot reach the database")
}

async fn create_write_table(db: &str) -> anyhow::Result<()> {
    let pool = connect_db(db).await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE IF NOT EXISTS public.{WRITE_TABLE} (id bigserial PRIMARY KEY, \
         marker text NOT NULL, at timestamptz NOT NULL DEFAULT now())"
    )))
    .execute(&pool)
    .await?;
    pool.close().await;
    Ok(())
}

/// One client's loop: pick the next operation of the mix, run it, log every call.
async fn client_loop(
    index: usize,
    client: Client,
    urls: Arc<Vec<String>>,
    mix: Arc<Vec<String>>,
    deadline: Instant,
    rate: f64,
    history: Arc<std::sync::Mutex<std::fs::File>>,
) -> Vec<Call> {
    let mut calls = Vec::new();
    let mut sequence = 0usize;
    let interval = (rate > 0.0).then(|| Duration::from_secs_f64(1.0 / rate));
    let mut next_at = Instant::now();
    let record = |call: Call, calls: &mut Vec<Call>| {
        if let Ok(line) = serde_json::to_string(&call)
            && let Ok(mut file) = history.lock()
        {
            let _ = writeln!(file, "{line}");
        }
        calls.push(call);
    };
    while Instant::now() < deadline {
        if calls.last().is_some_and(|call: &Call| call.outcome == "transport") {
            // A replica that is gone refuses at once; do not spin on it.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if let Some(interval) = interval {
            let now = Instant::now();
            if next_at > now {
                tokio::time::sleep(next_at - now).await;
            }
            next_at += interval;
        }
        // Every operation of the mix goes to every replica in turn.
        let url = &urls[(index + sequence / mix.len()) % urls.len()];
        let operation = &mix[(index + sequence) % mix.len()];
        let label = format!("c{index}-{sequence}");
        sequence += 1;
        match operation.as_str() {
            "list_servers" => {
                record(client.call(url, &label, "list_servers", json!({})).await.call, &mut calls);
            }
            "query_sql" => {
                let sql = "SELECT n, n * n AS square FROM generate_series(1, 20) AS n ORDER BY n";
                let answer = client.call(url, &label, "query_sql", json!({"sql": sql})).await;
                record(answer.call, &mut calls);
            }
            "fx_echo" => {
                let answer = client.call(url, &label, "fx_echo", json!({"text": label})).await;
                record(answer.call, &mut calls);
            }
            "generate_sql" => {
                let arguments = json!({"prompt": format!("how many tables are there ({label})"),
                    "max_retries": 1});
                let answer = client.call(url, &label, "generate_sql", arguments).await;
                record(answer.call, &mut calls);
            }
            "write" => {
                let sql = format!("INSERT INTO public.{WRITE_TABLE} (marker) VALUES ('{label}')");
                let dry = client
                    .call(
                        url,
                        &format!("{label}-dry"),
                        "execute_sql",
                        json!({"sql": sql, "dry_run": true}),
                    )
                    .await;
                let token = dry
                    .structured
                    .as_ref()
                    .and_then(|value| value["confirmation_token"].as_str())
                    .map(str::to_owned);
                record(dry.call, &mut calls);
                if let Some(token) = token {
                    // The confirmation goes to the next replica, so that with two the dry run
                    // and its confirmation always meet different processes.
                    let other = &urls[(index + sequence / mix.len() + 1) % urls.len()];
                    let arguments = json!({"sql": sql, "dry_run": false, "read_only": false,
                        "confirmation_token": token});
                    let confirmed = client
                        .call(other, &format!("{label}-confirm"), "execute_sql", arguments)
                        .await;
                    record(confirmed.call, &mut calls);
                }
            }
            other => {
                eprintln!("unknown operation in the mix: {other}");
                break;
            }
        }
    }
    calls
}

async fn load(args: LoadArgs) -> anyhow::Result<()> {
    for url in &args.urls {
        loopback_only(url)?;
    }
    let mix: Vec<String> = args.mix.split(',').map(|op| op.trim().to_owned()).collect();
    if mix.iter().any(|op| op == "write") {
        let db = args.db.as_deref().context("the write operation needs --db for its table")?;
        create_write_table(db).await?;
    }
    let file = std::fs::File::create(&args.history)
        .with_context(|| format!("cannot write {}", args.history.display()))?;
    let history = Arc::new(std::sync::Mutex::new(file));
    let client = Client::new(Duration::from_millis(args.timeout_ms))?;
    let urls = Arc::new(args.urls.clone());
    let mix = Arc::new(mix);
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.seconds);
    let mut workers = Vec::new();
    for index in 0..args.clients {
        workers.push(tokio::spawn(client_loop(
            index,
            client.clone(),
            Arc::clone(&urls),
            Arc::clone(&mix),
            deadline,
            args.rate,
            Arc::clone(&history),
        )));
    }
    let mut calls = Vec::new();
    for worker in workers {
        calls.extend(worker.await?);
    }
    let elapsed = started.elapsed();
    print_summary(&calls, elapsed);
    if let Some(path) = args.extra_history.as_ref().filter(|path| path.exists()) {
        let extra = read_history(path)?;
        println!("checked with them: {} calls of {}", extra.len(), path.display());
        calls.extend(extra);
    }
    if let Some(db) = &args.db {
        let report = check_history(db, &calls).await?;
        println!("{report}");
        ensure!(report.passed(), "the history check failed");
    }
    Ok(())
}

fn print_summary(calls: &[Call], elapsed: Duration) {
    let mut latencies: Vec<Duration> = calls.iter().map(Call::latency).collect();
    latencies.sort();
    let percentile = |p: f64| {
        latencies
            .get(((latencies.len().max(1) - 1) as f64 * p).round() as usize)
            .map_or(0, |latency| latency.as_millis())
    };
    let ok = calls.iter().filter(|call| call.outcome == "ok").count();
    println!(
        "calls={} ok={} calls_per_s={:.1} p50_ms={} p99_ms={} max_ms={}",
        calls.len(),
        ok,
        calls.len() as f64 / elapsed.as_secs_f64(),
        percentile(0.50),
        percentile(0.99),
        percentile(1.0),
    );
    let mut by_code: BTreeMap<String, (usize, u128)> = BTreeMap::new();
    for call in calls.iter().filter(|call| call.outcome != "ok") {
        let key = format!("{}:{}:{}", call.tool, call.outcome, call.code.as_deref().unwrap_or("-"));
        let entry = by_code.entry(key).or_default();
        entry.0 += 1;
        entry.1 = entry.1.max(call.latency().as_millis());
    }
    for (key, (count, max)) in by_code {
        println!("  errors {key} count={count} max_ms={max}");
    }
}

fn read_history(path: &PathBuf) -> anyhow::Result<Vec<Call>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).context("a history line is not a call"))
        .collect()
}

/// The history against `orca.mcp_executions`.
#[derive(Debug, Default)]
struct CheckReport {
    answered: usize,
    unanswered: usize,
    stored_once: usize,
    missing: Vec<String>,
    duplicated: Vec<String>,
    /// Rows written while the history ran whose call got no answer (a call cut off).
    rows_without_answer: i64,
}

impl CheckReport {
    fn passed(&self) -> bool {
        self.missing.is_empty()
            && self.duplicated.is_empty()
            && self.rows_without_answer <= self.unanswered as i64
    }
}

impl std::fmt::Display for CheckReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "history check: answered={} stored_once={} missing={} duplicated={} unanswered={} rows_without_answer={} {}",
            self.answered,
            self.stored_once,
            self.missing.len(),
            self.duplicated.len(),
            self.unanswered,
            self.rows_without_answer,
            if self.passed() { "PASS" } else { "FAIL" }
        )?;
        for id in self.missing.iter().take(5) {
            write!(f, "\n  missing: {id}")?;
        }
        for id in self.duplicated.iter().take(5) {
            write!(f, "\n  duplicated: {id}")?;
        }
        Ok(())
    }
}

/// Every answered call of `calls` must have exactly one row, found by its feedback token and
/// its execution id; rows are waited for (up to 60 s) since tracking writes in the background
/// and replays spilled records once the database is back.
async fn check_history(db: &str, calls: &[Call]) -> anyhow::Result<CheckReport> {
    let answered: Vec<&Call> = calls.iter().filter(|call| call.answered()).collect();
    let tokens: Vec<uuid::Uuid> =
        answered.iter().filter_map(|call| call.feedback_token.as_deref()?.parse().ok()).collect();
    let ids: Vec<uuid::Uuid> =
        answered.iter().filter_map(|call| call.execution_id.as_deref()?.parse().ok()).collect();
    let pool = connect_db(db).await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let counts: HashMap<String, i64> = loop {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT feedback_token::text, count(*) FROM orca.mcp_executions \
             WHERE feedback_token = ANY($1) OR id = ANY($2) GROUP BY 1",
        )
        .bind(&tokens)
        .bind(&ids)
        .fetch_all(&pool)
        .await?;
        let counts: HashMap<String, i64> = rows.into_iter().collect();
        if counts.len() >= tokens.len() || Instant::now() > deadline {
            break counts;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let mut report = CheckReport {
        answered: answered.len(),
        unanswered: calls.len() - answered.len(),
        ..CheckReport::default()
    };
    for call in &answered {
        let token = call.feedback_token.clone().unwrap_or_default();
        match counts.get(&token).copied().unwrap_or(0) {
            0 => report.missing.push(call.id.clone()),
            1 => report.stored_once += 1,
            _ => report.duplicated.push(call.id.clone()),
        }
    }
    // Rows of the run's window that no answered call owns: only cut-off calls may leave one
    // (the probes of scripts/chaos, which carry `chaos_probe`, are not the history's).
    let first = calls.iter().map(|call| call.start_ms).min().unwrap_or(0);
    let last = calls.iter().map(|call| call.end_ms).max().unwrap_or(0);
    let (in_window,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM orca.mcp_executions WHERE transport = 'http' AND \
         coalesce(request_data::text, '') NOT LIKE '%chaos_probe%' AND created_at BETWEEN to_timestamp($1::float8 / 1000) - interval '1 second' \
         AND to_timestamp($2::float8 / 1000) + interval '1 second'",
    )
    .bind(first as f64)
    .bind(last as f64)
    .fetch_one(&pool)
    .await?;
    let own: i64 = counts.values().sum();
    report.rows_without_answer = (in_window - own).max(0);
    pool.close().await;
    Ok(report)
}

async fn replicas(args: ReplicaArgs) -> anyhow::Result<()> {
    loopback_only(&args.a)?;
    loopback_only(&args.b)?;
    create_write_table(&args.db).await?;
    let client = Client::new(Duration::from_secs(60))?;
    let (a, b) = (args.a.as_str(), args.b.as_str());
    let pool = connect_db(&args.db).await?;
    let run = uuid::Uuid::new_v4().simple().to_string();

    // A dry run on A, confirmed on B.
    let marker = format!("carry-{run}");
    let sql = format!("INSERT INTO public.{WRITE_TABLE} (marker) VALUES ('{marker}')");
    let dry = client.call(a, "dry-a", "execute_sql", json!({"sql": sql, "dry_run": true})).await;
    let token = dry.structured.as_ref().and_then(|value| value["confirmation_token"].as_str());
    let token = token.context("the dry run on A returned no confirmation_token")?.to_owned();
    let confirmed = client
        .call(
            b,
            "confirm-b",
            "execute_sql",
            json!({"sql": sql, "dry_run": false, "read_only": false, "confirmation_token": token}),
        )
        .await;
    ensure!(confirmed.call.outcome == "ok", "B refused A's token: {:?}", confirmed.call);
    println!("dry run on A confirmed on B: ok");

    // A page token from A continued on B.
    let query =
        json!({"sql": "SELECT n FROM generate_series(1, 10) AS n ORDER BY n", "max_rows": 4});
    let first = client.call(a, "page-a", "query_sql", query.clone()).await;
    let page_token = first.structured.as_ref().and_then(|value| value["page_token"].as_str());
    let page_token = page_token.context("the first page on A has no page_token")?.to_owned();
    let mut next = query.clone();
    next["page_token"] = Value::from(page_token);
    let second = client.call(b, "page-b", "query_sql", next).await;
    let rows = second.structured.as_ref().map(|value| value["rows"].clone());
    ensure!(second.call.outcome == "ok", "B refused A's page token: {:?}", second.call);
    ensure!(
        rows.as_ref().and_then(|rows| rows[0][0].as_i64().or_else(|| rows[0]["n"].as_i64()))
            == Some(5),
        "the second page on B does not start at 5: {rows:?}"
    );
    println!("page token from A continued on B: ok (second page starts at 5)");

    // A feedback token from A rated on B.
    let listed = client.call(a, "list-a", "list_servers", json!({})).await;
    let feedback = listed.call.feedback_token.clone().context("no feedback token from A")?;
    let rated = client
        .call(b, "rate-b", "submit_feedback", json!({"feedback_token": feedback, "rating": "up"}))
        .await;
    ensure!(rated.call.outcome == "ok", "B refused A's feedback token: {:?}", rated.call);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (count,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM orca.mcp_feedback WHERE feedback_token = $1::uuid AND rating = 'up'",
        )
        .bind(&feedback)
        .fetch_one(&pool)
        .await?;
        if count == 1 {
            break;
        }
        ensure!(Instant::now() < deadline, "the rating from B never reached mcp_feedback");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("feedback token from A rated on B: ok (one row in orca.mcp_feedback)");

    // One confirmation token sent many times at once, half to each replica.
    let marker = format!("race-{run}");
    let sql = format!("INSERT INTO public.{WRITE_TABLE} (marker) VALUES ('{marker}')");
    let race_dry =
        client.call(a, "race-dry", "execute_sql", json!({"sql": sql, "dry_run": true})).await;
    let token = race_dry.structured.as_ref().and_then(|value| value["confirmation_token"].as_str());
    let token = token.context("the race's dry run returned no confirmation_token")?.to_owned();
    let arguments =
        json!({"sql": sql, "dry_run": false, "read_only": false, "confirmation_token": token});
    let barrier = Arc::new(tokio::sync::Barrier::new(args.redemptions));
    let mut sends = Vec::new();
    for index in 0..args.redemptions {
        let client = client.clone();
        let url = if index % 2 == 0 { a.to_owned() } else { b.to_owned() };
        let arguments = arguments.clone();
        let barrier = Arc::clone(&barrier);
        sends.push(tokio::spawn(async move {
            barrier.wait().await;
            client.call(&url, &format!("race-{index}"), "execute_sql", arguments).await.call
        }));
    }
    let mut results = Vec::new();
    for send in sends {
        results.push(send.await?);
    }
    let wrote = results.iter().filter(|call| call.outcome == "ok").count();
    let already_used = results
        .iter()
        .filter(|call| call.message.as_deref().is_some_and(|text| text.contains("already used")))
        .count();
    let (rows,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM public.{WRITE_TABLE} WHERE marker = $1"
    )))
    .bind(&marker)
    .fetch_one(&pool)
    .await?;
    println!(
        "one token sent {} times at once over both replicas: {wrote} succeeded, {already_used} \"already used\", {rows} row(s) written",
        args.redemptions
    );
    let codes: BTreeMap<String, usize> = results.iter().filter(|call| call.outcome != "ok").fold(
        BTreeMap::new(),
        |mut map, call| {
            *map.entry(call.code.clone().unwrap_or_default()).or_default() += 1;
            map
        },
    );
    println!("  refusals by code: {codes:?}");
    let mut calls = results;
    calls.extend([
        race_dry.call,
        dry.call,
        confirmed.call,
        first.call,
        second.call,
        listed.call,
        rated.call,
    ]);
    let report = check_history(&args.db, &calls).await?;
    println!("{report}");
    pool.close().await;
    if wrote != 1 || already_used != args.redemptions - 1 || rows != 1 || !report.passed() {
        bail!("the exactly-once check failed");
    }
    Ok(())
}

/// The embedded font of `format_results`' charts.
static FONT: &[u8] =
    include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/data/fonts/DejaVuSans.ttf"));

/// Draw every numeric column of the soak CSV (first column: seconds since start) in its own
/// panel, each on its own scale.
fn plot(csv_path: &PathBuf, png: &PathBuf) -> anyhow::Result<()> {
    use plotters::prelude::*;
    let mut reader = csv::Reader::from_path(csv_path)?;
    let headers: Vec<String> = reader.headers()?.iter().map(str::to_owned).collect();
    let mut columns: Vec<Vec<f64>> = vec![Vec::new(); headers.len()];
    for record in reader.records() {
        let record = record?;
        for (column, value) in columns.iter_mut().zip(record.iter()) {
            column.push(value.parse().unwrap_or(f64::NAN));
        }
    }
    ensure!(headers.len() >= 2 && !columns[0].is_empty(), "the CSV has no samples");
    plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
        .map_err(|_| anyhow::anyhow!("the font could not be loaded"))?;
    let panels = headers.len() - 1;
    let (width, height) = (900u32, 220 * panels as u32);
    let mut pixels = vec![0u8; (width * height * 3) as usize];
    {
        let backend = BitMapBackend::<plotters::backend::RGBPixel>::with_buffer_and_format(
            &mut pixels,
            (width, height),
        )
        .map_err(|error| anyhow::anyhow!("{error}"))?;
        let root = backend.into_drawing_area();
        root.fill(&WHITE)?;
        let minutes: Vec<f64> = columns[0].iter().map(|seconds| seconds / 60.0).collect();
        let end = minutes.last().copied().unwrap_or(1.0).max(1.0);
        for (area, index) in root.split_evenly((panels, 1)).iter().zip(1..) {
            let values = &columns[index];
            let high = values.iter().copied().filter(|v| v.is_finite()).fold(0.0, f64::max) * 1.15;
            let mut chart = ChartBuilder::on(area)
                .caption(&headers[index], ("sans-serif", 16))
                .margin(8)
                .x_label_area_size(28)
                .y_label_area_size(70)
                .build_cartesian_2d(0.0..end, 0.0..high.max(1.0))?;
            chart.configure_mesh().x_desc("minutes").label_style(("sans-serif", 12)).draw()?;
            let points: Vec<(f64, f64)> = minutes
                .iter()
                .copied()
                .zip(values.iter().copied())
                .filter(|(_, v)| v.is_finite())
                .collect();
            chart.draw_series(std::iter::once(PathElement::new(points, BLUE.stroke_width(2))))?;
        }
        root.present()?;
    }
    let file = std::fs::File::create(png)?;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(&pixels)?;
    writer.finish()?;
    Ok(())
}

/// Send every `--call` `--count` times at once, keep their history, print what each got.
async fn inflight(args: InflightArgs) -> anyhow::Result<()> {
    loopback_only(&args.url)?;
    let client = Client::new(Duration::from_millis(args.timeout_ms))?;
    let mut sends = Vec::new();
    for call in &args.calls {
        let (tool, arguments) = call.split_once('=').context("a --call is tool=json")?;
        let arguments: Value = serde_json::from_str(arguments).context("a --call's arguments")?;
        for index in 0..args.count {
            let (client, url, tool) = (client.clone(), args.url.clone(), tool.to_owned());
            let (arguments, label) = (arguments.clone(), format!("inflight-{tool}-{index}"));
            sends.push(tokio::spawn(async move {
                client.call(&url, &label, &tool, arguments).await.call
            }));
        }
    }
    let mut file = std::fs::File::create(&args.history)
        .with_context(|| format!("cannot write {}", args.history.display()))?;
    for send in sends {
        let call = send.await?;
        writeln!(file, "{}", serde_json::to_string(&call)?)?;
        println!(
            "  in flight: {} {} -> {} {} after {} ms{}",
            call.id,
            call.tool,
            call.outcome,
            call.code.as_deref().unwrap_or("-"),
            call.latency().as_millis(),
            call.message.as_deref().map(|text| format!(": {text}")).unwrap_or_default()
        );
    }
    Ok(())
}

/// Each phase's calls of `tool` (by the phase their call started in): how many, their codes
/// and the slowest; and how the other tools fared meanwhile.
fn report_phases(history: &PathBuf, phases: &PathBuf, tool: &str) -> anyhow::Result<()> {
    let calls = read_history(history)?;
    let text = std::fs::read_to_string(phases)
        .with_context(|| format!("cannot read {}", phases.display()))?;
    let mut marks: Vec<(String, u64)> = Vec::new();
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        let (name, at) = line.split_once(' ').context("a phase line is `name start_ms`")?;
        marks.push((name.to_owned(), at.trim().parse().context("a phase's start_ms")?));
    }
    let end = calls.iter().map(|call| call.end_ms).max().unwrap_or(0);
    for (index, (name, start)) in marks.iter().enumerate() {
        let until = marks.get(index + 1).map_or(end + 1, |(_, at)| *at);
        let in_phase: Vec<&Call> =
            calls.iter().filter(|call| call.start_ms >= *start && call.start_ms < until).collect();
        let (own, others): (Vec<&Call>, Vec<&Call>) =
            in_phase.into_iter().partition(|call| call.tool == tool);
        let mut codes: BTreeMap<String, usize> = BTreeMap::new();
        for call in &own {
            *codes.entry(call.code.clone().unwrap_or_else(|| "ok".to_owned())).or_default() += 1;
        }
        let slowest = own.iter().map(|call| call.latency().as_millis()).max().unwrap_or(0);
        let others_ok = others.iter().filter(|call| call.outcome == "ok").count();
        println!(
            "phase {name} ({:.1} s): {tool} calls={} codes={codes:?} slowest_ms={slowest}; other tools {others_ok}/{} ok",
            until.saturating_sub(*start) as f64 / 1000.0,
            own.len(),
            others.len()
        );
    }
    Ok(())
}

#[path = "chaos/provider.rs"]
mod provider;
