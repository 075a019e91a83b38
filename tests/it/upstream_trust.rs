//! What an external server that asks for OAuth may make orca do: its 401s and metadata are
//! hostile (`support::hostile`). A client secret configured for one authorization server
//! (`oauth.issuer`) goes to no other, however the upstream names one; what an upstream names is
//! fetched only on its own origin, its issuer's or an allowed host (`oauth.allowed_hosts`), and
//! a refusal reads the same whatever listens where it pointed.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::hostile::{Answer, Hostile, authorization_server};
use crate::support::{OrcaSetup, TestDatabase, call, text_of};

/// The `status` of `name` in the proxy's `list_servers`.
pub(crate) async fn status_of(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    name: &str,
) -> String {
    let servers = call(client, "list_servers", json!({}), None).await.unwrap();
    let servers: Value = serde_json::from_str(&text_of(&servers)).unwrap();
    servers["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|server| server["name"] == name)
        .and_then(|server| server["status"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// Wait until the status of `name` has been refused at least twice (a reconnect came and was
/// refused as well) and holds `expected`; the status.
async fn refused_twice(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    name: &str,
    expected: &str,
) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let status = status_of(client, name).await;
        if status.contains(expected) && !status.contains("attempt 1)") {
            return status;
        }
        assert!(std::time::Instant::now() < deadline, "`{name}` is never refused twice: {status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_secret_goes_only_to_the_configured_issuer_whatever_the_upstream_names() {
    // The authorization server the client is registered with, and two upstreams: one names
    // itself as the authorization server, the other names the configured issuer, whose
    // metadata then names a token endpoint on that upstream.
    let issuer = Hostile::start(|_| Vec::new()).await;
    let names_itself = Hostile::own_authorization_server(None).await;
    let names_issuer = Hostile::own_authorization_server(Some(&issuer.url(""))).await;
    issuer.set(
        "/.well-known/oauth-authorization-server",
        Answer::Json(authorization_server(&issuer.url(""), &names_issuer.url(""))),
    );
    let database = TestDatabase::create().await;
    let proxy_setup = OrcaSetup::new(&database.url)
        .with_env("UP_SECRET", "the-client-secret")
        .with_external(&format!(
            "mcps:\n  itself:\n    url: {}\n    timeout: 5s\n    oauth:\n      mode: service\n      client_id: orca-app\n      client_secret_env: UP_SECRET\n      issuer: {}\n  issuer:\n    url: {}\n    timeout: 5s\n    oauth:\n      mode: service\n      client_id: orca-app\n      client_secret_env: UP_SECRET\n      issuer: {}\n",
            names_itself.url("/mcp"),
            issuer.url(""),
            names_issuer.url("/mcp"),
            issuer.url(""),
        ));
    let proxy = proxy_setup.http_server(&[]);
    let client = proxy.client(None).await;

    let status = refused_twice(&client, "itself", "oauth.issuer").await;
    assert!(
        status.contains(&format!("the authorization server {}/ is not", names_itself.url("")))
            && status.contains(&issuer.url("")),
        "{status}"
    );
    let status = refused_twice(&client, "issuer", "oauth.issuer").await;
    assert!(
        status.contains(&format!("the token endpoint on {} is not", names_issuer.url(""))),
        "{status}"
    );

    // Nothing reached a token endpoint, and no request anywhere carried the credentials.
    for party in [&names_itself, &names_issuer, &issuer] {
        let seen = party.seen();
        assert!(party.seen_at("/token").is_empty(), "{seen:#?}");
        assert!(seen.iter().all(|seen| seen.method == "GET" || seen.target == "/mcp"), "{seen:#?}");
        assert!(seen.iter().all(|seen| seen.authorization.is_none()), "{seen:#?}");
    }
    client.cancel().await.unwrap();
    let log = proxy.log_text();
    assert!(!log.contains("the-client-secret"), "the secret in the proxy's log:\n{log}");
}

/// `text` with every port of `127.0.0.1` replaced by `PORT`.
fn without_ports(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("127.0.0.1:") {
        let (before, after) = rest.split_at(at + "127.0.0.1:".len());
        out.push_str(before);
        out.push_str("PORT");
        rest = after.trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out.push_str(rest);
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn what_an_upstream_names_is_fetched_only_on_its_origin_or_an_allowed_host_and_is_no_oracle()
{
    // An internal service that must never be reached, and a port where nothing listens.
    let internal = Hostile::start(|_| {
        vec![("/internal-admin/purge".to_owned(), Answer::Json(json!({"purged": true})))]
    })
    .await;
    let closed = crate::oauth_upstream::free_port();
    let admin = |base: &str| format!("{base}/internal-admin/purge?confirm=yes");
    // Two upstreams whose 401 points there, one whose metadata names it as the authorization
    // server, and one that names an authorization server on a host the entry allows.
    let to_open = Hostile::upstream_pointing_at(&admin(&internal.url(""))).await;
    let to_closed =
        Hostile::upstream_pointing_at(&admin(&format!("http://127.0.0.1:{closed}"))).await;
    let names_internal = Hostile::own_authorization_server(Some(&internal.url(""))).await;
    let allowed_server = Hostile::start(|base| {
        vec![(
            "/.well-known/oauth-authorization-server".to_owned(),
            Answer::Json(authorization_server(base, base)),
        )]
    })
    .await;
    let names_allowed = Hostile::own_authorization_server(Some(&allowed_server.url(""))).await;
    // orca signs in to the first two as itself, at start; people sign in to the other two.
    let service = |name: &str, upstream: &Hostile| {
        format!(
            "  {name}:\n    url: {}\n    timeout: 5s\n    oauth:\n      mode: service\n      client_id: orca-app\n      client_secret_env: UP_SECRET\n      issuer: {}\n",
            upstream.url("/mcp"),
            upstream.url(""),
        )
    };
    let per_user = |name: &str, upstream: &Hostile, allowed: &str| {
        format!(
            "  {name}:\n    url: {}\n    timeout: 5s\n    oauth:\n      mode: per_user\n      allowed_hosts: [{allowed}]\n",
            upstream.url("/mcp"),
        )
    };
    let database = TestDatabase::create().await;
    let proxy_setup = OrcaSetup::new(&database.url)
        .with_env("UP_SECRET", "the-client-secret")
        .with_external(&format!(
            "mcps:\n{}{}{}{}",
            service("open", &to_open),
            service("closed", &to_closed),
            per_user("internal", &names_internal, ""),
            per_user("allowed", &names_allowed, &format!("\"{}\"", allowed_server.host())),
        ));
    let proxy = proxy_setup.http_server(&[]);
    let client = proxy.client(None).await;

    let open = refused_twice(&client, "open", "refused: ").await;
    assert!(
        open.contains(&format!("refused: {} is not the upstream's origin", internal.host())),
        "{open}"
    );
    assert!(!open.contains("confirm=yes") && !open.contains("purged"), "{open}");
    // Whether the port listens or not, the status reads the same: it says nothing learnt there.
    let closed_status = refused_twice(&client, "closed", "refused: ").await;
    assert_eq!(without_ports(&open), without_ports(&closed_status));
    // A person's sign-in discovers the authorization server: one the upstream names on
    // another host is refused unfetched, one on an allowed host is asked.
    let sign_in = |name: &str| {
        let url = proxy.url(&format!("/console/api/upstreams/{name}/sign-in"));
        async move {
            let response = reqwest::Client::new().post(url).send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    let (status, body) = sign_in("internal").await;
    assert_eq!(status, 502, "{body}");
    assert!(
        body.contains(&format!("refused: {} is not the upstream's origin", internal.host())),
        "{body}"
    );
    let (status, body) = sign_in("allowed").await;
    assert_eq!(status, 502, "the allowed server has no registration endpoint: {body}");
    assert!(body.contains("registration"), "{body}");
    assert_eq!(allowed_server.seen_at("/.well-known/oauth-authorization-server").len(), 1);

    assert!(internal.seen().is_empty(), "the internal service was reached: {:#?}", internal.seen());
    client.cancel().await.unwrap();
}

const ALICE: &str = "alice-key-0123456789abcdef0123456789";
const BOB: &str = "bob-key-0123456789abcdef0123456789ab";
const MALLORY: &str = "mallory-key-0123456789abcdef012345";

/// `POST /console/api/upstreams/<name>/sign-in` as `key`: the status, the body, the binding
/// cookie (`name=value`) and the request's `state`, when it started.
async fn start_sign_in(
    proxy: &crate::support::orca::HttpServer,
    name: &str,
    key: &str,
) -> (u16, String, Option<(String, String)>) {
    let response = reqwest::Client::new()
        .post(proxy.url(&format!("/console/api/upstreams/{name}/sign-in")))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let cookie = response
        .headers()
        .get("set-cookie")
        .map(|value| value.to_str().unwrap().split(';').next().unwrap().to_owned());
    let body = response.text().await.unwrap();
    let started = cookie.map(|cookie| {
        let answer: Value = serde_json::from_str(&body).unwrap();
        let address = url::Url::parse(answer["authorization_url"].as_str().unwrap()).unwrap();
        let state = address.query_pairs().find(|(name, _)| name == "state").unwrap().1;
        (cookie, state.into_owned())
    });
    (status, body, started)
}

#[tokio::test(flavor = "multi_thread")]
async fn one_caller_can_neither_block_everyones_sign_ins_nor_start_one_its_role_hides() {
    // A per-user upstream that is its own authorization server and registers every client.
    let upstream = Hostile::own_authorization_server(None).await;
    upstream.set("/register", Answer::Json(json!({"client_id": "registered"})));
    let hash = |key: &str| hex::encode(<sha2::Sha256 as sha2::Digest>::digest(key.as_bytes()));
    let database = TestDatabase::create().await;
    let proxy_setup = OrcaSetup::new(&database.url)
        .with_config(&format!(
            "auth:\n  api_keys:\n    - name: alice\n      sha256: {}\n      role: analyst\n    - name: bob\n      sha256: {}\n      role: analyst\n    - name: mallory\n      sha256: {}\n      role: outsider\n  roles:\n    analyst:\n      verbs: [read]\n      tools: [\"up_*\", \"list_servers\"]\n    outsider:\n      verbs: [read]\n      tools: [\"*\", \"!server:up\"]\n",
            hash(ALICE),
            hash(BOB),
            hash(MALLORY)
        ))
        .with_external(&format!(
            "mcps:\n  up:\n    url: {}\n    timeout: 5s\n    oauth:\n      mode: per_user\n",
            upstream.url("/mcp")
        ));
    let proxy = proxy_setup.http_server(&[]);
    let registrations = || upstream.seen_at("/register").len();

    // A role that may not use the server does not see it, and cannot start a sign-in to it,
    // however often it tries: the authorization server hears nothing.
    let listed: Value = reqwest::Client::new()
        .get(proxy.url("/console/api/upstreams"))
        .bearer_auth(MALLORY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["upstreams"], json!([]), "{listed}");
    for _ in 0..20 {
        let (status, body, _) = start_sign_in(&proxy, "up", MALLORY).await;
        assert_eq!(status, 404, "{body}");
    }
    assert!(upstream.seen().is_empty(), "{:#?}", upstream.seen());

    // alice has a small share of the waiting sign-ins; bob is not held up by hers.
    let listed: Value = reqwest::Client::new()
        .get(proxy.url("/console/api/upstreams"))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["upstreams"][0]["name"], "up", "{listed}");
    for round in 0..5 {
        let (status, body, _) = start_sign_in(&proxy, "up", ALICE).await;
        assert_eq!(status, 200, "sign-in {round}: {body}");
    }
    let (status, body, _) = start_sign_in(&proxy, "up", ALICE).await;
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("you have 5 sign-ins waiting"), "{body}");
    assert_eq!(registrations(), 5, "alice's sixth sign-in reached the authorization server");
    let (status, body, started) = start_sign_in(&proxy, "up", BOB).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(registrations(), 6);

    // A way back without bob's cookie takes nothing: bob's own browser still finishes it (the
    // code goes to the token endpoint, which refuses this made-up code).
    let (cookie, state) = started.unwrap();
    let browser =
        reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let back = proxy.url(&format!("/oauth/upstream/callback?code=made-up&state={state}"));
    let location =
        |response: reqwest::Response| response.headers()["location"].to_str().unwrap().to_owned();
    let stranger = browser.get(&back).send().await.unwrap();
    assert_eq!(location(stranger), "/?sign_in_error=other_browser");
    let wrong = browser.get(&back).header("cookie", "orca_upstream_sign_in=forged").send().await;
    assert_eq!(location(wrong.unwrap()), "/?sign_in_error=other_browser");
    assert!(upstream.seen_at("/token").is_empty());
    let own = browser.get(&back).header("cookie", &cookie).send().await.unwrap();
    assert_eq!(location(own), "/?sign_in_error=failed");
    assert_eq!(upstream.seen_at("/token").len(), 1, "bob's sign-in was still waiting");
    let again = browser.get(&back).header("cookie", &cookie).send().await.unwrap();
    assert_eq!(location(again), "/?sign_in_error=expired", "single use");
}
