//! One ZMTP connection over any byte stream: the handshake, then messages read and written.
//!
//! [`Connection::handshake`] sends the greeting and READY at once, reads the peer's greeting
//! (64 bytes) and its READY (through the bounded [`Decoder`]), and checks the two socket
//! types can talk, all within [`Limits::handshake_timeout`]. Afterwards [`Connection::recv`]
//! returns whole messages; on the way it answers PING with PONG, ends on ERROR, and skips
//! other commands. What one connection holds is bounded: the read buffer keeps at most one
//! frame under way (at most [`Limits::max_message_bytes`]) plus one read, and the frames
//! of the message under way.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::command::{Command, CommandError, encode_error, encode_pong, encode_ready};
use super::error::ZmtpError;
use super::frame::{Decoder, Item, encode_message};
use super::greeting::{GREETING_LEN, Greeting};
use super::limits::Limits;
use super::socket_type::SocketType;

/// How much one read asks for.
const READ_CHUNK: usize = 16 << 10;
/// The most of a PING's context echoed in PONG (RFC 37: up to 16 bytes).
const MAX_PING_CONTEXT: usize = 16;

/// A connection whose handshake completed.
#[derive(Debug)]
pub struct Connection<S> {
    io: S,
    decoder: Decoder,
    buf: BytesMut,
    out: BytesMut,
    peer_greeting: Greeting,
    peer_type: SocketType,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Connection<S> {
    /// Completes the handshake on `io` as a `socket_type` socket, within
    /// [`Limits::handshake_timeout`].
    pub async fn handshake(
        io: S,
        socket_type: SocketType,
        limits: Limits,
    ) -> Result<Connection<S>, ZmtpError> {
        let timeout = limits.handshake_timeout;
        tokio::time::timeout(timeout, Self::exchange(io, socket_type, limits))
            .await
            .map_err(|_| ZmtpError::HandshakeTimeout(timeout))?
    }

    async fn exchange(
        mut io: S,
        socket_type: SocketType,
        limits: Limits,
    ) -> Result<Connection<S>, ZmtpError> {
        let mut hello = BytesMut::with_capacity(GREETING_LEN + 32);
        hello.extend_from_slice(&Greeting::null().encode());
        encode_ready(socket_type, &mut hello);
        io.write_all(&hello).await?;
        io.flush().await?;
        let mut greeting = [0u8; GREETING_LEN];
        io.read_exact(&mut greeting).await.map_err(eof_is_closed)?;
        let peer_greeting = Greeting::parse(&greeting)?;
        let mut connection = Connection {
            io,
            decoder: Decoder::new(limits),
            buf: BytesMut::new(),
            out: BytesMut::new(),
            peer_greeting,
            peer_type: socket_type,
        };
        let metadata = match connection.next_item().await? {
            Item::Command(body) => match Command::parse(body)? {
                Command::Ready(metadata) => metadata,
                Command::Error(reason) => return Err(ZmtpError::Refused(reason)),
                _ => return Err(ZmtpError::NotReady),
            },
            Item::Message(_) => return Err(ZmtpError::NotReady),
        };
        let peer = metadata.socket_type().ok_or(CommandError::SocketType)?;
        if !socket_type.compatible(peer) {
            // Tell the peer why before closing, as the RFC asks; it may be gone already.
            let mut out = BytesMut::new();
            encode_error("incompatible socket type", &mut out);
            let _ = connection.io.write_all(&out).await;
            return Err(ZmtpError::Incompatible {
                ours: socket_type,
                peer,
            });
        }
        connection.peer_type = peer;
        Ok(connection)
    }

    /// The peer's socket type.
    pub fn peer_socket_type(&self) -> SocketType {
        self.peer_type
    }

    /// The peer's protocol version (major, minor).
    pub fn peer_version(&self) -> (u8, u8) {
        (self.peer_greeting.major, self.peer_greeting.minor)
    }

    /// Bytes held for data not yet returned (the read buffer and the message under way).
    pub fn held_bytes(&self) -> usize {
        self.buf.len() + self.decoder.held_bytes()
    }

    /// The next message. Cancel-safe: a message partly read stays for the next call.
    pub async fn recv(&mut self) -> Result<Vec<Bytes>, ZmtpError> {
        loop {
            match self.next_item().await? {
                Item::Message(frames) => return Ok(frames),
                Item::Command(body) => match Command::parse(body)? {
                    Command::Ping(context) => {
                        let context = &context[..context.len().min(MAX_PING_CONTEXT)];
                        self.out.clear();
                        encode_pong(context, &mut self.out);
                        self.io.write_all(&self.out).await?;
                    }
                    Command::Error(reason) => return Err(ZmtpError::Refused(reason)),
                    _ => {}
                },
            }
        }
    }

    /// Sends a message of `frames`.
    pub async fn send<B: AsRef<[u8]>>(&mut self, frames: &[B]) -> Result<(), ZmtpError> {
        self.out.clear();
        encode_message(frames, &mut self.out);
        self.io.write_all(&self.out).await?;
        self.io.flush().await?;
        Ok(())
    }

    /// Subscribes to messages whose first frame starts with `prefix` (a SUB's subscription:
    /// the message `0x01 ++ prefix`, which every ZMTP 3.x publisher reads).
    pub async fn subscribe(&mut self, prefix: &[u8]) -> Result<(), ZmtpError> {
        let mut message = Vec::with_capacity(1 + prefix.len());
        message.push(1);
        message.extend_from_slice(prefix);
        self.send(&[message]).await
    }

    /// The next message or command, reading as needed.
    async fn next_item(&mut self) -> Result<Item, ZmtpError> {
        loop {
            if let Some(item) = self.decoder.decode(&mut self.buf)? {
                return Ok(item);
            }
            if self.buf.capacity() - self.buf.len() < READ_CHUNK / 4 {
                self.buf.reserve(READ_CHUNK);
            }
            let read = (&mut self.io)
                .take(READ_CHUNK as u64)
                .read_buf(&mut self.buf)
                .await?;
            if read == 0 {
                return Err(ZmtpError::Closed);
            }
        }
    }
}

fn eof_is_closed(error: std::io::Error) -> ZmtpError {
    if error.kind() == std::io::ErrorKind::UnexpectedEof {
        ZmtpError::Closed
    } else {
        ZmtpError::Io(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zmtp::frame::encode_frame;
    use std::time::Duration;

    async fn pair(
        a: SocketType,
        b: SocketType,
    ) -> (
        Result<Connection<tokio::io::DuplexStream>, ZmtpError>,
        Result<Connection<tokio::io::DuplexStream>, ZmtpError>,
    ) {
        let (x, y) = tokio::io::duplex(1 << 16);
        tokio::join!(
            Connection::handshake(x, a, Limits::default()),
            Connection::handshake(y, b, Limits::default())
        )
    }

    #[tokio::test]
    async fn sub_and_pub_subscribe_and_exchange() {
        let (sub, publisher) = pair(SocketType::Sub, SocketType::Pub).await;
        let (mut sub, mut publisher) = (sub.unwrap(), publisher.unwrap());
        assert_eq!(sub.peer_socket_type(), SocketType::Pub);
        assert_eq!(sub.peer_version(), (3, 0));
        sub.subscribe(b"kv@").await.unwrap();
        assert_eq!(
            publisher.recv().await.unwrap(),
            vec![Bytes::from_static(b"\x01kv@")]
        );
        publisher
            .send(&[&b"kv@a"[..], b"seq", b"payload"])
            .await
            .unwrap();
        assert_eq!(sub.recv().await.unwrap().len(), 3);
        drop(publisher);
        assert!(matches!(sub.recv().await, Err(ZmtpError::Closed)));
    }

    #[tokio::test]
    async fn incompatible_types_are_refused() {
        let (sub, router) = pair(SocketType::Sub, SocketType::Router).await;
        assert!(matches!(sub, Err(ZmtpError::Incompatible { .. })));
        assert!(router.is_err());
    }

    #[tokio::test]
    async fn a_silent_peer_times_out_and_an_oversized_one_is_refused() {
        let (x, _y) = tokio::io::duplex(1 << 16);
        let limits = Limits {
            handshake_timeout: Duration::from_millis(50),
            ..Limits::default()
        };
        let result = Connection::handshake(x, SocketType::Sub, limits).await;
        assert!(matches!(result, Err(ZmtpError::HandshakeTimeout(_))));

        let (x, mut y) = tokio::io::duplex(1 << 16);
        let mut peer = BytesMut::new();
        peer.extend_from_slice(&Greeting::null().encode());
        encode_ready(SocketType::Pub, &mut peer);
        peer.extend_from_slice(&[0x02, 0, 0, 1, 0, 0, 0, 0, 0]);
        y.write_all(&peer).await.unwrap();
        let mut sub = Connection::handshake(x, SocketType::Sub, Limits::default())
            .await
            .unwrap();
        let error = sub.recv().await.unwrap_err();
        assert!(error.is_oversized() && error.is_violation(), "{error}");
        assert!(sub.held_bytes() < 64);
    }

    #[tokio::test]
    async fn ping_is_answered_and_error_ends() {
        let (sub, publisher) = pair(SocketType::Sub, SocketType::Pub).await;
        let (mut sub, publisher) = (sub.unwrap(), publisher.unwrap());
        let mut io = publisher.io;
        let mut wire = BytesMut::new();
        crate::zmtp::frame::encode_command("PING", b"\x00\x10ctx", &mut wire);
        encode_frame(0, b"m", &mut wire);
        encode_error("bye", &mut wire);
        io.write_all(&wire).await.unwrap();
        assert_eq!(sub.recv().await.unwrap(), vec![Bytes::from_static(b"m")]);
        assert!(matches!(sub.recv().await, Err(ZmtpError::Refused(r)) if r == "bye"));
        let mut pong = [0u8; 10];
        io.read_exact(&mut pong).await.unwrap();
        assert_eq!(&pong, b"\x04\x08\x04PONGctx");
    }
}
