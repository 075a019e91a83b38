//! The client SDK (`orca::client`) against real MCP servers: the awkward test server (names and
//! schemas that break naive conversions), the project's test upstream (list changes, hangs,
//! crashes, HTTP sessions), and the MCP reference server from npm. Conversions are snapshotted
//! and checked against each provider's rules; strict OpenAI schemas against strict mode's.

use std::path::{Path, PathBuf};
use std::time::Duration;

use orca::client::{Converted, ConvertedTool, Executor, McpClient, McpError, Provider, ToolFilter};
use serde_json::{Value, json};

use crate::support::OrcaSetup;
use crate::support::fake_llm_tools::check_parameters;

/// A test server built next to orca by `cargo build -p orca-test-upstream`.
pub(crate) fn fixture_binary(name: &str) -> PathBuf {
    let path = Path::new(crate::support::orca::BINARY).with_file_name(name);
    assert!(path.is_file(), "{} is missing: run cargo build -p orca-test-upstream", path.display());
    path
}

async fn awkward() -> McpClient {
    let path = fixture_binary("orca-test-awkward");
    McpClient::stdio(path.to_str().unwrap(), &[] as &[&str])
        .await
        .expect("the awkward server starts")
}

async fn upstream() -> McpClient {
    let path = fixture_binary("orca-test-upstream");
    McpClient::stdio(path.to_str().unwrap(), &[] as &[&str])
        .await
        .expect("the test upstream starts")
}

/// Every schema node of a converted parameter schema, depth first.
fn nodes(schema: &Value, out: &mut Vec<Value>) {
    out.push(schema.clone());
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for property in properties.values() {
            nodes(property, out);
        }
    }
    if let Some(items) = schema.get("items") {
        nodes(items, out);
    }
    for branch in schema.get("anyOf").and_then(Value::as_array).into_iter().flatten() {
        nodes(branch, out);
    }
}

/// The rules every conversion must follow, whatever the provider.
fn check_provider_rules(converted: &Converted) {
    let mut seen = std::collections::HashSet::new();
    for tool in &converted.tools {
        let name = &tool.name;
        assert!(
            !name.is_empty()
                && name.len() <= 64
                && name
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-'),
            "{name} is not a valid provider name"
        );
        assert!(seen.insert(name.clone()), "{name} is given twice");
        assert_eq!(converted.names.original(name), Some(tool.original_name.as_str()));
        let Some(parameters) = &tool.parameters else {
            assert_eq!(converted.provider, Provider::Gemini, "only Gemini omits empty parameters");
            continue;
        };
        let text = parameters.to_string();
        assert!(
            !text.contains("$ref") && !text.contains("$defs"),
            "{name}: a reference is left: {text}"
        );
        let mut all = Vec::new();
        nodes(parameters, &mut all);
        match converted.provider {
            Provider::OpenAi => {
                let mut found = Vec::new();
                check_parameters(parameters, tool.strict, &mut found);
                assert!(
                    found.is_empty(),
                    "{name} (strict: {}) breaks OpenAI's rules: {found:?}",
                    tool.strict
                );
            }
            Provider::Anthropic => {
                assert_eq!(parameters["type"], "object", "{name}");
                let valid = jsonschema::draft202012::meta::validate(parameters);
                assert!(valid.is_ok(), "{name}: not JSON Schema draft 2020-12: {valid:?}");
                for node in &all {
                    if node["type"] == "object" {
                        assert!(
                            node.get("properties").is_some(),
                            "{name}: object without properties: {node}"
                        );
                    }
                }
            }
            Provider::Gemini => {
                const FIELDS: &[&str] = &[
                    "type",
                    "format",
                    "title",
                    "description",
                    "nullable",
                    "enum",
                    "maxItems",
                    "minItems",
                    "properties",
                    "required",
                    "minProperties",
                    "maxProperties",
                    "minLength",
                    "maxLength",
                    "pattern",
                    "example",
                    "anyOf",
                    "propertyOrdering",
                    "default",
                    "items",
                    "minimum",
                    "maximum",
                ];
                for node in &all {
                    for key in node.as_object().unwrap().keys() {
                        assert!(
                            FIELDS.contains(&key.as_str()),
                            "{name}: Gemini has no field {key}: {node}"
                        );
                    }
                    if let Some(kind) = node.get("type") {
                        assert!(
                            ["STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL"]
                                .contains(&kind.as_str().unwrap_or_default()),
                            "{name}: not one of Gemini's types: {node}"
                        );
                    }
                    for key in ["description", "title", "pattern", "format"] {
                        assert!(
                            node.get(key).is_none_or(Value::is_string),
                            "{name}: {key}: {node}"
                        );
                    }
                    for key in ["minimum", "maximum"] {
                        assert!(
                            node.get(key).is_none_or(Value::is_number),
                            "{name}: {key}: {node}"
                        );
                    }
                    if let Some(required) = node.get("required") {
                        let properties = node["properties"].as_object().unwrap();
                        assert!(
                            required.as_array().unwrap().iter().all(|required| required
                                .as_str()
                                .is_some_and(|required| properties.contains_key(required))),
                            "{name}: {node}"
                        );
                    }
                    if node.get("enum").is_some() {
                        assert_eq!(
                            node["type"], "STRING",
                            "{name}: Gemini takes enums on strings only: {node}"
                        );
                    }
                    if node["type"] == "OBJECT" {
                        assert!(
                            node["properties"].as_object().is_some_and(|p| !p.is_empty()),
                            "{name}: {node}"
                        );
                    }
                    if node["type"] == "ARRAY" {
                        assert!(node.get("items").is_some(), "{name}: {node}");
                    }
                }
            }
        }
    }
}

fn snapshot_of(converted: &Converted) -> Value {
    let set_aside: Vec<Value> = converted
        .set_aside
        .iter()
        .map(|tool| json!({"name": tool.name, "reason": tool.reason}))
        .collect();
    json!({"tools": converted.to_json(), "set_aside": set_aside})
}

#[tokio::test]
async fn awkward_tools_convert_for_every_provider_and_only_the_unconvertible_are_set_aside() {
    let client = awkward().await;
    let tools = client.list_tools().await.unwrap();
    // Thirteen tools over three pages of five: the cursor was followed.
    assert_eq!(tools.len(), 13, "{:?}", tools.iter().map(|tool| &tool.name).collect::<Vec<_>>());
    let all = ToolFilter::new();
    let openai = client.as_openai_tools(&all).await.unwrap();
    let anthropic = client.as_anthropic_tools(&all).await.unwrap();
    let gemini = client.as_gemini_tools(&all).await.unwrap();
    for converted in [&openai, &anthropic, &gemini] {
        check_provider_rules(converted);
    }
    let set_aside = |converted: &Converted| -> Vec<String> {
        converted.set_aside.iter().map(|tool| tool.name.clone()).collect()
    };
    assert_eq!(set_aside(&openai), ["remote_ref"]);
    assert_eq!(set_aside(&anthropic), ["remote_ref"]);
    assert_eq!(set_aside(&gemini), ["remote_ref"]);
    // What Gemini's Schema cannot describe is offered as JSON text, and its path recorded.
    let free_form = gemini.tools.iter().find(|tool| tool.original_name == "free_form").unwrap();
    assert_eq!(free_form.json_text_paths, [vec!["payload".to_owned()]]);
    assert_eq!(free_form.parameters.as_ref().unwrap()["properties"]["payload"]["type"], "STRING");
    assert!(openai.set_aside[0].reason.contains("https://example.com/schemas/spec.json"));

    // Names: the dotted 80-character one is cut and hashed, the two that clean to `db_query`
    // get different hashes, plain names are kept.
    let names = &openai.names;
    let long = "analytics.reports.quarterly_revenue_breakdown.by_region_and_product_line.v2.fina";
    let long_clean = names.cleaned(long).unwrap();
    assert_eq!(long_clean.len(), 64);
    assert!(long_clean.starts_with("analytics_reports_quarterly"), "{long_clean}");
    let (dot, slash) = (names.cleaned("db.query").unwrap(), names.cleaned("db/query").unwrap());
    assert_ne!(dot, slash);
    assert!(dot.starts_with("db_query_") && slash.starts_with("db_query_"));
    assert_eq!(names.cleaned("create_order"), Some("create_order"));
    // The same names for every provider and every run.
    assert_eq!(anthropic.names, openai.names);
    assert_eq!(awkward().await.as_openai_tools(&all).await.unwrap().names, openai.names);

    // Strict where the schema allows it, not where it does not.
    let strict =
        |name: &str| openai.tools.iter().find(|tool| tool.original_name == name).unwrap().strict;
    assert!(strict("configure") && strict("set_level") && strict("ping") && strict("db.query"));
    assert!(!strict("search") && !strict("create_order") && !strict("tree") && !strict("lookup"));
    // The OpenAI tools are async-openai's own request types.
    let typed = serde_json::to_value(openai.openai()).unwrap();
    assert_eq!(typed, openai.to_json());

    insta::assert_json_snapshot!("client_awkward_openai", snapshot_of(&openai));
    insta::assert_json_snapshot!("client_awkward_anthropic", snapshot_of(&anthropic));
    insta::assert_json_snapshot!("client_awkward_gemini", snapshot_of(&gemini));
    client.close().await;
}

/// The malformed tools of `orca-test-awkward --broken`, in listing order.
pub(crate) const BROKEN: &[&str] = &[
    "broken_type_number",
    "broken_type_typo",
    "broken_minimum",
    "broken_enum",
    "broken_description",
    "broken_properties",
    "broken_required",
    "broken_tuple",
    "broken_cycle",
];

#[tokio::test]
async fn malformed_schemas_are_set_aside_for_every_provider_and_the_others_still_convert() {
    let path = fixture_binary("orca-test-awkward");
    let client = McpClient::stdio(path.to_str().unwrap(), &["--broken"]).await.unwrap();
    assert_eq!(client.list_tools().await.unwrap().len(), 13 + BROKEN.len() + 1);
    for provider in [Provider::OpenAi, Provider::Anthropic, Provider::Gemini] {
        let converted = client.convert(provider, &ToolFilter::new()).await.unwrap();
        check_provider_rules(&converted);
        let set_aside: Vec<&str> =
            converted.set_aside.iter().map(|tool| tool.name.as_str()).collect();
        let mut expected = vec!["remote_ref"];
        expected.extend(BROKEN);
        assert_eq!(set_aside, expected, "{provider:?}");
        // The twelve tools of before, and the odd but valid one.
        assert_eq!(converted.tools.len(), 13, "{provider:?}");
        assert!(converted.tools.iter().any(|tool| tool.original_name == "unknown_format"));
        // Each reason says where the schema is wrong.
        let reason = |name: &str| {
            converted.set_aside.iter().find(|tool| tool.name == name).unwrap().reason.clone()
        };
        assert!(reason("broken_type_typo").contains("/properties/a/type"), "{provider:?}");
        assert!(reason("broken_minimum").contains("/properties/n/minimum"), "{provider:?}");
        assert!(reason("broken_tuple").contains("/properties/t/items"), "{provider:?}");
        assert!(reason("broken_cycle").contains("refers to itself"), "{provider:?}");
    }
    // The same listing, without `--broken`, converts as before (the snapshots above).
    let openai = client.as_openai_tools(&ToolFilter::new()).await.unwrap();
    let plain = awkward().await.as_openai_tools(&ToolFilter::new()).await.unwrap();
    let before: Vec<&ConvertedTool> =
        openai.tools.iter().filter(|tool| tool.original_name != "unknown_format").collect();
    assert_eq!(before, plain.tools.iter().collect::<Vec<_>>());
    client.close().await;
}

#[tokio::test]
async fn filters_include_then_exclude_by_name_or_glob_then_ask_the_predicate() {
    let client = awkward().await;
    let tools = client.list_tools().await.unwrap();
    let names = |filter: &ToolFilter| -> Vec<String> {
        filter.apply(&tools).into_iter().map(|tool| tool.name).collect()
    };
    assert_eq!(
        names(&ToolFilter::new().include(["db*", "ping"])),
        ["db.query", "db/query", "ping"]
    );
    assert_eq!(names(&ToolFilter::new().include(["db*"]).exclude(["*/*"])), ["db.query"]);
    assert_eq!(names(&ToolFilter::new().exclude(["*"])), Vec::<String>::new());
    let read_only = ToolFilter::new().when(|tool| tool.read_only());
    assert_eq!(
        names(&read_only),
        [
            "analytics.reports.quarterly_revenue_breakdown.by_region_and_product_line.v2.fina",
            "db.query",
            "search"
        ]
    );
    // Names are computed over the admitted tools: alone, `db.query` needs no longer a hash
    // for a collision, but still one for its dot.
    let alone = client.as_openai_tools(&ToolFilter::new().include(["db.query"])).await.unwrap();
    assert!(alone.tools[0].name.starts_with("db_query_"));
}

#[tokio::test]
async fn the_executor_maps_names_back_and_validates_against_the_original_schema() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let path = fixture_binary("orca-test-awkward");
    let client = McpClient::stdio(
        "env",
        &[format!("FIXTURE_CALL_LOG={}", log.path().display()), path.display().to_string()],
    )
    .await
    .unwrap();
    let converted = client.as_openai_tools(&ToolFilter::new()).await.unwrap();
    let executor = Executor::new(client.clone(), &converted).await.unwrap();
    let slash = converted.names.cleaned("db/query").unwrap().to_owned();

    let result = executor.execute(&slash, r#"{"sql": "SELECT 1"}"#).await.unwrap();
    assert_eq!(result, json!({"tool": "db/query", "arguments": {"sql": "SELECT 1"}}));

    // `minLength: 3` and `minimum: 1` were in the original schema (the model's copy of it may
    // lose such keywords): the executor still refuses, and says where.
    let bad = r#"{"shipping": {"street": "a", "city": "b", "country": "DE"}, "items": [{"sku": "x", "quantity": 0}]}"#;
    let refused = executor.execute("create_order", bad).await.unwrap();
    let message = refused["error"].as_str().unwrap();
    assert!(message.contains("invalid arguments for `create_order`"), "{message}");
    assert!(message.contains("/items/0/sku") && message.contains("/items/0/quantity"), "{message}");

    let missing = executor.execute("search", "{}").await.unwrap();
    assert!(
        missing["error"].as_str().unwrap().contains("\"query\" is a required property"),
        "{missing}"
    );
    let not_json = executor.execute("search", "{query:").await.unwrap();
    assert!(not_json["error"].as_str().unwrap().contains("not valid JSON"), "{not_json}");
    let unknown = executor.execute("db.query", "{}").await.unwrap();
    assert!(unknown["error"].as_str().unwrap().starts_with("unknown tool `db.query`"), "{unknown}");
    // The set-aside tool cannot be called through the executor.
    let aside = executor.execute("remote_ref", "{}").await.unwrap();
    assert!(aside["error"].as_str().unwrap().starts_with("unknown tool"), "{aside}");

    // For Gemini, a free-form object comes as JSON text and is parsed back before validation.
    let gemini = client.as_gemini_tools(&ToolFilter::new()).await.unwrap();
    let for_gemini = Executor::new(client.clone(), &gemini).await.unwrap();
    let parsed =
        for_gemini.execute("free_form", r#"{"payload": "{\"a\": [1, 2]}"}"#).await.unwrap();
    assert_eq!(parsed["arguments"]["payload"], json!({"a": [1, 2]}), "{parsed}");
    let not_json = for_gemini.execute("free_form", r#"{"payload": "a, b"}"#).await.unwrap();
    assert!(not_json["error"].as_str().unwrap().contains("/payload"), "{not_json}");

    // Only the valid calls reached the server.
    let calls = std::fs::read_to_string(log.path()).unwrap();
    assert_eq!(calls.lines().count(), 2, "{calls}");
    assert!(calls.contains("\"tool\":\"db/query\""), "{calls}");
}

#[tokio::test]
async fn results_errors_list_changes_timeouts_and_crashes_are_reported_as_such() {
    let client = upstream().await.with_call_timeout(Duration::from_secs(1));
    let added = client.call_tool("add", json!({"a": 2, "b": 3})).await.unwrap();
    assert!(added.success);
    assert_eq!(added.data, Some(json!({"sum": 5})), "structured content is preferred");
    let echoed = client.call_tool("echo", json!({"text": "plain"})).await.unwrap();
    assert_eq!(echoed.data, Some(json!("plain")), "text when there is no structured content");
    let failed = client.call_tool("fail", json!({"message": "no such issue"})).await.unwrap();
    assert!(!failed.success);
    assert_eq!(failed.error.as_deref(), Some("no such issue"));
    assert!(matches!(
        failed.into_result("fail"),
        Err(McpError::ToolExecution { tool, message }) if tool == "fail" && message == "no such issue"
    ));
    assert!(matches!(
        client.call_tool("nope", json!({})).await,
        Err(McpError::ToolNotFound { name }) if name == "nope"
    ));
    assert!(matches!(
        client.call_tool("echo", json!([1])).await,
        Err(McpError::InvalidArguments { .. })
    ));

    // The list is cached, and refreshed when the server says it changed.
    let before = client.list_tools().await.unwrap();
    assert!(!before.iter().any(|tool| tool.name == "extra"));
    client.call_tool("toggle_extra", json!({})).await.unwrap();
    crate::support::eventually("the new tool list", Duration::from_secs(10), || async {
        client.list_tools().await.unwrap().iter().any(|tool| tool.name == "extra")
    })
    .await;

    // A hanging call times out, is cancelled, and the session stays usable.
    let hung = client.call_tool("hang", json!({})).await;
    assert!(
        matches!(hung, Err(McpError::Timeout { ref tool, seconds: 1 }) if tool == "hang"),
        "{hung:?}"
    );
    assert!(client.call_tool("echo", json!({"text": "still here"})).await.unwrap().success);

    // A crash is a transport error that says how the server ended.
    let crashed =
        client.with_call_timeout(Duration::from_secs(10)).call_tool("crash", json!({})).await;
    let Err(McpError::Transport(message)) = crashed else {
        panic!("expected a transport error: {crashed:?}")
    };
    assert!(message.contains("exited with status 3"), "{message}");
}

#[tokio::test]
async fn dropping_a_stdio_client_kills_the_server_and_what_it_started() {
    let client = upstream().await;
    let pid: u32 =
        client.call_tool("pid", json!({})).await.unwrap().data.unwrap().as_u64().unwrap() as u32;
    let grandchild = client
        .call_tool("spawn_grandchild", json!({}))
        .await
        .unwrap()
        .data
        .unwrap()
        .as_u64()
        .unwrap() as u32;
    let alive = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z'))
        })
    };
    assert!(alive(pid) && alive(grandchild));
    drop(client);
    crate::support::eventually(
        "the server's process group to end",
        Duration::from_secs(10),
        || async { !alive(pid) && !alive(grandchild) },
    )
    .await;
}

/// The test upstream over Streamable HTTP on `port`, requiring `token`.
fn http_upstream(port: u16, token: &str) -> std::process::Child {
    std::process::Command::new(fixture_binary("orca-test-upstream"))
        .args(["--http", &format!("127.0.0.1:{port}")])
        .env("FIXTURE_REQUIRE_BEARER", token)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

async fn wait_listening(port: u16) {
    crate::support::eventually("the fixture to listen", Duration::from_secs(20), || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok()
    })
    .await;
}

#[tokio::test]
async fn over_http_the_client_sends_its_token_and_survives_a_forgotten_session() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut server = http_upstream(port, "s3cret");
    wait_listening(port).await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let refused = McpClient::http(&url, orca::client::HttpOptions::default()).await;
    let Err(McpError::Transport(message)) = refused else { panic!("expected a refusal") };
    assert!(!message.contains("s3cret"));
    let options = orca::client::HttpOptions {
        bearer_token: Some("s3cret".into()),
        headers: vec![("x-trace".into(), "t1".into())],
        ..orca::client::HttpOptions::default()
    };
    let client = McpClient::http(&url, options).await.unwrap();
    let headers = client.call_tool("headers", json!({})).await.unwrap().data.unwrap();
    assert_eq!(headers["authorization"], "Bearer s3cret");
    assert_eq!(headers["x-trace"], "t1");
    // The same through `orca call --url --token --header`.
    let (code, stdout, stderr) = crate::support::run(
        &OrcaSetup::embedded(),
        &["call", "headers", "--url", &url, "--token", "s3cret", "--header", "X-Trace: t2"],
    );
    assert_eq!(code, 0, "{stderr}");
    let printed: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(printed["data"]["x-trace"], "t2");
    assert_eq!(printed["data"]["authorization"], "Bearer s3cret");
    // A restarted server knows no sessions: it answers 404, and the client initializes again.
    server.kill().unwrap();
    server.wait().unwrap();
    let mut restarted = http_upstream(port, "s3cret");
    wait_listening(port).await;
    let echoed = client.call_tool("echo", json!({"text": "again"})).await;
    restarted.kill().unwrap();
    let _ = restarted.wait();
    assert_eq!(echoed.unwrap().data, Some(json!("again")));
}

#[tokio::test]
async fn the_mcp_reference_server_from_npm_converts_and_answers() {
    let Some(entry) = crate::external::reference_server() else { return };
    let client =
        McpClient::stdio("node", &[entry.display().to_string(), "stdio".to_owned()]).await.unwrap();
    let tools = client.list_tools().await.unwrap();
    assert!(tools.iter().any(|tool| tool.name == "echo"), "{tools:?}");
    for provider in [Provider::OpenAi, Provider::Anthropic, Provider::Gemini] {
        let converted = client.convert(provider, &ToolFilter::new()).await.unwrap();
        check_provider_rules(&converted);
        assert!(converted.tools.len() + converted.set_aside.len() == tools.len());
        assert!(converted.tools.iter().any(|tool| tool.original_name == "echo"));
    }
    let converted = client.as_openai_tools(&ToolFilter::new()).await.unwrap();
    let executor = Executor::new(client.clone(), &converted).await.unwrap();
    let echoed = executor.execute("echo", r#"{"message": "hi there"}"#).await.unwrap();
    assert!(echoed.to_string().contains("hi there"), "{echoed}");
}

#[test]
fn the_client_module_uses_none_of_gateway_registry_servers() {
    let mut pending = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src/client")];
    let mut files = Vec::new();
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() { pending.push(path) } else { files.push(path) }
        }
    }
    assert!(files.iter().any(|path| path.ends_with("auth/authorizer.rs")), "{files:?}");
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        for banned in
            ["crate::gateway", "crate::registry", "crate::servers", "crate::external", "crate::cli"]
        {
            assert!(!text.contains(banned), "{} uses {banned}", path.display());
        }
    }
}

#[tokio::test]
async fn a_call_that_times_out_is_cancelled_on_the_server() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let upstream = fixture_binary("orca-test-upstream");
    let client = McpClient::stdio(
        "env",
        &[format!("FIXTURE_CALL_LOG={}", log.path().display()), upstream.display().to_string()],
    )
    .await
    .unwrap()
    .with_call_timeout(Duration::from_millis(500));
    let hung = client.call_tool("hang", json!({})).await;
    assert!(matches!(hung, Err(McpError::Timeout { .. })), "{hung:?}");
    crate::support::eventually(
        "notifications/cancelled at the server",
        Duration::from_secs(10),
        || async { std::fs::read_to_string(log.path()).unwrap().contains("cancelled hang") },
    )
    .await;
}
