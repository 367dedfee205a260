//! Shepherd's own ZMTP 3.x (the ZeroMQ wire protocol: RFC 23, and RFC 37 for 3.1), the client
//! side of what the KV-event subscriptions need: SUB sockets reading a publisher (connecting
//! to it, or accepting its connection on a bound port) and a DEALER asking a replay ROUTER.
//!
//! Why not a ZeroMQ library: every byte here comes from a peer that may be hostile (anyone
//! who can reach a bound `zmqEndpoint`), and the `zeromq` crate reserves a frame's declared
//! size before reading it (one 75-byte frame declaring 2^40 bytes aborts the process) and has
//! no maximum message size. This one never allocates for what a peer declares: a frame larger
//! than [`Limits::max_message_bytes`] is refused at its header.
//!
//! - [`greeting`]: the 64-byte greeting (signature, version 3.0, NULL mechanism);
//! - [`socket_type`]: `Socket-Type` names and which pairs may talk;
//! - [`frame`]: the bounded frame decoder and the encoder, pure (no I/O), fuzzed;
//! - [`command`]: READY and its metadata, ERROR, PING/PONG;
//! - [`connection`]: the handshake and messages over any `AsyncRead + AsyncWrite`;
//! - [`endpoint`]: `tcp://host:port` to connect to or bind;
//! - [`limits`]: the bounds of one connection.
//!
//! Subscriptions are sent as `0x01`-prefixed messages (ZMTP 3.0), which libzmq (pyzmq,
//! vLLM) and the `zeromq` crate both read; Shepherd announces 3.0, so a 3.1 peer speaks 3.0.
//!
//! ```
//! use shepherd_runtime::zmtp::{Connection, Limits, SocketType};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
//! // Two ends of one byte stream: a subscriber and a publisher.
//! let (a, b) = tokio::io::duplex(64 * 1024);
//! let (sub, publisher) = tokio::join!(
//!     Connection::handshake(a, SocketType::Sub, Limits::default()),
//!     Connection::handshake(b, SocketType::Pub, Limits::default()),
//! );
//! let (mut sub, mut publisher) = (sub?, publisher?);
//! sub.subscribe(b"kv@").await?;
//! assert_eq!(&publisher.recv().await?[0][..], b"\x01kv@");
//! publisher.send(&[&b"kv@10.0.0.1:8000@llama"[..], &0u64.to_be_bytes(), b"\x93\x00\x90\xc0"]).await?;
//! let frames = sub.recv().await?;
//! assert_eq!(frames.len(), 3);
//! # Ok::<(), shepherd_runtime::zmtp::ZmtpError>(())
//! # })?;
//! # Ok(())
//! # }
//! ```

pub mod command;
pub mod connection;
pub mod endpoint;
mod error;
pub mod frame;
pub mod greeting;
pub mod limits;
pub mod socket_type;

pub use connection::Connection;
pub use error::ZmtpError;
pub use frame::FrameError;
pub use limits::Limits;
pub use socket_type::SocketType;
