//! Asking a publisher's replay socket for the batches it still buffers.
//!
//! vLLM's replay socket is a ROUTER: a client sends the first sequence it wants (8 bytes,
//! big-endian) after an empty delimiter frame, and gets `[empty, seq, payload]` for every
//! buffered batch from there, then `[empty, -1, empty]`. A DEALER (not REQ, which would take
//! only the first reply) sends the delimiter itself and reads every reply, over Shepherd's
//! bounded ZMTP ([`crate::zmtp`]).
//!
//! The answer is never held whole: each batch is handed to the caller as it arrives, and one
//! answer may carry at most `maxReplayBytes` and `maxReplayBatches` (each message at most
//! `maxMessageBytes`); over that the replay is abandoned and the connection dropped.

use std::time::Duration;

use bytes::Bytes;
use shepherd_scheduler_core::kv_events::wire::{REPLAY_END, decode_sequence, encode_sequence};
use shepherd_scorers::producers::KvEventLimits;
use tokio::net::TcpStream;

use crate::zmtp::{self, Connection, SocketType, ZmtpError};

/// How long a replay may take in all (connecting, and waiting for the end marker).
pub(crate) const REPLAY_TIMEOUT: Duration = Duration::from_secs(3);

/// Why a replay gave nothing usable.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReplayError {
    /// Connecting, sending or receiving failed.
    #[error("replay socket {address}: {source}")]
    Socket {
        address: String,
        #[source]
        source: ZmtpError,
    },
    /// No end marker within [`REPLAY_TIMEOUT`].
    #[error("replay socket {0}: no answer within {REPLAY_TIMEOUT:?}")]
    Timeout(String),
    /// A reply that is not `[empty, seq, payload]`.
    #[error("replay socket {0}: malformed reply")]
    Malformed(String),
    /// The answer carried more than `maxReplayBytes` or `maxReplayBatches`.
    #[error(
        "replay socket {address}: the answer passed {batches} batches and {bytes} bytes, over the limits (maxReplayBatches, maxReplayBytes); abandoned"
    )]
    Abandoned {
        address: String,
        batches: u64,
        bytes: u64,
    },
}

impl ReplayError {
    /// Whether the replay socket declared a message over `maxMessageBytes`.
    pub(crate) fn is_oversized(&self) -> bool {
        matches!(self, ReplayError::Socket { source, .. } if source.is_oversized())
    }
}

/// A lazily connected DEALER to one replay socket.
#[derive(Debug)]
pub(crate) struct ReplayClient {
    address: String,
    limits: KvEventLimits,
    connection: Option<Connection<TcpStream>>,
}

impl ReplayClient {
    pub(crate) fn new(address: String, limits: KvEventLimits) -> Self {
        ReplayClient {
            address,
            limits,
            connection: None,
        }
    }

    /// Drops the connection: the next fetch connects again (after the publisher's own
    /// connection broke, its replay socket's likely did too).
    pub(crate) fn disconnect(&mut self) {
        self.connection = None;
    }

    /// Every buffered batch from `start` on, handed to `batch` in order as it arrives;
    /// returns how many there were. On any failure the connection is dropped (a later call
    /// connects again), so a late reply to this request cannot be taken for the answer to
    /// the next one; the batches handed over before the failure were part of an answer that
    /// did not end.
    pub(crate) async fn fetch(
        &mut self,
        start: u64,
        batch: impl FnMut(u64, Bytes),
    ) -> Result<u64, ReplayError> {
        let result = tokio::time::timeout(REPLAY_TIMEOUT, self.exchange(start, batch)).await;
        match result {
            Ok(Ok(count)) => Ok(count),
            Ok(Err(error)) => {
                self.connection = None;
                Err(error)
            }
            Err(_) => {
                self.connection = None;
                Err(ReplayError::Timeout(self.address.clone()))
            }
        }
    }

    async fn exchange(
        &mut self,
        start: u64,
        mut batch: impl FnMut(u64, Bytes),
    ) -> Result<u64, ReplayError> {
        let address = self.address.clone();
        let socket_error = |source| ReplayError::Socket {
            address: address.clone(),
            source,
        };
        if self.connection.is_none() {
            let connection = zmtp::endpoint::connect(
                &self.address,
                SocketType::Dealer,
                super::zmtp_limits(&self.limits),
            )
            .await
            .map_err(socket_error)?;
            self.connection = Some(connection);
        }
        let Some(connection) = self.connection.as_mut() else {
            return Err(ReplayError::Malformed(address));
        };
        let start = i64::try_from(start).unwrap_or(i64::MAX);
        connection
            .send(&[&[][..], &encode_sequence(start)[..]])
            .await
            .map_err(socket_error)?;
        let (mut batches, mut bytes) = (0u64, 0u64);
        loop {
            let frames = connection.recv().await.map_err(socket_error)?;
            // [empty, seq, payload] (the delimiter the ROUTER sends back), or with the topic
            // before the sequence as newer vLLM sends it ([empty, topic, seq, payload]).
            let frames = match frames.split_first() {
                Some((first, rest)) if first.is_empty() => rest,
                _ => frames.as_slice(),
            };
            let (seq, payload) = match frames {
                [seq, payload] | [_, seq, payload] => (seq, payload),
                _ => return Err(ReplayError::Malformed(address)),
            };
            let seq = decode_sequence(seq).map_err(|_| ReplayError::Malformed(address.clone()))?;
            if seq == REPLAY_END {
                return Ok(batches);
            }
            let seq = u64::try_from(seq).map_err(|_| ReplayError::Malformed(address.clone()))?;
            batches += 1;
            bytes = bytes.saturating_add(payload.len() as u64);
            if batches > self.limits.max_replay_batches || bytes > self.limits.max_replay_bytes {
                return Err(ReplayError::Abandoned {
                    address,
                    batches,
                    bytes,
                });
            }
            batch(seq, payload.clone());
        }
    }
}
