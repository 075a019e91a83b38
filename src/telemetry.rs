//! Traces: an OpenTelemetry span for each call the gateway handles, with children for the
//! upstream hop, the SQL statements, the model requests and tracking's write, exported over
//! OTLP/HTTP (protobuf) when the standard `OTEL_EXPORTER_OTLP_*` variables name an endpoint.
//!
//! Off by default: without an endpoint no tracer exists, every [`Span`] is empty, and what a
//! call pays is one look at a `OnceLock`. The batch processor exports from its own thread
//! through a bounded queue, so a slow or absent collector never slows or fails a call; spans
//! that do not fit are dropped, and the SDK logs the first drop once.
//!
//! The tracer is the process's one global (a `OnceLock`), the exception to orca's explicit
//! state: OpenTelemetry carries a span's context with the future that runs it (`Span::run`),
//! not through arguments, so `llm`, `sql` and `tracking` make their spans without a handle.
//!
//! # Design notes
//!
//! OpenTelemetry traces, off unless `OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (`OTEL_SDK_DISABLED` honoured). `telemetry::start`
//! (called by `cli::run` for `serve` and `demo`, which shut it down after the command has stopped,
//! so tracking's last batch is exported too) builds the OTLP/HTTP protobuf exporter
//! (opentelemetry-otlp with reqwest's blocking client, run by the SDK's batch processor on its own
//! thread: no gRPC, no second TLS stack) and sets the process's one tracer in a `OnceLock`. `Span`
//! is an optional `opentelemetry::Context`: empty when traces are off (nothing is named or
//! allocated: names and attributes come from a closure) or when there is no call to be part of;
//! `Span::run` makes it current for a future, so children and outgoing `traceparent`s
//! (`telemetry::traceparent`) descend from it across `.await`s; it ends when dropped. The spans are
//! made where the work is: `gateway::Gateway::call_tool` (the call's span, from the incoming
//! `traceparent` of `_meta` or the header; its trace id is the execution's `trace_id`) and the
//! upstream hop in `dispatch`; `llm::Llm::complete` (the GenAI attributes; `openai.rs`'s transport
//! and `transport.rs` put `traceparent` on each attempt); `sql::traced` around `run_read_into`,
//! `run_paged_read`, `explain` and `run_write` (a summary of the statement, never its text);
//! `tracking::writer` (a finished child of each call's `Execution::span` per batch).
//! `external::upstream` puts the hop's `traceparent` in the forwarded call's `_meta`, and
//! `external/traced.rs` (`Traced`, a wrapper of rmcp's `StreamableHttpClient`) copies it into the
//! HTTP header, since rmcp posts from its own task where no span is current. `Traced` also marks
//! each log message on a request's own response stream with that request's id (a `_meta` key named
//! per process), so `calls` gives it to that call's client even with other calls in flight (rmcp
//! marks only requests with the stream they came on).

use std::borrow::Cow;
use std::future::Future;
use std::sync::OnceLock;
use std::time::SystemTime;

use opentelemetry::context::FutureExt as _;
use opentelemetry::propagation::{Extractor, TextMapPropagator as _};
use opentelemetry::trace::{
    Span as _, SpanContext, SpanKind, Status, TraceContextExt as _, Tracer as _,
    TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

/// The tracer of this process, set once when traces are on.
static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// Why traces could not be started.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("cannot build the OTLP trace exporter: {0}")]
    Exporter(String),
}

/// The running exporter; [`Telemetry::shutdown`] exports what is queued and stops it.
#[derive(Debug)]
pub(crate) struct Telemetry {
    provider: SdkTracerProvider,
}

/// Whether the environment (`var` looks a variable up, unset or empty as `None`) asks for
/// traces: an OTLP endpoint (for every signal, or for traces) is set and `OTEL_SDK_DISABLED` is
/// not `true`.
pub(crate) fn wanted<'a>(var: impl Fn(&str) -> Option<&'a str>) -> bool {
    let disabled =
        var("OTEL_SDK_DISABLED").is_some_and(|value| value.trim().eq_ignore_ascii_case("true"));
    !disabled
        && (var("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
            || var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some())
}

/// Start exporting traces when the environment asks for them (see [`wanted`]). The exporter itself reads
/// the endpoint, `OTEL_EXPORTER_OTLP_HEADERS`, `_TIMEOUT` and their `_TRACES_` forms; the
/// resource reads `OTEL_SERVICE_NAME` (`orca` when unset) and `OTEL_RESOURCE_ATTRIBUTES`; the
/// batch processor reads `OTEL_BSP_*`.
///
/// # Errors
///
/// [`Error::Exporter`] when the exporter cannot be built (an endpoint that is not a URL).
pub(crate) fn start<'a>(var: impl Fn(&str) -> Option<&'a str>) -> Result<Option<Telemetry>, Error> {
    if !wanted(&var) {
        return Ok(None);
    }
    crate::tls::install();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build()
        .map_err(|error| Error::Exporter(error.to_string()))?;
    let mut resource = opentelemetry_sdk::Resource::builder()
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    let named = var("OTEL_SERVICE_NAME").is_some()
        || var("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|text| text.contains("service.name="));
    if !named {
        resource = resource.with_service_name("orca");
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    if TRACER.set(provider.tracer("orca")).is_err() {
        tracing::warn!("traces were already started in this process; the first exporter stays");
    }
    tracing::info!("exporting traces over OTLP/HTTP");
    Ok(Some(Telemetry { provider }))
}

impl Telemetry {
    /// Export the spans still queued (within the exporter's timeout) and stop. Blocks: the
    /// batch processor's thread is joined.
    pub(crate) fn shutdown(self) {
        if let Err(error) = self.provider.shutdown() {
            tracing::warn!("traces were not all exported at shutdown: {error}");
        }
    }
}

/// A span, or nothing when traces are off or there is no call to be part of. It ends when
/// dropped.
#[derive(Debug, Default)]
pub(crate) struct Span(Option<Context>);

impl Span {
    /// The span of the gateway's handling of a call: a child of the caller's span when
    /// `traceparent` is a valid W3C `traceparent`, else the root of a new trace.
    pub(crate) fn incoming<N: Into<Cow<'static, str>>>(
        traceparent: Option<&str>,
        describe: impl FnOnce() -> (N, Vec<KeyValue>),
    ) -> Span {
        let Some(tracer) = TRACER.get() else { return Span(None) };
        let parent = traceparent.map_or_else(Context::new, extract);
        Span::start(tracer, &parent, SpanKind::Server, describe)
    }

    /// A child of the span whose future is running (see [`Span::run`]); nothing outside a
    /// call (a model asked at start, `orca context suggest`), so no stray roots are exported.
    pub(crate) fn child<N: Into<Cow<'static, str>>>(
        kind: SpanKind,
        describe: impl FnOnce() -> (N, Vec<KeyValue>),
    ) -> Span {
        let Some(tracer) = TRACER.get() else { return Span(None) };
        let parent = Context::current();
        if !parent.has_active_span() {
            return Span(None);
        }
        Span::start(tracer, &parent, kind, describe)
    }

    /// Name and attributes are only made (`describe`) when the span is.
    fn start<N: Into<Cow<'static, str>>>(
        tracer: &SdkTracer,
        parent: &Context,
        kind: SpanKind,
        describe: impl FnOnce() -> (N, Vec<KeyValue>),
    ) -> Span {
        let (name, attributes) = describe();
        let span = tracer
            .span_builder(name)
            .with_kind(kind)
            .with_attributes(attributes)
            .start_with_context(tracer, parent);
        Span(Some(parent.with_span(span)))
    }

    /// Whether the span exists (traces on, and part of a call).
    #[cfg(test)]
    pub(crate) fn is_recording(&self) -> bool {
        self.0.is_some()
    }

    /// Add attributes learnt while the span ran (a model's tokens).
    pub(crate) fn set(&self, attributes: impl FnOnce() -> Vec<KeyValue>) {
        if let Some(context) = &self.0 {
            context.span().set_attributes(attributes());
        }
    }

    /// Mark the span failed, with `error.type` and a description.
    pub(crate) fn fail(&self, error_type: &str, description: impl Into<Cow<'static, str>>) {
        if let Some(context) = &self.0 {
            let span = context.span();
            span.set_attribute(KeyValue::new("error.type", error_type.to_owned()));
            span.set_status(Status::error(description));
        }
    }

    /// The trace id, as 32 lowercase hex digits.
    pub(crate) fn trace_id(&self) -> Option<String> {
        self.parent().map(|parent| parent.trace_id().to_string())
    }

    /// The span's context, for a child started elsewhere (tracking's write).
    pub(crate) fn parent(&self) -> Option<SpanContext> {
        let context = self.0.as_ref()?;
        Some(context.span().span_context().clone())
    }

    /// Run `future` with this span as the current one, so that its children and the
    /// `traceparent` of its outgoing requests ([`traceparent`]) descend from it.
    pub(crate) async fn run<F: Future>(&self, future: F) -> F::Output {
        match &self.0 {
            Some(context) => future.with_context(context.clone()).await,
            None => future.await,
        }
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        if let Some(context) = &self.0 {
            context.span().end();
        }
    }
}

/// The W3C `traceparent` of the current span, for an outgoing request; `None` when traces are
/// off or no span is current.
pub(crate) fn traceparent() -> Option<String> {
    TRACER.get()?;
    let context = Context::current();
    let span = context.span();
    let parent = span.span_context();
    parent.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            parent.trace_id(),
            parent.span_id(),
            parent.trace_flags().to_u8()
        )
    })
}

/// A span that already ran, a child of `parent` from `start` to now (tracking's write, done
/// by the background writer for a call that has returned).
pub(crate) fn finished_child(
    parent: &SpanContext,
    name: &'static str,
    start: SystemTime,
    attributes: Vec<KeyValue>,
    failure: Option<&str>,
) {
    let Some(tracer) = TRACER.get() else { return };
    let context = Context::new().with_remote_span_context(parent.clone());
    let mut span = tracer
        .span_builder(name)
        .with_kind(SpanKind::Client)
        .with_start_time(start)
        .with_attributes(attributes)
        .start_with_context(tracer, &context);
    if let Some(description) = failure {
        span.set_status(Status::error(description.to_owned()));
    }
    span.end();
}

/// The caller's context from a `traceparent` value (an invalid one gives an empty context,
/// and so a new trace).
fn extract(traceparent: &str) -> Context {
    struct One<'a>(&'a str);
    impl Extractor for One<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            (key == "traceparent").then_some(self.0)
        }
        fn keys(&self) -> Vec<&str> {
            vec!["traceparent"]
        }
    }
    TraceContextPropagator::new().extract(&One(traceparent))
}

/// The attributes of a SQL statement's span (`db.*` of OpenTelemetry's database conventions):
/// the operation and a summary of the kind and the tables, never the text or its values.
pub(crate) fn statement_attributes(operation: &str, summary: &str) -> Vec<KeyValue> {
    vec![
        KeyValue::new("db.system", "postgresql"),
        KeyValue::new("db.system.name", "postgresql"),
        KeyValue::new("db.operation.name", operation.to_owned()),
        KeyValue::new("db.query.summary", summary.to_owned()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traces_are_wanted_only_with_an_endpoint_and_not_disabled() {
        let cases: &[(&[(&str, &str)], bool)] = &[
            (&[], false),
            (&[("OTEL_SERVICE_NAME", "orca")], false),
            (&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")], true),
            (&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces")], true),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
                    ("OTEL_SDK_DISABLED", "TRUE"),
                ],
                false,
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
                    ("OTEL_SDK_DISABLED", "false"),
                ],
                true,
            ),
        ];
        for (pairs, expected) in cases {
            let var =
                |key: &str| pairs.iter().find(|(name, _)| *name == key).map(|(_, value)| *value);
            assert_eq!(wanted(var), *expected, "{pairs:?}");
        }
    }

    #[test]
    fn without_a_tracer_spans_are_empty_and_nothing_is_propagated() {
        let incoming = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let span = Span::incoming(Some(incoming), || ("tools/call t", Vec::new()));
        assert!(!span.is_recording());
        assert_eq!(span.trace_id(), None);
        assert!(!Span::child(SpanKind::Client, || ("chat m", Vec::new())).is_recording());
        assert_eq!(traceparent(), None);
    }

    #[test]
    fn a_traceparent_is_read_into_the_callers_context() {
        let context = extract("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
        let span = context.span();
        let parent = span.span_context();
        assert!(parent.is_remote());
        assert_eq!(parent.trace_id().to_string(), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(parent.span_id().to_string(), "b7ad6b7169203331");
        for invalid in ["", "00-xyz", "00-00000000000000000000000000000000-b7ad6b7169203331-01"] {
            assert!(!extract(invalid).span().span_context().is_valid(), "{invalid}");
        }
    }
}
