//! A picker served in-process on 127.0.0.1 port 0 over a pool of loopback endpoints, a tonic
//! client that streams `ProcessingRequest`s the way Envoy does, and a completion hook (a
//! plugin type registered in the test's registry) to observe how requests ended.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use shepherd_adapters_extproc::envoy_types::pb::envoy::config::core::v3::{
    HeaderMap, HeaderValue, Metadata,
};
use shepherd_adapters_extproc::envoy_types::pb::envoy::extensions::filters::http::ext_proc::v3::processing_mode::BodySendMode;
use shepherd_adapters_extproc::envoy_types::pb::envoy::service::ext_proc::v3::external_processor_client::ExternalProcessorClient;
use shepherd_adapters_extproc::envoy_types::pb::envoy::service::ext_proc::v3::processing_request::Request;
use shepherd_adapters_extproc::envoy_types::pb::envoy::service::ext_proc::v3::processing_response::Response;
use shepherd_adapters_extproc::envoy_types::pb::envoy::service::ext_proc::v3::{
    CommonResponse, HttpBody, HttpHeaders, HttpTrailers, ImmediateResponse, ProcessingRequest,
    ProcessingResponse, ProtocolConfiguration, body_mutation,
};
use shepherd_adapters_extproc::envoy_types::pb::google::protobuf::value::Kind;
use shepherd_adapters_extproc::envoy_types::pb::google::protobuf::{ListValue, Struct, Value};
use shepherd_adapters_extproc::{ExtProcOptions, ExtProcService, serve};
use shepherd_scheduler_core::config::PluginSpec;
use shepherd_scheduler_core::endpoint::{Endpoint, Pool};
use shepherd_scheduler_core::plugin::PluginInstance;
use shepherd_scheduler_core::reload::ReloadableScheduler;
use shepherd_scheduler_core::shared::SharedState;
use shepherd_scorers::{builtin_registry, default_config};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;
use tonic::transport::Channel;

pub const DESTINATION: &str = "x-gateway-destination-endpoint";
pub const REASON: &str = "x-shepherd-dropped-reason";

/// How a request ended, as the completion hook saw it.
#[allow(unused_imports)]
pub use shepherd_test_util::{CompletionRecorder as Recorder, Ended};

/// A running picker.
pub struct Picker {
    pub addr: SocketAddr,
    pub scheduler: Arc<ReloadableScheduler>,
    pub recorder: Arc<Recorder>,
    stop: Option<oneshot::Sender<()>>,
}

impl Drop for Picker {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Makes `config` read requests with parsers of `types` only, in order (each named after its
/// type).
pub fn with_parsers(
    config: &mut shepherd_scheduler_core::config::EndpointPickerConfig,
    types: &[&str],
) {
    use shepherd_scheduler_core::config::{PluginRef, RequestHandlerConfig};
    let mut parsers = Vec::new();
    for plugin_type in types {
        config.plugins.push(PluginSpec {
            plugin_type: plugin_type.to_string(),
            name: None,
            parameters: serde_json::Value::Null,
        });
        parsers.push(PluginRef {
            plugin_ref: plugin_type.to_string(),
        });
    }
    config.request_handler = Some(RequestHandlerConfig { parsers });
}

/// Loopback endpoint addresses `127.0.0.1:8000 ..`.
pub fn loopback(n: u16) -> Vec<String> {
    (0..n).map(|i| format!("127.0.0.1:{}", 8000 + i)).collect()
}

impl Picker {
    /// A picker over `n` loopback endpoints with the default policy, naming up to
    /// `max_endpoints` per decision.
    pub async fn start(n: u16, options: ExtProcOptions) -> Self {
        Self::start_with(n, options, |s| s).await
    }

    pub async fn start_with(
        n: u16,
        options: ExtProcOptions,
        wrap: impl FnOnce(ExtProcService) -> ExtProcService,
    ) -> Self {
        Self::start_configured(n, options, |_| {}, wrap).await
    }

    /// A picker whose default policy `edit` changes first.
    pub async fn start_configured(
        n: u16,
        options: ExtProcOptions,
        edit: impl FnOnce(&mut shepherd_scheduler_core::config::EndpointPickerConfig),
        wrap: impl FnOnce(ExtProcService) -> ExtProcService,
    ) -> Self {
        let recorder = Arc::new(Recorder::default());
        let mut registry = builtin_registry();
        let hook = Arc::clone(&recorder);
        registry.register("test-completion-recorder", move |_args| {
            Ok(PluginInstance::default().with_completion_hook(hook.clone()))
        });
        let mut config = default_config();
        config.plugins.push(PluginSpec {
            plugin_type: "test-completion-recorder".into(),
            name: None,
            parameters: serde_json::Value::Null,
        });
        edit(&mut config);
        let shared = SharedState::new(Arc::new(Pool::new()));
        shared.pool.set_members(loopback(n));
        let scheduler = Arc::new(ReloadableScheduler::build(&config, &registry, shared).unwrap());
        let service = wrap(ExtProcService::new(Arc::clone(&scheduler), options));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(serve(listener, service, async {
            let _ = stopped.await;
        }));
        Picker {
            addr,
            scheduler,
            recorder,
            stop: Some(stop),
        }
    }

    pub fn pool(&self) -> &Arc<Pool> {
        &self.scheduler.shared().pool
    }

    pub fn endpoint(&self, address: &str) -> Arc<Endpoint> {
        Arc::clone(self.pool().snapshot().get_by_address(address).unwrap())
    }

    /// Requests in flight over the whole pool.
    pub fn in_flight(&self) -> u64 {
        self.pool()
            .snapshot()
            .endpoints()
            .iter()
            .map(|e| e.in_flight_requests())
            .sum()
    }

    pub async fn client(&self) -> ExternalProcessorClient<Channel> {
        ExternalProcessorClient::connect(format!("http://{}", self.addr))
            .await
            .unwrap()
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20)
    }

    /// Opens one ext_proc stream, as Envoy does for one HTTP request.
    pub async fn open(&self) -> EnvoyStream {
        open_at(self.addr).await
    }
}

/// Opens one ext_proc stream to the picker at `addr` (a `shepherd-epp` process, say).
pub async fn open_at(addr: std::net::SocketAddr) -> EnvoyStream {
    {
        let mut client = ExternalProcessorClient::connect(format!("http://{addr}"))
            .await
            .unwrap()
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20);
        let (tx, rx) = mpsc::channel(64);
        let responses = client
            .process(ReceiverStream::new(rx))
            .await
            .unwrap()
            .into_inner();
        EnvoyStream {
            tx: Some(tx),
            responses,
            first: true,
        }
    }
}

/// The data plane's end of one ext_proc stream.
pub struct EnvoyStream {
    tx: Option<mpsc::Sender<ProcessingRequest>>,
    pub responses: Streaming<ProcessingResponse>,
    first: bool,
}

/// Body modes, as Envoy's protocol_config carries them.
pub fn protocol(request: BodySendMode, response: BodySendMode) -> ProtocolConfiguration {
    ProtocolConfiguration {
        request_body_mode: request as i32,
        response_body_mode: response as i32,
        send_body_without_waiting_for_header_response: false,
    }
}

pub fn duplex() -> ProtocolConfiguration {
    protocol(
        BodySendMode::FullDuplexStreamed,
        BodySendMode::FullDuplexStreamed,
    )
}

pub fn buffered() -> ProtocolConfiguration {
    protocol(BodySendMode::Buffered, BodySendMode::Buffered)
}

pub fn header_map(headers: &[(&str, &str)]) -> HeaderMap {
    HeaderMap {
        headers: headers
            .iter()
            .map(|(k, v)| HeaderValue {
                key: k.to_string(),
                value: String::new(),
                raw_value: v.as_bytes().to_vec(),
            })
            .collect(),
    }
}

/// Request headers for a POST of `path`.
pub fn post(path: &str, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut h = vec![
        (":method".to_string(), "POST".to_string()),
        (":path".to_string(), path.to_string()),
        (":authority".to_string(), "gateway.local".to_string()),
        ("content-type".to_string(), "application/json".to_string()),
    ];
    h.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    h
}

/// Metadata with `namespace` → `key`: a list of strings.
pub fn list_metadata(namespace: &str, key: &str, entries: &[&str]) -> Metadata {
    let list = Value {
        kind: Some(Kind::ListValue(ListValue {
            values: entries
                .iter()
                .map(|e| Value {
                    kind: Some(Kind::StringValue(e.to_string())),
                })
                .collect(),
        })),
    };
    string_or_list_metadata(namespace, key, list)
}

/// Metadata with `namespace` → `key`: a string.
pub fn string_metadata(namespace: &str, key: &str, value: &str) -> Metadata {
    let value = Value {
        kind: Some(Kind::StringValue(value.to_string())),
    };
    string_or_list_metadata(namespace, key, value)
}

fn string_or_list_metadata(namespace: &str, key: &str, value: Value) -> Metadata {
    let mut metadata = Metadata::default();
    metadata.filter_metadata.insert(
        namespace.to_string(),
        Struct {
            fields: [(key.to_string(), value)].into(),
        },
    );
    metadata
}

impl EnvoyStream {
    pub async fn send_raw(&mut self, message: ProcessingRequest) {
        self.tx
            .as_ref()
            .expect("stream closed")
            .send(message)
            .await
            .unwrap();
    }

    async fn send(
        &mut self,
        request: Request,
        metadata: Option<Metadata>,
        config: Option<ProtocolConfiguration>,
    ) {
        let protocol_config = if self.first { config } else { None };
        self.first = false;
        self.send_raw(ProcessingRequest {
            request: Some(request),
            metadata_context: metadata,
            protocol_config,
            ..Default::default()
        })
        .await;
    }

    /// The first message: request headers, with the stream's body modes.
    pub async fn request_headers(
        &mut self,
        headers: &[(String, String)],
        end_of_stream: bool,
        metadata: Option<Metadata>,
        config: ProtocolConfiguration,
    ) {
        let pairs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let request = Request::RequestHeaders(HttpHeaders {
            headers: Some(header_map(&pairs)),
            end_of_stream,
            ..Default::default()
        });
        self.send(request, metadata, Some(config)).await;
    }

    pub async fn request_body(&mut self, body: &[u8], end_of_stream: bool) {
        let request = Request::RequestBody(HttpBody {
            body: body.to_vec(),
            end_of_stream,
            ..Default::default()
        });
        self.send(request, None, None).await;
    }

    /// The body in chunks of `chunk` bytes, the last with end_of_stream.
    pub async fn request_body_chunked(&mut self, body: &[u8], chunk: usize) {
        let pieces: Vec<&[u8]> = body.chunks(chunk).collect();
        for (i, piece) in pieces.iter().enumerate() {
            self.request_body(piece, i + 1 == pieces.len()).await;
        }
    }

    pub async fn request_trailers(&mut self) {
        let request = Request::RequestTrailers(HttpTrailers::default());
        self.send(request, None, None).await;
    }

    pub async fn response_headers(
        &mut self,
        status: &str,
        end_of_stream: bool,
        metadata: Option<Metadata>,
    ) {
        let request = Request::ResponseHeaders(HttpHeaders {
            headers: Some(header_map(&[
                (":status", status),
                ("content-type", "application/json"),
            ])),
            end_of_stream,
            ..Default::default()
        });
        self.send(request, metadata, None).await;
    }

    pub async fn response_body(&mut self, body: &[u8], end_of_stream: bool) {
        let request = Request::ResponseBody(HttpBody {
            body: body.to_vec(),
            end_of_stream,
            ..Default::default()
        });
        self.send(request, None, None).await;
    }

    /// Closes the data plane's side of the stream.
    pub fn close(&mut self) {
        self.tx = None;
    }

    /// The next answer (within 5 s).
    pub async fn next(&mut self) -> ProcessingResponse {
        tokio::time::timeout(Duration::from_secs(5), self.responses.message())
            .await
            .expect("no answer within 5 s")
            .expect("stream failed")
            .expect("stream ended")
    }

    /// The stream's end: `Ok(())` for a clean end, the status otherwise.
    pub async fn end(&mut self) -> Result<(), tonic::Status> {
        match tokio::time::timeout(Duration::from_secs(5), self.responses.message())
            .await
            .expect("stream did not end within 5 s")
        {
            Ok(None) => Ok(()),
            Ok(Some(m)) => panic!("unexpected answer {m:?}"),
            Err(status) => Err(status),
        }
    }

    /// Reads streamed request-body answers until one has end_of_stream (or `until_eos` is
    /// false and `count` chunks were read); returns the chunks.
    pub async fn streamed_request_body(&mut self) -> Vec<(Vec<u8>, bool)> {
        let mut chunks = Vec::new();
        loop {
            let answer = self.next().await;
            let Some(Response::RequestBody(body)) = answer.response else {
                panic!("expected a request body answer, got {answer:?}")
            };
            let (bytes, eos) = streamed(body.response.as_ref().unwrap());
            chunks.push((bytes, eos));
            if eos {
                return chunks;
            }
        }
    }
}

/// The streamed body mutation of a body answer.
pub fn streamed(common: &CommonResponse) -> (Vec<u8>, bool) {
    match common
        .body_mutation
        .as_ref()
        .and_then(|m| m.mutation.as_ref())
    {
        Some(body_mutation::Mutation::StreamedResponse(s)) => (s.body.clone(), s.end_of_stream),
        other => panic!("expected a streamed body mutation, got {other:?}"),
    }
}

/// The value set for `name` by a header mutation (raw_value), and whether `value` was empty.
pub fn set_value(common: &CommonResponse, name: &str) -> Option<String> {
    let mutation = common.header_mutation.as_ref()?;
    let option = mutation.set_headers.iter().find(|o| {
        o.header
            .as_ref()
            .is_some_and(|h| h.key.eq_ignore_ascii_case(name))
    })?;
    let header = option.header.as_ref()?;
    assert!(header.value.is_empty(), "values go in raw_value, not value");
    Some(String::from_utf8(header.raw_value.clone()).unwrap())
}

/// `envoy.lb` → `x-gateway-destination-endpoint` in an answer's dynamic metadata.
pub fn metadata_destination(answer: &ProcessingResponse) -> Option<String> {
    let lb = answer.dynamic_metadata.as_ref()?.fields.get("envoy.lb")?;
    let Some(Kind::StructValue(lb)) = &lb.kind else {
        return None;
    };
    match &lb.fields.get(DESTINATION)?.kind {
        Some(Kind::StringValue(s)) => Some(s.clone()),
        _ => None,
    }
}

/// The routing answer to the request headers.
pub fn headers_answer(answer: &ProcessingResponse) -> &CommonResponse {
    match &answer.response {
        Some(Response::RequestHeaders(h)) => h.response.as_ref().unwrap(),
        other => panic!("expected a request headers answer, got {other:?}"),
    }
}

/// The immediate response of an answer.
pub fn immediate(answer: &ProcessingResponse) -> &ImmediateResponse {
    match &answer.response {
        Some(Response::ImmediateResponse(i)) => i,
        other => panic!("expected an immediate response, got {other:?}"),
    }
}

/// The reason header of an immediate response.
pub fn reason(immediate: &ImmediateResponse) -> String {
    let mutation = immediate.headers.as_ref().unwrap();
    let header = mutation
        .set_headers
        .iter()
        .filter_map(|o| o.header.as_ref())
        .find(|h| h.key == REASON)
        .expect("reason header");
    String::from_utf8(header.raw_value.clone()).unwrap()
}

/// A completions body of about `size` bytes.
pub fn completion_body(model: &str, size: usize) -> Vec<u8> {
    let prompt: String = (0..size.saturating_sub(40))
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    serde_json::json!({"model": model, "prompt": prompt, "max_tokens": 8})
        .to_string()
        .into_bytes()
}
