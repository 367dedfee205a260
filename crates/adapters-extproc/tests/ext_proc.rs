//! The picker driven over gRPC the way Envoy drives it, in-process on loopback: routing answers
//! and their exact shape, bodies streamed back, both body modes, subset hints, rejections, and
//! the response path feeding the completion hooks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use shepherd_adapters_extproc::envoy_types::pb::envoy::config::core::v3::header_value_option::HeaderAppendAction;
use shepherd_adapters_extproc::envoy_types::pb::envoy::extensions::filters::http::ext_proc::v3::processing_mode::BodySendMode;
use shepherd_adapters_extproc::envoy_types::pb::envoy::service::ext_proc::v3::processing_response::Response;
use shepherd_adapters_extproc::envoy_types::pb::envoy::service::ext_proc::v3::ProcessingRequest;
use shepherd_adapters_extproc::{Admission, Admitted, BoxFuture, ExtProcOptions, Rejection};
use shepherd_scheduler_core::completion::{Outcome, Usage};
use shepherd_scheduler_core::request::InferenceRequest;

const CHAT: &str = "/v1/chat/completions";
const COMPLETIONS: &str = "/v1/completions";

fn chat_body(text: &str) -> Vec<u8> {
    serde_json::json!({"model": "llama", "messages": [{"role": "user", "content": text}]})
        .to_string()
        .into_bytes()
}

/// Sends a full-duplex request and returns the routing answer and the body streamed back.
async fn route(
    stream: &mut EnvoyStream,
    headers: &[(String, String)],
    body: &[u8],
    metadata: Option<shepherd_adapters_extproc::envoy_types::pb::envoy::config::core::v3::Metadata>,
) -> (
    shepherd_adapters_extproc::envoy_types::pb::envoy::service::ext_proc::v3::ProcessingResponse,
    Vec<(Vec<u8>, bool)>,
) {
    stream
        .request_headers(headers, false, metadata, duplex())
        .await;
    stream.request_body_chunked(body, 16 * 1024).await;
    let answer = stream.next().await;
    let chunks = stream.streamed_request_body().await;
    (answer, chunks)
}

#[tokio::test]
async fn destination_header_via_raw_value_and_metadata_with_fallbacks() {
    let picker = Picker::start(4, ExtProcOptions::default()).await;
    let mut stream = picker.open().await;
    let body = chat_body("hello");
    let (answer, _) = route(
        &mut stream,
        &post(CHAT, &[("x-request-id", "req-1")]),
        &body,
        None,
    )
    .await;

    let common = headers_answer(&answer);
    let destination = set_value(common, DESTINATION).expect("destination header");
    let endpoints: Vec<&str> = destination.split(',').collect();
    assert_eq!(
        endpoints.len(),
        3,
        "primary plus two fallbacks: {destination}"
    );
    let pool = loopback(4);
    for e in &endpoints {
        assert!(pool.contains(&e.to_string()), "{e} is a pool member");
    }
    let mut distinct = endpoints.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "fallbacks are distinct");
    assert_eq!(
        metadata_destination(&answer).as_deref(),
        Some(destination.as_str())
    );
    assert!(common.clear_route_cache);
    assert_eq!(
        set_value(common, "content-length"),
        Some(body.len().to_string())
    );
    let option = common.header_mutation.as_ref().unwrap().set_headers[0].clone();
    assert_eq!(
        option.append_action,
        HeaderAppendAction::OverwriteIfExistsOrAdd as i32
    );
    assert!(common.body_mutation.is_none());

    // The primary counts the request in flight until the response ends.
    assert_eq!(picker.endpoint(endpoints[0]).in_flight_requests(), 1);
    stream.response_headers("200", false, None).await;
    stream.next().await;
    stream.response_body(b"{}", true).await;
    stream.next().await;
    let ended = picker.recorder.wait_for("req-1").await;
    assert_eq!(ended.endpoint, endpoints[0]);
    assert_eq!(ended.outcome, Outcome::Success);
    assert_eq!(picker.in_flight(), 0);
}

#[tokio::test]
async fn body_streams_back_in_chunks_of_at_most_62000_bytes_unchanged() {
    let picker = Picker::start(2, ExtProcOptions::default()).await;
    let mut stream = picker.open().await;
    let body = completion_body("llama", 200_000);
    let (_, chunks) = route(&mut stream, &post(COMPLETIONS, &[]), &body, None).await;
    assert_eq!(chunks.len(), body.len().div_ceil(62_000));
    assert!(chunks.iter().all(|(c, _)| c.len() <= 62_000));
    assert!(chunks[..chunks.len() - 1].iter().all(|(_, eos)| !eos));
    let joined: Vec<u8> = chunks.into_iter().flat_map(|(c, _)| c).collect();
    assert_eq!(joined, body);
}

#[tokio::test]
async fn six_megabyte_body_is_routed_in_both_modes() {
    let picker = Picker::start(2, ExtProcOptions::default()).await;
    let body = completion_body("llama", 6 * 1024 * 1024);

    let mut stream = picker.open().await;
    let (answer, chunks) = route(&mut stream, &post(COMPLETIONS, &[]), &body, None).await;
    assert!(set_value(headers_answer(&answer), DESTINATION).is_some());
    assert_eq!(
        set_value(headers_answer(&answer), "content-length"),
        Some(body.len().to_string())
    );
    let joined: Vec<u8> = chunks.into_iter().flat_map(|(c, _)| c).collect();
    assert_eq!(joined, body);

    // BUFFERED: the whole body in one gRPC message (over tonic's 4 MiB default).
    let mut stream = picker.open().await;
    stream
        .request_headers(&post(COMPLETIONS, &[]), false, None, buffered())
        .await;
    stream.next().await;
    stream.request_body(&body, true).await;
    let answer = stream.next().await;
    let Some(Response::RequestBody(b)) = &answer.response else {
        panic!("expected the body answer, got {answer:?}")
    };
    assert!(set_value(b.response.as_ref().unwrap(), DESTINATION).is_some());
}

#[tokio::test]
async fn buffered_mode_answers_headers_at_once_and_routes_on_the_body() {
    let picker = Picker::start(3, ExtProcOptions::default()).await;
    let mut stream = picker.open().await;
    let headers = post(
        CHAT,
        &[
            ("x-request-id", "buf-1"),
            ("x-gateway-destination-endpoint-served", "127.0.0.9:1"),
        ],
    );
    stream
        .request_headers(&headers, false, None, buffered())
        .await;

    // Envoy holds a buffered body until its headers are answered: they are answered at once,
    // with no destination yet, only the client's owned header removed.
    let first = stream.next().await;
    let common = headers_answer(&first);
    assert_eq!(set_value(common, DESTINATION), None);
    assert_eq!(
        common.header_mutation.as_ref().unwrap().remove_headers,
        vec!["x-gateway-destination-endpoint-served".to_string()]
    );
    assert!(first.dynamic_metadata.is_none());

    let body = chat_body("buffered");
    stream.request_body(&body, true).await;
    let answer = stream.next().await;
    let Some(Response::RequestBody(b)) = &answer.response else {
        panic!("expected the body answer, got {answer:?}")
    };
    let common = b.response.as_ref().unwrap();
    let destination = set_value(common, DESTINATION).unwrap();
    assert_eq!(metadata_destination(&answer), Some(destination));
    assert!(common.clear_route_cache);
    assert!(
        common.body_mutation.is_none(),
        "the buffered body goes on unchanged"
    );
    assert_eq!(set_value(common, "content-length"), None);

    // Response path in buffered mode: one body message, answered without a mutation.
    stream.response_headers("200", false, None).await;
    stream.next().await;
    stream
        .response_body(
            br#"{"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":6}}"#,
            true,
        )
        .await;
    let answer = stream.next().await;
    let Some(Response::ResponseBody(b)) = &answer.response else {
        panic!("expected a response body answer")
    };
    assert!(b.response.as_ref().unwrap().body_mutation.is_none());
    let ended = picker.recorder.wait_for("buf-1").await;
    assert_eq!(ended.usage.unwrap().completion_tokens, 6);
}

#[tokio::test]
async fn subset_hint_restricts_the_choice() {
    let picker = Picker::start(4, ExtProcOptions::default()).await;
    for namespace in ["envoy.lb.subset_hint", "envoy.lb"] {
        for i in 0..5 {
            let mut stream = picker.open().await;
            let hint = list_metadata(
                namespace,
                "x-gateway-destination-endpoint-subset",
                &["127.0.0.1:8002"],
            );
            let body = chat_body(&format!("question {i}"));
            let (answer, _) = route(&mut stream, &post(CHAT, &[]), &body, Some(hint)).await;
            assert_eq!(
                set_value(headers_answer(&answer), DESTINATION).as_deref(),
                Some("127.0.0.1:8002")
            );
        }
    }
    // Two allowed: both named, nothing else.
    let mut stream = picker.open().await;
    let hint = list_metadata(
        "envoy.lb.subset_hint",
        "x-gateway-destination-endpoint-subset",
        &["127.0.0.1:8001", "127.0.0.1:8003"],
    );
    let (answer, _) = route(&mut stream, &post(CHAT, &[]), &chat_body("two"), Some(hint)).await;
    let destination = set_value(headers_answer(&answer), DESTINATION).unwrap();
    let mut named: Vec<&str> = destination.split(',').collect();
    named.sort_unstable();
    assert_eq!(named, ["127.0.0.1:8001", "127.0.0.1:8003"]);
}

#[tokio::test]
async fn empty_or_unmatched_subset_is_503() {
    let picker = Picker::start(2, ExtProcOptions::default()).await;
    for entries in [&[][..], &["127.0.0.1:9999"][..]] {
        let mut stream = picker.open().await;
        let hint = list_metadata(
            "envoy.lb.subset_hint",
            "x-gateway-destination-endpoint-subset",
            entries,
        );
        stream
            .request_headers(&post(CHAT, &[]), false, Some(hint), duplex())
            .await;
        stream.request_body(&chat_body("x"), true).await;
        let answer = stream.next().await;
        let immediate = immediate(&answer);
        assert_eq!(immediate.status.unwrap().code, 503);
        assert_eq!(reason(immediate), "empty_subset");
    }
    assert_eq!(picker.in_flight(), 0);
}

#[tokio::test]
async fn client_supplied_destination_is_overwritten() {
    let picker = Picker::start(2, ExtProcOptions::default()).await;
    let mut stream = picker.open().await;
    let headers = post(
        CHAT,
        &[
            ("x-gateway-destination-endpoint", "127.0.0.66:6666"),
            ("x-gateway-destination-endpoint-served", "127.0.0.66:6666"),
        ],
    );
    let (answer, _) = route(&mut stream, &headers, &chat_body("hi"), None).await;
    let common = headers_answer(&answer);
    let destination = set_value(common, DESTINATION).unwrap();
    assert!(!destination.contains("127.0.0.66"));
    let mutation = common.header_mutation.as_ref().unwrap();
    assert!(
        mutation
            .set_headers
            .iter()
            .all(|o| o.append_action == HeaderAppendAction::OverwriteIfExistsOrAdd as i32)
    );
    assert_eq!(
        mutation.remove_headers,
        vec!["x-gateway-destination-endpoint-served".to_string()]
    );
    assert_eq!(metadata_destination(&answer), Some(destination));
}

#[tokio::test]
async fn malformed_json_is_400_with_reason_header_and_json_body() {
    let picker = Picker::start(2, ExtProcOptions::default()).await;
    let mut stream = picker.open().await;
    stream
        .request_headers(&post(CHAT, &[]), false, None, duplex())
        .await;
    stream
        .request_body(b"{\"model\": \"llama\", \"messages\": [", true)
        .await;
    let answer = stream.next().await;
    let immediate = immediate(&answer);
    assert_eq!(immediate.status.unwrap().code, 400);
    assert_eq!(reason(immediate), "invalid_json");
    assert_eq!(immediate.details, "shepherd_invalid_json");
    let body: serde_json::Value = serde_json::from_slice(&immediate.body).unwrap();
    assert_eq!(body["error"]["code"], 400);
    assert_eq!(body["error"]["type"], "invalid_json");
    assert!(answer.dynamic_metadata.is_none());
    // The stream stays open for Envoy to close; closing it ends it cleanly.
    stream.close();
    assert!(stream.end().await.is_ok());
    assert_eq!(picker.in_flight(), 0);
}

#[tokio::test]
async fn unknown_model_and_unknown_path_are_404() {
    // An explicit parser list gains no fallback: a path it does not claim is refused.
    let picker = Picker::start_configured(
        2,
        ExtProcOptions::default().with_known_models(["llama"]),
        |config| with_parsers(config, &["openai-parser"]),
        |s| s,
    )
    .await;
    let mut stream = picker.open().await;
    stream
        .request_headers(&post(CHAT, &[]), false, None, duplex())
        .await;
    let body =
        serde_json::json!({"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]});
    stream.request_body(body.to_string().as_bytes(), true).await;
    let answer = stream.next().await;
    assert_eq!(immediate(&answer).status.unwrap().code, 404);
    assert_eq!(reason(immediate(&answer)), "unknown_model");

    // A known model routes.
    let mut stream = picker.open().await;
    let (answer, _) = route(&mut stream, &post(CHAT, &[]), &chat_body("hi"), None).await;
    assert!(set_value(headers_answer(&answer), DESTINATION).is_some());

    // A request without a body for a path that is no inference API.
    let mut stream = picker.open().await;
    let get = vec![
        (":method".to_string(), "GET".to_string()),
        (":path".to_string(), "/v1/models".to_string()),
    ];
    stream.request_headers(&get, true, None, duplex()).await;
    let answer = stream.next().await;
    assert_eq!(immediate(&answer).status.unwrap().code, 404);
    assert_eq!(reason(immediate(&answer)), "unsupported_path");
}

#[tokio::test]
async fn too_large_bodies_are_413() {
    let picker = Picker::start(2, ExtProcOptions::default().with_max_body_bytes(100_000)).await;
    // Announced by content-length: refused at the headers.
    let mut stream = picker.open().await;
    stream
        .request_headers(
            &post(COMPLETIONS, &[("content-length", "200000")]),
            false,
            None,
            duplex(),
        )
        .await;
    let answer = stream.next().await;
    assert_eq!(immediate(&answer).status.unwrap().code, 413);
    assert_eq!(reason(immediate(&answer)), "body_too_large");
    // Streamed without a length: refused at the chunk that crosses the limit.
    let mut stream = picker.open().await;
    stream
        .request_headers(&post(COMPLETIONS, &[]), false, None, duplex())
        .await;
    let body = completion_body("llama", 150_000);
    stream.request_body(&body[..60_000], false).await;
    stream.request_body(&body[60_000..120_000], false).await;
    let answer = stream.next().await;
    assert_eq!(immediate(&answer).status.unwrap().code, 413);
    // Later chunks are ignored.
    stream.request_body(&body[120_000..], true).await;
    stream.close();
    assert!(stream.end().await.is_ok());
}

#[tokio::test]
async fn no_endpoint_is_503() {
    let picker = Picker::start(0, ExtProcOptions::default()).await;
    let mut stream = picker.open().await;
    stream
        .request_headers(&post(CHAT, &[]), false, None, duplex())
        .await;
    stream.request_body(&chat_body("anyone?"), true).await;
    let answer = stream.next().await;
    assert_eq!(immediate(&answer).status.unwrap().code, 503);
    assert_eq!(reason(immediate(&answer)), "no_endpoints");
}

#[derive(Debug)]
struct ShedSheddable;

impl Admission for ShedSheddable {
    fn admit<'a>(
        &'a self,
        request: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<Admitted, Rejection>> {
        Box::pin(async move {
            if request.priority < 0 {
                Err(Rejection::Shed("the pool is saturated".into()))
            } else {
                Ok(Admitted::now())
            }
        })
    }
}

#[tokio::test]
async fn admission_sheds_with_429() {
    let picker = Picker::start_with(2, ExtProcOptions::default(), |s| {
        s.with_admission(Arc::new(ShedSheddable))
    })
    .await;
    let mut stream = picker.open().await;
    stream
        .request_headers(
            &post(CHAT, &[("x-shepherd-priority", "-1")]),
            false,
            None,
            duplex(),
        )
        .await;
    stream.request_body(&chat_body("low"), true).await;
    let answer = stream.next().await;
    assert_eq!(immediate(&answer).status.unwrap().code, 429);
    assert_eq!(reason(immediate(&answer)), "shed");

    let mut stream = picker.open().await;
    let (answer, _) = route(
        &mut stream,
        &post(CHAT, &[("x-shepherd-priority", "5")]),
        &chat_body("high"),
        None,
    )
    .await;
    assert!(set_value(headers_answer(&answer), DESTINATION).is_some());
}

#[tokio::test]
async fn request_trailers_end_the_body_and_are_answered_last() {
    let picker = Picker::start(2, ExtProcOptions::default()).await;
    let mut stream = picker.open().await;
    stream
        .request_headers(&post(CHAT, &[]), false, None, duplex())
        .await;
    let body = chat_body("with trailers");
    stream.request_body(&body, false).await;
    stream.request_trailers().await;
    let answer = stream.next().await;
    assert!(set_value(headers_answer(&answer), DESTINATION).is_some());
    let chunk = stream.next().await;
    let Some(Response::RequestBody(b)) = &chunk.response else {
        panic!()
    };
    assert_eq!(streamed(b.response.as_ref().unwrap()), (body, false));
    let trailers = stream.next().await;
    assert!(matches!(
        trailers.response,
        Some(Response::RequestTrailers(_))
    ));
}

#[tokio::test]
async fn json_response_usage_reaches_completion_hooks() {
    let picker = Picker::start(2, ExtProcOptions::default()).await;
    let mut stream = picker.open().await;
    route(
        &mut stream,
        &post(CHAT, &[("x-request-id", "json-1")]),
        &chat_body("usage please"),
        None,
    )
    .await;
    stream.response_headers("200", false, None).await;
    assert!(matches!(
        stream.next().await.response,
        Some(Response::ResponseHeaders(_))
    ));
    let response = br#"{"id":"c1","object":"chat.completion","choices":[{"message":{"role":"assistant","content":"Hi"}}],"usage":{"prompt_tokens":12,"total_tokens":15,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":8}}}"#;
    let (a, b) = response.split_at(70);
    stream.response_body(a, false).await;
    let echoed = stream.next().await;
    let Some(Response::ResponseBody(r)) = &echoed.response else {
        panic!()
    };
    assert_eq!(streamed(r.response.as_ref().unwrap()), (a.to_vec(), false));
    stream.response_body(b, true).await;
    let echoed = stream.next().await;
    let Some(Response::ResponseBody(r)) = &echoed.response else {
        panic!()
    };
    assert_eq!(streamed(r.response.as_ref().unwrap()), (b.to_vec(), true));

    let ended = picker.recorder.wait_for("json-1").await;
    assert_eq!(ended.outcome, Outcome::Success);
    assert!(ended.first_token);
    assert_eq!(
        ended.usage,
        Some(Usage {
            prompt_tokens: 12,
            completion_tokens: 3,
            cached_tokens: Some(8)
        })
    );
    assert_eq!(picker.in_flight(), 0);
}

#[tokio::test]
async fn sse_response_usage_reaches_completion_hooks() {
    let picker = Picker::start(2, ExtProcOptions::default()).await;
    let mut stream = picker.open().await;
    route(
        &mut stream,
        &post(CHAT, &[("x-request-id", "sse-1")]),
        &chat_body("stream please"),
        None,
    )
    .await;
    stream.response_headers("200", false, None).await;
    stream.next().await;
    let mut sent = Vec::new();
    for i in 0..200 {
        let event = format!(
            "data: {{\"choices\":[{{\"delta\":{{\"content\":\"t{i}\"}}}}],\"usage\":null}}\n\n"
        );
        stream.response_body(event.as_bytes(), false).await;
        sent.extend_from_slice(event.as_bytes());
    }
    let last = b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":30,\"completion_tokens\":200}}\n\ndata: [DONE]\n\n";
    stream.response_body(last, true).await;
    sent.extend_from_slice(last);
    let mut echoed = Vec::new();
    loop {
        let answer = stream.next().await;
        let Some(Response::ResponseBody(r)) = &answer.response else {
            panic!()
        };
        let (bytes, eos) = streamed(r.response.as_ref().unwrap());
        echoed.extend(bytes);
        if eos {
            break;
        }
    }
    assert_eq!(echoed, sent, "the stream passes through intact");
    let ended = picker.recorder.wait_for("sse-1").await;
    assert_eq!(
        ended.usage.map(|u| (u.prompt_tokens, u.completion_tokens)),
        Some((30, 200))
    );
}

#[tokio::test]
async fn served_fallback_is_credited_and_errors_count_as_failed() {
    let picker = Picker::start(3, ExtProcOptions::default()).await;
    let mut stream = picker.open().await;
    let (answer, _) = route(
        &mut stream,
        &post(CHAT, &[("x-request-id", "fb-1")]),
        &chat_body("fallback"),
        None,
    )
    .await;
    let destination = set_value(headers_answer(&answer), DESTINATION).unwrap();
    let second = destination.split(',').nth(1).unwrap().to_string();
    let served = string_metadata("envoy.lb", "x-gateway-destination-endpoint-served", &second);
    stream.response_headers("503", true, Some(served)).await;
    stream.next().await;
    let ended = picker.recorder.wait_for("fb-1").await;
    assert_eq!(ended.endpoint, second);
    assert!(ended.used_fallback);
    assert_eq!(ended.outcome, Outcome::Failed);
    assert_eq!(picker.in_flight(), 0);
}

#[tokio::test]
async fn dropped_stream_mid_response_is_cancelled_and_released() {
    let picker = Picker::start(2, ExtProcOptions::default()).await;
    let mut stream = picker.open().await;
    let (answer, _) = route(
        &mut stream,
        &post(CHAT, &[("x-request-id", "drop-1")]),
        &chat_body("bye"),
        None,
    )
    .await;
    let primary = set_value(headers_answer(&answer), DESTINATION).unwrap();
    let primary = primary.split(',').next().unwrap().to_string();
    stream.response_headers("200", false, None).await;
    stream.next().await;
    stream
        .response_body(b"data: {\"choices\":[]}\n\n", false)
        .await;
    stream.next().await;
    assert_eq!(picker.endpoint(&primary).in_flight_requests(), 1);
    drop(stream); // the data plane resets the stream
    let ended = picker.recorder.wait_for("drop-1").await;
    assert_eq!(ended.outcome, Outcome::Cancelled);
    assert!(ended.first_token);
    assert_eq!(picker.endpoint(&primary).in_flight_requests(), 0);
}

#[tokio::test]
async fn unsupported_body_mode_and_out_of_order_messages_end_with_a_grpc_error() {
    let picker = Picker::start(2, ExtProcOptions::default()).await;
    let mut stream = picker.open().await;
    let streamed_mode = protocol(BodySendMode::Streamed, BodySendMode::Streamed);
    stream
        .request_headers(&post(CHAT, &[]), false, None, streamed_mode)
        .await;
    let status = stream.end().await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);

    let mut stream = picker.open().await;
    stream.response_headers("200", false, None).await;
    let status = stream.end().await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);

    let mut stream = picker.open().await;
    stream.send_raw(ProcessingRequest::default()).await;
    assert_eq!(
        stream.end().await.unwrap_err().code(),
        tonic::Code::InvalidArgument
    );
}

#[tokio::test]
async fn health_reports_serving() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(shepherd_adapters_extproc::serve_health(listener, async {
        let _ = stopped.await;
    }));
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = HealthClient::new(channel);
    for service in ["", shepherd_adapters_extproc::SERVICE_NAME] {
        let reply = client
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(reply.status, 1, "SERVING for `{service}`");
    }
    assert_eq!(
        shepherd_adapters_extproc::SERVICE_NAME,
        "envoy.service.ext_proc.v3.ExternalProcessor"
    );
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
