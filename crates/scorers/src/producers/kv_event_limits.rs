//! The bounds of what a ZeroMQ peer (a KV-event publisher, a peer of the bound `zmqEndpoint`,
//! a replay socket) can make Shepherd hold: Shepherd's extensions of `kvEventsConfig`
//! (`maxMessageBytes`, `maxConnections`, `handshakeTimeout`, `maxReplayBytes`,
//! `maxReplayBatches`), checked into [`KvEventLimits`].
//!
//! ```
//! use shepherd_scorers::producers::precise_prefix::{KvEventLimits, KvEventsConfig};
//!
//! let config: KvEventsConfig = serde_json::from_str(r#"{"maxMessageBytes": 1048576}"#).unwrap();
//! let limits = config.limits().unwrap();
//! assert_eq!(limits.max_message_bytes, 1 << 20);
//! assert_eq!(limits.max_connections, KvEventLimits::default().max_connections);
//! ```

use std::time::Duration;

use shepherd_scheduler_core::config::PluginError;
use shepherd_scheduler_core::flow::parse_go_duration;

use super::precise_prefix::KvEventsConfig;

/// The bounds of what a ZeroMQ peer can make Shepherd hold (Shepherd's `kvEventsConfig`
/// extensions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KvEventLimits {
    /// The largest message (all its frames), in bytes.
    pub max_message_bytes: usize,
    /// The most peers connected at once to a bound socket.
    pub max_connections: usize,
    /// How long a peer may take to complete the handshake.
    pub handshake_timeout: Duration,
    /// The most bytes one replay answer may carry.
    pub max_replay_bytes: u64,
    /// The most batches one replay answer may carry.
    pub max_replay_batches: u64,
}

impl KvEventLimits {
    /// The largest `maxMessageBytes` accepted (1 GiB).
    pub const MAX_MESSAGE_BYTES: u64 = 1 << 30;
}

impl Default for KvEventLimits {
    fn default() -> Self {
        KvEventLimits {
            max_message_bytes: 4 << 20,
            max_connections: 64,
            handshake_timeout: Duration::from_secs(5),
            max_replay_bytes: 64 << 20,
            max_replay_batches: 100_000,
        }
    }
}

impl KvEventsConfig {
    /// The peers' bounds, or why a setting is refused.
    pub fn limits(&self) -> Result<KvEventLimits, PluginError> {
        let positive = |parameter: &str, value: u64, max: u64| {
            if value == 0 || value > max {
                Err(PluginError::invalid(
                    parameter,
                    format!("{value} is out of range: from 1 to {max}"),
                ))
            } else {
                Ok(value)
            }
        };
        let to_usize = |value: u64| usize::try_from(value).unwrap_or(usize::MAX);
        let handshake_timeout = match self.handshake_timeout.as_deref().filter(|t| !t.is_empty()) {
            None => KvEventLimits::default().handshake_timeout,
            Some(text) => match parse_go_duration(text) {
                Some(timeout) if !timeout.is_zero() => timeout,
                _ => {
                    return Err(PluginError::invalid(
                        "kvEventsConfig.handshakeTimeout",
                        format!("`{text}` is not a positive Go duration (e.g. 5s)"),
                    ));
                }
            },
        };
        Ok(KvEventLimits {
            max_message_bytes: to_usize(positive(
                "kvEventsConfig.maxMessageBytes",
                self.max_message_bytes,
                KvEventLimits::MAX_MESSAGE_BYTES,
            )?),
            max_connections: to_usize(positive(
                "kvEventsConfig.maxConnections",
                self.max_connections,
                65_536,
            )?),
            handshake_timeout,
            max_replay_bytes: positive(
                "kvEventsConfig.maxReplayBytes",
                self.max_replay_bytes,
                u64::MAX,
            )?,
            max_replay_batches: positive(
                "kvEventsConfig.maxReplayBatches",
                self.max_replay_batches,
                u64::MAX,
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(json: &str) -> Result<KvEventLimits, PluginError> {
        let config: KvEventsConfig = serde_json::from_str(json).unwrap();
        config.limits()
    }

    #[test]
    fn peer_limits_have_safe_defaults_and_refuse_nonsense() {
        assert_eq!(limits("{}").unwrap(), KvEventLimits::default());
        let set = limits(
            r#"{"maxMessageBytes": 1048576, "maxConnections": 8, "handshakeTimeout": "500ms",
                "maxReplayBytes": 1000, "maxReplayBatches": 10}"#,
        )
        .unwrap();
        assert_eq!(set.max_message_bytes, 1 << 20);
        assert_eq!(set.max_connections, 8);
        assert_eq!(set.handshake_timeout, Duration::from_millis(500));
        assert_eq!((set.max_replay_bytes, set.max_replay_batches), (1000, 10));
        for bad in [
            r#"{"maxMessageBytes": 0}"#,
            r#"{"maxMessageBytes": 2147483648}"#,
            r#"{"maxConnections": 0}"#,
            r#"{"handshakeTimeout": "0s"}"#,
            r#"{"handshakeTimeout": "soon"}"#,
            r#"{"maxReplayBatches": 0}"#,
        ] {
            assert!(limits(bad).is_err(), "{bad}");
        }
    }
}
