//! What one connection may make Shepherd hold: the largest message, the most frames in one,
//! the largest command, and how long the handshake may take.

use std::time::Duration;

/// The default largest message (all its frames together): 4 MiB. A vLLM KV-event batch is one
/// engine step's events; even a 64k-token prefill step (4,096 blocks of 16 token ids) encodes
/// to about half a MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 4 << 20;

/// The default most frames in one message (vLLM sends 3, or 4 on a replay socket).
pub const DEFAULT_MAX_FRAMES: usize = 64;

/// The default largest command frame: READY's metadata is a few dozen bytes.
pub const DEFAULT_MAX_COMMAND_BYTES: usize = 64 << 10;

/// The default time the greeting and READY exchange may take.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// The bounds of one connection. A peer that declares more is refused before anything is
/// allocated for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest message: the sum of its frames' sizes, in bytes.
    pub max_message_bytes: usize,
    /// The most frames in one message.
    pub max_frames: usize,
    /// The largest command frame body, in bytes.
    pub max_command_bytes: usize,
    /// How long the handshake (greetings, READY) may take.
    pub handshake_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_frames: DEFAULT_MAX_FRAMES,
            max_command_bytes: DEFAULT_MAX_COMMAND_BYTES,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        }
    }
}
