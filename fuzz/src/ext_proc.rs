//! The ext_proc stream state machine under message sequences read from the fuzzer's bytes.
//!
//! Byte 0 sets the stream: bits 0–2 the request body mode, bits 3–5 the response body mode
//! (each an index into [`MODES`]), bit 6 whether the first message carries them in
//! `protocol_config`, bit 7 whether the request headers carry a subset hint. Then each op is
//! one byte — its low 3 bits the kind — sometimes followed by a length byte:
//!
//! | kind | message | the other bits |
//! |---|---|---|
//! | 0 | request headers | bits 3–4 the path, bit 5 two subset entries (else an empty hint, when byte 0 asks for one), bit 6 a `content-length` (next byte × 64), bit 7 `end_of_stream` |
//! | 1, 2 | request body | next byte the length; bit 3: the piece comes from a valid body, else from the input; bit 7 `end_of_stream` |
//! | 3 | request trailers | |
//! | 4 | response headers | bits 3–4 the status, bit 6 a served-endpoint report (bits 5 and 3 pick which), bit 7 `end_of_stream` |
//! | 5 | response body | next byte the length, bytes from the input; bit 7 `end_of_stream` |
//! | 6 | response trailers | |
//! | 7 | a message with no request | |
//!
//! Checked: nothing panics; a request gets at most one deciding answer (a routing answer or
//! an `ImmediateResponse`); routing answers name only pool members, the same in the header
//! and the metadata; the body streamed back is exactly the body received, in chunks of at
//! most [`CHUNK`] bytes; when the stream ends nothing stays in flight and the completion
//! hooks ran once per routed request.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use shepherd_adapters_extproc::envoy_types::pb::envoy::config::core::v3::{
    HeaderMap, HeaderValue, Metadata,
};
use shepherd_adapters_extproc::envoy_types::pb::envoy::service::ext_proc::v3::processing_request::Request;
use shepherd_adapters_extproc::envoy_types::pb::envoy::service::ext_proc::v3::processing_response::Response;
use shepherd_adapters_extproc::envoy_types::pb::envoy::service::ext_proc::v3::{
    CommonResponse, HttpBody, HttpHeaders, HttpTrailers, ProcessingRequest, ProcessingResponse,
    ProtocolConfiguration, body_mutation,
};
use shepherd_adapters_extproc::envoy_types::pb::google::protobuf::value::Kind;
use shepherd_adapters_extproc::envoy_types::pb::google::protobuf::{ListValue, Struct, Value};
use shepherd_adapters_extproc::{Exchange, ExtProcOptions, Rejection, Step};
use shepherd_scheduler_core::completion::{CompletedRequest, Completion, CompletionHook};
use shepherd_scheduler_core::endpoint::Pool;
use shepherd_scheduler_core::profile::Profile;
use shepherd_scheduler_core::reload::ReloadableScheduler;
use shepherd_scheduler_core::scheduler::{ScheduleOptions, Scheduler};

/// Body modes byte 0 picks from (`FULL_DUPLEX_STREAMED` and `BUFFERED` most often).
pub const MODES: [i32; 8] = [4, 2, 4, 3, 0, 1, 2, 9];

/// The chunk size the picker streams bodies back in, small so chunking is exercised.
pub const CHUNK: usize = 13;

const PATHS: [&str; 4] = [
    "/v1/completions",
    "/v1/chat/completions",
    "/v1/completions?x=1",
    "/v1/models",
];

const VALID: &[u8] = br#"{"model":"llama","prompt":"Once upon a time","messages":[{"role":"user","content":"hi"}],"stream":true}"#;

const POOL: [&str; 3] = ["127.0.0.1:8000", "127.0.0.1:8001", "127.0.0.1:8002"];

#[derive(Default)]
struct Count(AtomicUsize);

impl CompletionHook for Count {
    fn on_complete(&self, _: &CompletedRequest<'_>, _: &Completion) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

struct Picker {
    scheduler: ReloadableScheduler,
    ended: Arc<Count>,
    options: Arc<ExtProcOptions>,
}

fn picker() -> &'static Picker {
    static PICKER: OnceLock<Picker> = OnceLock::new();
    PICKER.get_or_init(|| {
        let pool = Arc::new(Pool::new());
        pool.set_members(POOL);
        let ended = Arc::new(Count::default());
        let scheduler = Scheduler::builder(pool)
            .profile(Profile::builder("default").build())
            .completion_hook(ended.clone())
            .max_endpoints(2)
            .build()
            .expect("a profile with no plugins builds");
        let options = ExtProcOptions::default()
            .with_chunk_size(CHUNK)
            .with_max_body_bytes(400);
        Picker {
            scheduler: ReloadableScheduler::new(scheduler),
            ended,
            options: Arc::new(options),
        }
    })
}

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let n = n.min(self.0.len());
        let (taken, rest) = self.0.split_at(n);
        self.0 = rest;
        taken.to_vec()
    }
}

fn headers(pairs: &[(&str, String)]) -> HeaderMap {
    HeaderMap {
        headers: pairs
            .iter()
            .map(|(k, v)| HeaderValue {
                key: (*k).to_string(),
                value: String::new(),
                raw_value: v.as_bytes().to_vec(),
            })
            .collect(),
    }
}

fn metadata(namespace: &str, key: &str, value: Value) -> Metadata {
    let mut m = Metadata::default();
    m.filter_metadata.insert(
        namespace.to_string(),
        Struct {
            fields: [(key.to_string(), value)].into(),
        },
    );
    m
}

fn string(s: &str) -> Value {
    Value {
        kind: Some(Kind::StringValue(s.to_string())),
    }
}

/// What the answers said so far.
#[derive(Default)]
struct Seen {
    decisive: usize,
    routed: usize,
    body_back: Vec<u8>,
    body_back_ended: bool,
}

fn check(answer: &ProcessingResponse, seen: &mut Seen) {
    let common: Option<&CommonResponse> = match &answer.response {
        Some(Response::RequestHeaders(h)) => h.response.as_ref(),
        Some(Response::RequestBody(b)) => b.response.as_ref(),
        Some(Response::ImmediateResponse(i)) => {
            seen.decisive += 1;
            let code = i.status.map(|s| s.code).unwrap_or_default();
            assert!(matches!(code, 400 | 404 | 413 | 429 | 500 | 503), "{code}");
            None
        }
        _ => None,
    };
    let Some(common) = common else {
        return;
    };
    if let Some(lb) = answer.dynamic_metadata.as_ref() {
        seen.decisive += 1;
        seen.routed += 1;
        assert!(common.clear_route_cache);
        let header = common
            .header_mutation
            .as_ref()
            .and_then(|m| m.set_headers.first())
            .and_then(|o| o.header.as_ref())
            .expect("the destination header");
        assert_eq!(header.key, "x-gateway-destination-endpoint");
        assert!(header.value.is_empty());
        let destination = String::from_utf8(header.raw_value.clone()).expect("UTF-8");
        assert!(destination.split(',').all(|e| POOL.contains(&e)));
        let Some(Kind::StructValue(inner)) =
            lb.fields.get("envoy.lb").and_then(|v| v.kind.as_ref())
        else {
            panic!("envoy.lb namespace")
        };
        assert_eq!(
            inner.fields.get("x-gateway-destination-endpoint"),
            Some(&string(&destination))
        );
    }
    if let Some(Response::RequestBody(_)) = &answer.response
        && let Some(body_mutation::Mutation::StreamedResponse(s)) = common
            .body_mutation
            .as_ref()
            .and_then(|m| m.mutation.as_ref())
    {
        assert!(s.body.len() <= CHUNK);
        assert!(!seen.body_back_ended, "a chunk after the end of stream");
        seen.body_back.extend_from_slice(&s.body);
        seen.body_back_ended = s.end_of_stream;
    }
}

/// Runs one message sequence through a fresh [`Exchange`]. See the [module docs](self).
pub fn ext_proc_sequence(data: &[u8]) {
    let picker = picker();
    let mut input = Input(data);
    let Some(setup) = input.byte() else {
        return;
    };
    let protocol = ProtocolConfiguration {
        request_body_mode: MODES[usize::from(setup & 7)],
        response_body_mode: MODES[usize::from((setup >> 3) & 7)],
        send_body_without_waiting_for_header_response: false,
    };
    let mut protocol = (setup & 0x40 != 0).then_some(protocol);
    let with_subset = setup & 0x80 != 0;

    let ended_before = picker.ended.0.load(Ordering::Relaxed);
    let mut exchange = Exchange::new(Arc::clone(&picker.options));
    let mut valid_at = 0usize;
    let mut received = Vec::new();
    let mut seen = Seen::default();
    while let Some(op) = input.byte() {
        let eos = op & 0x80 != 0;
        let mut metadata_context = None;
        let request = match op & 7 {
            0 => {
                let mut pairs = vec![(":path", PATHS[usize::from((op >> 3) & 3)].to_string())];
                if op & 0x40 != 0 {
                    let length = usize::from(input.byte().unwrap_or(0)) * 64;
                    pairs.push(("content-length", length.to_string()));
                }
                pairs.push(("x-gateway-destination-endpoint", "127.0.0.9:9".to_string()));
                if with_subset {
                    // Bit 5: two entries, else none (an empty hint).
                    let entries: usize = if op & 0x20 != 0 { 2 } else { 0 };
                    let list = (0..entries).map(|i| string(POOL[i % POOL.len()])).collect();
                    metadata_context = Some(metadata(
                        "envoy.lb.subset_hint",
                        "x-gateway-destination-endpoint-subset",
                        Value {
                            kind: Some(Kind::ListValue(ListValue { values: list })),
                        },
                    ));
                }
                Request::RequestHeaders(HttpHeaders {
                    headers: Some(headers(&pairs)),
                    end_of_stream: eos,
                    ..Default::default()
                })
            }
            1 | 2 => {
                let n = usize::from(input.byte().unwrap_or(0));
                let body = if op & 8 != 0 {
                    let start = valid_at.min(VALID.len());
                    let end = start.saturating_add(n).min(VALID.len());
                    valid_at = end;
                    VALID[start..end].to_vec()
                } else {
                    input.bytes(n)
                };
                Request::RequestBody(HttpBody {
                    body,
                    end_of_stream: eos,
                    ..Default::default()
                })
            }
            3 => Request::RequestTrailers(HttpTrailers::default()),
            4 => {
                let status = ["200", "201", "404", "503"][usize::from((op >> 3) & 3)];
                if op & 0x40 != 0 {
                    let served = POOL[usize::from(((op >> 4) & 2) | ((op >> 3) & 1)) % POOL.len()];
                    metadata_context = Some(metadata(
                        "envoy.lb",
                        "x-gateway-destination-endpoint-served",
                        string(served),
                    ));
                }
                Request::ResponseHeaders(HttpHeaders {
                    headers: Some(headers(&[(":status", status.to_string())])),
                    end_of_stream: eos,
                    ..Default::default()
                })
            }
            5 => {
                let n = usize::from(input.byte().unwrap_or(0));
                Request::ResponseBody(HttpBody {
                    body: input.bytes(n),
                    end_of_stream: eos,
                    ..Default::default()
                })
            }
            6 => Request::ResponseTrailers(HttpTrailers::default()),
            _ => {
                if exchange.on_message(ProcessingRequest::default()).is_err() {
                    break;
                }
                continue;
            }
        };
        let decided = seen.decisive > 0 || exchange.is_done();
        if let Request::RequestBody(b) = &request
            && !decided
        {
            received.extend_from_slice(&b.body);
        }
        let message = ProcessingRequest {
            request: Some(request),
            metadata_context,
            protocol_config: protocol.take(),
            ..Default::default()
        };
        let replies = match exchange.on_message(message) {
            Ok(Step::Reply(replies)) => replies,
            Ok(Step::Pick(job)) => {
                let options = ScheduleOptions {
                    subset: job.subset.as_deref(),
                    ..Default::default()
                };
                let outcome = picker
                    .scheduler
                    .schedule_with(&job.request, options)
                    .map_err(Rejection::from);
                exchange.picked(outcome)
            }
            // The stream ends with a gRPC error status.
            Err(error) => {
                assert!(!error.to_string().is_empty());
                break;
            }
        };
        for answer in replies {
            // What goes on the wire (the hand-written chunk encoding included) is what prost
            // decodes back into the same answer.
            let mut wire = Vec::new();
            answer.encode_to(&mut wire);
            assert_eq!(wire.len(), answer.encoded_len());
            let answer = answer.into_response();
            let decoded = <ProcessingResponse as prost::Message>::decode(wire.as_slice())
                .expect("an answer's encoding decodes");
            assert_eq!(decoded, answer);
            check(&answer, &mut seen);
        }
        assert!(seen.decisive <= 1, "a request answered twice");
    }
    if seen.routed == 1 && !seen.body_back.is_empty() {
        assert_eq!(
            seen.body_back, received,
            "the body streamed back is the body received"
        );
    }
    drop(exchange);
    let in_flight: u64 = picker
        .scheduler
        .shared()
        .pool
        .snapshot()
        .endpoints()
        .iter()
        .map(|e| e.in_flight_requests())
        .sum();
    assert_eq!(in_flight, 0);
    assert_eq!(
        picker.ended.0.load(Ordering::Relaxed) - ended_before,
        seen.routed,
        "hooks once per routed request"
    );
}
