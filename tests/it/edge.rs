//! Bad input at the HTTP edge, through the real binary over real sockets: oversized, deeply
//! nested, invalid and batched bodies, unknown methods and sessions, a missing `Accept`, foreign
//! origins, a slow client, idle connections past the limit and guessed API keys (on `/mcp` and the
//! console's session endpoint, directly and behind a trusted reverse proxy). Each test also shows
//! that a normal client is still served.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::orca::HttpServer;
use crate::support::{OrcaSetup, TestDatabase, call};

const KEY: &str = "orca_edge_test_key";

/// A normal client still gets its answer.
async fn still_serves(server: &HttpServer, key: Option<&str>) {
    let client = server.client(key).await;
    let result = call(&client, "list_servers", json!({}), None).await.unwrap();
    assert_eq!(result.structured_content.as_ref().unwrap()["servers"][0]["name"], "orca");
    client.cancel().await.unwrap();
}

async fn post_mcp(server: &HttpServer, body: Vec<u8>) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(server.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

fn host_port(server: &HttpServer) -> String {
    server.base.trim_start_matches("http://").to_owned()
}

#[tokio::test]
async fn oversized_deep_invalid_and_batched_bodies_get_a_clear_4xx_and_others_are_still_served() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url).with_config("http:\n  max_body_bytes: 65536\n");
    let server = setup.http_server(&[]);

    let padding = "x".repeat(70_000);
    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": padding}});
    let (status, body) = post_mcp(&server, serde_json::to_vec(&big).unwrap()).await;
    assert_eq!(status, 413, "{body}");

    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let (status, body) = post_mcp(&server, deep.into_bytes()).await;
    assert_eq!(status, 400, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["error"]["code"], -32700);
    assert!(body.contains("deeper than 64"), "{body}");
    assert_eq!(answer["error"]["data"]["error"]["code"], "INVALID_INPUT", "{body}");

    let (status, body) =
        post_mcp(&server, b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\"}".to_vec()).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("not valid UTF-8"), "{body}");

    let (status, body) = post_mcp(&server, b"{\"jsonrpc\":".to_vec()).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("not valid JSON"), "{body}");

    let batch = json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]);
    let (status, body) = post_mcp(&server, serde_json::to_vec(&batch).unwrap()).await;
    assert_eq!(status, 400, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["error"]["code"], -32600);
    assert!(body.contains("batches are not accepted"), "{body}");

    let unknown = json!({"jsonrpc": "2.0", "id": 7, "method": "no/such_method"});
    let (status, body) = post_mcp(&server, serde_json::to_vec(&unknown).unwrap()).await;
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["id"], 7, "{body}");
    assert_eq!(answer["error"]["code"], -32601, "status {status}: {body}");

    let response = reqwest::Client::new()
        .post(server.url("/mcp"))
        .header("content-type", "application/json")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 406);
    assert!(response.text().await.unwrap().contains("text/event-stream"));

    still_serves(&server, None).await;
}

#[tokio::test]
async fn unknown_session_ids_get_404_and_foreign_origins_get_403() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url);
    let server = setup.http_server(&["--stateful"]);
    let http = reqwest::Client::new();
    let response = http
        .post(server.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-session-id", "00000000000000000000000000000000")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 404, "clients re-initialize on 404");

    for path in ["/mcp", "/console/api/executions"] {
        let response = http
            .post(server.url(path))
            .header("origin", "http://evil.example")
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 403, "{path}");
        assert!(response.text().await.unwrap().contains("Origin is not allowed"));
    }
    still_serves(&server, None).await;
}

#[tokio::test]
async fn a_client_sending_headers_one_byte_per_second_is_cut_off_by_the_header_timeout() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url).with_config("http:\n  header_timeout_ms: 1500\n");
    let server = setup.http_server(&[]);
    let stream = TcpStream::connect(host_port(&server)).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let request = format!("GET /healthz HTTP/1.1\r\nhost: {}\r\nx-slow: ", host_port(&server));
    let dripping = tokio::spawn(async move {
        for byte in request.bytes().chain(std::iter::repeat_n(b'a', 20)) {
            if writer.write_all(&[byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    let started = Instant::now();
    // Meanwhile, everyone else is served.
    still_serves(&server, None).await;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(8), reader.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the slow connection was still open after 8 s");
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(8), "{elapsed:?}");
    let text = String::from_utf8_lossy(&answer);
    assert!(!text.contains("200 OK"), "a request that never completed was answered: {text}");
    dripping.abort();
    still_serves(&server, None).await;
}

#[tokio::test]
async fn a_thousand_idle_connections_meet_the_connection_limit_with_503() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url)
        .with_config("http:\n  max_connections: 40\n  header_timeout_ms: 60000\n");
    let server = setup.http_server(&[]);
    let address = host_port(&server);
    let mut idle = Vec::new();
    for _ in 0..1_000 {
        idle.push(TcpStream::connect(&address).await.unwrap());
    }
    let mut refused = 0;
    let mut held = Vec::new();
    for mut stream in idle {
        let mut buffer = vec![0u8; 4096];
        match tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buffer)).await {
            Ok(Ok(read)) if read > 0 => {
                let text = String::from_utf8_lossy(&buffer[..read]).into_owned();
                assert!(text.starts_with("HTTP/1.1 503"), "{text}");
                assert!(text.to_ascii_lowercase().contains("retry-after: 1"), "{text}");
                assert!(text.contains("http.max_connections"), "{text}");
                refused += 1;
            }
            Ok(other) => panic!("a connection ended without an answer: {other:?}"),
            Err(_) => held.push(stream),
        }
    }
    assert_eq!(held.len(), 40, "the first connections up to the limit are kept open");
    assert_eq!(refused, 960);

    // A held connection is served when it finally sends a request.
    let mut first = held.remove(0);
    first
        .write_all(format!("GET /healthz HTTP/1.1\r\nhost: {address}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut buffer = vec![0u8; 4096];
    let read = tokio::time::timeout(Duration::from_secs(5), first.read(&mut buffer))
        .await
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&buffer[..read]).starts_with("HTTP/1.1 200"));

    // Once idle connections go away, new clients are served again.
    held.truncate(20);
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = reqwest::Client::new().get(server.url("/healthz")).send().await;
        if answer.is_ok_and(|response| response.status().is_success()) {
            break;
        }
        assert!(Instant::now() < deadline, "slots were not freed after connections closed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    still_serves(&server, None).await;
}

async fn status_from(from: IpAddr, url: &str, authorization: &str) -> (u16, Option<String>) {
    status_through(from, url, authorization, &[]).await
}

/// POST a ping to `url` from the local address `from`, with extra headers (what a reverse proxy
/// adds), and return the status and `Retry-After`.
async fn status_through(
    from: IpAddr,
    url: &str,
    authorization: &str,
    headers: &[(&str, &str)],
) -> (u16, Option<String>) {
    let mut request = reqwest::Client::builder()
        .local_address(from)
        .build()
        .unwrap()
        .post(url)
        .header("authorization", authorization)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response =
        request.body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).send().await.unwrap();
    let retry_after =
        response.headers().get("retry-after").map(|value| value.to_str().unwrap().to_owned());
    (response.status().as_u16(), retry_after)
}

/// `GET /console/api/session` from the local address `from`: the status, `Retry-After` and
/// the body.
async fn session_from(
    from: IpAddr,
    server: &HttpServer,
    authorization: Option<&str>,
) -> (u16, Option<String>, Value) {
    let mut request = reqwest::Client::builder()
        .local_address(from)
        .build()
        .unwrap()
        .get(server.url("/console/api/session"));
    if let Some(authorization) = authorization {
        request = request.header("authorization", authorization);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let retry_after =
        response.headers().get("retry-after").map(|value| value.to_str().unwrap().to_owned());
    (status, retry_after, response.json().await.unwrap())
}

fn keyed_setup(database: &TestDatabase, http: &str) -> OrcaSetup {
    let hash = hex::encode(Sha256::digest(KEY.as_bytes()));
    OrcaSetup::new(&database.url).with_config(&format!(
        "http:\n  auth_failures_per_minute: 10\n{http}auth:\n  api_keys:\n    - name: analyst\n      sha256: {hash}\n      verbs: [read]\n"
    ))
}

#[tokio::test]
async fn ten_thousand_guessed_api_keys_are_throttled_with_429_per_address_and_per_key() {
    let database = TestDatabase::create().await;
    let server = keyed_setup(&database, "").http_server(&[]);
    let url = server.url("/mcp");
    let guesser: IpAddr = "127.0.0.2".parse().unwrap();
    let client = reqwest::Client::builder().local_address(guesser).build().unwrap();
    let started = std::time::Instant::now();
    let statuses: Vec<(u16, Option<String>)> = futures::stream::iter(0..10_000)
        .map(|guess| {
            let request = client
                .post(&url)
                .header("authorization", format!("Bearer guess-{guess}"))
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
            async move {
                let response = request.send().await.unwrap();
                let retry_after = response
                    .headers()
                    .get("retry-after")
                    .map(|value| value.to_str().unwrap().to_owned());
                (response.status().as_u16(), retry_after)
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    let unauthorized = statuses.iter().filter(|(status, _)| *status == 401).count();
    let throttled: Vec<&Option<String>> =
        statuses.iter().filter(|(status, _)| *status == 429).map(|(_, retry)| retry).collect();
    // The limit is per minute: on a machine slow enough for the guesses to take longer, each
    // further minute lets another ten through.
    let minutes = started.elapsed().as_secs() as usize / 60 + 1;
    assert!(
        (10..=10 * minutes).contains(&unauthorized),
        "{unauthorized} guesses were checked in {minutes} minute(s)"
    );
    assert_eq!(unauthorized + throttled.len(), 10_000);
    for retry_after in throttled {
        let seconds: u64 = retry_after.as_deref().unwrap().parse().unwrap();
        assert!((1..=60).contains(&seconds), "{seconds}");
    }

    // Guessing on the console's session endpoint gets the same 429 once the address is over.
    let (status, retry_after, _) = session_from(guesser, &server, Some("Bearer guess-x")).await;
    assert_eq!(status, 429);
    assert!(retry_after.is_some());

    // The right key is still served from that address (a NAT, a proxy), on `/mcp` and the
    // console's API alike: only what fails to authenticate is refused.
    let (status, _) = status_from(guesser, &url, &format!("Bearer {KEY}")).await;
    assert_eq!(status, 200);
    let console = client
        .get(server.url("/console/api/executions"))
        .header("authorization", format!("Bearer {KEY}"))
        .send()
        .await
        .unwrap();
    assert_eq!(console.status().as_u16(), 200);
    let (status, _, session) = session_from(guesser, &server, Some(&format!("Bearer {KEY}"))).await;
    assert_eq!((status, &session["authenticated"]), (200, &json!(true)));
    let (status, _, session) = session_from(guesser, &server, None).await;
    assert_eq!((status, &session["authenticated"]), (200, &json!(false)), "no key, no guess");

    // One wrong key tried from many addresses is blocked by key.
    for last in 10..20u8 {
        let (status, _) = status_from(IpAddr::from([127, 0, 0, last]), &url, "Bearer same").await;
        assert_eq!(status, 401);
    }
    let (status, retry_after) =
        status_from("127.0.0.30".parse().unwrap(), &url, "Bearer same").await;
    assert_eq!(status, 429);
    assert!(retry_after.is_some());
    let (status, _) = status_from("127.0.0.30".parse().unwrap(), &url, "Bearer other").await;
    assert_eq!(status, 401, "another key from a fresh address is still checked");

    // Everyone else is still served, and no guessed key reached the log.
    still_serves(&server, Some(KEY)).await;
    let log = server.log_text();
    assert!(!log.contains("guess-") && !log.contains(KEY), "a key reached the log");
}

#[tokio::test]
async fn keys_guessed_on_the_console_session_endpoint_count_toward_the_throttle() {
    let database = TestDatabase::create().await;
    let server = keyed_setup(&database, "").http_server(&[]);
    let guesser: IpAddr = "127.0.0.40".parse().unwrap();
    for guess in 0..10 {
        let (status, _, session) =
            session_from(guesser, &server, Some(&format!("Bearer guess-{guess}"))).await;
        assert_eq!(status, 200);
        assert_eq!(session["key_refused"], true);
    }
    let (status, retry_after, _) = session_from(guesser, &server, Some("Bearer guess-10")).await;
    assert_eq!(status, 429);
    let seconds: u64 = retry_after.unwrap().parse().unwrap();
    assert!((1..=60).contains(&seconds), "{seconds}");
    let (status, _) = status_from(guesser, &server.url("/mcp"), "Bearer guess-11").await;
    assert_eq!(status, 429, "the guesses on the console counted for /mcp too");
    let (status, _) = status_from(guesser, &server.url("/mcp"), &format!("Bearer {KEY}")).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn clients_behind_a_trusted_proxy_are_throttled_apart_and_others_cannot_spoof_an_address() {
    let database = TestDatabase::create().await;
    let server = keyed_setup(&database, "  trusted_proxies: ['127.0.0.50', '10.0.0.0/8']\n")
        .http_server(&[]);
    let url = server.url("/mcp");
    let proxy: IpAddr = "127.0.0.50".parse().unwrap();
    let mut guess = 0;
    let mut next_guess = || {
        guess += 1;
        format!("Bearer guess-{guess}")
    };

    // One client behind the proxy uses up its limit; written as the proxy appends it, after
    // whatever the client sent itself.
    let first = [("x-forwarded-for", "198.51.100.7, 203.0.113.1, 10.1.2.3")];
    for _ in 0..10 {
        assert_eq!(status_through(proxy, &url, &next_guess(), &first).await.0, 401);
    }
    let (status, retry_after) = status_through(proxy, &url, &next_guess(), &first).await;
    assert_eq!((status, retry_after.is_some()), (429, true));
    // The same client named the RFC 7239 way is the same client.
    let forwarded = [("forwarded", "for=203.0.113.1;proto=https")];
    assert_eq!(status_through(proxy, &url, &next_guess(), &forwarded).await.0, 429);
    // Another client behind the same proxy is checked, and its right key served by all.
    let second = [("x-forwarded-for", "203.0.113.2")];
    assert_eq!(status_through(proxy, &url, &next_guess(), &second).await.0, 401);
    let ipv6 = [("forwarded", r#"for="[2001:db8::3]:4711""#)];
    assert_eq!(status_through(proxy, &url, &next_guess(), &ipv6).await.0, 401);
    assert_eq!(status_through(proxy, &url, &format!("Bearer {KEY}"), &first).await.0, 200);

    // A peer that is not a trusted proxy is its own address, whatever X-Forwarded-For says.
    let spoofer: IpAddr = "127.0.0.51".parse().unwrap();
    for attempt in 0..10 {
        let spoofed = format!("192.0.2.{attempt}");
        let header = [("x-forwarded-for", spoofed.as_str())];
        assert_eq!(status_through(spoofer, &url, &next_guess(), &header).await.0, 401);
    }
    let fresh = [("x-forwarded-for", "192.0.2.200"), ("forwarded", "for=192.0.2.201")];
    assert_eq!(status_through(spoofer, &url, &next_guess(), &fresh).await.0, 429);
    still_serves(&server, Some(KEY)).await;
}

/// A request with two `Host` headers, written by hand (clients send one): the status line.
async fn status_with_two_hosts(server: &HttpServer, first: &str, second: &str) -> String {
    let mut stream = TcpStream::connect(host_port(server)).await.unwrap();
    let request = format!(
        "GET /healthz HTTP/1.1\r\nhost: {first}\r\nhost: {second}\r\nconnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("no answer to two Host headers")
        .unwrap();
    String::from_utf8_lossy(&answer).lines().next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn two_host_headers_are_refused_and_a_sign_in_redirects_only_to_orcas_own_address() {
    let provider = crate::oauth::Provider::start_with(
        "key-1",
        "RS256",
        300,
        Some("http://127.0.0.1:9/".into()),
    );
    let database = TestDatabase::create().await;
    let port = crate::oauth_upstream::free_port();
    let upstream_url = format!("http://127.0.0.1:{port}/mcp");
    let upstream_setup = crate::oauth::setup_for(
        &database,
        &provider.issuer(),
        &upstream_url,
        "    analyst:\n      verbs: [read]\n",
        "verbs: [read]",
    );
    let _upstream = upstream_setup.http_command(&["serve", "--http", &format!("127.0.0.1:{port}")]);
    let proxy_database = TestDatabase::create().await;
    let proxy = keyed_setup(&proxy_database, "  allowed_hosts: ['*', 'localhost']\n")
        .with_external(&format!(
            "mcps:\n  up:\n    url: {upstream_url}\n    timeout: 10s\n    oauth:\n      mode: per_user\n      issuer: {}\n",
            provider.issuer()
        ))
        .http_server(&[]);
    let own = host_port(&proxy);
    let proxy_port = own.rsplit_once(':').unwrap().1.to_owned();

    // Two Host headers: which one a proxy in front routed by is unknown, so neither is used.
    for (first, second) in [(own.as_str(), "evil.example"), ("evil.example", own.as_str())] {
        let status = status_with_two_hosts(&proxy, first, second).await;
        assert!(status.starts_with("HTTP/1.1 400"), "{first}, {second}: {status}");
    }
    let status = status_with_two_hosts(&proxy, &own, &own).await;
    assert!(status.starts_with("HTTP/1.1 400"), "the same one twice: {status}");

    // Without http.public_url, the redirect URI is built from a Host only when it is orca's own
    // address: a name allowed by name (not through `*`) with the port orca listens on.
    let sign_in = |host: String| {
        let url = proxy.url("/console/api/upstreams/up/sign-in");
        async move {
            let response = reqwest::Client::new()
                .post(url)
                .header("host", host)
                .bearer_auth(KEY)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    for host in [format!("evil.example:{proxy_port}"), "localhost:1".to_owned(), "localhost".into()]
    {
        let (status, body) = sign_in(host.clone()).await;
        assert_eq!(status, 400, "{host}: {body}");
        assert!(body["error"]["hint"].as_str().unwrap().contains("http.public_url"), "{body}");
    }
    let (status, body) = sign_in(format!("localhost:{proxy_port}")).await;
    assert_eq!(status, 200, "{body}");
    let address = url::Url::parse(body["authorization_url"].as_str().unwrap()).unwrap();
    let redirect_uri = address
        .query_pairs()
        .find(|(name, _)| name == "redirect_uri")
        .map(|(_, value)| value.into_owned());
    assert_eq!(
        redirect_uri.as_deref(),
        Some(format!("http://localhost:{proxy_port}/oauth/upstream/callback").as_str())
    );
    still_serves(&proxy, Some(KEY)).await;
}

/// Send `head` (a request's head, maybe announcing a body it never sends) on a connection of
/// its own and read what comes back within `wait`: the answer's head, or `None` when none came.
async fn head_answer(
    server: &HttpServer,
    head: &str,
    wait: Duration,
) -> (TcpStream, Option<String>) {
    let mut stream = TcpStream::connect(host_port(server)).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(wait, async {
        let mut buffer = [0u8; 4096];
        while !answer.windows(4).any(|window| window == b"\r\n\r\n") {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(read) => answer.extend_from_slice(&buffer[..read]),
            }
        }
    })
    .await;
    let answer =
        (read.is_ok() && !answer.is_empty()).then(|| String::from_utf8_lossy(&answer).into_owned());
    (stream, answer)
}

/// A `POST /mcp` head with `authorization` that announces a body of `length` bytes.
fn announcing(server: &HttpServer, authorization: &str, length: usize, extra: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nhost: {}\r\nauthorization: {authorization}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {length}\r\n{extra}\r\n",
        host_port(server)
    )
}

#[tokio::test]
async fn refused_credentials_that_announce_a_body_are_answered_at_once_and_hold_no_slot() {
    let database = TestDatabase::create().await;
    let hash = hex::encode(Sha256::digest(KEY.as_bytes()));
    let yaml = format!(
        "http:\n  max_connections: 8\n  header_timeout_ms: 60000\n  body_timeout_ms: 60000\n\
         auth:\n  api_keys:\n    - name: analyst\n      sha256: {hash}\n      verbs: [read]\n  \
         oauth:\n    issuer: http://127.0.0.1:9\n    resource: https://orca.test/mcp\n"
    );
    let server = OrcaSetup::new(&database.url).with_config(&yaml).http_server(&[]);
    // As many as the limit: a token that is no signed JWT, and a wrong API key, each with a
    // body announced and never sent. Each is answered 401 without waiting for it.
    let mut held = Vec::new();
    for attempt in 0..8 {
        let authorization = if attempt % 2 == 0 {
            "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.".to_owned()
        } else {
            format!("Bearer wrong-key-{attempt}")
        };
        let head = announcing(&server, &authorization, 100, "");
        let (stream, answer) = head_answer(&server, &head, Duration::from_secs(10)).await;
        let answer =
            answer.unwrap_or_else(|| panic!("{authorization}: no answer, the body is awaited"));
        assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
        held.push(stream);
    }
    // The connections the client keeps open hold no slot: the next caller is served.
    still_serves(&server, Some(KEY)).await;
    drop(held);
}

#[tokio::test]
async fn a_body_that_never_arrives_is_cut_off_and_one_too_large_is_refused_before_continue() {
    let database = TestDatabase::create().await;
    let server = keyed_setup(
        &database,
        "  max_connections: 4\n  max_body_bytes: 65536\n  body_timeout_ms: 1000\n",
    )
    .http_server(&[]);
    let bearer = format!("Bearer {KEY}");
    // An admitted caller that announces a body and sends none: 408 once http.body_timeout_ms
    // has passed, and the connection is closed.
    let head = announcing(&server, &bearer, 100, "");
    let (_, answer) = head_answer(&server, &head, Duration::from_secs(20)).await;
    let answer = answer.expect("a body that never came was still awaited");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("connection: close"), "{answer}");
    // A body half sent is cut off the same way.
    let (mut stream, answer) =
        head_answer(&server, &announcing(&server, &bearer, 100, ""), Duration::from_millis(1))
            .await;
    assert_eq!(answer, None);
    stream.write_all(br#"{"jsonrpc":"2.0","#).await.unwrap();
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut rest))
        .await
        .expect("a body half sent was still awaited")
        .unwrap();
    assert!(String::from_utf8_lossy(&rest).starts_with("HTTP/1.1 408"));

    // A body declared larger than http.max_body_bytes: 413 at once, and no `100 Continue`
    // invites it, with a key or without one.
    for authorization in [bearer.as_str(), "Bearer wrong-key"] {
        let head = announcing(&server, authorization, 10_000_000, "expect: 100-continue\r\n");
        let (_, answer) = head_answer(&server, &head, Duration::from_secs(10)).await;
        let answer = answer.expect("no answer to a body declared too large");
        assert!(answer.starts_with("HTTP/1.1 413"), "{authorization}: {answer}");
    }
    still_serves(&server, Some(KEY)).await;
}
