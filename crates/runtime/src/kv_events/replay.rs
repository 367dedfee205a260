//! Asking a publisher's replay socket for the batches it still buffers.
//!
//! vLLM's replay socket is a ROUTER: a client sends the first sequence it wants (8 bytes,
//! big-endian) after an empty delimiter frame, and gets `[empty, seq, payload]` for every
//! buffered batch from there, then `[empty, -1, empty]`. A DEALER socket (not REQ, which would
//! take only the first reply) sends the delimiter itself and reads every reply.

use std::time::Duration;

use bytes::Bytes;
use shepherd_scheduler_core::kv_events::wire::{REPLAY_END, decode_sequence, encode_sequence};
use zeromq::{DealerSocket, Socket, SocketRecv, SocketSend, ZmqMessage};

/// How long a replay may take in all (connecting, and waiting for the end marker).
pub(crate) const REPLAY_TIMEOUT: Duration = Duration::from_secs(3);

/// The batches a replay returned, in order.
pub(crate) type Replayed = Vec<(u64, Bytes)>;

/// Why a replay gave nothing usable.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReplayError {
    /// Connecting, sending or receiving failed.
    #[error("replay socket {address}: {source}")]
    Socket {
        address: String,
        #[source]
        source: zeromq::ZmqError,
    },
    /// No end marker within [`REPLAY_TIMEOUT`].
    #[error("replay socket {0}: no answer within {REPLAY_TIMEOUT:?}")]
    Timeout(String),
    /// A reply that is not `[empty, seq, payload]`.
    #[error("replay socket {0}: malformed reply")]
    Malformed(String),
}

/// A lazily connected DEALER to one replay socket.
pub(crate) struct ReplayClient {
    address: String,
    socket: Option<DealerSocket>,
}

impl std::fmt::Debug for ReplayClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayClient")
            .field("address", &self.address)
            .field("connected", &self.socket.is_some())
            .finish()
    }
}

impl ReplayClient {
    pub(crate) fn new(address: String) -> Self {
        ReplayClient {
            address,
            socket: None,
        }
    }

    /// Drops the connection: the next fetch connects again (after the publisher's own
    /// connection broke, its replay socket's likely did too).
    pub(crate) fn disconnect(&mut self) {
        self.socket = None;
    }

    /// Every buffered batch from `start` on. On any failure the connection is dropped (a
    /// later call connects again), so a late reply to this request cannot be taken for the
    /// answer to the next one.
    pub(crate) async fn fetch(&mut self, start: u64) -> Result<Replayed, ReplayError> {
        let result = tokio::time::timeout(REPLAY_TIMEOUT, self.exchange(start)).await;
        match result {
            Ok(Ok(batches)) => Ok(batches),
            Ok(Err(error)) => {
                self.socket = None;
                Err(error)
            }
            Err(_) => {
                self.socket = None;
                Err(ReplayError::Timeout(self.address.clone()))
            }
        }
    }

    async fn exchange(&mut self, start: u64) -> Result<Replayed, ReplayError> {
        let address = self.address.clone();
        let socket_error = |source| ReplayError::Socket {
            address: address.clone(),
            source,
        };
        if self.socket.is_none() {
            let mut socket = DealerSocket::new();
            socket.connect(&self.address).await.map_err(socket_error)?;
            self.socket = Some(socket);
        }
        let Some(socket) = self.socket.as_mut() else {
            return Err(ReplayError::Malformed(address));
        };
        let start = i64::try_from(start).unwrap_or(i64::MAX);
        let mut request = ZmqMessage::from(Bytes::new());
        request.push_back(Bytes::copy_from_slice(&encode_sequence(start)));
        socket.send(request).await.map_err(socket_error)?;
        let mut batches = Vec::new();
        loop {
            let reply = socket.recv().await.map_err(socket_error)?;
            let frames = reply.into_vec();
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
            batches.push((seq, payload.clone()));
        }
    }
}
