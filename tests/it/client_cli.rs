//! `orca tools`, `orca call` and `orca ask` through the real binary: against the awkward test
//! server over stdio, orca's own gateway in-process and over HTTP with a read-only key, and,
//! for `ask`, a wire-faithful fake of the Chat Completions API that checks every request.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::client_sdk::fixture_binary;
use crate::support::fake_llm::{FakeLlm, Reply, Wire};
use crate::support::{OrcaSetup, TestDatabase, run};

fn awkward_path() -> String {
    fixture_binary("orca-test-awkward").display().to_string()
}

/// A setup for commands that talk to a server given on the command line (no database).
fn bare() -> OrcaSetup {
    OrcaSetup::embedded().with_env("ORCA_LOG", "warn")
}

fn json_of(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|error| panic!("not JSON ({error}): {stdout}"))
}

#[test]
fn orca_tools_prints_a_table_json_and_each_providers_format() {
    let setup = bare();
    let awkward = awkward_path();
    let (code, table, _) = run(&setup, &["tools", "--stdio", &awkward]);
    assert_eq!(code, 0);
    assert!(table.starts_with("NAME"), "{table}");
    assert!(
        table.contains("db.query") && table.contains("read-only") && table.contains("(13 tools)"),
        "{table}"
    );

    let (code, listed, _) =
        run(&setup, &["tools", "--stdio", &awkward, "--format", "json", "--include", "db*,ping"]);
    assert_eq!(code, 0);
    let names: Vec<Value> =
        json_of(&listed).as_array().unwrap().iter().map(|tool| tool["name"].clone()).collect();
    assert_eq!(names, [json!("db.query"), json!("db/query"), json!("ping")]);

    let (code, openai, stderr) = run(&setup, &["tools", "--stdio", &awkward, "--format", "openai"]);
    assert_eq!(code, 0, "{stderr}");
    let openai = json_of(&openai);
    assert_eq!(openai.as_array().unwrap().len(), 12);
    for tool in openai.as_array().unwrap() {
        assert_eq!(tool["type"], "function");
        assert!(tool["function"]["name"].as_str().unwrap().len() <= 64);
        assert_eq!(tool["function"]["parameters"]["type"], "object");
    }
    assert!(stderr.contains("remote_ref"), "the set-aside tool is named: {stderr}");

    let (code, anthropic, _) = run(
        &setup,
        &["tools", "--stdio", &awkward, "--format", "anthropic", "--exclude", "*.*,*/*"],
    );
    assert_eq!(code, 0);
    let anthropic = json_of(&anthropic);
    for tool in anthropic.as_array().unwrap() {
        let keys: Vec<&String> = tool.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["name", "description", "input_schema"]);
    }
    assert_eq!(anthropic.as_array().unwrap().len(), 9);

    let (code, gemini, stderr) = run(&setup, &["tools", "--stdio", &awkward, "--format", "gemini"]);
    assert_eq!(code, 0);
    let declarations = json_of(&gemini)["functionDeclarations"].as_array().unwrap().clone();
    assert_eq!(declarations.len(), 12);
    assert!(stderr.contains("remote_ref") && !stderr.contains("free_form"), "{stderr}");
}

#[test]
fn orca_tools_lists_only_schemas_each_provider_accepts_and_names_the_malformed_on_stderr() {
    let setup = bare();
    let server = format!("{} --broken", awkward_path());
    let (code, openai, stderr) = run(&setup, &["tools", "--stdio", &server, "--format", "openai"]);
    assert_eq!(code, 0, "{stderr}");
    let openai = json_of(&openai);
    let tools = openai.as_array().unwrap();
    // The twelve of before and the odd but valid `unknown_format`.
    assert_eq!(tools.len(), 13);
    for tool in tools {
        let function = &tool["function"];
        let mut found = Vec::new();
        crate::support::fake_llm_tools::check_parameters(
            &function["parameters"],
            function["strict"] == true,
            &mut found,
        );
        assert_eq!(found, Vec::<String>::new(), "OpenAI would refuse {}", function["name"]);
    }
    for name in crate::client_sdk::BROKEN {
        assert!(!openai.to_string().contains(&format!("\"{name}\"")), "{name} is not offered");
        assert!(stderr.contains(name), "{name} is named as set aside: {stderr}");
    }
    for (format, listed) in [("anthropic", ""), ("gemini", "/functionDeclarations")] {
        let (code, stdout, stderr) =
            run(&setup, &["tools", "--stdio", &server, "--format", format]);
        assert_eq!(code, 0, "{stderr}");
        let tools = json_of(&stdout).pointer(listed).unwrap().as_array().unwrap().len();
        assert_eq!(tools, 13, "{format}");
        assert!(crate::client_sdk::BROKEN.iter().all(|name| stderr.contains(name)), "{stderr}");
    }
}

#[test]
fn orca_call_exits_0_on_success_1_on_an_error_result_and_2_on_usage_errors() {
    let setup = bare();
    let upstream = fixture_binary("orca-test-upstream").display().to_string();
    let (code, stdout, _) =
        run(&setup, &["call", "add", "--args", r#"{"a": 2, "b": 3}"#, "--stdio", &upstream]);
    assert_eq!(code, 0);
    assert_eq!(json_of(&stdout), json!({"success": true, "data": {"sum": 5}, "error": null}));

    let (code, stdout, _) =
        run(&setup, &["call", "fail", "--args", r#"{"message": "boom"}"#, "--stdio", &upstream]);
    assert_eq!(code, 1);
    assert_eq!(json_of(&stdout)["error"], "boom");

    let (code, stdout, stderr) =
        run(&setup, &["call", "add", "--args", "{not json", "--stdio", &upstream]);
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert!(stderr.contains("--args is not valid JSON"), "{stderr}");
    let (code, _, stderr) = run(&setup, &["call", "add", "--args", "[1, 2]", "--stdio", &upstream]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--args must be a JSON object"), "{stderr}");

    let (code, _, stderr) = run(&setup, &["call", "no_such_tool", "--stdio", &upstream]);
    assert_eq!(code, 2);
    assert!(stderr.contains("unknown tool `no_such_tool`") && stderr.contains("echo"), "{stderr}");

    let (code, _, stderr) = run(&setup, &["call", "echo", "--stdio", "/nonexistent/server"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("cannot start `/nonexistent/server`"), "{stderr}");
}

#[test]
fn every_client_command_has_help() {
    let setup = bare();
    for command in ["tools", "call", "ask"] {
        let (code, stdout, _) = run(&setup, &[command, "--help"]);
        assert_eq!(code, 0);
        assert!(stdout.contains("--stdio") && stdout.contains("--url"), "{command}: {stdout}");
    }
}

#[tokio::test]
async fn without_a_target_the_commands_use_orcas_own_gateway_in_process() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url);
    let (code, stdout, stderr) = run(&setup, &["tools", "--format", "json"]);
    assert_eq!(code, 0, "{stderr}");
    let names: Vec<String> = json_of(&stdout)
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect();
    for expected in ["list_servers", "execute_sql", "generate_schema"] {
        assert!(names.contains(&expected.to_owned()), "{expected} missing from {names:?}");
    }
    let (code, stdout, stderr) = run(&setup, &["call", "list_servers"]);
    assert_eq!(code, 0, "{stderr}");
    let result = json_of(&stdout);
    assert_eq!(result["success"], true);
    assert!(
        result["data"]["servers"].as_array().is_some_and(|servers| !servers.is_empty()),
        "{result}"
    );
    // orca's own schemas convert for every provider, none set aside.
    for format in ["openai", "anthropic", "gemini"] {
        let (code, stdout, stderr) = run(&setup, &["tools", "--format", format]);
        assert_eq!(code, 0, "{stderr}");
        assert!(!stderr.contains("set aside"), "{format}: {stderr}");
        let tools = json_of(&stdout);
        let count =
            tools.as_array().or_else(|| tools["functionDeclarations"].as_array()).unwrap().len();
        assert_eq!(count, names.len(), "{format}");
    }
    // The same gateway over real stdio: `orca serve --stdio` as the server of `orca tools`.
    let serve = format!("{} serve --stdio", crate::support::orca::orca_binary().display());
    let (code, stdout, stderr) = run(&setup, &["tools", "--stdio", &serve, "--format", "json"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(json_of(&stdout).as_array().unwrap().len(), names.len());
}

#[tokio::test]
async fn over_http_a_read_only_key_sees_and_calls_only_read_tools() {
    const KEY: &str = "orca_test_sdk_reader_key";
    let database = TestDatabase::create().await;
    let hash = hex::encode(Sha256::digest(KEY.as_bytes()));
    let setup = OrcaSetup::new(&database.url).with_config(&format!(
        "auth:\n  api_keys:\n    - name: sdk-reader\n      sha256: {hash}\n      verbs: [read]\n"
    ));
    let server = setup.http_server(&[]);
    let url = server.url("/mcp");
    let client = bare();
    let (code, stdout, stderr) =
        run(&client, &["tools", "--url", &url, "--token", KEY, "--format", "openai"]);
    assert_eq!(code, 0, "{stderr}");
    let names: Vec<String> = json_of(&stdout)
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        names.contains(&"execute_sql".to_owned()) && names.contains(&"list_servers".to_owned()),
        "{names:?}"
    );
    for hidden in ["add_records", "materialize_sql", "create_view"] {
        assert!(!names.contains(&hidden.to_owned()), "{hidden} is visible to a read-only key");
    }
    let (code, _, stderr) = run(&client, &["call", "add_records", "--url", &url, "--token", KEY]);
    assert_eq!(code, 2, "a hidden tool is an unknown one");
    assert!(stderr.contains("unknown tool `add_records`"), "{stderr}");
    assert!(!stderr.contains(KEY));
    let (code, _, stderr) =
        run(&client, &["tools", "--url", &url, "--token", "orca_wrong_token_4711"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("error:"), "{stderr}");
    assert!(
        !stderr.contains("orca_wrong_token_4711"),
        "a presented token is never echoed: {stderr}"
    );
    assert!(!server.log_text().contains(KEY), "the key is never logged");
}

/// The cleaned names the model sees for the awkward server's tools.
async fn awkward_names() -> orca::client::NameMap {
    let path = awkward_path();
    let client = orca::client::McpClient::stdio(&path, &[] as &[&str]).await.unwrap();
    client.as_openai_tools(&orca::client::ToolFilter::new()).await.unwrap().names
}

fn openai_requests(fake: &FakeLlm) -> Vec<Value> {
    fake.requests()
        .into_iter()
        .filter(|request| request.wire == Wire::OpenAi)
        .map(|request| request.body)
        .collect()
}

#[tokio::test]
async fn ask_runs_the_tool_calls_a_model_asks_for_and_prints_its_answer() {
    let fake = FakeLlm::start().await;
    let names = awkward_names().await;
    let slash = names.cleaned("db/query").unwrap().to_owned();
    let order = json!({"shipping": {"street": "Main 1", "city": "Berlin", "country": "DE"}, "items": [{"sku": "abc", "quantity": 2}]});
    fake.script(
        Wire::OpenAi,
        [
            Reply::ToolCalls(vec![(slash.clone(), json!({"sql": "SELECT 1"}))]),
            Reply::ToolCalls(vec![
                ("create_order".to_owned(), order.clone()),
                ("search".to_owned(), json!({"query": "x"})),
            ]),
            Reply::Text("The answer is 42.".to_owned()),
        ],
    );
    let log = tempfile::NamedTempFile::new().unwrap();
    let transcript = tempfile::NamedTempFile::new().unwrap();
    let setup = bare().with_fake_llm(&fake);
    let server = format!("env FIXTURE_CALL_LOG={} {}", log.path().display(), awkward_path());
    let (code, stdout, stderr) = run(
        &setup,
        &[
            "ask",
            "What is the answer?",
            "--stdio",
            &server,
            "--model",
            "gpt-test",
            "--transcript",
            &transcript.path().display().to_string(),
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "The answer is 42.");
    assert_eq!(fake.violations(), Vec::<String>::new());

    // The calls reached the server under their original names, in order.
    let calls: Vec<Value> = std::fs::read_to_string(log.path())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(
        calls,
        [
            json!({"tool": "db/query", "arguments": {"sql": "SELECT 1"}}),
            json!({"tool": "create_order", "arguments": order}),
            json!({"tool": "search", "arguments": {"query": "x"}}),
        ]
    );
    let requests = openai_requests(&fake);
    assert_eq!(requests.len(), 3);
    for request in &requests {
        assert_eq!(request["model"], "gpt-test");
        assert_eq!(request["tools"].as_array().unwrap().len(), 12);
    }
    // The last request carries both results, each answering its call.
    let messages = requests[2]["messages"].as_array().unwrap();
    let tool_messages: Vec<&Value> =
        messages.iter().filter(|message| message["role"] == "tool").collect();
    assert_eq!(tool_messages.len(), 3);
    let result: Value =
        serde_json::from_str(tool_messages[1]["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["tool"], "create_order");

    let lines: Vec<Value> = std::fs::read_to_string(transcript.path())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["tool_calls"][0]["tool"], "db/query");
    assert_eq!(lines[1]["results"].as_array().unwrap().len(), 2);
    assert!(lines[1]["usage"]["total_tokens"].as_u64().unwrap() > 0);
    assert_eq!(lines[2]["answer"], "The answer is 42.");
    assert!(lines[0]["request"]["messages"].is_array());
    let text = std::fs::read_to_string(transcript.path()).unwrap();
    assert!(
        !text.contains(crate::support::fake_llm::OPENAI_KEY),
        "the API key stays out of the transcript"
    );
}

#[tokio::test]
async fn ask_completes_with_the_good_tools_when_some_schemas_are_malformed() {
    let fake = FakeLlm::start().await;
    let names = awkward_names().await;
    let dot = names.cleaned("db.query").unwrap().to_owned();
    fake.script(
        Wire::OpenAi,
        [Reply::ToolCalls(vec![(dot, json!({"sql": "SELECT 2"}))]), Reply::Text("Two.".to_owned())],
    );
    let log = tempfile::NamedTempFile::new().unwrap();
    let server =
        format!("env FIXTURE_CALL_LOG={} {} --broken", log.path().display(), awkward_path());
    let (code, stdout, stderr) =
        run(&bare().with_fake_llm(&fake), &["ask", "What is two?", "--stdio", &server]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "Two.");
    assert_eq!(fake.violations(), Vec::<String>::new());
    let calls = std::fs::read_to_string(log.path()).unwrap();
    assert!(calls.contains("\"tool\":\"db.query\""), "{calls}");
    let requests = openai_requests(&fake);
    assert_eq!(requests.len(), 2);
    for request in &requests {
        let offered: Vec<&str> = request["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(offered.len(), 13, "{offered:?}");
        assert!(offered.contains(&"unknown_format"), "{offered:?}");
        assert!(!offered.iter().any(|name| name.starts_with("broken_")), "{offered:?}");
    }
    assert!(crate::client_sdk::BROKEN.iter().all(|name| stderr.contains(name)), "{stderr}");
}

#[tokio::test]
async fn ask_gives_invalid_arguments_back_to_the_model_without_calling_the_tool() {
    let fake = FakeLlm::start().await;
    fake.script(
        Wire::OpenAi,
        [
            Reply::ToolCalls(vec![("search".to_owned(), json!({"limit": 5}))]),
            Reply::Text("Sorry.".to_owned()),
        ],
    );
    let log = tempfile::NamedTempFile::new().unwrap();
    let server = format!("env FIXTURE_CALL_LOG={} {}", log.path().display(), awkward_path());
    let (code, stdout, stderr) =
        run(&bare().with_fake_llm(&fake), &["ask", "Search", "--stdio", &server]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "Sorry.");
    assert_eq!(fake.violations(), Vec::<String>::new());
    assert_eq!(
        std::fs::read_to_string(log.path()).unwrap(),
        "",
        "the invalid call never reached the server"
    );
    let requests = openai_requests(&fake);
    let last = requests[1]["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "tool");
    assert!(
        last["content"].as_str().unwrap().contains("\\\"query\\\" is a required property"),
        "{last}"
    );
}

#[tokio::test]
async fn ask_stops_at_the_step_limit_with_a_clear_message() {
    let fake = FakeLlm::start().await;
    let call = || Reply::ToolCalls(vec![("search".to_owned(), json!({"query": "again"}))]);
    fake.script(Wire::OpenAi, [call(), call(), call()]);
    let (code, stdout, stderr) = run(
        &bare().with_fake_llm(&fake),
        &["ask", "Loop", "--stdio", &awkward_path(), "--max-steps", "2"],
    );
    assert_eq!(code, 1);
    assert_eq!(stdout, "");
    assert!(stderr.contains("no answer after 2 steps"), "{stderr}");
    assert_eq!(openai_requests(&fake).len(), 2);
    assert_eq!(fake.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn ask_reports_a_server_that_crashes_mid_loop() {
    let fake = FakeLlm::start().await;
    fake.script(
        Wire::OpenAi,
        [
            Reply::ToolCalls(vec![("search".to_owned(), json!({"query": "first"}))]),
            Reply::ToolCalls(vec![("crash".to_owned(), json!({}))]),
            Reply::Text("unreachable".to_owned()),
        ],
    );
    let (code, stdout, stderr) =
        run(&bare().with_fake_llm(&fake), &["ask", "Crash", "--stdio", &awkward_path()]);
    assert_eq!(code, 1);
    assert_eq!(stdout, "");
    assert!(
        stderr.contains("calling `crash`") && stderr.contains("exited with status 3"),
        "{stderr}"
    );
    assert_eq!(openai_requests(&fake).len(), 2);
}

#[tokio::test]
async fn ask_never_confirms_a_write_on_its_own() {
    let database = TestDatabase::create().await;
    let pool = database.connect().await;
    sqlx::query("CREATE TABLE notes (id int)").execute(&pool).await.unwrap();
    let fake = FakeLlm::start().await;
    let write = json!({"sql": "INSERT INTO notes VALUES (1)", "dry_run": false, "read_only": false, "confirmation_token": "forged-or-real"});
    fake.script(
        Wire::OpenAi,
        [
            Reply::ToolCalls(vec![("execute_sql".to_owned(), write)]),
            Reply::Text("Not written.".to_owned()),
        ],
    );
    let setup = OrcaSetup::new(&database.url).with_fake_llm(&fake);
    let (code, stdout, stderr) = run(&setup, &["ask", "Add a note", "--include", "execute_sql"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "Not written.");
    assert!(stderr.contains("there is no terminal to ask for confirmation"), "{stderr}");
    let requests = openai_requests(&fake);
    assert_eq!(requests[0]["tools"].as_array().unwrap().len(), 1);
    let last = requests[1]["messages"].as_array().unwrap().last().unwrap().clone();
    assert!(last["content"].as_str().unwrap().contains("refused"), "{last}");
    let count: i64 =
        sqlx::query_scalar("SELECT count(*) FROM notes").fetch_one(&pool).await.unwrap();
    assert_eq!(count, 0);
    assert_eq!(fake.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn the_fake_refuses_malformed_tools_and_tool_messages_like_the_real_api() {
    let fake = FakeLlm::start().await;
    fake.script(Wire::OpenAi, [Reply::ToolCalls(vec![("echo".to_owned(), json!({"text": "hi"}))])]);
    let http = reqwest::Client::new();
    let url = format!("{}/chat/completions", fake.openai_base_url());
    let post = |body: Value| {
        http.post(&url).bearer_auth(crate::support::fake_llm::OPENAI_KEY).json(&body).send()
    };
    let echo = json!({"type": "function", "function": {"name": "echo", "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}});
    let user = json!({"role": "user", "content": "hi"});
    let answer: Value = post(json!({"model": "m", "messages": [user], "tools": [echo]}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let call = answer["choices"][0]["message"]["tool_calls"][0].clone();
    assert_eq!(call["function"]["name"], "echo");
    assert_eq!(answer["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(fake.violations(), Vec::<String>::new());

    let assistant = json!({"role": "assistant", "content": null, "tool_calls": [call]});
    let answered = json!({"role": "tool", "tool_call_id": call["id"], "content": "hi"});
    let cases = [
        (json!([user, assistant, answered]), json!([echo]), None),
        (json!([user, assistant]), json!([echo]), Some("did not have response messages")),
        (
            json!([user, answered]),
            json!([echo]),
            Some("must be a response to a preceeding message"),
        ),
        (
            json!([user, assistant, {"role": "tool", "tool_call_id": "call_made_up", "content": "x"}]),
            json!([echo]),
            Some("was not issued"),
        ),
        (
            json!([user]),
            json!([{"type": "function", "function": {"name": "a.b", "parameters": {"type": "object", "properties": {}}}}]),
            Some("does not match pattern"),
        ),
        (
            json!([user]),
            json!([{"type": "function", "function": {"name": "x".repeat(65)}}]),
            Some("maximum length 64"),
        ),
        (
            json!([user]),
            json!([{"type": "function", "function": {"name": "bare", "parameters": {"type": "object"}}}]),
            Some("object schema missing properties"),
        ),
        (
            json!([user]),
            json!([{"type": "function", "function": {"name": "union", "parameters": {"anyOf": [{"type": "object", "properties": {}}]}}}]),
            Some("at the top level"),
        ),
        (
            json!([user]),
            json!([{"type": "function", "function": {"name": "loose", "strict": true, "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}}]),
            Some("'additionalProperties' is required"),
        ),
        (json!([user]), json!([echo, echo]), Some("duplicate function name")),
        (
            json!([user]),
            json!([{"type": "function", "function": {"name": "typo", "parameters": {"type": "object", "properties": {"a": {"type": "strnig"}}}}}]),
            Some("\"strnig\" is not valid under any of the given schemas"),
        ),
        (
            json!([user]),
            json!([{"type": "function", "function": {"name": "number", "parameters": {"type": "object", "properties": {"a": {"type": 5}}}}}]),
            Some("5 is not valid under any of the given schemas"),
        ),
        (
            json!([user]),
            json!([{"type": "function", "function": {"name": "bound", "parameters": {"type": "object", "properties": {"n": {"type": "integer", "minimum": "x"}}}}}]),
            Some("/properties/n/minimum"),
        ),
    ];
    for (messages, tools, expected) in cases {
        let before = fake.violations().len();
        fake.script(Wire::OpenAi, [Reply::Text("ok".to_owned())]);
        let status = post(json!({"model": "m", "messages": messages, "tools": tools}))
            .await
            .unwrap()
            .status();
        let violations = fake.violations()[before..].to_vec();
        match expected {
            None => assert!(status.is_success() && violations.is_empty(), "{violations:?}"),
            Some(expected) => {
                assert_eq!(status, 400, "{expected}");
                assert!(
                    violations.iter().any(|line| line.contains(expected)),
                    "{expected}: {violations:?}"
                );
            }
        }
    }
}

#[tokio::test]
async fn ask_speaks_anthropics_tool_use_through_orcas_provider_settings() {
    let fake = FakeLlm::start().await;
    let names = awkward_names().await;
    let dotted = names.cleaned("db.query").unwrap().to_owned();
    fake.script(
        Wire::Anthropic,
        [
            Reply::ToolCalls(vec![
                (dotted, json!({"sql": "SELECT 2"})),
                ("search".to_owned(), json!({})),
            ]),
            Reply::Text("Two.".to_owned()),
        ],
    );
    let log = tempfile::NamedTempFile::new().unwrap();
    let server = format!("env FIXTURE_CALL_LOG={} {}", log.path().display(), awkward_path());
    let (code, stdout, stderr) = run(
        &bare().with_fake_llm(&fake),
        &[
            "ask",
            "What is two?",
            "--stdio",
            &server,
            "--provider",
            "anthropic",
            "--model",
            "claude-test",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "Two.");
    assert_eq!(fake.violations(), Vec::<String>::new());
    let requests: Vec<Value> = fake
        .requests()
        .into_iter()
        .filter(|request| request.wire == Wire::Anthropic)
        .map(|request| request.body)
        .collect();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0]["model"], "claude-test");
    assert_eq!(requests[0]["tools"].as_array().unwrap().len(), 12);
    let results = requests[1]["messages"][2]["content"].as_array().unwrap().clone();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["type"], "tool_result");
    assert!(results[0]["content"].as_str().unwrap().contains("db.query"), "{results:?}");
    // The call without its required `query` came back as an error the model can read.
    assert_eq!(results[1]["is_error"], true);
    assert!(results[1]["content"].as_str().unwrap().contains("required property"), "{results:?}");
    let calls = std::fs::read_to_string(log.path()).unwrap();
    assert_eq!(calls.lines().count(), 1, "{calls}");
    assert!(calls.contains("\"tool\":\"db.query\""), "{calls}");
}

#[tokio::test]
async fn ask_with_a_refused_key_fails_without_showing_the_key() {
    let fake = FakeLlm::start().await;
    let setup = bare().with_fake_llm(&fake).with_env("OPENAI_API_KEY", "sk-orca-wrong-key-0815");
    let (code, stdout, stderr) = run(&setup, &["ask", "Hello?", "--stdio", &awkward_path()]);
    assert_eq!(code, 1);
    assert_eq!(stdout, "");
    assert!(stderr.contains("the model request failed"), "{stderr}");
    assert!(!stderr.contains("sk-orca-wrong-key-0815"), "{stderr}");
}
