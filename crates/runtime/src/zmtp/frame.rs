//! Frames (RFC 23, "Framing"), read and written without I/O.
//!
//! A frame is a flags byte, a size, and that many bytes of body. The flags are `MORE`
//! (`0x01`: another frame of the same message follows), `LONG` (`0x02`: the size takes 8
//! bytes, big-endian, instead of 1) and `COMMAND` (`0x04`: a command, never part of a
//! message); the other bits are reserved and must be zero. A message is one or more frames,
//! the last without `MORE`.
//!
//! The [`Decoder`] is bounded: a frame's declared size is checked against what is left of
//! [`Limits::max_message_bytes`] (or [`Limits::max_command_bytes`]) as soon as its header is
//! in, before a byte of its body is asked for, so a peer declaring 2^40 bytes is refused
//! after 9 bytes. It never reserves memory itself: bodies are split off the caller's buffer
//! once they are whole.
//!
//! ```
//! use bytes::BytesMut;
//! use shepherd_runtime::zmtp::frame::{Decoder, Item, encode_message};
//! use shepherd_runtime::zmtp::Limits;
//!
//! let mut wire = BytesMut::new();
//! encode_message(&[&b"kv@topic"[..], &[0u8; 8], &[0x93, 0, 0x90, 0xc0]], &mut wire);
//! let mut decoder = Decoder::new(Limits::default());
//! let Some(Item::Message(frames)) = decoder.decode(&mut wire)? else { unreachable!() };
//! assert_eq!(frames.len(), 3);
//! assert_eq!(&frames[0][..], b"kv@topic");
//!
//! // A header declaring 2^40 bytes is refused before its body arrives.
//! let mut wire = BytesMut::from(&[0x02, 0, 0, 1, 0, 0, 0, 0, 0][..]);
//! assert!(decoder.decode(&mut wire).unwrap_err().is_oversized());
//! # Ok::<(), shepherd_runtime::zmtp::FrameError>(())
//! ```

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::limits::Limits;

/// Another frame of the same message follows.
pub const MORE: u8 = 0x01;
/// The size is 8 bytes long.
pub const LONG: u8 = 0x02;
/// A command frame.
pub const COMMAND: u8 = 0x04;
/// The bits the RFC reserves.
const RESERVED: u8 = !(MORE | LONG | COMMAND);

/// What a peer sent that the decoder refuses. Every one ends the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A frame declared more than the message (or command) may still hold.
    #[error("a frame declares {declared} bytes, over the limit of {limit}")]
    TooLarge {
        /// The declared size.
        declared: u64,
        /// What was left of the limit.
        limit: usize,
    },
    /// A message with more frames than allowed.
    #[error("a message has more than {0} frames")]
    TooManyFrames(usize),
    /// Reserved flag bits set.
    #[error("frame flags {0:#04x} use reserved bits")]
    ReservedFlags(u8),
    /// A command frame between two frames of one message.
    #[error("a command frame inside a multipart message")]
    CommandInMessage,
}

impl FrameError {
    /// Whether the peer declared more than the limits allow (the error to count as
    /// oversized).
    pub fn is_oversized(&self) -> bool {
        matches!(
            self,
            FrameError::TooLarge { .. } | FrameError::TooManyFrames(_)
        )
    }
}

/// One decoded unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A whole message: its frames in order.
    Message(Vec<Bytes>),
    /// A command frame's body (name length, name, data).
    Command(Bytes),
}

/// A bounded decoder of frames into messages and commands.
#[derive(Debug)]
pub struct Decoder {
    limits: Limits,
    /// The frames of the message under way.
    frames: Vec<Bytes>,
    /// Their total size.
    message_bytes: usize,
}

impl Decoder {
    /// A decoder with `limits`.
    pub fn new(limits: Limits) -> Decoder {
        Decoder {
            limits,
            frames: Vec::new(),
            message_bytes: 0,
        }
    }

    /// Whether part of a message has been read.
    pub fn in_message(&self) -> bool {
        !self.frames.is_empty()
    }

    /// Bytes held for the message under way.
    pub fn held_bytes(&self) -> usize {
        self.message_bytes
    }

    /// Takes the next message or command out of `src`: `Ok(None)` when `src` does not hold a
    /// whole one yet (the frames already complete are kept; the rest stays in `src`). An
    /// error leaves the decoder unusable: the connection must end.
    pub fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Item>, FrameError> {
        loop {
            let Some(&flags) = src.first() else {
                return Ok(None);
            };
            if flags & RESERVED != 0 {
                return Err(FrameError::ReservedFlags(flags));
            }
            let command = flags & COMMAND != 0;
            if command && self.in_message() {
                return Err(FrameError::CommandInMessage);
            }
            let header = if flags & LONG != 0 { 9 } else { 2 };
            let Some(size) = src.get(1..header) else {
                return Ok(None);
            };
            let declared = size.iter().fold(0u64, |n, b| (n << 8) | u64::from(*b));
            let limit = if command {
                self.limits.max_command_bytes
            } else {
                if self.frames.len() >= self.limits.max_frames {
                    return Err(FrameError::TooManyFrames(self.limits.max_frames));
                }
                self.limits
                    .max_message_bytes
                    .saturating_sub(self.message_bytes)
            };
            let size = match usize::try_from(declared) {
                Ok(size) if size <= limit => size,
                _ => return Err(FrameError::TooLarge { declared, limit }),
            };
            if src.len() < header + size {
                return Ok(None);
            }
            src.advance(header);
            let body = src.split_to(size).freeze();
            if command {
                return Ok(Some(Item::Command(body)));
            }
            self.message_bytes += size;
            self.frames.push(body);
            if flags & MORE == 0 {
                self.message_bytes = 0;
                return Ok(Some(Item::Message(std::mem::take(&mut self.frames))));
            }
        }
    }
}

/// Appends one frame.
pub fn encode_frame(flags: u8, body: &[u8], out: &mut BytesMut) {
    out.reserve(body.len() + 9);
    match u8::try_from(body.len()) {
        Ok(size) => {
            out.put_u8(flags & !LONG);
            out.put_u8(size);
        }
        Err(_) => {
            out.put_u8(flags | LONG);
            out.put_u64(body.len() as u64);
        }
    }
    out.put_slice(body);
}

/// Appends a message of `frames` (at least one: an empty list is sent as one empty frame).
pub fn encode_message<B: AsRef<[u8]>>(frames: &[B], out: &mut BytesMut) {
    if frames.is_empty() {
        encode_frame(0, &[], out);
    }
    for (i, frame) in frames.iter().enumerate() {
        let more = if i + 1 < frames.len() { MORE } else { 0 };
        encode_frame(more, frame.as_ref(), out);
    }
}

/// Appends a command `name` (at most 255 bytes) with `data`.
pub fn encode_command(name: &str, data: &[u8], out: &mut BytesMut) {
    let name = &name.as_bytes()[..name.len().min(255)];
    let mut body = Vec::with_capacity(1 + name.len() + data.len());
    body.push(name.len() as u8);
    body.extend_from_slice(name);
    body.extend_from_slice(data);
    encode_frame(COMMAND, &body, out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn small() -> Limits {
        Limits {
            max_message_bytes: 1000,
            max_frames: 4,
            max_command_bytes: 100,
            ..Limits::default()
        }
    }

    #[test]
    fn the_75_byte_attack_is_refused_at_its_header() {
        let mut wire = BytesMut::from(&[0x02u8, 0, 0, 1, 0, 0, 0, 0, 0][..]);
        wire.extend_from_slice(&[b'x'; 66]);
        let error = Decoder::new(Limits::default())
            .decode(&mut wire)
            .unwrap_err();
        assert_eq!(
            error,
            FrameError::TooLarge {
                declared: 1 << 40,
                limit: Limits::default().max_message_bytes
            }
        );
        assert!(error.is_oversized());
    }

    #[test]
    fn the_limit_counts_the_whole_message() {
        let mut decoder = Decoder::new(small());
        let mut wire = BytesMut::new();
        encode_frame(MORE, &[1; 600], &mut wire);
        encode_frame(0, &[2; 401], &mut wire);
        assert_eq!(
            decoder.decode(&mut wire),
            Err(FrameError::TooLarge {
                declared: 401,
                limit: 400
            })
        );
        let mut decoder = Decoder::new(small());
        let mut wire = BytesMut::new();
        encode_message(&[&[1u8; 600][..], &[2; 400][..]], &mut wire);
        assert!(matches!(decoder.decode(&mut wire), Ok(Some(Item::Message(f))) if f.len() == 2));
    }

    #[test]
    fn frame_count_commands_and_reserved_bits_are_checked() {
        let mut wire = BytesMut::new();
        encode_message(&[[0u8; 0]; 5], &mut wire);
        assert_eq!(
            Decoder::new(small()).decode(&mut wire),
            Err(FrameError::TooManyFrames(4))
        );
        let mut wire = BytesMut::new();
        encode_frame(MORE, b"a", &mut wire);
        encode_command("PING", b"", &mut wire);
        assert_eq!(
            Decoder::new(small()).decode(&mut wire),
            Err(FrameError::CommandInMessage)
        );
        let mut wire = BytesMut::new();
        encode_command("READY", &[0; 200], &mut wire);
        assert!(
            Decoder::new(small())
                .decode(&mut wire)
                .unwrap_err()
                .is_oversized()
        );
        let mut wire = BytesMut::from(&[0x08u8, 0][..]);
        assert_eq!(
            Decoder::new(small()).decode(&mut wire),
            Err(FrameError::ReservedFlags(8))
        );
    }

    #[test]
    fn partial_input_waits_and_long_sizes_may_be_small() {
        let mut decoder = Decoder::new(small());
        let mut wire = BytesMut::from(&[MORE | LONG, 0, 0, 0, 0, 0, 0, 0, 3, b'a'][..]);
        assert_eq!(decoder.decode(&mut wire), Ok(None));
        wire.extend_from_slice(b"bc");
        assert_eq!(decoder.decode(&mut wire), Ok(None));
        assert!(decoder.in_message());
        assert_eq!(decoder.held_bytes(), 3);
        wire.extend_from_slice(&[0, 0]);
        assert_eq!(
            decoder.decode(&mut wire),
            Ok(Some(Item::Message(vec![
                Bytes::from_static(b"abc"),
                Bytes::new()
            ])))
        );
        assert!(wire.is_empty() && !decoder.in_message());
    }

    /// Decodes all of `wire`, fed in pieces of `step` bytes; checks the bounds on the way.
    fn decode_all(wire: &[u8], step: usize, limits: Limits) -> (Vec<Item>, Option<FrameError>) {
        let mut decoder = Decoder::new(limits);
        let mut buf = BytesMut::new();
        let mut items = Vec::new();
        for piece in wire.chunks(step.max(1)) {
            buf.extend_from_slice(piece);
            loop {
                match decoder.decode(&mut buf) {
                    Ok(Some(item)) => {
                        match &item {
                            Item::Message(frames) => {
                                assert!(frames.len() <= limits.max_frames);
                                let total: usize = frames.iter().map(Bytes::len).sum();
                                assert!(total <= limits.max_message_bytes);
                            }
                            Item::Command(body) => assert!(body.len() <= limits.max_command_bytes),
                        }
                        items.push(item);
                    }
                    Ok(None) => break,
                    Err(error) => return (items, Some(error)),
                }
                assert!(decoder.held_bytes() <= limits.max_message_bytes);
            }
            // What waits in the buffer is at most one frame under way and the last piece.
            assert!(buf.len() <= limits.max_message_bytes + 9 + step.max(1));
        }
        (items, None)
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic_nor_exceed_the_limits(
            wire in proptest::collection::vec(any::<u8>(), 0..2048),
            step in 1usize..64,
        ) {
            decode_all(&wire, step, small());
        }

        #[test]
        fn encoded_messages_and_commands_round_trip(
            messages in proptest::collection::vec(
                proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..4),
                0..6,
            ),
            step in 1usize..512,
        ) {
            let mut wire = BytesMut::new();
            let mut expected = Vec::new();
            for (i, frames) in messages.iter().enumerate() {
                encode_message(frames, &mut wire);
                expected.push(Item::Message(frames.iter().map(|f| Bytes::copy_from_slice(f)).collect()));
                if i % 2 == 0 {
                    encode_command("PING", &frames[0][..frames[0].len().min(50)], &mut wire);
                    let mut body = vec![4u8];
                    body.extend_from_slice(b"PING");
                    body.extend_from_slice(&frames[0][..frames[0].len().min(50)]);
                    expected.push(Item::Command(Bytes::from(body)));
                }
            }
            let limits = Limits { max_message_bytes: 1000, max_frames: 4, ..Limits::default() };
            let (items, error) = decode_all(&wire, step, limits);
            prop_assert_eq!(error, None);
            prop_assert_eq!(items, expected);
        }
    }
}
