//! The stream state machine under arbitrary message sequences — any order, any body modes,
//! bodies valid or not, cut anywhere — never panics, answers each request exactly once
//! (a routing answer or an ImmediateResponse, never both, never two), streams back exactly the
//! body it received in chunks no larger than the chunk size, and always releases what it
//! counted in flight and runs the completion hooks once per routed request.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::{Recorder, header_map, list_metadata, loopback, string_metadata};
use proptest::prelude::*;
use shepherd_adapters_extproc::envoy_types::pb::envoy::config::core::v3::Metadata;
use shepherd_adapters_extproc::envoy_types::pb::envoy::service::ext_proc::v3::processing_request::Request;
use shepherd_adapters_extproc::envoy_types::pb::envoy::service::ext_proc::v3::processing_response::Response;
use shepherd_adapters_extproc::envoy_types::pb::envoy::service::ext_proc::v3::{
    HttpBody, HttpHeaders, HttpTrailers, ProcessingRequest, ProcessingResponse,
    ProtocolConfiguration, body_mutation,
};
use shepherd_adapters_extproc::{Exchange, ExtProcOptions, Rejection, Step};
use shepherd_scheduler_core::config::PluginSpec;
use shepherd_scheduler_core::endpoint::Pool;
use shepherd_scheduler_core::plugin::PluginInstance;
use shepherd_scheduler_core::reload::ReloadableScheduler;
use shepherd_scheduler_core::scheduler::ScheduleOptions;
use shepherd_scheduler_core::shared::SharedState;
use shepherd_scorers::{builtin_registry, default_config};

const CHUNK: usize = 7;

const BODIES: [&[u8]; 4] = [
    // Valid for both inference paths: each reads its own prompt field.
    br#"{"model":"llama","prompt":"Once","messages":[{"role":"user","content":"hi"}]}"#,
    br#"{"model":"llama","messages":[{"role":"user","content":"hello there"}],"prompt":"Once upon a time","stream":true}"#,
    br#"{"model":"llama","messages":[{"role":"user""#,
    b"\xff\xfenot json",
];

const PATHS: [&str; 3] = ["/v1/completions", "/v1/chat/completions", "/healthz"];

#[derive(Debug, Clone)]
enum Op {
    Headers {
        path: usize,
        end_of_stream: bool,
        content_length: Option<usize>,
        client_destination: bool,
        subset: Option<Vec<u16>>,
    },
    Body {
        take: usize,
        end_of_stream: bool,
    },
    Trailers,
    ResponseHeaders {
        status: u16,
        end_of_stream: bool,
        served: Option<u16>,
    },
    ResponseBody {
        bytes: Vec<u8>,
        end_of_stream: bool,
    },
    ResponseTrailers,
    Empty,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0..PATHS.len(), any::<bool>(), prop::option::of(0usize..200), any::<bool>(),
              prop::option::of(prop::collection::vec(0u16..5, 0..3)))
            .prop_map(|(path, end_of_stream, content_length, client_destination, subset)| Op::Headers {
                path, end_of_stream, content_length, client_destination, subset,
            }),
        4 => (0usize..40, prop::bool::weighted(0.3))
            .prop_map(|(take, end_of_stream)| Op::Body { take, end_of_stream }),
        1 => Just(Op::Trailers),
        2 => (prop::sample::select(vec![200u16, 200, 404, 500]), prop::bool::weighted(0.2), prop::option::of(0u16..4))
            .prop_map(|(status, end_of_stream, served)| Op::ResponseHeaders { status, end_of_stream, served }),
        3 => (prop::collection::vec(any::<u8>(), 0..20), prop::bool::weighted(0.3))
            .prop_map(|(bytes, end_of_stream)| Op::ResponseBody { bytes, end_of_stream }),
        1 => Just(Op::ResponseTrailers),
        1 => Just(Op::Empty),
    ]
}

/// A likely sequence (headers, body pieces, response) with random cuts and insertions, so most
/// cases get far into the exchange while still trying every order.
fn sequence() -> impl Strategy<Value = Vec<Op>> {
    let likely = (
        0..PATHS.len() - 1,
        prop::option::weighted(0.3, prop::collection::vec(0u16..4, 0..3)),
        prop::collection::vec((1usize..40, prop::bool::weighted(0.05)), 1..6),
        prop::collection::vec(op(), 0..8),
    )
        .prop_map(|(path, subset, pieces, response)| {
            let mut ops = vec![Op::Headers {
                path,
                end_of_stream: false,
                content_length: None,
                client_destination: true,
                subset,
            }];
            let n = pieces.len();
            for (i, (take, eos)) in pieces.into_iter().enumerate() {
                let last = i + 1 == n;
                ops.push(Op::Body {
                    // The last piece takes the rest: most bodies arrive whole.
                    take: if last { usize::MAX } else { take },
                    end_of_stream: eos || last,
                });
            }
            // A well-formed response start half the time, then anything.
            if response.len() % 2 == 0 {
                ops.push(Op::ResponseHeaders {
                    status: 200,
                    end_of_stream: false,
                    served: None,
                });
            }
            ops.extend(response);
            ops
        });
    prop_oneof![
        3 => likely,
        1 => prop::collection::vec(op(), 0..16),
    ]
}

fn mode() -> impl Strategy<Value = Option<(i32, i32)>> {
    prop::option::weighted(
        0.6,
        (
            prop::sample::select(vec![0, 1, 2, 3, 4, 4, 4, 2, 9]),
            prop::sample::select(vec![0, 1, 2, 3, 4, 4]),
        ),
    )
}

fn scheduler(recorder: &Arc<Recorder>) -> Arc<ReloadableScheduler> {
    let mut registry = builtin_registry();
    let hook = Arc::clone(recorder);
    registry.register("test-completion-recorder", move |_| {
        Ok(PluginInstance::default().with_completion_hook(hook.clone()))
    });
    let mut config = default_config();
    config.plugins.push(PluginSpec {
        plugin_type: "test-completion-recorder".into(),
        name: None,
        parameters: serde_json::Value::Null,
    });
    let shared = SharedState::new(Arc::new(Pool::new()));
    shared.pool.set_members(loopback(3));
    Arc::new(ReloadableScheduler::build(&config, &registry, shared).unwrap())
}

fn message(
    op: &Op,
    body: &[u8],
    sent: &mut usize,
    first: bool,
    mode: Option<(i32, i32)>,
) -> ProcessingRequest {
    let mut metadata: Option<Metadata> = None;
    let request = match op {
        Op::Headers {
            path,
            end_of_stream,
            content_length,
            client_destination,
            subset,
        } => {
            let mut headers = vec![
                (":path", PATHS[*path].to_string()),
                (":method", "POST".into()),
            ];
            if let Some(len) = content_length {
                headers.push(("content-length", len.to_string()));
            }
            if *client_destination {
                headers.push(("x-gateway-destination-endpoint", "127.0.0.77:1".into()));
                headers.push((
                    "x-gateway-destination-endpoint-served",
                    "127.0.0.77:1".into(),
                ));
            }
            if let Some(subset) = subset {
                let entries: Vec<String> = subset
                    .iter()
                    .map(|i| format!("127.0.0.1:{}", 8000 + i))
                    .collect();
                let refs: Vec<&str> = entries.iter().map(String::as_str).collect();
                metadata = Some(list_metadata(
                    "envoy.lb.subset_hint",
                    "x-gateway-destination-endpoint-subset",
                    &refs,
                ));
            }
            let pairs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            Request::RequestHeaders(HttpHeaders {
                headers: Some(header_map(&pairs)),
                end_of_stream: *end_of_stream,
                ..Default::default()
            })
        }
        Op::Body {
            take,
            end_of_stream,
        } => {
            let start = (*sent).min(body.len());
            let end = start.saturating_add(*take).min(body.len());
            *sent = end;
            Request::RequestBody(HttpBody {
                body: body[start..end].to_vec(),
                end_of_stream: *end_of_stream,
                ..Default::default()
            })
        }
        Op::Trailers => Request::RequestTrailers(HttpTrailers::default()),
        Op::ResponseHeaders {
            status,
            end_of_stream,
            served,
        } => {
            if let Some(i) = served {
                metadata = Some(string_metadata(
                    "envoy.lb",
                    "x-gateway-destination-endpoint-served",
                    &format!("127.0.0.1:{}", 8000 + i),
                ));
            }
            Request::ResponseHeaders(HttpHeaders {
                headers: Some(header_map(&[(":status", &status.to_string())])),
                end_of_stream: *end_of_stream,
                ..Default::default()
            })
        }
        Op::ResponseBody {
            bytes,
            end_of_stream,
        } => Request::ResponseBody(HttpBody {
            body: bytes.clone(),
            end_of_stream: *end_of_stream,
            ..Default::default()
        }),
        Op::ResponseTrailers => Request::ResponseTrailers(HttpTrailers::default()),
        Op::Empty => {
            return ProcessingRequest::default();
        }
    };
    ProcessingRequest {
        request: Some(request),
        metadata_context: metadata,
        protocol_config: (first && mode.is_some()).then(|| {
            let (request_body_mode, response_body_mode) = mode.unwrap_or_default();
            ProtocolConfiguration {
                request_body_mode,
                response_body_mode,
                send_body_without_waiting_for_header_response: false,
            }
        }),
        ..Default::default()
    }
}

/// What one answer says about the request.
#[derive(Debug, Default)]
struct Tally {
    decisive: usize,
    routed: usize,
    request_body: Vec<u8>,
    request_body_ended: bool,
}

fn tally(answer: &ProcessingResponse, t: &mut Tally) {
    match &answer.response {
        Some(Response::ImmediateResponse(i)) => {
            t.decisive += 1;
            let code = i.status.unwrap().code;
            assert!(
                matches!(code, 400 | 404 | 413 | 429 | 500 | 503),
                "status {code}"
            );
            assert!(
                i.headers.as_ref().unwrap().set_headers.iter().any(|o| o
                    .header
                    .as_ref()
                    .unwrap()
                    .key
                    == "x-shepherd-dropped-reason")
            );
        }
        Some(Response::RequestHeaders(_)) | Some(Response::RequestBody(_))
            if answer.dynamic_metadata.is_some() =>
        {
            t.decisive += 1;
            t.routed += 1;
            let common = match &answer.response {
                Some(Response::RequestHeaders(h)) => h.response.as_ref().unwrap(),
                Some(Response::RequestBody(b)) => b.response.as_ref().unwrap(),
                _ => unreachable!(),
            };
            assert!(common.clear_route_cache);
            let destination = common::set_value(common, "x-gateway-destination-endpoint").unwrap();
            assert_eq!(
                common::metadata_destination(answer),
                Some(destination.clone())
            );
            assert!(!destination.contains("127.0.0.77"));
        }
        _ => {}
    }
    if let Some(Response::RequestBody(b)) = &answer.response
        && let Some(body_mutation::Mutation::StreamedResponse(s)) = b
            .response
            .as_ref()
            .and_then(|c| c.body_mutation.as_ref())
            .and_then(|m| m.mutation.as_ref())
    {
        assert!(s.body.len() <= CHUNK);
        assert!(!t.request_body_ended, "no chunk after the end of stream");
        t.request_body.extend_from_slice(&s.body);
        t.request_body_ended = s.end_of_stream;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn any_message_sequence_is_answered_once_and_released(
        ops in sequence(),
        body_index in prop::sample::select(vec![0usize, 0, 0, 1, 1, 2, 3]),
        mode in mode(),
    ) {
        let recorder = Arc::new(Recorder::default());
        let scheduler = scheduler(&recorder);
        let options = Arc::new(ExtProcOptions::default().with_chunk_size(CHUNK).with_max_body_bytes(100));
        let body = BODIES[body_index];
        let mut exchange = Exchange::new(Arc::clone(&options));
        let mut sent = 0usize;
        let mut received = Vec::new();
        let mut completed = false;
        let mut t = Tally::default();
        for (i, op) in ops.iter().enumerate() {
            let message = message(op, body, &mut sent, i == 0, mode);
            if let Some(Request::RequestBody(b)) = &message.request && !completed {
                received.extend_from_slice(&b.body);
            }
            let step = match exchange.on_message(message) {
                Ok(step) => step,
                Err(error) => {
                    // The stream ends with a gRPC error: nothing more is read.
                    prop_assert!(!error.to_string().is_empty());
                    break;
                }
            };
            let replies = match step {
                Step::Reply(replies) => replies,
                Step::Pick(job) => {
                    completed = true;
                    prop_assert!(exchange.is_picking());
                    let options = ScheduleOptions { subset: job.subset.as_deref(), ..Default::default() };
                    let outcome = scheduler.schedule_with(&job.request, options).map_err(Rejection::from);
                    exchange.picked(outcome)
                }
            };
            for answer in replies.into_responses() {
                tally(&answer, &mut t);
            }
            if t.decisive > 0 {
                completed = true;
            }
            prop_assert!(t.decisive <= 1, "answered twice");
        }
        if t.routed == 1 && !t.request_body.is_empty() {
            prop_assert_eq!(&t.request_body, &received, "the body streamed back is the body received");
        }
        let routed = t.routed;
        drop(exchange); // the stream ends
        let in_flight: u64 = scheduler.shared().pool.snapshot().endpoints().iter().map(|e| e.in_flight_requests()).sum();
        prop_assert_eq!(in_flight, 0);
        prop_assert_eq!(recorder.ended().len(), routed, "hooks run once per routed request");
    }
}
