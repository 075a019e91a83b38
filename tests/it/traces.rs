//! Traces through the real binary: a fake collector decodes the OTLP/HTTP protobuf orca
//! exports. A `generate_sql` call is one trace whose gateway span holds the model request (with
//! the GenAI attributes), the validation statement and tracking's write; the caller's
//! `traceparent` is kept, passed on to the model provider and to an HTTP upstream, and is the
//! execution row's trace id, which the console lists (and links with `ORCA_TRACE_URL`). Spans
//! still queued at shutdown are exported then. Without the OTEL variables nothing is exported
//! or passed on.

use std::time::Duration;

use serde_json::{Value, json};
use uuid::Uuid;

use crate::support::fake_llm::{FakeLlm, Reply, Wire};
use crate::support::fake_otlp::{FakeCollector, ReceivedSpan};
use crate::support::{OrcaSetup, TestDatabase, call, eventually, meta_of, samples, text_of};

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

fn caller_traceparent() -> Value {
    json!({"traceparent": format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01")})
}

fn sql_reply(sql: &str) -> Reply {
    Reply::Text(format!("```sql\n{sql}\n```"))
}

/// orca exporting to `collector`, quickly (the batch processor's delay cut to 100 ms).
fn traced(setup: OrcaSetup, collector: &FakeCollector) -> OrcaSetup {
    setup
        .with_env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.endpoint())
        .with_env("OTEL_BSP_SCHEDULE_DELAY", "100")
}

/// The spans of `trace_id` once `complete` says they have all arrived.
async fn trace_of(
    collector: &FakeCollector,
    trace_id: &str,
    complete: impl Fn(&[ReceivedSpan]) -> bool,
) -> Vec<ReceivedSpan> {
    let spans = || -> Vec<ReceivedSpan> {
        collector.spans().into_iter().filter(|span| span.trace_id == trace_id).collect()
    };
    eventually("the trace's spans at the collector", Duration::from_secs(20), || async {
        complete(&spans())
    })
    .await;
    assert!(collector.violations().is_empty(), "{:?}", collector.violations());
    spans()
}

fn named<'a>(spans: &'a [ReceivedSpan], name: &str) -> &'a ReceivedSpan {
    let found: Vec<&ReceivedSpan> = spans.iter().filter(|span| span.name == name).collect();
    assert_eq!(found.len(), 1, "one span named {name} in {spans:#?}");
    found[0]
}

async fn stored_trace_id(database: &TestDatabase, meta: &serde_json::Map<String, Value>) -> String {
    let id = Uuid::parse_str(meta["execution_id"].as_str().unwrap()).unwrap();
    let pool = database.connect().await;
    crate::support::wait_for_row(&pool, "SELECT 1 FROM orca.mcp_executions WHERE id = $1", id)
        .await;
    sqlx::query_scalar("SELECT trace_id FROM orca.mcp_executions WHERE id = $1")
        .bind(id)
        .fetch_one(&pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_generate_sql_call_is_one_trace_with_the_model_request_the_validation_and_the_tracking_write_inside()
 {
    let collector = FakeCollector::start().await;
    let database = samples::chinook().await;
    let fake = FakeLlm::start().await;
    fake.script(Wire::Anthropic, [sql_reply("SELECT name FROM artist WHERE artist_id = 4242")]);
    fake.script(Wire::OpenAi, [sql_reply("SELECT title FROM album WHERE album_id = 4242")]);
    let setup = traced(OrcaSetup::new(&database.url).with_fake_llm(&fake), &collector);
    let client = setup.stdio_client().await;

    // A caller's traceparent in `_meta` (2026-07-28's place): the call joins its trace.
    let arguments = json!({"prompt": "the name of artist 4242"});
    let result =
        call(&client, "generate_sql", arguments, Some(caller_traceparent())).await.unwrap();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let meta = meta_of(&result);
    assert_eq!(meta["trace_id"], CALLER_TRACE);
    let spans = trace_of(&collector, CALLER_TRACE, |spans| {
        ["tools/call generate_sql", "tracking write", "chat claude-sonnet-4-5"]
            .iter()
            .all(|name| spans.iter().any(|span| span.name == *name))
    })
    .await;
    let gateway = named(&spans, "tools/call generate_sql");
    assert_eq!(gateway.parent_span_id, CALLER_SPAN, "the caller's span is the parent");
    assert_eq!(gateway.service.as_deref(), Some("orca"));
    assert_eq!(gateway.attributes["gen_ai.tool.name"], "generate_sql");
    assert_eq!(gateway.attributes["mcp.method.name"], "tools/call");

    let model = named(&spans, "chat claude-sonnet-4-5");
    assert_eq!(model.parent_span_id, gateway.span_id, "{spans:#?}");
    assert_eq!(model.attributes["gen_ai.system"], "anthropic");
    assert_eq!(model.attributes["gen_ai.provider.name"], "anthropic");
    assert_eq!(model.attributes["gen_ai.request.model"], "claude-sonnet-4-5");
    assert_eq!(model.attributes["gen_ai.operation.name"], "chat");
    for tokens in ["gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"] {
        assert!(model.attributes[tokens].as_i64().is_some_and(|n| n > 0), "{tokens}: {model:?}");
    }

    let validation = named(&spans, "EXPLAIN SELECT artist");
    assert_eq!(validation.parent_span_id, gateway.span_id, "{spans:#?}");
    assert_eq!(validation.attributes["db.system"], "postgresql");
    assert_eq!(validation.attributes["db.operation.name"], "EXPLAIN");
    assert_eq!(validation.attributes["db.query.summary"], "EXPLAIN SELECT artist");

    let write = named(&spans, "tracking write");
    assert_eq!(write.parent_span_id, gateway.span_id, "{spans:#?}");
    assert_eq!(write.attributes["orca.tracking.outcome"], "stored");

    // No span carries the statement's values or the provider's key.
    for span in &spans {
        let text = format!("{:?}", span.attributes);
        assert!(!text.contains("4242"), "a literal in {span:?}");
        assert!(!text.contains(crate::support::fake_llm::ANTHROPIC_KEY), "the key in {span:?}");
    }

    // The provider got the model request's span as its parent; the row links to the trace.
    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].headers.get("traceparent").map(String::as_str),
        Some(format!("00-{CALLER_TRACE}-{}-01", model.span_id).as_str())
    );
    assert_eq!(stored_trace_id(&database, &meta).await, CALLER_TRACE);

    // Without a traceparent the gateway's span is the root of a new trace; OpenAI's wire
    // (async-openai under orca's transport) passes the model span on too.
    let arguments = json!({"prompt": "the title of album 4242", "llm_provider": "openai"});
    let result = call(&client, "generate_sql", arguments, None).await.unwrap();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let meta = meta_of(&result);
    let trace_id = meta["trace_id"].as_str().unwrap().to_owned();
    assert_ne!(trace_id, CALLER_TRACE);
    let spans = trace_of(&collector, &trace_id, |spans| {
        ["tools/call generate_sql", "tracking write", "chat gpt-4o-mini"]
            .iter()
            .all(|name| spans.iter().any(|span| span.name == *name))
    })
    .await;
    let gateway = named(&spans, "tools/call generate_sql");
    assert_eq!(gateway.parent_span_id, "");
    let model = named(&spans, "chat gpt-4o-mini");
    assert_eq!(model.parent_span_id, gateway.span_id);
    assert_eq!(model.attributes["gen_ai.provider.name"], "openai");
    assert!(spans.iter().any(|span| span.name == "EXPLAIN SELECT album"), "{spans:#?}");
    let openai = fake.requests().into_iter().find(|request| request.wire == Wire::OpenAi).unwrap();
    assert_eq!(
        openai.headers.get("traceparent").map(String::as_str),
        Some(format!("00-{trace_id}-{}-01", model.span_id).as_str())
    );
    assert_eq!(stored_trace_id(&database, &meta).await, trace_id);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_http_upstream_receives_the_traceparent_of_the_upstream_hop() {
    let collector = FakeCollector::start().await;
    let database = TestDatabase::create().await;
    let (mut upstream, url) = crate::external::start_http_fixture(0, "tok-123");
    let yaml = format!(
        "mcps:\n  web:\n    url: {url}\n    timeout: 5s\n    credentials:\n      token_env: WEB_TOKEN\n"
    );
    let setup = traced(OrcaSetup::new(&database.url).with_external(&yaml), &collector)
        .with_env("WEB_TOKEN", "tok-123");
    let client = setup.stdio_client().await;
    let result = call(&client, "web_headers", json!({}), Some(caller_traceparent())).await.unwrap();
    let headers: Value = serde_json::from_str(&text_of(&result)).unwrap();
    let spans = trace_of(&collector, CALLER_TRACE, |spans| {
        spans.iter().any(|span| span.name == "tools/call headers")
            && spans.iter().any(|span| span.name == "tools/call web_headers")
    })
    .await;
    let gateway = named(&spans, "tools/call web_headers");
    let hop = named(&spans, "tools/call headers");
    assert_eq!(gateway.parent_span_id, CALLER_SPAN);
    assert_eq!(hop.parent_span_id, gateway.span_id);
    assert_eq!(hop.attributes["orca.upstream"], "web");
    assert_eq!(headers["traceparent"], format!("00-{CALLER_TRACE}-{}-01", hop.span_id));
    client.cancel().await.unwrap();
    upstream.kill().unwrap();
    let _ = upstream.wait();
}

#[tokio::test(flavor = "multi_thread")]
async fn without_the_otel_variables_nothing_is_exported_and_no_traceparent_is_passed_on() {
    // A collector where an exporter looks by default (OTLP/HTTP's 127.0.0.1:4318).
    let collector = FakeCollector::start_on("127.0.0.1:4318").await;
    let database = samples::chinook().await;
    let environments: [&[(&str, &str)]; 2] = [
        &[("OTEL_SERVICE_NAME", "orca"), ("OTEL_BSP_SCHEDULE_DELAY", "100")],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_SDK_DISABLED", "true"),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    ];
    for environment in environments {
        let fake = FakeLlm::start().await;
        fake.script(Wire::Anthropic, [sql_reply("SELECT name FROM artist")]);
        let mut setup = OrcaSetup::new(&database.url).with_fake_llm(&fake);
        for (key, value) in environment {
            setup = setup.with_env(key, value);
        }
        let client = setup.stdio_client().await;
        let arguments = json!({"prompt": "artist names"});
        let result =
            call(&client, "generate_sql", arguments, Some(caller_traceparent())).await.unwrap();
        assert_eq!(result.is_error, Some(false), "{environment:?}: {result:?}");
        let meta = meta_of(&result);
        // The row still carries the caller's trace id, as it always has.
        assert_eq!(stored_trace_id(&database, &meta).await, CALLER_TRACE, "{environment:?}");
        assert_eq!(fake.requests()[0].headers.get("traceparent"), None, "{environment:?}");
        client.cancel().await.unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(collector.requests(), 0, "{environment:?}: something was exported");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_traceparent_header_is_kept_the_console_links_the_trace_and_shutdown_exports_the_spans() {
    use rmcp::ServiceExt as _;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let collector = FakeCollector::start().await;
    let database = TestDatabase::create().await;
    let template = "https://traces.test/trace/{trace_id}";
    let setup = OrcaSetup::new(&database.url)
        .with_env(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            &format!("{}/v1/traces", collector.endpoint()),
        )
        .with_env("OTEL_SERVICE_NAME", "orca-under-test")
        // Nothing is exported on schedule: only the shutdown's flush sends the spans.
        .with_env("OTEL_BSP_SCHEDULE_DELAY", "600000")
        .with_env("ORCA_TRACE_URL", template);
    let server = setup.http_server(&[]);
    let traceparent = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    let headers = std::collections::HashMap::from([(
        http::HeaderName::from_static("traceparent"),
        http::HeaderValue::from_str(&traceparent).unwrap(),
    )]);
    let config =
        StreamableHttpClientTransportConfig::with_uri(server.url("/mcp")).custom_headers(headers);
    let client = ().serve(StreamableHttpClientTransport::from_config(config)).await.unwrap();
    let result = call(&client, "list_servers", json!({}), None).await.unwrap();
    assert_eq!(meta_of(&result)["trace_id"], CALLER_TRACE);
    client.cancel().await.unwrap();

    let url = server.url("/console/api/executions?limit=10");
    let listed = || async { reqwest::get(&url).await.unwrap().json::<Value>().await.unwrap() };
    eventually("the call in the console's list", Duration::from_secs(20), || async {
        listed().await["executions"].as_array().is_some_and(|rows| !rows.is_empty())
    })
    .await;
    let body = listed().await;
    assert_eq!(body["executions"][0]["trace_id"], CALLER_TRACE);
    assert_eq!(body["trace_url"], template);

    assert!(collector.spans().is_empty(), "exported before the shutdown");
    assert!(server.stop().success());
    let spans = trace_of(&collector, CALLER_TRACE, |spans| {
        spans.iter().any(|span| span.name == "tracking write")
            && spans.iter().any(|span| span.name == "tools/call list_servers")
    })
    .await;
    let gateway = named(&spans, "tools/call list_servers");
    assert_eq!(gateway.parent_span_id, CALLER_SPAN);
    assert_eq!(gateway.service.as_deref(), Some("orca-under-test"));
    assert_eq!(gateway.status_code, 0, "a successful call's span is not an error");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_collector_that_never_answers_slows_no_call_and_holds_no_shutdown() {
    // Accepts connections and never answers: the worst a collector can do.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut connections = Vec::new();
        while let Ok((connection, _)) = listener.accept().await {
            connections.push(connection);
        }
    });
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url)
        .with_env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .with_env("OTEL_EXPORTER_OTLP_TIMEOUT", "2000")
        .with_env("OTEL_BSP_SCHEDULE_DELAY", "10")
        .with_env("OTEL_BSP_MAX_QUEUE_SIZE", "16");
    let server = setup.http_server(&[]);
    let client = server.client(None).await;
    for _ in 0..40 {
        let started = std::time::Instant::now();
        let result = call(&client, "list_servers", json!({}), None).await.unwrap();
        assert_eq!(result.is_error, Some(false));
        assert!(started.elapsed() < Duration::from_secs(1), "a call waited on the exporter");
    }
    client.cancel().await.unwrap();
    let stopping = std::time::Instant::now();
    let log = server.log.clone();
    assert!(server.stop().success());
    // Bounded by the exporter's timeout (2 s here) for the export under way and the last one.
    assert!(stopping.elapsed() < Duration::from_secs(15), "the shutdown waited on the collector");
    // 40 calls make about 80 spans for a queue of 16: the drops are logged once, and counted
    // at shutdown.
    let log = log.lock().unwrap().join("\n");
    assert_eq!(log.matches("SpanDroppingStarted").count(), 1, "{log}");
    assert!(log.contains("SpansDropped"), "{log}");
    held.abort();
}
