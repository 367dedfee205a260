//! The `ProcessingResponse`s the picker sends, one builder per shape.
//!
//! Routing a request (DESIGN §7) takes, in `FULL_DUPLEX_STREAMED` mode:
//!
//! 1. [`route_headers`]: the answer to the *request headers* message, sent only once the whole
//!    body arrived and was scheduled. A `HeadersResponse` whose `CommonResponse` sets
//!    `x-gateway-destination-endpoint: ip:port[,ip:port…]` through `raw_value`
//!    (`OVERWRITE_IF_EXISTS_OR_ADD`, so a client-sent value is replaced), a `content-length`
//!    equal to the body streamed back (Envoy drops the original in this mode), removes the
//!    routing headers the picker owns that the client sent, and sets `clear_route_cache`. The
//!    same destination goes into `dynamic_metadata` under `envoy.lb` →
//!    `x-gateway-destination-endpoint`.
//! 2. [`BodyChunks`]: the body, unchanged, as `BodyResponse`s whose `body_mutation` is a
//!    `StreamedBodyResponse` of at most 62,000 bytes; the last one has `end_of_stream` set
//!    unless the request ended with trailers.
//! 3. [`request_trailers`]: an empty `TrailersResponse`, when the request had trailers.
//!
//! In `BUFFERED` mode Envoy holds the body until the headers are answered, so the headers get
//! [`pass_headers`] at once (owned headers removed, nothing else), and the destination rides on
//! the answer to the body message, [`route_body`]: one `BodyResponse` with the same header
//! mutation, `clear_route_cache` and metadata, and no body mutation (Envoy forwards the body it
//! buffered, byte for byte, with its original `content-length`).
//!
//! The response path is answered as it streams: [`pass_response_headers`], then each body
//! chunk echoed unchanged ([`echo_response_body`] in `FULL_DUPLEX_STREAMED` mode, an empty
//! [`pass_response_body`] otherwise), then [`response_trailers`].

use envoy_types::pb::envoy::config::core::v3::HeaderValueOption;
use envoy_types::pb::envoy::service::ext_proc::v3::processing_response::Response;
use envoy_types::pb::envoy::service::ext_proc::v3::{
    BodyMutation, BodyResponse, CommonResponse, HeaderMutation, HeadersResponse,
    ProcessingResponse, StreamedBodyResponse, TrailersResponse, body_mutation,
};
use envoy_types::pb::google::protobuf::value::Kind;
use envoy_types::pb::google::protobuf::{Struct, Value};

use shepherd_runtime::telemetry::{Propagation, TRACEPARENT, TRACESTATE};

use bytes::Bytes;

use crate::budget::BodyReservation;
use crate::codec::{BodyChunk, Outgoing};
use crate::headers::set_header;
use crate::options::ExtProcOptions;

/// Where a request goes, and what else its routing answer changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route<'a> {
    /// `ip:port[,ip:port…]`, primary first.
    pub destination: &'a str,
    /// The `content-length` to set (the size of the body streamed back), when one is set.
    pub content_length: Option<usize>,
    /// Client-sent headers to remove.
    pub remove: &'a [String],
    /// The prefill server's `ip:port` of a disaggregated request, sent in
    /// `x-prefiller-host-port` to the decode side.
    pub prefill: Option<&'a str>,
    /// The encode servers' `ip:port[,ip:port…]` of a request whose media are encoded
    /// separately, sent in `x-encoder-hosts-ports` to the decode side.
    pub encode: Option<&'a str>,
    /// The server to pull the prompt's cached KV blocks from (`x-kv-cache-source-host-port`),
    /// when a `p2p-source-producer` found one.
    pub kv_source: Option<&'a str>,
    /// The trace context to hand the model server (`traceparent`, `tracestate`), when the
    /// request is traced: the picker's `gateway.request` span becomes the server's parent.
    pub trace: Option<&'a Propagation>,
    /// A whole new body for the buffered body's answer (a model rewrite), with
    /// `content_length` its length. Ignored by [`route_headers`] (in streamed mode the body is
    /// streamed back as the caller chooses).
    pub body: Option<&'a [u8]>,
}

/// The header mutation of a routing answer.
fn route_mutation(route: &Route<'_>, options: &ExtProcOptions) -> HeaderMutation {
    let mut set_headers: Vec<HeaderValueOption> =
        vec![set_header(&options.headers.destination, route.destination)];
    if let Some(length) = route.content_length {
        set_headers.push(set_header("content-length", &length.to_string()));
    }
    if let Some(prefill) = route.prefill {
        set_headers.push(set_header(
            shepherd_scheduler_core::disagg::PREFILL_ENDPOINT_HEADER,
            prefill,
        ));
    }
    if let Some(encode) = route.encode {
        set_headers.push(set_header(
            shepherd_scheduler_core::disagg::ENCODER_ENDPOINTS_HEADER,
            encode,
        ));
    }
    if let Some(source) = route.kv_source {
        set_headers.push(set_header(
            shepherd_scheduler_core::disagg::KV_CACHE_SOURCE_HEADER,
            source,
        ));
    }
    let mut remove_headers = route.remove.to_vec();
    if let Some(trace) = route.trace {
        set_headers.push(set_header(TRACEPARENT, &trace.traceparent));
        match &trace.tracestate {
            Some(state) => set_headers.push(set_header(TRACESTATE, state)),
            None => remove_headers.push(TRACESTATE.to_string()),
        }
    }
    HeaderMutation {
        set_headers,
        remove_headers,
    }
}

/// `envoy.lb` → `x-gateway-destination-endpoint: destination`.
pub fn destination_metadata(destination: &str, options: &ExtProcOptions) -> Struct {
    let inner = Struct {
        fields: [(
            options.metadata.destination.clone(),
            Value {
                kind: Some(Kind::StringValue(destination.to_string())),
            },
        )]
        .into(),
    };
    Struct {
        fields: [(
            options.metadata.namespace.clone(),
            Value {
                kind: Some(Kind::StructValue(inner)),
            },
        )]
        .into(),
    }
}

fn routed(response: Response, route: &Route<'_>, options: &ExtProcOptions) -> ProcessingResponse {
    ProcessingResponse {
        response: Some(response),
        dynamic_metadata: Some(destination_metadata(route.destination, options)),
        ..Default::default()
    }
}

fn routing_common(route: &Route<'_>, options: &ExtProcOptions) -> CommonResponse {
    CommonResponse {
        header_mutation: Some(route_mutation(route, options)),
        clear_route_cache: true,
        ..Default::default()
    }
}

/// The answer to the request headers that routes the request (`FULL_DUPLEX_STREAMED` mode, or
/// a request without a body). See the [module docs](self).
pub fn route_headers(route: &Route<'_>, options: &ExtProcOptions) -> ProcessingResponse {
    let headers = HeadersResponse {
        response: Some(routing_common(route, options)),
    };
    routed(Response::RequestHeaders(headers), route, options)
}

/// The answer to the buffered request body that routes the request (`BUFFERED` mode).
pub fn route_body(route: &Route<'_>, options: &ExtProcOptions) -> ProcessingResponse {
    let mut common = routing_common(route, options);
    if let Some(new_body) = route.body {
        common.body_mutation = Some(BodyMutation {
            mutation: Some(body_mutation::Mutation::Body(new_body.to_vec())),
        });
    }
    let body = BodyResponse {
        response: Some(common),
    };
    routed(Response::RequestBody(body), route, options)
}

/// The immediate answer to the request headers in `BUFFERED` mode: removes `remove`,
/// changes nothing else.
pub fn pass_headers(remove: &[String]) -> ProcessingResponse {
    let header_mutation = (!remove.is_empty()).then(|| HeaderMutation {
        set_headers: Vec::new(),
        remove_headers: remove.to_vec(),
    });
    ProcessingResponse {
        response: Some(Response::RequestHeaders(HeadersResponse {
            response: Some(CommonResponse {
                header_mutation,
                ..Default::default()
            }),
        })),
        ..Default::default()
    }
}

/// An empty answer to the request trailers.
pub fn request_trailers() -> ProcessingResponse {
    ProcessingResponse {
        response: Some(Response::RequestTrailers(TrailersResponse::default())),
        ..Default::default()
    }
}

/// An empty answer to the response headers.
pub fn pass_response_headers() -> ProcessingResponse {
    ProcessingResponse {
        response: Some(Response::ResponseHeaders(HeadersResponse {
            response: Some(CommonResponse::default()),
        })),
        ..Default::default()
    }
}

/// An answer to the response headers that adds `headers` to the response (plugins'
/// response headers, [`shepherd_scheduler_core::response_headers`]); with none, as
/// [`pass_response_headers`].
pub fn stamp_response_headers(headers: &[(String, String)]) -> ProcessingResponse {
    if headers.is_empty() {
        return pass_response_headers();
    }
    ProcessingResponse {
        response: Some(Response::ResponseHeaders(HeadersResponse {
            response: Some(CommonResponse {
                header_mutation: Some(HeaderMutation {
                    set_headers: headers.iter().map(|(n, v)| set_header(n, v)).collect(),
                    remove_headers: Vec::new(),
                }),
                ..Default::default()
            }),
        })),
        ..Default::default()
    }
}

/// An empty answer to a response body message (`BUFFERED` or `STREAMED` mode): the chunk
/// passes unchanged.
pub fn pass_response_body() -> ProcessingResponse {
    ProcessingResponse {
        response: Some(Response::ResponseBody(BodyResponse {
            response: Some(CommonResponse::default()),
        })),
        ..Default::default()
    }
}

/// An empty answer to the response trailers.
pub fn response_trailers() -> ProcessingResponse {
    ProcessingResponse {
        response: Some(Response::ResponseTrailers(TrailersResponse::default())),
        ..Default::default()
    }
}

/// One streamed body chunk for the request (`request == true`) or response path.
pub fn streamed_chunk(body: Vec<u8>, end_of_stream: bool, request: bool) -> ProcessingResponse {
    let body = BodyResponse {
        response: Some(CommonResponse {
            body_mutation: Some(BodyMutation {
                mutation: Some(body_mutation::Mutation::StreamedResponse(
                    StreamedBodyResponse {
                        body,
                        end_of_stream,
                        ..Default::default()
                    },
                )),
            }),
            ..Default::default()
        }),
    };
    ProcessingResponse {
        response: Some(if request {
            Response::RequestBody(body)
        } else {
            Response::ResponseBody(body)
        }),
        ..Default::default()
    }
}

/// A response body chunk echoed unchanged (`FULL_DUPLEX_STREAMED` mode), cut to the chunk
/// size: the end of stream goes on the last piece.
pub fn echo_response_body(
    body: impl Into<Bytes>,
    end_of_stream: bool,
    chunk_size: usize,
) -> BodyChunks {
    BodyChunks::new(body, chunk_size, end_of_stream, false)
}

/// A body cut into streamed chunks of at most `chunk_size` bytes, each a slice of the body (no
/// copy: [`crate::codec`] writes it straight into the gRPC frame). An empty body is one empty
/// chunk (it still carries the end of stream).
#[derive(Debug)]
pub struct BodyChunks {
    body: Bytes,
    /// The body's bytes in the picker's budget, given back once the last chunk is out.
    held: Option<BodyReservation>,
    offset: usize,
    chunk_size: usize,
    end_of_stream: bool,
    request: bool,
    done: bool,
}

impl BodyChunks {
    /// Chunks of `body` for the request (`request == true`) or response path; the last one
    /// carries `end_of_stream`.
    pub fn new(
        body: impl Into<Bytes>,
        chunk_size: usize,
        end_of_stream: bool,
        request: bool,
    ) -> Self {
        BodyChunks {
            body: body.into(),
            held: None,
            offset: 0,
            chunk_size: chunk_size.max(1),
            end_of_stream,
            request,
            done: false,
        }
    }

    /// Keeps `held` (the body's bytes in the budget) until the last chunk is built, then gives
    /// it back.
    pub fn holding(mut self, held: BodyReservation) -> Self {
        self.held = Some(held);
        self
    }

    /// The next chunk, a slice of the body.
    pub fn next_chunk(&mut self) -> Option<BodyChunk> {
        if self.done {
            return None;
        }
        let remaining = self.body.len() - self.offset;
        let take = remaining.min(self.chunk_size);
        let last = take == remaining;
        let chunk = self.body.slice(self.offset..self.offset + take);
        self.offset += take;
        if last {
            self.done = true;
            self.held = None;
            self.body = Bytes::new();
        }
        Some(BodyChunk {
            body: chunk,
            end_of_stream: last && self.end_of_stream,
            request: self.request,
        })
    }
}

impl Iterator for BodyChunks {
    type Item = Outgoing;

    fn next(&mut self) -> Option<Outgoing> {
        self.next_chunk().map(Outgoing::Chunk)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done {
            return (0, Some(0));
        }
        let n = (self.body.len() - self.offset)
            .div_ceil(self.chunk_size)
            .max(1);
        (n, Some(n))
    }
}

/// The answers to one message, in order: some whole responses, then perhaps a body streamed
/// back chunk by chunk, then perhaps one more response (the trailers' answer).
#[derive(Debug, Default)]
pub struct Replies {
    head: std::vec::IntoIter<ProcessingResponse>,
    body: Option<BodyChunks>,
    tail: Option<ProcessingResponse>,
    /// Dynamic metadata the last answer carries.
    last_metadata: Option<Struct>,
}

impl Replies {
    /// No answer.
    pub fn none() -> Self {
        Replies::default()
    }

    /// One answer.
    pub fn one(response: ProcessingResponse) -> Self {
        Replies {
            head: vec![response].into_iter(),
            ..Default::default()
        }
    }

    /// `head`, then `body`, then `tail`.
    pub fn new(
        head: Vec<ProcessingResponse>,
        body: Option<BodyChunks>,
        tail: Option<ProcessingResponse>,
    ) -> Self {
        Replies {
            head: head.into_iter(),
            body,
            tail,
            last_metadata: None,
        }
    }

    /// Sets `metadata` as the dynamic metadata of the last answer (the response's end, for a
    /// `request-attribute-reporter`).
    pub fn with_last_metadata(mut self, metadata: Option<Struct>) -> Self {
        self.last_metadata = metadata;
        self
    }

    /// Whether nothing is left to send after the answer just taken.
    fn exhausted(&self) -> bool {
        self.head.len() == 0 && self.body.as_ref().is_none_or(|b| b.done) && self.tail.is_none()
    }

    /// The answers as prost messages (a chunk's bytes copied; for tests and tools).
    pub fn into_responses(self) -> impl Iterator<Item = ProcessingResponse> {
        self.map(Outgoing::into_response)
    }
}

impl Iterator for Replies {
    type Item = Outgoing;

    fn next(&mut self) -> Option<Outgoing> {
        let mut next = self.head.next().map(Outgoing::Message);
        if next.is_none()
            && let Some(body) = &mut self.body
        {
            next = body.next_chunk().map(Outgoing::Chunk);
            if next.is_none() {
                self.body = None;
            }
        }
        if next.is_none() {
            next = self.tail.take().map(Outgoing::Message);
        }
        let next = next?;
        if self.last_metadata.is_some() && self.exhausted() {
            // The last answer carries the metadata: a chunk becomes a whole message for it.
            let mut response = next.into_response();
            response.dynamic_metadata = self.last_metadata.take();
            return Some(Outgoing::Message(response));
        }
        Some(next)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A route to `destination` with nothing else set.
    fn route_to(destination: &str) -> Route<'_> {
        Route {
            destination,
            content_length: None,
            remove: &[],
            prefill: None,
            encode: None,
            kv_source: None,
            trace: None,
            body: None,
        }
    }

    #[test]
    fn a_body_streams_back_in_chunks_each_a_slice_of_its_buffer() {
        let body: Vec<u8> = (0..250u8).collect();
        let copy = body.clone();
        let buffer = copy.as_ptr() as usize;
        let slices: Vec<usize> = BodyChunks::new(copy, 100, true, true)
            .map(|c| match c {
                Outgoing::Chunk(c) => c.body.as_ptr() as usize,
                other => panic!("not a chunk: {other:?}"),
            })
            .collect();
        // No copy: every chunk points into the body's own buffer.
        assert_eq!(slices, [buffer, buffer + 100, buffer + 200]);
        let chunks: Vec<(Vec<u8>, bool)> = BodyChunks::new(body, 100, true, true)
            .map(Outgoing::into_response)
            .map(|reply| match reply.response {
                Some(Response::RequestBody(BodyResponse {
                    response: Some(common),
                })) => match common.body_mutation.and_then(|m| m.mutation) {
                    Some(body_mutation::Mutation::StreamedResponse(s)) => (s.body, s.end_of_stream),
                    other => panic!("not a streamed chunk: {other:?}"),
                },
                other => panic!("not a request body answer: {other:?}"),
            })
            .collect();
        let sizes: Vec<(usize, bool)> = chunks.iter().map(|(b, e)| (b.len(), *e)).collect();
        assert_eq!(sizes, [(100, false), (100, false), (50, true)]);
        let joined: Vec<u8> = chunks.iter().flat_map(|(b, _)| b.iter().copied()).collect();
        assert_eq!(joined, (0..250u8).collect::<Vec<_>>());
    }

    #[test]
    fn the_last_metadata_rides_on_the_last_chunk_made_a_whole_message() {
        let replies: Vec<Outgoing> = Replies::new(
            Vec::new(),
            Some(BodyChunks::new(vec![1u8, 2, 3], 2, true, false)),
            None,
        )
        .with_last_metadata(Some(Struct::default()))
        .collect();
        assert!(matches!(&replies[0], Outgoing::Chunk(c) if c.body.as_ref() == [1, 2]));
        let Outgoing::Message(last) = &replies[1] else {
            panic!("the last answer is not a whole message: {:?}", replies[1])
        };
        assert_eq!(last.dynamic_metadata, Some(Struct::default()));
        let expected = Outgoing::Chunk(BodyChunk {
            body: bytes::Bytes::from_static(&[3]),
            end_of_stream: true,
            request: false,
        })
        .into_response();
        assert_eq!(last.response, expected.response);
    }

    /// The value a mutation sets for header `name`.
    fn header(m: &HeaderMutation, name: &str) -> Option<String> {
        m.set_headers
            .iter()
            .filter_map(|h| h.header.as_ref())
            .find(|h| h.key == name)
            .map(|h| String::from_utf8_lossy(&h.raw_value).into_owned())
    }

    #[test]
    fn a_disaggregated_route_names_the_prefill_server_to_the_decode_side() {
        let options = ExtProcOptions::default();
        let mut route = Route {
            prefill: Some("10.0.0.1:8000"),
            ..route_to("10.0.0.2:8000")
        };
        let m = route_mutation(&route, &options);
        assert_eq!(
            header(&m, "x-prefiller-host-port").as_deref(),
            Some("10.0.0.1:8000")
        );
        route.prefill = None;
        assert_eq!(
            header(&route_mutation(&route, &options), "x-prefiller-host-port"),
            None
        );
        // A client cannot name a prefill server itself: the picker owns the header.
        assert!(
            options
                .headers
                .owned
                .iter()
                .any(|h| h == "x-prefiller-host-port")
        );
    }

    #[test]
    fn an_encoded_route_names_every_encode_server_to_the_decode_side() {
        let options = ExtProcOptions::default();
        let mut route = Route {
            encode: Some("10.0.0.1:8000,10.0.0.2:8000"),
            ..route_to("10.0.0.3:8000")
        };
        let m = route_mutation(&route, &options);
        assert_eq!(
            header(&m, "x-encoder-hosts-ports").as_deref(),
            Some("10.0.0.1:8000,10.0.0.2:8000")
        );
        assert_eq!(header(&m, "x-prefiller-host-port"), None);
        route.encode = None;
        assert_eq!(
            header(&route_mutation(&route, &options), "x-encoder-hosts-ports"),
            None
        );
        // A client cannot name encode servers itself: the picker owns the header.
        assert!(
            options
                .headers
                .owned
                .iter()
                .any(|h| h == "x-encoder-hosts-ports")
        );
    }

    #[test]
    fn a_route_with_a_kv_source_names_it_to_the_model_server_side() {
        let options = ExtProcOptions::default();
        let mut route = Route {
            kv_source: Some("10.0.0.7:8000"),
            ..route_to("10.0.0.2:8000")
        };
        let m = route_mutation(&route, &options);
        assert_eq!(
            header(&m, "x-kv-cache-source-host-port").as_deref(),
            Some("10.0.0.7:8000")
        );
        route.kv_source = None;
        assert_eq!(
            header(
                &route_mutation(&route, &options),
                "x-kv-cache-source-host-port"
            ),
            None
        );
        // A client's value is removed: the picker owns the header, as upstream deletes it.
        assert!(
            options
                .headers
                .owned
                .iter()
                .any(|h| h == "x-kv-cache-source-host-port")
        );
    }

    fn chunk_bytes(r: &ProcessingResponse) -> (Vec<u8>, bool) {
        let Some(Response::RequestBody(b)) = &r.response else {
            panic!("not a request body response")
        };
        let Some(body_mutation::Mutation::StreamedResponse(s)) = b
            .response
            .as_ref()
            .unwrap()
            .body_mutation
            .as_ref()
            .unwrap()
            .mutation
            .as_ref()
        else {
            panic!("not streamed")
        };
        (s.body.clone(), s.end_of_stream)
    }

    #[test]
    fn chunks_cover_the_body_exactly() {
        for (len, size) in [
            (0usize, 10usize),
            (1, 10),
            (10, 10),
            (11, 10),
            (25, 10),
            (130_001, 62_000),
        ] {
            let body: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let chunks: Vec<_> = BodyChunks::new(body.clone(), size, true, true)
                .map(Outgoing::into_response)
                .collect();
            assert_eq!(chunks.len(), len.div_ceil(size).max(1));
            let mut joined = Vec::new();
            for (i, c) in chunks.iter().enumerate() {
                let (bytes, eos) = chunk_bytes(c);
                assert!(bytes.len() <= size);
                assert_eq!(eos, i + 1 == chunks.len());
                joined.extend(bytes);
            }
            assert_eq!(joined, body);
        }
    }
}
