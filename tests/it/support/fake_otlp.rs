//! A fake OpenTelemetry collector: OTLP/HTTP on `127.0.0.1`, each `POST /v1/traces` decoded as
//! the real protobuf `ExportTraceServiceRequest` (opentelemetry-proto's prost messages) and
//! answered with an `ExportTraceServiceResponse`, as a collector does.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message as _;
use serde_json::Value;

/// One span as the collector received it; ids in lowercase hex.
#[derive(Debug, Clone)]
pub(crate) struct ReceivedSpan {
    pub(crate) service: Option<String>,
    pub(crate) trace_id: String,
    pub(crate) span_id: String,
    /// Empty for a root span.
    pub(crate) parent_span_id: String,
    pub(crate) name: String,
    pub(crate) attributes: BTreeMap<String, Value>,
    /// `Status.code`: 0 unset, 1 ok, 2 error.
    pub(crate) status_code: i32,
}

#[derive(Debug, Default)]
struct Shared {
    spans: Vec<ReceivedSpan>,
    /// Requests that were not OTLP/HTTP protobuf, described.
    violations: Vec<String>,
    requests: usize,
}

/// The collector, serving until dropped.
#[derive(Debug)]
pub(crate) struct FakeCollector {
    address: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    server: tokio::task::JoinHandle<()>,
}

impl FakeCollector {
    /// Listen on `address` (`127.0.0.1:0`: any free port).
    pub(crate) async fn start_on(address: &str) -> FakeCollector {
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .unwrap_or_else(|error| panic!("cannot bind the fake collector on {address}: {error}"));
        let address = listener.local_addr().unwrap();
        let shared = Arc::new(Mutex::new(Shared::default()));
        let app = axum::Router::new()
            .route("/v1/traces", axum::routing::post(export))
            .with_state(shared.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeCollector { address, shared, server }
    }

    pub(crate) async fn start() -> FakeCollector {
        FakeCollector::start_on("127.0.0.1:0").await
    }

    /// `http://127.0.0.1:PORT`, the form of `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub(crate) fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    pub(crate) fn spans(&self) -> Vec<ReceivedSpan> {
        self.shared.lock().unwrap().spans.clone()
    }

    pub(crate) fn requests(&self) -> usize {
        self.shared.lock().unwrap().requests
    }

    pub(crate) fn violations(&self) -> Vec<String> {
        self.shared.lock().unwrap().violations.clone()
    }
}

impl Drop for FakeCollector {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn export(
    State(shared): State<Arc<Mutex<Shared>>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, [(header::HeaderName, &'static str); 1], Vec<u8>) {
    let protobuf = [(header::CONTENT_TYPE, "application/x-protobuf")];
    let mut shared = shared.lock().unwrap();
    shared.requests += 1;
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok());
    if content_type != Some("application/x-protobuf") {
        shared.violations.push(format!("content type {content_type:?}"));
        return (StatusCode::UNSUPPORTED_MEDIA_TYPE, protobuf, Vec::new());
    }
    let request = match ExportTraceServiceRequest::decode(body) {
        Ok(request) => request,
        Err(error) => {
            shared.violations.push(format!("not an ExportTraceServiceRequest: {error}"));
            return (StatusCode::BAD_REQUEST, protobuf, Vec::new());
        }
    };
    for resource_spans in request.resource_spans {
        let resource = resource_spans.resource.map(|resource| attributes(&resource.attributes));
        let service = resource
            .as_ref()
            .and_then(|attributes| attributes.get("service.name"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        for scope_spans in resource_spans.scope_spans {
            for span in scope_spans.spans {
                shared.spans.push(ReceivedSpan {
                    service: service.clone(),
                    trace_id: hex::encode(&span.trace_id),
                    span_id: hex::encode(&span.span_id),
                    parent_span_id: hex::encode(&span.parent_span_id),
                    name: span.name,
                    attributes: attributes(&span.attributes),
                    status_code: span.status.map_or(0, |status| status.code),
                });
            }
        }
    }
    (StatusCode::OK, protobuf, ExportTraceServiceResponse::default().encode_to_vec())
}

fn attributes(pairs: &[KeyValue]) -> BTreeMap<String, Value> {
    pairs.iter().map(|pair| (pair.key.clone(), json_of(pair.value.as_ref()))).collect()
}

fn json_of(value: Option<&AnyValue>) -> Value {
    match value.and_then(|value| value.value.as_ref()) {
        Some(any_value::Value::StringValue(text)) => Value::from(text.clone()),
        Some(any_value::Value::BoolValue(flag)) => Value::from(*flag),
        Some(any_value::Value::IntValue(number)) => Value::from(*number),
        Some(any_value::Value::DoubleValue(number)) => Value::from(*number),
        Some(any_value::Value::ArrayValue(array)) => {
            array.values.iter().map(|item| json_of(Some(item))).collect()
        }
        Some(other) => Value::from(format!("{other:?}")),
        None => Value::Null,
    }
}
