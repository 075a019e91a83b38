//! A fake Metabase: one HTTP server that speaks the API the `metabase` server uses with the real
//! request and response shapes (sessions and API keys, `Unauthenticated` as plain text, the
//! generic 403/404 strings, 400 validation maps, HTTP 202 for queries that failed, the login
//! throttle, 0.46 and 0.50 dashboards), checks every request body the way Metabase would
//! (`parameters` arrays, `template-tags`, whole `dashcards` lists), records each request, and
//! keeps the objects it is asked to create, change and delete.
//!
//! Like the fake LLM server it runs on a thread and runtime of its own, so a test that blocks
//! its runtime cannot stall it. Dropping the `FakeMetabase` stops it.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

pub(crate) const USERNAME: &str = "analyst@example.com";
pub(crate) const PASSWORD: &str = "Corr3ct-Horse-Battery";
/// An API key of the Administrators group.
pub(crate) const API_KEY: &str = "mb_AdminKeyZ2V0LXRoZS1rZXk=";
/// An API key of a group that may only view (Metabase answers 403 to its writes).
pub(crate) const READ_ONLY_API_KEY: &str = "mb_ViewerKeyb25seS12aWV3";

/// Rows of the `big` table; the fake, like Metabase, returns at most 2,000 of them.
pub(crate) const BIG_ROWS: usize = 5_000;
const USERLAND_LIMIT: usize = 2_000;

/// A card the fake user may not touch: every request on it is a 403.
pub(crate) const FORBIDDEN_CARD: i64 = 13;

/// Which Metabase the fake is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Version {
    /// 0.46: `ordered_cards`, no tabs, `POST /api/dashboard/:id/cards`.
    V046,
    /// 0.50: `dashcards` and `tabs`, replaced whole through `PUT /api/dashboard/:id`.
    V050,
}

/// A request the fake received.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) query: Vec<(String, String)>,
    pub(crate) body: Value,
    /// The session id or API key it carried, if any.
    pub(crate) credential: Option<String>,
    pub(crate) at: Instant,
}

#[derive(Debug)]
pub(crate) struct FakeMetabase {
    address: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeMetabase {
    /// Start a fake of `version` on a free port of 127.0.0.1.
    pub(crate) fn start(version: Version) -> FakeMetabase {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("cannot bind the fake");
        listener.set_nonblocking(true).expect("cannot make the listener non-blocking");
        let address = listener.local_addr().expect("the listener has no address");
        let shared = Arc::new(Shared { state: Mutex::new(Inner::seeded(version)) });
        let app = axum::Router::new().fallback(handle).with_state(shared.clone());
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("fake-metabase".to_owned())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("cannot build the fake's runtime");
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                    tokio::select! {
                        result = async { axum::serve(listener, app).await } => result.unwrap(),
                        _ = stopped => {}
                    }
                });
            })
            .expect("cannot start the fake's thread");
        FakeMetabase { address, shared, shutdown: Some(shutdown), thread: Some(thread) }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Every session stops being valid (as after `MAX_SESSION_AGE`).
    pub(crate) fn expire_sessions(&self) {
        self.shared.lock().sessions.clear();
    }

    /// The password the fake user now has.
    pub(crate) fn set_password(&self, password: &str) {
        self.shared.lock().password = password.to_owned();
    }

    /// The next `attempts` logins are refused by the throttle, which asks to wait `seconds`.
    pub(crate) fn throttle_logins(&self, attempts: usize, seconds: u64) {
        self.shared.lock().throttle = Some((attempts, seconds));
    }

    /// Every login answer waits this long first (so concurrent calls overlap).
    pub(crate) fn set_login_delay(&self, delay: Duration) {
        self.shared.lock().login_delay = delay;
    }

    /// Every API answer other than a login waits this long first (a slow instance).
    pub(crate) fn set_answer_delay(&self, delay: Duration) {
        self.shared.lock().answer_delay = delay;
    }

    /// Login attempts received (successful or not).
    pub(crate) fn logins(&self) -> usize {
        self.requests().iter().filter(|r| r.method == "POST" && r.path == "/api/session").count()
    }

    pub(crate) fn requests(&self) -> Vec<Received> {
        self.shared.lock().requests.clone()
    }

    /// Requests that broke Metabase's rules, one line each; tests assert this is empty.
    pub(crate) fn violations(&self) -> Vec<String> {
        self.shared.lock().violations.clone()
    }

    /// A dashboard as the fake holds it.
    /// Let a replacing `PUT` leave out `dashcard`: the test asked orca to remove it. Any other
    /// dashcard left out is still a violation.
    pub(crate) fn expect_removal(&self, dashcard: i64) {
        self.shared.lock().removable.insert(dashcard);
    }

    pub(crate) fn dashboard(&self, id: i64) -> Value {
        self.shared.lock().dashboards.get(&id).cloned().unwrap_or(Value::Null)
    }
}

impl Drop for FakeMetabase {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[derive(Debug)]
struct Shared {
    state: Mutex<Inner>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[derive(Debug)]
struct Inner {
    version: Version,
    password: String,
    sessions: HashSet<String>,
    throttle: Option<(usize, u64)>,
    /// Logins before this instant are refused again (and recorded as violations).
    throttled_until: Option<Instant>,
    login_delay: Duration,
    answer_delay: Duration,
    dashboards: BTreeMap<i64, Value>,
    cards: BTreeMap<i64, Value>,
    collections: BTreeMap<i64, Value>,
    next_id: i64,
    requests: Vec<Received>,
    violations: Vec<String>,
    /// Dashcards a replacing `PUT` may leave out (a test asked orca to remove them).
    removable: HashSet<i64>,
}

fn fingerprint() -> Value {
    json!({"global": {"distinct-count": 4321, "nil%": 0.0},
           "type": {"type/Number": {"min": 1.0, "max": 9999.0, "avg": 512.5, "q1": 100.0, "q3": 900.0, "sd": 42.0}}})
}

fn field(id: i64, table_id: i64, name: &str, base_type: &str, semantic: Option<&str>) -> Value {
    json!({"id": id, "table_id": table_id, "name": name, "display_name": name.to_uppercase(),
           "base_type": base_type, "effective_type": base_type, "semantic_type": semantic,
           "fk_target_field_id": null, "visibility_type": "normal", "position": 0,
           "fingerprint": fingerprint(), "fingerprint_version": 5,
           "last_analyzed": "2026-01-01T00:00:00Z", "has_field_values": "list",
           "values": {"field_id": id, "values": [[1], [2], [3]], "has_more_values": false},
           "dimension_options": [{"name": "Day", "mbql": ["field", null, {"temporal-unit": "day"}], "type": "type/Date"}]})
}

fn table(id: i64, name: &str) -> Value {
    json!({"id": id, "db_id": 1, "name": name, "display_name": name, "schema": "public",
           "description": null, "entity_type": "entity/TransactionTable", "active": true,
           "visibility_type": null,
           "fields": [field(id * 10, id, "id", "type/Integer", Some("type/PK")),
                      field(id * 10 + 1, id, "total", "type/Float", None)]})
}

fn native_card(id: i64, name: &str, query: &str, tags: Value) -> Value {
    json!({"id": id, "name": name, "description": null, "display": "table", "type": "question",
           "collection_id": 1, "archived": false, "visualization_settings": {}, "parameters": [],
           "dataset_query": {"database": 1, "type": "native", "native": {"query": query, "template-tags": tags}},
           "result_metadata": [{"name": "n", "display_name": "N", "base_type": "type/Integer", "fingerprint": fingerprint()}],
           "creator_id": 1, "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"})
}

impl Inner {
    fn seeded(version: Version) -> Inner {
        let mut cards = BTreeMap::new();
        cards.insert(
            1,
            native_card(1, "Orders count", "SELECT count(*) AS n FROM orders", json!({})),
        );
        cards.insert(2, native_card(2, "Big table", "SELECT * FROM big", json!({})));
        cards.insert(
            3,
            native_card(
                3,
                "Orders by category",
                "SELECT * FROM orders WHERE category = {{category}}",
                json!({"category": {"id": "b86c100e-87cb-09d6-7c33-e58cd2cdbcb2", "name": "category",
                                    "display-name": "Category", "type": "number", "required": true}}),
            ),
        );
        cards.insert(
            FORBIDDEN_CARD,
            native_card(FORBIDDEN_CARD, "Salaries", "SELECT * FROM salaries", json!({})),
        );
        let mut collections = BTreeMap::new();
        collections.insert(
            1,
            json!({"id": 1, "name": "Analytics", "description": null, "location": "/",
                   "can_write": true, "archived": false, "is_personal": false, "authority_level": null}),
        );
        let mut inner = Inner {
            version,
            password: PASSWORD.to_owned(),
            sessions: HashSet::new(),
            throttle: None,
            throttled_until: None,
            login_delay: Duration::ZERO,
            answer_delay: Duration::ZERO,
            dashboards: BTreeMap::new(),
            cards,
            collections,
            next_id: 100,
            requests: Vec::new(),
            violations: Vec::new(),
            removable: HashSet::new(),
        };
        let tabs = match version {
            Version::V046 => Value::Null,
            Version::V050 => {
                json!([{"id": 5, "dashboard_id": 1, "name": "Overview", "position": 0},
                                    {"id": 6, "dashboard_id": 1, "name": "Details", "position": 1}])
            }
        };
        let tab = |id: i64| if version == Version::V050 { json!(id) } else { Value::Null };
        let dashcards = vec![
            inner.dashcard(1, 1, 1, tab(5), 0, 0, 4, 4),
            inner.dashcard(2, 1, 2, tab(6), 0, 0, 6, 4),
        ];
        let mut dashboard = json!({"id": 1, "name": "Sales", "description": "", "collection_id": 1,
            "archived": false, "can_write": true, "cache_ttl": null, "auto_apply_filters": true,
            "enable_embedding": false, "public_uuid": null, "parameters": []});
        inner.store_dashcards(&mut dashboard, dashcards, tabs);
        inner.dashboards.insert(1, dashboard);
        inner
    }

    #[allow(clippy::too_many_arguments, reason = "a dashcard is these numbers")]
    fn dashcard(
        &self,
        id: i64,
        dashboard: i64,
        card: i64,
        tab: Value,
        row: i64,
        col: i64,
        size_x: i64,
        size_y: i64,
    ) -> Value {
        let nested = self.cards.get(&card).map_or(
            Value::Null,
            |card| json!({"id": card["id"], "name": card["name"], "display": card["display"]}),
        );
        let mut dashcard = json!({"id": id, "dashboard_id": dashboard, "card_id": card,
            "row": row, "col": col, "size_x": size_x, "size_y": size_y, "series": [],
            "parameter_mappings": [], "visualization_settings": {}, "card": nested,
            "created_at": "2026-01-01T12:30:30.000000", "updated_at": "2026-01-01T12:30:30.000000"});
        if self.version == Version::V050 {
            dashcard["dashboard_tab_id"] = tab;
        }
        dashcard
    }

    /// Keep dashcards (and tabs) under the key this version uses.
    fn store_dashcards(&self, dashboard: &mut Value, dashcards: Vec<Value>, tabs: Value) {
        match self.version {
            Version::V046 => dashboard["ordered_cards"] = Value::Array(dashcards),
            Version::V050 => {
                dashboard["dashcards"] = Value::Array(dashcards);
                dashboard["tabs"] = if tabs.is_null() { json!([]) } else { tabs };
            }
        }
    }

    fn dashcards_of(&self, dashboard: &Value) -> Vec<Value> {
        let key = if self.version == Version::V046 { "ordered_cards" } else { "dashcards" };
        dashboard[key].as_array().cloned().unwrap_or_default()
    }

    fn id(&mut self) -> i64 {
        self.next_id += 1;
        self.next_id
    }
}

fn json_response(status: u16, body: Value) -> Response {
    (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
}

fn text_response(status: u16, text: &'static str) -> Response {
    (StatusCode::from_u16(status).unwrap(), [(header::CONTENT_TYPE, "text/plain")], text)
        .into_response()
}

fn forbidden() -> Response {
    json_response(403, json!("You don't have permissions to do that."))
}

fn not_found() -> Response {
    json_response(404, json!("Not found."))
}

fn no_endpoint() -> Response {
    json_response(404, json!("API endpoint does not exist."))
}

/// A 400 the way Metabase's schema validation answers.
fn invalid(key: &str, message: &str, specific: &str) -> Response {
    json_response(400, json!({"errors": {key: message}, "specific-errors": {key: [specific]}}))
}

fn non_blank(body: &Value, key: &str) -> bool {
    body.get(key).and_then(Value::as_str).is_some_and(|text| !text.trim().is_empty())
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().trim_end_matches('/').to_owned();
    let query: Vec<(String, String)> = uri
        .query()
        .map(|query| {
            query
                .split('&')
                .filter_map(|pair| pair.split_once('='))
                .map(|(key, value)| (key.to_owned(), value.replace('+', " ").replace("%20", " ")))
                .collect()
        })
        .unwrap_or_default();
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let session = header("x-metabase-session");
    let api_key = header("x-api-key");
    let parsed: Option<Value> =
        if body.is_empty() { None } else { serde_json::from_slice(&body).ok() };
    {
        let mut inner = shared.lock();
        inner.requests.push(Received {
            method: method.to_string(),
            path: path.clone(),
            query: query.clone(),
            body: parsed.clone().unwrap_or(Value::Null),
            credential: session.clone().or_else(|| api_key.clone()),
            at: Instant::now(),
        });
        if !body.is_empty() && parsed.is_none() {
            inner.violations.push(format!("{method} {path}: the body is not JSON"));
            return json_response(400, json!({"message": "Malformed JSON in request body."}));
        }
        if !body.is_empty()
            && header("content-type").is_none_or(|value| !value.starts_with("application/json"))
        {
            inner.violations.push(format!(
                "{method} {path}: a JSON body without content-type application/json"
            ));
        }
    }
    let body = parsed.unwrap_or(Value::Null);
    if method == Method::POST && path == "/api/session" {
        return login(&shared, &body).await;
    }
    if method == Method::GET && path == "/api/session/properties" {
        let tag = match shared.lock().version {
            Version::V046 => "v0.46.6",
            Version::V050 => "v0.50.3",
        };
        return json_response(
            200,
            json!({"version": {"tag": tag, "date": "2026-01-01", "branch": "release", "hash": "abc1234"},
                                          "site-name": "Fake Metabase", "setup-token": null}),
        );
    }
    let delay = shared.lock().answer_delay;
    tokio::time::sleep(delay).await;
    let mut inner = shared.lock();
    let read_only = match (&session, &api_key) {
        (Some(session), _) if inner.sessions.contains(session) => false,
        (None, Some(key)) if key == API_KEY => false,
        (None, Some(key)) if key == READ_ONLY_API_KEY => true,
        _ => return text_response(401, "Unauthenticated"),
    };
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let is_query = matches!(segments.as_slice(), ["api", "dataset"] | ["api", "card", _, "query"]);
    if read_only && method != Method::GET && !is_query {
        return forbidden();
    }
    route(&mut inner, &method, &segments, &query, &body)
}

async fn login(shared: &Shared, body: &Value) -> Response {
    let delay = shared.lock().login_delay;
    tokio::time::sleep(delay).await;
    let mut inner = shared.lock();
    if let Some(until) = inner.throttled_until
        && Instant::now() < until
    {
        inner.violations.push("POST /api/session: a login inside the throttle's wait".to_owned());
        let seconds = (until - Instant::now()).as_secs() + 1;
        return json_response(
            400,
            json!({"errors": {"username": format!("Too many attempts! You must wait {seconds} seconds before trying again.")}}),
        );
    }
    if let Some((remaining, seconds)) = inner.throttle
        && remaining > 0
    {
        inner.throttle = Some((remaining - 1, seconds));
        inner.throttled_until = Some(Instant::now() + Duration::from_secs(seconds));
        return json_response(
            400,
            json!({"errors": {"username": format!("Too many attempts! You must wait {seconds} seconds before trying again.")}}),
        );
    }
    for key in ["username", "password"] {
        if !non_blank(body, key) {
            return invalid(
                key,
                "value must be a non-blank string.",
                "should be a non-blank string",
            );
        }
    }
    if body["username"] != USERNAME || body["password"] != inner.password.as_str() {
        return json_response(
            401,
            json!({"errors": {"password": "did not match stored password"}}),
        );
    }
    let id = uuid::Uuid::new_v4().to_string();
    inner.sessions.insert(id.clone());
    json_response(200, json!({"id": id}))
}

fn route(
    inner: &mut Inner,
    method: &Method,
    segments: &[&str],
    query: &[(String, String)],
    body: &Value,
) -> Response {
    let number = |text: &str| text.parse::<i64>().ok();
    match (method.as_str(), segments) {
        ("GET", ["api", "user", "current"]) => json_response(
            200,
            json!({"id": 1, "email": USERNAME, "first_name": "Ana", "last_name": "Lyst", "common_name": "Ana Lyst", "is_superuser": false}),
        ),
        (_, ["api", "dashboard", rest @ ..]) => {
            dashboards(inner, method.as_str(), rest, query, body)
        }
        ("GET" | "PUT" | "DELETE", ["api", "card", id]) => {
            let Some(id) = number(id) else { return not_found() };
            card(inner, method.as_str(), id, body)
        }
        ("POST", ["api", "card"]) => create_card(inner, body),
        ("POST", ["api", "card", id, "query"]) => {
            let Some(card) = number(id).and_then(|id| inner.cards.get(&id).cloned()) else {
                return not_found();
            };
            if card["id"] == FORBIDDEN_CARD {
                return forbidden();
            }
            run_query(inner, &card["dataset_query"], body.get("parameters"), "question")
        }
        ("POST", ["api", "dataset"]) => {
            for key in ["database", "type"] {
                if body.get(key).is_none() {
                    return invalid(key, "value must be present", "missing required key");
                }
            }
            run_query(inner, body, body.get("parameters"), "ad-hoc")
        }
        (_, ["api", "collection", rest @ ..]) => {
            collections(inner, method.as_str(), rest, query, body)
        }
        ("GET", ["api", "database"]) => {
            let with_tables =
                query.iter().any(|(key, value)| key == "include" && value == "tables");
            let mut database = json!({"id": 1, "name": "Sample", "engine": "postgres", "is_sample": false,
                "timezone": "UTC", "initial_sync_status": "complete", "created_at": "2015-01-01T20:10:30.200"});
            if with_tables {
                database["tables"] = json!([table(10, "orders"), table(11, "people")]);
            }
            json_response(200, json!({"data": [database], "total": 1}))
        }
        ("GET", ["api", "database", "1", "metadata"]) => json_response(
            200,
            json!({"id": 1, "name": "Sample", "engine": "postgres", "features": ["basic-aggregations", "foreign-keys"],
                   "details": {"host": "db.internal", "dbname": "sample"},
                   "tables": [table(10, "orders"), table(11, "people")]}),
        ),
        ("GET", ["api", "table", id]) => match number(id) {
            Some(id @ (10 | 11)) => {
                let mut value = table(id, if id == 10 { "orders" } else { "people" });
                value.as_object_mut().unwrap().remove("fields");
                json_response(200, value)
            }
            _ => not_found(),
        },
        ("GET", ["api", "table", id, "query_metadata"]) => match number(id) {
            Some(id @ (10 | 11)) => {
                let mut value = table(id, if id == 10 { "orders" } else { "people" });
                value["db"] = json!({"id": 1, "name": "Sample", "engine": "postgres", "features": ["basic-aggregations"],
                                     "details": {"host": "db.internal"}});
                value["segments"] = json!([]);
                value["metrics"] = json!([]);
                json_response(200, value)
            }
            _ => not_found(),
        },
        ("GET", ["api", "search"]) => search(inner, query),
        _ => no_endpoint(),
    }
}

fn check_parameters(
    inner: &mut Inner,
    where_: &str,
    parameters: Option<&Value>,
) -> Option<Response> {
    match parameters {
        None | Some(Value::Array(_)) => None,
        Some(_) => {
            inner.violations.push(format!("{where_}: `parameters` is not an array"));
            Some(json_response(
                500,
                json!({"message": "Assert failed: (u/maybe? sequential? parameters)"}),
            ))
        }
    }
}

fn check_native(inner: &mut Inner, where_: &str, dataset_query: &Value) {
    if let Some(native) = dataset_query.get("native")
        && native.get("template_tags").is_some()
    {
        inner
            .violations
            .push(format!("{where_}: `template_tags` (Metabase reads `template-tags`)"));
    }
}

fn run_query(
    inner: &mut Inner,
    dataset_query: &Value,
    parameters: Option<&Value>,
    context: &str,
) -> Response {
    if let Some(refused) = check_parameters(inner, "query", parameters) {
        return refused;
    }
    check_native(inner, "query", dataset_query);
    let text = dataset_query
        .pointer("/native/query")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let started = json!({"started_at": "2026-01-01T00:00:00Z", "running_time": 17, "database_id": 1,
                         "context": context, "json_query": dataset_query});
    let failed = |error: &str, extra: Value| {
        let mut body = json!({"data": {"rows": [], "cols": []}, "row_count": 0, "status": "failed",
            "error": error, "state": "42001", "class": "class org.postgresql.util.PSQLException",
            "stacktrace": ["org.postgresql.core.v3.QueryExecutorImpl.receiveErrorResponse(QueryExecutorImpl.java:2713)"]});
        for (key, value) in started.as_object().unwrap().iter().chain(extra.as_object().unwrap()) {
            body[key] = value.clone();
        }
        json_response(202, body)
    };
    if text.contains("{{category}}") {
        let tags = dataset_query.pointer("/native/template-tags").cloned().unwrap_or(json!({}));
        let value = parameters
            .and_then(Value::as_array)
            .and_then(|items| {
                items.iter().find(|p| p.pointer("/target/1/1") == Some(&json!("category")))
            })
            .and_then(|p| p.get("value").cloned());
        return match value {
            Some(Value::Number(n)) => completed(
                &started,
                vec![
                    json!({"name": "category", "display_name": "Category", "base_type": "type/Integer"}),
                ],
                vec![json!([n])],
                0,
            ),
            Some(other) => json_response(
                202,
                json!({"error_type": "invalid-parameter", "status": "failed",
                "error": format!("For input string: {other}"),
                "via": [{"status": "failed", "error": format!("Error determining value for parameter \"category\": For input string: {other}"),
                         "error_type": "invalid-parameter", "ex-data": {"tag": tags["category"], "type": "invalid-parameter"}}],
                "data": {"rows": [], "cols": []}}),
            ),
            None => failed(
                "You'll need to pick a value for 'Category' before this query can run.",
                json!({"error_type": "missing-required-parameter"}),
            ),
        };
    }
    if dataset_query["type"] == "query" {
        return match dataset_query.pointer("/query/source-table").and_then(Value::as_i64) {
            Some(10) => completed(
                &started,
                vec![json!({"name": "id", "display_name": "ID", "base_type": "type/Integer"})],
                vec![json!([1]), json!([2]), json!([3])],
                0,
            ),
            _ => failed("Table not found", json!({})),
        };
    }
    let lower = text.to_lowercase();
    if lower.contains("from big") {
        let rows: Vec<Value> =
            (0..BIG_ROWS.min(USERLAND_LIMIT)).map(|n| json!([n, format!("name {n}")])).collect();
        let cols = vec![
            json!({"name": "n", "display_name": "N", "base_type": "type/Integer"}),
            json!({"name": "label", "display_name": "Label", "base_type": "type/Text"}),
        ];
        return completed(&started, cols, rows, USERLAND_LIMIT);
    }
    if lower.contains("from people") {
        // People with what masking and redaction must catch: an e-mail column, and notes
        // holding card numbers, addresses and an AWS key.
        let cols = vec![
            json!({"name": "id", "display_name": "ID", "base_type": "type/Integer"}),
            json!({"name": "email", "display_name": "Email", "base_type": "type/Text"}),
            json!({"name": "note", "display_name": "Note", "base_type": "type/Text"}),
        ];
        let rows = vec![
            json!([1, "ada@example.com", "paid with 4111 1111 1111 1111 from 203.0.113.9"]),
            json!([2, "alan@example.net", "key AKIAIOSFODNN7EXAMPLE, backup grace@example.org"]),
        ];
        return completed(&started, cols, rows, 0);
    }
    if lower.starts_with("select 1") || lower.contains("count(*)") {
        return completed(
            &started,
            vec![json!({"name": "one", "display_name": "one", "base_type": "type/Integer"})],
            vec![json!([1])],
            0,
        );
    }
    failed(
        &format!(
            "ERROR: syntax error at or near \"{}\"",
            text.split_whitespace().next().unwrap_or("")
        ),
        json!({}),
    )
}

fn completed(started: &Value, cols: Vec<Value>, rows: Vec<Value>, truncated_at: usize) -> Response {
    let full_cols: Vec<Value> = cols
        .iter()
        .map(|col| {
            let mut col = col.clone();
            col["source"] = json!("native");
            col["field_ref"] = json!(["field", col["name"], {"base-type": col["base_type"]}]);
            col["fingerprint"] = fingerprint();
            col
        })
        .collect();
    let mut body = json!({"data": {"rows": rows, "cols": full_cols, "native_form": {"query": started["json_query"].pointer("/native/query"), "params": null},
        "results_timezone": "UTC", "rows_truncated": truncated_at,
        "results_metadata": {"columns": full_cols.clone()}, "insights": null},
        "row_count": rows.len(), "status": "completed", "average_execution_time": null});
    for (key, value) in started.as_object().unwrap() {
        body[key] = value.clone();
    }
    json_response(202, body)
}

fn dashboards(
    inner: &mut Inner,
    method: &str,
    rest: &[&str],
    query: &[(String, String)],
    body: &Value,
) -> Response {
    let number = |text: &str| text.parse::<i64>().ok();
    match (method, rest) {
        ("POST", []) => {
            if !non_blank(body, "name") {
                return invalid(
                    "name",
                    "value must be a non-blank string.",
                    "should be a non-blank string",
                );
            }
            if let Some(refused) = parameters_of_dashboard(body) {
                return refused;
            }
            let id = inner.id();
            let mut dashboard = json!({"id": id, "name": body["name"], "description": body.get("description"),
                "collection_id": body.get("collection_id"), "archived": false, "can_write": true,
                "parameters": body.get("parameters").cloned().unwrap_or(json!([]))});
            inner.store_dashcards(&mut dashboard, Vec::new(), Value::Null);
            inner.dashboards.insert(id, dashboard.clone());
            json_response(200, dashboard)
        }
        ("GET", [id]) => match number(id).and_then(|id| inner.dashboards.get(&id)) {
            Some(dashboard) => json_response(200, dashboard.clone()),
            None => not_found(),
        },
        ("DELETE", [id]) => match number(id).and_then(|id| inner.dashboards.remove(&id)) {
            Some(_) => StatusCode::NO_CONTENT.into_response(),
            None => not_found(),
        },
        ("PUT", [id]) => {
            let Some(id) = number(id).filter(|id| inner.dashboards.contains_key(id)) else {
                return not_found();
            };
            if let Some(refused) = parameters_of_dashboard(body) {
                return refused;
            }
            let mut dashboard = inner.dashboards[&id].clone();
            for key in ["name", "description", "parameters", "collection_id"] {
                if let Some(value) = body.get(key) {
                    dashboard[key] = value.clone();
                }
            }
            if let Some(dashcards) = body.get("dashcards") {
                if inner.version == Version::V046 {
                    inner.violations.push(
                        "PUT /api/dashboard/:id: `dashcards` before 0.48 (ignored by Metabase)"
                            .to_owned(),
                    );
                } else {
                    match replace_dashcards(inner, id, dashcards, body.get("tabs")) {
                        Ok((dashcards, tabs)) => {
                            inner.store_dashcards(&mut dashboard, dashcards, tabs)
                        }
                        Err(refused) => return *refused,
                    }
                }
            }
            inner.dashboards.insert(id, dashboard.clone());
            json_response(200, dashboard)
        }
        ("POST", [id, "cards"]) if inner.version == Version::V046 => {
            let Some(id) = number(id).filter(|id| inner.dashboards.contains_key(id)) else {
                return not_found();
            };
            let Some(card) = body.get("cardId").and_then(Value::as_i64) else {
                return invalid(
                    "cardId",
                    "value may be nil, or if non-nil, value must be an integer greater than zero.",
                    "missing cardId",
                );
            };
            if !inner.cards.contains_key(&card) {
                return not_found();
            }
            let dashcard_id = inner.id();
            let num = |key: &str| body.get(key).and_then(Value::as_i64).unwrap_or(0);
            let dashcard = inner.dashcard(
                dashcard_id,
                id,
                card,
                Value::Null,
                num("row"),
                num("col"),
                num("size_x"),
                num("size_y"),
            );
            let mut dashboard = inner.dashboards[&id].clone();
            let mut dashcards = inner.dashcards_of(&dashboard);
            dashcards.push(dashcard.clone());
            inner.store_dashcards(&mut dashboard, dashcards, Value::Null);
            inner.dashboards.insert(id, dashboard);
            json_response(200, dashcard)
        }
        // Before 0.47: `DELETE /api/dashboard/:id/cards?dashcardId=N`. Metabase deletes dashcard
        // N whichever dashboard holds it, and answers 204 even when there is none: the caller
        // must check that it is on this dashboard.
        ("DELETE", [id, "cards"]) if inner.version == Version::V046 => {
            let Some(id) = number(id).filter(|id| inner.dashboards.contains_key(id)) else {
                return not_found();
            };
            if !body.is_null() {
                inner.violations.push(format!("DELETE /api/dashboard/{id}/cards: a body"));
            }
            let dashcard = match query {
                [(key, value)] if key == "dashcardId" => number(value).filter(|n| *n > 0),
                _ => None,
            };
            let Some(dashcard) = dashcard else {
                return invalid(
                    "dashcardId",
                    "value must be a valid integer greater than zero.",
                    "missing or invalid dashcardId",
                );
            };
            let mut dashboard = inner.dashboards[&id].clone();
            let mut dashcards = inner.dashcards_of(&dashboard);
            let before = dashcards.len();
            dashcards.retain(|card| card["id"] != dashcard);
            if dashcards.len() == before {
                inner.violations.push(format!(
                    "DELETE /api/dashboard/{id}/cards: dashcard {dashcard} is not on the dashboard"
                ));
            }
            inner.store_dashcards(&mut dashboard, dashcards, Value::Null);
            inner.dashboards.insert(id, dashboard);
            StatusCode::NO_CONTENT.into_response()
        }
        _ => no_endpoint(),
    }
}

/// `parameters` of a dashboard: an array of maps with `id` and `type`, as Metabase's schema has it.
fn parameters_of_dashboard(body: &Value) -> Option<Response> {
    let parameters = body.get("parameters")?;
    let valid = parameters.as_array().is_some_and(|items| {
        items.iter().all(|item| item.get("id").is_some() && item.get("type").is_some())
    });
    (!valid).then(|| {
        invalid(
            "parameters",
            "nullable sequence of parameter must be a map with :id and :type keys",
            "invalid type",
        )
    })
}

/// `PUT /api/dashboard/:id` with `dashcards`: the list replaces the dashboard's cards (those left
/// out are deleted, negative ids are created); `tabs` replaces the tabs the same way.
fn replace_dashcards(
    inner: &mut Inner,
    dashboard_id: i64,
    dashcards: &Value,
    tabs: Option<&Value>,
) -> Result<(Vec<Value>, Value), Box<Response>> {
    let Some(items) = dashcards.as_array() else {
        return Err(Box::new(invalid(
            "dashcards",
            "value must be seq of maps in which ids are unique",
            "invalid type",
        )));
    };
    let ids: Vec<i64> =
        items.iter().filter_map(|item| item.get("id").and_then(Value::as_i64)).collect();
    let unique: HashSet<i64> = ids.iter().copied().collect();
    if ids.len() != items.len() || unique.len() != ids.len() {
        return Err(Box::new(invalid(
            "dashcards",
            "value must be seq of maps in which ids are unique",
            "duplicate or missing id",
        )));
    }
    let current = inner.dashcards_of(&inner.dashboards[&dashboard_id]);
    let current_tabs = inner.dashboards[&dashboard_id]["tabs"].clone();
    let kept_tabs = match tabs {
        Some(Value::Array(tabs)) => Value::Array(
            tabs.iter()
                .map(|tab| {
                    let mut full = current_tabs.as_array().and_then(|known| known.iter().find(|known| known["id"] == tab["id"]).cloned())
                        .unwrap_or_else(|| json!({"id": tab["id"], "dashboard_id": dashboard_id, "position": 0}));
                    full["name"] = tab["name"].clone();
                    full
                })
                .collect(),
        ),
        Some(_) => return Err(Box::new(invalid("tabs", "nullable sequence of map", "invalid type"))),
        None => current_tabs,
    };
    let mut out = Vec::new();
    for item in items {
        let id = item["id"].as_i64().unwrap_or_default();
        let Some(card) = item.get("card_id").and_then(Value::as_i64) else {
            return Err(Box::new(invalid(
                "dashcards",
                "value must be seq of maps in which ids are unique",
                "card_id missing",
            )));
        };
        let num = |key: &str| item.get(key).and_then(Value::as_i64).unwrap_or(0);
        let tab = item.get("dashboard_tab_id").cloned().unwrap_or(Value::Null);
        let new_id = if id < 0 {
            inner.id()
        } else if current.iter().any(|existing| existing["id"] == id) {
            id
        } else {
            return Err(Box::new(not_found()));
        };
        out.push(inner.dashcard(
            new_id,
            dashboard_id,
            card,
            tab,
            num("row"),
            num("col"),
            num("size_x"),
            num("size_y"),
        ));
    }
    for gone in current.iter().filter(|existing| {
        let id = existing["id"].as_i64().unwrap_or_default();
        !ids.contains(&id) && !inner.removable.contains(&id)
    }) {
        // Metabase deletes what the list leaves out; tests check that orca never does that.
        inner.violations.push(format!(
            "PUT /api/dashboard/{dashboard_id}: dashcard {} left out and deleted",
            gone["id"]
        ));
    }
    if let (Some(before), Some(after)) =
        (inner.dashboards[&dashboard_id]["tabs"].as_array(), kept_tabs.as_array())
        && after.len() < before.len()
    {
        inner
            .violations
            .push(format!("PUT /api/dashboard/{dashboard_id}: tabs left out and deleted"));
    }
    Ok((out, kept_tabs))
}

fn card(inner: &mut Inner, method: &str, id: i64, body: &Value) -> Response {
    if id == FORBIDDEN_CARD {
        return forbidden();
    }
    if !inner.cards.contains_key(&id) {
        return not_found();
    }
    match method {
        "GET" => json_response(200, inner.cards[&id].clone()),
        "DELETE" => {
            inner.cards.remove(&id);
            StatusCode::NO_CONTENT.into_response()
        }
        _ => {
            if let Some(query) = body.get("dataset_query") {
                check_native(inner, "PUT /api/card/:id", query);
            }
            let mut card = inner.cards[&id].clone();
            for (key, value) in body.as_object().into_iter().flatten() {
                card[key] = value.clone();
            }
            inner.cards.insert(id, card.clone());
            json_response(200, card)
        }
    }
}

fn create_card(inner: &mut Inner, body: &Value) -> Response {
    for key in ["name", "display"] {
        if !non_blank(body, key) {
            return invalid(
                key,
                "value must be a non-blank string.",
                "should be a non-blank string",
            );
        }
    }
    for key in ["dataset_query", "visualization_settings"] {
        if !body.get(key).is_some_and(Value::is_object) {
            return invalid(key, "value must be a map.", "invalid type");
        }
    }
    if let Some(refused) = check_parameters(inner, "POST /api/card", body.get("parameters")) {
        return refused;
    }
    check_native(inner, "POST /api/card", &body["dataset_query"]);
    let id = inner.id();
    let mut card = native_card(id, "", "", json!({}));
    for (key, value) in body.as_object().into_iter().flatten() {
        card[key] = value.clone();
    }
    card["id"] = json!(id);
    inner.cards.insert(id, card.clone());
    json_response(200, card)
}

fn collections(
    inner: &mut Inner,
    method: &str,
    rest: &[&str],
    query: &[(String, String)],
    body: &Value,
) -> Response {
    let number = |text: &str| text.parse::<i64>().ok();
    match (method, rest) {
        // The root collection has no number; Metabase answers it with the id "root".
        ("GET", ["root"]) => json_response(
            200,
            json!({"id": "root", "name": "Our analytics", "description": null, "location": null,
                   "parent_id": null, "can_write": true, "is_personal": false, "authority_level": null,
                   "effective_location": null, "effective_ancestors": []}),
        ),
        ("GET", []) => {
            let archived = query.iter().any(|(key, value)| key == "archived" && value == "true");
            let items: Vec<Value> =
                inner.collections.values().filter(|c| c["archived"] == archived).cloned().collect();
            json_response(200, Value::Array(items))
        }
        ("POST", []) => {
            if !non_blank(body, "name") {
                return invalid(
                    "name",
                    "value must be a non-blank string.",
                    "should be a non-blank string",
                );
            }
            let id = inner.id();
            let location = match body.get("parent_id").and_then(Value::as_i64) {
                Some(parent) if inner.collections.contains_key(&parent) => format!("/{parent}/"),
                Some(_) => return not_found(),
                None => "/".to_owned(),
            };
            let collection = json!({"id": id, "name": body["name"], "description": body.get("description"),
                "location": location, "can_write": true, "archived": false, "is_personal": false, "authority_level": null});
            inner.collections.insert(id, collection.clone());
            json_response(200, collection)
        }
        ("GET", [id]) => match number(id).and_then(|id| inner.collections.get(&id)) {
            Some(collection) => json_response(200, collection.clone()),
            None => not_found(),
        },
        ("PUT", [id]) => {
            let Some(id) = number(id).filter(|id| inner.collections.contains_key(id)) else {
                return not_found();
            };
            let mut collection = inner.collections[&id].clone();
            for key in ["name", "description"] {
                if let Some(value) = body.get(key) {
                    collection[key] = value.clone();
                }
            }
            if let Some(parent) = body.get("parent_id").and_then(Value::as_i64) {
                collection["location"] = json!(format!("/{parent}/"));
            }
            inner.collections.insert(id, collection.clone());
            json_response(200, collection)
        }
        ("GET", [id, "items"]) => {
            let Some(id) = number(id).filter(|id| inner.collections.contains_key(id)) else {
                return not_found();
            };
            let models: Vec<&str> = query
                .iter()
                .filter(|(key, _)| key == "models")
                .map(|(_, value)| value.as_str())
                .collect();
            let mut items = Vec::new();
            for card in inner.cards.values().filter(|card| card["collection_id"] == id) {
                items.push(json!({"id": card["id"], "model": "card", "name": card["name"], "description": null,
                    "collection_position": null, "collection_preview": true, "fully_parameterized": true, "archived": false}));
            }
            for dashboard in inner.dashboards.values().filter(|d| d["collection_id"] == id) {
                items.push(json!({"id": dashboard["id"], "model": "dashboard", "name": dashboard["name"], "description": null}));
            }
            items.retain(|item| {
                models.is_empty() || models.contains(&item["model"].as_str().unwrap_or_default())
            });
            json_response(
                200,
                json!({"total": items.len(), "data": items, "models": models, "limit": null, "offset": null}),
            )
        }
        _ => no_endpoint(),
    }
}

fn search(inner: &Inner, query: &[(String, String)]) -> Response {
    let Some(q) = query.iter().find(|(key, _)| key == "q").map(|(_, value)| value.to_lowercase())
    else {
        return invalid("q", "value must be a non-blank string.", "missing");
    };
    let models: Vec<&str> =
        query.iter().filter(|(key, _)| key == "models").map(|(_, value)| value.as_str()).collect();
    let mut data = Vec::new();
    let mut add = |model: &str, item: &Value| {
        let name = item["name"].as_str().unwrap_or_default();
        if name.to_lowercase().contains(&q) && (models.is_empty() || models.contains(&model)) {
            data.push(json!({"id": item["id"], "name": name, "description": null, "model": model,
                "collection": {"id": 1, "name": "Analytics"}, "archived": false, "can_write": true,
                "database_id": 1, "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"}));
        }
    };
    for card in inner.cards.values() {
        add("card", card);
    }
    for dashboard in inner.dashboards.values() {
        add("dashboard", dashboard);
    }
    for collection in inner.collections.values() {
        add("collection", collection);
    }
    let total = data.len();
    json_response(
        200,
        json!({"data": data, "total": total, "available_models": ["card", "dashboard", "collection"],
        "models": models, "limit": null, "offset": null, "table_db_id": null, "engine": "search.engine/appdb"}),
    )
}
