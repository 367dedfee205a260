//! `shepherd-epp`'s ext_proc port tried as a hostile gRPC client would: streams that announce
//! bodies they never send, streams that park megabytes of body and stall, and a BUFFERED body
//! message larger than the picker accepts. Each attack runs against the real binary (a child
//! process, its memory read from /proc) on loopback, bounded in count and time, and a
//! legitimate request beside it must still get its routing answer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::{HeaderMap, HeaderValue};
use envoy_types::pb::envoy::extensions::filters::http::ext_proc::v3::processing_mode::BodySendMode;
use envoy_types::pb::envoy::service::ext_proc::v3::external_processor_client::ExternalProcessorClient;
use envoy_types::pb::envoy::service::ext_proc::v3::processing_request::Request;
use envoy_types::pb::envoy::service::ext_proc::v3::processing_response::Response;
use envoy_types::pb::envoy::service::ext_proc::v3::{
    HttpBody, HttpHeaders, ImmediateResponse, ProcessingRequest, ProcessingResponse,
    ProtocolConfiguration,
};
use futures_util::future::join_all;
use shepherd_hostile_tests::{Process, backends, config_file, endpoint_lines, metric};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;
use tonic::transport::Channel;

const DESTINATION: &str = "x-gateway-destination-endpoint";
const REASON: &str = "x-shepherd-dropped-reason";
const MIB: usize = 1024 * 1024;
/// `shepherd-epp`'s default `--max-body-bytes`.
const MAX_BODY: usize = 16 * MIB;
/// `shepherd-epp`'s default `--max-buffered-bytes`.
const MAX_BUFFERED: usize = 256 * MIB;

// --- speaking ext_proc -------------------------------------------------------------------

/// One HTTP/2 connection to the picker (tonic opens one per `connect`).
async fn connect(addr: SocketAddr) -> ExternalProcessorClient<Channel> {
    ExternalProcessorClient::connect(format!("http://{addr}"))
        .await
        .unwrap()
        .max_decoding_message_size(64 * MIB)
        .max_encoding_message_size(64 * MIB)
}

/// The data plane's end of one ext_proc stream.
struct Stream {
    tx: mpsc::Sender<ProcessingRequest>,
    responses: Streaming<ProcessingResponse>,
}

impl Stream {
    /// Opens a stream on `client`'s connection, or says why it could not (within 20 s).
    async fn open(mut client: ExternalProcessorClient<Channel>) -> Result<Stream, String> {
        let (tx, rx) = mpsc::channel(32);
        let opened = tokio::time::timeout(
            Duration::from_secs(20),
            client.process(ReceiverStream::new(rx)),
        )
        .await
        .map_err(|_| "no answer to the stream's opening within 20 s".to_owned())?
        .map_err(|status| status.to_string())?;
        Ok(Stream {
            tx,
            responses: opened.into_inner(),
        })
    }

    /// Sends `message`; false once the picker's end is gone.
    async fn send(&self, message: ProcessingRequest) -> bool {
        self.tx.send(message).await.is_ok()
    }

    /// The next answer within `wait`: `Ok(Some)` an answer, `Ok(None)` nothing yet or a clean
    /// end, `Err` a gRPC error status.
    async fn answer(
        &mut self,
        wait: Duration,
    ) -> Result<Option<ProcessingResponse>, tonic::Status> {
        match tokio::time::timeout(wait, self.responses.message()).await {
            Ok(result) => result,
            Err(_) => Ok(None),
        }
    }
}

fn protocol(mode: BodySendMode) -> ProtocolConfiguration {
    ProtocolConfiguration {
        request_body_mode: mode as i32,
        response_body_mode: mode as i32,
        send_body_without_waiting_for_header_response: false,
    }
}

/// The first message of a stream: request headers of a POST to `/v1/completions`, `extra`
/// headers added, with the stream's body mode.
fn request_headers(
    extra: &[(&str, &str)],
    end_of_stream: bool,
    mode: BodySendMode,
) -> ProcessingRequest {
    let header = |key: &str, value: &str| HeaderValue {
        key: key.to_owned(),
        value: String::new(),
        raw_value: value.as_bytes().to_vec(),
    };
    let mut headers = vec![
        header(":method", "POST"),
        header(":path", "/v1/completions"),
        header(":authority", "gateway.local"),
        header("content-type", "application/json"),
    ];
    headers.extend(extra.iter().map(|(k, v)| header(k, v)));
    ProcessingRequest {
        request: Some(Request::RequestHeaders(HttpHeaders {
            headers: Some(HeaderMap { headers }),
            end_of_stream,
            ..Default::default()
        })),
        protocol_config: Some(protocol(mode)),
        ..Default::default()
    }
}

fn request_body(body: Vec<u8>, end_of_stream: bool) -> ProcessingRequest {
    ProcessingRequest {
        request: Some(Request::RequestBody(HttpBody {
            body,
            end_of_stream,
            ..Default::default()
        })),
        ..Default::default()
    }
}

fn small_body() -> Vec<u8> {
    br#"{"model":"llama","prompt":"a legitimate request"}"#.to_vec()
}

/// The destination of a routing answer to the request headers, if `answer` is one.
fn destination(answer: &ProcessingResponse) -> Option<String> {
    let Some(Response::RequestHeaders(headers)) = &answer.response else {
        return None;
    };
    let mutation = headers.response.as_ref()?.header_mutation.as_ref()?;
    mutation
        .set_headers
        .iter()
        .filter_map(|o| o.header.as_ref())
        .find(|h| h.key == DESTINATION)
        .map(|h| String::from_utf8_lossy(&h.raw_value).into_owned())
}

fn immediate(answer: &ProcessingResponse) -> Option<&ImmediateResponse> {
    match &answer.response {
        Some(Response::ImmediateResponse(immediate)) => Some(immediate),
        _ => None,
    }
}

/// The status and drop reason of an immediate response.
fn status_and_reason(immediate: &ImmediateResponse) -> (i32, String) {
    let status = immediate.status.as_ref().map_or(0, |s| s.code);
    let reason = immediate
        .headers
        .as_ref()
        .and_then(|m| {
            m.set_headers
                .iter()
                .filter_map(|o| o.header.as_ref())
                .find(|h| h.key == REASON)
        })
        .map(|h| String::from_utf8_lossy(&h.raw_value).into_owned())
        .unwrap_or_default();
    (status, reason)
}

/// A full-duplex request with a small body on a new connection: its routing answer's
/// destination (within 10 s).
/// A stream on a new connection with the headers of a streamed request sent.
async fn streamed_request(addr: SocketAddr) -> Stream {
    let stream = Stream::open(connect(addr).await).await.unwrap();
    assert!(
        stream
            .send(request_headers(
                &[],
                false,
                BodySendMode::FullDuplexStreamed
            ))
            .await
    );
    stream
}

async fn legitimate_request(addr: SocketAddr) -> String {
    let mut stream = streamed_request(addr).await;
    assert!(stream.send(request_body(small_body(), true)).await);
    let answer = stream
        .answer(Duration::from_secs(10))
        .await
        .expect("the legitimate request's stream failed")
        .expect("no answer to the legitimate request within 10 s");
    destination(&answer).unwrap_or_else(|| panic!("not a routing answer: {answer:?}"))
}

/// A picker over two simulated servers (all three kept alive by the returned values).
async fn picker(env: &[(&str, &str)]) -> (Process, impl Sized) {
    let servers = backends(2).await;
    let config = config_file(&format!("endpoints:\n{}", endpoint_lines(&servers)));
    let process = Process::epp_with_env(&config, &[], env).await;
    (process, (servers, config))
}

fn report(what: &str, process: &Process) {
    eprintln!(
        "{what}: VmSize {} MiB, VmRSS {} MiB, VmHWM {} MiB, open files {}",
        process.virtual_kib() / 1024,
        process.rss_kib() / 1024,
        process.peak_rss_kib() / 1024,
        process.open_files()
    );
}

// --- the attacks -------------------------------------------------------------------------

/// 10,000 streams each announcing a body just under the limit in `content-length` and sending
/// none of it, over 20 connections, against a picker under a 4 GiB address-space limit. A
/// picker that reserved what clients announce would need 156 GiB of address space and abort
/// at the ~250th stream; this one must reserve nothing for bytes that have not arrived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_streams_announcing_large_bodies_reserve_nothing() {
    const CONNECTIONS: usize = 20;
    const STREAMS_PER_CONNECTION: usize = 500;
    let (mut epp, _servers) = picker(&[("SHEPHERD_HOSTILE_RLIMIT_AS_KIB", "4194304")]).await;
    let addr = epp.addr("extproc");
    report("at start", &epp);
    let start_virtual = epp.virtual_kib();

    let declared = (MAX_BODY - 1).to_string();
    let started = std::time::Instant::now();
    let connections = join_all((0..CONNECTIONS).map(|_| connect(addr))).await;
    let opened = join_all(connections.into_iter().map(|client| {
        let declared = declared.clone();
        async move {
            let mut streams = Vec::new();
            let mut failures = Vec::new();
            let opens =
                join_all((0..STREAMS_PER_CONNECTION).map(|_| Stream::open(client.clone()))).await;
            for stream in opens {
                match stream {
                    Ok(stream) => {
                        let headers = request_headers(
                            &[("content-length", &declared)],
                            false,
                            BodySendMode::FullDuplexStreamed,
                        );
                        if stream.send(headers).await {
                            streams.push(stream);
                        } else {
                            failures.push("the picker's end closed".to_owned());
                        }
                    }
                    Err(error) => failures.push(error),
                }
            }
            (streams, failures)
        }
    }));
    let (mut streams, mut failures) = (Vec::new(), Vec::new());
    for (s, f) in tokio::time::timeout(Duration::from_secs(120), opened)
        .await
        .expect("opening 10,000 streams took over 120 s")
    {
        streams.extend(s);
        failures.extend(f);
    }
    // Give the picker time to take in every headers message.
    tokio::time::sleep(Duration::from_secs(2)).await;
    eprintln!(
        "{} streams open, {} failed, in {:?}",
        streams.len(),
        failures.len(),
        started.elapsed()
    );
    assert!(
        epp.is_running(),
        "the picker died: {:?}",
        epp.log_lines("memory")
    );
    report("with 10,000 streams announcing 16 MiB each", &epp);
    assert!(
        failures.is_empty(),
        "{} streams failed, first: {:?}",
        failures.len(),
        failures.first()
    );
    assert_eq!(streams.len(), CONNECTIONS * STREAMS_PER_CONNECTION);
    // No stream got an answer: the announced bodies are in range, they just never come.
    let virtual_kib = epp.virtual_kib();
    assert!(
        virtual_kib < start_virtual + 1024 * 1024,
        "address space grew from {start_virtual} KiB to {virtual_kib} KiB"
    );
    assert!(
        epp.rss_kib() < 1024 * 1024,
        "resident memory {} KiB for 10,000 idle streams",
        epp.rss_kib()
    );

    let routed = legitimate_request(addr).await;
    assert!(!routed.is_empty());

    drop(streams);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(epp.is_running());
    report("after the streams closed", &epp);
}

/// 2,000 streams each send 1 MiB of body (in 64 KiB chunks, as Envoy does) and stall, far
/// more than the default 256 MiB cap on buffered bodies. The picker must hold at most the cap:
/// streams over it get 503 `body_buffer_full` (counted on `/metrics`), its resident memory
/// stays bounded, a legitimate small request is routed while the rest stall (small bodies
/// keep a reserved share of the cap), and every byte is given back once the streams go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_partial_bodies_are_capped_and_their_bytes_given_back() {
    const CONNECTIONS: usize = 8;
    const STREAMS_PER_CONNECTION: usize = 250;
    const CHUNK: usize = 64 * 1024;
    const CHUNKS: usize = 16; // 1 MiB per stream
    let (mut epp, _servers) = picker(&[]).await;
    let addr = epp.addr("extproc");
    let admin = epp.addr("admin");
    report("at start", &epp);
    let start_rss = epp.rss_kib();

    let started = std::time::Instant::now();
    let connections = join_all((0..CONNECTIONS).map(|_| connect(addr))).await;
    let chunk = vec![b'x'; CHUNK];
    let sent = join_all(connections.into_iter().map(|client| {
        let chunk = chunk.clone();
        async move {
            let mut streams = Vec::new();
            for _ in 0..STREAMS_PER_CONNECTION {
                let stream = Stream::open(client.clone()).await.unwrap();
                let mut alive = stream
                    .send(request_headers(
                        &[],
                        false,
                        BodySendMode::FullDuplexStreamed,
                    ))
                    .await;
                for _ in 0..CHUNKS {
                    alive = alive && stream.send(request_body(chunk.clone(), false)).await;
                }
                streams.push(stream);
            }
            streams
        }
    }));
    let mut streams: Vec<Stream> = tokio::time::timeout(Duration::from_secs(180), sent)
        .await
        .expect("sending 2 GiB of partial bodies took over 180 s")
        .into_iter()
        .flatten()
        .collect();
    eprintln!(
        "{} streams sent 1 MiB each in {:?}",
        streams.len(),
        started.elapsed()
    );
    // Let the picker take in what is still in flight.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(epp.is_running());
    report("with 2,000 stalled 1 MiB bodies", &epp);

    // Each stream has either been refused (503 body_buffer_full) or has no answer yet.
    let answers = join_all(streams.iter_mut().map(|s| s.answer(Duration::from_secs(2)))).await;
    let (mut refused, mut waiting) = (0usize, 0usize);
    for answer in answers {
        match answer {
            Ok(Some(answer)) => {
                let immediate = immediate(&answer)
                    .unwrap_or_else(|| panic!("a stalled body got an answer: {answer:?}"));
                assert_eq!(
                    status_and_reason(immediate),
                    (503, "body_buffer_full".to_owned())
                );
                refused += 1;
            }
            Ok(None) => waiting += 1,
            Err(status) => panic!("a stalled stream failed: {status}"),
        }
    }
    eprintln!("{refused} refused with 503, {waiting} still waiting for their bodies");
    let buffered = metric(admin, "shepherd_extproc_buffered_body_bytes").await;
    let counted = metric(admin, "shepherd_extproc_body_buffer_full_total").await;
    eprintln!("buffered body bytes {buffered}, body_buffer_full counted {counted}");
    assert!(
        waiting * MIB <= MAX_BUFFERED,
        "{waiting} bodies of 1 MiB held"
    );
    assert!(refused >= streams.len() - MAX_BUFFERED / MIB);
    assert_eq!(counted as usize, refused);
    assert!(buffered <= MAX_BUFFERED as f64);
    let rss = epp.rss_kib();
    assert!(
        rss < start_rss + (MAX_BUFFERED / 1024) as u64 + 256 * 1024,
        "resident memory {rss} KiB (at start {start_rss} KiB) over the cap and a margin"
    );

    // While they stall, a small request is still served: small bodies have a reserve.
    let routed = legitimate_request(addr).await;
    assert!(!routed.is_empty());

    // The clients go: every buffered byte is given back.
    drop(streams);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let buffered = metric(admin, "shepherd_extproc_buffered_body_bytes").await;
        if buffered == 0.0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{buffered} body bytes still counted 10 s after every stream closed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    report("after the streams closed", &epp);
    assert!(!legitimate_request(addr).await.is_empty());
}

/// A BUFFERED body message over the body limit but within the gRPC message limit is answered
/// 413 `body_too_large`; one over even the message limit ends the stream with a gRPC error
/// status — never a clean end without an answer, which Envoy would take as "go on without a
/// destination".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_over_size_buffered_body_gets_413_and_a_far_larger_one_a_grpc_error() {
    let (mut epp, _servers) = picker(&[]).await;
    let addr = epp.addr("extproc");

    for (size, expect_413) in [(MAX_BODY + 2 * MIB, true), (3 * MAX_BODY, false)] {
        let mut stream = Stream::open(connect(addr).await).await.unwrap();
        assert!(
            stream
                .send(request_headers(&[], false, BodySendMode::Buffered))
                .await
        );
        let headers = stream
            .answer(Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap();
        assert!(
            matches!(headers.response, Some(Response::RequestHeaders(_))),
            "{headers:?}"
        );
        assert!(stream.send(request_body(vec![b'x'; size], true)).await);
        let answer = stream.answer(Duration::from_secs(20)).await;
        if expect_413 {
            let answer = answer
                .unwrap_or_else(|status| panic!("{size} bytes: gRPC error {status}"))
                .unwrap_or_else(|| panic!("{size} bytes: the stream ended without an answer"));
            let immediate = immediate(&answer).unwrap_or_else(|| panic!("{answer:?}"));
            assert_eq!(
                status_and_reason(immediate),
                (413, "body_too_large".to_owned())
            );
        } else {
            let status = answer.expect_err("a message over the gRPC limit must end in an error");
            eprintln!("{size} bytes: {status}");
            assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        }
    }
    assert!(epp.is_running());
    assert!(!legitimate_request(addr).await.is_empty());
}

/// 400 raw HTTP/2 streams that each send only a gRPC message prefix declaring a 16 MiB message
/// (under the picker's message limit), against a picker under a 4 GiB address-space limit. The
/// gRPC library would reserve each declared message before its bytes arrive (6.4 GiB in all);
/// the picker charges each declaration to its body budget first and ends the streams the
/// budget cannot hold with `RESOURCE_EXHAUSTED`, so it stays up and routes a legitimate
/// request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_declaring_huge_grpc_messages_reserve_nothing() {
    use bytes::Bytes;
    use http_body_util::StreamBody;
    use hyper::body::Frame;
    use hyper_util::rt::{TokioExecutor, TokioIo};

    const STREAMS: usize = 400;
    const DECLARED: u32 = MAX_BODY as u32;
    let (picker, _keep) = picker(&[("SHEPHERD_HOSTILE_RLIMIT_AS_KIB", "4194304")]).await;
    let addr = picker.addr("extproc");
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .unwrap();
    tokio::spawn(connection);
    let mut prefix = vec![0u8];
    prefix.extend_from_slice(&DECLARED.to_be_bytes());
    let prefix = Bytes::from(prefix);
    let mut bodies = Vec::with_capacity(STREAMS);
    let mut answers = Vec::with_capacity(STREAMS);
    for _ in 0..STREAMS {
        let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, std::convert::Infallible>>(1);
        tx.send(Ok(Frame::data(prefix.clone()))).await.unwrap();
        let request = hyper::Request::post(format!(
            "http://{addr}/envoy.service.ext_proc.v3.ExternalProcessor/Process"
        ))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(StreamBody::new(ReceiverStream::new(rx)))
        .unwrap();
        sender.ready().await.unwrap();
        answers.push(tokio::spawn(sender.send_request(request)));
        bodies.push(tx); // the rest of each message never comes
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    report("400 streams declaring 16 MiB messages", &picker);
    let mut picker = picker;
    assert!(picker.is_running(), "the picker died");
    assert!(
        picker.virtual_kib() < 3 * 1024 * 1024,
        "VmSize {} KiB",
        picker.virtual_kib()
    );
    let ended = answers.iter().filter(|a| a.is_finished()).count();
    let refused = metric(
        picker.addr("admin"),
        "shepherd_extproc_body_buffer_full_total",
    )
    .await;
    eprintln!("{ended} of {STREAMS} streams answered, {refused} refused by the body budget");
    assert!(
        refused as usize >= STREAMS - MAX_BUFFERED / MAX_BODY,
        "the budget refused {refused} declarations"
    );
    let routed = legitimate_request(addr).await;
    assert!(!routed.is_empty());
    drop(bodies);
}

/// A stream whose body stalls half-way is answered 408 `body_timeout` once
/// `--body-read-timeout-ms` has passed since its headers, and its bytes are given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_is_answered_408_at_its_deadline() {
    let servers = backends(1).await;
    let config = config_file(&format!("endpoints:\n{}", endpoint_lines(&servers)));
    let epp = Process::epp_with_env(&config, &["--body-read-timeout-ms", "1500"], &[]).await;
    let addr = epp.addr("extproc");
    let mut stream = streamed_request(addr).await;
    assert!(
        stream
            .send(request_body(vec![b' '; 256 * 1024], false))
            .await
    );
    let sent = std::time::Instant::now();
    let answer = stream
        .answer(Duration::from_secs(10))
        .await
        .unwrap()
        .expect("no answer to the stalled body");
    let waited = sent.elapsed();
    let immediate = immediate(&answer).unwrap_or_else(|| panic!("not a rejection: {answer:?}"));
    assert_eq!(
        status_and_reason(immediate),
        (408, "body_timeout".to_owned())
    );
    assert!(
        waited >= Duration::from_millis(1000),
        "answered after {waited:?}"
    );
    // Given back once the stream is over (the picker lingers up to a second to read what
    // still arrives).
    let mut held = f64::NAN;
    for _ in 0..30 {
        held = metric(epp.addr("admin"), "shepherd_extproc_buffered_body_bytes").await;
        if held == 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(held, 0.0, "the stalled body's bytes are given back");
    assert!(!legitimate_request(addr).await.is_empty());
}

/// Connections to the ext_proc port that never send the HTTP/2 preface are closed at the
/// preface deadline, and those over `--max-connections` as they arrive; the counters show
/// both, and the port serves again once the silent ones are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_and_surplus_connections_are_closed() {
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpStream;

    /// The streams the server closed within `wait`, and those still open.
    async fn split(streams: Vec<TcpStream>, wait: Duration) -> (usize, Vec<TcpStream>) {
        let reads = streams.into_iter().map(|mut stream| async move {
            let mut buf = [0u8; 64];
            let closed = matches!(
                tokio::time::timeout(wait, stream.read(&mut buf)).await,
                Ok(Ok(0) | Err(_))
            );
            (closed, stream)
        });
        let mut open = Vec::new();
        let mut closed = 0;
        for (was_closed, stream) in join_all(reads).await {
            if was_closed {
                closed += 1;
            } else {
                open.push(stream);
            }
        }
        (closed, open)
    }
    async fn closed_for(admin: SocketAddr, reason: &str) -> f64 {
        let page = shepherd_hostile_tests::metrics_page(admin).await;
        let line = format!(
            "shepherd_extproc_connections_closed_total{{port=\"extproc\",reason=\"{reason}\"}}"
        );
        shepherd_hostile_tests::sample(&page, &line)
    }

    let servers = backends(1).await;
    let config = config_file(&format!("endpoints:\n{}", endpoint_lines(&servers)));
    let epp = Process::epp_with_env(&config, &["--max-connections", "100"], &[]).await;
    let addr = epp.addr("extproc");
    let admin = epp.addr("admin");
    let files_before = epp.open_files();
    let mut silent = Vec::new();
    for _ in 0..150 {
        silent.push(TcpStream::connect(addr).await.unwrap());
    }
    // The server accepts them as fast as it can; the 50 over the cap are closed at once.
    for _ in 0..100 {
        if closed_for(admin, "connection_limit").await >= 50.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(closed_for(admin, "connection_limit").await, 50.0);
    let (surplus, silent) = split(silent, Duration::from_millis(500)).await;
    assert_eq!((surplus, silent.len()), (50, 100));
    // The 100 it kept are closed at the 10 s preface deadline.
    let (late, still_open) = split(silent, Duration::from_secs(12)).await;
    eprintln!(
        "{surplus} of 150 silent connections closed at once (over the cap), {late} at the preface deadline, {} left",
        still_open.len()
    );
    assert_eq!(late, 100);
    assert_eq!(closed_for(admin, "preface_timeout").await, 100.0);
    assert!(!legitimate_request(addr).await.is_empty());
    assert!(
        epp.open_files() <= files_before + 4,
        "open files {} before, {} after",
        files_before,
        epp.open_files()
    );
}
