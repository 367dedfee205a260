//! Commands (RFC 23 "Commands", RFC 37 for the 3.1 ones): a command frame's body is the
//! name's length (one byte), the name, and the command's data.
//!
//! - `READY` (NULL mechanism): metadata, properties of a one-byte name length, the name, a
//!   four-byte big-endian value length and the value; `Socket-Type` is required.
//! - `ERROR`: a one-byte reason length and the reason; the peer closes after it.
//! - `PING` (3.1): a two-byte TTL and a context, answered by `PONG` with the same context.
//! - `SUBSCRIBE` / `CANCEL` (3.1): a topic. Anything else is read and ignored.

use bytes::{Buf, Bytes, BytesMut};

use super::frame::encode_command;
use super::socket_type::SocketType;

/// A command body that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// The body ends inside the name or a property.
    #[error("truncated {0} command")]
    Truncated(&'static str),
    /// READY without a known `Socket-Type`.
    #[error("READY names no known Socket-Type")]
    SocketType,
}

/// A parsed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// READY with its metadata.
    Ready(Metadata),
    /// ERROR with its reason.
    Error(String),
    /// PING: the context to echo in PONG (its TTL is not used).
    Ping(Bytes),
    /// PONG.
    Pong,
    /// SUBSCRIBE with a topic.
    Subscribe(Bytes),
    /// CANCEL with a topic.
    Cancel(Bytes),
    /// Any other command, by name.
    Other(Bytes),
}

/// A READY command's properties, in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Metadata(pub Vec<(Bytes, Bytes)>);

impl Metadata {
    /// The value of property `name` (names compare case-insensitively, as libzmq does).
    pub fn get(&self, name: &str) -> Option<&Bytes> {
        self.0
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v)
    }

    /// The peer's socket type.
    pub fn socket_type(&self) -> Option<SocketType> {
        self.get("Socket-Type").and_then(|v| SocketType::parse(v))
    }

    fn parse(mut data: Bytes) -> Result<Metadata, CommandError> {
        let mut properties = Vec::new();
        while data.has_remaining() {
            let name_len = usize::from(data.get_u8());
            if data.remaining() < name_len + 4 {
                return Err(CommandError::Truncated("READY"));
            }
            let name = data.split_to(name_len);
            let value_len = usize::try_from(data.get_u32()).unwrap_or(usize::MAX);
            if data.remaining() < value_len {
                return Err(CommandError::Truncated("READY"));
            }
            properties.push((name, data.split_to(value_len)));
        }
        Ok(Metadata(properties))
    }
}

impl Command {
    /// Parses a command frame's body.
    pub fn parse(mut body: Bytes) -> Result<Command, CommandError> {
        if !body.has_remaining() {
            return Err(CommandError::Truncated("a"));
        }
        let name_len = usize::from(body.get_u8());
        if body.remaining() < name_len {
            return Err(CommandError::Truncated("a"));
        }
        let name = body.split_to(name_len);
        Ok(match &name[..] {
            b"READY" => Command::Ready(Metadata::parse(body)?),
            b"ERROR" => {
                let len = body.first().map_or(0, |n| usize::from(*n));
                let reason = body.get(1..(1 + len).min(body.len())).unwrap_or_default();
                Command::Error(String::from_utf8_lossy(reason).into_owned())
            }
            b"PING" => {
                if body.remaining() < 2 {
                    return Err(CommandError::Truncated("PING"));
                }
                body.advance(2);
                Command::Ping(body)
            }
            b"PONG" => Command::Pong,
            b"SUBSCRIBE" => Command::Subscribe(body),
            b"CANCEL" => Command::Cancel(body),
            _ => Command::Other(name),
        })
    }
}

/// Appends a READY command for a socket of type `socket_type` (NULL mechanism).
pub fn encode_ready(socket_type: SocketType, out: &mut BytesMut) {
    let value = socket_type.as_str().as_bytes();
    let mut data = Vec::with_capacity(16 + value.len());
    data.push(11);
    data.extend_from_slice(b"Socket-Type");
    data.extend_from_slice(&(value.len() as u32).to_be_bytes());
    data.extend_from_slice(value);
    encode_command("READY", &data, out);
}

/// Appends a PONG answering a PING with `context`.
pub fn encode_pong(context: &[u8], out: &mut BytesMut) {
    encode_command("PONG", context, out);
}

/// Appends an ERROR with `reason` (at most 255 bytes of it).
pub fn encode_error(reason: &str, out: &mut BytesMut) {
    let reason = &reason.as_bytes()[..reason.len().min(255)];
    let mut data = Vec::with_capacity(1 + reason.len());
    data.push(reason.len() as u8);
    data.extend_from_slice(reason);
    encode_command("ERROR", &data, out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zmtp::Limits;
    use crate::zmtp::frame::{Decoder, Item};

    fn decode_one(wire: &mut BytesMut) -> Command {
        match Decoder::new(Limits::default()).decode(wire) {
            Ok(Some(Item::Command(body))) => Command::parse(body).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn ready_round_trips_with_its_socket_type() {
        let mut wire = BytesMut::new();
        encode_ready(SocketType::Dealer, &mut wire);
        let Command::Ready(metadata) = decode_one(&mut wire) else {
            panic!()
        };
        assert_eq!(metadata.socket_type(), Some(SocketType::Dealer));
        assert_eq!(
            metadata.get("socket-type").map(|v| &v[..]),
            Some(&b"DEALER"[..])
        );
    }

    #[test]
    fn ready_with_identity_as_libzmq_sends_it() {
        // libzmq's DEALER: Socket-Type, then Identity (empty).
        let mut data = vec![11u8];
        data.extend_from_slice(b"Socket-Type\0\0\0\x06DEALER");
        data.push(8);
        data.extend_from_slice(b"Identity\0\0\0\0");
        let mut wire = BytesMut::new();
        encode_command("READY", &data, &mut wire);
        let Command::Ready(metadata) = decode_one(&mut wire) else {
            panic!()
        };
        assert_eq!(metadata.0.len(), 2);
        assert_eq!(metadata.get("Identity").map(Bytes::len), Some(0));
    }

    #[test]
    fn truncated_and_other_commands() {
        assert!(Command::parse(Bytes::from_static(b"\x05READY\x0bSocket")).is_err());
        assert!(Command::parse(Bytes::from_static(b"\x05REA")).is_err());
        assert!(Command::parse(Bytes::new()).is_err());
        assert_eq!(
            Command::parse(Bytes::from_static(b"\x04PING\x00\x0actx")),
            Ok(Command::Ping(Bytes::from_static(b"ctx")))
        );
        assert_eq!(
            Command::parse(Bytes::from_static(b"\x05ERROR\x05nope!")),
            Ok(Command::Error("nope!".into()))
        );
        assert_eq!(
            Command::parse(Bytes::from_static(b"\x05ERROR\x09no")),
            Ok(Command::Error("no".into()))
        );
        assert_eq!(
            Command::parse(Bytes::from_static(b"\x04JOINx")),
            Ok(Command::Other(Bytes::from_static(b"JOIN")))
        );
        let mut wire = BytesMut::new();
        encode_error("bad", &mut wire);
        assert_eq!(decode_one(&mut wire), Command::Error("bad".into()));
        let mut wire = BytesMut::new();
        encode_pong(b"c", &mut wire);
        assert_eq!(decode_one(&mut wire), Command::Pong);
    }
}
