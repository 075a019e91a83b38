//! A fake Weaviate: one HTTP server speaking Weaviate's REST API the way the real one does
//! (the shapes of research notes B.2 and B.3): readiness and meta, the schema with a
//! multi-tenant collection, tenants with statuses, batch upserts with per-object errors inside a
//! 200, objects by id (404 with no body), batch deletes with dry runs, API keys with a read-only
//! role (401 and 403 bodies), and `POST /v1/graphql`, whose queries are parsed with a real GraphQL
//! parser and checked in `fake_weaviate_graphql.rs`. Requests that break the wire's rules are
//! recorded as violations; tests assert there are none.
//!
//! Like the fake LLM it runs on a thread and runtime of its own; `stop` closes its port and
//! `restart` opens the same port again with the same data, as a restarted Weaviate would.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::fake_weaviate_graphql;

/// The key with every permission.
pub(crate) const ADMIN_KEY: &str = "weaviate-admin-key-7f3c";
/// The key of a role that may read but not write.
pub(crate) const READER_KEY: &str = "weaviate-reader-key-91ab";
/// The OpenAI key the `text2vec-openai` collections need in `X-Openai-Api-Key`.
pub(crate) const VECTORIZER_KEY: &str = "sk-vectorizer-fake-55e1";
/// The version `/v1/meta` reports.
pub(crate) const VERSION: &str = "1.36.0";

/// Fixed UUIDs of the seeded objects.
pub(crate) const APPLE_ID: &str = "9f0c1c5e-0000-5000-8000-000000000001";
pub(crate) const BANANA_ID: &str = "9f0c1c5e-0000-5000-8000-000000000002";
pub(crate) const CHERRY_ID: &str = "9f0c1c5e-0000-5000-8000-000000000003";
pub(crate) const NOTE_A_ID: &str = "9f0c1c5e-0000-5000-8000-00000000000a";
pub(crate) const NOTE_B_ID: &str = "9f0c1c5e-0000-5000-8000-00000000000b";

/// One stored object.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub(crate) class: String,
    pub(crate) tenant: Option<String>,
    pub(crate) id: String,
    pub(crate) properties: Map<String, Value>,
    pub(crate) vectors: Map<String, Value>,
    pub(crate) created: i64,
    pub(crate) updated: i64,
}

/// A request the fake received.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) query: Vec<(String, String)>,
    /// Header names in lowercase.
    pub(crate) headers: BTreeMap<String, String>,
    pub(crate) body: Value,
}

#[derive(Debug)]
pub(crate) struct Store {
    pub(crate) classes: Vec<Value>,
    /// Collection -> tenants as (name, activityStatus).
    pub(crate) tenants: BTreeMap<String, Vec<(String, String)>>,
    pub(crate) objects: Vec<Stored>,
    pub(crate) requests: Vec<Received>,
    /// The parsed string arguments of every GraphQL query, for escaping checks: the `query` of
    /// hybrid and bm25, the concepts of nearText, the tenant, and text filter values.
    pub(crate) strings: Vec<String>,
    pub(crate) violations: Vec<String>,
    pub(crate) ready: bool,
    /// When false, anonymous requests are served (Weaviate's anonymous access).
    pub(crate) keys_required: bool,
    /// How long `/v1/meta` takes to answer, as a remote Weaviate's does.
    pub(crate) meta_delay: std::time::Duration,
    clock: i64,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<Store>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Store> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[derive(Debug)]
struct Running {
    shutdown: tokio::sync::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

/// The fake Weaviate on `127.0.0.1`, stopped when dropped.
#[derive(Debug)]
pub(crate) struct FakeWeaviate {
    address: SocketAddr,
    shared: Arc<Shared>,
    running: Mutex<Option<Running>>,
}

impl FakeWeaviate {
    /// Start with the seeded schema and objects, API keys required.
    pub(crate) fn start() -> FakeWeaviate {
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").expect("cannot bind the fake Weaviate");
        let address = listener.local_addr().unwrap();
        let shared = Arc::new(Shared { state: Mutex::new(seed()) });
        let fake = FakeWeaviate { address, shared, running: Mutex::new(None) };
        fake.serve(listener);
        fake
    }

    fn serve(&self, listener: std::net::TcpListener) {
        listener.set_nonblocking(true).unwrap();
        let app = axum::Router::new().fallback(handle).with_state(self.shared.clone());
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("fake-weaviate".to_owned())
            .spawn(move || {
                let runtime =
                    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                    tokio::select! {
                        result = async { axum::serve(listener, app).await } => result.unwrap(),
                        _ = stopped => {}
                    }
                });
            })
            .unwrap();
        *self.running.lock().unwrap() = Some(Running { shutdown, thread });
    }

    /// `http://127.0.0.1:PORT`, the form of `WEAVIATE_URL`.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Close the port: connections are refused until [`FakeWeaviate::restart`].
    pub(crate) fn stop(&self) {
        if let Some(running) = self.running.lock().unwrap().take() {
            let _ = running.shutdown.send(());
            running.thread.join().unwrap();
        }
    }

    /// Serve again on the same port, with the same data.
    pub(crate) fn restart(&self) {
        let listener =
            std::net::TcpListener::bind(self.address).expect("cannot bind the fake Weaviate again");
        self.serve(listener);
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, Store> {
        self.shared.lock()
    }

    pub(crate) fn requests(&self) -> Vec<Received> {
        self.state().requests.clone()
    }

    pub(crate) fn violations(&self) -> Vec<String> {
        self.state().violations.clone()
    }

    /// The GraphQL query texts received, in order.
    pub(crate) fn graphql_queries(&self) -> Vec<String> {
        self.requests()
            .into_iter()
            .filter(|request| request.path == "/v1/graphql")
            .filter_map(|request| {
                request.body.get("query").and_then(Value::as_str).map(str::to_owned)
            })
            .collect()
    }

    /// The objects of a collection (and tenant).
    pub(crate) fn objects(&self, class: &str, tenant: Option<&str>) -> Vec<Stored> {
        self.state()
            .objects
            .iter()
            .filter(|object| object.class == class && object.tenant.as_deref() == tenant)
            .cloned()
            .collect()
    }
}

impl Drop for FakeWeaviate {
    fn drop(&mut self) {
        self.stop();
    }
}

fn text_property(name: &str) -> Value {
    json!({"dataType": ["text"], "indexFilterable": true, "indexRangeFilters": false,
           "indexSearchable": true, "name": name, "tokenization": "word"})
}

fn class(name: &str, vectorizer: &str, multi_tenant: bool, properties: Vec<Value>) -> Value {
    json!({
        "class": name,
        "description": format!("{name} objects"),
        "invertedIndexConfig": {"bm25": {"b": 0.75, "k1": 1.2}, "cleanupIntervalSeconds": 60,
                                "stopwords": {"additions": null, "preset": "en", "removals": null}},
        "multiTenancyConfig": {"autoTenantActivation": false, "autoTenantCreation": false, "enabled": multi_tenant},
        "properties": properties,
        "replicationConfig": {"asyncEnabled": false, "factor": 1},
        "vectorIndexType": "hnsw",
        "vectorizer": vectorizer,
    })
}

fn seed() -> Store {
    let article = class(
        "Article",
        "text2vec-openai",
        false,
        vec![
            text_property("title"),
            text_property("body"),
            json!({"dataType": ["int"], "name": "year"}),
            json!({"dataType": ["boolean"], "name": "published"}),
            json!({"dataType": ["text[]"], "name": "tags", "tokenization": "word"}),
            json!({"dataType": ["object"], "name": "extra", "nestedProperties": [{"dataType": ["text"], "name": "note"}]}),
        ],
    );
    let note = class("Note", "none", true, vec![text_property("text"), text_property("topic")]);
    let mut tenants = BTreeMap::new();
    tenants.insert(
        "Note".to_owned(),
        vec![
            ("tenantA".to_owned(), "ACTIVE".to_owned()),
            ("tenantB".to_owned(), "ACTIVE".to_owned()),
            ("tenantC".to_owned(), "OFFLOADED".to_owned()),
        ],
    );
    let stored =
        |class: &str, tenant: Option<&str>, id: &str, properties: Value, vector: Value| Stored {
            class: class.to_owned(),
            tenant: tenant.map(str::to_owned),
            id: id.to_owned(),
            properties: properties.as_object().unwrap().clone(),
            vectors: if vector.is_null() {
                Map::new()
            } else {
                json!({"default": vector}).as_object().unwrap().clone()
            },
            created: 1_767_225_600_000,
            updated: 1_767_225_600_000,
        };
    let objects = vec![
        stored(
            "Article",
            None,
            APPLE_ID,
            json!({"title": "Apple Inc.", "body": "apple makes phones and computers", "year": 2020, "published": true, "tags": ["tech", "fruit"]}),
            json!([1.0, 0.0, 0.0]),
        ),
        stored(
            "Article",
            None,
            BANANA_ID,
            json!({"title": "Banana bread", "body": "a recipe with banana and apple", "year": 2018, "published": false, "tags": ["food"]}),
            json!([0.0, 1.0, 0.0]),
        ),
        stored(
            "Article",
            None,
            CHERRY_ID,
            json!({"title": "Cherry season", "body": "cherries ripen in june", "year": 2023, "published": true, "tags": ["fruit"]}),
            json!([0.7, 0.7, 0.0]),
        ),
        stored(
            "Note",
            Some("tenantA"),
            NOTE_A_ID,
            json!({"text": "alpha secret plan", "topic": "plans"}),
            Value::Null,
        ),
        stored(
            "Note",
            Some("tenantB"),
            NOTE_B_ID,
            json!({"text": "beta secret plan", "topic": "plans"}),
            Value::Null,
        ),
    ];
    Store {
        classes: vec![article, note],
        tenants,
        objects,
        requests: Vec::new(),
        strings: Vec::new(),
        violations: Vec::new(),
        ready: true,
        keys_required: true,
        meta_delay: std::time::Duration::ZERO,
        clock: 1_767_225_700_000,
    }
}

/// Weaviate's `ErrorResponse`.
pub(crate) fn error_body(status: u16, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap();
    (status, axum::Json(json!({"error": [{"message": message}]}))).into_response()
}

fn no_body(status: u16) -> Response {
    StatusCode::from_u16(status).unwrap().into_response()
}

fn ok(value: Value) -> Response {
    axum::Json(value).into_response()
}

/// Which role a request has, or the 401 Weaviate answers.
fn authenticate(state: &Store, headers: &BTreeMap<String, String>) -> Result<bool, Box<Response>> {
    let unauthorized = |message: &str| {
        (StatusCode::UNAUTHORIZED, axum::Json(json!({"code": 401, "message": message})))
            .into_response()
    };
    let unauthorized = |message: &str| Box::new(unauthorized(message));
    match headers.get("authorization") {
        None if !state.keys_required => Ok(true),
        None => Err(unauthorized(
            "anonymous access not enabled, please provide an auth scheme such as OIDC",
        )),
        Some(value) => match value.strip_prefix("Bearer ") {
            Some(ADMIN_KEY) => Ok(true),
            Some(READER_KEY) => Ok(false),
            _ => Err(unauthorized("unauthorized: invalid api key")),
        },
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let query: Vec<(String, String)> = reqwest::Url::parse(&format!("http://x{uri}"))
        .map(|url| {
            url.query_pairs().map(|(key, value)| (key.into_owned(), value.into_owned())).collect()
        })
        .unwrap_or_default();
    let headers: BTreeMap<String, String> = headers
        .iter()
        .map(|(name, value)| {
            (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned())
        })
        .collect();
    if path == "/v1/meta" {
        let delay = shared.lock().meta_delay;
        tokio::time::sleep(delay).await;
    }
    let mut state = shared.lock();
    let parsed: Option<Value> = if body.is_empty() {
        None
    } else {
        match serde_json::from_slice(&body) {
            Ok(value) => Some(value),
            Err(error) => {
                state.violations.push(format!("{method} {path}: body is not JSON: {error}"));
                return error_body(400, "body is not JSON");
            }
        }
    };
    if parsed.is_some()
        && !headers.get("content-type").is_some_and(|value| value.starts_with("application/json"))
    {
        state
            .violations
            .push(format!("{method} {path}: a JSON body without content-type application/json"));
    }
    state.requests.push(Received {
        method: method.to_string(),
        path: path.clone(),
        query: query.clone(),
        headers: headers.clone(),
        body: parsed.clone().unwrap_or(Value::Null),
    });
    if path == "/v1/.well-known/ready" {
        return if state.ready { ok(json!({})) } else { no_body(503) };
    }
    let may_write = match authenticate(&state, &headers) {
        Ok(may_write) => may_write,
        Err(response) => return *response,
    };
    let tenant = query.iter().find(|(key, _)| key == "tenant").map(|(_, value)| value.clone());
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let writes = method != Method::GET && path != "/v1/graphql";
    if writes && !may_write {
        let action = if method == Method::DELETE { "delete_data" } else { "create_data" };
        return error_body(
            403,
            &format!(
                "forbidden: user 'reader' (role 'viewer') has insufficient permissions to {action} [[Domain: data, Collection: *]]"
            ),
        );
    }
    let body = parsed.unwrap_or(Value::Null);
    match (method.as_str(), segments.as_slice()) {
        ("GET", ["v1", "meta"]) => ok(
            json!({"hostname": "http://[::]:8080", "version": VERSION, "modules": {"text2vec-openai": {}}, "grpcMaxMessageSize": 104_858_000}),
        ),
        ("GET", ["v1", "schema"]) => ok(json!({"classes": state.classes})),
        ("POST", ["v1", "schema"]) => create_class(&mut state, body),
        ("GET", ["v1", "schema", name]) => match find_class(&state, name) {
            Some(class) => ok(class.clone()),
            None => no_body(404),
        },
        ("DELETE", ["v1", "schema", name]) => {
            let name = (*name).to_owned();
            state.classes.retain(|class| class["class"] != name.as_str());
            state.objects.retain(|object| object.class != name);
            state.tenants.remove(&name);
            ok(Value::Null)
        }
        ("GET", ["v1", "schema", name, "tenants"]) => match find_class(&state, name) {
            None => error_body(404, &format!("class {name} not found")),
            Some(class) if class["multiTenancyConfig"]["enabled"] != true => {
                error_body(422, &format!("multi-tenancy is not enabled for class \"{name}\""))
            }
            Some(_) => ok(Value::Array(
                state
                    .tenants
                    .get(*name)
                    .into_iter()
                    .flatten()
                    .map(|(name, status)| json!({"name": name, "activityStatus": status}))
                    .collect(),
            )),
        },
        ("POST", ["v1", "batch", "objects"]) => batch_objects(&mut state, &body),
        ("DELETE", ["v1", "batch", "objects"]) => {
            batch_delete(&mut state, &body, tenant.as_deref())
        }
        ("GET", ["v1", "objects", class, id]) => {
            if let Err(message) = check_tenant(&state, class, tenant.as_deref()) {
                return error_body(422, &message);
            }
            let include_vector =
                query.iter().any(|(key, value)| key == "include" && value == "vector");
            match state.objects.iter().find(|object| {
                object.class == *class && object.id == *id && object.tenant == tenant
            }) {
                Some(object) => ok(object_json(object, include_vector)),
                None => no_body(404),
            }
        }
        ("DELETE", ["v1", "objects", class, id]) => {
            if let Err(message) = check_tenant(&state, class, tenant.as_deref()) {
                return error_body(422, &message);
            }
            let before = state.objects.len();
            state.objects.retain(|object| {
                !(object.class == *class && object.id == *id && object.tenant == tenant)
            });
            if state.objects.len() < before { no_body(204) } else { no_body(404) }
        }
        ("POST", ["v1", "graphql"]) => {
            let Some(query) = body.get("query").and_then(Value::as_str) else {
                return error_body(422, "query cannot be empty");
            };
            let query = query.to_owned();
            let answer = fake_weaviate_graphql::answer(&mut state, &query, &headers);
            ok(answer)
        }
        _ => {
            state.violations.push(format!("unknown endpoint {method} {path}"));
            no_body(404)
        }
    }
}

pub(crate) fn find_class<'a>(state: &'a Store, name: &str) -> Option<&'a Value> {
    state.classes.iter().find(|class| class["class"] == name)
}

/// Weaviate's tenant rules for a class.
pub(crate) fn check_tenant(state: &Store, class: &str, tenant: Option<&str>) -> Result<(), String> {
    let Some(schema) = find_class(state, class) else {
        return Err(format!("class \"{class}\" not found in schema"));
    };
    let multi_tenant = schema["multiTenancyConfig"]["enabled"] == true;
    match (multi_tenant, tenant) {
        (true, None) => {
            Err(format!("class {class} has multi-tenancy enabled, but request was without tenant"))
        }
        (false, Some(_)) => {
            Err(format!("class {class} has multi-tenancy disabled, but request was with tenant"))
        }
        (true, Some(tenant)) => match state
            .tenants
            .get(class)
            .and_then(|tenants| tenants.iter().find(|(name, _)| name == tenant))
        {
            None => Err(format!("tenant not found: \"{tenant}\"")),
            Some((_, status)) if status != "ACTIVE" && status != "HOT" => {
                Err(format!("tenant not active: \"{tenant}\""))
            }
            Some(_) => Ok(()),
        },
        (false, None) => Ok(()),
    }
}

pub(crate) fn object_json(object: &Stored, include_vector: bool) -> Value {
    let mut out = json!({
        "class": object.class, "id": object.id, "properties": object.properties,
        "creationTimeUnix": object.created, "lastUpdateTimeUnix": object.updated,
    });
    if let Some(tenant) = &object.tenant {
        out["tenant"] = Value::from(tenant.clone());
    }
    if include_vector {
        out["vectors"] = Value::Object(object.vectors.clone());
    }
    out
}

fn create_class(state: &mut Store, body: Value) -> Response {
    let Some(name) = body.get("class").and_then(Value::as_str) else {
        return error_body(422, "class name is required");
    };
    if !name.starts_with(|c: char| c.is_ascii_uppercase())
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return error_body(422, &format!("'{name}' is not a valid class name"));
    }
    if find_class(state, name).is_some() {
        return error_body(422, &format!("class name \"{name}\" already exists"));
    }
    for property in body.get("properties").and_then(Value::as_array).into_iter().flatten() {
        if property.get("dataType").and_then(Value::as_array).is_none_or(|types| types.is_empty()) {
            state
                .violations
                .push(format!("POST /v1/schema: property without dataType: {property}"));
            return error_body(422, "property dataType is required");
        }
    }
    let mut class = body.clone();
    class["vectorIndexType"] = Value::from("hnsw");
    if class.get("vectorizer").is_none() {
        class["vectorizer"] = Value::from("none");
    }
    if class["multiTenancyConfig"]["enabled"] == true {
        state.tenants.insert(name.to_owned(), Vec::new());
    }
    state.classes.push(class.clone());
    ok(class)
}

/// Type check of one property value against its data type.
fn fits(data_type: &str, value: &Value) -> bool {
    match data_type {
        "text" | "uuid" | "date" | "blob" => value.is_string(),
        "int" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "text[]" | "uuid[]" | "date[]" => {
            value.as_array().is_some_and(|items| items.iter().all(Value::is_string))
        }
        "int[]" => value.as_array().is_some_and(|items| items.iter().all(|item| item.is_i64())),
        "number[]" => value.as_array().is_some_and(|items| items.iter().all(Value::is_number)),
        "boolean[]" => value.as_array().is_some_and(|items| items.iter().all(Value::is_boolean)),
        _ => true,
    }
}

fn batch_objects(state: &mut Store, body: &Value) -> Response {
    let Some(objects) = body.get("objects").and_then(Value::as_array) else {
        state.violations.push("POST /v1/batch/objects without objects".to_owned());
        return error_body(422, "objects is required");
    };
    let mut answers = Vec::new();
    for object in objects {
        let class = object.get("class").and_then(Value::as_str).unwrap_or_default().to_owned();
        let tenant = object.get("tenant").and_then(Value::as_str).map(str::to_owned);
        let id = object.get("id").and_then(Value::as_str).map(str::to_owned);
        if id.as_deref().is_none_or(|id| uuid::Uuid::parse_str(id).is_err()) {
            state.violations.push(format!("batch object without a UUID id: {object}"));
        }
        let id = id.unwrap_or_default();
        let properties =
            object.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
        let mut problem = check_tenant(state, &class, tenant.as_deref()).err();
        if problem.is_none() {
            let schema = find_class(state, &class).cloned().unwrap_or(Value::Null);
            for (key, value) in &properties {
                let declared = schema["properties"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|property| property["name"] == key.as_str());
                match declared {
                    None => {
                        problem = Some(format!(
                            "no such prop with name '{key}' found in class '{class}' in the schema. Check your schema files for which properties in this class are available"
                        ))
                    }
                    Some(property) => {
                        let data_type = property["dataType"][0].as_str().unwrap_or_default();
                        if !fits(data_type, value) {
                            problem = Some(format!(
                                "invalid {data_type} property '{key}' on class '{class}': not a {data_type}"
                            ));
                        }
                    }
                }
            }
        }
        let mut answer = object.clone();
        match problem {
            Some(message) => {
                answer["result"] =
                    json!({"status": "FAILED", "errors": {"error": [{"message": message}]}});
            }
            None => {
                state.clock += 1;
                let now = state.clock;
                let vectors =
                    object.get("vectors").and_then(Value::as_object).cloned().unwrap_or_default();
                match state.objects.iter_mut().find(|stored| {
                    stored.class == class && stored.id == id && stored.tenant == tenant
                }) {
                    Some(stored) => {
                        stored.properties = properties;
                        stored.vectors = vectors;
                        stored.updated = now;
                    }
                    None => state.objects.push(Stored {
                        class,
                        tenant,
                        id,
                        properties,
                        vectors,
                        created: now,
                        updated: now,
                    }),
                }
                answer["result"] = json!({"status": "SUCCESS"});
            }
        }
        answers.push(answer);
    }
    ok(Value::Array(answers))
}

fn batch_delete(state: &mut Store, body: &Value, tenant: Option<&str>) -> Response {
    let (Some(class), Some(filter)) =
        (body.pointer("/match/class").and_then(Value::as_str), body.pointer("/match/where"))
    else {
        state
            .violations
            .push(format!("DELETE /v1/batch/objects without match.class and match.where: {body}"));
        return error_body(422, "validate: match.class and match.where are required");
    };
    if let Err(message) = check_tenant(state, class, tenant) {
        return error_body(422, &message);
    }
    if let Err(message) = fake_weaviate_graphql::check_rest_filter(filter) {
        state.violations.push(format!("DELETE /v1/batch/objects: {message}"));
        return error_body(422, &message);
    }
    let dry_run = body.get("dryRun").and_then(Value::as_bool).unwrap_or(false);
    let matching: Vec<String> = state
        .objects
        .iter()
        .filter(|object| object.class == class && object.tenant.as_deref() == tenant)
        .filter(|object| fake_weaviate_graphql::matches(filter, &object.properties))
        .map(|object| object.id.clone())
        .collect();
    let matches = matching.len();
    if !dry_run {
        state.objects.retain(|object| {
            !(object.class == class
                && object.tenant.as_deref() == tenant
                && matching.contains(&object.id))
        });
    }
    ok(json!({
        "match": body["match"], "output": body.get("output").cloned().unwrap_or(Value::from("minimal")), "dryRun": dry_run,
        "results": {"matches": matches, "limit": 10000, "successful": if dry_run { 0 } else { matches }, "failed": 0, "objects": null},
    }))
}
