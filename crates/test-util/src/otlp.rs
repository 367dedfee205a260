//! An OTLP trace receiver for tests, on the official OpenTelemetry protobuf definitions (the
//! `opentelemetry-proto` crate): it takes `ExportTraceServiceRequest`s over gRPC
//! (`TraceService/Export`) and over HTTP/protobuf (`POST /v1/traces`) on loopback ports and
//! keeps every span it received, bounded.
//!
//! ```no_run
//! # async fn run() {
//! let receiver = shepherd_test_util::otlp::Receiver::start().await;
//! // OTEL_EXPORTER_OTLP_ENDPOINT = receiver.grpc_url(), or receiver.http_url() with
//! // OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf
//! let spans = receiver.spans_of_trace("0af7651916cd43dd8448eb211c80319c");
//! # drop(spans);
//! # }
//! ```

use std::net::SocketAddr;
use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use parking_lot::Mutex;
use prost::Message;

/// Most spans kept.
const MAX_SPANS: usize = 100_000;

/// One received span, flattened.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedSpan {
    /// The span's name.
    pub name: String,
    /// Trace id, lowercase hex.
    pub trace_id: String,
    /// Span id, lowercase hex.
    pub span_id: String,
    /// Parent span id, lowercase hex (empty for a root).
    pub parent_span_id: String,
    /// OTLP span kind (2 = server, 3 = client, 1 = internal).
    pub kind: i32,
    /// The `service.name` of the resource that sent it.
    pub service: String,
    /// Attributes, each value as text.
    pub attributes: Vec<(String, String)>,
    /// Status code (2 = error).
    pub status_code: i32,
    /// Event names.
    pub events: Vec<String>,
}

impl ReceivedSpan {
    /// Attribute `key` as text.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text(value: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

/// The spans received so far.
#[derive(Debug, Default, Clone)]
struct Store(Arc<Mutex<Vec<ReceivedSpan>>>);

impl Store {
    fn take(&self, request: ExportTraceServiceRequest) {
        let mut spans = self.0.lock();
        for resource in request.resource_spans {
            let service = resource
                .resource
                .as_ref()
                .and_then(|r| r.attributes.iter().find(|kv| kv.key == "service.name"))
                .map(|kv| text(kv.value.as_ref()))
                .unwrap_or_default();
            for scope in resource.scope_spans {
                for span in scope.spans {
                    if spans.len() >= MAX_SPANS {
                        return;
                    }
                    spans.push(ReceivedSpan {
                        name: span.name,
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent_span_id: hex(&span.parent_span_id),
                        kind: span.kind,
                        service: service.clone(),
                        attributes: span
                            .attributes
                            .iter()
                            .map(|kv| (kv.key.clone(), text(kv.value.as_ref())))
                            .collect(),
                        status_code: span.status.map_or(0, |s| s.code),
                        events: span.events.into_iter().map(|e| e.name).collect(),
                    });
                }
            }
        }
    }
}

#[tonic::async_trait]
impl TraceService for Store {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.take(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// A running receiver. See the [module docs](self).
#[derive(Debug)]
pub struct Receiver {
    store: Store,
    grpc: SocketAddr,
    http: SocketAddr,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Receiver {
    /// Listens for OTLP/gRPC and OTLP/HTTP on two free loopback ports.
    ///
    /// # Panics
    /// When a loopback port cannot be bound (a test setup failure).
    #[allow(clippy::expect_used)]
    pub async fn start() -> Receiver {
        let store = Store::default();
        let grpc_listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let grpc = grpc_listener.local_addr().expect("bound address");
        let service = TraceServiceServer::new(store.clone());
        let grpc_task = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(
                    grpc_listener,
                ))
                .await;
        });
        let http_listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let http = http_listener.local_addr().expect("bound address");
        let http_store = store.clone();
        let router = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: axum::body::Bytes| {
                let store = http_store.clone();
                async move {
                    match ExportTraceServiceRequest::decode(body) {
                        Ok(request) => {
                            store.take(request);
                            (
                                axum::http::StatusCode::OK,
                                [("content-type", "application/x-protobuf")],
                                ExportTraceServiceResponse {
                                    partial_success: None,
                                }
                                .encode_to_vec(),
                            )
                        }
                        Err(_) => (
                            axum::http::StatusCode::BAD_REQUEST,
                            [("content-type", "text/plain")],
                            b"not an ExportTraceServiceRequest".to_vec(),
                        ),
                    }
                }
            }),
        );
        let http_task = tokio::spawn(async move {
            let _ = axum::serve(http_listener, router).await;
        });
        Receiver {
            store,
            grpc,
            http,
            tasks: vec![grpc_task, http_task],
        }
    }

    /// `http://127.0.0.1:PORT` of the gRPC listener.
    pub fn grpc_url(&self) -> String {
        format!("http://{}", self.grpc)
    }

    /// `http://127.0.0.1:PORT` of the HTTP listener (the exporter adds `/v1/traces`).
    pub fn http_url(&self) -> String {
        format!("http://{}", self.http)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.store.0.lock().clone()
    }

    /// The spans of trace `trace_id` (hex).
    pub fn spans_of_trace(&self, trace_id: &str) -> Vec<ReceivedSpan> {
        self.store
            .0
            .lock()
            .iter()
            .filter(|s| s.trace_id == trace_id)
            .cloned()
            .collect()
    }

    /// Waits (up to `limit`) until a span named `name` of trace `trace_id` has arrived; the
    /// trace's spans then.
    pub async fn wait_for(
        &self,
        trace_id: &str,
        name: &str,
        limit: std::time::Duration,
    ) -> Vec<ReceivedSpan> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let spans = self.spans_of_trace(trace_id);
            if spans.iter().any(|s| s.name == name) || tokio::time::Instant::now() >= deadline {
                return spans;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}
