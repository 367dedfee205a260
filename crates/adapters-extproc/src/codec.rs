//! The gRPC codec of the ext_proc stream: requests decoded with prost, answers encoded so that
//! a body streamed back is written from the body's own buffer straight into the gRPC frame.
//!
//! prost's [`StreamedBodyResponse`]
//! holds its bytes in a `Vec<u8>`, so answering a 220 KiB body with prost messages costs a
//! copy of every chunk into its own `Vec` and then another into the frame. An
//! [`Outgoing::Chunk`] holds a [`Bytes`] slice of the body instead (no copy, no allocation) and
//! [`ExtProcCodec`] writes the protobuf fields around it by hand: one copy, into the frame.
//! The bytes on the wire are exactly what prost writes for the same message (a test decodes
//! them back with prost and compares).
//!
//! ```
//! use bytes::Bytes;
//! use shepherd_adapters_extproc::codec::{BodyChunk, Outgoing};
//!
//! let body = Bytes::from_static(b"{\"model\":\"m\",\"prompt\":\"Hi\"}");
//! let chunk = Outgoing::Chunk(BodyChunk { body: body.slice(0..10), end_of_stream: false, request: true });
//! assert_eq!(chunk.encoded_len(), 20);
//! ```

use bytes::{BufMut, Bytes};
use envoy_types::pb::envoy::service::ext_proc::v3::{
    BodyMutation, BodyResponse, CommonResponse, ProcessingRequest, ProcessingResponse,
    StreamedBodyResponse, body_mutation, processing_response::Response,
};
use prost::Message;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};
use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// One answer on the stream: a prost message, or a streamed body chunk held as a slice.
///
/// Not boxed: every answer is moved once into the stream's channel, and boxing the message
/// would cost an allocation per answer to save the chunks a few hundred bytes of copy.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Outgoing {
    /// Any answer, as prost encodes it.
    Message(ProcessingResponse),
    /// A `BodyResponse` whose mutation is a `StreamedBodyResponse` of `body`.
    Chunk(BodyChunk),
}

/// A streamed body chunk for the request (`request == true`) or the response path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyChunk {
    /// The chunk's bytes (a slice of the body, shared, not copied).
    pub body: Bytes,
    /// Whether it is the body's last chunk.
    pub end_of_stream: bool,
    /// The request's body (else the response's).
    pub request: bool,
}

impl From<ProcessingResponse> for Outgoing {
    fn from(message: ProcessingResponse) -> Self {
        Outgoing::Message(message)
    }
}

impl Outgoing {
    /// The same answer as a prost message (copies a chunk's bytes; for tests and tools).
    pub fn into_response(self) -> ProcessingResponse {
        match self {
            Outgoing::Message(message) => message,
            Outgoing::Chunk(chunk) => chunk.into_response(),
        }
    }

    /// Bytes of its protobuf encoding.
    pub fn encoded_len(&self) -> usize {
        match self {
            Outgoing::Message(message) => message.encoded_len(),
            Outgoing::Chunk(chunk) => chunk.lengths().response,
        }
    }

    /// Writes its protobuf encoding into `buf`.
    pub fn encode_to<B: BufMut>(&self, buf: &mut B) {
        match self {
            Outgoing::Message(message) => message.encode_raw(buf),
            Outgoing::Chunk(chunk) => chunk.encode_to(buf),
        }
    }
}

// Field numbers of envoy.service.ext_proc.v3 (external_processor.proto).
const RESPONSE_REQUEST_BODY: u32 = 3;
const RESPONSE_RESPONSE_BODY: u32 = 4;
const BODY_RESPONSE_RESPONSE: u32 = 1;
const COMMON_RESPONSE_BODY_MUTATION: u32 = 3;
const BODY_MUTATION_STREAMED_RESPONSE: u32 = 3;
const STREAMED_BODY: u32 = 1;
const STREAMED_END_OF_STREAM: u32 = 2;

/// The length of each nested message of a chunk's encoding, innermost first.
struct Lengths {
    streamed: usize,
    mutation: usize,
    common: usize,
    body_response: usize,
    response: usize,
}

/// A length-delimited field's key and length prefix plus its `len` bytes.
fn field_len(tag: u32, len: usize) -> usize {
    prost::encoding::key_len(tag) + encoded_len_varint(len as u64) + len
}

fn put_len_delimited<B: BufMut>(tag: u32, len: usize, buf: &mut B) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(len as u64, buf);
}

impl BodyChunk {
    fn lengths(&self) -> Lengths {
        // proto3: an empty `body` and a false `end_of_stream` are not written.
        let streamed = if self.body.is_empty() {
            0
        } else {
            field_len(STREAMED_BODY, self.body.len())
        } + if self.end_of_stream { 2 } else { 0 };
        let mutation = field_len(BODY_MUTATION_STREAMED_RESPONSE, streamed);
        let common = field_len(COMMON_RESPONSE_BODY_MUTATION, mutation);
        let body_response = field_len(BODY_RESPONSE_RESPONSE, common);
        let response = field_len(self.response_tag(), body_response);
        Lengths {
            streamed,
            mutation,
            common,
            body_response,
            response,
        }
    }

    fn response_tag(&self) -> u32 {
        if self.request {
            RESPONSE_REQUEST_BODY
        } else {
            RESPONSE_RESPONSE_BODY
        }
    }

    fn encode_to<B: BufMut>(&self, buf: &mut B) {
        let l = self.lengths();
        put_len_delimited(self.response_tag(), l.body_response, buf);
        put_len_delimited(BODY_RESPONSE_RESPONSE, l.common, buf);
        put_len_delimited(COMMON_RESPONSE_BODY_MUTATION, l.mutation, buf);
        put_len_delimited(BODY_MUTATION_STREAMED_RESPONSE, l.streamed, buf);
        if !self.body.is_empty() {
            put_len_delimited(STREAMED_BODY, self.body.len(), buf);
            buf.put_slice(&self.body);
        }
        if self.end_of_stream {
            encode_key(STREAMED_END_OF_STREAM, WireType::Varint, buf);
            encode_varint(1, buf);
        }
    }

    /// The same chunk as a prost message (copies the bytes).
    pub fn into_response(self) -> ProcessingResponse {
        let body = BodyResponse {
            response: Some(CommonResponse {
                body_mutation: Some(BodyMutation {
                    mutation: Some(body_mutation::Mutation::StreamedResponse(
                        StreamedBodyResponse {
                            body: self.body.to_vec(),
                            end_of_stream: self.end_of_stream,
                            ..Default::default()
                        },
                    )),
                }),
                ..Default::default()
            }),
        };
        ProcessingResponse {
            response: Some(if self.request {
                Response::RequestBody(body)
            } else {
                Response::ResponseBody(body)
            }),
            ..Default::default()
        }
    }
}

/// The ext_proc stream's codec: [`ProcessingRequest`] in (prost), [`Outgoing`] out.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExtProcCodec;

/// Encodes [`Outgoing`] answers.
#[derive(Debug, Clone, Copy, Default)]
pub struct OutgoingEncoder;

/// Decodes [`ProcessingRequest`]s with prost.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestDecoder;

impl Codec for ExtProcCodec {
    type Encode = Outgoing;
    type Decode = ProcessingRequest;
    type Encoder = OutgoingEncoder;
    type Decoder = RequestDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        OutgoingEncoder
    }

    fn decoder(&mut self) -> Self::Decoder {
        RequestDecoder
    }
}

impl Encoder for OutgoingEncoder {
    type Item = Outgoing;
    type Error = Status;

    fn encode(&mut self, item: Outgoing, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        buf.reserve(item.encoded_len());
        item.encode_to(buf);
        Ok(())
    }
}

impl Decoder for RequestDecoder {
    type Item = ProcessingRequest;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<ProcessingRequest>, Status> {
        ProcessingRequest::decode(buf)
            .map(Some)
            .map_err(|error| Status::internal(error.to_string()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;

    fn encoded(outgoing: &Outgoing) -> Vec<u8> {
        let mut buf = Vec::new();
        outgoing.encode_to(&mut buf);
        buf
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, rng_seed: proptest::test_runner::RngSeed::Fixed(34), ..ProptestConfig::default() })]

        /// A chunk's hand-written encoding is prost's, byte for byte, at every length
        /// (varint lengths of one to three bytes), end of stream and direction.
        #[test]
        fn a_chunk_encodes_as_prost_does(
            len in prop_oneof![0usize..300, 16_000usize..17_000, 61_000usize..70_000],
            end_of_stream: bool,
            request: bool,
        ) {
            let body: Bytes = (0..len).map(|i| (i % 251) as u8).collect::<Vec<_>>().into();
            let chunk = Outgoing::Chunk(BodyChunk { body, end_of_stream, request });
            let ours = encoded(&chunk);
            prop_assert_eq!(ours.len(), chunk.encoded_len());
            let prost_message = chunk.clone().into_response();
            prop_assert_eq!(&ours, &prost_message.encode_to_vec());
            prop_assert_eq!(ProcessingResponse::decode(ours.as_slice()).unwrap(), prost_message);
        }
    }

    #[test]
    fn a_message_encodes_as_prost_does() {
        let message = crate::answer::request_trailers();
        let outgoing = Outgoing::from(message.clone());
        assert_eq!(encoded(&outgoing), message.encode_to_vec());
        assert_eq!(outgoing.encoded_len(), message.encoded_len());
        assert_eq!(outgoing.into_response(), message);
    }
}
