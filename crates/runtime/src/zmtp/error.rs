//! Why a connection failed or ended.

use std::time::Duration;

use super::command::CommandError;
use super::frame::FrameError;
use super::greeting::GreetingError;
use super::socket_type::SocketType;

/// Why a connection failed or ended. Every error ends the connection.
#[derive(Debug, thiserror::Error)]
pub enum ZmtpError {
    /// The socket failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The peer closed the connection.
    #[error("the peer closed the connection")]
    Closed,
    /// The greeting and READY did not arrive in time.
    #[error("no ZMTP handshake within {0:?}")]
    HandshakeTimeout(Duration),
    /// The peer's greeting is refused.
    #[error(transparent)]
    Greeting(#[from] GreetingError),
    /// The peer's frames are refused (too large, malformed).
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// A command that does not parse.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// Something else than READY during the handshake.
    #[error("expected READY during the handshake")]
    NotReady,
    /// The peer's socket type cannot talk to ours.
    #[error("a {ours} socket cannot talk to a {peer} peer")]
    Incompatible {
        /// Ours.
        ours: SocketType,
        /// The peer's.
        peer: SocketType,
    },
    /// The peer sent ERROR.
    #[error("the peer refused: {0}")]
    Refused(String),
    /// An endpoint that is not `tcp://host:port`.
    #[error("`{0}` is not a tcp://host:port endpoint")]
    Endpoint(String),
}

impl ZmtpError {
    /// Whether the peer declared a frame or message over the limits.
    pub fn is_oversized(&self) -> bool {
        matches!(self, ZmtpError::Frame(error) if error.is_oversized())
    }

    /// Whether the peer broke the protocol (as opposed to a closed or failed socket).
    pub fn is_violation(&self) -> bool {
        matches!(
            self,
            ZmtpError::Greeting(_)
                | ZmtpError::Frame(_)
                | ZmtpError::Command(_)
                | ZmtpError::NotReady
                | ZmtpError::Incompatible { .. }
        )
    }
}
